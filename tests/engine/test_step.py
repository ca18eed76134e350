"""engine/step.py: the one definition of a local step (hook order, gradient, optimisers)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch.func import grad_and_value, vmap

from fedbench.algorithms.base import Algorithm, Batch
from fedbench.algorithms.opt_in import FrozenPasses, LocalSteps
from fedbench.engine.functional import make_apply, params_of
from fedbench.engine.local import _grad_and_value
from fedbench.engine.step import ClientOptimiser, make_step
from fedbench.models import build_model
from fedbench.testing import assert_executors_agree, train_tiny

CALLS: list[str] = []


@dataclass(frozen=True)
class Recording(LocalSteps, Algorithm):
    """FedAvg whose hooks say when they run; the loss adds (mu/2)||w||^2, the correction adds
    `shift` to every gradient and the mask freezes the biases."""

    name: ClassVar[str] = "recording"
    mu: float = 0.5
    shift: float = 0.25

    def before_step(self, apply, params, batch, carry, noise):
        CALLS.append("before_step")
        return {"seen": carry["seen"] + 1}

    def local_loss(self, apply, params, batch, carry, noise):
        CALLS.append("local_loss")
        reg = 0.5 * self.mu * sum((v**2).sum() for v in params.values())
        return self.data_loss(apply, params, batch) + reg

    def correct_grads(self, grads, params, carry):
        CALLS.append("correct_grads")
        return {k: g + self.shift for k, g in grads.items()}

    def update_mask(self, params, carry, noise):
        CALLS.append("update_mask")
        return {k: torch.zeros(()) for k in params if k.endswith("bias")}


def _net():
    model = build_model("mlp", (4,), 3, init_seed=3, hidden=5)
    return make_apply(model), params_of(model)


def _batch(n=6):
    gen = torch.Generator().manual_seed(0)
    return Batch(torch.randn(n, 4, generator=gen), torch.arange(n) % 3, None, None)


def test_the_hooks_run_in_the_documented_order():
    apply, p = _net()
    fns = make_step(Recording(), apply, _grad_and_value)
    CALLS.clear()
    carry = fns.prepare(p, _batch(), {"seen": 0}, None)
    fns.gradient(p, _batch(), carry, None)
    assert CALLS == ["before_step", "local_loss", "correct_grads", "update_mask"]
    assert carry == {"seen": 1}


def test_gradient_is_the_loss_gradient_corrected_with_the_mask():
    """By hand: d/dw [CE + (mu/2)||w||^2] = dCE/dw + mu w, then + shift; biases masked."""
    apply, p = _net()
    algo = Recording()
    batch = _batch()
    grads, loss, mask, new = make_step(algo, apply, _grad_and_value).gradient(p, batch, {}, None)
    leaves = {k: v.clone().requires_grad_() for k, v in p.items()}
    ce = torch.nn.functional.cross_entropy(apply(leaves, batch.x), batch.y)
    ce_grads = torch.autograd.grad(ce, list(leaves.values()))
    for (k, v), g_ce in zip(p.items(), ce_grads, strict=True):
        torch.testing.assert_close(grads[k], g_ce + algo.mu * v + algo.shift)
    expected = ce + 0.5 * algo.mu * sum((v**2).sum() for v in p.values())
    torch.testing.assert_close(loss, expected.detach())
    assert sorted(mask) == sorted(k for k in p if k.endswith("bias")) and new == {}


def test_both_differentiation_backends_give_one_step():
    """The sequential backend (autograd) and torch.func's, vmapped over two clients, agree."""
    apply, p = _net()
    algo = Recording()
    b1, b2 = _batch(6), Batch(_batch(6).x.flip(0), _batch(6).y, None, None)
    seq = [make_step(algo, apply, _grad_and_value).gradient(p, b, {}, None)[0] for b in (b1, b2)]
    fns = make_step(algo, apply, lambda f: grad_and_value(f, has_aux=True))

    def one(params, x, y):
        return fns.gradient(params, Batch(x, y, None, None), {}, None)[0]

    stacked = {k: torch.stack([v, v]) for k, v in p.items()}
    vec = vmap(one)(stacked, torch.stack([b1.x, b2.x]), torch.stack([b1.y, b2.y]))
    for k in p:
        torch.testing.assert_close(vec[k][0], seq[0][k], rtol=1e-6, atol=1e-7)
        torch.testing.assert_close(vec[k][1], seq[1][k], rtol=1e-6, atol=1e-7)


def test_client_optimiser_is_sgd_with_frozen_leaves():
    """Two SGD steps (lr 0.1): w <- w - 0.1 g for the unmasked leaves, masked ones unchanged,
    and the caller's dict keeps its leaves (in-place training after the first step)."""
    apply, p = _net()
    before = {k: v.clone() for k, v in p.items()}
    opt = ClientOptimiser(p, 0.1, 0.0, 0.0, None, in_place=True)
    params = opt.start(p)
    grads = {k: torch.ones_like(v) for k, v in p.items()}
    mask = {k: torch.zeros(()) for k in p if k.endswith("bias")}
    for step in range(2):
        params = opt.step(params, grads, mask, step)
    for k, v in params.items():
        want = before[k] if k.endswith("bias") else before[k] - 0.2
        torch.testing.assert_close(v, want)
        torch.testing.assert_close(p[k], before[k])  # the caller's leaves untouched


@dataclass(frozen=True)
class Passes(FrozenPasses, Algorithm):
    """Clients that only pass over their batches: each pass adds its batch's loss to the carry;
    the message is the delta (which must stay zero) and the mean pass loss."""

    name: ClassVar[str] = "passes"
    carry_updates: ClassVar[bool] = True

    def client_begin(self, global_params, server_state, client_state, ctx):
        zero = torch.zeros(())
        return dict(global_params), {"sum": zero, "count": zero, "loss": zero}

    def before_step(self, apply, params, batch, carry, noise):
        loss = self.data_loss(apply, params, batch).detach()
        return {"sum": carry["sum"] + loss, "count": carry["count"] + 1, "loss": loss}

    def local_loss(self, apply, params, batch, carry, noise):
        raise AssertionError("a pass never differentiates the local loss")

    def client_end(self, global_params, params, carry, client_state, ctx):
        delta = {k: params[k] - global_params[k] for k in params}
        return {"delta": delta, "mean": carry["sum"] / carry["count"]}, client_state

    def aggregate(self, global_params, messages, server_state, ctx):
        moved = max(float(v.abs().max()) for v in messages["delta"].values())
        return dict(global_params), {"moved": moved, "mean": messages["mean"]}


def test_a_frozen_pass_runs_before_step_alone_and_moves_nothing():
    """FrozenPasses: no gradient of the local loss (it raises), no optimiser step (momentum and
    weight decay would move every leaf), the logged loss the one before_step left."""
    runs = {
        ex: train_tiny(Passes(), ex, momentum=0.9, weight_decay=0.1)
        for ex in ("sequential", "vectorised")
    }
    for state in runs.values():
        assert state.server_state["moved"] == 0.0
        assert torch.isfinite(state.server_state["mean"]).all()
    assert_executors_agree(runs["sequential"], runs["vectorised"])


def test_a_marked_step_of_a_frozen_pass_algorithm_trains_masked():
    """`trains(noise)` a 0/1 mark: the step takes the local loss's gradient under that mask."""

    @dataclass(frozen=True)
    class Marked(FrozenPasses, Algorithm):
        name: ClassVar[str] = "marked"

        def trains(self, noise):
            return noise

    apply, p = _net()
    fns = make_step(Marked(), apply, _grad_and_value)
    assert fns.passes(False) and not fns.passes(torch.tensor(1.0))
    grads, loss, mask, _ = fns.gradient(p, _batch(), {}, torch.tensor(0.0))
    assert set(mask) == set(p) and all(float(m) == 0.0 for m in mask.values())
    assert not make_step(Recording(), apply, _grad_and_value).passes(None)
