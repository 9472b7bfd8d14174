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
    from heads.report.models import cross_model_figure, cross_model_table, load_layout, masking_rows

    pairs = [_pair(m) for m in args.model]
    out = claim_out(args.out, "models", FOLDER, part="models")  # beside other tables in the same folder
    models = []
    for source, folder in pairs:
        try:
            rows = masking_rows(folder / "masking.csv")
        except FileNotFoundError as exc:
            raise fail(f"models: {exc}") from None
        tasks = sorted({r["task"] for r in rows})
        if len(tasks) != 1:
            raise fail(f"models: {folder / 'masking.csv'} masks {tasks or 'nothing'}; one task per model")
        models.append((load_layout(source, tasks[0], args.preset, args.data_root), rows))
    table = cross_model_table(models)
    written = table.write(out, "models")
    written.append(cross_model_figure(table, out / "models.png"))
    for path in written:
        print(path)
    return 0


def register(sub) -> None:
    p = sub.add_parser("models", help="the cross-model table: each model's layout and what masking its heads cost")
    p.add_argument("--model", action="append", required=True, metavar="SOURCE=FOLDER",
                   help="a model (shipped name or folder) and the rendered folder holding its masking.csv; repeat")
    p.add_argument("--preset", default="pretrained", help="the preset the model is loaded at (default pretrained)")
    p.add_argument("--data-root", default=None, help="where shipped conversions are cached (default the preset's)")
    p.add_argument("--out", type=Path, required=True, help="folder for models.csv, models.md and models.png")
    p.set_defaults(func=cmd_models)
