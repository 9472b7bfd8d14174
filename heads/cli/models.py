"""``heads models``: the cross-model table and figure, from each model's rendered masking table."""

from __future__ import annotations

import argparse
from pathlib import Path

from heads.cli.common import claim_out, fail
from heads.outpath import FOLDER, writes_outputs


def _pair(text: str) -> tuple[str, Path]:
    source, sep, folder = text.partition("=")
    if not sep or not source or not folder:
        raise fail(f"models: --model takes SOURCE=FOLDER (a shipped name or model folder, and the folder holding "
                   f"its masking.csv), got {text!r}")
    return source, Path(folder)


@writes_outputs
def cmd_models(args: argparse.Namespace) -> int:
    from heads.report import models as cross

    if not args.model and not args.rows:
        raise fail("models: nothing to tabulate; give --model SOURCE=FOLDER and/or --rows FILE")
    pairs = [_pair(m) for m in args.model or []]
    out = claim_out(args.out, "models", FOLDER, part="models")  # beside other tables in the same folder
    try:  # the rows rendered before, read first: a bad file is refused before any model is loaded
        earlier = [row for path in args.rows or [] for row in cross.earlier_rows(path)]
        redundancy = [cross.redundancy_of(folder) for _, folder in pairs]
        tables = [cross.masking_rows(folder / "masking.csv") for _, folder in pairs]
        tasks = [sorted({r["task"] for r in rows}) for rows in tables]
        for (_, folder), masked in zip(pairs, tasks, strict=True):
            if len(masked) != 1:
                raise ValueError(f"{folder / 'masking.csv'} masks {masked or 'nothing'}; one task per model")
        removable = [cross.removable_of(folder, task) for (_, folder), (task,) in zip(pairs, tasks, strict=True)]
    except (FileNotFoundError, ValueError) as exc:
        raise fail(f"models: {exc}") from None
    models = [(cross.load_layout(source, task, args.preset, args.data_root), rows)
              for (source, _), (task,), rows in zip(pairs, tasks, tables, strict=True)]
    try:
        table = cross.cross_model_table(models, earlier=earlier, redundancy=redundancy, removable=removable)
    except ValueError as exc:
        raise fail(f"models: {exc}") from None
    written = table.write(out, "models")
    written.append(cross.cross_model_figure(table, out / "models.png"))
    for path in written:
        print(path)
    return 0


def register(sub) -> None:
    p = sub.add_parser("models", help="the cross-model table: each model's layout and what masking its heads cost")
    p.add_argument("--model", action="append", metavar="SOURCE=FOLDER",
                   help="a model (shipped name or folder) and the rendered folder holding its masking.csv; repeat")
    p.add_argument("--rows", action="append", type=Path, metavar="FILE",
                   help="a cross-model table rendered before (another model's battery: its models.csv), whose "
                        "rows join the table as they are (its model is not loaded again); repeat")
    p.add_argument("--preset", default="pretrained", help="the preset the model is loaded at (default pretrained)")
    p.add_argument("--data-root", default=None, help="where shipped conversions are cached (default the preset's)")
    p.add_argument("--out", type=Path, required=True, help="folder for models.csv, models.md and models.png")
    p.set_defaults(func=cmd_models)
