"""Snakemake adapter: a scale's landing page (results/{scale}/index.html)."""

from fedbench.worker import delegate

delegate(snakemake, __file__)  # noqa: F821  (in the warm worker when one is up; exits there)

from fedbench.jobs import landing

sm = snakemake  # noqa: F821
landing(sm.output[0], sm.log[0])
