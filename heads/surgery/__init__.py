"""Head surgery for transformers-5 models: sites, gates, physical pruning, persistence."""

from heads.surgery.gates import (
    apply_gate,
    clear_gates,
    gates,
    get_gates,
    install,
    ones_gates,
    repeat_batch,
    set_gates,
)
from heads.surgery.model_sites import (
    LAYOUT_KEY,
    HeadLayout,
    Site,
    full_layout,
    head_layout,
    num_heads,
    site_map,
    site_module,
    sites,
)
from heads.surgery.persist import CheckpointError, load, read_state, save
from heads.surgery.prune import GroupedQueryError, apply_layout, prune_heads, ratio_layout, uniform_layout

__all__ = [
    "LAYOUT_KEY",
    "CheckpointError",
    "GroupedQueryError",
    "HeadLayout",
    "Site",
    "apply_gate",
    "apply_layout",
    "clear_gates",
    "full_layout",
    "gates",
    "get_gates",
    "head_layout",
    "install",
    "load",
    "num_heads",
    "ones_gates",
    "prune_heads",
    "read_state",
    "repeat_batch",
    "save",
    "set_gates",
    "site_map",
    "site_module",
    "sites",
    "ratio_layout",
    "uniform_layout",
]
