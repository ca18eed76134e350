"""Snakemake adapter: split a prepared dataset into clients with the seed's partition stream."""

from fedbench.worker import delegate

delegate(snakemake, __file__)  # noqa: F821  (in the warm worker when one is up; exits there)


import logging

from fedbench.data.base import load_dataset
from fedbench.data.partition import make_partition, save_partition
from fedbench.rng import Streams

sm = snakemake  # noqa: F821
logging.basicConfig(filename=sm.log[0], level=logging.INFO)
ds = load_dataset(sm.input[0])
rng = Streams(int(sm.wildcards.seed)).generator("partition")
part = make_partition(ds.y_train, ds.groups, sm.params.spec, rng, ds.num_classes)
save_partition(sm.output[0], part)
logging.info("%d clients, sizes %s", len(part.train), [len(t) for t in part.train])
