"""Snakemake adapter: train one run and write metrics.jsonl, run.yaml and params.pt."""

from fedbench.worker import delegate

delegate(snakemake, __file__)  # noqa: F821  (in the warm worker when one is up; exits there)

from fedbench.jobs import train

sm = snakemake  # noqa: F821
i, p, gpus = sm.input, sm.params, int(sm.resources.get("gpu", 0) or 0)
args = (p.spec, i.data, i.partition, sm.output, sm.log[0], sm.threads, p.device, gpus)
# read from the config, not a rule param: changing it reruns nothing (Snakemake's params trigger)
least = (getattr(sm, "config", None) or {}).get("checkpoint_min_seconds", 60)
train(*args, checkpoint_every=p.checkpoint_every, checkpoint_min_seconds=least)
