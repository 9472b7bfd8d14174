"""Prepared corpora: written once and atomically, checksummed, refused when damaged or empty."""

from __future__ import annotations

import json
import shutil

import pytest
from datasets import Dataset, DatasetDict

from heads.data import corpora, prepare

LIMIT = 40


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    return prepare.prepare("mt", "offline", root=tmp_path_factory.mktemp("data"), limit=LIMIT)


def test_layout_and_contents(prepared):
    assert prepared.name == f"mt-offline-{LIMIT}"
    files = {p.relative_to(prepared).as_posix() for p in prepared.rglob("*") if p.is_file()}
    assert {"CHECKSUM", "SOURCE.json", "dataset_dict.json", "train/data-00000-of-00001.arrow"} <= files
    listed = [line.split("  ")[1] for line in (prepared / "CHECKSUM").read_text().splitlines()]
    assert listed == sorted(listed) and "CHECKSUM" not in listed and "SOURCE.json" not in listed
    manifest = json.loads((prepared / "SOURCE.json").read_text())
    assert manifest["rows"] == {"train": LIMIT, "validation": LIMIT, "test": LIMIT}
    assert manifest["columns"] == ["src", "tgt"]
    data = prepare.load_prepared(prepared)
    assert data["test"][:] == corpora.mt(limit=LIMIT)["test"][:]
    assert not list(prepared.parent.glob(".*tmp*"))


def test_second_call_reuses_without_rebuilding(prepared, monkeypatch):
    before = prepare.checksum(prepared)
    stamp = (prepared / "CHECKSUM").stat().st_mtime_ns
    monkeypatch.setattr(prepare, "build", lambda *a, **k: pytest.fail("rebuilt an existing corpus"))
    assert prepare.prepare("mt", "offline", root=prepared.parent, limit=LIMIT) == prepared
    assert prepare.checksum(prepared) == before == prepare.verify(prepared)
    assert (prepared / "CHECKSUM").stat().st_mtime_ns == stamp


def test_same_request_same_checksum_anywhere(prepared, tmp_path):
    other = prepare.prepare("mt", "offline", root=tmp_path, limit=LIMIT)
    assert other != prepared
    assert prepare.checksum(other) == prepare.checksum(prepared)


def test_reuse_refuses_a_foreign_folder(tmp_path):
    (tmp_path / "lm-offline").mkdir()
    with pytest.raises(prepare.CorruptDataError, match="without a CHECKSUM"):
        prepare.prepare("lm", "offline", root=tmp_path)
    with pytest.raises(ValueError, match="hub_path .* apply to source=.hub. only"):
        prepare.prepare("mt", "offline", root=tmp_path, hub_path="/somewhere")


def test_reuse_refuses_a_folder_from_another_request(prepared, tmp_path):
    copy = _copy(prepared, tmp_path)
    manifest = json.loads((copy / "SOURCE.json").read_text())
    (copy / "SOURCE.json").write_text(json.dumps({**manifest, "task": "lm"}))
    with pytest.raises(ValueError, match="another request"):
        prepare.prepare("mt", "offline", root=tmp_path, limit=LIMIT)


def _copy(prepared, tmp_path):
    target = tmp_path / prepared.name
    shutil.copytree(prepared, target)
    return target


def test_corrupted_arrow_is_refused_naming_the_path(prepared, tmp_path):
    copy = _copy(prepared, tmp_path)
    arrow = copy / "train" / "data-00000-of-00001.arrow"
    raw = bytearray(arrow.read_bytes())
    raw[len(raw) // 2] ^= 0xFF  # one flipped byte inside the text data: Arrow itself would read it happily
    arrow.write_bytes(bytes(raw))
    with pytest.raises(prepare.CorruptDataError, match=str(copy)) as err:
        prepare.load_prepared(copy)
    assert "train/data-00000-of-00001.arrow" in str(err.value)


def test_truncated_or_missing_files_are_refused(prepared, tmp_path):
    copy = _copy(prepared, tmp_path)
    arrow = copy / "test" / "data-00000-of-00001.arrow"
    arrow.write_bytes(arrow.read_bytes()[:100])
    with pytest.raises(prepare.CorruptDataError, match="test/data-00000-of-00001.arrow"):
        prepare.load_prepared(copy)
    (copy / "validation" / "state.json").unlink()
    with pytest.raises(prepare.CorruptDataError, match="missing"):
        prepare.load_prepared(copy)
    (copy / "CHECKSUM").unlink()
    with pytest.raises(prepare.CorruptDataError, match="no CHECKSUM"):
        prepare.load_prepared(copy)


def test_interrupted_prepare_leaves_nothing_that_looks_complete(tmp_path, monkeypatch):
    def crash(folder):
        assert (folder / "train" / "data-00000-of-00001.arrow").is_file()  # the data was half-way written
        raise KeyboardInterrupt

    monkeypatch.setattr(prepare, "_listing", crash)
    with pytest.raises(KeyboardInterrupt):
        prepare.prepare("lm", "offline", root=tmp_path, limit=5)
    assert list(tmp_path.iterdir()) == []
    # A killed process cannot clean up: its hidden temporary folder must not be mistaken for the corpus.
    (tmp_path / ".lm-offline-5.tmp-999-deadbeef" / "train").mkdir(parents=True)
    monkeypatch.undo()
    path = prepare.prepare("lm", "offline", root=tmp_path, limit=5)
    assert path == tmp_path / "lm-offline-5"
    assert len(prepare.load_prepared(path)["train"]) == 5


def test_empty_split_is_refused(tmp_path, monkeypatch):
    empty = DatasetDict(
        {split: Dataset.from_dict({"text": [] if split == "test" else ["a"]}) for split in corpora.SPLITS}
    )
    monkeypatch.setattr(prepare, "build", lambda *a, **k: empty)
    with pytest.raises(ValueError, match="'test' split is empty"):
        prepare.prepare("lm", "offline", root=tmp_path)
    assert not any(tmp_path.iterdir())


def test_unknown_task_or_source(tmp_path):
    with pytest.raises(ValueError, match="unknown task"):
        prepare.prepare("qa", root=tmp_path)
    with pytest.raises(ValueError, match="unknown data source"):
        prepare.prepare("lm", "web", root=tmp_path)
    with pytest.raises(ValueError, match="for task 'cls'"):
        prepare.prepare("lm", "hub", root=tmp_path, dataset="mnli")


def test_folder_names():
    assert prepare.folder_name("lm", "offline") == "lm-offline"
    assert prepare.folder_name("cls", "offline", 200) == "cls-offline-200"
    assert prepare.folder_name("mt", "hub", None, "iwslt2017-de-en") == "mt-hub"
    assert prepare.folder_name("mt", "hub", 1000, "wmt14-en-fr") == "mt-hub-wmt14-en-fr-1000"


def test_a_task_reads_another_shipped_corpus_with_its_columns(tmp_path):
    """``data.dataset`` offline: cls on the overlap-matched pairs (the claims name the task, the preset picks the
    corpus); its own folder, the same rows as the corpus itself; a corpus of other columns is refused."""
    assert prepare.folder_name("cls", "offline", 40, "cls_hard") == "cls-offline-cls_hard-40"
    path = prepare.prepare("cls", root=tmp_path, limit=40, dataset="cls_hard")
    assert path.name == "cls-offline-cls_hard-40"
    assert prepare.load_prepared(path)["test"][:] == corpora.cls_hard(limit=40)["test"][:]
    assert prepare.prepare("cls", root=tmp_path, limit=40, dataset="cls") == tmp_path / "cls-offline-40"
    with pytest.raises(ValueError, match="has columns"):
        prepare.prepare("cls", root=tmp_path, dataset="mt")
    with pytest.raises(ValueError, match="not a shipped corpus"):
        prepare.prepare("cls", root=tmp_path, dataset="mnli")
    with pytest.raises(ValueError, match="source='hub' only"):
        prepare.prepare("cls", root=tmp_path, hub_path=tmp_path)
