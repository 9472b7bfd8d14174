"""Single-head ablation on BLEU, as Michel et al. (2019) test it for translation: decode the test sentences with
each head masked alone and compare each with the full model by paired bootstrap resampling (Koehn 2004), in
sacrebleu's implementation (``sacrebleu.significance.PairedTest``, ``bs``).

A loss-based t-test over sentences finds tiny, consistent loss changes "significant" (it flagged 77 % of a
tiny Marian's encoder heads with |delta loss| < 1e-4); BLEU is what the paper tested.

One correction to sacrebleu: its paired bootstrap counts resamples whose centred difference *exceeds* the
observed one (multeval's rule, so that "a zero difference is not attributed to chance"), which gives a system
identical to the baseline p = 1/(samples + 1), "significant". A head whose removal leaves corpus BLEU exactly
unchanged (every translation the same, typically) gets p = 1 here: there is no difference to test.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from heads.scoring.session import base_gates, scoring_mode
from heads.surgery import gates, head_layout

SAMPLES = 1000  # sacrebleu's default number of bootstrap resamples for the paired test
SEED = 12345  # sacrebleu's default SACREBLEU_SEED: the same resamples for every head and every run


@dataclass(frozen=True)
class HeadBleu:
    """One head masked alone: its corpus BLEU, the change from the full model, the bootstrap p-value."""

    site: str
    position: int  # index within the site's kept heads
    head: int  # original head id
    bleu: float
    delta_bleu: float  # BLEU without the head - full model's BLEU (< 0: the head helps)
    p_value: float


@dataclass
class BleuAblation:
    """The full model's BLEU and every single-head ablation's paired bootstrap test against it."""

    baseline_bleu: float
    sentences: int
    samples: int
    seed: int
    signature: str
    rows: list[HeadBleu] = field(default_factory=list)


def bleu_ablation(
    model: nn.Module,
    translate: Callable[[int], list[str]],
    references: Sequence[str],
    samples: int = SAMPLES,
    chunk: int = 8,
) -> BleuAblation:
    """Mask each head alone, decode the same sentences under each mask, and bootstrap-test BLEU.

    ``translate(k)`` decodes every sentence ``k`` times in one pass, under the ``[k, H]`` stacked gates set on
    the model (copy j of a sentence under row j), and returns the ``k * n`` translations copy-major. The
    unablated model and the ablations go ``chunk`` at a time: a decoding step costs about the same for one
    copy as for eight on a GPU, so 73 systems take ten passes instead of 73. Heads masked before (the
    model's own gates) stay masked throughout."""
    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import PairedTest

    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    refs = list(references)
    with scoring_mode(model):
        layout = head_layout(model)
        start = base_gates(model)
        where = [(name, p) for name, kept in layout.items() for p in range(len(kept))]
        closed: list[tuple[str, int] | None] = [None, *where]  # the unablated model first
        decoded: list[list[str]] = []
        for first in range(0, len(closed), chunk):
            group = closed[first : first + chunk]
            stacked = {name: gate.repeat(len(group), 1) for name, gate in start.items()}
            for row, head in enumerate(group):
                if head is not None:
                    stacked[head[0]][row, head[1]] = 0.0
            with gates(model, stacked), torch.no_grad():
                hyps = translate(len(group))
            if len(hyps) != len(group) * len(refs):
                raise ValueError(f"{len(hyps)} translations for {len(group)} x {len(refs)} references")
            decoded += [hyps[row * len(refs) : (row + 1) * len(refs)] for row in range(len(group))]
        systems = [("baseline", decoded[0])]
        systems += [(f"{name}#{p}", hyps) for (name, p), hyps in zip(where, decoded[1:], strict=True)]
    metric = BLEU()
    saved = os.environ.get("SACREBLEU_SEED")
    os.environ["SACREBLEU_SEED"] = str(SEED)  # PairedTest reads its seed from the environment
    try:
        _, scores = PairedTest(systems, {"BLEU": metric}, [refs], test_type="bs", n_samples=samples)()
    finally:
        if saved is None:
            os.environ.pop("SACREBLEU_SEED", None)
        else:
            os.environ["SACREBLEU_SEED"] = saved
    results = scores["BLEU"]
    base = float(results[0].score)
    rows = [
        HeadBleu(site=name, position=p, head=layout[name][p], bleu=float(r.score),
                 delta_bleu=float(r.score) - base, p_value=1.0 if float(r.score) == base else float(r.p_value))
        for (name, p), r in zip(where, results[1:], strict=True)
    ]
    return BleuAblation(base, len(refs), samples, SEED, str(metric.get_signature()), rows)
