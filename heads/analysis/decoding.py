"""Decoding speed of physically pruned models with a key/value cache, beside the bound each speed-up cannot exceed
(issue 56; Michel et al.'s B5).

A decoder-only model prefills a context into transformers' ``DynamicCache`` and then decodes greedily from it one
token at a time; a translation model (``heads.bergamot``) encodes its source once (its "prefill": the encoder and
the cross-attention keys and values every step reads) and decodes greedily from it. Every variant (the unpruned
model and its pruned copies, all in one process) is timed on the same real inputs in ``rounds`` interleaved
rounds, the variants' order shuffled per round and cell from a recorded seed, so drifting machine load hits
them alike and every round pairs the variants.

The bounds are computed from the real sizes: decoding at batch B reads every weight a step uses once per step
and the whole cache once per step, so a decoded token moves ``(W + B * cache(C)) / B`` bytes (``W``: the bytes of
the parameters a decoding step reads; ``cache(C)``: one sequence's key/value bytes at the mean context of the
decoded tokens, from the cache tensors' own shapes and dtypes); a pruned model can decode at most as many times
faster as it moves fewer bytes. A prefill can be at most as many times faster as it does fewer FLOPs (counted by
torch's ``FlopCounterMode`` over the very prefill that filled the cache).
"""

from __future__ import annotations

import math
import os
import random
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

PHASES = ("prefill", "decode", "total")


# -- variants -------------------------------------------------------------------------------------------------------
def drop_query_heads(model: nn.Module, per_group: int) -> nn.Module:
    """Remove the last ``per_group`` query heads of every key/value group of a grouped-query (Llama-style) model
    in place, keeping every group: the query and output projections shrink, the keys, values and the cache do
    not. Physical pruning (``heads.surgery``) refuses this shape, since a group's heads would no longer go
    together; it is a measurement's variant, never saved."""
    layers = getattr(getattr(model, "model", None), "layers", None)
    if layers is None or not hasattr(layers[0], "self_attn"):
        raise ValueError(f"query heads are dropped from Llama-style decoders, not {type(model).__name__}")
    for layer in layers:
        attn = layer.self_attn
        group, dim = int(attn.num_key_value_groups), int(attn.head_dim)
        if not 0 <= per_group < group:
            raise ValueError(f"a group has {group} query heads: 0 <= per_group < {group}, got {per_group}")
        groups = attn.q_proj.out_features // (group * dim)
        keep = [g * group + i for g in range(groups) for i in range(group - per_group)]
        rows = torch.tensor([h * dim + j for h in keep for j in range(dim)])
        attn.q_proj = _sliced(attn.q_proj, rows, 0)
        attn.o_proj = _sliced(attn.o_proj, rows, 1)
        attn.num_key_value_groups = group - per_group
    return model


def _sliced(linear: nn.Linear, index: torch.Tensor, dim: int) -> nn.Linear:
    weight = linear.weight.detach().index_select(dim, index.to(linear.weight.device))
    out = nn.Linear(weight.shape[1], weight.shape[0], bias=linear.bias is not None,
                    device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        out.weight.copy_(weight)
        if linear.bias is not None:
            out.bias.copy_(linear.bias if dim == 1 else linear.bias.detach().index_select(0, index))
    return out


def variant(model: nn.Module, spec: str) -> nn.Module:
    """A pruned deep copy of ``model`` (eval mode) by ``spec``: ``full`` (unpruned), ``ratio:R`` (``R`` of every
    site's heads removed uniformly, its first heads kept: whole key/value groups under grouped-query attention;
    ``heads.surgery.ratio_layout``), ``query:K`` (``K`` query heads of every key/value group, the groups kept:
    :func:`drop_query_heads`)."""
    import copy

    from heads.surgery import apply_layout, ratio_layout

    kind, _, value = spec.partition(":")
    clone = copy.deepcopy(model).eval()
    if kind == "full" and not value:
        return clone
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"variant {spec!r}: full, ratio:R or query:K") from None
    if kind == "ratio" and 0.0 <= number < 1.0:
        apply_layout(clone, ratio_layout(clone, number))
        return clone
    if kind == "query" and number == int(number) and number >= 0:
        return drop_query_heads(clone, int(number))
    raise ValueError(f"variant {spec!r}: full, ratio:R with 0 <= R < 1, or query:K with K >= 0")


def head_counts(model: nn.Module) -> dict[str, int]:
    """Query heads and key/value heads the model computes, summed over its attention modules (read from the
    weights' shapes, so a variant made by any route is counted as it is)."""
    heads = kv = 0
    for module in model.modules():
        dim = getattr(module, "head_dim", None)
        if dim is None or not hasattr(module, "k_proj"):
            continue
        q = getattr(module, "q_proj", None)
        heads += q.out_features // dim if q is not None else 0
        kv += module.k_proj.out_features // dim
    return {"heads": heads, "kv_heads": kv}


# -- sizes ----------------------------------------------------------------------------------------------------------
def _unique(params) -> list[torch.Tensor]:
    seen, out = set(), []
    for p in params:
        if p.data_ptr() not in seen:
            seen.add(p.data_ptr())
            out.append(p)
    return out


def tensor_bytes(tensors) -> int:
    """Bytes of ``tensors`` from their shapes and dtypes."""
    return int(sum(t.numel() * t.element_size() for t in tensors))


def weight_bytes(model: nn.Module) -> int:
    """Bytes of the model's parameters, a tied weight once."""
    return tensor_bytes(_unique(model.parameters()))


def decode_weight_bytes(model: nn.Module) -> int:
    """Bytes of the parameters one decoding step reads: every parameter, less what a step never touches (a
    translation model's encoder and cross-attention key/value projections, which ran at its prefill; an input
    embedding table not tied to the output layer, of which a step reads one row per sequence). A tied table is
    read whole by the output layer."""
    skip: list[torch.Tensor] = []
    if hasattr(model, "cross_keys_values"):  # a translation model: the source is encoded once
        skip += list(model.get_encoder().parameters())
        for layer in model.model.decoder.layers:
            skip += list(layer.encoder_attn.k_proj.parameters()) + list(layer.encoder_attn.v_proj.parameters())
    else:
        embed, out = model.get_input_embeddings(), model.get_output_embeddings()
        if out is None or embed.weight.data_ptr() != out.weight.data_ptr():
            skip.append(embed.weight)
    gone = {p.data_ptr() for p in skip}
    return tensor_bytes(p for p in _unique(model.parameters()) if p.data_ptr() not in gone)


def cache_tensors(cache: Any) -> list[torch.Tensor]:
    """The key/value tensors a decoder reads each step: a transformers cache's layers' keys and values, or a
    translation model's per-layer ``(keys, values)`` of the source."""
    if hasattr(cache, "layers"):
        return [t for layer in cache.layers for t in (getattr(layer, "keys", None), getattr(layer, "values", None))
                if torch.is_tensor(t)]
    return [t for pair in cache for t in pair if torch.is_tensor(t)]


# -- decoders -------------------------------------------------------------------------------------------------------
@dataclass
class State:
    """What a prefill leaves: the cache, the first token to decode from, the context length, extra inputs."""

    cache: Any
    first: torch.Tensor
    length: int
    mask: torch.Tensor | None = None


class CausalDecoder:
    """Greedy decoding of a decoder-only model with transformers' ``DynamicCache``."""

    kind = "causal"

    def __init__(self, model: nn.Module):
        self.model = model

    def prefill(self, inputs: Mapping[str, torch.Tensor]) -> State:
        from transformers import DynamicCache

        ids = inputs["input_ids"]
        cache = DynamicCache(config=self.model.config)
        out = self.model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1)
        return State(cache, out.logits[:, -1].argmax(-1, keepdim=True), int(ids.shape[1]))

    def decode(self, state: State, n: int) -> torch.Tensor:
        token, out = state.first, []
        for _ in range(n):
            logits = self.model(input_ids=token, cache=state.cache, use_cache=True).logits
            token = logits[:, -1].argmax(-1, keepdim=True)
            out.append(token)
        return torch.cat(out, dim=1)

    def rewind(self, state: State) -> None:
        """Back to the prefilled context: the decoded tokens' cache entries dropped."""
        extra = state.cache.get_seq_length() - state.length
        if extra > 0:
            state.cache.crop(-extra)

    def cache_bytes(self, state: State) -> int:
        return tensor_bytes(cache_tensors(state.cache))


class TranslationDecoder:
    """Greedy decoding of a Bergamot student: the source encoded once with its cross-attention keys and values
    (the prefill), then steps through the SSRU decoder; every step runs, eos or not, so all variants decode
    the same number of tokens."""

    kind = "seq2seq"

    def __init__(self, model: nn.Module):
        self.model = model

    def prefill(self, inputs: Mapping[str, torch.Tensor]) -> State:
        from heads.bergamot.model import padding_mask

        ids, mask = inputs["input_ids"], inputs["attention_mask"]
        encoded = self.model.model.encoder(ids, mask)
        return State(self.model.cross_keys_values(encoded), ids.new_zeros(ids.shape[0]), int(ids.shape[1]),
                     padding_mask(mask))

    def decode(self, state: State, n: int) -> torch.Tensor:
        previous, states, out = state.first, None, []
        for t in range(n):
            logp, states = self.model._step(previous, t, state.cache, state.mask, states)
            previous = logp.argmax(-1)
            out.append(previous)
        return torch.stack(out, dim=1)

    def rewind(self, state: State) -> None:
        """Nothing to undo: decoding reads the source's keys and values and never extends them."""

    def cache_bytes(self, state: State) -> int:
        return tensor_bytes(cache_tensors(state.cache))


def decoder_of(model: nn.Module) -> CausalDecoder | TranslationDecoder:
    return TranslationDecoder(model) if hasattr(model, "cross_keys_values") else CausalDecoder(model)


def attention_flops(model: nn.Module, context: int, batch: int) -> float:
    """FLOPs of a prefill's attention matmuls (scores and weighted values, ``4 * h * d_h`` per query and key
    position: heads.flops' convention): causal over ``context`` tokens for a decoder-only model, full over the
    source for a translation model's encoder (its cross attention does no matmul at prefill: the keys and values
    are projections, counted as such)."""
    causal = not hasattr(model, "cross_keys_values")
    stack = model if causal else model.get_encoder()
    keys = (context + 1) / 2 if causal else context
    total = 0.0
    for module in stack.modules():
        dim, q = getattr(module, "head_dim", None), getattr(module, "q_proj", None)
        if dim is not None and q is not None and hasattr(module, "k_proj"):
            total += 4 * q.out_features * keys * context * batch  # q.out_features = heads x head_dim
    return total


def prefill_flops(decoder, inputs: Mapping[str, torch.Tensor]) -> tuple[State, float]:
    """One prefill under torch's FLOP counter: its state and the FLOPs it did, at 2 per multiply-add: every
    matmul torch counts, with the attention's own matmuls by :func:`attention_flops` in place of whatever the
    counter makes of the fused attention kernel (on CPU it counts none)."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        state = decoder.prefill(inputs)
    fused = sum(v for k, v in counter.get_flop_counts().get("Global", {}).items() if "scaled_dot_product" in str(k))
    ids = inputs["input_ids"]
    extra = attention_flops(decoder.model, int(ids.shape[1]), int(ids.shape[0]))
    return state, float(counter.get_total_flops() - fused + extra)


# -- inputs ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cell:
    """One measured shape: ``context`` tokens per sequence (a translation model: its sources' padded length),
    ``batch`` sequences; ``prefill`` whether the prefill is timed every round (else once, untimed, to fill the
    cache decoding reads)."""

    context: int
    batch: int
    prefill: bool

    @property
    def key(self) -> str:
        return f"{self.context}x{self.batch}"


def context_batch(stream: torch.Tensor, context: int, batch: int) -> dict[str, torch.Tensor]:
    """``batch`` consecutive spans of ``context`` tokens of a real token stream (1-D), as ``input_ids``; a stream
    too short for them is refused rather than cycled (repeated text would be predicted too easily)."""
    need = context * batch
    if stream.numel() < need:
        raise ValueError(f"{context} x {batch} tokens asked of a text of {stream.numel()} tokens")
    return {"input_ids": stream[:need].view(batch, context).clone()}


def source_batch(sources: Sequence[torch.Tensor], batch: int, pad: int) -> dict[str, torch.Tensor]:
    """The first ``batch`` source sentences (1-D token ids each), padded to the longest, with their mask."""
    if len(sources) < batch:
        raise ValueError(f"a batch of {batch} sources asked of {len(sources)}")
    chosen = list(sources[:batch])
    width = max(int(s.numel()) for s in chosen)
    ids = torch.full((batch, width), pad, dtype=torch.long)
    mask = torch.zeros((batch, width), dtype=torch.long)
    for i, s in enumerate(chosen):
        ids[i, : s.numel()], mask[i, : s.numel()] = s, 1
    return {"input_ids": ids, "attention_mask": mask}


# -- memory ---------------------------------------------------------------------------------------------------------
def _status(key: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def reset_peak() -> bool:
    """Reset the process's resident high-water mark (Linux: ``5`` to ``/proc/self/clear_refs``); False where
    it cannot be reset (then peaks are not measured)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _cuda() -> bool:
    """Whether this process runs CUDA work (kernels run asynchronously: a clock stops when they are done)."""
    return torch.cuda.is_available() and torch.cuda.is_initialized()


class PeakRise:
    """The rise of the process's resident high-water mark (``VmHWM``) over its resident size (``VmRSS``) at the
    start of a block: the memory one variant's prefill or decode added on top of what the process held (every
    variant's weights and caches). None where Linux's counters are not there. On a GPU, the rise of the CUDA
    allocator's peak over what it held at the start instead."""

    def __enter__(self) -> PeakRise:
        self.gpu = _cuda()
        if self.gpu:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.ok, self.start = True, torch.cuda.memory_allocated()
        else:
            self.ok, self.start = reset_peak(), _status("VmRSS")
        self.rise: int | None = None
        return self

    def __exit__(self, *exc: object) -> None:
        peak = torch.cuda.max_memory_allocated() if self.gpu else _status("VmHWM")
        if self.ok and peak is not None and self.start is not None:
            self.rise = max(0, peak - self.start)


# -- timing ---------------------------------------------------------------------------------------------------------
def _timed(fn: Callable[[], Any]) -> tuple[Any, float, float, int | None]:
    """``fn()``, its wall and process CPU seconds, and the resident peak's rise over it."""
    with PeakRise() as peak:
        cpu, start = time.process_time(), time.perf_counter()
        out = fn()
        if peak.gpu:
            torch.cuda.synchronize()
        wall, used = time.perf_counter() - start, time.process_time() - cpu
    return out, wall, used, peak.rise


@dataclass
class Timings:
    """Every round's wall and CPU seconds per (variant, cell key, phase), and what came with them."""

    wall: dict[tuple[str, str, str], list[float]] = field(default_factory=dict)
    cpu: dict[tuple[str, str, str], list[float]] = field(default_factory=dict)
    peak: dict[tuple[str, str, str], int] = field(default_factory=dict)
    orders: list[dict[str, list[str]]] = field(default_factory=list)
    same_tokens: bool = True

    def add(self, key: tuple[str, str, str], wall: float, cpu: float, rise: int | None) -> None:
        self.wall.setdefault(key, []).append(wall)
        self.cpu.setdefault(key, []).append(cpu)
        if rise is not None:
            self.peak[key] = max(self.peak.get(key, 0), rise)


def run_rounds(decoders: Mapping[str, Any], inputs: Mapping[Cell, Mapping[str, torch.Tensor]],
               states: Mapping[str, Mapping[Cell, State]], rounds: int, new_tokens: int, seed: int,
               progress: Callable[[str], None] | None = None) -> Timings:
    """``rounds`` rounds; in each, for every cell, every variant in an order shuffled by ``random.Random(seed)``:
    its prefill (where the cell times it; the cache it fills is dropped) and ``new_tokens`` greedy steps from the
    cell's prefilled cache, which is rewound after. The first round's tokens are checked against every later
    round's (the same inputs decode the same way)."""
    if rounds < 1 or new_tokens < 1:
        raise ValueError(f"rounds and new tokens must be >= 1, got {rounds} and {new_tokens}")
    rng, out = random.Random(seed), Timings()
    first: dict[tuple[str, str], torch.Tensor] = {}
    names = list(decoders)
    with torch.no_grad():
        for name in names:  # warm-up: one untimed decode of every variant at every cell
            for cell in inputs:
                decoders[name].decode(states[name][cell], new_tokens)
                decoders[name].rewind(states[name][cell])
        for r in range(rounds):
            orders = {}
            for cell, batch in inputs.items():
                order = names[:]
                rng.shuffle(order)
                orders[cell.key] = order
                for name in order:
                    dec, state = decoders[name], states[name][cell]
                    if cell.prefill:
                        _, wall, cpu, rise = _timed(lambda d=dec, b=batch: d.prefill(b))
                        out.add((name, cell.key, "prefill"), wall, cpu, rise)
                    tokens, wall, cpu, rise = _timed(lambda d=dec, s=state: d.decode(s, new_tokens))
                    dec.rewind(state)
                    out.add((name, cell.key, "decode"), wall, cpu, rise)
                    seen = first.setdefault((name, cell.key), tokens)
                    out.same_tokens &= bool(torch.equal(seen, tokens))
            out.orders.append(orders)
            if progress is not None:
                progress(f"round {r + 1}/{rounds}")
    return out


# -- summaries ------------------------------------------------------------------------------------------------------
def log_ratio_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """Mean of per-round log ratios and its Student-t interval, exponentiated: ``(ratio, low, high)``."""
    from scipy import stats

    logs = [v for v in values if math.isfinite(v)]
    if not logs:
        return math.nan, math.nan, math.nan
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return math.exp(mean), math.nan, math.nan
    half = stats.t.ppf(0.5 + confidence / 2, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def decode_bytes_per_token(weights: int, cache_per_token: float, context: float, batch: int) -> float:
    """Bytes one decoded token moves at batch ``batch``: the step's weights once per step, shared by the batch,
    plus its own sequence's cache at ``context`` tokens."""
    return weights / batch + cache_per_token * context


def summarise(timings: Timings, sizes: Mapping[str, Mapping[str, Any]], cells: Sequence[Cell],
              new_tokens: int, reference: str) -> list[dict]:
    """A row per (variant, phase, cell): median tokens/s (wall and CPU), every round's times, and against
    ``reference`` (the unpruned model) the speed-up with its interval on per-round log ratios, the bound and
    their ratio (``of_bound``) and the share of the bound's gain reached (``gain_share``: log speed-up over log
    bound). ``sizes`` holds per variant its ``decode_weight_bytes`` and per cell key its ``cache_bytes`` (after
    prefill, whole batch), ``context`` and ``flops`` (of the prefill)."""
    rows = []
    for name, size in sizes.items():
        for cell in cells:
            c = size["cells"][cell.key]
            per_seq = c["cache_bytes"] / (cell.batch * c["context"]) if c["context"] else 0.0
            mean_context = c["context"] + (new_tokens - 1) / 2 if c["cache_grows"] else c["context"]
            bytes_tok = decode_bytes_per_token(size["decode_weight_bytes"], per_seq, mean_context, cell.batch)
            for phase in PHASES:
                wall, cpu = _phase(timings.wall, name, cell, phase), _phase(timings.cpu, name, cell, phase)
                if not wall:
                    continue
                tokens = cell.batch * (c["context"] if phase == "prefill" else new_tokens)
                if phase == "total":
                    tokens = cell.batch * new_tokens  # a translation's speed: tokens out per second
                row = {"model": name, "phase": phase, "context": c["context"], "batch": cell.batch,
                       "new_tokens": new_tokens, "tokens": tokens, "rounds": len(wall),
                       "times": wall, "cpu_times": cpu, "seconds": statistics.median(wall),
                       "cpu_seconds": statistics.median(cpu),
                       "tokens_per_s": tokens / statistics.median(wall),
                       "cpu_tokens_per_s": tokens / statistics.median(cpu) if statistics.median(cpu) > 0 else None,
                       "cache_bytes": c["cache_bytes"], "cache_bytes_per_token": per_seq,
                       "bytes_per_token": bytes_tok if phase == "decode" else None,
                       "flops": c["flops"] if phase == "prefill" else None,
                       "peak_rise_bytes": _peak(timings.peak, name, cell, phase),
                       **{k: size[k] for k in ("spec", "heads", "kv_heads", "share", "kv_share", "params",
                                               "weight_bytes", "decode_weight_bytes")}}
                rows.append(row)
    _against(rows, reference, sizes, timings, new_tokens)
    return rows


def _phase(table: Mapping[tuple[str, str, str], list[float]], name: str, cell: Cell, phase: str) -> list[float]:
    if phase != "total":
        return list(table.get((name, cell.key, phase), []))
    pre, dec = table.get((name, cell.key, "prefill")), table.get((name, cell.key, "decode"))
    return [a + b for a, b in zip(pre, dec, strict=True)] if pre and dec else []


def _peak(peak: Mapping[tuple[str, str, str], int], name: str, cell: Cell, phase: str) -> int | None:
    found = [peak[k] for k in ((name, cell.key, p) for p in ("prefill", "decode") if phase in (p, "total"))
             if k in peak]
    return max(found) if found else None


def _bound(row: dict, ref: dict) -> float | None:
    """What the row's phase can at most gain over the reference's: bytes per decoded token, prefill FLOPs, or for
    a whole translation the reference's own split of time between the two, each part at its bound."""
    if row["phase"] == "decode":
        return ref["bytes_per_token"] / row["bytes_per_token"]
    if row["phase"] == "prefill":
        return ref["flops"] / row["flops"] if row["flops"] else None
    return None


def _against(rows: list[dict], reference: str, sizes, timings: Timings, new_tokens: int) -> None:
    refs = {(r["phase"], r["context"], r["batch"]): r for r in rows if r["model"] == reference}
    for r in rows:
        ref = refs.get((r["phase"], r["context"], r["batch"]))
        if ref is None:
            continue
        logs = [math.log(a / b) for a, b in zip(ref["times"], r["times"], strict=True) if a > 0 and b > 0]
        cpu_logs = [math.log(a / b) for a, b in zip(ref["cpu_times"], r["cpu_times"], strict=True) if a > 0 and b > 0]
        r["speedup"], r["ci_low"], r["ci_high"] = log_ratio_interval(logs)
        r["speedup_median"] = math.exp(statistics.median(logs)) if logs else None
        r["cpu_speedup"], r["cpu_ci_low"], r["cpu_ci_high"] = log_ratio_interval(cpu_logs)
        r["bound"] = _bound(r, ref)
    for r in rows:  # a whole translation's bound: the reference's time split, each part at its own bound
        if r["phase"] == "total":
            parts = {p: next((x for x in rows if x["model"] == r["model"] and x["phase"] == p
                              and x["batch"] == r["batch"] and x["context"] == r["context"]), None)
                     for p in ("prefill", "decode")}
            ref_parts = {p: refs.get((p, r["context"], r["batch"])) for p in ("prefill", "decode")}
            if all(parts.values()) and all(ref_parts.values()) and all(parts[p].get("bound") for p in parts):
                full = sum(ref_parts[p]["seconds"] for p in parts)
                r["bound"] = full / sum(ref_parts[p]["seconds"] / parts[p]["bound"] for p in parts)
    for r in rows:
        bound, speedup = r.get("bound"), r.get("speedup")
        ok = bound is not None and speedup is not None and math.isfinite(speedup)
        r["of_bound"] = speedup / bound if ok else None
        r["gain_share"] = math.log(speedup) / math.log(bound) if ok and abs(math.log(bound)) > 1e-9 else None


def _peak_method() -> str:
    if _cuda():
        return "rise of the CUDA allocator's peak over what it held at the start of each timed prefill or decode"
    if reset_peak():
        return ("rise of the resident high-water mark (VmHWM, reset through /proc/self/clear_refs) over the resident "
                "size at the start of each timed prefill or decode: what it added to the process (all variants' "
                "weights and caches resident)")
    return "not measured here"


def measure_decoding(models: Mapping[str, nn.Module], inputs: Mapping[Cell, Mapping[str, torch.Tensor]],
                     rounds: int, new_tokens: int, seed: int, reference: str = "full",
                     specs: Mapping[str, str] | None = None,
                     progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Everything for one model's variants: each cell prefilled once per variant under the FLOP counter (that
    cache is what decoding reads in every round), the rounds, and the rows (:func:`summarise`)."""
    if reference not in models:
        raise ValueError(f"the reference variant {reference!r} is not among {sorted(models)}")
    decoders = {name: decoder_of(m.eval()) for name, m in models.items()}
    states: dict[str, dict[Cell, State]] = {}
    sizes: dict[str, dict[str, Any]] = {}
    full_heads = head_counts(models[reference])
    with torch.no_grad():
        for name, dec in decoders.items():
            states[name], cells = {}, {}
            for cell, batch in inputs.items():
                state, flops = prefill_flops(dec, batch)
                states[name][cell] = state
                cells[cell.key] = {"context": state.length, "flops": flops, "cache_bytes": dec.cache_bytes(state),
                                   "cache_grows": dec.kind == "causal"}
            counts = head_counts(models[name])
            sizes[name] = {"cells": cells, **counts, "decode_weight_bytes": decode_weight_bytes(models[name]),
                           "weight_bytes": weight_bytes(models[name]),
                           "params": sum(p.numel() for p in _unique(models[name].parameters())),
                           "share": 1 - counts["heads"] / full_heads["heads"] if full_heads["heads"] else 0.0,
                           "kv_share": 1 - counts["kv_heads"] / full_heads["kv_heads"] if full_heads["kv_heads"]
                           else 0.0, "spec": (specs or {}).get(name, name)}
            if progress is not None:
                progress(f"{name}: prefilled {len(inputs)} cells")
    setup_peak = _status("VmHWM")  # every variant loaded and prefilled: the rounds reset the mark
    timings = run_rounds(decoders, inputs, states, rounds, new_tokens, seed, progress)
    rows = summarise(timings, sizes, list(inputs), new_tokens, reference)
    return {"rows": rows, "orders": timings.orders, "same_tokens_every_round": timings.same_tokens,
            "variants": {n: {k: v for k, v in s.items() if k != "cells"} for n, s in sizes.items()},
            "cells": [{"context": sizes[reference]["cells"][c.key]["context"], "batch": c.batch,
                       "prefill_timed": c.prefill} for c in inputs],
            "rounds": rounds, "new_tokens": new_tokens, "seed": seed, "reference": reference,
            "decoder": decoders[reference].kind,
            "peak_memory": {"method": _peak_method(), "process_peak_bytes": setup_peak},
            "pid_cpu_count": os.cpu_count()}
