"""MPNet (all-mpnet-base-v2): BERT-like encoder layers whose self-attention holds q, k, v and o itself and adds a
relative-position bias shared by every layer, one column per head (:mod:`heads.embedding`).

Sites are ``encoder.layer.N.attention.attn``. Its stock forward computes the softmax inline, so the family gives
every such module :class:`heads.embedding.GatedMPNetSelfAttention`'s forward when it finds the sites (the same
outputs, through the attention function); pruning keeps each site's original head indices on the module, so it
adds only its heads' slices of the shared bias (:meth:`kept`).
"""

from __future__ import annotations

from heads.embedding import gate_attention, register
from heads.site_patterns import FAMILY_PATTERNS
from heads.surgery.families.base import Family

register()  # a saved MPNetForRetrieval names a class the loader must find


class MPNetFamily(Family):
    name = "mpnet"
    model_types = ("mpnet",)
    patterns = FAMILY_PATTERNS["mpnet"]
    qkv_names = ("q", "k", "v")
    out_name = "o"

    def sites(self, model):
        gate_attention(model)  # a stock MPNet class's attention reaches the gates only through this forward
        return super().sites(model)

    def resize(self, module, num_heads):
        module.num_attention_heads = num_heads
        module.all_head_size = num_heads * module.attention_head_size

    def kept(self, module, heads):
        module.heads_kept = list(heads)

    def copy_head(self, module, src, dst):
        # the shared bias stays whole (every layer reads it): this site's head dst reads src's column instead
        held = module.heads_kept if module.heads_kept is not None else range(module.num_attention_heads)
        columns = list(held)
        columns[dst] = columns[src]
        module.heads_kept = columns
