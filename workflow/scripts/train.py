"""Snakemake adapter: train one run and write metrics.jsonl, run.yaml and params.pt."""

import logging

from fedbench.engine.run import execute_run

sm = snakemake  # noqa: F821
logging.basicConfig(
    filename=sm.log[0], level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s"
)
execute_run(
    sm.params.spec,
    sm.input.data,
    sm.input.partition,
    sm.output.metrics,
    sm.output.run,
    threads=sm.threads,
    device=sm.params.device,
    params_path=sm.output.get("params"),  # absent in a workflow parsed before it existed
)
