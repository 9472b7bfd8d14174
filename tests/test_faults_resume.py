"""The fault suite, identity and data side: a resume or a load into another model shape, tokenizer or data is
refused naming both; a swapped, edited or truncated tokenizer and an edited, malformed or empty local dataset
are named, never used stale. Each case asserts the one-line message, exit status 2 and an unchanged folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_faults_cli import SHORT, refused, tree

from heads import models
from heads.cli import main
from heads.surgery import save


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("resume")
    run = root / "run"
    data = root / "data"
    assert main(["train", "--task", "lm", "--preset", "smoke", "--out", str(run), f"data.root={data}", *SHORT]) == 0
    return {"root": root, "run": run, "data": data}


def train_argv(out: Path, data: Path, *overrides: str) -> list[str]:
    return ["train", "--task", "lm", "--preset", "smoke", "--out", str(out), f"data.root={data}", *SHORT, *overrides]


@pytest.fixture
def run(base, tmp_path) -> Path:
    """A copy of the finished run without its config.json: nothing but the checkpoint says what it was."""
    copy = tmp_path / "run"
    shutil.copytree(base["run"], copy)
    (copy / "config.json").unlink()
    return copy


@pytest.fixture
def data(base, tmp_path) -> Path:
    copy = tmp_path / "data"
    shutil.copytree(base["data"], copy)
    return copy


def test_a_resume_into_another_model_shape_is_refused_naming_both(run, base, capsys):
    before = tree(run)
    refused(train_argv(run, base["data"], "model.d=16"), capsys,
            f"{run / 'checkpoint'} belongs to another run than the config", "hidden_size 32 vs 16")
    assert tree(run) == before
    assert main(train_argv(run, base["data"])) == 0  # the right config resumes (and re-evaluates) the same run


def test_a_resume_onto_other_data_and_tokenizer_is_refused(run, base, capsys):
    before = tree(run)
    refused(train_argv(run, base["data"], "data.limit=500"), capsys, "data checksum", "tokenizer checksum")
    assert tree(run) == before


def test_a_model_folder_swapped_for_another_is_refused_on_load(base, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(base["run"], run)
    save(models.llama(vocab=300, d=16, layers=2, heads=4), run / "model")
    before = tree(run)
    refused(["evaluate", str(run)], capsys, "checkpoint vs model in", "hidden_size 32 vs 16")
    assert tree(run) == before


def test_a_swapped_or_truncated_tokenizer_is_named(base, data, tmp_path, capsys):
    file = data / "lm-offline-600" / "tokenizer-300.json"
    other = json.loads(file.read_text())
    vocab = other["model"]["vocab"]
    a, b = list(vocab)[10:12]
    vocab[a], vocab[b] = vocab[b], vocab[a]  # the same size and format, two ids exchanged
    file.write_text(json.dumps(other))
    out = tmp_path / "out"
    refused(train_argv(out, data), capsys, f"{file}: not the tokenizer trained here")
    file.write_text(file.read_text()[:100])
    file.with_suffix(".sha256").unlink()  # no digest to compare with: the file itself must fail loudly
    refused(train_argv(out, data), capsys, f"{file}: unreadable tokenizer")
    assert not out.exists()


def _local(folder: Path, rows: int = 40) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", rows), ("validation", 8), ("test", 8)):
        rows_ = [json.dumps({"text": f"in the beginning line {i} of {split} was short"}) + "\n" for i in range(n)]
        (folder / f"{split}.jsonl").write_text("".join(rows_))
    return folder


def _hub_argv(out: Path, tmp_path: Path, folder: Path) -> list[str]:
    return train_argv(out, tmp_path / "prepared", "data.source=hub", f"data.hub_path={folder}", "data.limit=null",
                      "data.seq_len=8", "train.steps=2")


def test_a_local_dataset_edited_in_place_is_refused_naming_the_file(tmp_path, capsys):
    folder = _local(tmp_path / "corpus")
    assert main(_hub_argv(tmp_path / "first", tmp_path, folder)) == 0
    with (folder / "train.jsonl").open("a") as f:
        f.write(json.dumps({"text": "a verse added later"}) + "\n")
    prepared = tmp_path / "prepared"
    before = tree(prepared)
    refused(_hub_argv(tmp_path / "second", tmp_path, folder), capsys, f"{folder} changed since", "train.jsonl edited")
    assert tree(prepared) == before and not (tmp_path / "second").exists()


@pytest.mark.parametrize(
    "content,fragment",
    [
        ('{"text": "fine"}\n{"text": \n', "validation.jsonl, line 2 (not JSON"),
        ("", "validation.jsonl holds no rows, so the 'validation' split is empty; fix or remove that file"),
    ],
)
def test_a_malformed_or_empty_local_split_is_named(tmp_path, capsys, content, fragment):
    folder = _local(tmp_path / "corpus")
    (folder / "validation.jsonl").write_text(content)
    refused(_hub_argv(tmp_path / "out", tmp_path, folder), capsys, fragment)
    assert not (tmp_path / "out").exists()
