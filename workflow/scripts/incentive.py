"""Snakemake adapter: the numbers of one incentive-game output as JSON (nothing is trained)."""

from fedbench.worker import delegate

delegate(snakemake, __file__)  # noqa: F821  (in the warm worker when one is up; exits there)

from fedbench.jobs import incentive

sm = snakemake  # noqa: F821
incentive(sm.params.settings, sm.output[0], sm.log[0])
