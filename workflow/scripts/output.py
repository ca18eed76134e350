"""Snakemake adapter: one paper table or figure, whatever its kind (fedbench.outputs)."""

from fedbench.worker import delegate

delegate(snakemake, __file__)  # noqa: F821  (in the warm worker when one is up; exits there)

from fedbench.jobs import render

sm = snakemake  # noqa: F821
p = sm.params
render(p.grid, p.section, p.name, sm.config, sm.wildcards.scale, sm.output[0], sm.log[0])
