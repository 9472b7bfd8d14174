"""Step-by-step decoding through a cache, positions left to the model: a headless first site must not reset them.

Models take the positions of new tokens from ``cache.get_seq_length()`` (layer 0's entry); ``generate`` passes
positions itself, so only decoding by hand, as here, shows a headless layer 0 whose cache entry looks empty.
"""

from __future__ import annotations

import pytest
import torch
from conftest import GENERATIVE_KINDS, TINY, batch_for, build_with_biases, heads_to_remove

from heads.surgery import install, ones_gates, prune_heads
from heads.surgery.gates import gates

GENERATIVE = [name for name, (_, kind) in sorted(TINY.items()) if kind in GENERATIVE_KINDS]


def decode(model, inputs: dict, split: int = 4) -> torch.Tensor:
    """Logits of the target in two calls: a prefix, then the rest on top of the prefix's cache."""
    if "decoder_input_ids" in inputs:
        src = {"input_ids": inputs["input_ids"], "attention_mask": inputs["attention_mask"]}
        tgt = inputs["decoder_input_ids"]
        first = model(**src, decoder_input_ids=tgt[:, :split], use_cache=True)
        rest = model(**src, decoder_input_ids=tgt[:, split:], past_key_values=first.past_key_values, use_cache=True)
    else:
        ids = inputs["input_ids"][:, :7]  # unpadded columns: positions then follow from the cache alone
        first = model(input_ids=ids[:, :split], use_cache=True)
        rest = model(input_ids=ids[:, split:], past_key_values=first.past_key_values, use_cache=True)
    return torch.cat([first.logits, rest.logits], dim=1)


@pytest.mark.parametrize("family", GENERATIVE)
def test_incremental_decoding_masked_equals_pruned(family):
    model = install(build_with_biases(family))
    inputs = batch_for(family, batch=2)
    remove = heads_to_remove(model)  # the first site (and the first cross site) lose every head
    g = ones_gates(model)
    for name, heads in remove.items():
        g[name][heads] = 0.0
    with torch.no_grad():
        with gates(model, g):
            masked = decode(model, inputs)
        prune_heads(model, remove)
        assert torch.allclose(decode(model, inputs), masked, atol=1e-5)
