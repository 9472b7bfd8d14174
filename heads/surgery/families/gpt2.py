"""GPT-2: causal self-attention (and, with ``add_cross_attention``, cross-attention) through fused Conv1D maps.

``c_attn`` computes q, k and v at once: its weight is ``[d, 3 * H * head_dim]`` (Conv1D stores ``[in, out]``),
the three blocks side by side along the output columns. A cross site has its own ``q_attn`` and a two-block
``c_attn`` for k and v. ``c_proj`` takes the heads back in: its weight rows are per head.
"""

from __future__ import annotations

from heads.site_patterns import FAMILY_PATTERNS
from heads.surgery.families.base import Family, HeadSlice, Projections
from heads.surgery.families.views import LinearView


class GPT2Family(Family):
    name = "gpt2"
    model_types = ("gpt2",)
    patterns = FAMILY_PATTERNS["gpt2"]
    out_name = "c_proj"

    def resize(self, module, num_heads):
        # The forward splits c_attn's output into chunks of split_size (q, k, v); views use -1 heads.
        module.num_heads = num_heads
        module.split_size = num_heads * module.head_dim

    def projections(self, model, site):
        module = model.get_submodule(site.name)
        o = LinearView(module.c_proj)
        if site.kind == "cross":
            return Projections(LinearView(module.q_attn), LinearView(module.c_attn, 0, 2),
                               LinearView(module.c_attn, 1, 2), o)
        return Projections(*(LinearView(module.c_attn, i, 3) for i in range(3)), o)

    def head_slices(self, model, site):
        # Conv1D: output units are weight dim 1 (and the bias), input units weight dim 0.
        module = model.get_submodule(site.name)
        out = HeadSlice(module.c_proj, 0, ("q",), False)
        if site.kind == "cross":
            return [HeadSlice(module.q_attn, 1, ("q",), True), HeadSlice(module.c_attn, 1, ("kv", "kv"), True), out]
        return [HeadSlice(module.c_attn, 1, ("q", "kv", "kv"), True), out]

    def headless_output(self, module, hidden_states):
        # Conv1D cannot take an empty input (it flattens with view(-1, 0)): its output of nothing is its bias.
        # The stock forward ends in resid_dropout after c_proj: keep it, so training a headless site sees the
        # same (dropped-out) bias a gated-shut one does.
        bias = module.c_proj.bias.expand(*hidden_states.shape[:-1], -1)
        return module.resid_dropout(bias)
