"""Seeded partitioners: index arrays into the training pool, one sorted int64 array per client.

One family a module: `label_skew` (iid, shards, the label-Dirichlet family, by_label,
random_classes), `powerlaw` (pFedBreD's label_powerlaw), `fedevg`, `fedcorr`, `groups` (natural
clients); `splits` (per-client train/test splits), `store` (the Partition file), `spec` (the
registry of kinds, spec checks, make_partition); `common` (what they share). The names below are
the ones the rest of the project imports from here.
"""

from fedbench.data.partition.fedcorr import fedcorr_noniid
from fedbench.data.partition.fedevg import fedevg_code, fedevg_dirichlet, overlap_summary
from fedbench.data.partition.groups import natural
from fedbench.data.partition.label_skew import (
    by_label,
    dirichlet,
    dirichlet_capped,
    dirichlet_equal,
    iid,
    random_classes,
    shards,
)
from fedbench.data.partition.powerlaw import label_powerlaw
from fedbench.data.partition.spec import PARTITIONERS, check_partition_spec, make_partition
from fedbench.data.partition.splits import split_train_test, split_train_test_stratified
from fedbench.data.partition.store import Partition, load_partition, save_partition

__all__ = [
    "PARTITIONERS",
    "Partition",
    "by_label",
    "check_partition_spec",
    "dirichlet",
    "dirichlet_capped",
    "dirichlet_equal",
    "fedcorr_noniid",
    "fedevg_code",
    "fedevg_dirichlet",
    "iid",
    "label_powerlaw",
    "load_partition",
    "make_partition",
    "natural",
    "overlap_summary",
    "random_classes",
    "save_partition",
    "shards",
    "split_train_test",
    "split_train_test_stratified",
]
