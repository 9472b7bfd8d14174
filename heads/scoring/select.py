"""Turn scores into a pruning decision: which original heads to remove, lowest scores first."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from heads.params import warn
from heads.scoring.registry import Scores
from heads.surgery import sites
from heads.surgery.site import round_half_up

Scope = Literal["global", "per_site"]


@dataclass(frozen=True)
class _Unit:
    """What can be removed on its own: one head, or one key/value group of query heads."""

    site: str
    positions: tuple[int, ...]
    score: float
    rank: int  # position in the seeded random permutation: breaks ties


def group_sizes(model: nn.Module) -> dict[str, int]:
    """Query heads per key/value group at each site (1 without grouped-query attention)."""
    return {s.name: s.group_size for s in sites(model)}


def select(
    scores: Scores,
    ratio: float,
    scope: Scope = "global",
    floor: int = 1,
    seed: int = 0,
    layout: Mapping[str, list[int]] | None = None,
    group_size: int | Mapping[str, int] | None = None,
) -> dict[str, list[int]]:
    """Original ids of the heads to remove per site: the lowest scores, ``ratio`` of the current heads.

    ``ratio`` in [0, 1) of the heads present now (pass ``head_layout(model)``
    as ``layout`` to map positions to original ids; without it positions are
    the ids). The count is exact: round-half-up of ``ratio * heads``, over all
    heads (``global``) or per site (``per_site``: each site loses
    round(ratio * its heads)). ``global`` compares raw scores across sites, so
    they must be on one scale (use normalised importance, or ``l2_normalize``).
    ``floor``: heads every site keeps (0 lets a site go empty). Equal scores
    are ordered by a random permutation seeded with ``seed``.

    ``group_size`` (int, or per site; see ``group_sizes(model)``): grouped-query
    models can physically lose only whole key/value groups, so with a size g > 1
    the units are groups of g neighbouring heads scored by their mean; the count
    is then rounded to whole groups (round(ratio * heads / g) groups), and
    ``floor`` is rounded up to whole groups.
    """
    if isinstance(ratio, bool) or not isinstance(ratio, numbers.Real) or not 0.0 <= ratio < 1.0:
        raise ValueError(f"ratio must be in [0, 1), got {ratio!r}")
    if scope not in ("global", "per_site"):
        raise ValueError(f"scope must be 'global' or 'per_site', got {scope!r}")
    if not isinstance(floor, int) or floor < 0:
        raise ValueError(f"floor must be an int >= 0, got {floor!r}")
    layout = {name: list(range(len(s))) for name, s in scores.items()} if layout is None else dict(layout)
    if set(layout) != set(scores):
        raise ValueError(
            f"scores and layout name different sites: only in scores {sorted(set(scores) - set(layout))}, "
            f"only in layout {sorted(set(layout) - set(scores))}"
        )
    sizes = _sizes(scores, group_size)
    units = _units(scores, layout, sizes, floor, seed)
    capacity = {name: len(layout[name]) // sizes[name] - math.ceil(floor / sizes[name]) for name in scores}
    chosen = (
        _global(units, capacity, sizes, ratio, floor, layout)
        if scope == "global"
        else _per_site(units, capacity, sizes, ratio, floor, layout)
    )
    if ratio > 0 and not chosen:  # said, not refused: a ratio is a share, and a small model may round it away
        total = sum(len(kept) for kept in layout.values())
        units = max(len(kept) // sizes[name] for name, kept in layout.items()) if scope == "per_site" else \
            total // max(sizes.values())  # what the ratio multiplies: a site's units, or all of them
        warn(f"ratio {ratio} of {total} heads ({scope}) rounds to no head: nothing is pruned; a ratio of at least "
             f"{0.5 / max(units, 1):.4g} removes one")
    remove: dict[str, list[int]] = {name: [] for name in scores}
    for unit in chosen:
        remove[unit.site].extend(layout[unit.site][p] for p in unit.positions)
    return {name: sorted(ids) for name, ids in remove.items()}


def _sizes(scores: Scores, group_size: int | Mapping[str, int] | None) -> dict[str, int]:
    if group_size is None or isinstance(group_size, int):
        sizes = {name: group_size or 1 for name in scores}
    else:
        sizes = {name: int(group_size.get(name, 1)) for name in scores}
    for name, g in sizes.items():
        if g < 1:
            raise ValueError(f"site {name}: group_size must be >= 1, got {g}")
        if len(scores[name]) % g:
            raise ValueError(f"site {name}: {len(scores[name])} heads do not split into key/value groups of {g}")
    return sizes


def _units(scores: Scores, layout, sizes: dict[str, int], floor: int, seed: int) -> list[_Unit]:
    raw = []
    for name, s in scores.items():
        s = torch.as_tensor(s, dtype=torch.float64).flatten()
        if len(s) != len(layout[name]):
            raise ValueError(f"site {name}: {len(s)} scores for {len(layout[name])} kept heads")
        if torch.isnan(s).any():
            raise ValueError(f"site {name}: scores contain NaN")
        if floor > len(s):
            raise ValueError(
                f"floor={floor} exceeds the {len(s)} heads of site {name}; use a floor of at most {len(s)}"
                + (" (floor=0 for sites that are already empty)" if not len(s) else "")
            )
        g = sizes[name]
        for u in range(len(s) // g):
            positions = tuple(range(u * g, (u + 1) * g))
            raw.append((name, positions, float(s[list(positions)].mean())))
    ranks = torch.randperm(len(raw), generator=torch.Generator().manual_seed(seed)).tolist()
    units = [_Unit(name, pos, score, rank) for (name, pos, score), rank in zip(raw, ranks, strict=True)]
    return sorted(units, key=lambda u: (u.score, u.rank))


def _global(units, capacity, sizes, ratio, floor, layout) -> list[_Unit]:
    total = sum(len(v) for v in layout.values())
    distinct = {sizes[name] for name, kept in layout.items() if kept}
    if len(distinct) > 1:
        raise ValueError(f"global selection needs one group size across sites, got {sorted(distinct)}; use per_site")
    g = distinct.pop() if distinct else 1
    wanted = round_half_up(ratio * total / g)
    reachable = sum(max(c, 0) for c in capacity.values())
    if wanted > reachable:
        raise ValueError(
            f"ratio {ratio} asks for {wanted * g} of {total} heads but floor={floor} lets at most "
            f"{reachable * g} go: the maximum reachable ratio is {reachable * g / total:.4f}"
        )
    left = dict(capacity)
    chosen = []
    for unit in units:  # lowest first; a site at its floor is skipped
        if len(chosen) == wanted:
            break
        if left[unit.site] > 0:
            left[unit.site] -= 1
            chosen.append(unit)
    return chosen


def _per_site(units, capacity, sizes, ratio, floor, layout) -> list[_Unit]:
    counts = {name: len(kept) // sizes[name] for name, kept in layout.items()}
    wanted = {name: round_half_up(ratio * n) for name, n in counts.items()}
    short = [name for name in wanted if wanted[name] > capacity[name]]
    if short:
        best = min(capacity[n] / counts[n] for n in counts if counts[n])
        raise ValueError(
            f"ratio {ratio} per site would leave sites {short} below floor={floor}; "
            f"the maximum reachable ratio is {best:.4f}"
        )
    chosen = []
    for unit in units:
        if wanted[unit.site] > 0:
            wanted[unit.site] -= 1
            chosen.append(unit)
    return chosen
