"""A scorer defined outside the package (HEADS_PLUGINS=my_scorer): the later a layer, the less it matters."""

from heads.scoring.registry import Scorer, register_scorer
from heads.surgery import head_layout


@register_scorer("last_first")
class LastFirst(Scorer):
    """Layer order: a head scores its site's position (the last sites' heads go first)."""

    def _score(self, model, batches, params):
        import torch

        layout = head_layout(model)
        return {name: torch.full((len(heads),), -float(i)) for i, (name, heads) in enumerate(layout.items())}
