# Rendering: one rule per table and per figure (deleting one regenerates just that one), and the ledger.
# It reads finished runs and writes small files in seconds: on a cluster it runs where Snakemake runs, never
# as a queued job.


localrules:
    table,
    figure,
    replication_claims,
    claims,


# the preconditions every claims.yaml may name: a changed one re-judges every ledger
SHARED_PRECONDITIONS = [p for p in ["replications/preconditions.yaml"] if os.path.isfile(p)]


# A replication's claims.{md,csv} and baselines.{csv,md} are its ledger, not tables.
ruleorder: replication_claims > table


rule table:
    input:
        replication_inputs,
    output:
        csv=f"{OUT}/{{replication}}/{{table}}.csv",
        md=report(
            f"{OUT}/{{replication}}/{{table}}.md",
            caption="../report/table.rst",
            category="{replication}",
        ),
    log:
        f"logs/{STAGE}/report/{{replication}}/{{table}}.table.log",
    benchmark:
        f"logs/{STAGE}/benchmarks/report/{{replication}}/{{table}}.table.tsv"
    conda:
        "../../environment.yml"
    params:
        runs=lambda w: RUNS,
        tasks=replication_tasks,
        labels=replication_labels,
        folder=lambda w, output: os.path.dirname(output.csv),
    shell:
        "heads report --runs {params.runs:q} --replication {wildcards.replication}"
        " --tasks {params.tasks:q} --labels {params.labels:q} --only {wildcards.table}"
        " --out {params.folder:q} > {log:q} 2>&1 || sh workflow/scripts/say_why.sh {log:q}"


rule figure:
    input:
        replication_inputs,
    output:
        report(
            f"{OUT}/{{replication}}/{{figure}}.png",
            caption="../report/figure.rst",
            category="{replication}",
        ),
    log:
        f"logs/{STAGE}/report/{{replication}}/{{figure}}.figure.log",
    benchmark:
        f"logs/{STAGE}/benchmarks/report/{{replication}}/{{figure}}.figure.tsv"
    conda:
        "../../environment.yml"
    params:
        runs=lambda w: RUNS,
        tasks=replication_tasks,
        labels=replication_labels,
        folder=lambda w, output: os.path.dirname(output[0]),
        # what ../report/figure.rst prints under the figure: report.yaml's caption beside it
        caption=figure_caption,
    shell:
        "heads report --runs {params.runs:q} --replication {wildcards.replication}"
        " --tasks {params.tasks:q} --labels {params.labels:q} --only {wildcards.figure}.png"
        " --out {params.folder:q} > {log:q} 2>&1 || sh workflow/scripts/say_why.sh {log:q}"


rule replication_claims:
    input:
        replication_inputs,
        spec="replications/{replication}/claims.yaml",
        shared=SHARED_PRECONDITIONS,
    output:
        # its ledger page, and what the whole ledger merges (heads.report.ledger)
        f"{OUT}/{{replication}}/claims.md",
        f"{OUT}/{{replication}}/claims.csv",
        f"{OUT}/{{replication}}/claims.json",
        multiext(f"{OUT}/{{replication}}/baselines", ".csv", ".md"),
        f"{OUT}/{{replication}}/environments.json",
    log:
        f"logs/{STAGE}/report/{{replication}}/claims.log",
    benchmark:
        f"logs/{STAGE}/benchmarks/report/{{replication}}/claims.tsv"
    conda:
        "../../environment.yml"
    params:
        runs=lambda w: RUNS,
        tasks=replication_tasks,
        labels=replication_labels,
        folder=lambda w, output: os.path.dirname(output[0]),
    shell:
        "heads report --runs {params.runs:q} --replication {wildcards.replication}"
        " --tasks {params.tasks:q} --labels {params.labels:q} --only claims"
        " --out {params.folder:q} > {log:q} 2>&1 || sh workflow/scripts/say_why.sh {log:q}"


# The committed measurements of other machines and runs (benchmarks/bench_perturbation.py imitates another machine,
# bench_machines.py compares with a real one, or with another run of the same DAG): each is of one preset's results,
# whose ledger marks the verdicts it flipped as fragile.
# the replications with claims (every one today; a folder without claims.yaml renders no ledger)
CLAIMED = [r for r in REPLICATIONS if os.path.isfile(f"replications/{r}/claims.yaml")]
MEASURED = {"results/tiny": ("results/bench/perturbation.json", "results/bench/machines.json"),
            "results/pretrained": ("results/bench/pretrained_rerun.json",)}
ROBUSTNESS = [f for f in MEASURED.get(OUT, ()) if os.path.isfile(f)]
# which ledgers the whole one merges, at which preset: a replication joining or leaving re-merges it
CLAIMS_SETTINGS = f"{SETTINGS}/claims.json"
write_settings(CLAIMS_SETTINGS, {"preset": PRESET, "ledgers": CLAIMED, "robustness": ROBUSTNESS})


rule claims:
    # The whole ledger merges the replications' own (each rendered from its runs by replication_claims), so
    # replications run apart, on other days, still make one ledger: `heads claims --ledgers OUT/*/claims.csv`.
    input:
        ledgers=expand(f"{OUT}/{{replication}}/claims.csv", replication=CLAIMED),
        records=expand(f"{OUT}/{{replication}}/claims.json", replication=CLAIMED),  # what the merge reads
        baselines=expand(f"{OUT}/{{replication}}/baselines.csv", replication=CLAIMED),
        environments=expand(f"{OUT}/{{replication}}/environments.json", replication=CLAIMED),
        specs=expand("replications/{replication}/claims.yaml", replication=CLAIMED),
        robustness=ROBUSTNESS,
        settings=CLAIMS_SETTINGS,
    output:
        md=report(f"{OUT}/CLAIMS.md", caption="../report/claims.rst", category="Claims ledger"),
        csv=f"{OUT}/claims.csv",
        records=f"{OUT}/claims.json",
        baselines=multiext(f"{OUT}/baselines", ".csv", ".md"),
    log:
        f"logs/{STAGE}/report/claims.log",
    benchmark:
        f"logs/{STAGE}/benchmarks/report/claims.tsv"
    conda:
        "../../environment.yml"
    params:
        preset=PRESET,
        folder=lambda w, output: os.path.dirname(output.md),
        robustness=("--robustness " + " ".join(ROBUSTNESS)) if ROBUSTNESS else "",
    shell:
        "heads claims --ledgers {input.ledgers:q} --replications replications --preset {params.preset} "
        "--out {params.folder:q} "
        "{params.robustness} > {log:q} 2>&1 || sh workflow/scripts/say_why.sh {log:q}"


# The cross-model table (MODELS: common.smk): each masked model's layout beside what masking its heads cost.
if MODELS:

    rule models:
        localrule: True
        input:
            [f"{folder}/masking.csv" for _, folder in MODELS],
            # the removable share each replication's ledger measured (heads.report.models.removable_of)
            [f"{folder}/claims.csv" for _, folder in MODELS],
            MODEL_TABLES,
            MODEL_ROWS,
        output:
            multiext(f"{OUT}/models", ".csv", ".md", ".png"),
        log:
            f"logs/{STAGE}/report/models.log",
        conda:
            "../../environment.yml"
        params:
            models=" ".join(f"--model {shlex.quote(f'{source}={folder}')}" for source, folder in MODELS),
            rows=" ".join(f"--rows {shlex.quote(path)}" for path in MODEL_ROWS),
            preset=PRESET,
            root=DATA,
            folder=lambda w, output: os.path.dirname(output[0]),
        shell:
            "heads models {params.models} {params.rows} --preset {params.preset} --data-root {params.root:q}"
            " --out {params.folder:q} > {log:q} 2>&1 || sh workflow/scripts/say_why.sh {log:q}"
