"""The q-FFL preprint's Algorithm 1 (qffl_localpow; specs/qffl-dqnfed.md §A.5, B.12 item 6):
q = 0 is local SGD with equal-weight periodic averaging (FedAvg with equal weights on the same
batches); for q > 0 a step's gradient is autograd of mean ℓ^(q+1)/(q+1), i.e. mean ℓ^q ∇ℓ;
`per_batch` powers the batch mean; bad settings name the key."""

import pytest
import torch

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import Batch
from fedbench.engine.build import Run
from fedbench.engine.loop import run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.rng import Streams

CFG = dict(rounds=2, batch_size=4, lr=0.2, local_steps=3, participation=1.0)


def _uneven(fed):
    fed.train[1] = fed.train[1][:5]  # unequal client sizes: n_k-weighting would differ
    return fed


@pytest.mark.parametrize("executor", ["sequential", "vectorised"])
def test_q0_is_fedavg_with_equal_weights(tiny, executor):
    fed, apply, p0 = tiny
    fed = _uneven(fed)
    local = run_rounds(
        Run(
            build_algorithm("qffl_localpow", q=0.0),
            apply,
            TrainConfig(**CFG),
            p0,
            executor=executor,
        ),
        fed,
        Streams(3),
    )

    class EqualFedAvg(type(build_algorithm("fedavg"))):
        def aggregate(self, global_params, messages, server_state, ctx):
            messages = {**messages, "weight": torch.ones_like(messages["weight"])}
            return super().aggregate(global_params, messages, server_state, ctx)

    fedavg = run_rounds(
        Run(EqualFedAvg(), apply, TrainConfig(**CFG), p0, executor=executor), fed, Streams(3)
    )
    for k in p0:
        torch.testing.assert_close(local.global_params[k], fedavg.global_params[k])
    weighted = run_rounds(
        Run(build_algorithm("fedavg"), apply, TrainConfig(**CFG), p0), fed, Streams(3)
    )
    assert any(
        not torch.allclose(local.global_params[k], weighted.global_params[k]) for k in p0
    )  # the sizes differ, so equal weights are a real difference


@pytest.mark.parametrize("q", [0.5, 2.0])
def test_a_steps_gradient_is_the_mean_of_loss_to_the_q_times_its_gradient(tiny, q):
    fed, apply, p0 = tiny
    idx = fed.train[0][:4]
    batch = Batch(fed.x[idx], fed.y[idx])
    algo = build_algorithm("qffl_localpow", q=q)
    leaves = {k: v.clone().requires_grad_() for k, v in p0.items()}
    got = torch.autograd.grad(
        algo.local_loss(apply, leaves, batch, {}, None), list(leaves.values())
    )
    # By hand: mean_j ℓ_j^q ∇ℓ_j, each per-sample gradient from its own backward pass.
    want = [torch.zeros_like(v) for v in p0.values()]
    for j in range(len(idx)):
        one = {k: v.clone().requires_grad_() for k, v in p0.items()}
        loss = torch.nn.functional.cross_entropy(apply(one, batch.x[j : j + 1]), batch.y[j : j + 1])
        grads = torch.autograd.grad(loss, list(one.values()))
        for w, g in zip(want, grads):
            w += loss.detach() ** q * g / len(idx)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)


def test_per_batch_powers_the_batch_mean(tiny):
    fed, apply, p0 = tiny
    idx = fed.train[2][:4]
    batch = Batch(fed.x[idx], fed.y[idx])
    mean = torch.nn.functional.cross_entropy(apply(p0, batch.x), batch.y)
    got = build_algorithm("qffl_localpow", q=2.0, power="per_batch").local_loss(
        apply, p0, batch, {}, None
    )
    torch.testing.assert_close(got, mean**3 / 3)


@pytest.mark.parametrize(
    "kw, key", [({"q": -1.0}, "q"), ({"power": "x"}, "power"), ({"weighting": "x"}, "weighting")]
)
def test_bad_settings_name_the_key(kw, key):
    with pytest.raises(ValueError, match=rf"qffl_localpow: {key} must"):
        build_algorithm("qffl_localpow", **kw)
