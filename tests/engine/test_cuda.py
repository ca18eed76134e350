"""On a CUDA device: a round there moves the weights as the CPU round does, runs repeat exactly,
tf32 and bf16 keep float32 master weights and leave the device's switches as they were, and the
vectorised executor sizes its chunks from the device's free memory. Skipped without a GPU (CI has
none); run with `FEDBENCH_TEST_DEVICE=cuda` beside test_executors.py and test_precision.py
(README, "On a GPU")."""

import pytest
import torch
from test_executors import CFG_FOR, PARAMS, _fresh

from fedbench.algorithms import build_algorithm
from fedbench.engine.build import Run
from fedbench.engine.functional import make_apply, params_of
from fedbench.engine.loop import run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.engine.vectorised import chunk_size, pick_chunk
from fedbench.models import build_model
from fedbench.rng import Streams

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

CFG = dict(rounds=3, batch_size=4, lr=0.1, local_epochs=2, clients_per_round=3, momentum=0.9)
CUDA = torch.device("cuda")


def _run(make, device, name="fedavg", executor="sequential", **cfg):
    """`make`: the federation_factory fixture (tests/conftest.py)."""
    fed = make(device=device)
    model = build_model("mlp", (6,), 3, init_seed=1, hidden=5).to(device)
    apply, p0 = make_apply(model), params_of(model)
    algo = build_algorithm(name, **PARAMS.get(name, {}))
    cfg = TrainConfig(**{**CFG, **CFG_FOR.get(name, {}), **cfg})
    return run_rounds(
        Run(algo, apply, cfg, p0, executor=executor, fresh_init=_fresh(p0)), fed, Streams(4)
    )


@pytest.mark.parametrize("executor", ["sequential", "vectorised"])
@pytest.mark.parametrize("name", ["fedavg", "fedprox", "scaffold", "qfedavg", "superfed", "dqnfed"])
def test_a_cuda_run_moves_the_weights_as_the_cpu_run_does(name, executor, federation_factory):
    cpu = _run(federation_factory, torch.device("cpu"), name, executor)
    gpu = _run(federation_factory, CUDA, name, executor)
    for k, v in cpu.global_params.items():
        assert gpu.global_params[k].device.type == "cuda"
        diff = (gpu.global_params[k].cpu() - v).abs().max().item()
        assert diff <= 1e-4, (k, diff)


@pytest.mark.parametrize("executor", ["sequential", "vectorised"])
def test_a_cuda_run_repeats_bit_for_bit(executor, federation_factory):
    a = _run(federation_factory, CUDA, executor=executor)
    b = _run(federation_factory, CUDA, executor=executor)
    for k in a.global_params:
        assert torch.equal(a.global_params[k], b.global_params[k]), k


@pytest.mark.parametrize("precision", ["tf32", "bf16"])
def test_tf32_and_bf16_keep_float32_master_weights_and_restore_the_switches(
    precision, federation_factory
):
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    fp32 = _run(federation_factory, CUDA)
    low = _run(federation_factory, CUDA, precision=precision)
    assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == before
    assert {v.dtype for v in low.global_params.values()} == {torch.float32}
    flat = lambda s: torch.cat([v.flatten() for _, v in sorted(s.global_params.items())])  # noqa: E731
    rel = ((flat(low) - flat(fp32)).norm() / flat(fp32).norm()).item()
    assert rel <= 0.02, rel


def test_the_vectorised_chunk_follows_the_free_device_memory():
    free = torch.cuda.mem_get_info(CUDA)[0] // 2**20
    size, why = pick_chunk(200_000, 10, 784, 10**9, None, CUDA)
    budget = int(why.split()[2])  # "memory budget N MiB": half the free memory, no cache cap
    assert abs(budget - free // 2) <= 64, (budget, free)  # free memory moves a little between reads
    assert size == chunk_size(200_000, 10, 784, budget, None) and "CPU cache" not in why
