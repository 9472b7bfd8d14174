"""Analyses of (pruned) models: measured inference speed (Michel et al.'s B5) and head roles (Voita et al.)."""

from heads.analysis.inputs import forward_inputs
from heads.analysis.roles import HeadRole, head_roles, role_table, roles_result, summarize
from heads.analysis.speed import layout_at_ratio, measure_speed, speed_rows

__all__ = [
    "HeadRole",
    "forward_inputs",
    "head_roles",
    "layout_at_ratio",
    "measure_speed",
    "role_table",
    "roles_result",
    "speed_rows",
    "summarize",
]
