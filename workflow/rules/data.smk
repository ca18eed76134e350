# A source with `source: hub | original` (fedbench/data/hub.py) fetches the routes the catalog's
# datasets of that source name: the adapter hands config["datasets"] to fedbench.jobs.fetch. Not
# a param: adding one would make Snakemake rerun every fetched source and all its downstream jobs.
rule fetch:
    output:
        "resources/raw/{source}/MANIFEST.json",
    log:
        "logs/fetch/{source}.log",
    conda:
        "../envs/fedbench.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=60,
        gpu=0,
    script:
        "../scripts/fetch.py"


rule prepare:
    input:
        raw_manifest,
    output:
        "results/{scale}/data/{dataset}.npz",
    log:
        "logs/{scale}/prepare/{dataset}.log",
    conda:
        "../envs/fedbench.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
        gpu=0,
    params:
        dataset=lambda w: resolve_dataset(config, w.dataset, w.scale),
        mode=lambda w: data_mode(config, w.scale),
        standin_size=lambda w: standin_size(config, w.scale),
    script:
        "../scripts/prepare.py"


rule partition:
    input:
        "results/{scale}/data/{dataset}.npz",
    output:
        "results/{scale}/partitions/{dataset}/{partition}/seed{seed}.npz",
    log:
        "logs/{scale}/partition/{dataset}/{partition}/seed{seed}.log",
    conda:
        "../envs/fedbench.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
        gpu=0,
    params:
        spec=lambda w: resolve_partition(config, w.partition, w.scale),
    script:
        "../scripts/partition.py"


# Where every grid's data stands (present / fetchable / manual step / stand-in): prints a table
# (and keeps it in the log). `--config scale=quick` asks at one scale; unset, each grid at its own.
rule data_status:
    log:
        "logs/data_status.log",
    localrule: True
    conda:
        "../envs/fedbench.yaml"
    threads: 1
    resources:
        mem_mb=500,
        runtime=5,
        gpu=0,
    params:
        scale=lambda w: f"--scale {config['scale']}" if config.get("scale") else "",
    shell:
        "python -m fedbench.data status {params.scale} | tee {log}"
