"""A positive control for redundancy: plant a duplicate in a copy of the model and check the measurement finds it.

A similarity claim ("few units have a partner above 0.85") can only be refuted by a measurement that would have seen
a duplicate had there been one. So a unit is copied into a sibling of the same site (a key/value group: its
key/value head, its query heads' query rows and their output-projection columns; a query head: its query rows and
output columns, and its key/value rows too in a multi-head model, where each head has its own; and what the family
keeps per head beside them, MPNet's column of its shared position bias) in a deep copy of the model, and the same
similarity runs on the copy: the planted pair must come out redundant (cosine above the threshold; for attention
patterns, JS below its threshold). The weights are reached through the family's projections
(:meth:`heads.surgery.families.Family.projections`), so every family head surgery supports works.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

from heads.analysis.redundancy import unit_groups
from heads.scoring.js import SAME_PATTERN, js_sums
from heads.scoring.similarity import SimilarityParams, mean_matrices, similarity_sums
from heads.surgery import Site, head_layout, sites
from heads.surgery.families import family_of

PLANTED = (0, 1)  # unit 0 copied into unit 1: under grouped-query attention, heads 0 and 1 share group 0


def unit_count(model: nn.Module, site: Site, unit: str) -> int:
    """How many units of ``unit`` the site holds now (its kept heads, or their key/value groups)."""
    heads = len(head_layout(model)[site.name])
    return heads // site.group_size if unit == "group" else heads


def control_site(model: nn.Module, units: Sequence[str], name: str | None = None) -> Site:
    """The site to plant in: ``name`` (a module path or a label such as ``L15.causal``), else the middle one
    of the sites that hold two units of every kind asked for."""
    found = [s for s in sites(model) if all(unit_count(model, s, u) >= 2 for u in units)]
    if name:
        chosen = next((s for s in sites(model) if name in (s.name, s.label)), None)
        if chosen is None:
            raise ValueError(f"control: no site {name!r}; sites are {[s.label for s in sites(model)]}")
        if chosen not in found:
            raise ValueError(f"control: site {chosen.label} has fewer than two {'/'.join(units)}s to plant a "
                             "duplicate in")
        return chosen
    if not found:
        raise ValueError(f"control: no site has two {'/'.join(units)}s to plant a duplicate in")
    return found[len(found) // 2]


def plant_duplicate(model: nn.Module, site: Site, unit: str, a: int, b: int) -> None:
    """Copy unit ``a`` of ``site`` into unit ``b`` (positions among its kept heads or groups), in place.

    A query head of a grouped-query model keeps its group's keys and values: ``b`` must share ``a``'s group
    (then only query rows and output columns differ between them)."""
    if unit not in ("head", "group"):
        raise ValueError(f"unit must be 'head' or 'group', got {unit!r}")
    count = unit_count(model, site, unit)
    if a == b or not (0 <= a < count and 0 <= b < count):
        raise ValueError(f"control: cannot copy {unit} {a} into {b} at {site.label} ({count} {unit}s)")
    g, d = site.group_size, site.head_dim
    span = g if unit == "group" else 1  # query heads per unit
    if unit == "head" and g > 1 and a // g != b // g:
        raise ValueError(f"control: heads {a} and {b} of {site.label} are in different key/value groups")
    try:
        family = family_of(model)
        proj = family.projections(model, site)
    except (AttributeError, ValueError) as exc:
        raise ValueError(f"control: cannot reach the projections of {site.label}: {exc}") from None

    def rows(i: int, width: int) -> slice:
        return slice(i * width * d, (i + 1) * width * d)

    with torch.no_grad():
        copies = [(proj.q, rows(a, span), rows(b, span))]
        if unit == "group" or g == 1:  # a group's (or a multi-head model's own) key/value head goes with it
            copies += [(proj.k, rows(a, 1), rows(b, 1)), (proj.v, rows(a, 1), rows(b, 1))]
        for lin, src, dst in copies:
            lin.weight[dst] = lin.weight[src].clone()
            if lin.bias is not None:
                lin.bias[dst] = lin.bias[src].clone()
        src, dst = rows(a, span), rows(b, span)
        proj.o.weight[:, dst] = proj.o.weight[:, src].clone()
    module = model.get_submodule(site.name)
    for i in range(span):  # what a head holds outside its projections (MPNet: its column of a shared bias)
        family.copy_head(module, a * span + i, b * span + i)


def planted_control(model: nn.Module, batches: Sequence[Mapping[str, Any]], *, units: Sequence[str],
                    spaces: Sequence[str], poolings: Sequence[str], threshold: float, js: bool = False,
                    js_threshold: float = SAME_PATTERN, site: str | None = None) -> dict:
    """Plant a duplicate per unit (a query head too when ``js``) in a deep copy of ``model`` at one site and
    measure it as :func:`heads.analysis.redundancy.redundancy` does: ``{site, layer, planted, rows}``, a row per
    (unit, space, pooling) with ``found`` (the planted pair's cosine above ``threshold``) and ``similarity``
    (that cosine), and with ``js`` a row for ``space: "attention"`` with ``found`` (JS below ``js_threshold``)
    and ``js``. ``planted`` is the pair's positions among the site's units (group or kept head)."""
    chosen = control_site(model, sorted({*units, *(["head"] if js else [])}), site)
    a, b = PLANTED
    rows = []
    for unit in dict.fromkeys([*units, *(["head"] if js else [])]):
        twin = copy.deepcopy(model)
        plant_duplicate(twin, chosen, unit, a, b)
        if unit in units:
            groups = {unit: unit_groups(twin, unit)}
            for sp in spaces:
                for pooling in poolings:
                    (part,) = similarity_sums(twin, batches, SimilarityParams(space=sp, pooling=pooling), groups)[unit]
                    value = float(mean_matrices(part)[chosen.name][a, b])
                    rows.append({"unit": unit, "pooling": pooling, "space": sp, "planted": [a, b],
                                 "found": value > threshold, "similarity": value})
        if js and unit == "head":
            (part,) = js_sums(twin, batches)
            value = float(mean_matrices(part)[chosen.name][a, b])
            rows.append({"unit": "head", "pooling": "token", "space": "attention", "planted": [a, b],
                         "found": value < js_threshold, "js": value})
        del twin
    return {"site": chosen.name, "label": chosen.label, "layer": chosen.layer, "planted": [a, b],
            "threshold": threshold, **({"js_threshold": js_threshold} if js else {}), "rows": rows}


def attach(rows: list[dict], control: Mapping[str, Any]) -> list[dict]:
    """Each measured row with its control's outcome beside it: ``control_found`` and ``control_similarity``
    (cosine rows) or ``control_js`` (the attention row), so one row answers "was the measurement able to see a
    duplicate?" next to what it found."""
    found = {(c["unit"], c["pooling"], c["space"]): c for c in control["rows"]}
    out = []
    for r in rows:
        c = found.get((r["unit"], r["pooling"], r["space"]))
        if c is None:
            out.append(r)
            continue
        key = "control_js" if r["space"] == "attention" else "control_similarity"
        out.append({**r, "control_found": c["found"], key: c["js" if r["space"] == "attention" else "similarity"]})
    return out
