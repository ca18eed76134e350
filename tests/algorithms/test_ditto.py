"""Ditto: the global model is FedAvg's; μ = 0 is local training alone; the prox term by hand."""

import pytest
import torch

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import Batch, ClientContext
from fedbench.engine.batches import batch_plan
from fedbench.engine.build import Run
from fedbench.engine.functional import sgd_init, sgd_step
from fedbench.engine.loop import run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.rng import Streams

CFG = dict(batch_size=4, lr=0.1, local_epochs=1, momentum=0.9, weight_decay=1e-3)
CTX = ClientContext(client_id=0, round=1, lr=0.1, rounds=3, num_train=2, num_steps=1)


def _run(algo, tiny, rounds=3, m=3):
    fed, apply, p0 = tiny
    cfg = TrainConfig(rounds=rounds, clients_per_round=m, **CFG)
    return run_rounds(Run(algo, apply, cfg, p0), fed, Streams(4))


def _logits(params, x):
    """A 'model' whose logits are its weight, whatever the input (gradients in closed form)."""
    return params["weight"].expand(len(x), -1)


@pytest.mark.parametrize("mu", [0.0, 1.0])
def test_global_model_equals_fedavg_for_any_mu(mu, tiny):
    # The federated phase is FedAvg's E epochs on the same batches (the plan's first E epochs).
    a, b = _run(build_algorithm("ditto", mu=mu, tau=2), tiny), _run(build_algorithm("fedavg"), tiny)
    for k, v in a.global_params.items():
        torch.testing.assert_close(v, b.global_params[k], rtol=0, atol=1e-6)


def test_mu0_local_model_is_local_training_alone(tiny):
    fed, apply, p0 = tiny
    out = _run(build_algorithm("ditto", mu=0.0, tau=2), tiny, rounds=1, m=4)
    for c in (0, 3):
        # Plain SGD (momentum, weight decay) from the local model's start (= the global init) on
        # the batches of the last tau = 2 epochs of the client's (E + tau)-epoch plan.
        plan = batch_plan(fed.train[c], 4, Streams(4).generator("batches", 1, c), epochs=3)[3:]
        p, buf = dict(p0), sgd_init(p0)
        for idx in plan:
            q = {k: v.clone().requires_grad_(True) for k, v in p.items()}
            loss = torch.nn.functional.cross_entropy(apply(q, fed.x[idx]), fed.y[idx])
            grads = dict(zip(q, torch.autograd.grad(loss, list(q.values()))))
            p, buf = sgd_step(p, grads, buf, 0.1, 0.9, 1e-3)
        for k, v in out.client_states[c]["local"].items():
            torch.testing.assert_close(v, p[k], rtol=0, atol=1e-6)


@pytest.mark.parametrize("prox", ["layer_norm", "squared"])
def test_phase_gradients_and_prox_by_hand(prox):
    algo = build_algorithm("ditto", mu=2.0, prox=prox)
    g = {"weight": torch.tensor([0.0, 0.0, 0.0])}
    state = {"local": {"weight": torch.tensor([3.0, 0.0, -4.0])}}
    params, carry = algo.client_begin(g, {}, state, CTX)
    batch = Batch(torch.zeros(2, 1), torch.tensor([0, 0]))

    def grads(phase):
        p = {k: v.clone().requires_grad_(True) for k, v in params.items()}
        loss = algo.local_loss(_logits, p, batch, carry, torch.tensor(phase))
        return dict(zip(p, torch.autograd.grad(loss, list(p.values()))))

    # Federated phase: CE of w = 0 (softmax 1/3 each, label 0) and nothing for v.
    fed_phase = grads(0.0)
    torch.testing.assert_close(fed_phase["fed.weight"], torch.tensor([-2 / 3, 1 / 3, 1 / 3]))
    assert torch.equal(fed_phase["loc.weight"], torch.zeros(3))
    # Local phase: CE of v = (3, 0, -4) plus the prox gradient; v - θ^g = (3, 0, -4), norm 5.
    e = torch.tensor([3.0, 0.0, -4.0]).exp()
    ce = e / e.sum() - torch.tensor([1.0, 0.0, 0.0])
    pull = 2.0 * torch.tensor([3.0, 0.0, -4.0]) / (5.0 if prox == "layer_norm" else 1.0)
    loc_phase = grads(1.0)
    torch.testing.assert_close(loc_phase["loc.weight"], ce + pull)
    assert torch.equal(loc_phase["fed.weight"], torch.zeros(3))
    mask = algo.update_mask(params, carry, torch.tensor(1.0))
    assert (mask["fed.weight"].item(), mask["loc.weight"].item()) == (0.0, 1.0)


def test_phases_and_personal_model():
    algo = build_algorithm("ditto", tau=2)
    assert algo.local_epochs(3) == 5
    ctx = ClientContext(0, 1, 0.1, 3, num_train=4, num_steps=10, steps_per_epoch=2)
    assert algo.step_noise(None, ctx, {}).tolist() == [0] * 6 + [1] * 4
    g = {"weight": torch.ones(2)}
    state = algo.init_client_state(0, g, None)
    assert torch.equal(state["local"]["weight"], g["weight"])  # local model starts at the init
    state = {"local": {"weight": torch.tensor([5.0, 6.0])}}
    assert torch.equal(
        algo.personal_params("personal", g, state)["weight"], state["local"]["weight"]
    )


def test_joint_schedule_global_model_is_fedavg_on_counted_steps(tiny):
    # Alg. 1's schedule: w's steps are FedAvg's whatever v does; it also runs on counted steps.
    fed, apply, p0 = tiny
    cfg = TrainConfig(rounds=2, batch_size=4, lr=0.1, local_steps=3, clients_per_round=3)
    algo = build_algorithm("ditto", mu=1.0, prox="squared", schedule="joint")
    a = run_rounds(Run(algo, apply, cfg, p0), fed, Streams(4))
    b = run_rounds(Run(build_algorithm("fedavg"), apply, cfg, p0), fed, Streams(4))
    for k, v in a.global_params.items():
        torch.testing.assert_close(v, b.global_params[k], rtol=0, atol=1e-6)


def test_joint_schedule_gradients_by_hand():
    algo = build_algorithm("ditto", mu=2.0, prox="squared", schedule="joint")
    assert algo.local_epochs(3) == 3 and algo.step_noise(None, CTX, {}) is None
    g = {"weight": torch.tensor([0.0, 0.0, 0.0])}
    state = {"local": {"weight": torch.tensor([3.0, 0.0, -4.0])}}
    params, carry = algo.client_begin(g, {}, state, CTX)
    batch = Batch(torch.zeros(2, 1), torch.tensor([0, 0]))
    p = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    loss = algo.local_loss(_logits, p, batch, carry, None)
    grads = dict(zip(p, torch.autograd.grad(loss, list(p.values()))))
    # Both models step: w on CE alone (softmax 1/3 each, label 0), v on CE + 2 (v - θ^g).
    torch.testing.assert_close(grads["fed.weight"], torch.tensor([-2 / 3, 1 / 3, 1 / 3]))
    e = torch.tensor([3.0, 0.0, -4.0]).exp()
    ce = e / e.sum() - torch.tensor([1.0, 0.0, 0.0])
    torch.testing.assert_close(grads["loc.weight"], ce + 2.0 * torch.tensor([3.0, 0.0, -4.0]))
    assert algo.update_mask(params, carry, None) is None
