"""Snakemake adapter: load (or generate a stand-in for) one dataset as a prepared .npz."""

from fedbench.worker import delegate

delegate(snakemake, __file__)  # noqa: F821  (in the warm worker when one is up; exits there)


import logging
from pathlib import Path

from fedbench.data import prepare_dataset
from fedbench.data.base import save_dataset
from fedbench.data.transform import apply_transform
from fedbench.rng import Streams

sm = snakemake  # noqa: F821
logging.basicConfig(filename=sm.log[0], level=logging.INFO)
spec = sm.params.dataset
raw = Path(sm.input[0]).parent if sm.input else None
# Data generation is fixed per dataset (not per run seed): every seed's partition draws from it.
rng = Streams(0).generator("standin")
params = spec["params"]
if sm.params.mode == "standin":
    params = {**params, **sm.params.standin_size}
ds = apply_transform(
    prepare_dataset(spec["source"], params, raw, sm.params.mode, rng), spec.get("transform")
)
save_dataset(ds, sm.output[0])
logging.info("%s: %s", spec["name"], ds.provenance)
