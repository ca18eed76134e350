"""Per-FedAvg: the first-order step by hand on a quadratic, α = 0 as FedAvg, the batch split."""

import pytest
import torch
from torch.func import grad

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import Batch
from fedbench.algorithms.perfedavg import halves
from fedbench.engine.build import Run
from fedbench.engine.loop import run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.rng import Streams


class Quadratic:
    """f(w; D) = mean_{x∈D} (1/2)‖w - x‖²: ∇f(w; D) = w - mean(D), in closed form."""

    def loss(self, params, batch, weights):
        per = 0.5 * ((params["w"] - batch.x) ** 2).sum(dim=1)
        return (per * weights).sum() / weights.sum()


def test_first_order_step_matches_its_formula_on_a_quadratic(monkeypatch):
    import fedbench.algorithms.perfedavg as mod

    q = Quadratic()
    monkeypatch.setattr(mod, "weighted_loss", lambda apply, p, b, wts: q.loss(p, b, wts))
    alpha = 0.3
    algo = build_algorithm("perfedavg", alpha=alpha)
    w = torch.tensor([1.0, -2.0])
    x = torch.tensor([[0.0, 0.0], [2.0, 2.0], [4.0, -2.0], [-2.0, 6.0]])
    batch = Batch(x, torch.zeros(4, dtype=torch.long))
    g = grad(lambda p: algo.local_loss(None, p, batch, {}, None))({"w": w})["w"]
    # D = first two samples (mean m1 = (1, 1)), D' = last two (mean m2 = (1, 2)).
    # w' = w - α(w - m1) = (1, -2) - 0.3 (0, -3) = (1, -1.1); FO gradient = w' - m2 = (0, -3.1).
    # (The exact MAML gradient would carry the factor (1 - α): (0, -2.17).)
    torch.testing.assert_close(g, torch.tensor([0.0, -3.1]))


def test_halves_split_real_samples_alike_with_and_without_padding():
    y = torch.zeros(5, dtype=torch.long)
    first, second = halves(Batch(torch.zeros(5, 1), y))
    assert first.tolist() == [1, 1, 1, 0, 0] and second.tolist() == [0, 0, 0, 1, 1]
    # The same 5 real samples padded to 8 under vmap: the same split, padding excluded.
    mask = torch.tensor([1, 1, 1, 1, 1, 0, 0, 0], dtype=torch.float32)
    first, second = halves(Batch(torch.zeros(8, 1), torch.zeros(8, dtype=torch.long), mask))
    assert first.tolist() == [1, 1, 1, 0, 0, 0, 0, 0]
    assert second.tolist() == [0, 0, 0, 1, 1, 0, 0, 0]
    # One sample: both steps use it.
    first, second = halves(Batch(torch.zeros(1, 1), torch.zeros(1, dtype=torch.long)))
    assert first.tolist() == second.tolist() == [1]


def test_alpha0_gradient_is_fedavg_gradient_on_the_second_half(tiny):
    fed, apply, p0 = tiny
    idx = fed.train[0][:6]
    batch = Batch(fed.x[idx], fed.y[idx])
    algo, fedavg = build_algorithm("perfedavg", alpha=0.0), build_algorithm("fedavg")
    got = grad(lambda p: algo.local_loss(apply, p, batch, {}, None))(p0)
    want = grad(lambda p: fedavg.data_loss(apply, p, Batch(batch.x[3:], batch.y[3:])))(p0)
    for k in p0:
        torch.testing.assert_close(got[k], want[k])


def test_alpha0_with_one_sample_batches_is_fedavg(tiny):
    # With b = 1 both halves are the batch itself, so α = 0 is FedAvg step for step.
    fed, apply, p0 = tiny
    cfg = TrainConfig(rounds=2, batch_size=1, lr=0.1, local_epochs=1, clients_per_round=3)
    a, b = (
        run_rounds(Run(build_algorithm(n, **kw), apply, cfg, p0), fed, Streams(3))
        for n, kw in (("perfedavg", {"alpha": 0.0}), ("fedavg", {}))
    )
    for k, v in a.global_params.items():
        torch.testing.assert_close(v, b.global_params[k], rtol=0, atol=1e-6)


def _one_round(tiny, **kw):
    fed, apply, p0 = tiny
    cfg = TrainConfig(rounds=1, batch_size=4, lr=0.1, local_epochs=1, clients_per_round=3)
    return run_rounds(Run(build_algorithm("perfedavg", **kw), apply, cfg, p0), fed, Streams(3))


def test_alpha_changes_the_run(tiny):
    a, b = _one_round(tiny, alpha=0.0), _one_round(tiny, alpha=0.5)
    assert any((v - b.global_params[k]).abs().max() > 1e-4 for k, v in a.global_params.items())


def test_server_beta_scales_the_averaged_update(tiny):
    p0 = tiny[2]
    one, two = _one_round(tiny, server_beta=1.0), _one_round(tiny, server_beta=2.0)
    for k, v in p0.items():
        torch.testing.assert_close(two.global_params[k] - v, 2 * (one.global_params[k] - v))


def test_personalise_takes_eval_steps_sgd_steps_from_the_global_model():
    algo = build_algorithm("perfedavg", eval_steps=2, eval_lr=0.5)
    # Logits = the weight itself: CE gradient = softmax(w) - onehot(y), averaged over the batch.
    apply = lambda p, x: p["weight"].expand(len(x), -1)  # noqa: E731
    w0 = {"weight": torch.zeros(2)}
    # One engine batch of two samples: step 1 uses its first half (y = 0), step 2 its second.
    batch = Batch(torch.zeros(2, 1), torch.tensor([0, 1]))
    out = algo.personalise(apply, w0, [batch])["weight"]
    # Step 1: softmax(0) - e0 = (-0.5, 0.5) -> w1 = (0.25, -0.25).
    # Step 2: softmax(w1) - e1 = (s, -s) with s = sigmoid(0.5) -> w2 = w1 - 0.5 (s, -s).
    s = torch.sigmoid(torch.tensor(0.5))
    torch.testing.assert_close(out, torch.stack([0.25 - 0.5 * s, -0.25 + 0.5 * s]))
    assert w0["weight"].tolist() == [0.0, 0.0]
    # Three steps need two engine batches; the third step uses the second batch's first half.
    assert algo.eval_batches("personal") == 1
    three = build_algorithm("perfedavg", eval_steps=3, eval_lr=0.5)
    assert three.eval_batches("personal") == 2 and three.eval_batches("global") == 0
    out3 = three.personalise(apply, w0, [batch, Batch(torch.zeros(2, 1), torch.tensor([1, 0]))])
    s2 = torch.softmax(out, 0)  # step 3 from w2 on y = 1
    torch.testing.assert_close(out3["weight"], out - 0.5 * (s2 - torch.tensor([0.0, 1.0])))


def test_personal_protocol_is_the_global_model_tuned_on_train_batches(tiny):
    """The engine's P evaluation: personalise() on the client's own training batches, drawn
    from the eval stream; eval_steps = 0 gives the global model's metrics back."""
    from fedbench.engine.evaluate import evaluate_clients_each
    from fedbench.engine.loop import tuning_batches

    fed, apply, p0 = tiny
    cfg = TrainConfig(rounds=1, batch_size=4, lr=0.1, local_epochs=1, clients_per_round=3)
    streams = Streams(3)
    algo = build_algorithm("perfedavg", eval_steps=3, eval_lr=0.5)
    state = run_rounds(Run(algo, apply, cfg, p0), fed, streams)
    rec = state.records[-1]["clients"]
    assert set(rec) == {"global", "personal"}
    tuned = []
    for i in range(fed.num_clients):
        batches = tuning_batches(fed, streams, 1, i, 2, cfg.batch_size)
        tuned.append(algo.personalise(apply, state.global_params, batches))
    want = evaluate_clients_each(apply, tuned, fed.x, fed.y, fed.test, cfg.eval_batch_size)
    assert rec["personal"]["top1"] == pytest.approx(want["top1"], abs=1e-6)
    assert rec["personal"]["loss"] == pytest.approx(want["loss"], rel=1e-5)
    assert rec["personal"]["loss"] != pytest.approx(rec["global"]["loss"], rel=1e-3)
    none = build_algorithm("perfedavg", eval_steps=0)
    rec0 = run_rounds(Run(none, apply, cfg, p0), fed, Streams(3)).records[-1]["clients"]
    assert rec0["personal"]["loss"] == rec0["global"]["loss"]


def test_tuning_batches_come_from_the_clients_training_split(tiny):
    from fedbench.engine.loop import tuning_batches

    fed = tiny[0]
    for i in range(fed.num_clients):
        batches = tuning_batches(fed, Streams(0), 4, i, 3, 2)
        train_x = {tuple(r) for r in fed.x[fed.train[i]].flatten(1).tolist()}
        assert len(batches) == 3
        assert all(tuple(r) in train_x for b in batches for r in b.x.flatten(1).tolist())
    again = tuning_batches(fed, Streams(0), 4, 0, 3, 2)
    first = tuning_batches(fed, Streams(0), 4, 0, 3, 2)
    assert all(torch.equal(a.x, b.x) for a, b in zip(again, first))


@pytest.mark.parametrize(
    "kw, field",
    [
        ({"alpha": -0.1}, "alpha"),
        ({"server_beta": 0.0}, "server_beta"),
        ({"eval_steps": -1}, "eval_steps"),
        ({"eval_steps": 1.5}, "eval_steps"),
        ({"eval_lr": 0.0}, "eval_lr"),
    ],
)
def test_bad_hyperparameters_name_the_field(kw, field):
    with pytest.raises(ValueError, match=field):
        build_algorithm("perfedavg", **kw)
