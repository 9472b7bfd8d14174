"""One YAML reading (heads.yamlio) for every YAML the project reads: YAML 1.2 numbers (no octal, no base 60),
dates kept as the text written, a key given twice refused naming it, alias expansion bounded, a byte-order mark
and CRLF read as the same text; and every committed YAML file reads as it did before."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import refused

from heads.config import ConfigError, parse_overrides
from heads.resolve import resolve
from heads.yamlio import MAX_NODES, YamlError, check_configfile, load_yaml, read_config, read_yaml

ROOT = Path(__file__).resolve().parents[1]
# 342 bytes whose aliases expand to 9**9 (387 million) strings: PyYAML builds it as a shared graph in a
# millisecond, and whatever then walks it (json.dump, a deep copy into a config) never returns
BOMB = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True))



# -- numbers, booleans and dates as YAML 1.2 reads them ----------------------------------------------------------
@pytest.mark.parametrize("text,value", [
    ("010", 10), ("0o10", 8), ("0x1f", 31), ("-7", -7), ("+3", 3),  # octal only with its 0o prefix
    ("1:30", "1:30"), ("1:30.5", "1:30.5"),  # no base 60
    ("1e-4", 1e-4), ("1.5E3", 1500.0), (".5", 0.5), ("-.inf", -math.inf),  # exponents without a dot
    ("1_000", "1_000"),  # no digit separators
    ("yes", "yes"), ("off", "off"), ("True", True), ("false", False),  # true and false only
    ("2024-01-31", "2024-01-31"), ("2001-12-14 21:59:43.10 -5", "2001-12-14 21:59:43.10 -5"),  # dates as text
    ("!!timestamp 2024-01-31", "2024-01-31"), ("=", "="), ("~", None),
])
def test_scalars_read_as_yaml_12(text, value):
    assert load_yaml(f"k: {text}") == {"k": value}


def test_a_nan_reads_as_nan():
    assert math.isnan(load_yaml("k: .nan")["k"])


def test_an_override_means_the_number_written(capsys, tmp_path):
    assert parse_overrides(["train.steps=010", "train.lr=1e-4"]) == {"train": {"steps": 10, "lr": 1e-4}}
    assert resolve("lm", "smoke", None, ["train.steps=010"]).train.steps == 10
    with pytest.raises(ConfigError, match=r"train\.steps: expected int, got '1:30'"):
        resolve("lm", "smoke", None, ["train.steps=1:30"])
    out = tmp_path / "out"
    refused(["train", "--task", "lm", "--preset", "smoke", "--out", str(out), "train.steps=1:30"], capsys,
            "train.steps: expected int, got '1:30'")
    assert not out.exists()


def test_a_config_file_means_the_number_written(tmp_path):
    file = tmp_path / "c.yaml"
    file.write_text("train:\n  steps: 010\n")
    assert resolve("lm", "smoke", file, []).train.steps == 10
    file.write_text("train:\n  steps: 1:30\n")
    with pytest.raises(ConfigError, match=r"train\.steps: expected int, got '1:30'"):
        resolve("lm", "smoke", file, [])


def test_dates_in_a_config_stay_text_and_reach_json(tmp_path):
    file = tmp_path / "c.yaml"
    file.write_text("run: {label: mine, started: 2024-01-31, at: 2024-01-31 10:00:00}\n")
    config = resolve("lm", "smoke", file, [])
    assert config.run == {"label": "mine", "started": "2024-01-31", "at": "2024-01-31 10:00:00"}
    json.dumps(config.to_dict())  # YAML 1.1 made these datetime objects: "date is not JSON serializable"
    assert resolve("lm", "smoke", None, ["run.note=2024-02-01"]).run == {"note": "2024-02-01"}
    file.write_text("train:\n  steps: 2024-01-31\n")
    with pytest.raises(ConfigError, match=r"train\.steps: expected int, got '2024-01-31'"):
        resolve("lm", "smoke", file, [])


# -- keys given twice --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,key,first,line", [
    ("train:\n  lr: 0.1\ntrain:\n  steps: 4\n", "train", 1, 3),
    ("train:\n  lr: 0.1\n  lr: 0.2\n", "lr", 2, 3),
    ("{a: 1, b: 2, a: 3}", "a", 1, 1),
    ("- {x: 1}\n- x: 1\n  y: 2\n  x: 3\n", "x", 2, 4),
])
def test_a_key_given_twice_is_refused_naming_it(tmp_path, text, key, first, line):
    file = tmp_path / "c.yaml"
    file.write_text(text)
    with pytest.raises(YamlError) as exc:
        read_yaml(file)
    assert str(exc.value) == f"{file}, line {line}: key {key!r} is given twice (first on line {first}); keep one"


def test_a_merge_key_may_still_be_overridden():
    assert load_yaml("base: &b {x: 1, y: 2}\nrun:\n  <<: *b\n  x: 3\n")["run"] == {"x": 3, "y": 2}


def test_a_config_file_with_a_section_twice_is_refused_in_one_line(tmp_path, capsys):
    file = tmp_path / "c.yaml"
    file.write_text("train:\n  lr: 0.1\ntrain:\n  steps: 4\n")
    out = tmp_path / "out"
    refused(["train", "--task", "lm", "--preset", "smoke", "--out", str(out), "--config", str(file)], capsys,
            f"--config {file}, line 3: key 'train' is given twice (first on line 1)")
    assert not out.exists()
    with pytest.raises(ConfigError, match="key 'train' is given twice"):
        resolve("lm", "smoke", file, [])


def test_claims_given_twice_are_refused(tmp_path):
    from heads.report.spec import ClaimSpecError, load_claims

    rep = tmp_path / "reps" / "michel2019"
    rep.mkdir(parents=True)
    text = (ROOT / "replications" / "michel2019" / "claims.yaml").read_text()
    assert text.count("\nclaims:") == 1
    (rep / "claims.yaml").write_text(text + "claims: []\n")
    with pytest.raises(ClaimSpecError, match=r"claims\.yaml, line \d+: key 'claims' is given twice"):
        load_claims(rep / "claims.yaml", shared={})


def test_a_model_yml_with_a_key_twice_is_refused():
    from heads.bergamot.binary import BinaryModelError
    from heads.bergamot.convert import config_from

    with pytest.raises(BinaryModelError, match=r"model\.x\.bin, line 2: key 'dim-emb' is given twice"):
        config_from("dim-emb: 256\ndim-emb: 512\n", "model.x.bin")


def test_a_configfile_is_read_again_by_the_project_reader(tmp_path):
    from snakemake.common.configfile import load_configfile

    file = tmp_path / "extra.yaml"
    file.write_text("dag:\n  smoke: {seeds: [0]}\ndag:\n  smoke: {seeds: [1]}\n")
    with pytest.raises(YamlError, match=r"line 3: key 'dag' is given twice"):
        check_configfile(file, load_configfile(file))
    file.write_text("dag:\n  smoke:\n    tasks: {lm: {train: {steps: 010}}}\n")  # eight for Snakemake, ten here
    with pytest.raises(YamlError, match=r"dag\.smoke\.tasks\.lm\.train\.steps reads as 8 in Snakemake .* but 10"):
        check_configfile(file, load_configfile(file))
    file.write_text("dag:\n  smoke: {seeds: [0, 1]}\n")
    check_configfile(file, load_configfile(file))  # what both read alike passes
    file.write_text('{"dag": {"smoke": {}}, "dag": {}}')  # Snakemake reads JSON first
    with pytest.raises(YamlError, match="key 'dag' is given twice"):
        read_config(file)


@pytest.mark.skipif(shutil.which("snakemake") is None, reason="snakemake not installed")
def test_the_workflow_refuses_a_configfile_with_a_key_twice(tmp_path):
    extra = tmp_path / "extra.yaml"
    extra.write_text("dag:\n  smoke: {seeds: [0]}\ndag:\n  smoke: {seeds: [1]}\n")
    run = subprocess.run([shutil.which("snakemake"), "-n", "--config", "preset=smoke", "--configfile", str(extra)],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    out = run.stdout + run.stderr
    assert run.returncode != 0 and f"configfile {extra}, line 3: key 'dag' is given twice" in out, out[-2000:]


# -- aliases -----------------------------------------------------------------------------------------------------
def test_an_alias_bomb_is_refused(tmp_path, capsys):
    assert len(BOMB.encode()) < 420
    with pytest.raises(YamlError, match=f"aliases expand to more than {MAX_NODES:,} nodes"):
        load_yaml(BOMB)
    file = tmp_path / "c.yaml"
    file.write_text("run:\n  x: *i\n".join([BOMB, ""]))
    refused(["train", "--task", "lm", "--preset", "smoke", "--out", str(tmp_path / "o"), "--config", str(file)],
            capsys, f"--config {file}, line", "aliases expand to more than")
    with pytest.raises(YamlError, match="an alias refers to a node that contains it"):
        load_yaml("a: &a [1, *a]")


def test_modest_aliases_still_read():
    assert load_yaml("a: &a [1, 2]\nb: [*a, *a]\n") == {"a": [1, 2], "b": [[1, 2], [1, 2]]}


# -- byte-order marks, CRLF, bytes that are not text -------------------------------------------------------------
def test_a_byte_order_mark_and_crlf_read_as_the_same_text(tmp_path):
    from heads.report.spec import load_claims, shared_preconditions

    shared = shared_preconditions(ROOT / "replications")
    text = (ROOT / "replications" / "michel2019" / "claims.yaml").read_text()
    rep = tmp_path / "michel2019"
    rep.mkdir()
    (rep / "claims.yaml").write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode())
    claims = load_claims(rep / "claims.yaml", shared)
    assert claims and claims == load_claims(ROOT / "replications" / "michel2019" / "claims.yaml", shared)
    config = tmp_path / "c.yaml"
    config.write_bytes(b"\xef\xbb\xbftrain:\r\n  steps: 010\r\n  lr: 1e-4\r\n")
    assert read_yaml(config) == {"train": {"steps": 10, "lr": 1e-4}}
    assert resolve("lm", "smoke", config, []).train.steps == 10


def test_bytes_that_are_not_utf8_are_named(tmp_path):
    file = tmp_path / "c.yaml"
    file.write_bytes(b"train:\n  lr: \xff\n")
    with pytest.raises(YamlError, match=rf"{file}: not UTF-8 text \(byte 13"):
        read_yaml(file)


# -- every committed YAML reads as before ------------------------------------------------------------------------
COMMITTED = sorted(p.relative_to(ROOT).as_posix() for pattern in ("*.yaml", "*.yml") for p in ROOT.rglob(pattern)
                   if not {".venv", "results", "resources", ".snakemake", "node_modules"} & set(p.parts)
                   and not any(part.startswith(".") for part in p.relative_to(ROOT).parts))


def test_the_committed_files_are_found():
    assert {"heads/presets/smoke.yaml", "replications/michel2019/claims.yaml", "replications/preconditions.yaml",
            "replications/voita2019/settings.yaml", "workflow/config/default.yaml"} <= set(COMMITTED)


@pytest.mark.parametrize("name", COMMITTED)
def test_a_committed_yaml_reads_as_it_did(name):
    """PyYAML's safe_load (YAML 1.1, what read these files until now) and the project's reader agree on every
    committed file: none holds a value whose meaning changes (octal, base 60, yes/no, a date, a key twice)."""
    path = ROOT / name
    assert read_yaml(path) == yaml.safe_load(path.read_text())
