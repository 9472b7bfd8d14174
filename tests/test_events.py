"""The events a run logs: one typed schema that the trainer and strategies write and the report reads."""

import json
import math

import pytest

from heads.events import Dropout, L0Gates, Prune, Redundancy, Wave, first_action, read


@pytest.mark.parametrize("event", [
    Prune(step=5, removed={"model.layers.0.self_attn": [1, 2]}, reason="oneshot", heads=6, param_mb_before=1.5,
          optimizer_mb_before=3.0, param_mb_after=1.2, optimizer_mb_after=2.4),
    Dropout(step=0, attention=0.25, residual=0.0),
    Redundancy(step=40, redundancy_ratio=0.2, max_similarity=0.91, attention_dropout=0.25, threshold=0.85,
               pooling="mean"),
    Wave(step=40, threshold=0.9, pooling="mean", max_similarity=0.43, removed=0),
    L0Gates(step=400, gates={"model.encoder.layers.0.self_attn": [1.0, 0.0, 0.7]}),
])
def test_an_event_reads_back_as_it_was_written_through_a_json_line(event):
    line = json.loads(json.dumps(event.record(), sort_keys=True))  # as heads.train.metrics_log.MetricsLog writes it
    assert line["event"] == event.KIND and line["step"] == event.step
    assert read([line], type(event)) == [event]
    others = [k for k in (Prune, Dropout, Redundancy, Wave, L0Gates) if k is not type(event)]
    assert all(read([line], k) == [] for k in others)


def test_damaged_records_are_left_out_and_unreadable_numbers_read_as_unknown():
    lines = [
        {"event": "prune", "step": "5", "removed": {}},  # a step that is not an integer
        {"event": "prune", "step": True, "removed": {}},
        {"event": "prune", "step": 7},  # no removed heads: not a prune
        {"event": "prune", "step": 9, "removed": {}, "heads": 4, "optimizer_mb_after": math.nan, "extra": 1},
        {"event": "redundancy", "step": 3, "redundancy_ratio": "high", "max_similarity": 0.5},
    ]
    (prune,) = read(lines, Prune)
    assert prune.step == 9 and prune.heads == 4 and prune.optimizer_mb_after is None
    (probe,) = read(lines, Redundancy)
    assert probe.redundancy_ratio is None and probe.max_similarity == 0.5


def test_the_warm_up_window_ends_at_the_first_action_after_the_start():
    assert first_action([Dropout(step=0, attention=0.25).record(), Wave(step=40).record(),
                         Prune(step=20, removed={}).record()]) == 20
    assert first_action([Dropout(step=0, attention=0.1).record()]) is None
    assert first_action([]) is None
