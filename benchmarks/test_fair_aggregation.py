"""The fair-FL server rules of the AAggFF chapter at K = 10, 1,000 and 10,000 clients.

Two things are timed, with random (not identical) per-client losses and updates so the solvers
do real work:

- `coefficients`: the mixing-coefficient math alone, on numpy/torch vectors of K losses (and, for
  FedMGDA+, K unit directions of 100 parameters): AAggFF-S's ONS step (CDF responses, gradient,
  the exact simplex QP), AAggFF-D's step (responses of 5 sampled clients, DR estimate, linearised
  gradient, EG decision over all K), AFL's projected ascent, TERM's softmax, PropFair's weights,
  q-FedAvg's update and FedMGDA+'s min-norm QP.
- `aggregate`: each algorithm's full `aggregate` call (coefficients + the weighted update of a
  1,000-parameter model) with all K clients' messages.

AAggFF-S (a dense K x K Hessian sum and QP) and FedMGDA+ (a K x K Gram matrix and QP) are skipped at
10,000 clients: they are cross-silo / few-sampled-client rules and their matrices alone take 800 MB.
FedMGDA+'s full `aggregate` is also skipped at 1,000: 1,000 random directions of 1,000 parameters
took 107 s here (2 shared cores), the exact active-set QP adding one bound per Cholesky solve.
"""

import numpy as np
import pytest
import torch

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.aaggff import (
    dr_estimate,
    dr_lipschitz,
    eg_decision,
    linearised_grad,
    ons_constants,
    ons_step,
    responses,
)
from fedbench.algorithms.base import ServerContext
from fedbench.algorithms.fair_baselines import (
    afl_step,
    fedmgda_weights,
    propfair_weights,
    qfedavg_update,
    term_weights,
)

SIZES = [10, 1_000, 10_000]
DENSE = {"aaggff_s", "fedmgda"}
PARAMS = 1_000
SAMPLED = 5  # AAggFF-D's clients per round (thesis §9.1)


def _losses(K: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.2, 2.5, K)


def _coefficient_fn(rule: str, K: int):
    """A zero-argument callable doing one round of `rule`'s coefficient math at K clients."""
    F = _losses(K)
    Ft = torch.as_tensor(F)
    sizes = torch.as_tensor(np.random.default_rng(1).integers(10, 100, K), dtype=torch.float64)
    if rule == "aaggff_s":
        alpha, beta = ons_constants(1.0 / K, K)
        # State after one earlier round, so the QP is not at its uniform start.
        p, G, A, b = ons_step(
            np.full(K, 1.0 / K), responses(_losses(K, 2), "normal", 0, 1 / K),
            np.zeros(K), np.zeros((K, K)), np.zeros(K), alpha, beta,
        )  # fmt: skip

        def run():
            r = responses(F, "normal", 0.0, 1.0 / K)
            return ons_step(p, r, G, A, b, alpha, beta)

        return run
    if rule == "aaggff_d":
        C = SAMPLED / K if K > SAMPLED else 1.0
        S = np.sort(np.random.default_rng(3).choice(K, size=min(SAMPLED, K), replace=False))
        grad_sum, p = np.zeros(K), np.full(K, 1.0 / K)

        def run():
            r = responses(F[S], "frechet", 0.0, C)
            est, rbar = dr_estimate(r, S, K, C)
            total = grad_sum + linearised_grad(est, rbar, p)
            return eg_decision(total, 10, dr_lipschitz(0.0, C, C))

        return run
    if rule == "afl":
        lam, ids = np.full(K, 1.0 / K), np.arange(K)
        return lambda: afl_step(lam, F, ids, 0.01)
    if rule == "term":
        return lambda: term_weights(Ft, 0.1)
    if rule == "propfair":
        return lambda: propfair_weights(Ft, 3.0, sizes)
    if rule == "qfedavg":
        deltas = {"w": torch.randn(K, PARAMS, generator=torch.Generator().manual_seed(0))}
        return lambda: qfedavg_update(deltas, Ft, 1.0, 10.0)
    if rule == "fedmgda":
        d = torch.randn(K, 100, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        d = d / d.norm(dim=1, keepdim=True)
        return lambda: fedmgda_weights(d, 0.5)
    raise KeyError(rule)


RULES = ["aaggff_s", "aaggff_d", "afl", "term", "propfair", "qfedavg", "fedmgda"]


@pytest.mark.parametrize("clients", SIZES)
@pytest.mark.parametrize("rule", RULES)
def test_coefficients(benchmark, rule, clients):
    if rule in DENSE and clients > 1_000:
        pytest.skip(f"{rule}: a dense {clients} x {clients} server problem (cross-silo rule)")
    fn = _coefficient_fn(rule, clients)
    benchmark.extra_info.update(kind="fair_coefficients", rule=rule, clients=clients)
    benchmark(fn)


ALGOS = ["aaggff_s", "aaggff_d", "afl", "term", "propfair", "qfedavg", "fedmgda", "fedadam"]


@pytest.mark.parametrize("clients", SIZES)
@pytest.mark.parametrize("name", ALGOS)
def test_aggregate(benchmark, name, clients):
    if name in DENSE and clients > 1_000:
        pytest.skip(f"{name}: a dense {clients} x {clients} server problem (cross-silo rule)")
    if name == "fedmgda" and clients > 10:
        pytest.skip("fedmgda: ~100 s per call at 1,000 clients (see the module docstring)")
    g = torch.Generator().manual_seed(0)
    algo = build_algorithm(name)
    messages = {
        "delta": {"w": 0.01 * torch.randn(clients, PARAMS, generator=g)},
        "weight": torch.as_tensor(
            np.random.default_rng(1).integers(10, 100, clients), dtype=torch.float64
        ),
        "pre_loss": torch.as_tensor(_losses(clients)),
    }
    ctx = ServerContext(round=1, num_clients=clients, client_ids=tuple(range(clients)), lr=0.1)
    global_params = {"w": torch.zeros(PARAMS)}
    benchmark.extra_info.update(kind="fair_aggregate", rule=name, clients=clients, params=PARAMS)
    benchmark(algo.aggregate, global_params, messages, {}, ctx)
