"""FedNL, approximate (fedbench/algorithms/fednl.py; spec B-D9): a client's Hutchinson term is
z ⊙ (∇²f z) against the full Hessian; Top-K keeps the largest entries; the server's step divides
the mean gradient by the learned diagonal plus μ; with μ large and the step scaled by it, one
client is FedAvg's full-batch gradient step."""

import pytest
import torch
from torch.func import functional_call, hessian

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import Batch, ClientContext, ServerContext
from fedbench.algorithms.fednl import top_k
from fedbench.engine.build import Run
from fedbench.engine.functional import make_apply, params_of
from fedbench.engine.loop import run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.models import build_model
from fedbench.rng import Streams


def test_top_k_keeps_the_largest_magnitudes():
    v = torch.tensor([0.1, -3.0, 2.0, -0.5, 2.5])
    torch.testing.assert_close(top_k(v, 2), torch.tensor([0.0, -3.0, 0.0, 0.0, 2.5]))
    torch.testing.assert_close(top_k(v, 9), v)


def test_a_clients_hutchinson_term_and_compressed_shift_by_hand(federation_factory):
    fed = federation_factory(num_clients=1, per_client=8, dim=3, classes=2)
    model = build_model("mlp", (3,), 2, init_seed=0, hidden=2)
    apply, p0 = make_apply(model), params_of(model)
    idx = fed.train[0]
    batch = Batch(fed.x[idx], fed.y[idx])
    algo = build_algorithm("fednl", top_k_fraction=0.5)
    ctx = ClientContext(client_id=0, round=1, lr=0.1, rounds=1, num_train=len(idx), num_steps=1)
    state = algo.init_client_state(0, p0, None)
    z = algo.step_noise(torch.Generator().manual_seed(1), ctx, p0)
    assert all(set(v.unique().tolist()) <= {-1.0, 1.0} for v in z.values())
    params, carry = algo.client_begin(p0, algo.init_server_state(p0), state, ctx)
    carry = {
        **carry,
        **algo.before_step(apply, params, batch, carry, {k: v[0] for k, v in z.items()}),
    }
    message, new_state = algo.client_end(p0, params, carry, state, ctx)
    # By hand: the full Hessian of the batch loss over the flat parameter vector.
    keys = list(p0)
    sizes = [p0[k].numel() for k in keys]
    flat0 = torch.cat([p0[k].reshape(-1) for k in keys])

    def loss(flat):
        parts = dict(zip(keys, torch.split(flat, sizes)))
        tree = {k: parts[k].reshape(p0[k].shape) for k in keys}
        return torch.nn.functional.cross_entropy(functional_call(model, tree, (batch.x,)), batch.y)

    H = hessian(loss)(flat0)
    zf = torch.cat([z[k][0].reshape(-1) for k in keys])
    diag = zf * (H @ zf)
    got = torch.cat([message["shift"][k].reshape(-1) for k in keys])
    want = torch.cat([top_k(d, max(1, round(0.5 * d.numel()))) for d in torch.split(diag, sizes)])
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(
        torch.cat([new_state["h"][k].reshape(-1) for k in keys]), want, rtol=1e-4, atol=1e-6
    )


def test_the_server_divides_the_mean_gradient_by_the_learned_diagonal_plus_mu():
    algo = build_algorithm("fednl", mu=0.5, hessian_lr=1.0)
    p = {"w": torch.tensor([1.0, 2.0, 3.0])}
    msgs = {
        "grad": {"w": torch.tensor([[1.0, 2.0, -1.0], [3.0, 0.0, 1.0]])},
        "shift": {"w": torch.tensor([[2.0, -4.0, 0.0], [0.0, 0.0, 1.0]])},
        "loss": torch.tensor([1.0, 1.0]),
    }
    ctx = ServerContext(round=1, num_clients=2, client_ids=(0, 1), lr=0.1)
    new, state = algo.aggregate(p, msgs, algo.init_server_state(p), ctx)
    h = torch.tensor([1.0, -2.0, 0.5])  # the mean shift
    torch.testing.assert_close(state["h"]["w"], h)
    g = torch.tensor([2.0, 1.0, 0.0])
    torch.testing.assert_close(new["w"], p["w"] - g / (h.clamp(min=0) + 0.5))


def test_one_client_with_a_large_mu_is_fedavgs_full_batch_step(federation_factory):
    fed = federation_factory(num_clients=1, per_client=16)
    model = build_model("mlp", (6,), 3, init_seed=1, hidden=5)
    apply, p0 = make_apply(model), params_of(model)
    mu, lr = 1e6, 0.3
    runs = {
        name: run_rounds(
            Run(
                build_algorithm(name, **kw),
                apply,
                TrainConfig(rounds=2, batch_size=b, lr=lr, local_epochs=1, participation=1.0),
                p0,
            ),
            fed,
            Streams(0),
        )  # fmt: skip
        for name, b, kw in (("fednl", 5, {"mu": mu, "server_lr": mu * lr}), ("fedavg", 12, {}))
    }
    for k in p0:
        torch.testing.assert_close(
            runs["fednl"].global_params[k], runs["fedavg"].global_params[k], rtol=1e-4, atol=1e-5
        )


@pytest.mark.parametrize("kw", [{"mu": 0.0}, {"top_k_fraction": 0.0}, {"server_lr": -1.0}])
def test_bad_settings_are_named(kw):
    with pytest.raises(ValueError, match="fednl: "):
        build_algorithm("fednl", **kw)
