"""The ``heads`` command line: every pipeline step is callable without Snakemake."""

from __future__ import annotations

import argparse
import errno
import os
import sys
from collections.abc import Sequence

from heads import __version__
from heads.cli import analysis, clock, memory, plan, pruning, report, runs, surgery
from heads.cli.common import UserError, one_line


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="heads", description="Attention-head pruning: surgery, training, replication."
    )
    parser.add_argument("--version", action="version", version=f"heads {__version__}")
    parser.add_argument(
        "--debug", action="store_true", help="show the traceback of a bad-input error (also: HEADS_DEBUG=1)"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (pruning, runs, surgery, analysis, memory, clock, report, plan):
        module.register(sub)
    return parser


def _quiet_libraries() -> None:
    """Progress bars of datasets and save_pretrained would drown the logs of every rule."""
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def _is_input_error(exc: BaseException) -> bool:
    """Errors a user causes and can fix from the message alone (all name the file, key or value)."""
    from heads.config import ConfigError
    from heads.io import InputError

    return isinstance(exc, (InputError, ConfigError))


INTERRUPTED = 130  # the shell's status for a process ended by SIGINT (128 + 2)
# file-system errors a user fixes from the path alone: one line, never a traceback
FS_ERRORS = {errno.ENOTDIR: "a path component is a file, not a folder", errno.EEXIST: "it exists already",
             errno.EACCES: "permission denied", errno.EPERM: "permission denied",
             errno.EROFS: "a read-only file system", errno.ENOSPC: "no space left on the device",
             errno.EDQUOT: "the disk quota is exceeded", errno.EISDIR: "it is a folder, not a file"}


def _fs_message(exc: OSError) -> str | None:
    """One line for a file-system error a user can fix from the path, else None."""
    why = FS_ERRORS.get(exc.errno or -1)
    if why is None:
        return None
    if exc.errno == errno.EEXIST and exc.filename and os.path.isfile(exc.filename):
        why = "a file is where a folder is needed"  # mkdir onto (or through) a file
    paths = " -> ".join(str(p) for p in (exc.filename, exc.filename2) if p)
    return f"{paths}: {why}" if paths else why


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # --debug may stand anywhere (after the command too); it never collides with a KEY=VALUE override.
    debug = "--debug" in argv or os.environ.get("HEADS_DEBUG", "") not in ("", "0")
    argv = [a for a in argv if a != "--debug"]
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # KEY=VALUE overrides may follow a positional source and options (argparse cannot place a second
    # variadic positional after options by itself).
    if extra:
        if hasattr(args, "overrides") and all("=" in e and not e.startswith("-") for e in extra):
            args.overrides = [*(args.overrides or []), *extra]
        else:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
    _quiet_libraries()
    try:
        return args.func(args)
    except UserError as exc:
        print(one_line(exc), file=sys.stderr)
        raise
    except KeyboardInterrupt:
        # a run interrupted keeps its last checkpoint; the same command resumes it
        print(f"heads {args.command}: interrupted; run the same command again to resume", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:
        # The reader stopped reading (`heads plan | head`): not this command's failure. Point stdout at nothing so
        # the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:
        why = _fs_message(exc)
        if debug or why is None:
            raise
        message = f"heads {args.command}: {why}"
        print(message, file=sys.stderr)
        raise UserError(message) from None
    except Exception as exc:
        if debug or not _is_input_error(exc):
            raise
        message = f"heads {args.command}: {one_line(exc)}"
        print(message, file=sys.stderr)
        raise UserError(message) from None


if __name__ == "__main__":
    sys.exit(main())
