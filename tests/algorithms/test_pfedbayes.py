"""pFedBayes: the Gaussian KL, the reparameterised gradients by hand, ζ = 0 with σ -> 0 is local
SGD alone, and the executors agree."""

import math

import pytest
import torch

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import Batch, ClientContext
from fedbench.algorithms.pfedbayes import gaussian_kl
from fedbench.engine.batches import batch_plan
from fedbench.engine.build import Run
from fedbench.engine.loop import run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.rng import Streams

CFG = TrainConfig(rounds=2, batch_size=4, lr=0.1, local_epochs=1, clients_per_round=4)
CTX = ClientContext(client_id=0, round=1, lr=0.1, rounds=3, num_train=4, num_steps=1)


def _logits(params, x):
    """A 'model' whose logits are its weight, whatever the input (gradients in closed form)."""
    return params["weight"].expand(len(x), -1)


def _softplus(r):
    return math.log1p(math.exp(r))


def _sigmoid(r):
    return 1 / (1 + math.exp(-r))


def test_gaussian_kl_matches_torch_distributions():
    mu_q, rho_q = {"w": torch.tensor([0.3, -1.0])}, {"w": torch.tensor([-1.0, 0.5])}
    mu_p, rho_p = {"w": torch.tensor([0.0, 2.0])}, {"w": torch.tensor([0.2, -2.0])}
    sp = torch.nn.functional.softplus
    q = torch.distributions.Normal(mu_q["w"], sp(rho_q["w"]))
    p = torch.distributions.Normal(mu_p["w"], sp(rho_p["w"]))
    expected = torch.distributions.kl_divergence(q, p).sum()
    torch.testing.assert_close(gaussian_kl(mu_q, rho_q, mu_p, rho_p), expected)


def test_reparameterised_gradients_by_hand():
    zeta, n = 2.0, 4
    algo = build_algorithm("pfedbayes", zeta=zeta)
    mp, rp, mg, rg, eps = [0.5, -0.5], [-1.0, 0.0], [0.0, 0.2], [-0.5, -2.0], [1.5, -0.7]
    glob = {"mu.weight": torch.tensor(mg), "rho.weight": torch.tensor(rg)}
    state = {"personal": {"mu.weight": torch.tensor(mp), "rho.weight": torch.tensor(rp)}}
    params, carry = algo.client_begin(glob, {}, state, CTX)
    batch = Batch(torch.zeros(1, 1), torch.tensor([0]))
    p = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    loss = algo.local_loss(algo.model(_logits), p, batch, carry, torch.tensor([eps]))
    g = dict(zip(p, torch.autograd.grad(loss, list(p.values()))))
    # w = μ + softplus(ρ) ε; d CE / d w = softmax(w) - onehot(0).
    w = [m + _softplus(r) * e for m, r, e in zip(mp, rp, eps)]
    z = sum(math.exp(v) for v in w)
    dw = [math.exp(w[0]) / z - 1, math.exp(w[1]) / z]
    c = zeta / n
    exp_mu_p, exp_rho_p, exp_mu_g, exp_rho_g = [], [], [], []
    kl = 0.0
    for i in range(2):
        sq, sg = _softplus(rp[i]), _softplus(rg[i])
        d = mp[i] - mg[i]
        kl += math.log(sg / sq) + (sq**2 + d**2) / (2 * sg**2) - 0.5
        # KL(q||p) per weight: log σ_p - log σ_q + (σ_q² + (μ_q - μ_p)²) / (2σ_p²) - 1/2.
        exp_mu_p.append(dw[i] + c * d / sg**2)
        exp_rho_p.append((dw[i] * eps[i] + c * (-1 / sq + sq / sg**2)) * _sigmoid(rp[i]))
        exp_mu_g.append(-c * d / sg**2)
        exp_rho_g.append(c * (1 / sg - (sq**2 + d**2) / sg**3) * _sigmoid(rg[i]))
    ce = -(w[0] - math.log(z))
    assert loss.item() == pytest.approx(ce + 2 * c * kl, rel=1e-5)
    for key, expected in (
        ("p.mu.weight", exp_mu_p),
        ("p.rho.weight", exp_rho_p),
        ("g.mu.weight", exp_mu_g),
        ("g.rho.weight", exp_rho_g),
    ):
        torch.testing.assert_close(g[key], torch.tensor(expected), rtol=1e-5, atol=1e-6)


def test_zeta0_tiny_sigma_is_local_sgd_alone(tiny):
    fed, apply, p0 = tiny
    algo = build_algorithm("pfedbayes", zeta=0.0, rho_init=-30.0)
    cfg = TrainConfig(rounds=1, batch_size=4, lr=0.1, local_epochs=1, clients_per_round=4)
    out = run_rounds(Run(algo, apply, cfg, p0), fed, Streams(5))
    for k, v in p0.items():  # the global distribution moves only through the KL term
        torch.testing.assert_close(out.global_params["mu." + k], v, rtol=0, atol=0)
    for c in (0, 2):
        plan = batch_plan(fed.train[c], 4, Streams(5).generator("batches", 1, c), epochs=1)
        p = dict(p0)
        for idx in plan:
            q = {k: v.clone().requires_grad_(True) for k, v in p.items()}
            loss = torch.nn.functional.cross_entropy(apply(q, fed.x[idx]), fed.y[idx])
            grads = torch.autograd.grad(loss, list(q.values()))
            p = {k: v - 0.1 * gr for (k, v), gr in zip(p.items(), grads)}
        personal = out.client_states[c]["personal"]
        for k, v in p.items():
            torch.testing.assert_close(personal["mu." + k], v, rtol=0, atol=1e-6)


def test_noise_comes_from_the_algorithm_stream(tiny):
    fed, apply, p0 = tiny
    algo = build_algorithm("pfedbayes")
    a, b = (run_rounds(Run(algo, apply, CFG, p0), fed, Streams(s)) for s in (1, 1))
    c = run_rounds(Run(algo, apply, CFG, p0), fed, Streams(2))
    key = next(iter(a.global_params))
    torch.testing.assert_close(a.global_params[key], b.global_params[key], rtol=0, atol=0)
    assert not torch.equal(a.global_params[key], c.global_params[key])


def test_bad_hyperparameter_names_the_key():
    with pytest.raises(ValueError, match="mc_samples"):
        build_algorithm("pfedbayes", mc_samples=0)


def test_sequential_and_vectorised_agree(tiny):
    fed, apply, p0 = tiny
    fed.train[1] = fed.train[1][:5]  # fewer steps and a short last batch (padded under vmap)
    algo = build_algorithm("pfedbayes", mc_samples=2)
    seq, vec = (
        run_rounds(Run(algo, apply, CFG, p0, executor=ex), fed, Streams(8))
        for ex in ("sequential", "vectorised")
    )
    # The KL's 1/σ² (σ = softplus(-3) ≈ 0.05) amplifies float32 rounding (vmap vs one client):
    # agreement to a relative 1e-5.
    for k, v in seq.global_params.items():
        torch.testing.assert_close(v, vec.global_params[k], rtol=1e-5, atol=1e-5)
    for c, state in seq.client_states.items():
        for k, v in state["personal"].items():
            other = vec.client_states[c]["personal"][k]
            torch.testing.assert_close(v, other, rtol=1e-5, atol=1e-5)
