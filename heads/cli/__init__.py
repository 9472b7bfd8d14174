"""The ``heads`` command line: every pipeline step is callable without Snakemake."""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
from collections.abc import Sequence

from heads import __version__
from heads.cli import analysis, clock, decoding, masking, memory, models, plan, pruning, report, runs, surgery
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
    for module in (pruning, masking, runs, surgery, analysis, memory, clock, decoding, report, plan, models):
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
             errno.EDQUOT: "the disk quota is exceeded", errno.EISDIR: "it is a folder, not a file",
             errno.ENAMETOOLONG: "a name in the path is longer than the file system allows (255 bytes)",
             errno.ELOOP: "a loop of symbolic links (a link that leads back to itself)",
             errno.ENOENT: "no such file or folder", errno.ENOTEMPTY: "the folder is not empty",
             errno.EFBIG: "the file is larger than the file system allows", errno.EXDEV: "it is on another device",
             errno.EMLINK: "too many links", errno.ENXIO: "no such device", errno.ENODEV: "no such device",
             errno.EBUSY: "it is in use", errno.ETXTBSY: "it is in use", errno.EIO: "an input/output error "
             "(the disk or its connection failed)", errno.EMFILE: "too many open files (raise ulimit -n)",
             errno.ENFILE: "too many open files in the system"}


def _fs_message(exc: OSError) -> str | None:
    """One line for a file-system error a user can fix from the path, else None."""
    why = FS_ERRORS.get(exc.errno or -1)
    if why is None:
        return None
    if exc.errno == errno.EEXIST and exc.filename and os.path.isfile(exc.filename):
        why = "a file is where a folder is needed"  # mkdir onto (or through) a file
    paths = " -> ".join(str(p) for p in (exc.filename, exc.filename2) if p)
    return f"{paths}: {why}" if paths else why


def _file_in_traceback(exc: BaseException) -> str | None:
    """The file an exception that does not carry its name was raised reading, from the locals of the frames it
    passed, innermost first: an open file first (``Path.read_text``'s own, ``json.load(f)``'s, a csv reader's),
    then a path (``json.loads(path.read_text())``: the file is closed by then)."""
    tb, frames = exc.__traceback__, []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for opened in (True, False):
        for frame in reversed(frames):
            for value in list(frame.f_locals.values()):
                try:  # a local may be anything (a lazy proxy whose attributes raise): none may fail the message
                    name = getattr(value, "name", None) if opened and hasattr(value, "read") else value
                    if (opened and name is value) or not isinstance(name, (str, os.PathLike)):
                        continue
                    if os.path.isfile(name):
                        return str(name)
                except Exception:  # a local that is no readable path: try the next
                    continue
    return None


def _first_bad_byte(path: str, exc: UnicodeDecodeError) -> tuple[int, bytes]:
    """The offset and value of the first byte of ``path`` that is not UTF-8 (a reader decoding in chunks reports
    the offset in its chunk); the exception's own where the file cannot be read again."""
    try:
        with open(path, "rb") as f:
            f.read(1 << 28).decode("utf-8")
    except UnicodeDecodeError as found:
        return found.start, found.object[found.start:found.start + 1]
    except OSError:
        pass
    return exc.start, exc.object[exc.start:exc.start + 1]


def _classify(exc: BaseException) -> str | None:
    """One line for what escaped a command when the user can fix it from that line (a path, a file, a value),
    else None: a bug, shown with its traceback."""
    if isinstance(exc, (FileNotFoundError, PermissionError)) and exc.errno is None and exc.args:
        return one_line(str(exc))  # raised with its own message (a missing corpus, a folder not there)
    if isinstance(exc, OSError):
        return _fs_message(exc)
    if isinstance(exc, UnicodeDecodeError):
        where = _file_in_traceback(exc)
        if where is None:
            return f"a file read as text is not UTF-8 ({exc.reason}); save it as UTF-8"
        start, bad = _first_bad_byte(where, exc)
        return f"{where}: not UTF-8 text (byte {start}: {bad!r}); save it as UTF-8"
    if isinstance(exc, json.JSONDecodeError):  # a garbage config.json or tokenizer file read by a library
        where = _file_in_traceback(exc)
        return f"{where}, line {exc.lineno}: not valid JSON ({exc.msg})" if where else None
    if type(exc).__name__ == "SafetensorError":  # a safetensors write or read; a full disk is an OS error inside
        from heads.surgery.persist import os_error_of

        found = os_error_of(exc)
        return _fs_message(found) if found is not None else f"a safetensors file: {one_line(str(exc))}"
    if _is_input_error(exc):
        return one_line(str(exc))
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError" or (
            isinstance(exc, RuntimeError) and "can't allocate memory" in str(exc)):
        return (f"out of memory ({one_line(str(exc))[:200] or type(exc).__name__}); choose a smaller model "
                "(model.d, model.layers, model.vocab, model.max_len) or batch (data.batch_size, data.seq_len, "
                "train.accumulate to split it)")
    return None


def parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """``argv`` parsed. A command's positionals may stand between its options (a source, options, then
    ``KEY=VALUE`` overrides): argparse reads one run of positionals, so what is left over is read again by the
    command's own parser in argparse's intermixed mode, which takes positionals wherever they stand."""
    args, extra = parser.parse_known_args(argv)
    if not extra:
        return args
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    command = sub.choices[args.command]
    if any(isinstance(a, argparse._SubParsersAction) for a in command._actions):  # `heads data prepare`
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    at = next(i for i, word in enumerate(argv) if not word.startswith("-"))  # the command's word
    return command.parse_intermixed_args(argv[at + 1:], argparse.Namespace(command=args.command))


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # --debug may stand anywhere (after the command too); it never collides with a KEY=VALUE override.
    debug = "--debug" in argv or os.environ.get("HEADS_DEBUG", "") not in ("", "0")
    argv = [a for a in argv if a != "--debug"]
    parser = build_parser()
    args = parse(parser, argv)
    _quiet_libraries()
    from heads.outpath import inputs_of, reading

    try:
        with reading(inputs_of(args)):  # what the command reads is never what it writes
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
    except Exception as exc:
        why = _classify(exc)
        if debug or why is None:
            raise
        # a message that already names its command (heads.io's output checks do) is not prefixed twice
        message = why if why.startswith(f"heads {args.command}:") else f"heads {args.command}: {why}"
        print(message, file=sys.stderr)
        raise UserError(message) from None


if __name__ == "__main__":
    sys.exit(main())
