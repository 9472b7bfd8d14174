# Training runs: baseline, fewer heads from scratch, training-time pruning, L0 gates, post-hoc fine-tunes.


rule train:
    input:
        train_inputs,
    output:
        f"{RUNS}/{{task}}/{{variant}}/{{strategy}}/{{ratio}}/seed{{seed}}/summary.json",
    log:
        f"logs/{PRESET}/train/{{task}}/{{variant}}/{{strategy}}/{{ratio}}/seed{{seed}}.log",
    benchmark:
        f"logs/{PRESET}/benchmarks/train/{{task}}/{{variant}}/{{strategy}}/{{ratio}}/seed{{seed}}.tsv"
    wildcard_constraints:
        variant="baseline|scratch|during|l0|posthoc_ft",
    conda:
        "../../environment.yml"
    threads: 1
    resources:
        gpu=lambda w: 1 if PRESET == "paper" else 0,
    params:
        out=lambda w, output: os.path.dirname(output[0]),
        overrides=lambda w: " ".join(base_overrides(w) + strategy_overrides(w)),
        preset=PRESET,
    shell:
        "heads train --task {wildcards.task} --preset {params.preset} --out {params.out} {params.overrides}"
        " > {log} 2>&1"
