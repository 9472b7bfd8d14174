"""A window in ``nn.Linear`` layout on part of a Conv1D-style layer (weight ``[in, out]``).

Scorers and strategies read and edit a site's projections as Linear maps
(``weight[rows]`` per head for q/k/v, ``weight[:, cols]`` for o). GPT-2 keeps
q, k and v fused in one Conv1D with transposed weights; a view gives each of
them that Linear face without copying, so writes land in the real parameter.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn


class LinearView:
    """Output units ``[block * width, (block + 1) * width)`` of ``layer``, ``width = out // blocks``.

    Everything is looked up on access, so a view follows the layer through
    pruning (its blocks shrink alike). ``weight`` is ``[out, in]`` and ``bias``
    ``[out]``: views of the parameters, not copies.
    """

    def __init__(self, layer: nn.Module, block: int = 0, blocks: int = 1):
        self.layer, self.block, self.blocks = layer, block, blocks

    def _cols(self) -> slice:
        width = self.layer.weight.shape[1] // self.blocks
        return slice(self.block * width, (self.block + 1) * width)

    @property
    def weight(self) -> torch.Tensor:
        return self.layer.weight[:, self._cols()].T

    @property
    def bias(self) -> torch.Tensor | None:
        bias = getattr(self.layer, "bias", None)
        return None if bias is None else bias[self._cols()]

    @property
    def in_features(self) -> int:
        return self.layer.weight.shape[0]

    @property
    def out_features(self) -> int:
        return self.layer.weight.shape[1] // self.blocks

    def register_forward_pre_hook(self, hook: Callable) -> torch.utils.hooks.RemovableHandle:
        """Hook the whole layer's input (only meaningful for an unfused view, such as an output projection);
        the hook sees the view as its module, so it reads a Linear-layout weight."""
        if self.blocks != 1:
            raise ValueError("a hook on one block of a fused layer would see the whole layer's input")
        return self.layer.register_forward_pre_hook(lambda _module, args: hook(self, args))
