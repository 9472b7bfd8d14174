# Head surgery: cut a checkpoint down to a uniform layout and tabulate what it saves. Neither runs the model
# (the table's FLOPs are counted, not measured); the table is rendering, local on a cluster.


localrules:
    surgery_table,


rule prune_uniform:
    input:
        SURGERY_SETTINGS,
    output:
        directory(f"{RUNS}/surgery/{{source}}_keep{{keep}}"),
    log:
        f"logs/{STAGE}/surgery/prune_{{source}}_keep{{keep}}.log",
    benchmark:
        f"logs/{STAGE}/benchmarks/surgery/prune_{{source}}_keep{{keep}}.tsv"
    conda:
        "../../environment.yml"
    params:
        seq_len=config["surgery"]["seq_len"],
    shell:
        "heads prune {wildcards.source} --keep {wildcards.keep} --out {output:q}"
        " --seq-len {params.seq_len} > {log:q} 2>&1 || sh workflow/scripts/say_why.sh {log:q}"


rule surgery_table:
    input:
        folder=f"{RUNS}/surgery/{{source}}_keep{{keep}}",
        settings=SURGERY_SETTINGS,
    output:
        report(
            f"{OUT}/surgery/{{source}}_keep{{keep}}.md",
            caption="../report/surgery.rst",
            category="Head surgery",
        ),
    log:
        f"logs/{STAGE}/surgery/inspect_{{source}}_keep{{keep}}.log",
    benchmark:
        f"logs/{STAGE}/benchmarks/surgery/inspect_{{source}}_keep{{keep}}.tsv"
    conda:
        "../../environment.yml"
    params:
        seq_len=config["surgery"]["seq_len"],
    shell:
        "heads inspect {input.folder:q} --seq-len {params.seq_len} > {output:q} 2> {log:q}"
        " || sh workflow/scripts/say_why.sh {log:q}"
