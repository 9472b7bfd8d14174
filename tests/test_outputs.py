"""One rule for every output path (issue 57, class 4): no command writes onto a run's records or into its
folders, replaces a device, a symlink or a folder it did not write; a second writer of one --out is refused
naming the holder; a refused start writes nothing; a resume whose history was cut is refused naming it."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import heads_train_killed
from test_faults_cli import SHORT, refused, tree

from heads.cli import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def runs(run, tmp_path) -> Path:
    """A run tree holding a copy of the finished run as the lm baseline's seed 0 (``rows`` and ``claims`` read
    it)."""
    folder = tmp_path / "tree"
    seed = folder / "lm" / "baseline" / "none" / "0.0" / "seed0"
    shutil.copytree(run, seed)
    for name in ("config.json", "summary.json"):
        data = json.loads((seed / name).read_text())
        data["run"] = {"label": "lm/baseline/none/0.0/seed0", "kind": "run", "task": "lm", "seed": 0,
                       "variant": "baseline", "arm": "none", "ratio": 0.0}
        (seed / name).write_text(json.dumps(data))
    return folder


def train_argv(out: Path, base: dict, *overrides: str) -> list[str]:
    return ["train", "--task", "lm", "--preset", "smoke", "--out", str(out), base["data"], *SHORT, *overrides]


# -- never onto a run's records nor into its folders ------------------------------------------------------------
@pytest.mark.parametrize("out", ["summary.json", "checkpoint/state.json", "metrics.jsonl", "notes.csv"])
def test_rows_never_write_onto_or_into_a_run(run, runs, capsys, out):
    before = tree(run)
    refused(["rows", "--runs", str(runs), "--out", str(run / out)], capsys, "--out", str(run))
    assert tree(run) == before


def test_claims_and_report_never_write_into_a_run(run, runs, capsys):
    before = tree(run)
    refused(["claims", "--runs", str(runs), "--replications", str(ROOT / "replications"), "--out",
             str(run / "checkpoint")], capsys, "only the run writes")
    refused(["report", "--runs", str(runs), "--replication", "michel2019", "--replications",
             str(ROOT / "replications"), "--out", str(run / "model")], capsys, "only the run writes")
    refused(["claims", "--runs", str(runs), "--replications", str(ROOT / "replications"), "--out", str(run)],
            capsys, "is a run folder")
    assert tree(run) == before


def test_train_never_starts_inside_another_run(run, base, capsys):
    before = tree(run)
    refused(train_argv(run / "sub", base), capsys, "lies inside the run folder", str(run))
    refused(train_argv(run / "model", base), capsys, "only the run writes")
    assert tree(run) == before and not (run / "sub").exists()


def test_a_symlink_into_a_run_is_refused_where_it_leads(run, runs, tmp_path, capsys):
    link = tmp_path / "link.csv"
    link.symlink_to(run / "summary.json")
    before = tree(run)
    refused(["rows", "--runs", str(runs), "--out", str(link)], capsys, "is the record summary.json")
    assert tree(run) == before and link.is_symlink()


# -- devices, FIFOs and symlinks: written through, never replaced -----------------------------------------------
@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_a_character_device_is_written_through_not_replaced(run, runs, tmp_path):
    null = tmp_path / "null"
    os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a /dev/null of our own: the real one stays safe
    assert main(["rows", "--runs", str(runs), "--out", str(null)]) == 0
    assert stat.S_ISCHR(os.lstat(null).st_mode)
    assert main(["evaluate", str(run), "--out", str(null)]) == 0
    assert stat.S_ISCHR(os.lstat(null).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null", "run", "tree"]  # no null.examples.json beside


def test_a_fifo_is_written_through_and_one_without_a_reader_is_refused(runs, tmp_path, capsys):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    try:
        assert main(["rows", "--runs", str(runs), "--out", str(fifo)]) == 0
    finally:
        if reader.is_alive() and not got:  # unblock the reader should the write never have come
            with open(fifo, "wb"):
                pass
        reader.join(10)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert got and b"lm/baseline/none/0.0/seed0" in got[0]  # the CSV went through the pipe
    refused(["rows", "--runs", str(runs), "--out", str(fifo)], capsys, "a FIFO no process reads")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_symlink_to_stdout_is_written_through(runs, tmp_path):
    link = tmp_path / "out.csv"
    link.symlink_to("/dev/stdout")
    done = subprocess.run([sys.executable, "-m", "heads", "rows", "--runs", str(runs), "--out", str(link)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert link.is_symlink() and os.readlink(link) == "/dev/stdout"
    assert str(link) in done.stdout  # the path it printed, after the CSV it wrote through the link


def test_symlinks_are_written_through_and_a_loop_is_refused(runs, tmp_path, capsys):
    real, link = tmp_path / "real.csv", tmp_path / "link.csv"
    real.write_text("old\n")
    link.symlink_to(real)
    assert main(["rows", "--runs", str(runs), "--out", str(link)]) == 0
    assert link.is_symlink() and real.read_text() != "old\n"
    dangling, target = tmp_path / "dangling.csv", tmp_path / "made.csv"
    dangling.symlink_to(target)
    assert main(["rows", "--runs", str(runs), "--out", str(dangling)]) == 0
    assert dangling.is_symlink() and target.is_file()  # its target created, the link kept
    a, b = tmp_path / "a", tmp_path / "b"
    a.symlink_to(b)
    b.symlink_to(a)
    refused(["rows", "--runs", str(runs), "--out", str(a)], capsys, "symlink loop")
    assert a.is_symlink() and b.is_symlink()


def test_prune_through_a_symlink_replaces_the_folder_it_leads_to(run, tmp_path):
    first, link = tmp_path / "pruned", tmp_path / "plink"
    assert main(["prune", str(run), "--keep", "2", "--out", str(first)]) == 0
    link.symlink_to(first)
    assert main(["prune", str(run), "--keep", "3", "--out", str(link)]) == 0
    assert link.is_symlink() and json.loads((first / "pruning.json").read_text())["keep"] == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plink", "pruned", "run"]  # no .plink.old left


def test_a_folder_output_that_is_a_file_is_refused(runs, tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("mine")
    refused(["claims", "--runs", str(runs), "--replications", str(ROOT / "replications"), "--out", str(afile)],
            capsys, "is a file, not a folder")
    assert afile.read_text() == "mine"


# -- one writer per --out ---------------------------------------------------------------------------------------
def test_a_second_writer_of_one_out_is_refused_naming_the_holder(run, runs, base, tmp_path, capsys):
    from heads.outpath import claim, lock_path

    out = tmp_path / "rows.csv"
    with claim(out, "test"):
        refused(["rows", "--runs", str(runs), "--out", str(out)], capsys, f"process {os.getpid()}")
        assert not out.exists()
    assert main(["rows", "--runs", str(runs), "--out", str(out)]) == 0  # the lock went with its holder
    assert out.is_file() and not lock_path(out).exists()
    fresh = tmp_path / "fresh"
    with claim(fresh, "test"):  # two `heads train` on one --out: the second is refused, writing nothing
        refused(train_argv(fresh, base), capsys, "is being written by process")
        assert not fresh.exists()
    holder = subprocess.Popen(  # another process: its pid is the one named
        [sys.executable, "-c", "import sys, time; from heads.outpath import claim\n"
         "with claim(sys.argv[1], 'heads train'):\n print('held', flush=True); time.sleep(60)", str(fresh)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        refused(train_argv(fresh, base), capsys, f"is being written by process {holder.pid}")
        assert not fresh.exists()
    finally:
        holder.kill()
        holder.wait()
    pruned = tmp_path / "pruned"
    with claim(pruned, "test"):
        refused(["prune", str(run), "--keep", "2", "--out", str(pruned)], capsys, "is being written by process")
        assert not pruned.exists()


def test_parts_of_one_folder_are_written_side_by_side_and_the_whole_folder_excludes_them(tmp_path):
    """The workflow renders a replication's tables, figures and claims page into one folder in parallel jobs
    (the smoke DAG failed on the folder's lock): each holds its part alone and shares the folder's lock."""
    from heads.io import InputError
    from heads.outpath import claim

    out = tmp_path / "michel2019"
    with claim(out, "report", "report-curve"), claim(out, "claims", "claims"):
        with pytest.raises(InputError, match=r"\(report-curve\) is being written by"):
            with claim(out, "report", "report-curve"):
                pass
        with pytest.raises(InputError, match="being written by"):  # the whole folder waits for every part
            with claim(out, "report"):
                pass
    with claim(out, "report"):  # all parts ended: the whole folder is free, and a part is refused while it runs
        with pytest.raises(InputError, match="being written by"):
            with claim(out, "claims", "claims"):
                pass
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".lock")] == []  # no lock file left behind


# -- a refused start writes nothing -------------------------------------------------------------------------------
def test_a_start_that_fails_before_its_first_checkpoint_leaves_nothing(base, tmp_path, capsys, monkeypatch):
    import heads.run
    from heads.io import InputError
    from heads.train.loop import Hook

    class Refuses(Hook):
        def on_start(self, trainer) -> None:
            raise InputError("strategy: a parameter found bad only at the start")

    out = tmp_path / "new" / "run"
    monkeypatch.setattr(heads.run, "hooks_for", lambda cfg: [Refuses()])
    refused(train_argv(out, base, "train.lr=1e-3"), capsys, "found bad only at the start")
    assert not (tmp_path / "new").exists()  # neither the run folder nor the folder made for it
    monkeypatch.undo()
    assert main(train_argv(out, base)) == 0  # the corrected command is not refused as another config's run


def test_a_start_killed_before_its_first_checkpoint_does_not_bind_the_folder(base, tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()  # what a kill -9 between config.json and the first checkpoint leaves (no handler runs)
    (out / "config.json").write_text(json.dumps({**json.loads((base["run"] / "config.json").read_text()),
                                                 "train": {"lr": 1.0}}))
    (out / "metrics.jsonl").write_text('{"step": 0}\n')
    assert main(train_argv(out, base)) == 0
    assert "never reached its first checkpoint" in capsys.readouterr().err
    assert json.loads((out / "config.json").read_text()) == json.loads((base["run"] / "config.json").read_text())
    assert [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()] == [0, 2, 4]


# -- a resume whose history was cut -------------------------------------------------------------------------------
@pytest.fixture
def killed(base, tmp_path) -> Path:
    out = tmp_path / "killed"
    heads_train_killed("lm", out, base["root"] / "data", SHORT, at_step=3, fresh_interpreter=False)
    assert (out / "checkpoint" / "state.json").is_file()
    return out


def test_a_resume_with_its_metrics_deleted_is_refused(killed, base, capsys):
    (killed / "metrics.jsonl").unlink()
    before = tree(killed)
    refused(train_argv(killed, base), capsys, "metrics.jsonl is missing", "the checkpoint at step 2 saw 2",
            "history is cut")
    assert tree(killed) == before


def test_a_resume_with_its_metrics_truncated_is_refused(killed, base, capsys):
    lines = (killed / "metrics.jsonl").read_text().splitlines(keepends=True)
    (killed / "metrics.jsonl").write_text(lines[0])
    before = tree(killed)
    refused(train_argv(killed, base), capsys, "metrics.jsonl holds 1 records", "saw 2")
    assert tree(killed) == before
    (killed / "metrics.jsonl").write_text("".join(lines))  # restored: the run resumes and finishes
    assert main(train_argv(killed, base)) == 0
    assert json.loads((killed / "summary.json").read_text())["resumed"] is True
    shutil.rmtree(killed)
