"""FedEM: M = 1 is FedAvg; the E-step, the weighted component loss and the π update by hand."""

import math

import pytest
import torch

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import Batch, ClientContext
from fedbench.engine.build import Run
from fedbench.engine.loop import run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.models import build_model
from fedbench.rng import Streams

CFG = TrainConfig(rounds=2, batch_size=4, lr=0.1, local_epochs=1, clients_per_round=3)
CTX = ClientContext(client_id=0, round=1, lr=0.1, rounds=3, num_train=2, num_steps=1)


def _logits(params, x):
    """A 'model' whose logits are its weight, whatever the input (gradients in closed form)."""
    return params["weight"].expand(len(x), -1)


def _fresh(i):
    model = build_model("mlp", (6,), 3, init_seed=100 + i, hidden=5)
    return {k: v.detach().clone() for k, v in model.named_parameters()}


def test_one_component_is_fedavg(tiny):
    fed, apply, p0 = tiny
    em = run_rounds(Run(build_algorithm("fedem", components=1), apply, CFG, p0), fed, Streams(3))
    avg = run_rounds(Run(build_algorithm("fedavg"), apply, CFG, p0), fed, Streams(3))
    for k, v in avg.global_params.items():
        torch.testing.assert_close(em.global_params["m0." + k], v, rtol=0, atol=1e-6)
    # A one-component mixture predicts as its component: every client's personal metrics are
    # FedAvg's global-model metrics.
    for a, b in zip(em.records, avg.records):
        for metric in ("top1", "loss"):
            got = a["clients"]["personal"][metric]
            assert got == pytest.approx(b["clients"]["global"][metric], abs=1e-5)


def test_mixture_model_is_log_of_weighted_probabilities():
    algo = build_algorithm("fedem", components=2)
    w0, w1 = torch.tensor([1.0, 0.0, -1.0]), torch.tensor([0.0, 2.0, 0.0])
    params = {"m0.weight": w0, "m1.weight": w1, "mix.pi": torch.tensor([0.25, 0.75])}
    out = algo.model(_logits)(params, torch.zeros(2, 1))
    e0, e1 = [math.exp(v) for v in w0.tolist()], [math.exp(v) for v in w1.tolist()]
    expected = [0.25 * a / sum(e0) + 0.75 * b / sum(e1) for a, b in zip(e0, e1)]
    torch.testing.assert_close(out.exp(), torch.tensor([expected, expected]))


def test_e_step_weighted_loss_and_pi_by_hand():
    algo = build_algorithm("fedem", components=2)
    w0, w1 = torch.tensor([0.0, 0.0]), torch.tensor([math.log(3.0), 0.0])
    glob = {"m0.weight": w0, "m1.weight": w1, "mix.pi": torch.tensor([0.5, 0.5])}
    state = {"pi": torch.tensor([0.6, 0.4])}
    params, carry = algo.client_begin(glob, {}, state, CTX)
    batch = Batch(torch.zeros(2, 1), torch.tensor([0, 1]))
    # p_0(y) = (1/2, 1/2); p_1(y=0) = 3/4, p_1(y=1) = 1/4.
    # sample y=0: q ∝ (0.6·0.5, 0.4·0.75) = (0.3, 0.3) -> (1/2, 1/2)
    # sample y=1: q ∝ (0.6·0.5, 0.4·0.25) = (0.3, 0.1) -> (3/4, 1/4)
    q = torch.tensor([[0.5, 0.75], [0.5, 0.25]])  # [m, sample]
    loss_fn = lambda p: algo.local_loss(algo.model(_logits), p, batch, carry, None)  # noqa: E731
    p = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    loss = loss_fn(p)
    nll = torch.tensor([[math.log(2), math.log(2)], [math.log(4 / 3), math.log(4)]])
    torch.testing.assert_close(loss, (q * nll).sum() / 2)
    grads = dict(zip(p, torch.autograd.grad(loss, list(p.values()))))
    # d CE / d logits = softmax - onehot, weighted by q and averaged over the 2 samples.
    soft = {0: torch.tensor([0.5, 0.5]), 1: torch.tensor([0.75, 0.25])}
    onehot = torch.eye(2)
    for m in (0, 1):
        expected = sum(q[m, i] * (soft[m] - onehot[i]) for i in range(2)) / 2
        torch.testing.assert_close(grads[f"m{m}.weight"], expected)
    torch.testing.assert_close(grads["mix.acc"], -q.sum(dim=1))
    # After one SGD step of lr 0.1 the accumulator holds 0.1·Σq; π_i = its normalisation.
    trained = {k: v - 0.1 * grads[k] for k, v in params.items()}
    message, new_state = algo.client_end(glob, trained, carry, state, CTX)
    torch.testing.assert_close(new_state["pi"], torch.tensor([1.25, 0.75]) / 2)
    torch.testing.assert_close(message["delta"]["m1.weight"], -0.1 * grads["m1.weight"])


def test_components_start_apart_and_pi_starts_uniform(tiny):
    _, _, p0 = tiny
    algo = build_algorithm("fedem", components=3)
    g = algo.init_global(p0, _fresh, torch.Generator(), 4)
    for k, v in p0.items():
        torch.testing.assert_close(g["m0." + k], v)
        assert not torch.equal(g["m1." + k], g["m2." + k])
    torch.testing.assert_close(g["mix.pi"], torch.full((3,), 1 / 3))


def test_bad_component_count_names_the_key():
    with pytest.raises(ValueError, match="components"):
        build_algorithm("fedem", components=0)


def test_sequential_and_vectorised_agree(tiny, assert_executors_agree):
    fed, apply, p0 = tiny
    fed.train[1] = fed.train[1][:5]  # fewer steps and a short last batch (padded under vmap)
    algo = build_algorithm("fedem", components=2)
    seq, vec = (
        run_rounds(Run(algo, apply, CFG, p0, executor=ex, fresh_init=_fresh), fed, Streams(8))
        for ex in ("sequential", "vectorised")
    )
    assert_executors_agree(seq, vec)
    for c, state in seq.client_states.items():
        torch.testing.assert_close(state["pi"], vec.client_states[c]["pi"], rtol=0, atol=1e-5)


def test_fedem_refuses_other_objectives_naming_the_key(tiny):
    """Its E-step and mixture are softmax likelihoods: a non-CE objective is an error, not a
    silently ignored setting, both at run start and when the workflow resolves a run."""
    import dataclasses

    from fedbench.config import ConfigError, load_catalog, resolve_run

    fed, apply, p0 = tiny
    algo = build_algorithm("fedem", components=2)
    assert algo.objectives == ("cross_entropy",)
    with pytest.raises(ValueError, match=r"training\.objective.*'bce_logit'.*fedem"):
        run_rounds(
            Run(algo, apply, dataclasses.replace(CFG, objective="bce_logit"), p0), fed, Streams(3)
        )
    # The catalog: FedEM on a dataset whose runs train with bce_logit fails naming both.
    catalog = load_catalog("config/config.yaml")
    catalog["algorithms"]["fedem-test"] = {"algorithm": "fedem"}
    cell = ("smoke", "aaggff-heart", "aaggff-natural-silo", "aaggff-logreg")
    assert resolve_run(catalog, *cell, "fedavg", 0)["training"]["objective"] == "bce_logit"
    with pytest.raises(ConfigError, match=r"training\.objective.*'bce_logit'.*fedem-test"):
        resolve_run(catalog, *cell, "fedem-test", 0)
