"""Snakemake adapter: the loss landscape of one run's final global model as .npz."""

from fedbench.worker import delegate

delegate(snakemake, __file__)  # noqa: F821  (in the warm worker when one is up; exits there)

from fedbench.jobs import landscape

sm = snakemake  # noqa: F821
i, p = sm.input, sm.params
landscape(i.run, i.params, i.data, sm.output[0], p.settings, sm.threads, p.device, sm.log[0])
