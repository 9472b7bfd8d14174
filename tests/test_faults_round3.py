"""Round three of the fault probes (docs/FAULTS_ROUND3.md): inputs of the same kinds as issue 57's, on other
commands, files and values. One test per finding fixed, each failing on the code before its fix."""

from __future__ import annotations

import json
import math

import pytest
from test_readers import _lm_tree
from test_report import _write

from heads.report import RunTree
from heads.report.collect import RunTreeError


# -- the report's inputs ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "field,value,message",
    [
        # a ratio or seed edited apart from the label: read as another ratio's or seed's run, exit 0
        ("ratio", 0.5, r"run.label 'lm/baseline/none/0.0/seed1' contradicts .* spell 'lm/baseline/none/0.5/seed1'"),
        ("seed", 7, r"run.label .* spell 'lm/baseline/none/0.0/seed7'"),
        ("variant", "posthoc", r"run.label .* spell 'lm/posthoc/none/0.0/seed1'"),
        # of the wrong type: a traceback, or a seed truncated
        ("ratio", "abc", r"run.ratio 'abc' is not a number in \[0, 1\]"),
        ("ratio", math.nan, r"run.ratio nan is not a number"),
        ("seed", "1", r"run.seed '1' is not a whole number >= 0"),
        ("seed", 1.5, r"run.seed 1.5 is not a whole number"),
    ],
)
def test_a_run_identity_field_that_contradicts_its_label_is_refused(tmp_path, field, value, message):
    runs = _lm_tree(tmp_path)
    path = runs / "lm" / "baseline" / "none" / "0.0" / "seed1" / "summary.json"
    summary = json.loads(path.read_text())
    summary["run"][field] = value
    _write(path, summary)
    with pytest.raises(RunTreeError, match=r"^lm/baseline/none/0.0/seed1/summary.json: " + message):
        RunTree(runs)


def test_an_analysis_whose_seed_is_not_its_labels_is_refused(tmp_path):
    runs = _lm_tree(tmp_path)
    ident = {"label": "lm/analysis/trivial/seed0", "kind": "trivial", "task": "lm", "seed": 0}
    _write(runs / "lm" / "analysis" / "trivial" / "seed0.json", {"task": "lm", "baselines": {}, "run": ident})
    assert len(RunTree(runs).runs) == 2
    _write(runs / "lm" / "analysis" / "trivial" / "seed0.json",
           {"task": "lm", "baselines": {}, "run": {**ident, "seed": 3}})
    with pytest.raises(RunTreeError, match=r"seed0.json: run.label 'lm/analysis/trivial/seed0' contradicts its "
                                           r"run.seed 3"):
        RunTree(runs)
