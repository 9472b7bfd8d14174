"""The software and hardware behind a number: recorded under ``environment`` in every run record and
analysis output, so two results that disagree can be traced to what differed.

Nothing here may fail a run: a field that cannot be read is ``None``. torch is imported lazily, so the
command line can import this module without paying for torch.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
import re
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

KEY = "environment"
# The packages whose kernels, tokenisation, data loading or metrics make the numbers.
PACKAGES = ("torch", "transformers", "tokenizers", "datasets", "sacrebleu", "numpy")
# Variables that change which kernels run or how many threads they use (unset ones are left out).
VARIABLES = ("ATEN_CPU_CAPABILITY", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "MKL_CBWR", "CUBLAS_WORKSPACE_CONFIG")
LOCK = "constraints.txt"
_CHECKOUT = Path(__file__).resolve().parents[1]


def environment(model: Any = None, precision: str | None = None) -> dict[str, Any]:
    """Versions, torch build, CPU, threads, device and precision of this process (of ``model`` if given;
    ``precision`` names the autocast precision a run used, its weights being fp32)."""
    import torch

    param = next(iter(model.parameters()), None) if model is not None else None
    if precision is None:
        precision = _AUTOCAST.get("precision") or str(
            param.dtype if param is not None else torch.get_default_dtype()
        ).removeprefix("torch.")
    return {
        **_static(),
        "threads": torch.get_num_threads(),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "device": str(param.device) if param is not None else "cpu",
        "precision": precision,
        "matmul_precision": torch.get_float32_matmul_precision(),
        "variables": {k: os.environ[k] for k in VARIABLES if k in os.environ},
    }


_AUTOCAST: dict[str, str] = {}


def record_precision(dtype_name: str | None) -> None:
    """The autocast precision this process runs its models at (``bfloat16``...; None: the weights' own), set
    where the placement is decided, so every record written afterwards names it."""
    _AUTOCAST.pop("precision", None)
    if dtype_name and dtype_name != "float32":
        _AUTOCAST["precision"] = dtype_name


def with_environment(result: Mapping[str, Any], model: Any = None, precision: str | None = None) -> dict[str, Any]:
    """``result`` with the environment added under ``environment`` (the one key every output uses)."""
    return {**result, KEY: environment(model, precision=precision)}


def fix_threads(threads: int | None, deterministic: bool = True, device: Any = None) -> None:
    """Set torch's thread count (0 or None: leave torch's default) and, unless ``deterministic`` is off, make
    its algorithms deterministic where torch has a choice; the record then says which count ran."""
    import torch

    if threads:
        torch.set_num_threads(threads)
    if deterministic and getattr(device, "type", None) == "cuda":
        # cuBLAS is deterministic only with a fixed workspace, set before its first use.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.backends.cudnn.benchmark = False
    # warn_only: an op without a deterministic kernel warns instead of stopping a run of hours.
    torch.use_deterministic_algorithms(bool(deterministic), warn_only=True)


@functools.cache
def _static() -> dict[str, Any]:
    """What cannot change while the process runs (read once: git and the build summary cost milliseconds)."""
    import torch

    from heads import __version__

    commit, dirty = _git()
    return {
        "heads": __version__,
        "git_commit": commit,
        "git_dirty": dirty,
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "packages": {name: _version(name) for name in PACKAGES},
        "matches_lock": matches_lock(),
        "torch_build": _torch_build(torch),
        "cpu_capability": _safe(torch.backends.cpu.get_cpu_capability),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
    }


def _safe(fn) -> Any:
    try:
        return fn()
    except Exception:  # a field we cannot read is recorded as unknown, never a failed run
        return None


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _git() -> tuple[str | None, bool | None]:
    """Commit and whether heads/ differs from it, only when this package *is* a git checkout's heads/
    (a copy installed into a venv that sits inside some repository must not borrow that commit)."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(_CHECKOUT), *args], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()

    try:
        if Path(git("rev-parse", "--show-toplevel")).resolve() != _CHECKOUT:
            return None, None
        return git("rev-parse", "HEAD"), bool(git("status", "--porcelain", "--", "heads"))
    except (OSError, subprocess.SubprocessError):
        # a copy of a checkout without its .git (the GPU visit's working tree): the sender may name the commit
        # it copied; whether the copy differs from it is then unknown
        return os.environ.get("HEADS_GIT_COMMIT") or None, None


def _torch_build(torch) -> dict[str, Any]:
    """The parts of ``torch.__config__.show()`` that decide kernels: BLAS, oneDNN, OpenMP, compiler, CUDA
    (its "CPU capability usage" line is the runtime dispatch, recorded as ``cpu_capability``)."""
    text = _safe(torch.__config__.show) or ""
    settings = dict(re.findall(r"(\w+)=([^,\s]*)", text.partition("Build settings:")[2]))

    def line(pattern: str) -> str | None:
        m = re.search(pattern, text)
        return m.group(1).strip() if m else None

    return {
        "version": torch.__version__,
        "git": getattr(torch.version, "git_version", None),
        "cuda": torch.version.cuda,
        "blas": settings.get("BLAS_INFO"),
        "mkl": line(r"Math Kernel Library Version ([^\n]+?) for"),
        "mkldnn": line(r"MKL-DNN (v[\d.]+)"),
        "openmp": settings.get("USE_OPENMP"),
        "compiler": line(r"- (GCC [\d.]+|clang [\d.]+|MSVC [\d.]+)"),
    }


def _cpu_model() -> str | None:
    try:
        for row in Path("/proc/cpuinfo").read_text().splitlines():
            if row.startswith("model name"):
                return row.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or None


# -- the lock -----------------------------------------------------------------------------------------


def read_lock(path: str | Path | None = None) -> dict[str, str]:
    """``{normalised name: version}`` of a constraints file of ``name==version`` lines."""
    lock = Path(path) if path is not None else _CHECKOUT / LOCK
    pins = {}
    for row in lock.read_text().splitlines():
        row = row.split("#", 1)[0].strip()
        if not row:
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*(\S+)", row)
        if not m:
            raise ValueError(f"{lock}: {row!r} is not NAME==VERSION")
        pins[_normalise(m.group(1))] = m.group(2)
    return pins


def lock_mismatches(path: str | Path | None = None) -> list[str]:
    """Locked packages installed at another version, one line each; [] when all match. A locked package
    that is absent is no mismatch (installing one extra leaves the other's tools out), and a local label
    (torch's ``+cpu``) is the same release: the lock pins releases."""
    out = []
    for name, want in sorted(read_lock(path).items()):
        have = _version(name)
        if have is not None and have.split("+", 1)[0] != want:
            out.append(f"{name}: locked {want}, installed {have}")
    return out


def matches_lock() -> bool | None:
    """Whether the installed versions are the checkout's lock; None outside a checkout."""
    if not (_CHECKOUT / LOCK).exists():
        return None
    return _safe(lambda: not lock_mismatches())


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# -- mixed environments -------------------------------------------------------------------------------


def _flat(env: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out = {}
    for key, value in env.items():
        if isinstance(value, Mapping):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def describe_mix(envs: Iterable[Mapping[str, Any] | None]) -> str | None:
    """None when every record names one and the same environment; otherwise one sentence naming each
    field that differs with its values and how many records had each, and how many name none."""
    envs = list(envs)
    flat = [_flat(e) for e in envs if isinstance(e, Mapping)]
    missing = len(envs) - len(flat)
    parts = []
    for key in sorted({k for f in flat for k in f}):
        counts: dict[str, int] = {}
        for f in flat:
            shown = "-" if f.get(key) is None else str(f[key])
            counts[shown] = counts.get(shown, 0) + 1
        if len(counts) > 1:
            parts.append(f"{key} " + " vs ".join(f"{v} ({n})" for v, n in sorted(counts.items())))
    if missing and flat:
        parts.append(f"{missing} of {len(envs)} records name no environment")
    if not parts:
        return None
    return f"{len(envs)} records from different environments: " + "; ".join(parts)
