"""Snakemake adapter: load (or generate a stand-in for) one dataset as a prepared .npz."""

from fedbench.worker import delegate

delegate(snakemake, __file__)  # noqa: F821  (in the warm worker when one is up; exits there)

from fedbench.jobs import prepare

sm = snakemake  # noqa: F821
raw, p = (sm.input[0] if sm.input else None), sm.params
prepare(p.dataset, raw, p.mode, p.standin_size, sm.output[0], sm.log[0])
