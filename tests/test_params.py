"""Every parameter of a strategy or scorer declared, typed and in range, refused in one line before any work
(issue 57, class 2): the config's ``strategy.params``, a strategy's ``scorer_params`` and ``heads score --param``;
and every parameter the project itself ships passes the same check."""

import argparse
import dataclasses
import warnings
from pathlib import Path

import pytest

from heads.config import ConfigError
from heads.params import ParamError, ParamWarning, check_params
from heads.resolve import resolve
from heads.scoring.registry import _REGISTRY, check_scorer_params
from heads.strategies import STRATEGIES
from heads.strategies.registry import check_params as check_strategy_params

ROOT = Path(__file__).resolve().parents[1]


def refused(*overrides: str) -> str:
    with pytest.raises(ConfigError) as caught:
        resolve("lm", "smoke", None, list(overrides))
    message = str(caught.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("overrides,says", [
    (["strategy.name=curriculum", "strategy.params.waves=[0.1, 0.9]"],
     r"strategy.params.waves: 0.1 is not a wave: each is \[fraction of training in \(0, 1\), cosine threshold"),
    (["strategy.name=curriculum", "strategy.params.waves=[[0.1, 1.0]]"], "waves: .* is not a wave"),
    (["strategy.name=curriculum", "strategy.params.waves=[]"], "waves: .* at least 1 item"),
    (["strategy.name=curriculum", "strategy.params.probe_batches=0"], "strategy.params.probe_batches: must be >= 1"),
    (["strategy.name=dropout_regime", "strategy.params.probe_batches=0"], "probe_batches: must be >= 1"),
    (["strategy.name=oneshot", "strategy.params.scorer_params={bogus: 1}"],
     r"strategy.params.scorer_params.bogus: scorer 'similarity' has no parameters \['bogus'\]"),
    (["strategy.name=oneshot", "strategy.params.scorer_params={space: bogus}"],
     r"strategy.params.scorer_params.space: 'bogus' is not one of \['residual', 'value'\]"),
    (["strategy.name=oneshot", "strategy.params.scorer=ablation", "strategy.params.scorer_params={layers: [7]}"],
     r"strategy.params.scorer_params.layers: \[7\] are not layers of this model \(0 to 1\)"),
    (["strategy.name=l0", "strategy.params.lr=-1"], "strategy.params.lr: must be >= 0, got -1.0"),
    (["strategy.name=l0", "strategy.params.lam=.inf"], "strategy.params.lam: inf is not a finite number"),
    (["strategy.name=dropout_regime", "strategy.params.threshold=.nan"],
     "strategy.params.threshold: nan is not a finite number"),
    (["strategy.name=dropout_regime", "strategy.params.threshold=1.0"], r"threshold: 1.0 is outside \[-1, 1\)"),
    (["strategy.name=early", "strategy.params.ratio=0.3", "strategy.params.at_step=31"],
     r"strategy.params.at_step: 31 is beyond the run's 30 steps \(train.steps\)"),
    (["strategy.name=oneshot", "strategy.params.ratio=0.3", "strategy.params.proxy_steps=31"],
     r"strategy.params.proxy_steps: 31 is beyond the run's 30 steps \(train.steps\)"),
    (["strategy.name=curriculum", "strategy.params.max_ratio=0.3", "strategy.params.waves=[[0.1, 0.9], [0.11, 0.8]]"],
     "strategy.params.waves: .* share steps of the run's 30"),
    (["strategy.name=iterative", "strategy.params.orders=0"], "strategy.params.orders: must be >= 1, got 0"),
    (["strategy.name=posthoc", "strategy.params.seed=-1"], "strategy.params.seed: must be >= 0"),
    (["strategy.name=scratch", "strategy.params.layout={a: [0, 0]}"], "strategy.params.layout: 'a'"),
])
def test_a_bad_strategy_parameter_is_refused_naming_it(overrides, says):
    assert refused(*overrides)  # one line, a ConfigError
    with pytest.raises(ConfigError, match=says):
        resolve("lm", "smoke", None, overrides)


@pytest.mark.parametrize("content,says", [
    ("[1, 2]", "holds a JSON list, not a head_layout"),
    ('{"head_layout": [1]}', "holds no head_layout"),
    ("not json", "is not readable JSON"),
    ('{"head_layout": {"s": ["x"]}}', "is not a list of distinct head ids"),
])
def test_scratch_layout_from_must_name_a_file_holding_a_layout(tmp_path, content, says):
    file = tmp_path / "layout.json"
    file.write_text(content)
    message = refused("strategy.name=scratch", f"strategy.params.layout_from={file}")
    assert message.startswith("strategy.params.layout_from: "), message
    assert says in message


@pytest.mark.parametrize("scorer,param,says", [
    ("similarity", "space=bogus", r"--param space: 'bogus' is not one of \['residual', 'value'\]"),
    ("ablation", "chunk=0", "--param chunk: must be >= 1, got 0"),
    ("ablation", "alpha=1.5", r"--param alpha: 1.5 is outside \(0, 1\)"),
    ("ablation", "layers=[]", "--param layers: .* at least 1 item"),
    ("importance", "normalize=maybe", "--param normalize: expected bool, got 'maybe'"),
    ("importance", "normalize=yes", "--param normalize: expected bool"),
    ("importance", "normalise=true", r"--param normalise: scorer 'importance' has no parameters \['normalise'\]"),
    ("random", "seed=1.5", "--param seed: expected int"),
])
def test_heads_score_refuses_a_bad_param_before_loading_anything(tmp_path, scorer, param, says):
    from heads.cli import main
    from heads.cli.common import UserError

    missing = tmp_path / "no-such-run"  # the parameters are refused before the source is even looked at
    with pytest.raises(UserError, match=says):
        main(["score", str(missing), "--scorer", scorer, "--param", param])


def test_heads_score_refuses_layers_the_model_does_not_have():
    from conftest import build

    from heads.cli.pruning import _scorer_params

    args = argparse.Namespace(scorer="ablation", param=["layers=[7]"])
    assert _scorer_params(args) == {"layers": [7]}  # typed, and no model yet to hold it against
    with pytest.raises(ConfigError, match=r"--param layers: \[7\] are not layers of this model \(0 to 1\)"):
        _scorer_params(args, build("llama", layers=2))
    assert _scorer_params(argparse.Namespace(scorer="ablation", param=["layers=[1]"]), build("llama", layers=2))


def test_scorer_params_are_typed_so_a_boolean_is_a_boolean():
    typed = check_scorer_params("importance", {"normalize": False})
    assert typed.normalize is False
    assert check_scorer_params("ablation", {"layers": [0, 1]}).layers == (0, 1)
    with pytest.raises(ParamError):  # a TypeError as well, for the callers that caught one
        check_scorer_params("importance", {"normalize": "maybe"})


@pytest.mark.parametrize("overrides,says", [
    (["strategy.name=early", "strategy.params.at_step=5"], "strategy 'early' does nothing"),
    (["strategy.name=early", "strategy.params.ratio=0.3"], "acts only when at_step > 0 and ratio > 0"),
    (["strategy.name=oneshot", "strategy.params.proxy_steps=5"], "strategy 'oneshot' does nothing"),
    (["strategy.name=curriculum", "strategy.params.probe_batches=8"], "acts only when max_ratio > 0"),
    (["strategy.name=dropout_regime", "strategy.params.threshold=0.5"], "acts only when high is set"),
    (["strategy.name=l0", "strategy.params.lr=0.01"], "acts only when lam > 0"),
])
def test_parameters_that_leave_a_strategy_idle_are_warned_about(overrides, says):
    with pytest.warns(ParamWarning, match=says):
        resolve("lm", "smoke", None, overrides)


def test_a_strategy_at_its_defaults_or_acting_is_not_warned_about():
    with warnings.catch_warnings():
        warnings.simplefilter("error", ParamWarning)
        for overrides in ([], ["strategy.name=early", "strategy.params.at_step=30", "strategy.params.ratio=0.3"],
                          ["strategy.name=oneshot", "strategy.params.proxy_steps=30", "strategy.params.ratio=0.3"]):
            resolve("lm", "smoke", None, overrides)


def test_every_declared_default_passes_the_check():
    for name, cls in STRATEGIES.items():
        params = cls.Params()
        values = {f.name: getattr(params, f.name) for f in dataclasses.fields(cls.Params)}
        check_params(cls.Params, values, "strategy.params.", name)
        check_strategy_params(name, values)
    for name, cls in _REGISTRY.items():
        params = cls.Params()
        check_scorer_params(name, {f.name: getattr(params, f.name) for f in dataclasses.fields(cls.Params)})


def test_a_refused_start_writes_nothing_so_the_corrected_command_is_not_refused(tmp_path, data_root):
    """The oneshot scorer's parameters once failed at step 0, after config.json was written: the corrected
    command was then refused as another config."""
    from heads.cli import main
    from heads.cli.common import UserError

    out = tmp_path / "run"
    base = ["train", "--task", "lm", "--preset", "smoke", "--out", str(out), f"data.root={data_root}",
            "train.progress=false", "strategy.name=oneshot", "strategy.params.ratio=0.25"]
    for bad in ("strategy.params.scorer_params={bogus: 1}", "strategy.params.proxy_steps=1000",
                "strategy.params.probe_batches=0"):
        with pytest.raises(UserError):
            main([*base, bad])
        assert not out.exists()


# -- what the project ships passes the same check ----------------------------------------------------------
def _committed_entries():
    from heads.presets import names
    from heads.sheet import SheetError, build, preset_settings

    roots = [ROOT / "replications", ROOT / "docs" / "examples"]
    for preset in names():
        for root in roots:
            try:
                dag = preset_settings(root, preset)
            except SheetError:  # a replication not made for this preset
                continue
            for entry in build(root, dag).runs.values():
                yield preset, entry


def test_every_parameter_in_the_committed_configs_passes():
    from heads.presets import names, preset_for
    from heads.presets import preset as load_preset
    from heads.resolve import check_run
    from heads.sheet.commands import as_word, flatten

    checked = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", ParamWarning)  # nothing shipped leaves its strategy idle either
        for preset in names():  # the presets themselves
            for task in load_preset(preset)["tasks"]:
                if "strategy" in preset_for(task, preset):
                    check_run(resolve(task, preset))
        for preset, e in _committed_entries():
            name = {"train": e.strategy, "prune": e.strategy, "curve": "iterative"}.get(e.command)
            if name is None or (name == "none" and not e.params):
                continue
            # a path to another run's file (scratch's layout_from) exists only once that run has run
            params = {k: v for k, v in e.params.items() if f"strategy.params.{k}" not in e.paths}
            if e.command == "train":  # against the run it belongs to: its steps, its model
                config = resolve(e.task, preset, None, [f"{k}={as_word(v)}" for k, v in flatten(e.config)])
                config.strategy.name, config.strategy.params = name, params
                check_run(config)
            else:  # an analysis of a trained run: its parameters alone (the run's config is read then)
                check_strategy_params(name, params)
            checked += 1
    assert checked > 50
