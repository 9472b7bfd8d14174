"""Hub datasets through local folders in the hub repositories' own layout, and a clear error without network."""

from __future__ import annotations

import json

import datasets
import huggingface_hub
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from heads.data import hub, prepare


def _parquet(path, columns: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), path)


def _jsonl(path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


@pytest.fixture
def cache(tmp_path):
    return str(tmp_path / "hf-cache")


@pytest.fixture
def wikitext(tmp_path):
    """Salesforce/wikitext: <config>/<split>-NNNNN-of-NNNNN.parquet, a column ``text`` of raw lines."""
    root = tmp_path / "wikitext"
    lines = ["", " = Valkyria Chronicles III = \n", "", " Senjō no Valkyria 3 is a game . \n", " It met praise . \n"]
    _parquet(root / "wikitext-103-raw-v1" / "train-00000-of-00002.parquet", {"text": lines})
    _parquet(root / "wikitext-103-raw-v1" / "train-00001-of-00002.parquet", {"text": [" = Tower Building = \n"]})
    _parquet(root / "wikitext-103-raw-v1" / "validation-00000-of-00001.parquet", {"text": ["", " Valid line . \n"]})
    _parquet(root / "wikitext-103-raw-v1" / "test-00000-of-00001.parquet", {"text": [" Test line . \n", ""]})
    # Another configuration in the same repository must not leak in.
    _parquet(root / "wikitext-2-raw-v1" / "train-00000-of-00001.parquet", {"text": [" wrong config \n"]})
    return root


def _pairs(a: str, b: str, n: int, tag: str) -> list[dict]:
    return [{a: f"{a} {tag} {i}", b: f"{b} {tag} {i}"} for i in range(n)]


def test_wikitext_layout(wikitext, cache):
    data = hub.load("lm", path=wikitext, cache_dir=cache)
    assert data["train"]["text"] == [
        "= Valkyria Chronicles III =",
        "Senjō no Valkyria 3 is a game .",
        "It met praise .",
        "= Tower Building =",
    ]
    assert data["validation"]["text"] == ["Valid line ."]
    assert data["test"]["text"] == ["Test line ."]
    assert (
        hub.load("lm", path=wikitext, cache_dir=cache, limit=2)["train"]["text"][1] == "Senjō no Valkyria 3 is a game ."
    )


@pytest.mark.parametrize("layout", ["{split}/0000.parquet", "iwslt2017-{split}.parquet"])
def test_iwslt_parquet_export_layouts(tmp_path, cache, layout):
    """IWSLT/iwslt2017 on refs/convert/parquet: <config>/<split>/NNNN.parquet (older: <config>/<name>-<split>)."""
    root = tmp_path / "iwslt"
    for split, n in {"train": 3, "validation": 2, "test": 1}.items():
        rows = _pairs("de", "en", n, split)
        _parquet(root / "iwslt2017-de-en" / layout.format(split=split), {"translation": rows})
        _parquet(root / "iwslt2017-en-de" / layout.format(split=split), {"translation": _pairs("en", "de", 1, "x")})
    data = hub.load("mt", path=root, cache_dir=cache)
    assert data["train"].column_names == ["src", "tgt"]
    assert data["train"][0] == {"src": "de train 0", "tgt": "en train 0"}  # German -> English
    assert {split: len(d) for split, d in data.items()} == {"train": 3, "validation": 2, "test": 1}


def test_wmt14_parquet_and_jsonl(tmp_path, cache):
    """wmt/wmt14: fr-en/<split>-NNNNN-of-NNNNN.parquet with translation {"fr", "en"}; English -> French."""
    for kind in ("parquet", "jsonl"):
        root = tmp_path / f"wmt14-{kind}"
        for split, n in {"train": 4, "validation": 2, "test": 2}.items():
            rows = [{"fr": f"fr {split} {i}", "en": f"en {split} {i}"} for i in range(n)]
            rows.append({"fr": "", "en": "an empty side is no pair"})
            file = root / "fr-en" / f"{split}-00000-of-00001.{kind}"
            if kind == "parquet":
                _parquet(file, {"translation": rows})
            else:
                _jsonl(file, [{"translation": r} for r in rows])
        _parquet(root / "de-en" / "train-00000-of-00001.parquet", {"translation": _pairs("de", "en", 1, "x")})
        data = hub.load("mt", dataset="wmt14-en-fr", path=root, cache_dir=cache)
        assert data["train"]["src"] == [f"en train {i}" for i in range(4)], kind
        assert data["test"][1] == {"src": "en test 1", "tgt": "fr test 1"}
        assert len(data["validation"]) == 2


def test_mnli_splits_and_labels(tmp_path, cache):
    """nyu-mll/glue: mnli/<split>-00000-of-00001.parquet with premise, hypothesis, label, idx."""
    root = tmp_path / "glue"
    for split, labels in {
        "train": [0, 1, 2, 0],
        "validation_matched": [2, 1],
        "validation_mismatched": [0, -1, 1],
        "test_matched": [-1, -1],
        "test_mismatched": [-1],
    }.items():
        n = len(labels)
        columns = {
            "premise": [f"{split} premise {i}" for i in range(n)],
            "hypothesis": [f"{split} hypothesis {i}" for i in range(n)],
            "label": labels,
            "idx": list(range(n)),
        }
        _parquet(root / "mnli" / f"{split}-00000-of-00001.parquet", columns)
    data = hub.load("cls", path=root, cache_dir=cache)
    assert data["train"].column_names == ["text_a", "text_b", "label"]
    assert data["train"].features["label"].names == ["entailment", "neutral", "contradiction"]
    assert data["test"]["text_a"] == ["validation_matched premise 0", "validation_matched premise 1"]
    assert data["test"]["label"] == [2, 1]
    assert data["validation"]["label"] == [0, 1]  # mismatched dev set; the unlabelled row is dropped
    assert data["train"][3] == {"text_a": "train premise 3", "text_b": "train hypothesis 3", "label": 0}


def test_plain_jsonl_folder_falls_back_to_split_names(tmp_path, cache):
    for split in ("train", "validation", "test"):
        _jsonl(tmp_path / "plain" / f"{split}.jsonl", [{"text": f"{split} line"}, {"text": "  "}])
    data = hub.load("lm", path=tmp_path / "plain", cache_dir=cache)
    assert data["validation"]["text"] == ["validation line"]


def test_prepare_from_a_local_hub_folder(wikitext, tmp_path, cache):
    path = prepare.prepare("lm", "hub", root=tmp_path / "data", hub_path=wikitext, cache_dir=cache)
    assert path.name == "lm-hub"
    assert prepare.load_prepared(path)["test"]["text"] == ["Test line ."]
    with pytest.raises(ValueError, match="another request"):
        prepare.prepare("lm", "hub", root=tmp_path / "data", hub_path=tmp_path / "elsewhere", cache_dir=cache)


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)


def test_unreachable_hub_gives_one_clear_error(offline, tmp_path, cache):
    with pytest.raises(hub.HubUnavailableError) as err:
        hub.load("lm", path="nobody-here/no-such-dataset", cache_dir=cache)
    message = str(err.value)
    assert "no-such-dataset" in message and "WikiText-103" in message
    assert "use the offline corpus: data.source=offline" in message
    with pytest.raises(hub.HubUnavailableError, match="data.source=offline"):
        prepare.prepare("cls", "hub", root=tmp_path / "data", hub_path="nobody-here/no-glue", cache_dir=cache)
    assert not (tmp_path / "data").exists()


def test_missing_local_folder_and_unknown_dataset(tmp_path, cache):
    with pytest.raises(FileNotFoundError, match="data.source=offline"):
        hub.load("lm", path=tmp_path / "not-there", cache_dir=cache)
    with pytest.raises(ValueError, match="known"):
        hub.load("mt", dataset="wmt99", path=tmp_path, cache_dir=cache)
    with pytest.raises(ValueError, match="split"):
        _jsonl(tmp_path / "only-train" / "train.jsonl", [{"text": "x"}])
        hub.load("lm", path=tmp_path / "only-train", cache_dir=cache)


def test_every_task_has_a_default_hub_dataset():
    assert {hub.HUB[name].task for name in hub.DEFAULT.values()} == {"lm", "mt", "cls"}
    assert {spec.path for spec in hub.HUB.values()} == {
        "Salesforce/wikitext",
        "IWSLT/iwslt2017",
        "wmt/wmt14",
        "nyu-mll/glue",
    }


def test_non_utf8_bytes_are_refused_naming_the_file_and_line(tmp_path, cache):
    folder = tmp_path / "latin1"
    for split in ("train", "validation", "test"):
        _jsonl(folder / f"{split}.jsonl", [{"text": f"{split} fine"}, {"text": "also fine"}])
    bad = folder / "validation.jsonl"
    bad.write_bytes(bad.read_bytes() + '{"text": "caf\u00e9 cr\u00e8me"}\n'.encode("latin-1"))
    with pytest.raises(ValueError, match=r"validation\.jsonl, line 3 holds bytes that are not UTF-8.*re-encode"):
        hub.load("lm", path=folder, cache_dir=cache)


def test_blank_and_whitespace_rows_are_dropped_for_every_task(tmp_path, cache):
    for split in ("train", "validation", "test"):
        _jsonl(tmp_path / "mt" / f"{split}.jsonl", [
            {"translation": {"de": "ein Satz", "en": "a sentence"}},
            {"translation": {"de": "   ", "en": "only one side"}},
            {"translation": {"de": "\n", "en": "\t"}},
        ])
    data = hub.load("mt", path=tmp_path / "mt", cache_dir=cache)
    assert {split: d["src"] for split, d in data.items()} == {s: ["ein Satz"] for s in ("train", "validation", "test")}
