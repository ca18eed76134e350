"""Snakemake adapter: the loss landscape of one run's final global model as .npz."""

from fedbench.worker import delegate

delegate(snakemake, __file__)  # noqa: F821  (in the warm worker when one is up; exits there)


import logging

from fedbench.report.landscape import LandscapeSettings, compute_run_landscape

sm = snakemake  # noqa: F821
logging.basicConfig(
    filename=sm.log[0], level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s"
)
settings = LandscapeSettings(**sm.params.settings)
compute_run_landscape(
    sm.input.run,
    sm.input.params,
    sm.input.data,
    sm.output[0],
    settings,
    sm.threads,
    sm.params.device,
)
