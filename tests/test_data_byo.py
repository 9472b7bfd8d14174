"""Bring your own data, by config alone: local folders in hub layout and single files with the dataset's own column
and split names, label sets read from the data, clear errors naming the key to set, ``heads data prepare`` with the
new keys, a task registered as a plugin, and (once the tasks read the new keys) a whole smoke run per task."""

from __future__ import annotations

import csv
import json
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datasets import ClassLabel, Dataset, Features, Value

from heads.cli import main
from heads.config import ConfigError
from heads.data import hub, prepare
from heads.resolve import resolve

SPLIT_SIZES = {"train": 12, "validation": 4, "test": 4}


def _jsonl(path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def _parquet(path, columns: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), path)


def _csv(path, header: list[str], rows: list[list]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([header, *rows])


def _manifest(path) -> dict:
    return json.loads((path / prepare.MANIFEST).read_text())


@pytest.fixture
def cache(tmp_path):
    return str(tmp_path / "hf-cache")


@pytest.fixture
def lm_folder(tmp_path):
    """A hub-layout folder with two configurations; the text is in a column ``content``."""
    root = tmp_path / "my-lm"
    for config in ("en", "fr"):
        for split, n in SPLIT_SIZES.items():
            rows = [{"content": f" {config} {split} line {i} \n", "id": i} for i in range(n)] + [{"content": "  "}]
            _jsonl(root / config / f"{split}-00000-of-00001.jsonl", rows)
    return root


@pytest.fixture
def mt_file(tmp_path):
    """One JSON-lines file of ``{"translation": {"de": ..., "en": ...}}`` rows, sliced into our splits."""
    file = tmp_path / "pairs.jsonl"
    _jsonl(file, [{"translation": {"de": f"Satz {i}", "en": f"sentence {i}"}} for i in range(20)])
    return file


MT_SPLITS = {"train": "train[:60%]", "validation": "train[60%:80%]", "test": "train[80%:]"}
MT_COLUMNS = {"src": "translation.de", "tgt": "translation.en"}


@pytest.fixture
def cls_csv(tmp_path):
    """A user's CSV: string labels, its own column names, one unlabelled row per split."""
    folder = tmp_path / "reviews"
    for split, n in SPLIT_SIZES.items():
        rows = [[f"claim {split} {i}", f"evidence {split} {i}", ("pos", "neg", "meh")[i % 3]] for i in range(n)]
        _csv(folder / f"{split}.csv", ["claim", "evidence", "verdict"], [*rows, ["no verdict", "here", ""]])
    return folder


CLS_COLUMNS = {"text_a": "claim", "text_b": "evidence", "label": "verdict"}


@pytest.fixture
def sst2(tmp_path):
    """GLUE's layout for SST-2: sst2/<split>-*.parquet, one sentence per row, an unlabelled test split."""
    root = tmp_path / "glue"
    for split, n in {"train": 20, "validation": 6, "test": 5}.items():
        labels = [-1] * n if split == "test" else [i % 2 for i in range(n)]
        columns = {"sentence": [f"{split} sentence {i}" for i in range(n)], "label": labels, "idx": list(range(n))}
        _parquet(root / "sst2" / f"{split}-00000-of-00001.parquet", columns)
    _parquet(root / "mrpc" / "train-00000-of-00001.parquet", {"sentence1": ["wrong config"], "label": [0]})
    return root


SST2 = {
    "config": "sst2",
    "columns": {"text_a": "sentence", "text_b": None, "label": "label"},
    # GLUE's test labels are hidden: its validation split is our test, a held-out slice of train our validation.
    "splits": {"train": "train[:-20%]", "validation": "train[-20%:]", "test": "validation"},
}


# -- the three tasks ----------------------------------------------------------------------------------------------
def test_lm_folder_with_a_configuration_and_its_own_column(lm_folder, tmp_path, cache):
    path = prepare.prepare(
        "lm", "hub", root=tmp_path / "data", dataset=str(lm_folder), config="fr", columns={"text": "content"},
        cache_dir=cache,
    )
    data = prepare.load_prepared(path)
    assert data["train"].column_names == ["text"]
    assert data["train"]["text"][:2] == ["fr train line 0", "fr train line 1"]  # stripped; the blank row dropped
    assert {split: len(d) for split, d in data.items()} == SPLIT_SIZES
    manifest = _manifest(path)
    assert manifest["hub"] == {"config": "fr", "columns": {"text": "content"}} and manifest["columns"] == ["text"]
    assert manifest["dropped"]["train"] == {"unlabelled": 0, "blank": 1}
    assert path.name.startswith("lm-hub-my-lm-") and "source_files" in manifest


def test_mt_single_file_with_translation_dicts_and_sliced_splits(mt_file, tmp_path, cache):
    path = prepare.prepare(
        "mt", "hub", root=tmp_path / "data", dataset=str(mt_file), columns=MT_COLUMNS, splits=MT_SPLITS,
        cache_dir=cache,
    )
    data = prepare.load_prepared(path)
    assert data["train"].column_names == ["src", "tgt"]
    assert data["train"][0] == {"src": "Satz 0", "tgt": "sentence 0"}
    assert data["validation"]["src"] == [f"Satz {i}" for i in (12, 13, 14, 15)]
    assert data["test"]["tgt"][-1] == "sentence 19"
    assert {split: len(d) for split, d in data.items()} == {"train": 12, "validation": 4, "test": 4}


def test_mt_parquet_folder_with_flat_columns_other_direction(tmp_path, cache):
    folder = tmp_path / "flat"
    for split, n in SPLIT_SIZES.items():
        _parquet(folder / f"{split}.parquet", {"english": [f"en {i}" for i in range(n)],
                                               "german": [f"de {i}" for i in range(n)]})
    data = hub.load("mt", dataset=str(folder), columns={"src": "english", "tgt": "german"}, cache_dir=cache)
    assert data["test"][3] == {"src": "en 3", "tgt": "de 3"}


def test_cls_csv_with_string_labels_reads_the_label_set(cls_csv, tmp_path, cache):
    path = prepare.prepare("cls", "hub", root=tmp_path / "data", dataset=str(cls_csv), columns=CLS_COLUMNS,
                           cache_dir=cache)
    data = prepare.load_prepared(path)
    assert data["train"].column_names == ["text_a", "text_b", "label"]
    assert data["train"].features["label"].names == ["meh", "neg", "pos"]  # sorted distinct values
    assert _manifest(path)["labels"] == ["meh", "neg", "pos"]
    assert data["train"][1] == {"text_a": "claim train 1", "text_b": "evidence train 1", "label": 1}  # neg
    assert len(data["test"]) == 4 and _manifest(path)["dropped"]["test"]["unlabelled"] == 1
    # data.labels fixes the order (the ids) instead
    data = hub.load("cls", dataset=str(cls_csv), columns=CLS_COLUMNS, labels=["neg", "meh", "pos"], cache_dir=cache)
    assert data["train"].features["label"].names == ["neg", "meh", "pos"] and data["train"][1]["label"] == 0


def test_single_sentence_glue_task_sst2(sst2, tmp_path, cache):
    path = prepare.prepare("cls", "hub", root=tmp_path / "data", dataset=str(sst2), cache_dir=cache, **SST2)
    data = prepare.load_prepared(path)
    assert data["train"].column_names == ["text_a", "text_b", "label"]
    assert set(data["train"]["text_b"]) == {""}  # one text per row: text_b is the empty string
    assert {split: len(d) for split, d in data.items()} == {"train": 16, "validation": 4, "test": 6}
    assert data["validation"]["text_a"][0] == "train sentence 16"
    assert data["test"]["text_a"][0] == "validation sentence 0"
    assert _manifest(path)["labels"] == ["0", "1"]  # plain int labels: their sorted values
    named = hub.load("cls", dataset=str(sst2), labels=["negative", "positive"], cache_dir=cache, **SST2)
    assert named["test"].features["label"].names == ["negative", "positive"]


def test_glue_mrpc_classlabel_names_and_unlabelled_test_rows_dropped(tmp_path, cache):
    root = tmp_path / "glue"
    features = Features({"sentence1": Value("string"), "sentence2": Value("string"),
                         "label": ClassLabel(names=["not_equivalent", "equivalent"]), "idx": Value("int32")})
    for split, labels in {"train": [0, 1, 1, 0], "validation": [1, 0], "test": [-1, -1, 1]}.items():
        rows = {"sentence1": [f"{split} a {i}" for i in range(len(labels))],
                "sentence2": [f"{split} b {i}" for i in range(len(labels))], "label": labels,
                "idx": list(range(len(labels)))}
        (root / "mrpc").mkdir(parents=True, exist_ok=True)
        Dataset.from_dict(rows, features=features).to_parquet(str(root / "mrpc" / f"{split}-00000-of-00001.parquet"))
    report: dict = {}
    data = hub.load("cls", dataset=str(root), config="mrpc", cache_dir=cache, report=report,
                    columns={"text_a": "sentence1", "text_b": "sentence2"})
    assert data["train"].features["label"].names == ["not_equivalent", "equivalent"]
    assert data["test"]["label"] == [1] and report["dropped"]["test"]["unlabelled"] == 2


def test_presets_are_the_new_keys_and_can_be_overridden(tmp_path, cache):
    """``dataset=mnli`` still means GLUE MNLI with its split mapping; one key can be overridden."""
    spec = hub.source_for("cls", "mnli")
    assert (spec.path, spec.config, spec.splits["test"]) == ("nyu-mll/glue", "mnli", "validation_matched")
    assert hub.source_for("mt", "wmt14-en-fr").columns == {"src": "translation.en", "tgt": "translation.fr"}
    swapped = hub.source_for("mt", "wmt14-en-fr", columns={"src": "translation.fr", "tgt": "translation.en"})
    assert swapped.config == "fr-en" and swapped.columns["src"] == "translation.fr"
    assert prepare.folder_name("mt", "hub", None, "wmt14-en-fr", hub.request_tag(swapped)).startswith(
        "mt-hub-wmt14-en-fr-")


# -- clear errors -------------------------------------------------------------------------------------------------
def test_a_missing_column_names_the_key_and_the_columns(cls_csv, cache):
    with pytest.raises(ValueError, match=r"no column 'premise' for data.columns.text_a; its columns: .*'claim'"):
        hub.load("cls", dataset=str(cls_csv), columns={**CLS_COLUMNS, "text_a": "premise"}, cache_dir=cache)
    with pytest.raises(ValueError, match=r"no column 'translation.fr' for data.columns.tgt"):
        hub.load("mt", dataset=str(cls_csv), columns={"src": "claim", "tgt": "translation.fr"}, cache_dir=cache)
    with pytest.raises(ValueError, match=r"data.columns: \['sentence'\] are not columns of task 'cls'"):
        hub.load("cls", dataset=str(cls_csv), columns={"sentence": "claim"}, cache_dir=cache)


def test_a_missing_split_names_the_key_to_set(tmp_path, mt_file, cache):
    folder = tmp_path / "two-splits"
    for split in ("train", "validation"):
        _jsonl(folder / f"{split}.jsonl", [{"text": f"{split} {i}"} for i in range(5)])
    with pytest.raises(ValueError, match=r"no files of split 'test' \(wanted for data.splits.test\).*found there: "
                                         r"\['train', 'validation'\].*data.splits.test="):
        hub.load("lm", dataset=str(folder), cache_dir=cache)
    with pytest.raises(ValueError, match=r"single file.*data.splits.validation=train\[90%:\]"):
        hub.load("mt", dataset=str(mt_file), columns=MT_COLUMNS, cache_dir=cache)
    # splits that share rows with train load (a model may only be evaluated on them) and say so; training refuses
    report: dict = {}
    hub.load("mt", dataset=str(mt_file), columns=MT_COLUMNS, cache_dir=cache,
             splits={**MT_SPLITS, "test": "train[50%:]"}, report=report)
    assert report["shared_with_train"] == {"test": "train"}
    with pytest.raises(ValueError, match=r"train and test share rows of the dataset's split 'train'"):
        raise hub.leak_error(report["shared_with_train"])
    data = hub.load("lm", dataset=str(folder), splits={"test": "validation"}, cache_dir=cache)
    assert data["test"]["text"] == data["validation"]["text"]


def test_unreadable_and_unknown_labels(tmp_path, cls_csv, cache):
    folder = tmp_path / "scores"
    for split in SPLIT_SIZES:
        _csv(folder / f"{split}.csv", ["text_a", "text_b", "label"], [["a", "b", 0.5], ["c", "d", 1.0]])
    with pytest.raises(ValueError, match=r"labels of split 'train' \(data.columns.label='label'\) are unreadable"):
        hub.load("cls", dataset=str(folder), cache_dir=cache)
    with pytest.raises(ValueError, match=r"labels \['meh'\] .*not among the label set \['neg', 'pos'\].*data.labels"):
        hub.load("cls", dataset=str(cls_csv), columns=CLS_COLUMNS, labels=["neg", "pos"], cache_dir=cache)


def test_an_empty_split_and_non_utf8_files_are_refused(tmp_path, cache):
    folder = tmp_path / "lm"
    for split in SPLIT_SIZES:
        _csv(folder / f"{split}.csv", ["body"], [[f"{split} text"]])
    _csv(folder / "test.csv", ["body"], [["   "]])
    with pytest.raises(ValueError, match=r"the 'test' split is empty"):
        prepare.prepare("lm", "hub", root=tmp_path / "data", dataset=str(folder), columns={"text": "body"},
                        cache_dir=cache)
    (folder / "test.csv").write_bytes("body\ncaf\u00e9\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"test\.csv, line 2 holds bytes that are not UTF-8"):
        hub.load("lm", dataset=str(folder), columns={"text": "body"}, cache_dir=cache)


def test_reused_until_the_file_changes(mt_file, tmp_path, cache):
    kwargs = {"root": tmp_path / "data", "dataset": str(mt_file), "columns": MT_COLUMNS, "splits": MT_SPLITS,
              "cache_dir": cache}
    path = prepare.prepare("mt", "hub", **kwargs)
    stamp = (path / prepare.CHECKSUM).stat().st_mtime_ns
    assert prepare.prepare("mt", "hub", **kwargs) == path and (path / prepare.CHECKSUM).stat().st_mtime_ns == stamp
    other = prepare.prepare("mt", "hub", **{**kwargs, "columns": {"src": "translation.en", "tgt": "translation.de"}})
    assert other != path  # another request, another folder
    mt_file.write_text(mt_file.read_text() + json.dumps({"translation": {"de": "neu", "en": "new"}}) + "\n")
    with pytest.raises(ValueError, match=r"pairs.jsonl edited"):
        prepare.prepare("mt", "hub", **kwargs)


def test_config_keys_are_checked_when_the_config_resolves(tmp_path):
    cfg = resolve("cls", "smoke", None, ["data.source=hub", "data.dataset=nyu-mll/glue", "data.config=mrpc",
                                         "data.columns.text_b=null", "data.splits.test=validation",
                                         "data.splits.validation=train[-5%:]", "data.labels=[no, yes]"])
    assert cfg.data.columns == {"text_b": None} and cfg.data.splits["validation"] == "train[-5%:]"
    for bad, match in [
        (["data.hub_path=x"], "apply to data.source=hub only"),
        (["data.dataset=x.csv"], "not a shipped corpus"),
        (["data.dataset=lm"], "has columns"),
        (["data.source=hub", "data.splits.dev=validation"], "data.splits.dev"),
        (["data.source=hub", "data.splits.test=validation[5:"], "data.splits.test"),
        (["data.source=hub", "data.columns.text_a=null"], "data.columns.text_a"),
        (["data.source=hub", "data.labels=[yes]"], "data.labels"),
    ]:
        with pytest.raises(ConfigError, match=match):
            resolve("cls", "smoke", None, bad)


# -- the command line ---------------------------------------------------------------------------------------------
def test_heads_data_prepare_with_the_new_keys(cls_csv, sst2, tmp_path, capsys):
    root = tmp_path / "data"
    argv = ["data", "prepare", "--task", "cls", "--source", "hub", "--root", str(root), "--dataset", str(cls_csv),
            "--column", "text_a=claim", "--column", "text_b=evidence", "--column", "label=verdict"]
    assert main(argv) == 0
    path = capsys.readouterr().out.strip().split(": ", 1)[1]
    assert prepare.load_prepared(path)["validation"].features["label"].names == ["meh", "neg", "pos"]
    argv = ["data", "prepare", "--task", "cls", "--source", "hub", "--root", str(root), "--dataset", str(sst2),
            "--config", "sst2", "--column", "text_a=sentence", "--column", "text_b=", "--split", "test=validation",
            "--split", "validation=train[-20%:]", "--split", "train=train[:-20%]", "--labels", "neg", "pos"]
    assert main(argv) == 0
    path = capsys.readouterr().out.strip().split(": ", 1)[1]
    assert _manifest(prepare.Path(path))["labels"] == ["neg", "pos"]
    with pytest.raises(SystemExit):  # hub options describe one task's data
        main(["data", "prepare", "--source", "hub", "--root", str(root), "--dataset", str(cls_csv)])


# -- a task from another package ----------------------------------------------------------------------------------
def test_a_task_registered_through_heads_plugins(tmp_path, monkeypatch):
    from heads.tasks import TASKS, get_task

    (tmp_path / "my_task_plugin.py").write_text(
        "from heads.tasks import register_task\n"
        "from heads.tasks.lm import LanguageModelling\n\n\n"
        "@register_task('my_lm')\n"
        "class MyLM(LanguageModelling):\n"
        "    description = 'a language model task from a plugin'\n"
        "    presets = {'smoke': {'model': {'d': 16, 'heads': 2}, 'train': {'steps': 3}}}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("HEADS_PLUGINS", "my_task_plugin")
    try:
        assert get_task("my_lm").name == "my_lm"
        from heads.config import ConfigError
        from heads.resolve import resolve

        cfg = resolve("my_lm", "smoke", None, [])  # its own preset, from the class
        assert (cfg.task, cfg.model.d, cfg.train.steps) == ("my_lm", 16, 3)
        with pytest.raises(ConfigError, match="presets"):
            resolve("my_lm", "tiny", None, [])
    finally:
        TASKS.remove("my_lm")
        sys.modules.pop("my_task_plugin", None)


def test_a_plugin_task_prepares_data_by_its_columns(lm_folder, tmp_path, cache):
    path = prepare.prepare("tagging", "hub", root=tmp_path / "data", dataset=str(lm_folder), config="en",
                           columns={"sentence": "content"}, cache_dir=cache)
    assert prepare.load_prepared(path)["train"].column_names == ["sentence"]


# -- whole runs ---------------------------------------------------------------------------------------------------
def _train_argv(task: str, tmp_path, data: list[str]) -> list[str]:
    return ["train", "--task", task, "--preset", "smoke", "--out", str(tmp_path / f"run-{task}"),
            f"data.root={tmp_path / 'prepared'}", "data.source=hub", "data.limit=null", "train.progress=false",
            "train.steps=2", "train.eval_every=2", "train.checkpoint_every=2", "eval.max_examples=4", *data]


def _run_data(task: str, tmp_path) -> list[str]:
    if task == "lm":
        folder = tmp_path / "lm"
        for split, n in {"train": 200, "validation": 40, "test": 40}.items():
            _jsonl(folder / "en" / f"{split}-00000-of-00001.jsonl",
                   [{"content": f"in the beginning line {i} of the {split} text was short"} for i in range(n)])
        return [f"data.dataset={folder}", "data.config=en", "data.columns.text=content"]
    if task == "mt":
        file = tmp_path / "pairs.jsonl"
        _jsonl(file, [{"translation": {"de": f"das ist satz {i}", "en": f"this is sentence {i}"}} for i in range(60)])
        return [f"data.dataset={file}", "data.columns.src=translation.de", "data.columns.tgt=translation.en",
                *(f"data.splits.{k}={v}" for k, v in MT_SPLITS.items())]
    folder = tmp_path / "glue"
    for split, n in {"train": 40, "validation": 8, "test": 8}.items():
        labels = [-1] * n if split == "test" else [("bad", "good", "fine")[i % 3] for i in range(n)]
        _parquet(folder / "sst2" / f"{split}-00000-of-00001.parquet",
                 {"sentence": [f"{split} sentence number {i}" for i in range(n)], "label": labels})
    return [f"data.dataset={folder}", "data.config=sst2", "data.columns.text_a=sentence", "data.columns.text_b=null",
            "data.splits.test=validation", "data.splits.validation=train[-20%:]", "data.splits.train=train[:-20%]"]


@pytest.mark.parametrize("task", ["lm", "mt", "cls"])
def test_heads_train_smoke_on_own_data(task, tmp_path):
    data = _run_data(task, tmp_path)  # cls: 3 string labels (not MNLI's), one sentence per row
    assert main(_train_argv(task, tmp_path, data)) == 0
    summary = json.loads((tmp_path / f"run-{task}" / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["steps"] == 2
    prepared = next((tmp_path / "prepared").glob(f"{task}-hub-*"))
    assert _manifest(prepared).get("dataset", "").startswith(str(tmp_path))
