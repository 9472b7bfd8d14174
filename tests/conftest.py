"""Tiny models per family and padded batches: built in milliseconds, never touching the network."""

from __future__ import annotations

import os

import pytest
import torch

from heads import models

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# One thread: tiny models gain nothing from more, and contention with other processes is ruinous.
torch.set_num_threads(1)

FAMILIES = ["llama", "bert", "marian"]


def build(family: str, **kw) -> torch.nn.Module:
    """A tiny seeded model of ``family`` in eval mode (no dropout noise in comparisons)."""
    return getattr(models, family)(**kw).eval()


def batch_for(family: str, batch: int = 3, seq: int = 9, vocab: int = 256, seed: int = 0) -> dict:
    """Token ids with ragged padding (so masks matter) and, for Marian, decoder inputs."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(2, vocab, (batch, seq), generator=g)
    mask = torch.ones(batch, seq, dtype=torch.long)
    for row in range(batch):
        mask[row, seq - 2 * row :] = 0 if row else 1
    inputs = {"input_ids": ids, "attention_mask": mask}
    if family == "marian":
        inputs["decoder_input_ids"] = torch.randint(2, vocab, (batch, seq - 2), generator=g)
    if family == "bert":
        inputs["labels"] = torch.randint(0, 2, (batch,), generator=g)
    else:
        labels = (inputs.get("decoder_input_ids", ids)).clone()
        inputs["labels"] = labels
    return inputs


def logits(model, inputs: dict) -> torch.Tensor:
    return model(**{k: v for k, v in inputs.items() if k != "labels"}).logits


@pytest.fixture(params=FAMILIES)
def family(request) -> str:
    return request.param


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory):
    """A fresh copy of the repository with the whole smoke DAG run once, uninterrupted (slow tests only)."""
    from smoke_dag import copy_repo, snakemake

    repo = copy_repo(tmp_path_factory.mktemp("repo"))
    run = snakemake(repo, "--cores", "2")
    assert run.returncode == 0, (run.stdout + run.stderr)[-5000:]
    return repo
