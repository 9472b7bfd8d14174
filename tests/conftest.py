"""Shared test pieces: tiny models per family and padded batches (built in milliseconds, never touching the
network), and the smoke preset's prepared data and tokenizers (prepared once per session)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from heads import models
from heads.config import RunConfig, resolve

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


@pytest.fixture(scope="session")
def data_root(tmp_path_factory) -> Path:
    """One folder of prepared smoke data for the whole session: each task's corpus and BPE tokenizer are built
    there on first use (about 4-8 s each) and every module after that reads them. Tests must not write into it."""
    return tmp_path_factory.mktemp("data")


def smoke(task: str, data_root: Path, *overrides: str) -> RunConfig:
    """The smoke preset of ``task`` on the shared data, without a progress bar."""
    return resolve(task, "smoke", None, [f"data.root={data_root}", "train.progress=false", *overrides])


# Fields of metrics.jsonl that measure the clock, not the run: they differ between any two runs.
TIMING = {"train_seconds", "wall", "tokens_per_s", "peak_mem_mb"}


def untimed(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIMING} for r in records]


def heads_train_killed(
    task: str, out: Path, data_root: Path, overrides: list[str], at_step: int, fresh_interpreter: bool = True
) -> None:
    """``heads train`` in a child process that SIGKILLs itself right after step ``at_step`` (no handler runs,
    exactly like ``kill -9``), leaving ``out`` as a killed run leaves it.

    ``fresh_interpreter=False`` forks this process instead of starting Python anew: the same command, without
    the 5-10 s of importing torch and transformers again (what makes a kill test per strategy affordable).
    """
    argv = ["train", "--task", task, "--preset", "smoke", "--out", str(out)]
    argv += [f"data.root={data_root}", "train.progress=false", *overrides]
    if fresh_interpreter:
        env = {**os.environ, "HEADS_FAULT_KILL_AT_STEP": str(at_step)}
        killed = subprocess.run(
            [sys.executable, "-m", "heads", *argv], env=env, capture_output=True, text=True, timeout=300
        )
        assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    else:
        pid = os.fork()
        if pid == 0:  # the child: run the command; it never returns from the kill
            try:
                os.environ["HEADS_FAULT_KILL_AT_STEP"] = str(at_step)
                from heads.cli import main

                main(argv)
            finally:
                os._exit(1)  # the kill did not come (or the command failed): never run pytest's code here
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, f"child ended with {status}"
    assert not (out / "summary.json").exists()
