"""Snakemake adapter: what one selection table chose (a checkpoint's JSON)."""

from fedbench.worker import delegate

delegate(snakemake, __file__)  # noqa: F821  (in the warm worker when one is up; exits there)

from fedbench.jobs import choice

sm = snakemake  # noqa: F821
p = sm.params
choice(p.grid, p.name, sm.config, sm.wildcards.scale, sm.output[0], sm.log[0])
