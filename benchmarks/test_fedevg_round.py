"""One FedEvg round (thesis Alg. 4.1/4.2): every sampled client trains a fresh ResNet-10 for one
local step of B = 64 real and 64 synthetic 32x32 images (one SGLD step, PCD + CE), uploads its
energies and input gradients for the M = 100 synthetic images, and the server takes its SGLD step
and trains its classifier (2 Adam steps). K = 10 and 100 clients per round, both executors; the
network is narrowed to hidden = 8 (the paper's 64 is ~60x the compute: `python -m fedbench.cost`
estimates the paper grid)."""

import numpy as np
import pytest
from bench_lib import DEVICE, NUM_CLASSES, federation, synced

from fedbench.algorithms import build_algorithm
from fedbench.engine.build import Run
from fedbench.engine.functional import make_apply, params_of
from fedbench.engine.loop import run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.models import build_model
from fedbench.rng import Streams

SHAPE = (1, 32, 32)
HIDDEN = 8
BATCH = 64


def _net(seed: int):
    net = build_model("fedevg_resnet10", SHAPE, NUM_CLASSES, init_seed=seed, hidden=HIDDEN)
    return net.to(DEVICE)


def _fresh(*key: int):
    return params_of(_net(int(np.random.SeedSequence([11, *key]).generate_state(1)[0])))


@pytest.mark.parametrize("executor", ["sequential", "vectorised"])
@pytest.mark.parametrize("clients", [10, 100])
def test_fedevg_round(benchmark, clients, executor):
    # Disabled (CI's plain run of each body): 2 clients, the same code paths.
    k = clients if benchmark.enabled else 2
    fed = federation(k, per_client=BATCH, shape=SHAPE)
    model = _net(0)
    cfg = TrainConfig(
        rounds=1, batch_size=BATCH, lr=1e-3, local_epochs=1, clients_per_round=k,
        optimizer="adam", betas=(0.5, 0.999), weight_decay=1e-4,
    )  # fmt: skip
    algo = build_algorithm("fedevg", fid="none")  # FID: fedbench/metrics/fid.py, not timed here
    benchmark.extra_info.update(kind="fedevg_round", executor=executor, clients=k, hidden=HIDDEN)
    benchmark.pedantic(
        synced(run_rounds),
        (Run(algo, make_apply(model), cfg, params_of(model), executor, _fresh), fed, Streams(0)),
        rounds=2 if k <= 10 else 1, warmup_rounds=1,
    )  # fmt: skip


@pytest.mark.parametrize("name, arch", [("fedcgan", "fedevg_acgan"), ("fedcvae", "fedevg_cvae")])
def test_baseline_round(benchmark, name, arch):
    """One FedCGAN / FedCVAE round at K = 10 (the paper's cross-silo setting): every client one
    local step of B = 64 (FedCGAN: a discriminator and a generator step), FedAvg of weights and
    running statistics, then the server's 100 samples and its classifier (2 Adam steps);
    hidden 8 for both networks (sequential executor: BatchNorm running statistics)."""
    k = 10 if benchmark.enabled else 2
    fed = federation(k, per_client=BATCH, shape=SHAPE)
    model = build_model(arch, SHAPE, NUM_CLASSES, init_seed=0, hidden=HIDDEN).to(DEVICE)
    cfg = TrainConfig(
        rounds=1, batch_size=BATCH, lr=1e-3, local_epochs=1, clients_per_round=k,
        optimizer="adam", betas=(0.5, 0.999), weight_decay=1e-4,
    )  # fmt: skip
    algo = build_algorithm(name, fid="none", classifier_hidden=HIDDEN)
    benchmark.extra_info.update(kind="fedevg_baseline_round", algorithm=name, clients=k)
    benchmark.pedantic(
        synced(run_rounds),
        (Run(algo, make_apply(model), cfg, params_of(model), "sequential"), fed, Streams(0)),
        rounds=2, warmup_rounds=1,
    )  # fmt: skip
