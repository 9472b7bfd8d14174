"""One rounding of a ratio into heads: the scratch strategy and the speed analysis agree (they used to differ:
H = 10, r = 0.25 gave 8 heads to one and 7 to the other)."""

import pytest

from heads import models
from heads.analysis.speed import layout_at_ratio
from heads.strategies import build_strategy
from heads.surgery import ratio_layout


@pytest.mark.parametrize("ratio,kept", [(0.25, 7), (0.5, 5), (0.35, 6), (0.0, 10), (1.0, 0)])
def test_scratch_and_speed_keep_the_same_heads(ratio, kept):
    model = models.llama(layers=2, d=40, heads=10, vocab=64)
    layout = ratio_layout(model, ratio)
    assert all(v == list(range(kept)) for v in layout.values()), layout
    assert layout_at_ratio(model, ratio) == layout
    if ratio < 1.0:
        scratch = build_strategy("scratch", {"ratio": ratio}).params.target(model)
        assert scratch in (None, layout) and (scratch is not None or ratio == 0.0)


def test_grouped_query_sites_lose_whole_groups():
    model = models.llama(layers=1, d=32, heads=8, kv_heads=2, vocab=64)
    (kept,) = ratio_layout(model, 0.25).values()  # a quarter of 2 groups rounds up to one group of 4 heads
    assert kept == [0, 1, 2, 3]
