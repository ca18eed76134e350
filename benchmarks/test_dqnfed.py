"""DQN-Fed's per-round hot paths (specs/qffl-dqnfed.md §B.3) on a 1M-parameter model: a
client's decrement (the inverse-BFGS two-loop recursion over one curvature pair) and the
server's step (the float64 Gram matrix of K gradients, its Cholesky solve and u = Gᵀα) at
K = 10, 100 and 1,000 clients."""

import pytest
import torch

from fedbench.algorithms.dqnfed_math import decrement, min_norm_step

DIM = 1_000_000


def _vectors(k: int, seed: int = 0) -> torch.Tensor:
    return torch.randn((k, DIM), generator=torch.Generator().manual_seed(seed))


def test_dqnfed_client_decrement(benchmark):
    g, s, y = _vectors(3)
    y = y + s  # sᵀy > 0: the pair is kept
    benchmark.extra_info.update(kind="dqnfed_decrement", params=DIM)
    benchmark(decrement, g, [(s, y)])


@pytest.mark.parametrize("clients", [10, 100, 1000])
def test_dqnfed_server_step(benchmark, clients):
    # Disabled (CI's plain run of each body): 4 clients, the same code path.
    k = clients if benchmark.enabled else 4
    grads = _vectors(k)
    d = torch.rand(k, dtype=torch.float64) + 0.1
    benchmark.extra_info.update(kind="dqnfed_server_step", clients=k, params=DIM)
    rounds = 3 if k <= 100 else 1
    benchmark.pedantic(min_norm_step, (grads, d), rounds=rounds, warmup_rounds=0)
