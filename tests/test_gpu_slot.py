"""workflow/scripts/gpu_slot.py: each concurrent GPU job gets GPUs of its own, on a machine with none (a fake
count through HEADS_GPUS)."""

import os
import select
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SLOT = ROOT / "workflow" / "scripts" / "gpu_slot.py"
# Prints the ids it was given, then holds them until its stdin closes.
HOLD = "import os, sys; print(os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>'), flush=True); sys.stdin.read()"


def env(tmp_path: Path, **extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", "HEADS_GPUS", "SLURM_JOB_ID")}
    return {**base, "HEADS_GPU_LOCKS": str(tmp_path / "locks"), "HEADS_GPUS": "2", **extra}


def readline(stream, timeout: float = 10.0) -> str:
    """One line, or "" if none comes in time (a broken wrapper fails the test instead of hanging it)."""
    ready, _, _ = select.select([stream], [], [], timeout)
    return stream.readline() if ready else ""


def hold(tmp_path: Path, n: int, **extra: str) -> tuple[subprocess.Popen, str]:
    """A holder of ``n`` slots, started and past its lock: the process and the ids it got."""
    p = subprocess.Popen([sys.executable, str(SLOT), str(n), "--wait", "5", "--", sys.executable, "-c", HOLD],
                         env=env(tmp_path, **extra), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    line = readline(p.stdout).strip()
    if not line:
        p.kill()
        pytest.fail(f"no ids within 10 s: {p.communicate()[1]}")
    return p, line


def release(p: subprocess.Popen) -> None:
    p.stdin.close()
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:  # still waiting for a slot: the test has failed already
        p.kill()
        p.wait()


def run(tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SLOT), *args], env=env(tmp_path, **extra), capture_output=True,
                          text=True, timeout=30)


def test_two_concurrent_holders_never_share_a_gpu_and_a_third_finds_none_free(tmp_path):
    a, first = hold(tmp_path, 1)
    b, second = hold(tmp_path, 1)
    try:
        assert {first, second} == {"0", "1"}
        busy = run(tmp_path, "1", "--wait", "0", "--", sys.executable, "-c", "pass")
        assert busy.returncode == 2 and "no 1 free GPUs among 0,1" in busy.stderr, busy.stderr
        assert f"held by pid {a.pid}" in busy.stderr  # exec kept the pid, and the lock with it
    finally:
        release(a)
        release(b)


def test_the_slot_is_freed_when_the_command_exits(tmp_path):
    a, first = hold(tmp_path, 2)
    assert first == "0,1"
    release(a)
    b, again = hold(tmp_path, 2)
    release(b)
    assert again == "0,1"


def test_a_waiting_job_starts_when_a_gpu_is_freed(tmp_path):
    a, first = hold(tmp_path, 2)
    waiting = subprocess.Popen([sys.executable, str(SLOT), "1", "--", sys.executable, "-c", HOLD],
                               env=env(tmp_path), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        assert "waiting for 1 free GPUs" in readline(waiting.stderr)
        release(a)
        assert readline(waiting.stdout).strip() == "0"
    finally:
        release(waiting)


def test_more_gpus_than_exist_is_a_clear_error(tmp_path):
    run_ = run(tmp_path, "3", "--", sys.executable, "-c", "pass")
    assert run_.returncode == 2
    assert "asks for 3 GPUs, but this machine shows 2 (0,1)" in run_.stderr, run_.stderr
    none = run(tmp_path, "1", "--", sys.executable, "-c", "pass", HEADS_GPUS="", CUDA_VISIBLE_DEVICES="")
    assert none.returncode == 2 and "shows 0 (none)" in none.stderr, none.stderr


def test_zero_gpus_runs_the_command_as_it_is(tmp_path):
    run_ = run(tmp_path, "0", "--", sys.executable, "-c", HOLD, CUDA_VISIBLE_DEVICES="3")
    assert run_.returncode == 0 and run_.stdout.strip() == "3", run_.stderr
    assert not (tmp_path / "locks").exists()


def test_ids_come_from_an_allocation_already_made(tmp_path):
    """CUDA_VISIBLE_DEVICES set (a SLURM allocation, a user's choice): slots are taken among those ids."""
    a, first = hold(tmp_path, 1, HEADS_GPUS="", CUDA_VISIBLE_DEVICES="5,7")
    b, second = hold(tmp_path, 1, HEADS_GPUS="", CUDA_VISIBLE_DEVICES="5,7")
    release(a)
    release(b)
    assert {first, second} == {"5", "7"}


def test_under_slurm_each_job_has_its_own_lock_folder():
    sys.path.insert(0, str(SLOT.parent))
    try:
        from gpu_slot import lock_folder, visible_gpus
    finally:
        sys.path.remove(str(SLOT.parent))
    assert lock_folder({"SLURM_JOB_ID": "42"}) != lock_folder({"SLURM_JOB_ID": "43"}) != lock_folder({})
    assert visible_gpus({"HEADS_GPUS": "0,2"}) == ["0", "2"] and visible_gpus({"CUDA_VISIBLE_DEVICES": ""}) == []


@pytest.mark.parametrize("argv", [["1"], ["-1", "--", "true"], ["1", "--"]])
def test_a_bad_command_line_says_how_to_call_it(tmp_path, argv):
    run_ = run(tmp_path, *argv)
    assert run_.returncode == 2 and "usage" in run_.stderr.lower(), run_.stderr
