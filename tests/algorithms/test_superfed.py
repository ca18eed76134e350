"""SuPerFed: reductions to FedAvg, its own terms by hand, λ sampling, evaluation over λ."""

import math
from dataclasses import dataclass

import pytest
import torch

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import Batch, ClientContext
from fedbench.algorithms.superfed import LAMBDA_GRID, SuPerFed, module_groups, orthogonality
from fedbench.engine.build import Run
from fedbench.engine.loop import run_rounds, select_per_client
from fedbench.engine.train_config import TrainConfig
from fedbench.rng import Streams

CFG = dict(
    rounds=4,
    batch_size=4,
    lr=0.1,
    local_epochs=1,
    clients_per_round=2,
    momentum=0.9,
    weight_decay=1e-3,
)


def _fresh(p0):
    def fresh(client_id):
        g = torch.Generator().manual_seed(7 + client_id)
        return {k: torch.randn(v.shape, generator=g) for k, v in p0.items()}

    return fresh


def _run(algo, tiny, **kw):
    fed, apply, p0 = tiny
    cfg = TrainConfig(**{**CFG, **kw})
    return run_rounds(Run(algo, apply, cfg, p0, fresh_init=_fresh(p0)), fed, Streams(3))


def _same(a, b):
    for k in a.global_params:
        torch.testing.assert_close(a.global_params[k], b.global_params[k], rtol=0, atol=1e-6)


@dataclass(frozen=True)
class LambdaZero(SuPerFed):
    """λ fixed at 0 while mixing is on."""

    def step_noise(self, rng, ctx, global_params):
        noise = super().step_noise(rng, ctx, global_params)
        return None if noise is None else torch.zeros_like(noise)


def test_lambda0_mu0_nu0_equals_fedavg(tiny):
    algo = LambdaZero(mu=0.0, nu=0.0, start=0.0, aggregate_keys="all")
    _same(_run(algo, tiny), _run(build_algorithm("fedavg"), tiny))


def test_before_start_only_the_federated_model_trains(tiny):
    fed, apply, p0 = tiny
    algo = SuPerFed(mu=0.0, nu=1.0, start=1.0, aggregate_keys="all")  # never mixes in 4 rounds
    state = _run(algo, tiny)
    _same(state, _run(build_algorithm("fedavg"), tiny))
    fresh = _fresh(p0)
    for cid, cs in state.client_states.items():
        for k in p0:
            assert torch.equal(cs["local"][k], fresh(cid)[k])


def test_mixing_starts_after_floor_start_times_rounds():
    algo = SuPerFed(start=0.4)
    ctx = lambda t: ClientContext(0, t, 0.1, 10, 5, 5)  # noqa: E731
    assert [algo.mixing(ctx(t)) for t in range(1, 11)] == [False] * 4 + [True] * 6


def test_local_model_trains_after_start_and_stays_local(tiny):
    fed, apply, p0 = tiny
    state = _run(SuPerFed(start=0.5), tiny)
    moved = [
        c
        for c, cs in state.client_states.items()
        if not torch.equal(cs["local"]["head.weight"], _fresh(p0)(c)["head.weight"])
    ]
    assert moved  # sampled clients after round 2 trained their local model


def test_prox_and_orthogonality_by_hand():
    fed = {"a.weight": torch.tensor([1.0, 2.0]), "a.bias": torch.tensor([2.0])}
    loc = {"a.weight": torch.tensor([2.0, 0.0]), "a.bias": torch.tensor([1.0])}
    # <f,l> = 2 + 0 + 2 = 4; |f|^2 = 9; |l|^2 = 5 -> cos^2 = 16/45
    assert orthogonality(fed, loc, 0.0).item() == pytest.approx(16 / 45)
    # code form: (4 + 3 * 1e-6)^2 / 45
    assert orthogonality(fed, loc, 1e-6).item() == pytest.approx((4 + 3e-6) ** 2 / 45)
    algo = SuPerFed(mu=0.5, nu=2.0, prox="squared", ortho_eps=0.0)
    anchor = {"a.weight": torch.tensor([0.0, 0.0]), "a.bias": torch.tensor([0.0])}
    params = {"fed." + k: v for k, v in fed.items()} | {"loc." + k: v for k, v in loc.items()}
    zero_model = lambda p, x: torch.zeros(len(x), 2)  # noqa: E731  CE = log 2, independent of p
    batch = Batch(torch.zeros(3, 1), torch.zeros(3, dtype=torch.long))
    loss = algo.local_loss(zero_model, params, batch, {"anchor": anchor}, torch.tensor([0.3]))
    # log 2 + (0.5/2) * (1 + 4 + 4) + 2 * 16/45
    assert loss.item() == pytest.approx(math.log(2) + 0.25 * 9 + 32 / 45, rel=1e-6)


def test_joint_gradient_eq_2_3():
    """∇θ^f = (1-λ) g and ∇θ^l = λ g, g = gradient of the loss at the mixed weights."""
    algo = SuPerFed(mu=0.0, nu=0.0)
    x, y = torch.tensor([[1.0, -2.0]]), torch.tensor([1])
    wf, wl = torch.tensor([[0.5, 0.1], [0.2, -0.3]]), torch.tensor([[-0.4, 0.3], [0.1, 0.2]])
    lam = 0.3
    apply = lambda p, x: x @ p["l.weight"].T  # noqa: E731
    params = {
        "fed.l.weight": wf.clone().requires_grad_(True),
        "loc.l.weight": wl.clone().requires_grad_(True),
    }
    loss = algo.local_loss(
        apply, params, Batch(x, y), {"anchor": {"l.weight": wf}}, torch.tensor([lam])
    )
    gf, gl = torch.autograd.grad(loss, list(params.values()))
    w = ((1 - lam) * wf + lam * wl).requires_grad_(True)
    (g,) = torch.autograd.grad(torch.nn.functional.cross_entropy(x @ w.T, y), [w])
    torch.testing.assert_close(gf, (1 - lam) * g)
    torch.testing.assert_close(gl, lam * g)


def test_mm_draws_one_lambda_per_model_lm_one_per_layer():
    params = {
        "body.0.weight": torch.zeros(2, 2),
        "body.2.weight": torch.zeros(2, 2),
        "head.weight": torch.zeros(2, 2),
        "head.bias": torch.zeros(2),
    }
    ctx = ClientContext(0, 5, 0.1, 10, 8, 7)
    g = torch.Generator().manual_seed(0)
    assert SuPerFed(mode="mm", start=0.0).step_noise(g, ctx, params).shape == (7, 1)
    lm = SuPerFed(mode="lm", start=0.0)
    noise = lm.step_noise(g, ctx, params)
    assert noise.shape == (7, 3)  # body.0, body.2, head (weight and bias share a module)
    lam = lm._lambdas(list(params), noise[0])
    assert lam["head.weight"] is lam["head.bias"]
    assert len({float(v) for v in lam.values()}) == 3
    assert module_groups(["m.lstm.weight_ih_l0", "m.lstm.weight_ih_l1", "m.fc.weight"]) == [
        ["m.lstm.weight_ih_l0", "m.lstm.weight_ih_l1"],
        ["m.fc.weight"],
    ]


def test_code_aggregation_leaves_biases_at_the_server_value(tiny):
    fed, apply, p0 = tiny
    state = _run(SuPerFed(start=0.0), tiny)
    assert torch.equal(state.global_params["head.bias"], p0["head.bias"])
    assert not torch.equal(state.global_params["head.weight"], p0["head.weight"])
    state_all = _run(SuPerFed(start=0.0, aggregate_keys="all"), tiny)
    assert not torch.equal(state_all.global_params["head.bias"], p0["head.bias"])


def test_evaluation_over_the_lambda_grid_and_best_lambda(tiny):
    state = _run(SuPerFed(start=0.0), tiny, rounds=2)
    clients = state.records[-1]["clients"]
    assert {f"lambda{v / 10}" for v in range(11)} <= set(clients)
    best = clients["best_lambda"]
    for j in range(len(best["ids"])):
        tops = [clients[f"lambda{v / 10}"]["top1"][j] for v in range(11)]
        assert best["top1"][j] == max(tops)
        assert tops[best["choice"][j]] == max(tops)
    # λ = 0 is the global model on the client's split.
    assert clients["lambda0.0"]["top1"] == clients["global"]["top1"]


def test_val_lambda_only_with_a_validation_split(tiny):
    fed, apply, p0 = tiny
    assert "val_lambda" not in _run(SuPerFed(start=0.0), tiny, rounds=1).records[-1]["clients"]
    fed.train, fed.val = [t[3:] for t in fed.train], [t[:3] for t in fed.train]
    clients = _run(SuPerFed(start=0.0), (fed, apply, p0), rounds=1).records[-1]["clients"]
    val = clients["val_lambda"]
    assert val["ids"] == clients["best_lambda"]["ids"] == [0, 1, 2, 3]
    for j, choice in enumerate(val["choice"]):
        chosen = clients[f"lambda{LAMBDA_GRID[choice]}"]
        assert val["top1"][j] == chosen["top1"][j] and val["loss"][j] == chosen["loss"][j]
        assert val["top1"][j] <= clients["best_lambda"]["top1"][j]  # test-chosen is the upper bound


def test_select_per_client_by_hand():
    a = {
        "ids": [0, 1],
        "n": [5, 5],
        "loss": [1.0, 2.0],
        "top1": [0.2, 0.8],
        "top5": [1, 1],
        "ece": [0.1, 0.2],
        "mce": [0.3, 0.4],
    }
    b = {
        "ids": [0, 1],
        "n": [5, 5],
        "loss": [3.0, 4.0],
        "top1": [0.6, 0.8],
        "top5": [1, 1],
        "ece": [0.5, 0.6],
        "mce": [0.7, 0.8],
    }
    out = select_per_client([a, b], "top1")
    assert out["choice"] == [1, 0] and out["top1"] == [0.6, 0.8] and out["loss"] == [3.0, 2.0]
    # The chosen candidate's calibration travels with it (ECE at each client's best λ).
    assert out["ece"] == [0.5, 0.2] and out["mce"] == [0.7, 0.4]


@pytest.mark.parametrize("bad", [{"mode": "xx"}, {"start": 1.5}, {"prox": "l1"}, {"nu": -1}])
def test_bad_hyperparameters_are_named(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        build_algorithm("superfed", **bad)
