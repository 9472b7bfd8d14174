# heads: one DAG from training through head pruning to the claims ledger. Stages live in
# workflow/rules/*.smk; every rule calls the `heads` command line (the library knows nothing of Snakemake).
import os

from snakemake.utils import min_version, validate

min_version("9.0")


configfile: "workflow/config/default.yaml"


validate(config, "workflow/schemas/config.schema.yaml")


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/surgery.smk"
include: "workflow/rules/bench.smk"


# The run tree (git-ignored) is a target too: a fresh clone holds the committed tables but no runs, and without
# this Snakemake would call those tables up to date and run nothing; with it the whole DAG runs and re-renders.
rule all:
    default_target: True
    input:
        report_outputs(),
        surgery_tables(),
        all_runs(),
        surgery_runs(),


# One target per replication, named as its folder (`snakemake --cores 2 michel2019`): its runs and what it
# renders, with its own ledger (claims.md, claims.csv, baselines); the whole ledger, CLAIMS.md, merges them all.
for _replication in REPLICATIONS:

    rule:
        name:
            _replication
        input:
            [done(label) for label in SHEET.of[_replication]],
            replication_outputs(_replication),
            # a model's own battery (model=NAME) also renders its row of the cross-model table, which the
            # preset's table then reads without loading that model again
            [f"{OUT}/models.{ext}" for ext in ("csv", "md", "png")] if MODEL and MODELS else [],
        localrule: True
