"""APFL: α = 0 is FedAvg for the federated model; the mixture's gradients by hand."""

import math

import pytest
import torch

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import Batch, ClientContext
from fedbench.engine.build import Run
from fedbench.engine.loop import run_rounds, sample_clients
from fedbench.engine.train_config import TrainConfig
from fedbench.rng import Streams

CFG = TrainConfig(
    rounds=3, batch_size=4, lr=0.1, local_epochs=2, clients_per_round=3, momentum=0.9,
    weight_decay=1e-3,
)  # fmt: skip
CTX = ClientContext(client_id=0, round=1, lr=0.1, rounds=3, num_train=2, num_steps=1)


def _run(algo, tiny, cfg=CFG):
    fed, apply, p0 = tiny
    return run_rounds(Run(algo, apply, cfg, p0), fed, Streams(11))


def _logits(params, x):
    """A 'model' whose logits are its weight, whatever the input (gradients in closed form)."""
    return params["weight"].expand(len(x), -1)


def _softmax(z):
    e = [math.exp(v) for v in z]
    return [v / sum(e) for v in e]


@pytest.mark.parametrize("kw", [{"alpha": 0.0}, {"alpha": 0.25}, {"adaptive_alpha": True}])
def test_federated_model_equals_fedavg(kw, tiny):
    # α = 0 is FedAvg; since w is a constant in the mixture, so is every α (`variant: paper`;
    # the release reading: test_apfl_release.py).
    a, b = _run(build_algorithm("apfl", **kw), tiny), _run(build_algorithm("fedavg"), tiny)
    for k, v in a.global_params.items():
        torch.testing.assert_close(v, b.global_params[k], rtol=0, atol=1e-6)
    # Exactly the sampled clients moved v (by weight decay alone when α = 0).
    head0 = tiny[2]["head.weight"]
    moved = {
        c for c, st in a.client_states.items() if not torch.equal(st["local"]["head.weight"], head0)
    }
    assert moved == {c for t in (1, 2, 3) for c in sample_clients(Streams(11), t, 4, 3)}


def test_mixture_gradients_by_hand():
    algo = build_algorithm("apfl", alpha=0.25)
    g = {"weight": torch.tensor([0.0, 1.0, -1.0])}
    state = {"local": {"weight": torch.tensor([2.0, 0.0, 0.0])}}
    params, carry = algo.client_begin(g, {}, state, CTX)
    params = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    batch = Batch(torch.zeros(2, 1), torch.tensor([0, 2]))
    loss = algo.local_loss(_logits, params, batch, carry, None)
    grads = dict(zip(params, torch.autograd.grad(loss, list(params.values()))))
    y_bar = [0.5, 0.0, 0.5]  # mean one-hot of labels (0, 2)
    # Federated model: d CE / d z = softmax(z) - y_bar at z = w.
    expect_fed = [p - y for p, y in zip(_softmax([0.0, 1.0, -1.0]), y_bar)]
    # Local model: mixture m = 0.75 w + 0.25 v = (0.5, 0.75, -0.75); d/dv = 0.25 (softmax(m) - y).
    expect_loc = [0.25 * (p - y) for p, y in zip(_softmax([0.5, 0.75, -0.75]), y_bar)]
    torch.testing.assert_close(grads["fed.weight"], torch.tensor(expect_fed))
    torch.testing.assert_close(grads["loc.weight"], torch.tensor(expect_loc))


def test_adaptive_alpha_gradient_by_hand():
    algo = build_algorithm("apfl", alpha=0.25, adaptive_alpha=True)
    g = {"weight": torch.tensor([0.0, 1.0, -1.0])}
    state = algo.init_client_state(0, g, None)
    state["local"] = {"weight": torch.tensor([2.0, 0.0, 0.0])}
    params, carry = algo.client_begin(g, {}, state, CTX)
    params = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    batch = Batch(torch.zeros(2, 1), torch.tensor([0, 2]))
    loss = algo.local_loss(_logits, params, batch, carry, None)
    (ga,) = torch.autograd.grad(loss, [params["mix.alpha"]])
    # d CE(m) / d alpha = <softmax(m) - y_bar, v - w> with v - w = (2, -1, 1).
    s = _softmax([0.5, 0.75, -0.75])
    expect = 2 * (s[0] - 0.5) - 1 * s[1] + 1 * (s[2] - 0.5)
    assert ga.item() == pytest.approx(expect, abs=1e-6)
    # Stored α is clipped to [0, 1] after the round; evaluation mixes with the client's own α.
    trained = {**params, "mix.alpha": torch.tensor(1.7)}
    _, new = algo.client_end(g, {k: v.detach() for k, v in trained.items()}, carry, state, CTX)
    assert new["alpha"].item() == 1.0
    mixed = algo.personal_params("personal", g, new)
    torch.testing.assert_close(mixed["weight"], new["local"]["weight"])


def test_personal_model_is_fixed_mixture_by_hand():
    algo = build_algorithm("apfl", alpha=0.25)
    g = {"weight": torch.tensor([4.0, 0.0])}
    state = {"local": {"weight": torch.tensor([0.0, 8.0])}}
    # 0.75 * (4, 0) + 0.25 * (0, 8) = (3, 2)
    torch.testing.assert_close(
        algo.personal_params("personal", g, state)["weight"], torch.tensor([3.0, 2.0])
    )
    assert torch.equal(algo.init_client_state(0, g, None)["local"]["weight"], g["weight"])


def test_lambda_protocols_by_hand():
    # Thesis Fig. 2.5: APFL's personalised model (1 - λ) θ^g + λ θ^l_i on the λ grid 0, 0.1, …, 1.
    algo = build_algorithm("apfl", alpha=0.25)
    assert algo.personal_protocols == ("personal", *(f"lambda{i / 10}" for i in range(11)))
    g = {"weight": torch.tensor([4.0, 0.0, -2.0]), "bias": torch.tensor([1.0])}
    state = {"local": {"weight": torch.tensor([0.0, 8.0, 3.0]), "bias": torch.tensor([-1.0])}}
    at = {lam: algo.personal_params(f"lambda{lam}", g, state) for lam in (0.0, 0.3, 1.0)}
    for k in g:
        assert torch.equal(at[0.0][k], g[k])  # the global model
        assert torch.equal(at[1.0][k], state["local"][k])  # the local model
    # 0.7 * (4, 0, -2) + 0.3 * (0, 8, 3) = (2.8, 2.4, -0.5); bias 0.7 - 0.3 = 0.4
    torch.testing.assert_close(at[0.3]["weight"], torch.tensor([2.8, 2.4, -0.5]))
    torch.testing.assert_close(at[0.3]["bias"], torch.tensor([0.4]))
    # The tables' `personal` model keeps α weighting θ^l: 0.75 * (4, 0, -2) + 0.25 * (0, 8, 3)
    personal = algo.personal_params("personal", g, state)["weight"]
    torch.testing.assert_close(personal, torch.tensor([3.0, 2.0, -0.75]))
    with pytest.raises(KeyError, match="lambda0.25"):  # off the grid: no protocol
        algo.personal_params("lambda0.25", g, state)
