RUN = "{dataset}/{partition}/{model}/{algorithm}/seed{seed}"


rule train:
    input:
        data="results/{scale}/data/{dataset}.npz",
        partition="results/{scale}/partitions/{dataset}/{partition}/seed{seed}.npz",
    output:
        metrics=f"results/{{scale}}/runs/{RUN}/metrics.jsonl",
        run=f"results/{{scale}}/runs/{RUN}/run.yaml",
    params:
        spec=run_spec,
        device=config["device"],
    log:
        f"logs/{{scale}}/train/{RUN}.log",
    benchmark:
        f"benchmarks/{{scale}}/train/{RUN}.tsv"
    threads: config["threads"]
    resources:
        mem_mb=8000,
        runtime=240,
        gpu=config["gpus_per_run"],
    script:
        "../scripts/train.py"
