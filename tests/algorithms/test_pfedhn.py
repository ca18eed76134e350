"""pFedHN: the generated network, the server's vector-Jacobian step by hand, executors agree."""

import pytest
import torch

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import ClientContext, ServerContext
from fedbench.algorithms.pfedhn import generate, init_hypernetwork
from fedbench.engine.build import Run
from fedbench.engine.loop import run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.rng import Streams

CFG = TrainConfig(rounds=2, batch_size=4, lr=0.1, local_epochs=1, clients_per_round=3)


def _hnet(layers=2):
    targets = {"w": torch.zeros(2, 3), "b": torch.zeros(2)}
    return init_hypernetwork(targets, 3, 4, 5, layers, torch.Generator().manual_seed(0))


def test_generate_is_the_mlp_and_linear_heads():
    h = _hnet()
    v = h["hn.emb"][1]
    a = h["hn.body.0.weight"] @ v + h["hn.body.0.bias"]
    a = h["hn.body.1.weight"] @ torch.relu(a) + h["hn.body.1.bias"]
    theta = generate(h, v)
    assert theta["w"].shape == (2, 3) and theta["b"].shape == (2,)
    for i in range(2):
        for j in range(3):
            expected = (h["hn.head.w.weight"][i, j] * a).sum() + h["hn.head.w.bias"][i, j]
            torch.testing.assert_close(theta["w"][i, j], expected)


def test_server_step_is_the_vector_jacobian_product_by_hand():
    algo = build_algorithm(
        "pfedhn", server_lr=0.5, server_momentum=0.0, server_weight_decay=0.0, layers=1
    )
    h = _hnet(layers=1)
    state = algo.init_server_state(h)
    ctx = ClientContext(client_id=2, round=1, lr=0.1, rounds=1, num_train=4, num_steps=1)
    theta, carry = algo.client_begin(h, state, {"id": 2}, ctx)
    trained = {"w": theta["w"] + 1.0, "b": theta["b"] - 2.0}  # Δθ = θ̃ - θ: +1 on w, -2 on b
    message, _ = algo.client_end(h, trained, carry, {"id": 2}, ctx)
    stacked = {
        "delta": {k: v.unsqueeze(0) for k, v in message["delta"].items()},
        "weight": torch.tensor([4.0]),
    }
    sctx = ServerContext(round=1, num_clients=3, client_ids=(2,), lr=0.1)
    new, _ = algo.aggregate(h, stacked, state, sctx)
    # θ = W a + c with a = A v + e (one body layer). The step descends ⟨θ, θ - θ̃⟩ = ⟨θ, -Δθ⟩:
    # ∂/∂c = -Δθ, ∂/∂W[..., :] = -Δθ ⊗ a, ∂/∂A = Σ_out (-Δθ · W) ⊗ v, ∂/∂v = Aᵀ Σ_out (-Δθ · W).
    v, A, e = h["hn.emb"][2], h["hn.body.0.weight"], h["hn.body.0.bias"]
    a = A @ v + e
    d = {"w": torch.full((2, 3), 1.0), "b": torch.full((2,), -2.0)}
    torch.testing.assert_close(new["hn.head.b.bias"], h["hn.head.b.bias"] + 0.5 * d["b"])
    torch.testing.assert_close(
        new["hn.head.w.weight"], h["hn.head.w.weight"] + 0.5 * d["w"].unsqueeze(-1) * a
    )
    back = (d["w"].unsqueeze(-1) * h["hn.head.w.weight"]).sum((0, 1)) + (
        d["b"].unsqueeze(-1) * h["hn.head.b.weight"]
    ).sum(0)  # Σ_out Δθ · W, a vector over the hidden units
    torch.testing.assert_close(new["hn.body.0.bias"], e + 0.5 * back)
    torch.testing.assert_close(new["hn.emb"][2], v + 0.5 * A.T @ back)
    torch.testing.assert_close(new["hn.emb"][:2], h["hn.emb"][:2])  # other clients untouched


def test_personal_model_is_the_generated_one(tiny):
    fed, apply, p0 = tiny
    algo = build_algorithm("pfedhn")
    out = run_rounds(Run(algo, apply, CFG, p0), fed, Streams(2))
    g = out.global_params
    assert g["hn.emb"].shape == (4, 2)  # 1 + N/4 with N = 4 clients
    personal = algo.personal_params("personal", g, out.client_states[3])
    x = fed.x[:5]
    expected = apply(generate(g, g["hn.emb"][3]), x)
    torch.testing.assert_close(algo.model(apply)(personal, x), expected)


def test_bad_hyperparameter_names_the_key():
    with pytest.raises(ValueError, match="server_momentum"):
        build_algorithm("pfedhn", server_momentum=1.0)


def test_sequential_and_vectorised_agree(tiny, assert_executors_agree):
    fed, apply, p0 = tiny
    fed.train[1] = fed.train[1][:5]  # fewer steps and a short last batch (padded under vmap)
    algo = build_algorithm("pfedhn", hidden=7)
    seq, vec = (
        run_rounds(Run(algo, apply, CFG, p0, executor=ex), fed, Streams(8))
        for ex in ("sequential", "vectorised")
    )
    assert_executors_agree(seq, vec)
