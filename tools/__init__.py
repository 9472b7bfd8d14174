"""This repository's logistics, outside the ``heads`` library: what a preset costs on the machines at hand (CPU
minutes calibrated on the jobs this machine ran, :mod:`tools.cpu_cost`) and on one short GPU loan (the visit's
parts, caps and timings, :mod:`tools.visit`), and the command printing them beside ``heads plan``'s estimate
(``python -m tools.plan``, :mod:`tools.plan`); and the rendering of the findings and costs quoted in README.md and
docs/ (``python -m tools.readme``, :mod:`tools.readme`).

Run from the repository root (``python -m tools.plan``; the tests put the root on ``sys.path``, see
pyproject.toml): the package is not installed with ``heads``, and ``heads`` imports none of it
(tests/test_logistics.py checks), so a library user never meets a GPU loan's caps or this machine's timings.
"""
