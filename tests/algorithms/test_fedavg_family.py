"""Equivalence tests to FedAvg and analytic tests of each algorithm's own term."""

import pytest
import torch

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import Batch, ClientContext, masked_mean
from fedbench.algorithms.fedprox import prox_term
from fedbench.engine.build import Run
from fedbench.engine.loop import run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.rng import Streams

CFG = TrainConfig(
    rounds=3,
    batch_size=4,
    lr=0.1,
    local_epochs=2,
    clients_per_round=3,
    momentum=0.9,
    weight_decay=1e-3,
)


def _run(algo, tiny, cfg=CFG):
    fed, apply, p0 = tiny
    return run_rounds(Run(algo, apply, cfg, p0), fed, Streams(7))


def _assert_same(a, b, atol=1e-6):
    for k in a.global_params:
        torch.testing.assert_close(a.global_params[k], b.global_params[k], rtol=0, atol=atol)


def test_fedprox_mu0_equals_fedavg(tiny):
    _assert_same(
        _run(build_algorithm("fedprox", mu=0.0), tiny), _run(build_algorithm("fedavg"), tiny)
    )


def test_fedprox_positive_mu_differs(tiny):
    a = _run(build_algorithm("fedprox", mu=1.0), tiny)
    b = _run(build_algorithm("fedavg"), tiny)
    assert any(not torch.allclose(a.global_params[k], b.global_params[k]) for k in a.global_params)


def test_prox_term_by_hand():
    p = {"l.weight": torch.tensor([3.0, 4.0]), "l.bias": torch.tensor([1.0])}
    a = {"l.weight": torch.tensor([0.0, 0.0]), "l.bias": torch.tensor([0.0])}
    # squared: (9 + 16 + 1) / 2 = 13; layer_norm: ||(3,4)|| = 5 (bias excluded, as the code does)
    assert prox_term(p, a, "squared").item() == 13.0
    assert prox_term(p, a, "layer_norm").item() == 5.0


def test_fedprox_gradient_of_its_term():
    algo = build_algorithm("fedprox", mu=0.5)
    p = {"w": torch.tensor([2.0, -1.0], requires_grad=True)}
    carry = {"anchor": {"w": torch.tensor([1.0, 1.0])}}
    batch = Batch(torch.zeros(1, 2), torch.zeros(1, dtype=torch.long))
    # The model ignores w, so only the proximal term has a gradient.
    loss = algo.local_loss(lambda params, x: torch.zeros(len(x), 3), p, batch, carry, None)
    (g,) = torch.autograd.grad(loss, [p["w"]])
    # d/dw [CE(const logits) + mu/2 ||w - a||^2] = mu (w - a) = 0.5 * (1, -2)
    torch.testing.assert_close(g, torch.tensor([0.5, -1.0]))


def test_scaffold_round1_equals_fedavg(tiny):
    one = TrainConfig(**{**CFG.__dict__, "rounds": 1})
    _assert_same(
        _run(build_algorithm("scaffold"), tiny, one), _run(build_algorithm("fedavg"), tiny, one)
    )


def test_scaffold_later_rounds_differ_and_code_variant_equals_fedavg(tiny):
    std = _run(build_algorithm("scaffold"), tiny)
    avg = _run(build_algorithm("fedavg"), tiny)
    code = _run(build_algorithm("scaffold", variant="superfed_code"), tiny)
    assert any(
        not torch.allclose(std.global_params[k], avg.global_params[k]) for k in avg.global_params
    )
    _assert_same(code, avg)


def test_scaffold_control_variates_by_hand():
    algo = build_algorithm("scaffold")
    g = {"w": torch.tensor([1.0, 1.0])}
    server, client = {"c": {"w": torch.tensor([0.5, 0.0])}}, {"c": {"w": torch.tensor([0.0, 2.0])}}
    ctx = ClientContext(client_id=0, round=2, lr=0.1, rounds=5, num_train=8, num_steps=4)
    start, carry = algo.client_begin(g, server, client, ctx)
    # Correction adds c - c_i = (0.5, -2).
    torch.testing.assert_close(
        algo.correct_grads({"w": torch.zeros(2)}, start, carry)["w"], torch.tensor([0.5, -2.0])
    )
    y = {"w": torch.tensor([0.6, 1.4])}
    msg, new = algo.client_end(g, y, carry, client, ctx)
    # c_i+ = c_i - c + (x - y)/(K lr) = (0,2) - (0.5,0) + (0.4,-0.4)/0.4 = (0.5, 1.0)
    torch.testing.assert_close(new["c"]["w"], torch.tensor([0.5, 1.0]))
    torch.testing.assert_close(msg["delta_c"]["w"], torch.tensor([0.5, -1.0]))
    torch.testing.assert_close(msg["delta"]["w"], torch.tensor([-0.4, 0.4]))


def test_masked_mean_ignores_padding():
    per = torch.tensor([1.0, 3.0, 100.0])
    assert masked_mean(per, torch.tensor([1.0, 1.0, 0.0])).item() == 2.0
    assert masked_mean(per, None).item() == pytest.approx(104 / 3)
    assert masked_mean(per, torch.zeros(3)).item() == 0.0


def test_fedavg_am_beta1_equals_fedavg_and_beta2_doubles_the_step(tiny):
    fedavg = _run(build_algorithm("fedavg"), tiny, CFG)
    _assert_same(_run(build_algorithm("fedavg_am", beta=1.0), tiny), fedavg)
    one = TrainConfig(rounds=1, batch_size=4, lr=0.1, local_epochs=1, clients_per_round=3)
    p0 = tiny[2]
    a = _run(build_algorithm("fedavg_am", beta=1.0), tiny, one).global_params
    b = _run(build_algorithm("fedavg_am", beta=2.0), tiny, one).global_params
    for k, v in p0.items():  # w + 2 mean(Δ) against w + mean(Δ), from the same client updates
        torch.testing.assert_close(b[k] - v, 2 * (a[k] - v))
    with pytest.raises(ValueError, match="beta"):
        build_algorithm("fedavg_am", beta=0.0)
