"""Snakemake adapter: one work's claims page (fedbench.claims)."""

from fedbench.worker import delegate

delegate(snakemake, __file__)  # noqa: F821  (in the warm worker when one is up; exits there)

from fedbench.jobs import claims_page

sm = snakemake  # noqa: F821
claims_page(sm.wildcards.work, sm.config, sm.wildcards.scale, sm.output.md, sm.log[0])
