# Post-hoc pruning: score the trained baseline of a seed, prune to a ratio, evaluate.


rule posthoc_prune:
    input:
        run_file("{task}", "baseline", "none", 0, "{seed}"),
    output:
        f"{RUNS}/{{task}}/posthoc/{{scorer}}/{{ratio}}/seed{{seed}}/eval.json",
    log:
        f"logs/{PRESET}/posthoc/{{task}}/{{scorer}}/{{ratio}}/seed{{seed}}.log",
    benchmark:
        f"logs/{PRESET}/benchmarks/posthoc/{{task}}/{{scorer}}/{{ratio}}/seed{{seed}}.tsv"
    conda:
        "../../environment.yml"
    threads: 1
    params:
        run=lambda w, input: os.path.dirname(input[0]),
        out=lambda w, output: os.path.dirname(output[0]),
    shell:
        "heads prune {params.run} --strategy posthoc --param ratio={wildcards.ratio} scorer={wildcards.scorer}"
        " seed={wildcards.seed} --evaluate --out {params.out} > {log} 2>&1"
