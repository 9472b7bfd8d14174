"""The ``heads`` command line: every pipeline step is callable without Snakemake."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from heads import __version__
from heads.cli import analysis, pruning, report, runs, surgery


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="heads", description="Attention-head pruning: surgery, training, replication."
    )
    parser.add_argument("--version", action="version", version=f"heads {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (pruning, runs, surgery, analysis, report):
        module.register(sub)
    return parser


def _quiet_libraries() -> None:
    """Progress bars of datasets and save_pretrained would drown the logs of every rule."""
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def main(argv: Sequence[str] | None = None) -> int:
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
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
