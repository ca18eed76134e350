"""APFL as the SuPerFed release runs it (`variant: superfed_code`): two optimisers by hand, the
release's loop transcribed, executors, and the grids that select it."""

import copy
import dataclasses
import math
from pathlib import Path

import pytest
import torch
import yaml
from torch import nn

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import ClientContext
from fedbench.config import resolve_run
from fedbench.engine.build import Run
from fedbench.engine.local import local_train_carry
from fedbench.engine.loop import run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.rng import Streams

ROOT = Path(__file__).resolve().parents[2]
CTX = ClientContext(client_id=0, round=1, lr=0.5, rounds=1, num_train=4, num_steps=2)
CFG = TrainConfig(
    rounds=3, batch_size=4, lr=0.1, local_epochs=2, clients_per_round=3, momentum=0.9,
    weight_decay=0.0,
)  # fmt: skip


def _logits(params, x):
    """A 'model' whose logits are its weight, whatever the input (gradients in closed form)."""
    return params["weight"].expand(len(x), -1)


def _softmax(z):
    e = [math.exp(v) for v in z]
    return [v / sum(e) for v in e]


def _onehot_mean(labels, n=3):
    return [sum(1.0 for y in labels if y == c) / len(labels) for c in range(n)]


def _linear(params, x):
    return x @ params["weight"].T


def _train(algo, apply, glob, local, x, y, batches, lr, momentum):
    """One client's round through fedbench's hooks and the engine's step loop (engine wd = 0)."""
    params, carry = algo.client_begin(glob, {}, {"local": local}, CTX)
    params, carry, _ = local_train_carry(
        algo, apply, params, carry, x, y, batches, lr, momentum, 0.0
    )
    return algo.client_end(glob, params, carry, {"local": local}, CTX)


def test_two_optimisers_two_steps_by_hand():
    # Release, per batch: w ← SGD(momentum μ, no decay) on CE(w); v ← SGD(momentum μ, decay wd)
    # on CE((1 - α) w_0 + α v), w_0 the federated model as the round began.
    lr, mu, wd, a = 0.5, 0.9, 0.1, 0.25
    w0, v0 = [0.0, 1.0, -1.0], [2.0, 0.0, 0.0]
    labels = [[0, 2], [1, 1]]
    w, v, bw, bv = list(w0), list(v0), [0.0] * 3, [0.0] * 3
    w_paper, v_paper, bwp, bvp = list(w0), list(v0), [0.0] * 3, [0.0] * 3
    for ys in labels:
        yb = _onehot_mean(ys)
        # Federated step: d CE / d z = softmax(z) - ȳ; the same in both readings.
        gw = [p - t for p, t in zip(_softmax(w), yb)]
        # Local step: d/dv CE(m) = α (softmax(m) - ȳ), plus wd v (torch SGD's weight_decay).
        m = [(1 - a) * p + a * q for p, q in zip(w0, v)]
        gv = [a * (p - t) + wd * q for p, t, q in zip(_softmax(m), yb, v)]
        bw = [mu * b + g for b, g in zip(bw, gw)]
        bv = [mu * b + g for b, g in zip(bv, gv)]
        # The paper's reading mixes with the current w (before this step).
        mp = [(1 - a) * p + a * q for p, q in zip(w_paper, v_paper)]
        gvp = [a * (p - t) + wd * q for p, t, q in zip(_softmax(mp), yb, v_paper)]
        gwp = [p - t for p, t in zip(_softmax(w_paper), yb)]
        bwp = [mu * b + g for b, g in zip(bwp, gwp)]
        bvp = [mu * b + g for b, g in zip(bvp, gvp)]
        w = [p - lr * b for p, b in zip(w, bw)]
        v = [p - lr * b for p, b in zip(v, bv)]
        w_paper = [p - lr * b for p, b in zip(w_paper, bwp)]
        v_paper = [p - lr * b for p, b in zip(v_paper, bvp)]

    f64 = torch.float64
    glob = {"weight": torch.tensor(w0, dtype=f64)}
    local = {"weight": torch.tensor(v0, dtype=f64)}
    x, y = torch.zeros(4, 1, dtype=f64), torch.tensor([0, 2, 1, 1])
    batches = [torch.tensor([0, 1]), torch.tensor([2, 3])]
    got = {}
    for variant in ("superfed_code", "paper"):
        algo = build_algorithm("apfl", alpha=a, variant=variant, local_weight_decay=wd)
        got[variant] = _train(algo, _logits, glob, local, x, y, batches, lr, mu)
    msg, state = got["superfed_code"]
    torch.testing.assert_close(msg["delta"]["weight"], torch.tensor(w, dtype=f64) - glob["weight"])
    torch.testing.assert_close(state["local"]["weight"], torch.tensor(v, dtype=f64))
    # The paper's reading: the same w, another v (its second mixture uses w_1, not w_0).
    msg_p, state_p = got["paper"]
    torch.testing.assert_close(msg_p["delta"]["weight"], msg["delta"]["weight"])
    torch.testing.assert_close(state_p["local"]["weight"], torch.tensor(v_paper, dtype=f64))
    assert (state_p["local"]["weight"] - state["local"]["weight"]).abs().max() > 1e-3


class _ReleaseLinear(nn.Linear):
    """The release's LinesLinear (src/models/layers.py): weight (1 - lam) W + lam W_local."""

    def __init__(self, w, w_local):
        super().__init__(w.shape[1], w.shape[0], bias=False, dtype=w.dtype)
        self.weight = nn.Parameter(w.clone())
        self.weight_local = nn.Parameter(w_local.clone())
        self.lam = 0.0

    def forward(self, x):
        return nn.functional.linear(x, (1 - self.lam) * self.weight + self.lam * self.weight_local)


def _release_apfl_update(model, batches, lr, alpha):
    """src/algorithm.py apfl_update (lines 335-448), the loop as released, on fixed batches."""
    model.lam = 0.0
    for name, p in model.named_parameters():
        p.requires_grad = "local" not in name
    global_optimizer = torch.optim.SGD(
        [p for n, p in model.named_parameters() if "local" not in n], lr=lr, momentum=0.9
    )
    personalized_model = copy.deepcopy(model)
    personalized_model.lam = alpha
    for name, p in personalized_model.named_parameters():
        p.requires_grad = "local" in name
    local_optimizer = torch.optim.SGD(
        [p for n, p in personalized_model.named_parameters() if "local" in n],
        lr=lr, momentum=0.9, weight_decay=1e-4,
    )  # fmt: skip
    for inputs, targets in batches:
        global_loss = nn.CrossEntropyLoss()(model(inputs), targets)
        for p in model.parameters():
            p.grad = None
        global_loss.backward()
        global_optimizer.step()
        local_loss = nn.CrossEntropyLoss()(personalized_model(inputs), targets)
        for p in personalized_model.parameters():
            p.grad = None
        local_loss.backward()
        local_optimizer.step()
    state = model.state_dict()
    state.update({k: v for k, v in personalized_model.state_dict().items() if "local" in k})
    return state


def test_matches_the_release_loop_transcribed():
    # Two epochs of three batches on a bias-free linear layer, lr large enough that the round-start
    # anchor and the decays matter; fedbench's catalog entry `apfl-sf` settings.
    g = torch.Generator().manual_seed(3)
    f64 = torch.float64
    w0 = torch.randn(3, 4, generator=g, dtype=f64)
    v0 = torch.randn(3, 4, generator=g, dtype=f64)
    x = torch.randn(12, 4, generator=g, dtype=f64)
    y = torch.randint(0, 3, (12,), generator=g)
    order = [torch.arange(0, 4), torch.arange(4, 8), torch.arange(8, 12)]
    order = order + [o.flip(0) for o in reversed(order)]
    lr, alpha = 0.3, 0.25
    ref = _release_apfl_update(_ReleaseLinear(w0, v0), [(x[i], y[i]) for i in order], lr, alpha)
    algo = build_algorithm("apfl", alpha=alpha, variant="superfed_code", local_weight_decay=1e-4)
    msg, state = _train(algo, _linear, {"weight": w0}, {"weight": v0}, x, y, order, lr, 0.9)
    torch.testing.assert_close(w0 + msg["delta"]["weight"], ref["weight"], rtol=0, atol=1e-12)
    torch.testing.assert_close(state["local"]["weight"], ref["weight_local"], rtol=0, atol=1e-12)
    # Not the paper's reading, nor the release's with the decay on both models.
    for kw in ({"variant": "paper", "local_weight_decay": 1e-4}, {"variant": "superfed_code"}):
        other = build_algorithm("apfl", alpha=alpha, **kw)
        _, st = _train(other, _linear, {"weight": w0}, {"weight": v0}, x, y, order, lr, 0.9)
        assert (st["local"]["weight"] - ref["weight_local"]).abs().max() > 1e-9


def test_federated_model_is_fedavg_without_decay(tiny):
    # The federated model never sees v: FedAvg at the run's (zero) decay, in either reading; the
    # readings' local models differ (the mixture's w).
    fed, apply, p0 = tiny
    cfg = dataclasses.replace(CFG, rounds=2, eval_every=2)
    fedavg, *apfl = (
        run_rounds(Run(build_algorithm(name, **kw), apply, cfg, p0, "sequential"), fed, Streams(5))
        for name, kw in (
            ("fedavg", {}),
            ("apfl", {"variant": "superfed_code", "local_weight_decay": 1e-3}),
            ("apfl", {"variant": "paper", "local_weight_decay": 1e-3}),
        )
    )  # fmt: skip
    for run in apfl:
        for k, v in fedavg.global_params.items():
            torch.testing.assert_close(run.global_params[k], v, rtol=0, atol=1e-6)
    code, paper = apfl
    diff = max(
        (code.client_states[c]["local"][k] - paper.client_states[c]["local"][k]).abs().max()
        for c in code.client_states
        for k in p0
    )
    assert diff > 1e-5


def test_sequential_and_vectorised_agree(tiny, assert_executors_agree):
    fed, apply, p0 = tiny
    fed.train[1] = fed.train[1][:5]  # fewer steps and a short last batch (padded under vmap)
    fed.train[2] = fed.train[2][:2]
    algo = build_algorithm("apfl", variant="superfed_code", local_weight_decay=1e-2)
    seq, vec = (
        run_rounds(Run(algo, apply, CFG, p0, executor=ex), fed, Streams(8))
        for ex in ("sequential", "vectorised")
    )
    assert_executors_agree(seq, vec)
    assert seq.client_states.keys() == vec.client_states.keys()
    for c, state in seq.client_states.items():
        for k, v in state["local"].items():
            torch.testing.assert_close(v, vec.client_states[c]["local"][k], rtol=0, atol=1e-5)


def test_options_are_checked():
    with pytest.raises(ValueError, match="variant"):
        build_algorithm("apfl", variant="code")
    with pytest.raises(ValueError, match="adaptive_alpha"):
        build_algorithm("apfl", variant="superfed_code", adaptive_alpha=True)
    with pytest.raises(ValueError, match="local_weight_decay"):
        build_algorithm("apfl", local_weight_decay=-1.0)


def _grid_apfl_algorithms(paper: str) -> set[str]:
    """The algorithm names of every `apfl*` row of a paper grid, wherever it appears."""
    found: set[str] = set()

    def walk(node):
        if isinstance(node, dict):
            if str(node.get("id", "")).startswith("apfl") and "algorithm" in node:
                algo = node["algorithm"]
                found.update(algo.values() if isinstance(algo, dict) else [algo])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(yaml.safe_load((ROOT / "config" / "papers" / f"{paper}.yaml").read_text()))
    return found


@pytest.mark.parametrize(
    "paper, cell",
    [
        ("superfed", ("mnist", "superfed-patho-k500", "superfed-twonn")),
        ("superfed_quick", ("fmnist", "sfq-patho-k50", "superfed-twonn")),
    ],
)
def test_superfed_grids_select_the_release(paper, cell, catalog):
    # Every APFL row of the SuPerFed grids runs the release: its split decay needs the engine's
    # weight decay at 0 (resolved last, from the algorithm's training block) and 1e-4 on v.
    names = _grid_apfl_algorithms(paper)
    assert names == {"apfl-sf"}
    spec = resolve_run(catalog, "paper", *cell, "apfl-sf", 0)
    assert spec["algorithm"]["params"]["variant"] == "superfed_code"
    assert spec["algorithm"]["params"]["local_weight_decay"] == pytest.approx(1e-4)
    assert spec["training"]["weight_decay"] == 0.0
    assert spec["training"]["momentum"] == pytest.approx(0.9)
    # The paper's reading stays in the catalog under its own name.
    assert catalog["algorithms"]["apfl"]["variant"] == "paper"
    for name, entry in catalog["algorithms"].items():
        if entry.get("algorithm") == "apfl" and entry.get("variant") == "superfed_code":
            assert entry.get("training", {}).get("weight_decay") == 0.0, name
