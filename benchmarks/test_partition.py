"""Partitioners on 60,000 labels (MNIST-sized), 100 clients."""

import numpy as np
import pytest

from fedbench.data.partition import make_partition

N, CLASSES, CLIENTS = 60_000, 10, 100
SPECS = {
    "iid": {"kind": "iid", "num_clients": CLIENTS},
    "shards2": {"kind": "shards", "num_clients": CLIENTS, "shards_per_client": 2},
    "dir0.1": {"kind": "dirichlet", "num_clients": CLIENTS, "alpha": 0.1},
    "dir0.5": {"kind": "dirichlet", "num_clients": CLIENTS, "alpha": 0.5},
    "dircapped0.1": {"kind": "dirichlet_capped", "num_clients": CLIENTS, "alpha": 0.1},
    "natural": {"kind": "natural", "num_clients": CLIENTS},
    # FedCorr's split (DQN-Fed's Table 12): one categorical draw per sample
    "fedcorr": {"kind": "fedcorr_noniid", "num_clients": CLIENTS},
}


@pytest.mark.parametrize("name", list(SPECS))
def test_partition(benchmark, name):
    rng = np.random.default_rng(0)
    labels = rng.integers(0, CLASSES, N)
    groups = rng.integers(0, 1_000, N)  # writers, for the natural split
    spec = {**SPECS[name], "test_fraction": 0.2}
    benchmark.extra_info.update(kind="partition", partition=name, samples=N)
    benchmark(lambda: make_partition(labels, groups, spec, np.random.default_rng(1)))
