"""The run sheet: every run a replication needs, declared as data and looked up by label.

A replication's ``runs.py`` (``replications/<name>/runs.py``) turns its part of
a preset's DAG settings into :class:`RunSpec` entries. The sheet is the union
of all replications' entries, checked before any job runs: labels unique,
every run it starts from on the sheet, the same label never declared twice
with different contents. The workflow looks runs up by label and turns an
entry into one ``heads`` command line (:func:`command_line`); the command
writes the entry's identity (:meth:`RunSpec.identity`) into the run's
``config.json`` / ``summary.json`` (or an analysis's JSON), which is what the
report reads. Nothing is ever parsed back out of a folder name.

One job per module, in the order a sheet is made:

- :mod:`heads.sheet.declare`: an entry and its label, and the entries replications share (what ``runs.py`` uses);
- :mod:`heads.sheet.settings`: a preset's settings per replication, merged and checked (:func:`preset_settings`);
- :mod:`heads.sheet.custom_entries`: a user's own strategies as entries of the replications they join;
- :mod:`heads.sheet.assemble`: all entries as one checked :class:`Sheet` (:func:`build`);
- :mod:`heads.sheet.commands`: an entry's ``heads`` command line (:func:`command_line`) and the config it lays
  over its base, handed over as a JSON file (:func:`entry_overrides`).

The names below are the public API (replications, the workflow and plug-ins import them from ``heads.sheet``);
code inside ``heads`` imports from the module that defines a name. Nothing here imports anything heavy: the
workflow builds the sheet at parse time.
"""

from heads.sheet.assemble import Sheet, build, check
from heads.sheet.commands import command_line, entry_overrides, overrides_file, param_words
from heads.sheet.custom_entries import CUSTOM_JOINS, Custom, custom
from heads.sheet.declare import (
    COMMANDS,
    LONGER,
    RunSpec,
    SheetError,
    analysis_label,
    baseline,
    fmt_ratio,
    layered,
    longer_baselines,
    masking_runs,
    run_label,
    shard_config,
)
from heads.sheet.settings import check_config_names, load_replication, preset_settings, replications, seeds_of

__all__ = [
    "COMMANDS", "CUSTOM_JOINS", "LONGER", "Custom", "RunSpec", "Sheet", "SheetError", "analysis_label",
    "baseline", "build", "check", "check_config_names", "command_line", "custom", "entry_overrides", "fmt_ratio",
    "layered", "load_replication", "longer_baselines", "masking_runs", "overrides_file", "param_words",
    "preset_settings", "replications", "run_label", "seeds_of", "shard_config",
]
