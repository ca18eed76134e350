"""Each distinct aggregation rule of the registry at 10, 1,000 and 10,000 clients.

The model is a 784-10-10 MLP (7,960 parameters, with the body/head split that partial-sharing
rules need), so 10,000 clients' stacked messages fit in memory; a rule's cost is linear in
clients x parameters. A rule whose messages cannot be built generically is skipped, saying why.
"""

import pytest
import torch
from bench_lib import NUM_CLASSES

from fedbench.algorithms import ALGORITHMS, build_algorithm
from fedbench.algorithms.base import ClientContext, ServerContext
from fedbench.engine.executors import stack_messages
from fedbench.engine.functional import params_of
from fedbench.models import build_model

ROUNDS = 10
# Rules whose server solves a dense K x K problem (AAggFF-S's ONS, FedMGDA+'s min-norm QP) are
# cross-silo / few-sampled-client rules: at 10,000 clients their matrices alone take 800 MB.
MAX_CLIENTS = {"aaggff_s": 1_000, "aaggff_s_prox": 1_000, "fedmgda": 1_000}
# Rules whose generic message (no local step taken) is degenerate, timed in their own file.
OWN_BENCHMARK = {
    "dqnfed": "without local steps its gradients are 0; test_dqnfed.py times it",
    "fedlf": "without local steps its gradients are 0; test_fedlf.py times it",
    "fednl": "an elementwise step; its cost is the clients' Hessian-vector products",
    "fednew": "a mean of the clients' solutions; its cost is their CG Hessian-vector products",
}


def rules() -> list[tuple[str, list[str]]]:
    """One registry name per distinct `aggregate` implementation, with the names sharing it."""
    seen: dict[object, list[str]] = {}
    for name, cls in ALGORITHMS.items():
        seen.setdefault(cls.aggregate, []).append(name)
    return [(names[0], names) for names in seen.values()]


def messages(algo, global_params, clients: int):
    """A real message of one client (client_begin -> perturbed params -> client_end), repeated."""
    g = torch.Generator().manual_seed(0)

    def fresh():
        return {k: torch.randn(v.shape, generator=g) * 0.1 for k, v in global_params.items()}

    state = algo.init_client_state(0, global_params, fresh)
    ctx = ClientContext(
        client_id=0,
        round=ROUNDS,
        lr=0.1,
        rounds=ROUNDS,
        num_train=50,
        num_steps=5,
        steps_per_epoch=5,
        pre_loss=1.0 if algo.needs_pre_loss else None,
    )
    server = algo.init_server_state(global_params)
    params, carry = algo.client_begin(global_params, server, state, ctx)
    trained = {k: v + 0.01 * torch.randn(v.shape, generator=g) for k, v in params.items()}
    message, _ = algo.client_end(global_params, trained, carry, state, ctx)
    if ctx.pre_loss is not None:
        message["pre_loss"] = ctx.pre_loss
    return stack_messages([message] * clients), server


@pytest.mark.parametrize("clients", [10, 1_000, 10_000])
@pytest.mark.parametrize("rule", rules(), ids=lambda r: r[0])
def test_aggregate(benchmark, rule, clients):
    name, sharing = rule
    if name in OWN_BENCHMARK:
        pytest.skip(f"{name}: {OWN_BENCHMARK[name]}")
    if clients > MAX_CLIENTS.get(name, clients):
        pytest.skip(f"{name}: a dense {clients} x {clients} server problem (cross-silo rule)")
    algo = build_algorithm(name)
    model = build_model("mlp", (1, 28, 28), NUM_CLASSES, init_seed=0, hidden=10)
    global_params = params_of(model)
    try:
        stacked, server = messages(algo, global_params, clients)
    except (ValueError, KeyError, TypeError) as err:
        pytest.skip(f"{name}: no generic message ({err})")
    ctx = ServerContext(round=ROUNDS, num_clients=clients, client_ids=tuple(range(clients)), lr=0.1)
    benchmark.extra_info.update(
        kind="aggregate",
        rule=name,
        same_rule=sharing,
        clients=clients,
        params=sum(v.numel() for v in global_params.values()),
    )
    benchmark(algo.aggregate, global_params, stacked, server, ctx)
