# Performance measurements: not part of the default run (`snakemake bench --cores 2`).
# Every script writes its Markdown table and merges its keys into results/bench/summary.json
# (under a lock, atomically). Each rule claims all cores so the benchmarks run one at a time:
# timings taken side by side would disturb each other. The scripts themselves use one torch thread.


rule bench:
    input:
        "results/bench/pruned_step.md",
        "results/bench/engine.md",
        "results/bench/ablation.md",
        "results/bench/importance.md",
        "results/bench/memory.md",


rule bench_pruned_step:
    output:
        "results/bench/pruned_step.md",
    log:
        "logs/bench/pruned_step.log",
    conda:
        "../../environment.yml"
    threads: lambda wildcards: workflow.cores
    params:
        steps=config["bench"]["steps"],
        warmup=config["bench"]["warmup"],
    shell:
        "python benchmarks/bench_pruned_step.py --steps {params.steps} --warmup {params.warmup}"
        " --out {output:q} --summary results/bench/summary.json > {log:q} 2>&1"
        " || sh workflow/scripts/say_why.sh {log:q}"


rule bench_engine:
    output:
        "results/bench/engine.md",
    log:
        "logs/bench/engine.log",
    conda:
        "../../environment.yml"
    threads: lambda wildcards: workflow.cores
    params:
        data=config["data_root"],
    shell:
        "python benchmarks/bench_engine.py --data-root {params.data:q}"
        " --out {output:q} --summary results/bench/summary.json > {log:q} 2>&1"
        " || sh workflow/scripts/say_why.sh {log:q}"


rule bench_ablation:
    output:
        "results/bench/ablation.md",
    log:
        "logs/bench/ablation.log",
    conda:
        "../../environment.yml"
    threads: lambda wildcards: workflow.cores
    shell:
        "python benchmarks/bench_ablation.py"
        " --out {output:q} --summary results/bench/summary.json > {log:q} 2>&1"
        " || sh workflow/scripts/say_why.sh {log:q}"


rule bench_importance:
    output:
        "results/bench/importance.md",
    log:
        "logs/bench/importance.log",
    conda:
        "../../environment.yml"
    threads: lambda wildcards: workflow.cores
    shell:
        "python benchmarks/bench_importance.py"
        " --out {output:q} --summary results/bench/summary.json > {log:q} 2>&1"
        " || sh workflow/scripts/say_why.sh {log:q}"


rule bench_memory:
    output:
        "results/bench/memory.md",
    log:
        "logs/bench/memory.log",
    conda:
        "../../environment.yml"
    threads: lambda wildcards: workflow.cores
    shell:
        "python benchmarks/bench_memory.py"
        " --out {output:q} --summary results/bench/summary.json > {log:q} 2>&1"
        " || sh workflow/scripts/say_why.sh {log:q}"
