"""Making scores comparable across sites, for global selection."""

from __future__ import annotations

from heads.scoring.registry import Scores


def l2_normalize(scores: Scores) -> Scores:
    """Divide each site's scores by their l2 norm (Michel et al.'s per-layer step).

    An all-zero or empty site is returned unchanged (there is no direction to keep).
    """
    return {name: s / s.norm() if s.numel() and s.norm() > 0 else s.clone() for name, s in scores.items()}
