"""Per-round / per-evaluation metrics added to the engine's path: the server's GCE of the sampled
clients' envelope gradients (pFedBreD Fig. 2, every round) and per-client AUROC (every evaluation
of a binary model).

GCE at 10 / 100 sampled clients of the pFedBreD DNN's 79,510 parameters; AUROC over 10,000 test
samples split among 10 / 1,000 clients.
"""

import pytest
import torch

from fedbench.metrics.classification import auroc_per_group
from fedbench.metrics.coherence import gce

DNN_PARAMS = 784 * 100 + 100 + 100 * 10 + 10


@pytest.mark.parametrize("clients", [10, 100])
def test_gce(benchmark, clients):
    g = torch.Generator().manual_seed(0)
    vectors = torch.randn(clients, DNN_PARAMS, generator=g)
    benchmark.extra_info.update(kind="server_metric", name="gce", clients=clients)
    value = benchmark(gce, vectors)
    assert 0.0 <= value <= 1.0


@pytest.mark.parametrize("clients", [10, 1_000])
def test_auroc_per_client(benchmark, clients):
    g = torch.Generator().manual_seed(0)
    n = 10_000
    scores = torch.randn(n, generator=g)
    positive = torch.rand(n, generator=g) < 0.3
    owner = torch.randint(0, clients, (n,), generator=g)
    benchmark.extra_info.update(kind="server_metric", name="auroc", clients=clients)
    out = benchmark(auroc_per_group, scores, positive, owner, clients)
    assert out.shape == (clients,)
