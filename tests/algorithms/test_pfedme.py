"""pFedMe: both variants against literal loops of their descriptions; μ = 0; θ^f in the carry."""

import pytest
import torch

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import Batch, ClientContext
from fedbench.algorithms.fedprox import prox_term
from fedbench.algorithms.pfedme import write_term
from fedbench.engine.batches import batch_plan
from fedbench.engine.build import Run
from fedbench.engine.functional import sgd_init, sgd_step
from fedbench.engine.local import local_train_carry
from fedbench.engine.loop import run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.rng import Streams

LR, MOM, WD = 0.1, 0.9, 1e-3


def _grads(apply, x, y, p, anchor, mu, form):
    """Gradient of CE(p) + mu * prox(p, anchor) on one batch, by plain autograd."""
    q = {k: v.clone().requires_grad_(True) for k, v in p.items()}
    loss = torch.nn.functional.cross_entropy(apply(q, x), y) + mu * prox_term(q, anchor, form)
    return dict(zip(q, torch.autograd.grad(loss, list(q.values()))))


def _train_one_client(algo, tiny, epochs):
    """The algorithm's hooks through the engine's local loop for client 0 of the tiny federation."""
    fed, apply, p0 = tiny
    plan = batch_plan(fed.train[0], 4, Streams(2).generator("batches", 1, 0), epochs=epochs)
    ctx = ClientContext(0, 1, LR, 1, num_train=9, num_steps=len(plan), steps_per_epoch=3)
    state = algo.init_client_state(0, p0, None)
    params, carry = algo.client_begin(p0, {}, state, ctx)
    noise = algo.step_noise(None, ctx, p0)
    args = (fed.x, fed.y, plan, LR, MOM, WD, noise)
    params, carry, _ = local_train_carry(algo, apply, params, carry, *args)
    message, state = algo.client_end(p0, params, carry, state, ctx)
    return plan, {k: p0[k] + d for k, d in message["delta"].items()}, state


@pytest.mark.parametrize("prox", ["layer_norm", "squared"])
def test_code_variant_equals_literal_description(prox, tiny):
    # θ^l: SGD on CE + mu * prox(θ^l, θ^f), θ^f constant within an epoch; after each epoch
    # θ^f <- θ^f - lr * mu * (θ^f - θ^l); θ^f is sent. Three epochs: two slots and the final one.
    fed, apply, p0 = tiny
    mu = 2.0
    algo = build_algorithm("pfedme", mu=mu, prox=prox, eval="local")
    plan, sent, state = _train_one_client(algo, tiny, epochs=3)
    loc, f, buf = dict(p0), dict(p0), sgd_init(p0)
    for e in range(3):
        for idx in plan[3 * e : 3 * e + 3]:
            grads = _grads(apply, fed.x[idx], fed.y[idx], loc, f, mu, prox)
            loc, buf = sgd_step(loc, grads, buf, LR, MOM, WD)
        f = {k: f[k] - LR * mu * (f[k] - loc[k]) for k in f}
    for k in p0:
        torch.testing.assert_close(state["local"][k], loc[k], rtol=0, atol=1e-6)
        torch.testing.assert_close(sent[k], f[k], rtol=0, atol=1e-6)


def test_paper_variant_equals_literal_algorithm(tiny):
    # Alg. 1: per batch, θ̃ = K gradient steps on f(θ) + (λ/2)||θ - w||² from w; then w takes the
    # (engine's SGD) step on λ (w - θ̃). The personalised model is the last step's θ̃.
    fed, apply, p0 = tiny
    mu, K, ilr = 3.0, 3, 0.05
    algo = build_algorithm(
        "pfedme", mu=mu, variant="paper", eval="local", inner_steps=K, inner_lr=ilr
    )
    plan, sent, state = _train_one_client(algo, tiny, epochs=1)
    w, buf = dict(p0), sgd_init(p0)
    for idx in plan:
        theta = dict(w)
        for _ in range(K):
            g = _grads(apply, fed.x[idx], fed.y[idx], theta, w, mu, "squared")
            theta = {k: theta[k] - ilr * g[k] for k in theta}
        w, buf = sgd_step(w, {k: mu * (w[k] - theta[k]) for k in w}, buf, LR, MOM, WD)
    for k in p0:
        torch.testing.assert_close(sent[k], w[k], rtol=0, atol=1e-6)
        torch.testing.assert_close(state["local"][k], theta[k], rtol=0, atol=1e-6)


def test_mu0_global_frozen_and_local_models_are_fedavg_clients(tiny):
    # Nearest exact identity: with mu = 0, θ^f never moves (so the global model stays at the
    # init) and each θ^l is FedAvg's local training from the global model, so the n-weighted
    # mean of round 1's local models (all clients, equal n) is FedAvg's round-1 global model.
    fed, apply, p0 = tiny
    cfg = TrainConfig(
        rounds=1, batch_size=4, lr=LR, local_epochs=2, clients_per_round=4, momentum=MOM,
        weight_decay=WD,
    )  # fmt: skip
    a = run_rounds(
        Run(build_algorithm("pfedme", mu=0.0, eval="local"), apply, cfg, p0), fed, Streams(1)
    )
    b = run_rounds(Run(build_algorithm("fedavg"), apply, cfg, p0), fed, Streams(1))
    for k, v in a.global_params.items():
        assert torch.equal(v, p0[k])
        mean_local = torch.stack([a.client_states[c]["local"][k] for c in range(4)]).mean(0)
        torch.testing.assert_close(mean_local, b.global_params[k], rtol=0, atol=1e-6)


def test_write_term_is_zero_with_the_given_gradient():
    # The paper variant's (and pFedBreD's) way to set a parameter's gradient: value 0, gradient
    # scale * value, value held constant.
    slot = {"s": torch.zeros(2, requires_grad=True), "t": torch.ones(1, requires_grad=True)}
    value = {"s": torch.tensor([1.5, -2.0]), "t": torch.tensor([4.0])}
    loss = write_term(slot, value, 0.5)
    assert loss.item() == 0.0
    gs, gt = torch.autograd.grad(loss, [slot["s"], slot["t"]])
    torch.testing.assert_close(gs, torch.tensor([0.75, -1.0]))
    torch.testing.assert_close(gt, torch.tensor([2.0]))


def test_code_schedule_carry_and_final_update_by_hand():
    algo = build_algorithm("pfedme", mu=2.0)
    assert algo.carry_updates
    ctx = ClientContext(0, 1, 0.1, 3, num_train=4, num_steps=6, steps_per_epoch=2)
    # Three epochs of two steps: θ^f is updated first at step 2 (epoch 2) and step 4 (epoch 3).
    assert algo.step_noise(None, ctx, {}).tolist() == [0, 0, 1, 0, 1, 0]
    one = ClientContext(0, 1, 0.1, 3, num_train=4, num_steps=2, steps_per_epoch=2)
    assert algo.step_noise(None, one, {}) is None
    g = {"weight": torch.tensor([1.0, 1.0])}
    params, carry = algo.client_begin(g, {}, {}, ctx)
    assert sorted(params) == ["loc.weight"] and sorted(carry) == ["fed", "lr"]
    assert carry["fed"]["weight"] is g["weight"]
    # Logits = the weight; one sample of label 0 (the data term plays no part in θ^f).
    apply = lambda q, x: q["weight"].expand(len(x), -1)  # noqa: E731
    batch = Batch(torch.zeros(1, 1), torch.tensor([0]))
    carry = {**carry, "fed": {"weight": torch.tensor([1.5, 0.5])}}
    loc = {"loc.weight": torch.tensor([3.0, 0.0], requires_grad=True)}
    # A step inside an epoch: θ^f unchanged; the prox pulls θ^l towards it.
    loss, new = algo.local_loss(apply, loc, batch, carry, torch.tensor(0.0))
    assert torch.equal(new["fed"]["weight"], torch.tensor([1.5, 0.5]))
    # The first step of an epoch: θ^f - lr * mu * (θ^f - θ^l) = (1.5, 0.5) - 0.2 * (-1.5, 0.5)
    # = (1.8, 0.4), already this step's prox target: the unsquared norm's gradient is
    # mu * (θ^l - θ^f) / ||θ^l - θ^f|| = 2 * (1.2, -0.4) / sqrt(1.6).
    loss, new = algo.local_loss(apply, loc, batch, carry, torch.tensor(1.0))
    torch.testing.assert_close(new["fed"]["weight"], torch.tensor([1.8, 0.4]))
    assert not new["fed"]["weight"].requires_grad
    (grad,) = torch.autograd.grad(loss, [loc["loc.weight"]])
    data = torch.softmax(torch.tensor([3.0, 0.0]), 0) - torch.tensor([1.0, 0.0])
    torch.testing.assert_close(grad, data + 2.0 * torch.tensor([1.2, -0.4]) / 1.6**0.5)
    # client_end: the last epoch's update from the carry's θ^f; θ^l = (3, 0):
    # (1.8, 0.4) - 0.2 * (-1.2, 0.4) = (2.04, 0.32); delta = (1.04, -0.68).
    trained = {"loc.weight": torch.tensor([3.0, 0.0])}
    message, state = algo.client_end(g, trained, {**carry, **new}, {}, ctx)
    torch.testing.assert_close(message["delta"]["weight"], torch.tensor([1.04, -0.68]))
    assert state == {}


@pytest.mark.parametrize("executor", ["sequential", "vectorised"])
def test_code_variant_round_equals_literal_description(executor, tiny):
    # One round of E = 3 epochs, every client, uneven sizes (3, 2 and 1 steps per epoch, short
    # last batches), momentum and weight decay: each client's θ^f by the literal description,
    # the new global model their n-weighted mean; θ^l is each client's personal model.
    fed, apply, p0 = tiny
    fed.train[1], fed.train[2] = fed.train[1][:5], fed.train[2][:2]
    mu, B, E = 2.0, 4, 3
    cfg = TrainConfig(
        rounds=1, batch_size=B, lr=LR, local_epochs=E, clients_per_round=4, momentum=MOM,
        weight_decay=WD,
    )  # fmt: skip
    algo = build_algorithm("pfedme", mu=mu, eval="local")
    got = run_rounds(Run(algo, apply, cfg, p0, executor=executor), fed, Streams(4))
    total = sum(len(fed.train[c]) for c in range(4))
    mean = {k: torch.zeros_like(v) for k, v in p0.items()}
    for c in range(4):
        n = len(fed.train[c])
        plan = batch_plan(fed.train[c], B, Streams(4).generator("batches", 1, c), epochs=E)
        per = -(-n // B)
        loc, f, buf = dict(p0), dict(p0), sgd_init(p0)
        for e in range(E):
            for idx in plan[per * e : per * (e + 1)]:
                grads = _grads(apply, fed.x[idx], fed.y[idx], loc, f, mu, "layer_norm")
                loc, buf = sgd_step(loc, grads, buf, LR, MOM, WD)
            f = {k: f[k] - LR * mu * (f[k] - loc[k]) for k in f}
        for k in p0:
            mean[k] += n / total * f[k]
            torch.testing.assert_close(got.client_states[c]["local"][k], loc[k], rtol=0, atol=1e-5)
    for k in p0:
        torch.testing.assert_close(got.global_params[k], mean[k], rtol=0, atol=1e-5)


def test_evaluation_protocols():
    g = {"weight": torch.tensor([1.0, 2.0])}
    code = build_algorithm("pfedme")
    assert code.init_client_state(0, g, None) == {}
    assert torch.equal(code.personal_params("personal", g, {})["weight"], g["weight"])
    local = build_algorithm("pfedme", eval="local")
    state = local.init_client_state(0, g, None)
    assert torch.equal(local.personal_params("personal", g, state)["weight"], g["weight"])
    state = {"local": {"weight": torch.tensor([7.0, 8.0])}}
    assert torch.equal(
        local.personal_params("personal", g, state)["weight"], torch.tensor([7.0, 8.0])
    )
    with pytest.raises(ValueError, match="local_epochs"):
        code.client_begin(g, {}, {}, ClientContext(0, 1, 0.1, 3, 4, num_steps=5))


def test_paper_envelope_gradient_by_hand():
    # Logits = the weight itself; K = 1 inner step from w = 0 with labels (0, 0), mu = 2:
    # θ̃ = 0 - 0.5 * (softmax(0) - e_0) = (1/3, -1/6, -1/6); d loss / d w = mu (w - θ̃).
    algo = build_algorithm("pfedme", variant="paper", mu=2.0, inner_steps=1, inner_lr=0.5)
    ctx = ClientContext(0, 1, 0.1, 3, num_train=2, num_steps=1, steps_per_epoch=1)
    params, carry = algo.client_begin({"weight": torch.zeros(3)}, {}, {}, ctx)
    p = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    batch = Batch(torch.zeros(2, 1), torch.tensor([0, 0]))
    loss, _ = algo.local_loss(lambda q, x: q["weight"].expand(len(x), -1), p, batch, carry, None)
    (g,) = torch.autograd.grad(loss, [p["fed.weight"]])
    torch.testing.assert_close(g, -2.0 * torch.tensor([1 / 3, -1 / 6, -1 / 6]))


def test_paper_envelope_sent_for_gce_by_hand():
    # As above with eval local and one step of lr 0.1: w = 0 - 0.1 * 2 (0 - θ̃) = θ̃ / 5, so the
    # envelope gradient at the final w is 2 (θ̃/5 - θ̃) = -1.6 θ̃ = (-8/15, 4/15, 4/15).
    algo = build_algorithm(
        "pfedme", variant="paper", eval="local", mu=2.0, inner_steps=1, inner_lr=0.5
    )
    apply = lambda q, x: q["weight"].expand(len(x), -1)  # noqa: E731
    g = {"weight": torch.zeros(3)}
    ctx = ClientContext(0, 1, 0.1, 3, num_train=2, num_steps=1, steps_per_epoch=1)
    state = algo.init_client_state(0, g, None)
    params, carry = algo.client_begin(g, {}, state, ctx)
    x, y, plan = torch.zeros(2, 1), torch.tensor([0, 0]), [torch.tensor([0, 1])]
    noise = algo.step_noise(None, ctx, g)
    params, carry, _ = local_train_carry(
        algo, apply, params, carry, x, y, plan, 0.1, 0.0, 0.0, noise
    )
    message, _ = algo.client_end(g, params, carry, state, ctx)
    torch.testing.assert_close(
        message["envelope"]["weight"], torch.tensor([-8 / 15, 4 / 15, 4 / 15])
    )
    # Without a personal model (eval code) there is no θ̃ to send.
    plain = build_algorithm("pfedme", variant="paper", mu=2.0, inner_steps=1, inner_lr=0.5)
    params, carry = plain.client_begin(g, {}, {}, ctx)
    params, carry, _ = local_train_carry(plain, apply, params, carry, x, y, plan, 0.1, 0.0, 0.0)
    assert "envelope" not in plain.client_end(g, params, carry, {}, ctx)[0]


def test_server_logs_the_gce_of_the_envelopes():
    from fedbench.algorithms.base import ServerContext

    algo = build_algorithm("pfedme", variant="paper", eval="local")
    g = {"a": torch.zeros(1), "b": torch.zeros(1)}
    messages = {
        "delta": {"a": torch.zeros(2, 1), "b": torch.zeros(2, 1)},
        "weight": torch.tensor([1.0, 1.0]),
        # Flattened rows (1, 0) and (1, 1): G = [[1, 1], [1, 2]], GCE = 1 - 1/2.
        "envelope": {"a": torch.tensor([[1.0], [1.0]]), "b": torch.tensor([[0.0], [1.0]])},
    }
    ctx = ServerContext(round=1, num_clients=4, client_ids=(0, 1), lr=0.1)
    _, server = algo.aggregate(g, messages, {}, ctx)
    assert algo.server_metrics(server) == {"gce": pytest.approx(0.5)}
    # All 3 clients trained, rows (1, 0), (1, 1), (0, 1): G = [[1, 1, 0], [1, 2, 1], [0, 1, 1]]
    # is singular (row 2 = row 1 + row 3), so GCE over all of them is 1; the sampled keep 0.5.
    trained = {
        "envelope": {
            "a": torch.tensor([[1.0], [1.0], [0.0]]),
            "b": torch.tensor([[0.0], [1.0], [1.0]]),
        }
    }
    ctx_all = ServerContext(1, 4, (0, 1), 0.1, trained_ids=(0, 1, 2), trained=trained)
    _, server = algo.aggregate(g, messages, {}, ctx_all)
    assert algo.server_metrics(server) == {"gce": pytest.approx(0.5), "gce_all": pytest.approx(1.0)}
    del messages["envelope"]
    assert algo.server_metrics(algo.aggregate(g, messages, {}, ctx)[1]) == {}


def test_train_all_trains_every_client_but_aggregates_the_sampled(tiny):
    from fedbench.engine.loop import run_rounds
    from fedbench.engine.train_config import TrainConfig
    from fedbench.rng import Streams

    fed, apply, p0 = tiny
    cfg = TrainConfig(rounds=1, batch_size=4, lr=0.1, local_epochs=1, clients_per_round=2)
    kw = {"variant": "paper", "eval": "local", "mu": 1.0}
    some = run_rounds(Run(build_algorithm("pfedme", **kw), apply, cfg, p0), fed, Streams(1))
    every = run_rounds(
        Run(build_algorithm("pfedme", train_all=True, **kw), apply, cfg, p0), fed, Streams(1)
    )
    for k in p0:  # the same sampled clients' messages reach the server
        torch.testing.assert_close(every.global_params[k], some.global_params[k])
    moved = lambda st, i: any(  # noqa: E731
        not torch.equal(st.client_states[i]["local"][k], p0[k]) for k in p0
    )
    assert sum(moved(some, i) for i in range(fed.num_clients)) == 2
    assert all(moved(every, i) for i in range(fed.num_clients))


def test_ft_takes_one_sgd_step_on_a_training_batch_for_evaluation_only():
    # Logits = the weight itself; one sample of label 0: gradient softmax(w) - e_0.
    apply = lambda p, x: p["weight"].expand(len(x), -1)  # noqa: E731
    algo = build_algorithm("pfedme", eval="local", ft=True, ft_lr=0.5)
    assert algo.eval_batches("personal") == 1 and algo.eval_batches("global") == 0
    w = {"weight": torch.zeros(2)}
    out = algo.tune_for_eval("personal", apply, w, [Batch(torch.zeros(1, 1), torch.tensor([0]))])
    torch.testing.assert_close(out["weight"], torch.tensor([0.25, -0.25]))
    assert w["weight"].tolist() == [0.0, 0.0]
    assert build_algorithm("pfedme").eval_batches("personal") == 0


def test_paper_variant_one_inner_step_of_lr_1_over_mu_is_fedavg(tiny):
    """The nearest exact identity to "K = 0" for the paper variant (pFedBreD's pFedMe): with one
    inner step of α = 1/λ from w, θ̃ = w - ∇f(w)/λ, so w - lr λ (w - θ̃) = w - lr ∇f(w): FedAvg's
    plain SGD step, step for step (here with every client training and the sampled ones
    aggregated, as in pFedBreD's release). α = 0.4/λ breaks it, so the test can fail."""
    fed, apply, p0 = tiny
    cfg = TrainConfig(rounds=2, batch_size=4, lr=0.1, local_epochs=2, clients_per_round=2)
    fedavg = run_rounds(Run(build_algorithm("fedavg"), apply, cfg, p0), fed, Streams(2))
    for inner_lr, same in ((0.25, True), (0.1, False)):
        algo = build_algorithm(
            "pfedme", variant="paper", mu=4.0, inner_steps=1, inner_lr=inner_lr, train_all=True
        )
        got = run_rounds(Run(algo, apply, cfg, p0), fed, Streams(2))
        close = all(
            torch.allclose(got.global_params[k], fedavg.global_params[k], rtol=0, atol=1e-6)
            for k in p0
        )
        assert close == same
