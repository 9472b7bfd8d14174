"""Shared test pieces: tiny models per family and padded batches (built in milliseconds, never touching the
network), and the smoke preset's prepared data and tokenizers (prepared once per session)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest
import torch
from torch import nn
from transformers import (
    BartConfig,
    BartForConditionalGeneration,
    Gemma3ForCausalLM,
    Gemma3TextConfig,
    GPT2Config,
    GPT2LMHeadModel,
    MistralConfig,
    MistralForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
    RobertaConfig,
    RobertaForSequenceClassification,
    XLMRobertaConfig,
    XLMRobertaForSequenceClassification,
)

from heads import models
from heads.config import RunConfig
from heads.resolve import resolve
from heads.surgery import sites

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# One thread: tiny models gain nothing from more, and contention with other processes is ruinous.
torch.set_num_threads(1)

FAMILIES = ["llama", "bert", "marian"]  # the families the tasks use: most tests run on these three


def _decoder_only(config_class: type, model_class: type) -> Callable[..., nn.Module]:
    """A builder with ``models.llama``'s arguments for another Llama-style decoder (Mistral, Qwen2)."""

    def make(
        vocab: int = 256,
        d: int = 64,
        layers: int = 2,
        heads: int = 4,
        kv_heads: int | None = None,
        seed: int = 0,
        **overrides,
    ) -> nn.Module:
        config = config_class(
            vocab_size=vocab,
            hidden_size=d,
            intermediate_size=4 * d,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=kv_heads or heads,
            max_position_embeddings=256,
            tie_word_embeddings=False,
            **overrides,
        )
        torch.manual_seed(seed)
        return model_class(config)

    return make


def _bart(vocab: int = 256, d: int = 64, layers: int = 2, heads: int = 4, seed: int = 0, **overrides) -> nn.Module:
    config = BartConfig(
        vocab_size=vocab,
        d_model=d,
        encoder_layers=layers,
        decoder_layers=layers,
        encoder_attention_heads=heads,
        decoder_attention_heads=heads,
        encoder_ffn_dim=4 * d,
        decoder_ffn_dim=4 * d,
        max_position_embeddings=256,
        pad_token_id=0,
        bos_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
        forced_eos_token_id=1,
        **overrides,
    )
    torch.manual_seed(seed)
    return BartForConditionalGeneration(config)


def _roberta_like(config_class: type, model_class: type) -> Callable[..., nn.Module]:
    """A builder with ``models.bert``'s main arguments for RoBERTa-style classifiers (RoBERTa, XLM-RoBERTa)."""

    def make(vocab: int = 256, d: int = 64, layers: int = 2, heads: int = 4, labels: int = 2, seed: int = 0,
             **overrides) -> nn.Module:
        # Positions start after padding_idx (RoBERTa's offset), so max_position_embeddings leaves room for it.
        # A wider init than the stock 0.02: at 0.02 closing heads moves these tiny classifiers' logits by
        # about 1e-3, too close to the tolerances tests tell "the gates matter" by.
        settings = dict(vocab_size=vocab, hidden_size=d, num_hidden_layers=layers, num_attention_heads=heads,
                        intermediate_size=4 * d, max_position_embeddings=258, type_vocab_size=1, pad_token_id=1,
                        num_labels=labels, initializer_range=0.05)
        config = config_class(**{**settings, **overrides})
        torch.manual_seed(seed)
        return model_class(config)

    return make


def _gpt2(vocab: int = 256, d: int = 64, layers: int = 2, heads: int = 4, seed: int = 0, **overrides) -> nn.Module:
    config = GPT2Config(vocab_size=vocab, n_embd=d, n_layer=layers, n_head=heads, n_positions=256,
                        bos_token_id=0, eos_token_id=1, pad_token_id=0, **overrides)
    torch.manual_seed(seed)
    return GPT2LMHeadModel(config)


def _gemma3(vocab: int = 256, d: int = 64, layers: int = 2, heads: int = 4, kv_heads: int = 2, head_dim: int = 16,
            window: int = 4, seed: int = 0, **overrides) -> nn.Module:
    """A tiny Gemma 3 text decoder: a sliding-window layer (``window`` tokens, shorter than the test batches) then
    a global one, QK-norm, the scale from ``query_pre_attn_scalar`` (not the head size), grouped-query by default
    (``kv_heads=1``: multi-query, as the 270M). Norm weights drawn at random: fresh ones are zeros (Gemma scales
    by 1 + weight), under which a q/k norm cut by pruning would still compare equal."""
    settings = dict(vocab_size=vocab, hidden_size=d, intermediate_size=4 * d, num_hidden_layers=layers,
                    num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=head_dim,
                    query_pre_attn_scalar=24, sliding_window=window,
                    layer_types=["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)],
                    max_position_embeddings=256, pad_token_id=0, bos_token_id=2, eos_token_id=1,
                    initializer_range=0.05)
    torch.manual_seed(seed)
    model = Gemma3ForCausalLM(Gemma3TextConfig(**{**settings, **overrides}))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.uniform_(-0.5, 0.5)
    return model


def _bergamot(vocab: int = 256, d: int = 64, layers: int = 2, heads: int = 4, seed: int = 0,
              **overrides) -> nn.Module:
    """A tiny Bergamot student (heads.bergamot: encoder self and cross attention, an SSRU decoder)."""
    from heads.bergamot.model import BergamotConfig, BergamotForConditionalGeneration

    config = BergamotConfig(vocab_size=vocab, d_model=d, encoder_layers=layers, decoder_layers=layers,
                            encoder_attention_heads=heads, decoder_attention_heads=heads, encoder_ffn_dim=4 * d,
                            decoder_ffn_dim=4 * d, **overrides)
    torch.manual_seed(seed)
    return BergamotForConditionalGeneration(config)


def _mpnet(vocab: int = 256, d: int = 64, layers: int = 2, heads: int = 4, seed: int = 0, **overrides) -> nn.Module:
    """A tiny MPNet sentence-embedding model (heads.embedding), with a wider init than the stock 0.02 (as the
    RoBERTa builders: closing heads must move its similarities well past test tolerances)."""
    from heads.embedding import mpnet

    return mpnet(vocab=vocab, d=d, layers=layers, heads=heads, seed=seed,
                 **{"initializer_range": 0.1, **overrides})


# model_type -> (a tiny seeded model of it, what its batches look like). Every model type head surgery
# supports (heads/surgery/families) has a line here; test_every_registered_family_has_a_tiny_config says so.
TINY: dict[str, tuple[Callable[..., nn.Module], str]] = {
    "llama": (models.llama, "causal"),
    "mistral": (partial(_decoder_only(MistralConfig, MistralForCausalLM), kv_heads=2), "causal"),  # grouped-query
    "qwen2": (_decoder_only(Qwen2Config, Qwen2ForCausalLM), "causal"),  # q/k/v biases, o without
    "bert": (models.bert, "classifier"),
    "marian": (models.marian, "seq2seq"),
    "bart": (_bart, "seq2seq"),
    "bergamot": (_bergamot, "seq2seq"),
    "roberta": (_roberta_like(RobertaConfig, RobertaForSequenceClassification), "classifier"),
    "xlm-roberta": (_roberta_like(XLMRobertaConfig, XLMRobertaForSequenceClassification), "classifier"),
    "gpt2": (_gpt2, "causal"),  # fused q/k/v in one Conv1D
    "mpnet": (_mpnet, "retrieval"),  # q/k/v/o in the site, a relative-position bias shared across layers
    "gemma3_text": (_gemma3, "causal"),  # QK-norm, sliding-window and global layers
}
GENERATIVE_KINDS = ("causal", "seq2seq")  # the batch kinds of models that generate (a cache, decoding)


def build(family: str, **kw) -> nn.Module:
    """A tiny seeded model of ``family`` (a model type) in eval mode (no dropout noise in comparisons)."""
    return TINY[family][0](**kw).eval()


def build_with_biases(family: str, **kw) -> nn.Module:
    """``build``, with every bias drawn at random: fresh models start with zero biases, under which a bias
    sliced wrongly by pruning would still compare equal."""
    model = build(family, **kw)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith(".bias"):
                param.copy_(torch.randn(param.shape, generator=g) * 0.5)
    return model


def heads_to_remove(model: nn.Module) -> dict[str, list[int]]:
    """A removal that reaches every case: the first site, and the first cross-attention site, lose every head
    (headless sites); every other site loses its second and last key/value group (under grouped-query attention
    the query heads of a group go together; otherwise a group is one head)."""
    remove, cross_seen = {}, False
    for i, site in enumerate(sites(model)):
        first_cross = site.kind == "cross" and not cross_seen
        cross_seen |= site.kind == "cross"
        g, groups = site.group_size, site.num_kv_heads
        chosen = range(groups) if i == 0 or first_cross else sorted({1, groups - 1})
        remove[site.name] = [g * k + j for k in chosen for j in range(g)]
    return remove


def batch_for(family: str, batch: int = 3, seq: int = 9, vocab: int = 256, seed: int = 0) -> dict:
    """Token ids with ragged padding (so masks matter) and, for encoder-decoders, decoder inputs."""
    kind = TINY[family][1]
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(2, vocab, (batch, seq), generator=g)
    mask = torch.ones(batch, seq, dtype=torch.long)
    for row in range(batch):
        mask[row, seq - 2 * row :] = 0 if row else 1
    inputs = {"input_ids": ids, "attention_mask": mask}
    if kind == "seq2seq":
        inputs["decoder_input_ids"] = torch.randint(2, vocab, (batch, seq - 2), generator=g)
    if kind == "retrieval":  # groups of 2 queries + their 2 matches (heads.embedding): [batch, 4, seq]
        ids = torch.randint(2, vocab, (batch, 4, seq), generator=g)
        mask = mask[:, None, :].repeat(1, 4, 1)
        mask[-1, 3, seq // 2 :] = 0  # a match of another length than its query
        return {"input_ids": ids, "attention_mask": mask, "labels": torch.arange(2).repeat(batch, 1)}
    if kind == "classifier":
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


@pytest.fixture(params=sorted(TINY))
def every_family(request) -> str:
    """Every model type head surgery supports, for the guarantees each of them must keep."""
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
TIMING = {"train_seconds", "train_cpu_seconds", "wall", "tokens_per_s", "peak_mem_mb"}


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


# -- the fault suites' run (tests/test_faults_cli.py, tests/test_faults_round2.py) -----------------------------
FAULT_STEPS = ["train.steps=4", "train.log_every=2", "train.eval_every=2", "train.checkpoint_every=2",
               "train.progress=false"]


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> dict:
    """A finished smoke `lm` run (4 steps) and its prepared data; tests copy the run before damaging it."""
    from heads.cli import main

    root = tmp_path_factory.mktemp("faults")
    data = f"data.root={root / 'data'}"
    run = root / "run"
    assert main(["train", "--task", "lm", "--preset", "smoke", "--out", str(run), data, *FAULT_STEPS]) == 0
    return {"root": root, "run": run, "data": data}


@pytest.fixture
def run(base, tmp_path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(base["run"], copy)
    return copy


def refused(argv: list[str], capsys, *fragments: str, main=None) -> str:
    """Run ``heads argv`` (or another command's ``main``, e.g. ``tools.readme.main``) in-process: it must exit 2
    with one stderr line holding every fragment, no traceback."""
    if main is None:
        from heads.cli import main

    capsys.readouterr()  # what came before is not this command's output
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]
