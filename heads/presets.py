"""Scale presets per task: ``smoke`` (seconds, the tests), ``tiny`` (the default: minutes on 2 CPU cores),
``paper`` (GPU, the papers' sizes and recipes, hub data)."""

from __future__ import annotations

from copy import deepcopy

from heads.config import ConfigError

PRESETS: dict[str, dict[str, dict]] = {
    "smoke": {
        "lm": {
            "model": {"family": "llama", "layers": 2, "d": 32, "heads": 4, "vocab": 300},
            "data": {"limit": 600, "seq_len": 32, "batch_size": 8},
            "train": {
                "steps": 30,
                "lr": 3e-3,
                "warmup": 3,
                "log_every": 5,
                "eval_every": 10,
                "checkpoint_every": 10,
                "eval_batches": 2,
            },
            "eval": {"max_examples": 16},
        },
        "mt": {
            "model": {"family": "marian", "layers": 1, "d": 32, "heads": 4, "vocab": 300},
            "data": {"limit": 400, "seq_len": 24, "batch_size": 8},
            "train": {
                "steps": 30,
                "lr": 3e-3,
                "warmup": 3,
                "log_every": 5,
                "eval_every": 10,
                "checkpoint_every": 10,
                "eval_batches": 2,
                "label_smoothing": 0.1,
            },
            "eval": {"max_examples": 8, "beams": 2, "max_new_tokens": 16},
        },
        # The pretrained MiniLM: a scratch BERT cannot learn paraphrases in seconds (chance after 30 steps).
        "cls": {
            "model": {"family": "bert", "source": "minilm", "vocab": 300},
            "data": {"limit": 400, "seq_len": 20, "batch_size": 8},
            "train": {
                "steps": 20,
                "lr": 1e-4,
                "warmup": 2,
                "log_every": 5,
                "eval_every": 10,
                "checkpoint_every": 10,
                "eval_batches": 2,
            },
            "eval": {"max_examples": 32},
        },
    },
    "tiny": {
        "lm": {
            "model": {"family": "llama", "layers": 4, "d": 128, "heads": 8, "vocab": 1024},
            "data": {"seq_len": 64, "batch_size": 16},
            "train": {
                # 300 steps: val loss 4.08 vs 4.00 at 400, and the 45-minute budget of the tiny DAG
                "steps": 300,
                "lr": 2e-3,
                "warmup": 30,
                "log_every": 20,
                "eval_every": 50,
                "checkpoint_every": 100,
                "eval_batches": 8,
            },
            "eval": {"max_examples": 256},
        },
        "mt": {
            "model": {"family": "marian", "layers": 2, "d": 128, "heads": 8, "vocab": 2000},
            "data": {"seq_len": 48, "batch_size": 32},
            "train": {
                "steps": 400,
                "lr": 3e-3,
                "warmup": 40,
                "log_every": 20,
                "eval_every": 50,
                "checkpoint_every": 100,
                "eval_batches": 8,
                "label_smoothing": 0.1,
            },
            "eval": {"max_examples": 100, "beams": 4, "max_new_tokens": 48},
        },
        "cls": {
            "model": {"family": "bert", "source": "minilm"},
            # 24 tokens a side and 100 steps: val loss is lowest at step 100 (0.145, vs 0.171 at 150), and
            # cls jobs (fine-tune, 144 ablation passes, 9 curves per seed) were a quarter of the tiny DAG.
            "data": {"seq_len": 24, "batch_size": 16, "limit": 4000},
            "train": {
                "steps": 100,
                "lr": 5e-5,
                "warmup": 10,
                "log_every": 10,
                "eval_every": 50,
                "checkpoint_every": 50,
                "eval_batches": 8,
                "weight_decay": 0.01,
            },
            "eval": {"max_examples": 400},
        },
    },
    "paper": {
        # fairseq transformer_lm on WikiText-103 (no adaptive inputs here)
        "lm": {
            "model": {"family": "llama", "layers": 16, "d": 1024, "heads": 16, "vocab": 32000, "max_len": 512},
            "data": {"source": "hub", "seq_len": 512, "batch_size": 32},
            "train": {
                "steps": 100000,
                "lr": 5e-4,
                "warmup": 4000,
                "schedule": "inverse_sqrt",
                "dropout": 0.1,
                "log_every": 100,
                "eval_every": 2000,
                "checkpoint_every": 2000,
                "eval_batches": 100,
            },
            "eval": {"max_examples": 100000},
        },
        # Michel et al.'s IWSLT recipe (fairseq transformer_iwslt_de_en)
        "mt": {
            "model": {"family": "marian", "layers": 6, "d": 512, "heads": 4, "ff": 1024, "vocab": 10000},
            "data": {"source": "hub", "seq_len": 128, "batch_size": 64},
            "train": {
                "steps": 50000,
                "lr": 5e-4,
                "betas": [0.9, 0.98],
                "warmup": 4000,
                "schedule": "inverse_sqrt",
                "dropout": 0.3,
                "label_smoothing": 0.1,
                "weight_decay": 0.0001,
                "log_every": 100,
                "eval_every": 2000,
                "checkpoint_every": 2000,
                "eval_batches": 100,
            },
            "eval": {"max_examples": 100000, "beams": 5, "max_new_tokens": 200},
        },
        # Michel's BERT on MNLI: a pretrained encoder fine-tuned (point model.source at bert-base for the paper's)
        "cls": {
            "model": {"family": "bert", "source": "minilm"},
            "data": {"source": "hub", "seq_len": 128, "batch_size": 32},
            "train": {
                "steps": 36000,
                "lr": 2e-5,
                "warmup": 3600,
                "schedule": "linear",
                "dropout": 0.1,
                "log_every": 100,
                "eval_every": 2000,
                "checkpoint_every": 2000,
                "eval_batches": 100,
            },
            "eval": {"max_examples": 100000},
        },
    },
}


def preset_for(task: str, preset: str) -> dict:
    if preset not in PRESETS:
        raise ConfigError(f"preset: {preset!r} is not one of {sorted(PRESETS)}")
    if task not in PRESETS[preset]:
        raise ConfigError(f"task: {task!r} has no {preset!r} preset; tasks: {sorted(PRESETS[preset])}")
    return deepcopy(PRESETS[preset][task])
