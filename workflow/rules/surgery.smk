# Head surgery: cut a checkpoint down to a uniform layout and tabulate what it saves. Neither runs the model
# (the table's FLOPs are counted, not measured); the table is rendering, local on a cluster.


localrules:
    surgery_table,


rule prune_uniform:
    output:
        directory(f"{RUNS}/surgery/{{source}}_keep{{keep}}"),
    log:
        f"logs/{PRESET}/surgery/prune_{{source}}_keep{{keep}}.log",
    benchmark:
        f"logs/{PRESET}/benchmarks/surgery/prune_{{source}}_keep{{keep}}.tsv"
    conda:
        "../../environment.yml"
    params:
        seq_len=config["surgery"]["seq_len"],
    shell:
        "heads prune {wildcards.source} --keep {wildcards.keep} --out {output:q}"
        " --seq-len {params.seq_len} > {log:q} 2>&1"


rule surgery_table:
    input:
        f"{RUNS}/surgery/{{source}}_keep{{keep}}",
    output:
        report(
            f"{OUT}/surgery/{{source}}_keep{{keep}}.md",
            caption="../report/surgery.rst",
            category="Head surgery",
        ),
    log:
        f"logs/{PRESET}/surgery/inspect_{{source}}_keep{{keep}}.log",
    benchmark:
        f"logs/{PRESET}/benchmarks/surgery/inspect_{{source}}_keep{{keep}}.tsv"
    conda:
        "../../environment.yml"
    params:
        seq_len=config["surgery"]["seq_len"],
    shell:
        "heads inspect {input:q} --seq-len {params.seq_len} > {output:q} 2> {log:q}"
