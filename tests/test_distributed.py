"""Multi-process training with DistributedDataParallel, tested on CPU with the gloo backend and two processes
under torchrun (issue 14): the same losses and weights as one process over the same global batch, a pruning
strategy acting mid-run on every rank alike, and kill -9 then resume; and every rank's end bounded (issue 57):
the launcher returns, also under load, and a rank whose launcher or teardown is gone exits."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import smoke

from heads.io import read_jsonl
from heads.run import train_run

STRATEGY = ["strategy.name=oneshot", "strategy.params.ratio=0.5", "strategy.params.proxy_steps=5"]
OVERRIDES = ["train.steps=20", "train.checkpoint_every=5", "train.log_every=1", "train.dropout=0.0", *STRATEGY]


def torchrun(out: Path, data_root: Path, overrides: list[str], kill_at: int | None = None, timeout: float = 300):
    """``heads train`` under torchrun with two ranks; a launcher that has not returned within ``timeout`` seconds
    fails the test (its process group killed, ranks included), naming the processes still there."""
    torchrun = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if kill_at is not None:
        env["HEADS_FAULT_KILL_AT_STEP"] = str(kill_at)
    argv = [torchrun, "--standalone", "--nproc_per_node", "2", "-m", "heads", "train", "--task", "lm",
            "--preset", "smoke", "--out", str(out), f"data.root={data_root}", "train.progress=false",
            "train.device=cpu", *overrides]
    return bounded(argv, env, timeout)


def bounded(argv: list[str], env: dict, timeout: float) -> subprocess.CompletedProcess:
    """``argv`` run to its end, in a session of its own so that a hang is killed whole, never left behind."""
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # torchrun starts each rank in a session of its own: they are its children, not its group
        ranks = subprocess.run(["ps", "-o", "pid=", "--ppid", str(proc.pid)], capture_output=True, text=True)
        pids = [int(p) for p in ranks.stdout.split()]
        left = subprocess.run(["ps", "-o", "pid,ppid,stat,wchan:24,etime,args", "-p", ",".join(map(str, pids))],
                              capture_output=True, text=True).stdout if pids else "(no rank)"
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        pytest.fail(f"{Path(argv[0]).name} had not returned after {timeout} s; still there:\n{left}\n{stderr[-3000:]}")
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)


def weights(run: Path):
    from safetensors.torch import load_file

    return load_file(str(run / "model/model.safetensors"))


def test_two_processes_train_as_one_over_the_same_batch_and_resume_after_kill_9(data_root, tmp_path):
    # One process, the batch in two micro-batches: the same split two ranks make.
    one = train_run(smoke("lm", data_root, *OVERRIDES, "train.accumulate=2"), tmp_path / "one")

    cut = tmp_path / "ddp"
    killed = torchrun(cut, data_root, OVERRIDES, kill_at=13)
    assert killed.returncode != 0 and not (cut / "summary.json").exists(), killed.stderr[-3000:]
    events = read_jsonl(cut / "events.jsonl")
    assert [e["event"] for e in events] == ["prune"] and events[0]["step"] == 5  # pruned under DDP, before the kill
    resumed = torchrun(cut, data_root, OVERRIDES)
    assert resumed.returncode == 0, resumed.stderr[-3000:]

    a, b = read_jsonl(tmp_path / "one/metrics.jsonl"), read_jsonl(cut / "metrics.jsonl")
    assert [r["step"] for r in a] == [r["step"] for r in b]
    for x, y in zip(a, b, strict=True):
        assert (x["heads"], x["tokens"]) == (y["heads"], y["tokens"])
        for key in ("train_loss", "val_loss"):
            assert (x.get(key) is None) == (y.get(key) is None)
            if x.get(key) is not None:
                assert y[key] == pytest.approx(x[key], rel=1e-5), (x["step"], key)
    assert read_jsonl(tmp_path / "one/events.jsonl") == read_jsonl(cut / "events.jsonl")
    wa, wb = weights(tmp_path / "one"), weights(cut)
    assert max(float((wa[k] - wb[k]).abs().max()) for k in wa) < 1e-4
    summary = __import__("json").loads((cut / "summary.json").read_text())
    assert summary["resumed"] and summary["world_size"] == 2 and summary["head_layout"] == one["head_layout"]
    assert not list(cut.glob("*.tmp*")), "only rank 0 writes, and nothing is left half-written"


def test_a_distributed_checkpoint_resumes_in_one_process(data_root, tmp_path):
    """Checkpoints hold the global batch position, not a rank's: a run killed under two processes finishes in one."""
    cut = tmp_path / "run"
    killed = torchrun(cut, data_root, OVERRIDES, kill_at=8)
    assert killed.returncode != 0, killed.stderr[-3000:]
    summary = train_run(smoke("lm", data_root, *OVERRIDES, "train.device=cpu"), cut)
    assert summary["resumed"] and summary["steps"] == 20 and summary["world_size"] == 1


def test_a_time_limit_stops_every_rank_at_the_same_step(data_root, tmp_path):
    """Rank 0's clock decides when train.time_limit is used up, so both ranks stop after the same step (a rank
    that stepped on alone would hang in its next collective) and the run ends as a run of that many steps."""
    run = tmp_path / "run"
    done = torchrun(run, data_root, ["train.steps=20", "train.time_limit=1e-9"])
    assert done.returncode == 0, done.stderr[-3000:]
    summary = __import__("json").loads((run / "summary.json").read_text())
    assert summary["steps"] == 1 and summary["world_size"] == 2 and summary["stopped"]["of_steps"] == 20
    assert [r["step"] for r in read_jsonl(run / "metrics.jsonl")] == [0, 1]


# -- every rank's end is bounded (issue 57) ----------------------------------------------------------------------
# The resume-after-kill case above, run beside other jobs, once wrote its summary.json and left a rank asleep
# with torchrun waiting on it: the launcher never returned. A rank now exits when its launcher dies, and within
# a timeout of the run's end whatever hangs in its teardown.

RANK = """
import os, sys, time
import torch
import torch.distributed
from heads.train import distributed as dist
world = dist.join(torch.device("cpu"))
{body}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def two_ranks(*bodies: str):
    """Two processes in one gloo group (this test their launcher), each running its ``body`` after joining;
    killed whole on the way out, whatever they did."""
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": "2",
           "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen([sys.executable, "-c", RANK.format(body=body)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True,
                         env={**env, "RANK": str(r), "LOCAL_RANK": str(r)})
        for r, body in enumerate(bodies)
    ]
    try:
        yield procs
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.communicate()


def test_a_rank_whose_teardown_hangs_exits_within_the_timeout():
    """Rank 1's teardown never returns (as the hang did): the watchdog ends it 2 s after the run, with its stacks
    and status 0 (the run itself was complete); rank 0, whose teardown returns, exits at once."""
    hang = "torch.distributed.destroy_process_group = lambda: time.sleep(3600)  # a teardown that never returns\n"
    with two_ranks("dist.leave(world, timeout=2)", hang + "dist.leave(world, timeout=2)") as (r0, r1):
        started = time.monotonic()
        _, err = r1.communicate(timeout=60)
        took = time.monotonic() - started
        assert r1.returncode == 0, err[-3000:]
        assert "had not exited 2 s after the run ended" in err and "<lambda>" in err, err[-3000:]
        assert took < 30, took  # 2 s after the barrier, not the group's 30 min
        _, err = r0.communicate(timeout=60)
        assert r0.returncode == 0 and "had not exited" not in err, err[-3000:]


def test_a_failed_rank_leaves_without_waiting_for_its_peers():
    """After a failure no barrier: the peer may never come to it (here it sleeps, as in a collective this rank
    never entered), and the old barrier waited for it for the group's 30 minutes."""
    with two_ranks("time.sleep(3600)", "dist.leave(world, ok=False, timeout=20)\nprint('left', flush=True)") as (
        _, r1
    ):
        out, err = r1.communicate(timeout=60)
        assert "left" in out and r1.returncode in (0, 1), err[-3000:]


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")  # exited; its new parent may not reap it here


LAUNCHER = """
import subprocess, sys
rank = subprocess.Popen([sys.executable, "-c", sys.argv[1]], stdout=subprocess.PIPE, text=True)
rank.stdout.readline()
print(rank.pid, flush=True)
import time; time.sleep(3600)
"""
WATCHED = """
import time
from heads.train import distributed as dist
dist.watch_launcher(1, poll={poll})
print("watching", flush=True)
time.sleep(3600)
"""


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads /proc")
@pytest.mark.parametrize("how", ["kernel", "look"])
def test_a_rank_whose_launcher_dies_exits(how):
    """The launcher is SIGKILLed (as the test's timeout killed torchrun): its rank exits instead of sleeping on
    alone. Under torchrun on Linux the kernel signals it (the look is then an hour away, so only the kernel can
    be in time); elsewhere a look at its parent every ``poll`` seconds."""
    if how == "kernel" and not sys.platform.startswith("linux"):
        pytest.skip("PR_SET_PDEATHSIG is Linux's")
    env = {k: v for k, v in os.environ.items() if k != "TORCHELASTIC_RUN_ID"}
    if how == "kernel":
        env["TORCHELASTIC_RUN_ID"] = "test"  # what torchrun sets
    watched = WATCHED.format(poll=3600 if how == "kernel" else 0.2)
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, watched], env=env, stdout=subprocess.PIPE,
                                text=True, start_new_session=True)
    rank = None
    try:
        rank = int(launcher.stdout.readline())
        launcher.kill()
        launcher.wait()
        deadline = time.monotonic() + 15
        while not _gone(rank) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _gone(rank), f"rank {rank} still there 15 s after its launcher died"
    finally:
        with contextlib.suppress(ProcessLookupError, TypeError):
            os.kill(rank, signal.SIGKILL)
        launcher.kill()
        launcher.communicate()


@contextlib.contextmanager
def cpu_load(seconds: float, procs: int = 2):
    """Busy loops at the lowest priority for at most ``seconds``: the ranks scheduled late, as beside other jobs."""
    code = f"import os, time\nos.nice(19)\nend = time.time() + {seconds}\nwhile time.time() < end:\n    pass"
    hogs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(procs)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


@pytest.mark.slow
def test_resume_after_kill_9_returns_under_load(data_root, tmp_path):
    """The resume-after-kill case three times over beside busy loops (about a minute and a half on 2 cores, hence
    slow): every launcher returns on its own within 2 minutes, and every resumed run ends complete."""
    with cpu_load(seconds=300):
        for i in range(3):
            run = tmp_path / f"run{i}"
            killed = torchrun(run, data_root, OVERRIDES, kill_at=13, timeout=120)
            assert killed.returncode != 0 and not (run / "summary.json").exists(), killed.stderr[-3000:]
            resumed = torchrun(run, data_root, OVERRIDES, timeout=120)
            assert resumed.returncode == 0, resumed.stderr[-3000:]
            summary = json.loads((run / "summary.json").read_text())
            assert summary["status"] == "ok" and summary["resumed"] and summary["steps"] == 20
