# Rendering: one rule per table and per figure (deleting one regenerates just that one), and the ledger.
# It reads finished runs and writes small files in seconds: on a cluster it runs where Snakemake runs, never
# as a queued job.


localrules:
    table,
    figure,
    replication_claims,
    claims,


# A replication's claims.md is its ledger page, not a table.
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
        f"logs/{PRESET}/report/{{replication}}/{{table}}.table.log",
    benchmark:
        f"logs/{PRESET}/benchmarks/report/{{replication}}/{{table}}.table.tsv"
    conda:
        "../../environment.yml"
    params:
        runs=lambda w: RUNS,
        tasks=replication_tasks,
        folder=lambda w, output: os.path.dirname(output.csv),
    shell:
        "heads report --runs {params.runs:q} --replication {wildcards.replication}"
        " --tasks {params.tasks:q} --only {wildcards.table}"
        " --out {params.folder:q} > {log:q} 2>&1"


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
        f"logs/{PRESET}/report/{{replication}}/{{figure}}.figure.log",
    benchmark:
        f"logs/{PRESET}/benchmarks/report/{{replication}}/{{figure}}.figure.tsv"
    conda:
        "../../environment.yml"
    params:
        runs=lambda w: RUNS,
        tasks=replication_tasks,
        folder=lambda w, output: os.path.dirname(output[0]),
    shell:
        "heads report --runs {params.runs:q} --replication {wildcards.replication}"
        " --tasks {params.tasks:q} --only {wildcards.figure}.png"
        " --out {params.folder:q} > {log:q} 2>&1"


rule replication_claims:
    input:
        replication_inputs,
        spec="replications/{replication}/claims.yaml",
    output:
        f"{OUT}/{{replication}}/claims.md",
    log:
        f"logs/{PRESET}/report/{{replication}}/claims.log",
    benchmark:
        f"logs/{PRESET}/benchmarks/report/{{replication}}/claims.tsv"
    conda:
        "../../environment.yml"
    params:
        runs=lambda w: RUNS,
        tasks=replication_tasks,
        folder=lambda w, output: os.path.dirname(output[0]),
    shell:
        "heads report --runs {params.runs:q} --replication {wildcards.replication}"
        " --tasks {params.tasks:q} --only claims"
        " --out {params.folder:q} > {log:q} 2>&1"


# The committed measurements of other machines (benchmarks/bench_perturbation.py imitates one, bench_machines.py
# compares with a real one) are of the tiny results: the ledger of those marks the verdicts they flipped as fragile.
ROBUSTNESS = [f for f in ("results/bench/perturbation.json", "results/bench/machines.json")
              if OUT == "results" and os.path.isfile(f)]


rule claims:
    input:
        all_runs(),
        specs=expand("replications/{replication}/claims.yaml", replication=REPLICATIONS),
        robustness=ROBUSTNESS,
    output:
        md=report(f"{OUT}/CLAIMS.md", caption="../report/claims.rst", category="Claims ledger"),
        csv=f"{OUT}/claims.csv",
        baselines=multiext(f"{OUT}/baselines", ".csv", ".md"),
    log:
        f"logs/{PRESET}/report/claims.log",
    benchmark:
        f"logs/{PRESET}/benchmarks/report/claims.tsv"
    conda:
        "../../environment.yml"
    params:
        runs=lambda w: RUNS,
        folder=lambda w, output: os.path.dirname(output.md),
        robustness=("--robustness " + " ".join(ROBUSTNESS)) if ROBUSTNESS else "",
    shell:
        "heads claims --runs {params.runs:q} --replications replications --out {params.folder:q} "
        "{params.robustness} > {log:q} 2>&1"
