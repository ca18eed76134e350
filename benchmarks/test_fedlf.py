"""FedLF's server step (fedbench/algorithms/fedlf.py): per parameter tensor, a min-norm QP over
the K clients' scaled gradient rows and the fairness row, then the release's rescaling guard;
on a 784-200-200-10 MLP (199,210 parameters, 6 tensors) at K = 10 and 100 clients."""

import pytest
import torch

from fedbench.algorithms.fedlf import fedlf_direction, rescale

SHAPES = [(200, 784), (200,), (200, 200), (200,), (10, 200), (10,)]


def _layers() -> list[slice]:
    out, start = [], 0
    for shape in SHAPES:
        n = torch.Size(shape).numel()
        out.append(slice(start, start + n))
        start += n
    return out


@pytest.mark.parametrize("clients", [10, 100])
def test_fedlf_server_step(benchmark, clients):
    # Disabled (CI's plain run of each body): 3 clients, the same code path.
    k = clients if benchmark.enabled else 3
    layers = _layers()
    gen = torch.Generator().manual_seed(0)
    grads = torch.randn((k, layers[-1].stop), generator=gen)
    losses = torch.rand(k, generator=gen) + 0.5

    def step():
        return rescale(fedlf_direction(grads, losses, None, layers), grads)

    benchmark.extra_info.update(kind="fedlf_server_step", clients=k, params=layers[-1].stop)
    benchmark.pedantic(step, rounds=3, warmup_rounds=1)
