"""Engine hooks later algorithms rely on: phases with frozen parts, extra epochs, fresh init."""

from dataclasses import dataclass
from typing import ClassVar

import pytest
import torch

from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.opt_in import LocalSteps
from fedbench.engine.build import Run
from fedbench.engine.loop import run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.rng import Streams


@dataclass(frozen=True)
class HeadThenBody(LocalSteps, Algorithm):
    """Epoch 1 trains only the head, epoch 2 only the body (FedRep-like phases)."""

    name: ClassVar[str] = "head_then_body"

    def local_epochs(self, epochs: int) -> int:
        return 2 * epochs

    def step_noise(self, rng, ctx, global_params):
        phase = torch.arange(ctx.num_steps) >= ctx.steps_per_epoch
        return phase.float()

    def update_mask(self, params, carry, noise):
        return {k: (1 - noise) if k.startswith("head.") else noise for k in params}


@pytest.mark.parametrize("executor", ["sequential", "vectorised"])
def test_phases_freeze_parts_including_weight_decay(tiny, executor):
    fed, apply, p0 = tiny
    seen = {}

    @dataclass(frozen=True)
    class Probe(HeadThenBody):
        def client_end(self, global_params, params, carry, client_state, ctx):
            seen[ctx.client_id] = (ctx.num_steps, ctx.steps_per_epoch, params)
            return super().client_end(global_params, params, carry, client_state, ctx)

    cfg = TrainConfig(
        rounds=1,
        batch_size=4,
        lr=0.1,
        local_epochs=1,
        clients_per_round=4,
        momentum=0.9,
        weight_decay=0.1,
    )
    run_rounds(Run(Probe(), apply, cfg, p0, executor=executor), fed, Streams(0))
    steps, per_epoch, _ = seen[0]
    assert per_epoch == 3 and steps == 6  # 9 training samples, B = 4, two epochs

    # Reference: FedAvg-style SGD on the head for epoch 1, then on the body for epoch 2, by hand.
    from fedbench.engine.batches import batch_plan
    from fedbench.engine.functional import sgd_init, sgd_step

    plan = batch_plan(fed.train[0], 4, Streams(0).generator("batches", 1, 0), epochs=2)
    p, buf = dict(p0), sgd_init(p0)
    for s, idx in enumerate(plan):
        q = {k: v.clone().requires_grad_(True) for k, v in p.items()}
        loss = torch.nn.functional.cross_entropy(apply(q, fed.x[idx]), fed.y[idx])
        grads = dict(zip(q, torch.autograd.grad(loss, list(q.values()))))
        on = "head." if s < 3 else "body."
        mask = {k: torch.tensor(1.0 if k.startswith(on) else 0.0) for k in p}
        p, buf = sgd_step(p, grads, buf, 0.1, 0.9, 0.1, mask)
        if s == 2:
            head_after_epoch1 = p["head.weight"].clone()
    for k, v in seen[0][2].items():
        torch.testing.assert_close(v, p[k], rtol=0, atol=1e-5)
    # The head moved in epoch 1, then stayed frozen (weight decay included) through epoch 2.
    assert not torch.equal(head_after_epoch1, p0["head.weight"])
    assert torch.equal(p["head.weight"], head_after_epoch1)


@dataclass(frozen=True)
class Alternate(LocalSteps, Algorithm):
    """Even steps train only the head, odd steps only the body: marks that are a schedule."""

    name: ClassVar[str] = "alternate"

    def step_noise(self, rng, ctx, global_params):
        return (torch.arange(ctx.num_steps) % 2).float()

    def update_mask(self, params, carry, noise):
        n = torch.as_tensor(noise, dtype=torch.float32)
        return {k: (1 - n) if k.startswith("head.") else n for k in params}


@pytest.mark.parametrize("executor", ["sequential", "vectorised"])
def test_a_schedule_reaches_the_step_as_a_float_and_trains_as_the_tensor_marks(tiny, executor):
    fed, apply, p0 = tiny
    seen = []

    @dataclass(frozen=True)
    class Schedule(Alternate):
        noise_is_schedule: ClassVar[bool] = True

        def local_loss(self, apply, params, batch, carry, noise):
            seen.append(noise)
            if noise < 0.5:  # a Python branch: legal only on an unbatched mark
                return self.data_loss(apply, params, batch)
            return 2.0 * self.data_loss(apply, params, batch)

    @dataclass(frozen=True)
    class Marks(Alternate):
        def local_loss(self, apply, params, batch, carry, noise):
            return (1.0 + noise) * self.data_loss(apply, params, batch)

    cfg = TrainConfig(rounds=2, batch_size=4, lr=0.1, local_steps=4, clients_per_round=4)
    got = run_rounds(Run(Schedule(), apply, cfg, p0, executor=executor), fed, Streams(0))
    want = run_rounds(Run(Marks(), apply, cfg, p0, executor=executor), fed, Streams(0))
    assert seen and all(type(n) is float for n in seen)
    assert sorted(set(seen)) == [0.0, 1.0]
    for k, v in want.global_params.items():
        torch.testing.assert_close(got.global_params[k], v, rtol=1e-6, atol=1e-6)
    assert not torch.equal(got.global_params["head.weight"], p0["head.weight"])


def test_fresh_init_is_per_client_and_required(tiny):
    fed, apply, p0 = tiny
    got = {}

    @dataclass(frozen=True)
    class Local(Algorithm):
        def init_client_state(self, client_id, global_params, fresh):
            got[client_id] = fresh()
            return {}

    cfg = TrainConfig(rounds=1, batch_size=4, lr=0.1, local_epochs=1, clients_per_round=1)
    inits = {i: {k: torch.full_like(v, float(i)) for k, v in p0.items()} for i in range(4)}
    run_rounds(Run(Local(), apply, cfg, p0, fresh_init=inits.__getitem__), fed, Streams(0))
    assert all(torch.equal(got[i]["head.weight"], inits[i]["head.weight"]) for i in range(4))
    with pytest.raises(ValueError, match="fresh_init"):
        run_rounds(Run(Local(), apply, cfg, p0), fed, Streams(0))
