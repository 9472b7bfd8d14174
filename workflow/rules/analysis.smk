# Analyses of trained models: Michel's ablations and pruning curves, inference speed, head roles.


rule ablate:
    input:
        run_file("{task}", "baseline", "none", 0, "{seed}"),
    output:
        f"{RUNS}/{{task}}/analysis/ablation/seed{{seed}}.json",
    log:
        f"logs/{PRESET}/analysis/ablation/{{task}}/seed{{seed}}.log",
    benchmark:
        f"logs/{PRESET}/benchmarks/analysis/ablation/{{task}}/seed{{seed}}.tsv"
    conda:
        "../../environment.yml"
    params:
        run=lambda w, input: os.path.dirname(input[0]),
        test=lambda w: "accuracy" if w.task == "cls" else "loss",
        batches=MI["curve_batches"],
    shell:
        "heads ablate {params.run} --batches {params.batches} --test {params.test} --out {output} > {log} 2>&1"


rule curve:
    input:
        run_file("{task}", "baseline", "none", 0, "{seed}"),
    output:
        f"{RUNS}/{{task}}/analysis/curve/{{scorer}}/seed{{seed}}.json",
    log:
        f"logs/{PRESET}/analysis/curve/{{task}}/{{scorer}}/seed{{seed}}.log",
    benchmark:
        f"logs/{PRESET}/benchmarks/analysis/curve/{{task}}/{{scorer}}/seed{{seed}}.tsv"
    conda:
        "../../environment.yml"
    params:
        run=lambda w, input: os.path.dirname(input[0]),
        strategy=lambda w: f"scorer={w.scorer} step={MI['curve_step']} max_ratio={MI['curve_max']}"
        f" batches={MI['curve_batches']} seed={w.seed}",
        eval=f"eval.max_examples={MI['curve_examples']} eval.beams=1",
    shell:
        "heads curve {params.run} --param {params.strategy} --out {output} {params.eval} > {log} 2>&1"


rule curve_at_snapshot:
    input:
        run_file("{task}", "baseline", "none", 0, "{seed}"),
    output:
        f"{RUNS}/{{task}}/analysis/curve_at/step{{step}}/seed{{seed}}.json",
    log:
        f"logs/{PRESET}/analysis/curve_at/{{task}}/step{{step}}/seed{{seed}}.log",
    benchmark:
        f"logs/{PRESET}/benchmarks/analysis/curve_at/{{task}}/step{{step}}/seed{{seed}}.tsv"
    conda:
        "../../environment.yml"
    params:
        snapshot=lambda w: run_file(
            w.task, "baseline", "none", 0, w.seed, name=f"snapshots/step-{w.step}"
        ),
        strategy=lambda w: f"scorer=importance step={MI['curve_step']} max_ratio={MI['curve_max']}"
        f" batches={MI['curve_batches']} seed={w.seed}",
        eval=f"eval.max_examples={MI['curve_examples']} eval.beams=1 data.root={DATA}",
        preset=PRESET,
    shell:
        "heads curve {params.snapshot} --task {wildcards.task} --preset {params.preset} --param {params.strategy}"
        " --out {output} {params.eval} > {log} 2>&1"


rule speed:
    input:
        run_file("cls", "baseline", "none", 0, SEEDS[0]),
    output:
        f"{RUNS}/cls/analysis/speed.json",
    log:
        f"logs/{PRESET}/analysis/speed.log",
    benchmark:
        f"logs/{PRESET}/benchmarks/analysis/speed.tsv"
    conda:
        "../../environment.yml"
    threads: 1
    params:
        run=lambda w, input: os.path.dirname(input[0]),
        ratios=" ".join(str(r) for r in MI["speed_ratios"]),
        batches=" ".join(str(b) for b in MI["speed_batches"]),
    shell:
        "heads speed {params.run} --ratios {params.ratios} --batches {params.batches} --out {output} > {log} 2>&1"


rule roles:
    input:
        l0=run_file("{task}", "l0", "{lam}", 0, "{seed}"),
        base=run_file("{task}", "baseline", "none", 0, "{seed}"),
    output:
        f"{RUNS}/{{task}}/analysis/roles/{{lam}}/seed{{seed}}.json",
    log:
        f"logs/{PRESET}/analysis/roles/{{task}}/{{lam}}/seed{{seed}}.log",
    benchmark:
        f"logs/{PRESET}/benchmarks/analysis/roles/{{task}}/{{lam}}/seed{{seed}}.tsv"
    conda:
        "../../environment.yml"
    params:
        l0=lambda w, input: os.path.dirname(input.l0),
        base=lambda w, input: os.path.dirname(input.base),
        batches=MI["curve_batches"],
    shell:
        "heads roles {params.l0} --reference {params.base} --batches {params.batches} --out {output} > {log} 2>&1"
