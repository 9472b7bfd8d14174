"""The one declaration of each analysis kind (heads.report.kinds) stays in step with what reads and writes it."""

import argparse

from heads.report.kinds import KINDS, RUN_KEYS, SOURCES


def _commands() -> set[str]:
    from heads.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return set(sub.choices)


def test_every_kind_names_the_command_that_writes_it_and_how_a_claim_reads_it():
    commands = _commands()
    for name, kind in KINDS.items():
        assert kind.command in commands, (name, kind.command)
        if kind.measures:  # a source of claims: an estimator, or one of the two selectors measures.py routes
            assert kind.value is not None or name in ("speed", "decoding"), name
            assert "measure" in kind.keys and set(kind.required) <= kind.keys, name
            assert kind.arm is None or kind.arm == "step" or kind.arm in kind.keys, name
    assert SOURCES[0] == "run" and "arm" in RUN_KEYS and "strategy" not in RUN_KEYS
