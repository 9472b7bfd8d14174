# Every entry of the run sheet is one job: training runs, post-hoc pruning, analyses. The command line
# comes from the entry (heads.sheet.command_line); the label is the run's folder under the run tree.
# Threads, GPUs and memory are the preset's (config threads and job_resources, common.smk); the command
# runs on what the job was granted.


rule train:
    input:
        entry_inputs,
    output:
        f"{RUNS}/{{label}}/summary.json",
    log:
        f"logs/{STAGE}/runs/{{label}}.log",
    benchmark:
        f"logs/{STAGE}/benchmarks/runs/{{label}}.tsv"
    wildcard_constraints:
        label=labels_of("train", "prune"),
    conda:
        "../../environment.yml"
    threads: config["threads"]
    resources:
        gpu=entry_gpus,
        mem_mb=JOB["mem_mb"],
    params:
        command=entry_command,
    shell:
        "{params.command} > {log:q} 2>&1 || sh workflow/scripts/say_why.sh {log:q}"


rule analyse:
    input:
        entry_inputs,
    output:
        f"{RUNS}/{{label}}.json",
    log:
        f"logs/{STAGE}/runs/{{label}}.log",
    benchmark:
        f"logs/{STAGE}/benchmarks/runs/{{label}}.tsv"
    wildcard_constraints:
        label=labels_of(
            "ablate", "curve", "speed", "roles", "redundancy", "shift", "memory", "clock", "trivial", "decode-speed",
            "mask",
        ),
    conda:
        "../../environment.yml"
    threads: config["threads"]
    resources:
        gpu=entry_gpus,
        mem_mb=JOB["mem_mb"],
    params:
        command=entry_command,
    shell:
        "{params.command} > {log:q} 2>&1 || sh workflow/scripts/say_why.sh {log:q}"
