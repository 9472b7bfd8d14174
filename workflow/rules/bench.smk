# Performance measurements: not part of the default run (`snakemake bench`).


rule bench:
    input:
        "results/bench/pruned_step.md",


rule bench_pruned_step:
    output:
        "results/bench/pruned_step.md",
    log:
        "logs/bench/pruned_step.log",
    conda:
        "../../environment.yml"
    threads: workflow.cores
    params:
        steps=config["bench"]["steps"],
        warmup=config["bench"]["warmup"],
    shell:
        "python benchmarks/bench_pruned_step.py --steps {params.steps} --warmup {params.warmup}"
        " --out {output} > {log} 2>&1"
