# heads: one DAG from head surgery to the claims ledger. Stages live in
# workflow/rules/*.smk; every rule calls the `heads` command line.
from snakemake.utils import min_version, validate

min_version("9.0")


configfile: "workflow/config/default.yaml"


validate(config, "workflow/schemas/config.schema.yaml")


include: "workflow/rules/common.smk"
include: "workflow/rules/surgery.smk"
include: "workflow/rules/bench.smk"


rule all:
    default_target: True
    input:
        surgery_tables(),
