"""Snakemake adapter: the loss landscape of one run's final global model as .npz."""

from fedbench.worker import delegate

delegate(snakemake, __file__)  # noqa: F821  (in the warm worker when one is up; exits there)

import logging

from fedbench.engine.landscape import compute_run_landscape
from fedbench.metrics.landscape import LandscapeSettings

sm = snakemake  # noqa: F821
logging.basicConfig(filename=sm.log[0], level=logging.INFO, format="%(asctime)s %(message)s")
i, settings = sm.input, LandscapeSettings(**sm.params.settings)
compute_run_landscape(i.run, i.params, i.data, sm.output[0], settings, sm.threads, sm.params.device)
