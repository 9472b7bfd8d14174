"""Bad data reaching a task: over-long rows are cut to ``data.seq_len`` (and train), blank rows are dropped, a split
that encodes to nothing is refused naming the split, the folder and the cause."""

import json

import pytest

from heads.resolve import resolve
from heads.run import train_run
from heads.tasks import get_task

LONG = " ".join(f"word{i % 97}" for i in range(5000))  # one row far longer than any window or position table


def _jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _rows(task: str, n: int, long: bool) -> list[dict]:
    texts = [f"in the beginning line {i} was short" for i in range(n)] + ([LONG] if long else [])
    if task == "lm":
        return [{"text": t} for t in texts] + [{"text": "   "}]
    if task == "mt":
        return [{"translation": {"de": t, "en": t.upper()}} for t in texts] + [{"translation": {"de": "", "en": "x"}}]
    return [{"premise": t, "hypothesis": t[::-1], "label": i % 3} for i, t in enumerate(texts)]


def _folder(tmp_path, task, sizes: dict[str, int], long: bool = True):
    folder = tmp_path / f"{task}-hub"
    names = {"cls": {"train": "train", "validation": "validation", "test": "test"}}.get(task, {})
    for split, n in sizes.items():
        _jsonl(folder / f"{names.get(split, split)}.jsonl", _rows(task, n, long))
    return folder


def _cfg(task, folder, tmp_path, *overrides):
    return resolve(task, "smoke", None, [
        f"data.root={tmp_path / 'prepared'}", "data.source=hub", f"data.hub_path={folder}", "data.limit=null",
        "train.progress=false", *overrides,
    ])


@pytest.mark.parametrize("task", ["lm", "mt", "cls"])
def test_over_long_rows_are_cut_to_seq_len_and_train(task, tmp_path):
    folder = _folder(tmp_path, task, {"train": 40, "validation": 8, "test": 8})
    cfg = _cfg(task, folder, tmp_path, "train.steps=2", "train.eval_every=2", "train.checkpoint_every=2",
               "eval.max_examples=4")
    t = get_task(task)
    tok = t.tokenizer(cfg)
    examples = t.examples(cfg, tok, "train")
    n = cfg.data.seq_len
    if task == "lm":
        assert examples and all(len(e) == n for e in examples)
    elif task == "mt":
        assert len(examples) == 41  # 40 short + the long one; the pair with a blank side is dropped
        assert max(max(len(s), len(g)) for s, g in examples) == n  # the long pair: cut, then <eos>
    else:
        assert len(examples) == 41 and max(len(ids) for ids, _, _ in examples) == 2 * n + 3
    summary = train_run(cfg, tmp_path / "run")
    assert summary["status"] == "ok" and summary["steps"] == 2


@pytest.mark.parametrize("task", ["lm", "mt"])
def test_a_split_that_encodes_to_nothing_is_refused_naming_it(task, tmp_path):
    folder = _folder(tmp_path, task, {"train": 40, "validation": 8, "test": 8}, long=False)
    # validation: one short row (lm: fewer tokens than a window) or only pairs with a blank side (mt)
    rows = [{"text": "too short"}] if task == "lm" else [{"translation": {"de": "nur", "en": " "}}]
    _jsonl(folder / "validation.jsonl", rows)
    cfg = _cfg(task, folder, tmp_path, "data.seq_len=24")
    t = get_task(task)
    if task == "lm":  # the row survives preparation, but no window of seq_len tokens fits in it
        match = r"'validation' split of .*lm-hub.* yields no example.*fewer tokens than one window"
    else:  # blank pairs are dropped while preparing: the split is empty before it is ever encoded
        match = r"mt from hub .*mt-hub.*the 'validation' split is empty"
    with pytest.raises(ValueError, match=match):
        t.examples(cfg, t.tokenizer(cfg), "validation")
