"""FedAMP: attention weights and cloud models by hand on 3 clients; an exact FedAvg identity."""

import math

import pytest
import torch

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import Batch, ClientContext
from fedbench.algorithms.fedamp import attention_weights
from fedbench.engine.build import Run
from fedbench.engine.loop import run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.rng import Streams

# Three clients' models, one 2-vector each: w_0 = (0, 0), w_1 = (1, 0), w_2 = (0, 2).
MODELS = {"w": torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]])}
STATE = {"models": MODELS, "ids": torch.tensor([0, 1, 2])}


def test_distance_attention_and_cloud_by_hand():
    algo = build_algorithm("fedamp", alpha_k=0.5, sigma=2.0)
    # ξ_0j = α_k exp(-‖w_0 - w_j‖²/σ)/σ: ‖·‖² = 1 and 4 -> 0.25 e^{-1/2}, 0.25 e^{-2}.
    x1, x2 = 0.25 * math.exp(-0.5), 0.25 * math.exp(-2.0)
    xii, xij = attention_weights(
        MODELS["w"][0], MODELS["w"][1:], "distance", alpha_k=0.5, sigma=2.0, xi=1.0
    )
    assert xij.tolist() == pytest.approx([x1, x2])
    assert float(xii) == pytest.approx(1 - x1 - x2)
    # u_0 = ξ_00 w_0 + ξ_01 w_1 + ξ_02 w_2 = (x1, 2 x2).
    u0 = algo.cloud(0, {"w": MODELS["w"][0]}, STATE)["w"]
    torch.testing.assert_close(u0, torch.tensor([x1, 2 * x2]))
    # Client 2 (‖w_2 - w_0‖² = 4, ‖w_2 - w_1‖² = 5): weights sum to one with ξ_22.
    y0, y1 = 0.25 * math.exp(-2.0), 0.25 * math.exp(-2.5)
    u2 = algo.cloud(2, {"w": MODELS["w"][2]}, STATE)["w"]
    torch.testing.assert_close(u2, torch.tensor([y1, 2 * (1 - y0 - y1)]))


def test_cosine_attention_and_cloud_by_hand():
    algo = build_algorithm("fedamp", attention="cosine", sigma=3.0, xi=0.4)
    # Client 1 (1, 0): cos with (0, 0) is 0 (torch's eps), with (0, 2) is 0 -> softmax uniform.
    u1 = algo.cloud(1, {"w": MODELS["w"][1]}, STATE)["w"]
    torch.testing.assert_close(u1, torch.tensor([0.4, 0.3 * 2]))
    # Own model (1, 1) against uploads w_0 = (0, 0), w_2 = (0, 2) for a client (id 7) that did
    # not upload: cos = 0 and 1/√2 -> weights 0.6 softmax(0, 3/√2).
    e = math.exp(3 / math.sqrt(2))
    p0, p2 = 0.6 / (1 + e), 0.6 * e / (1 + e)
    state = {"models": MODELS, "ids": torch.tensor([0, 8, 2])}
    keep = {"models": {"w": MODELS["w"][[0, 2]]}, "ids": torch.tensor([0, 2])}
    u = algo.cloud(7, {"w": torch.tensor([1.0, 1.0])}, keep)["w"]
    torch.testing.assert_close(u, torch.tensor([0.4, 0.4 + 2 * p2]))
    assert p0 + p2 == pytest.approx(0.6)
    # With id 8 in the uploads, client 8's own upload is excluded and its own model used instead.
    u8 = algo.cloud(8, {"w": MODELS["w"][1]}, state)["w"]
    torch.testing.assert_close(u8, u1)


def test_round_one_cloud_is_the_own_model():
    algo = build_algorithm("fedamp")
    own = {"w": torch.tensor([3.0, 4.0])}
    assert algo.cloud(0, own, {})["w"].tolist() == [3.0, 4.0]


def test_server_update_keeps_uploads_and_weighted_global():
    algo = build_algorithm("fedamp")
    from fedbench.algorithms.base import ServerContext

    msgs = {"model": MODELS, "weight": torch.tensor([1.0, 1.0, 2.0], dtype=torch.float64)}
    ctx = ServerContext(round=1, num_clients=5, client_ids=(0, 3, 4), lr=0.1)
    glob, state = algo.aggregate({"w": torch.zeros(2)}, msgs, {}, ctx)
    torch.testing.assert_close(glob["w"], torch.tensor([0.25, 1.0]))
    assert state["ids"].tolist() == [0, 3, 4] and state["models"] is MODELS


def test_prox_gradient_by_hand():
    algo = build_algorithm("fedamp", lam=3.0, alpha_k=2.0)
    apply = lambda p, x: p["w"].expand(len(x), -1)  # noqa: E731
    batch = Batch(torch.zeros(1, 1), torch.tensor([0]))
    ctx = ClientContext(client_id=0, round=2, lr=0.1, rounds=3, num_train=1, num_steps=1)
    own = {"w": torch.tensor([0.0, 0.0])}
    params, carry = algo.client_begin({}, STATE, {"model": own}, ctx)
    u = carry["anchor"]["w"]
    g = torch.func.grad(lambda p: algo.local_loss(apply, p, batch, carry, None))(params)["w"]
    # CE gradient at logits (0, 0), label 0: (-0.5, 0.5); prox: (λ/α_k)(w - u) = -1.5 u.
    torch.testing.assert_close(g, torch.tensor([-0.5, 0.5]) - 1.5 * u)
    assert params["w"].tolist() == [0.0, 0.0]  # start: local = the own model


def test_uniform_attention_no_prox_start_at_cloud_is_fedavg(tiny):
    # Identity: cosine attention with σ = 0 spreads 1 - ξ_ii uniformly over the K - 1 others;
    # with ξ_ii = 1/K every ξ_ij = 1/K, so under full participation every cloud is the plain
    # mean of last round's uploads = FedAvg's global (equal client sizes), and in round 1 the
    # own model w^0. Starting at the cloud with λ = 0 is then FedAvg's local training.
    fed, apply, p0 = tiny
    k = fed.num_clients
    algo = build_algorithm(
        "fedamp", attention="cosine", sigma=0.0, xi=1 / k, lam=0.0, start="cloud"
    )
    cfg = TrainConfig(rounds=3, batch_size=4, lr=0.1, local_epochs=1, clients_per_round=k)
    a, b = (
        run_rounds(Run(al, apply, cfg, p0), fed, Streams(2))
        for al in (algo, build_algorithm("fedavg"))
    )
    for key, v in a.global_params.items():
        torch.testing.assert_close(v, b.global_params[key], rtol=0, atol=1e-6)
    # The personal models differ from the global (they are the clients' trained models).
    assert any(
        (a.client_states[0]["model"][key] - a.global_params[key]).abs().max() > 1e-4 for key in p0
    )


def test_prox_pulls_personal_models_together(tiny):
    # alpha_k = 0.2 keeps ξ_ii >= 0.4 with 3 others, so clouds are convex mixtures. (At the
    # PFLlib defaults alpha_k = sigma = 1, near-identical models give ξ_ii ≈ 1 - (K - 1) < 0:
    # clouds extrapolate away from the others and the prox spreads the models apart.)
    fed, apply, p0 = tiny
    cfg = TrainConfig(rounds=3, batch_size=4, lr=0.1, local_epochs=2, clients_per_round=4)

    def spread(lam):
        algo = build_algorithm("fedamp", lam=lam, alpha_k=0.2, sigma=1.0)
        out = run_rounds(Run(algo, apply, cfg, p0), fed, Streams(2))
        models = [
            torch.cat([v.flatten() for v in s["model"].values()])
            for s in out.client_states.values()
        ]
        return torch.stack(models).var(dim=0).sum()

    assert spread(1.0) < spread(0.0)


@pytest.mark.parametrize(
    "kw, field",
    [
        ({"alpha_k": 0.0}, "alpha_k"),
        ({"sigma": 0.0}, "sigma"),
        ({"attention": "cosine", "sigma": -1.0}, "sigma"),
        ({"lam": -1.0}, "lam"),
        ({"attention": "dot"}, "attention"),
        ({"xi": 1.5}, "xi"),
        ({"start": "global"}, "start"),
    ],
)
def test_bad_hyperparameters_name_the_field(kw, field):
    with pytest.raises(ValueError, match=field):
        build_algorithm("fedamp", **kw)


def test_self_weight_bound_of_the_grid_choice():
    # S = 20 uploaded models identical to the client's own: every ξ_ij = α_k exp(0)/σ = α_k/σ.
    own = torch.zeros(3)
    others = torch.zeros(20, 3)
    xii, xij = attention_weights(own, others, "distance", 1.0, 1.0, 1.0)
    assert xii.item() == pytest.approx(1 - 20)  # PFLlib's α_k = σ = 1: ξ_ii = -19
    xii, xij = attention_weights(own, others, "distance", 1 / 20, 1.0, 1.0)
    assert xii.item() == pytest.approx(0.0, abs=1e-12)  # α_k = σ/S: the bound is reached
    far = torch.ones(20, 3)  # farther models weigh less: ξ_ii only grows
    xii_far, _ = attention_weights(own, far, "distance", 1 / 20, 1.0, 1.0)
    assert xii_far.item() == pytest.approx(1 - 20 * math.exp(-3) / 20)
