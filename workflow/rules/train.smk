RUN = "{dataset}/{partition}/{model}/{algorithm}/seed{seed}"


# params.pt (the final global parameters) is temp: kept only while a landscape job needs it, so a
# paper-scale grid does not store ~3.6 GB of checkpoints that no output reads.
rule train:
    input:
        data="results/{scale}/data/{dataset}.npz",
        partition="results/{scale}/partitions/{dataset}/{partition}/seed{seed}.npz",
    output:
        metrics=f"results/{{scale}}/runs/{RUN}/metrics.jsonl",
        run=f"results/{{scale}}/runs/{RUN}/run.yaml",
        params=temp(f"results/{{scale}}/runs/{RUN}/params.pt"),
    log:
        f"logs/{{scale}}/train/{RUN}.log",
    benchmark:
        f"benchmarks/{{scale}}/train/{RUN}.tsv"
    conda:
        "../envs/fedbench.yaml"
    threads: config["threads"]
    resources:
        mem_mb=8000,
        runtime=240,
        gpu=config["gpus_per_run"],
    params:
        spec=run_spec,
        device=config["device"],
        checkpoint_every=config.get("checkpoint_every", 10),
    script:
        "../scripts/train.py"
