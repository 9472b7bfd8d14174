# Every entry of the run sheet is one job: training runs, post-hoc pruning, analyses. The command line
# comes from the entry (heads.sheet.command_line); the label is the run's folder under the run tree.


rule train:
    input:
        entry_inputs,
    output:
        f"{RUNS}/{{label}}/summary.json",
    log:
        f"logs/{PRESET}/runs/{{label}}.log",
    benchmark:
        f"logs/{PRESET}/benchmarks/runs/{{label}}.tsv"
    wildcard_constraints:
        label=labels_of("train", "prune"),
    conda:
        "../../environment.yml"
    threads: 1
    resources:
        gpu=lambda w: 1 if PRESET == "paper" else 0,
    params:
        command=entry_command,
    shell:
        "{params.command} > {log:q} 2>&1"


rule analyse:
    input:
        entry_inputs,
    output:
        f"{RUNS}/{{label}}.json",
    log:
        f"logs/{PRESET}/runs/{{label}}.log",
    benchmark:
        f"logs/{PRESET}/benchmarks/runs/{{label}}.tsv"
    wildcard_constraints:
        label=labels_of("ablate", "curve", "speed", "roles", "trivial"),
    conda:
        "../../environment.yml"
    threads: 1
    params:
        command=entry_command,
    shell:
        "{params.command} > {log:q} 2>&1"
