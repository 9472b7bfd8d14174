"""Task batches as model inputs: only what the model's forward takes by name."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from torch import nn


def forward_inputs(model: nn.Module, batch: Mapping[str, Any], labels: bool = True) -> dict[str, Any]:
    """The entries of ``batch`` that ``model.forward`` names (a bare encoder has no ``labels``).

    ``labels=False``: the forward pass alone, no loss; an encoder-decoder then
    gets the decoder inputs it would have derived from the labels (shifted
    right, as the model does itself), so it runs exactly the same network.
    """
    params = inspect.signature(model.forward).parameters
    named = {n for n, p in params.items() if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
    out = {k: v for k, v in batch.items() if k in named}
    if not labels and "labels" in out:
        lab = out.pop("labels")
        prepare = getattr(model, "prepare_decoder_input_ids_from_labels", None)
        if "decoder_input_ids" in named and "decoder_input_ids" not in out and prepare is not None:
            out["decoder_input_ids"] = prepare(labels=lab)
    return out


def as_sentences(batch: Mapping[str, Any]) -> dict[str, Any]:
    """A grouped batch (``input_ids`` ``[B, K, T]``: the retrieval task's K sentences per example, each encoded
    apart) as ``[B * K, T]`` sentences, without its labels (they label groups, not sentences); any other batch as
    it is. What reads attention per query position (roles) needs the sentences the attention runs over."""
    ids = batch.get("input_ids")
    if ids is None or ids.dim() != 3:
        return dict(batch)
    out = {k: v.reshape(-1, v.shape[-1]) for k, v in batch.items() if k in ("input_ids", "attention_mask")}
    return out
