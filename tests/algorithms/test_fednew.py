"""FedNew, approximate (fedbench/algorithms/fednew.py; spec B-D9): CG solves an SPD system; one
client's step is the damped Newton step (H + ρI)⁻¹ g against the full Hessian; the dual update
by hand; with ρ large and the step scaled by it, FedAvg's full-batch gradient step."""

import pytest
import torch
from torch.func import functional_call, hessian

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import ClientContext
from fedbench.algorithms.fednew import conjugate_gradient
from fedbench.engine.build import Run
from fedbench.engine.functional import make_apply, params_of
from fedbench.engine.loop import run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.models import build_model
from fedbench.rng import Streams


def _cfg(**kw):
    base = dict(rounds=1, batch_size=64, lr=0.1, local_steps=1, participation=1.0)
    return TrainConfig(**{**base, **kw})


def test_cg_solves_an_spd_system_in_dimension_steps():
    gen = torch.Generator().manual_seed(0)
    m = torch.randn(5, 5, generator=gen, dtype=torch.float64)
    a = m @ m.T + 0.5 * torch.eye(5, dtype=torch.float64)
    b = torch.randn(5, generator=gen, dtype=torch.float64)
    y = conjugate_gradient(lambda v: {"x": a @ v["x"]}, {"x": b}, 5)["x"]
    torch.testing.assert_close(y, torch.linalg.solve(a, b))


@pytest.mark.parametrize("executor", ["sequential", "vectorised"])
def test_one_client_takes_the_damped_newton_step(federation_factory, executor):
    fed = federation_factory(num_clients=1, per_client=12, dim=3, classes=2)
    model = build_model("mlp", (3,), 2, init_seed=0, hidden=2)
    apply, p0 = make_apply(model), params_of(model)
    keys = list(p0)
    sizes = [p0[k].numel() for k in keys]
    dim = sum(sizes)
    algo = build_algorithm("fednew", rho=0.5, cg_steps=3 * dim)
    run = run_rounds(Run(algo, apply, _cfg(), p0, executor=executor), fed, Streams(0))
    idx = fed.train[0]
    x, y = fed.x[idx].double(), fed.y[idx]

    def loss(flat):
        parts = dict(zip(keys, torch.split(flat, sizes)))
        tree = {k: parts[k].reshape(p0[k].shape) for k in keys}
        return torch.nn.functional.cross_entropy(functional_call(model, tree, (x,)), y)

    flat0 = torch.cat([p0[k].reshape(-1) for k in keys]).double()
    h = hessian(loss)(flat0)
    g = torch.func.grad(loss)(flat0)
    want = flat0 - torch.linalg.solve(h + 0.5 * torch.eye(dim, dtype=h.dtype), g)
    got = torch.cat([run.global_params[k].reshape(-1) for k in keys]).double()
    torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-4)


def test_the_dual_update_by_hand():
    algo = build_algorithm("fednew", rho=2.0)
    p = {"w": torch.zeros(2)}
    state = {"lam": {"w": torch.tensor([0.5, 0.0])}, "y": {"w": torch.tensor([1.0, 3.0])}}
    server = {"y_bar": {"w": torch.tensor([2.0, 1.0])}, "update_norm": 0.0}
    ctx = ClientContext(client_id=0, round=2, lr=0.1, rounds=2, num_train=4, num_steps=1)
    _, carry = algo.client_begin(p, server, state, ctx)
    torch.testing.assert_close(carry["lam"]["w"], torch.tensor([0.5 - 2.0, 4.0]))


def test_a_large_rho_is_fedavgs_full_batch_step(federation_factory):
    fed = federation_factory(num_clients=2, per_client=16)
    model = build_model("mlp", (6,), 3, init_seed=1, hidden=5)
    apply, p0 = make_apply(model), params_of(model)
    rho, lr = 1e5, 0.3
    new = run_rounds(
        Run(build_algorithm("fednew", rho=rho, server_lr=rho * lr), apply, _cfg(), p0),
        fed,
        Streams(0),
    )
    avg = run_rounds(Run(build_algorithm("fedavg"), apply, _cfg(lr=lr), p0), fed, Streams(0))
    # Equal client sizes: FedAvg's n_k weights are FedNew's uniform mean.
    for k in p0:
        torch.testing.assert_close(new.global_params[k], avg.global_params[k], rtol=1e-3, atol=1e-5)


def test_more_than_one_step_is_refused():
    algo = build_algorithm("fednew")
    ctx = ClientContext(client_id=0, round=1, lr=0.1, rounds=1, num_train=8, num_steps=2)
    p = {"w": torch.zeros(2)}
    with pytest.raises(ValueError, match="fednew: .*local_steps: 1"):
        algo.client_begin(p, algo.init_server_state(p), algo.init_client_state(0, p, None), ctx)
