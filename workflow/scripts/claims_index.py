"""Snakemake adapter: the claims page across works, from each work's page."""

from fedbench.worker import delegate

delegate(snakemake, __file__)  # noqa: F821  (in the warm worker when one is up; exits there)

from fedbench.jobs import claims_index

sm = snakemake  # noqa: F821
claims_index(list(sm.input), sm.wildcards.scale, sm.output.md, sm.log[0])
