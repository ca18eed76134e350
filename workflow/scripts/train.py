"""Snakemake adapter: train one run and write metrics.jsonl, run.yaml and params.pt."""

from fedbench.worker import delegate

delegate(snakemake, __file__)  # noqa: F821  (in the warm worker when one is up; exits there)

import contextlib
import logging

from fedbench.engine.checkpoint import CheckpointPolicy
from fedbench.engine.run import execute_run
from fedbench.gpu import claim_gpu

sm = snakemake  # noqa: F821
logging.basicConfig(
    filename=sm.log[0], level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s"
)
# A job that asked for a GPU holds one of the machine's GPUs (profiles/multigpu: one job per GPU).
wants_gpu = sm.params.device != "cpu" and int(sm.resources.get("gpu", 0) or 0) > 0
with claim_gpu() if wants_gpu else contextlib.nullcontext():
    execute_run(
        sm.params.spec,
        sm.input.data,
        sm.input.partition,
        sm.output.metrics,
        sm.output.run,
        threads=sm.threads,
        device=sm.params.device,
        params_path=sm.output.get("params"),  # absent in a workflow parsed before it existed
        checkpoint=CheckpointPolicy(every_rounds=int(sm.params.checkpoint_every)),
    )
