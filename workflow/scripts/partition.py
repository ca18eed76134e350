"""Snakemake adapter: split a prepared dataset into clients with the seed's partition stream."""

from fedbench.worker import delegate

delegate(snakemake, __file__)  # noqa: F821  (in the warm worker when one is up; exits there)

from fedbench.jobs import partition

sm = snakemake  # noqa: F821
partition(sm.input[0], sm.params.spec, sm.wildcards.seed, sm.output[0], sm.log[0])
