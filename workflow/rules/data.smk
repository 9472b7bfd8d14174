# Data: each task's corpus and tokenizer prepared once per preset, before any training job.
# On a cluster it runs where Snakemake runs (the paper preset downloads hub data, and compute nodes are often
# offline).


localrules:
    prepare_data,


rule prepare_data:
    input:
        lambda w: DATA_SETTINGS[w.task],
    output:
        touch(f"{DATA}/.ready-{{task}}-{STAGE}"),
    log:
        f"logs/{STAGE}/data/{{task}}.log",
    benchmark:
        f"logs/{STAGE}/benchmarks/data/{{task}}.tsv"
    conda:
        "../../environment.yml"
    params:
        preset=PRESET,
        root=lambda w, output: os.path.dirname(output[0]),
        overrides=data_overrides,
    shell:
        "heads data prepare --task {wildcards.task} --preset {params.preset} --root {params.root:q}"
        " {params.overrides} > {log:q} 2>&1 || sh workflow/scripts/say_why.sh {log:q}"
