"""Names come from the registries, never copied: the tasks, scorers, strategies and presets a setting may name are
looked up (without importing torch), no schema lists them, an unknown one is refused in one line naming the file,
key, value and the known ones, and a new scorer is one file that joins a replication's curves with no other edit."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from smoke_dag import copy_repo
from test_workflow import needs_snakemake, planned, snakemake, with_shipped_packages

from heads import names
from heads.registry import UnknownName, check_name, known
from heads.sheet import SheetError, check_config_names, preset_settings
from heads.yamlio import read_yaml

ROOT = Path(__file__).resolve().parents[1]
REPLICATIONS = ROOT / "replications"
CONFIG_SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
KINDS = ("task", "scorer", "strategy", "preset")


def test_name_lookups_do_not_import_torch():
    """Listing and checking every kind's names, and every preset's settings with them, imports no torch: the
    workflow checks them at parse time, where torch's import costs seconds."""
    code = textwrap.dedent("""
        import sys
        from heads.names import config_families
        from heads.presets import names as presets
        from heads.registry import check_name, known
        from heads.sheet import check_config_names, preset_settings
        listed = {kind: known(kind) for kind in ("task", "scorer", "strategy", "preset")}
        check_name("scorer", "importance", "here")
        for preset in presets():
            preset_settings("replications", preset)
        check_config_names({"preset": "smoke", "dag": {"tiny": {}}}, "workflow/schemas/config.schema.yaml")
        config_families()
        assert all(listed.values()), listed
        assert "torch" not in sys.modules, sorted(m for m in sys.modules if m.startswith("heads"))
        print("ok")
    """)
    env = {k: v for k, v in os.environ.items() if k != "HEADS_PLUGINS"}
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=env)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-3000:]


def test_the_names_read_from_source_are_the_registered_ones():
    """heads.names reads the @register_* decorators; importing the packages registers exactly those (a
    registration the source reading misses would be refused by the workflow's check)."""
    from heads.scoring.registry import _REGISTRY
    from heads.strategies import STRATEGIES
    from heads.tasks import TASKS

    for kind, registry in (("scorer", _REGISTRY), ("strategy", STRATEGIES), ("task", TASKS)):
        own = {name for name, entry in registry.items() if entry.__module__.startswith("heads.")}
        assert set(names.builtin(kind)) == own, kind
    assert set(names.builtin("preset")) == {p.stem for p in (ROOT / "heads" / "presets").glob("*.yaml")}


def _schemas() -> list[Path]:
    return sorted([*REPLICATIONS.glob("*.schema.yaml"), *REPLICATIONS.glob("*/settings.schema.yaml"),
                   *(ROOT / "docs" / "examples").glob("*/settings.schema.yaml"), CONFIG_SCHEMA])


def _enums(node) -> list[list]:
    if isinstance(node, dict):
        found = [node["enum"]] if isinstance(node.get("enum"), list) else []
        return found + [e for v in node.values() for e in _enums(v)]
    return [e for v in node for e in _enums(v)] if isinstance(node, list) else []


def test_no_schema_lists_the_names_of_a_registry():
    everything = {name for kind in KINDS for name in known(kind)}
    schemas = _schemas()
    assert len(schemas) >= 7
    for path in schemas:
        for enum in _enums(read_yaml(path)):
            assert not set(map(str, enum)) & everything, f"{path}: enum {enum} copies registered names"


def test_a_schema_marks_where_a_name_goes_and_the_registry_checks_it():
    """Every replication schema's task and scorer places carry ``registry:`` (what replaced the enums)."""
    for path in _schemas():
        text = path.read_text()
        if "curve_scorers" in text or "scorer:" in text or "  task:" in text:
            assert "registry:" in text or "const: lm" in text, path


@pytest.mark.parametrize("kind,value,says", [
    ("scorer", "magic", ["'magic'", "'importance'", "docs/ADDING_A_SCORER.md", "HEADS_PLUGINS"]),
    ("strategy", "magic", ["'magic'", "'oneshot'", "docs/ADDING_A_STRATEGY.md"]),
    ("task", "qa", ["'qa'", "'lm'", "'mt'"]),
    ("preset", "huge", ["'huge'", "'smoke'", "heads/presets/<name>.yaml"]),
])
def test_an_unknown_name_is_one_line_naming_where_the_value_and_the_known_ones(kind, value, says, monkeypatch):
    monkeypatch.delenv("HEADS_PLUGINS", raising=False)
    with pytest.raises(UnknownName) as info:
        check_name(kind, value, "file.yaml: key")
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"file.yaml: key: unknown {kind} '{value}'")
    assert all(s in message for s in says), message


def test_the_unknown_scorer_error_points_to_the_scorer_guide(monkeypatch):
    from heads.scoring import get_scorer

    monkeypatch.delenv("HEADS_PLUGINS", raising=False)
    with pytest.raises(UnknownName, match=r"unknown scorer 'magic'.*docs/ADDING_A_SCORER\.md"):
        get_scorer("magic")
    guide = (ROOT / "docs" / "ADDING_A_SCORER.md").read_text()
    for said in ("register_scorer", "HEADS_PLUGINS", "heads.scorers", "heads.params", "check_params", "Params"):
        assert said in guide, said


def _replications(tmp_path: Path, *names_: str) -> Path:
    root = tmp_path / "replications"
    for name in names_:
        shutil.copytree(REPLICATIONS / name, root / name)
    shutil.copy(REPLICATIONS / "longer_baseline.schema.yaml", root)
    return root


def test_a_bad_name_in_a_replications_settings_names_the_file_and_key(tmp_path):
    root = _replications(tmp_path, "michel2019", "overprovisioning")
    settings = root / "michel2019" / "settings.yaml"
    text = settings.read_text()
    settings.write_text(text.replace("curve_scorers: [", "curve_scorers: [magic, ", 1))
    assert settings.read_text() != text
    with pytest.raises(SheetError) as info:
        preset_settings(root, "smoke")
    message = str(info.value)
    assert message.startswith(f"{settings}: smoke.curve_scorers[0]: unknown scorer 'magic'; known scorers: ["), message
    assert "'importance'" in message and "\n" not in message
    settings.write_text(text)
    # a task as a mapping's key (overprovisioning's ratios per task), from the workflow config's overrides
    with pytest.raises(SheetError, match=r"^dag\.smoke\.overprovisioning\.ratios\.qa: unknown task 'qa'; known"):
        preset_settings(root, "smoke", {"overprovisioning": {"ratios": {"qa": [0.5]}}})
    # a preset's settings under a name no preset has would never run: refused
    settings.write_text(text + "\ntny: null\n")
    with pytest.raises(SheetError, match=rf"^{re.escape(str(settings))}: tny: unknown preset 'tny'; known presets"):
        preset_settings(root, "smoke")


@pytest.mark.parametrize("config,says", [
    ({"preset": "huge"}, "config: preset: unknown preset 'huge'; known presets: ["),
    ({"preset": "smoke", "dag": {"tny": {}}}, "config: dag.tny: unknown preset 'tny'"),
    ({"preset": "smoke", "job_resources": {"gpus": {}}}, "config: job_resources.gpus: unknown preset 'gpus'"),
    ({"preset": "smoke", "dag": {"smoke": {"tasks": {"qa": {}}}}}, "config: dag.smoke.tasks.qa: unknown task 'qa'"),
    ({"preset": "smoke", "dag": {"smoke": {"custom": [{"label": "x", "strategy": "oneshot", "task": "qa"}]}}},
     "config: dag.smoke.custom[0].task: unknown task 'qa'"),
])
def test_the_workflow_configs_names_are_checked_against_the_registries(config, says):
    with pytest.raises(SheetError) as info:
        check_config_names(config, CONFIG_SCHEMA)
    assert str(info.value).startswith(says), info.value


def test_a_preset_missing_from_a_replications_settings_means_not_run_there(tmp_path):
    root = _replications(tmp_path, "michel2019")
    shutil.copytree(ROOT / "docs" / "examples" / "scorers", root / "scorers")
    assert "pretrained" not in read_yaml(root / "scorers" / "settings.yaml")
    assert "scorers" not in preset_settings(root, "pretrained") and "scorers" in preset_settings(root, "smoke")
    with pytest.raises(SheetError, match=r"dag overrides name 'scorers', which does not run at preset 'gpu' \(.*"
                                         r"has no settings for it\)"):
        preset_settings(root, "gpu", {"scorers": {"ratio": 0.3}})


def test_the_families_a_config_builds_from_are_the_builders():
    """heads.config's check reads the families from heads.names, which heads.models' builders are keyed by."""
    from heads import models
    from heads.config import ConfigError, RunConfig, merge, validate

    builders = {name for name in vars(models) if callable(getattr(models, f"{name}_config", None))}
    assert set(models.BUILDERS) == set(names.FROM_CONFIG) == builders
    with pytest.raises(ConfigError, match=re.escape(f"model.family: 'gpt9' is not one of {names.config_families()}")):
        config = RunConfig(task="lm")
        merge(config, {"model": {"family": "gpt9"}})
        validate(config)


def test_site_kind_is_defined_once():
    from heads import site_patterns
    from heads.surgery import model_sites, site

    assert site.SiteKind is site_patterns.SiteKind is model_sites.SiteKind
    assert "SiteKind =" not in (ROOT / "heads" / "surgery" / "site.py").read_text()


# -- the workflow: dry runs ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def with_example(tmp_path_factory) -> Path:
    """A fresh copy of the project with docs/examples/scorers copied into replications/ and nothing else."""
    repo = copy_repo(tmp_path_factory.mktemp("repo"))
    shutil.copytree(ROOT / "docs" / "examples" / "scorers", repo / "replications" / "scorers")
    return repo


@needs_snakemake
@pytest.mark.parametrize("preset", names.builtin("preset"))
def test_the_example_replication_copied_in_plans_at_every_preset(with_example, preset, tmp_path):
    """Its settings name smoke, tiny, small and paper only: at pretrained and gpu it does not run, and every
    other replication still plans (it used to stop them all: "no settings for preset")."""
    run = snakemake("-n", "--forceall", "--config", f"preset={preset}", cwd=with_example,
                    env=with_shipped_packages(tmp_path))
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    runs_here = read_yaml(with_example / "replications" / "scorers" / "settings.yaml").get(preset) is not None
    assert runs_here == (preset in ("smoke", "tiny", "small", "paper"))
    assert ("scorers/claims.md" in out) == runs_here, out[-2000:]


@needs_snakemake
def test_a_new_scorer_is_one_file_and_joins_a_replications_curves(tmp_path):
    """A scorer written as one file outside the package (its parameters declared with heads.params.param),
    named in HEADS_PLUGINS and in michel2019's curve_scorers: accepted by the settings check and planned as
    curves by a dry run at the smoke preset, with no other edit."""
    plugin = tmp_path / "plugins" / "lowest_index.py"
    plugin.parent.mkdir()
    plugin.write_text(textwrap.dedent('''
        """One scorer, in one file."""
        from dataclasses import dataclass

        import torch

        from heads.params import param
        from heads.scoring.registry import Scorer, register_scorer
        from heads.surgery import head_layout


        @dataclass(frozen=True)
        class LowestIndexParams:
            scale: float = param(1.0, gt=0)


        @register_scorer("lowest_index")
        class LowestIndex(Scorer):
            """The first heads of a site score highest."""

            Params = LowestIndexParams

            def _score(self, model, batches, params):
                return {site: -params.scale * torch.arange(len(kept), dtype=torch.float)
                        for site, kept in head_layout(model).items()}
    '''))
    env = with_shipped_packages(tmp_path)
    env["PYTHONPATH"] = os.pathsep.join([str(plugin.parent), env["PYTHONPATH"]])
    env["HEADS_PLUGINS"] = "lowest_index"
    config = tmp_path / "mine.yaml"
    config.write_text("dag:\n  smoke:\n    michel2019: {curve_scorers: [importance, lowest_index]}\n")
    # the settings check alone (a subprocess: the plugin's registration stays out of this one)
    check = ("from heads.sheet import preset_settings; "
             "d = preset_settings('replications', 'smoke',"
             " {'michel2019': {'curve_scorers': ['importance', 'lowest_index']}});"
             "print(d['michel2019']['curve_scorers'])")
    run = subprocess.run([sys.executable, "-c", check], cwd=ROOT, env=env, capture_output=True, text=True)
    assert run.returncode == 0 and "lowest_index" in run.stdout, run.stderr[-2000:]
    jobs = planned(snakemake("-n", "-p", "--forceall", "--cores", "2", "--configfile", str(config),
                             "--config", "preset=smoke", env=env))
    ours = [j["shell"] for j in jobs if "--param scorer=lowest_index" in j["shell"]]
    assert ours and all(s.startswith("heads curve ") for s in ours), [j["shell"] for j in jobs][:5]
    # one curve per curve task and seed of michel2019 at smoke
    from heads.sheet import seeds_of

    dag = preset_settings(REPLICATIONS, "smoke")
    assert len(ours) == len(dag["michel2019"]["curve_tasks"]) * len(seeds_of(dag, "michel2019")) > 0, ours
    # without the plugin the same name is refused before any job, in one line pointing to the guide
    env.pop("HEADS_PLUGINS")
    run = snakemake("-n", "--configfile", str(config), "--config", "preset=smoke", env=env)
    out = run.stdout + run.stderr
    assert run.returncode != 0 and "Building DAG" not in out
    line = next(x for x in out.splitlines() if "unknown scorer 'lowest_index'" in x)
    assert "michel2019.curve_scorers[1]" in line and "docs/ADDING_A_SCORER.md" in line, line
