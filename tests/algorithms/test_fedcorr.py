"""FedCorr: FedAvg when its first two stages and mixup are off; its own terms by hand (LID, the
noisy-client rule, the two relabelling rules, the proximal term, mixup, the stage schedule);
FedCorr + DQN-Fed's server step is DQN-Fed's."""

import math
from dataclasses import dataclass
from functools import partial
from typing import ClassVar

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import Batch, ClientContext, SelectContext, ServerContext
from fedbench.algorithms.dqnfed import DQNFed
from fedbench.algorithms.fedcorr import (
    FedCorr,
    gmm_high,
    lid,
    mixup_loss,
    prox_distance,
    relabel_by_loss,
    relabel_confident,
    sample_losses,
    softmax_outputs,
)
from fedbench.engine.build import Run
from fedbench.engine.loop import run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.rng import Streams

CFG = dict(batch_size=4, lr=0.1, local_epochs=2, clients_per_round=3, momentum=0.5, eval_every=1)


@pytest.mark.parametrize("executor", ["sequential", "vectorised"])
def test_stage3_only_without_mixup_is_fedavg(tiny, executor):
    fed, apply, p0 = tiny
    cfg = TrainConfig(rounds=3, **CFG)
    corr = build_algorithm("fedcorr", iteration1=0, rounds1=0, mixup=False)
    a = run_rounds(Run(corr, apply, cfg, p0, executor=executor), fed, Streams(4))
    b = run_rounds(
        Run(build_algorithm("fedavg"), apply, cfg, p0, executor=executor), fed, Streams(4)
    )
    for k in p0:
        if executor == "sequential":  # the same hooks' numbers, bit for bit
            assert torch.equal(a.global_params[k], b.global_params[k])
        else:  # FedAvg may take the batched layer-chain kernels, FedCorr the vmap path
            torch.testing.assert_close(a.global_params[k], b.global_params[k], atol=1e-6, rtol=0)
    for ra, rb in zip(a.records, b.records, strict=True):
        assert ra["clients"]["global"]["ids"] == rb["clients"]["global"]["ids"]
        assert ra["train_loss"] == pytest.approx(rb["train_loss"], abs=1e-6)


def test_lid_by_hand():
    pts = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0], [3.0, 3.0], [0.5, 0.5]])
    k = 2
    got = lid(pts, k)
    for i in range(len(pts)):
        d = sorted(math.dist(pts[i].tolist(), pts[j].tolist()) for j in range(len(pts)) if j != i)
        near = d[:k]
        want = -k / (sum(math.log(v / (near[-1] + 1e-6)) for v in near) + 1e-6)
        assert got[i].item() == pytest.approx(want, rel=1e-9)
    # Fewer samples than k + 1: the neighbours there are, k kept in the numerator (release).
    few = lid(pts[:3], 5)
    d0 = sorted([1.0, 2.0])
    assert few[0].item() == pytest.approx(
        -5 / (sum(math.log(v / (d0[-1] + 1e-6)) for v in d0) + 1e-6), rel=1e-9
    )
    assert lid(pts[:1], 3).tolist() == [0.0]


def test_gmm_flags_the_higher_mean_component():
    values = np.array([1.0, 1.1, 0.9, 1.05, 5.0, 5.2, 4.9])
    assert gmm_high(values).tolist() == [False] * 4 + [True] * 3
    assert gmm_high(np.array([3.0])).tolist() == [False]


def test_sample_losses_as_the_release_computes_them():
    probs = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    y = torch.tensor([0, 1])
    # release: CrossEntropyLoss over the softmax outputs = logsumexp(p) - p_y
    want = [
        math.log(sum(math.exp(v) for v in row)) - row[t] for row, t in zip(probs.tolist(), [0, 1])
    ]
    assert sample_losses(probs, y, "code").tolist() == pytest.approx(want)
    assert sample_losses(probs, y, "ce").tolist() == pytest.approx([-math.log(0.7), -math.log(0.1)])


def test_relabel_rules_by_hand():
    labels = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1, 2, 0])
    losses = torch.tensor([0.1, 5.0, 0.2, 4.0, 0.3, 3.0, 0.4, 2.0, 0.5, 0.6])
    probs = torch.full((10, 3), 0.1)
    pred = torch.tensor([2, 0, 1, 1, 0, 0, 2, 2, 1, 1])
    probs[torch.arange(10), pred] = 0.8
    probs[5] = torch.tensor([0.5, 0.3, 0.2])  # top-loss but not confident
    # level 0.5, ratio 0.8: int(10 * 0.4) = 4 highest losses = samples 1, 3, 5, 7
    new = relabel_by_loss(labels, losses, probs, 0.5, 0.8, 0.6)
    want = labels.clone()
    want[[1, 3, 7]] = pred[[1, 3, 7]]  # 5 is below the confidence threshold
    assert torch.equal(new, want)
    conf = relabel_confident(labels, probs, 0.6)
    want = pred.clone()
    want[5] = labels[5]
    assert torch.equal(conf, want)


def test_noisy_client_rule_at_an_iteration_end():
    algo = FedCorr(iteration1=2, frac1=0.5, rounds1=1)  # S = 2 rounds an iteration, K = 4: 2 each
    g = {"w": torch.zeros(2)}
    state = algo.init_server_state(g)
    lids = {0: 1.0, 1: 1.1, 2: 6.0, 3: 6.2}
    shares = {0: 0.3, 1: 0.2, 2: 0.4, 3: 0.25}
    for t, ids in ((1, (0, 2)), (2, (1, 3))):
        msgs = {
            "delta": {"w": torch.zeros(2, 2)},
            "weight": torch.ones(2, dtype=torch.float64),
            "lid": torch.tensor([lids[i] for i in ids], dtype=torch.float64),
            "noise_share": torch.tensor([shares[i] for i in ids], dtype=torch.float64),
        }
        ctx = ServerContext(round=t, num_clients=4, client_ids=ids, lr=0.1)
        _, state = algo.aggregate(g, msgs, state, ctx)
        if t == 1:  # mid-iteration: nothing detected yet
            assert "noisy" not in state and state["relabel"] == 0
    assert state["noisy"].tolist() == [False, False, True, True]
    assert state["level"].tolist() == [0.0, 0.0, 0.4, 0.25]  # the share, for noisy clients only
    assert state["relabel"] == 1 and algo.refresh_clients(state, 2) == (2, 3)
    assert state["lid_sum"].tolist() == [1.0, 1.1, 6.0, 6.2]
    assert state["lid_iteration"].tolist() == [0.0] * 4  # the next iteration starts afresh


def test_schedule_picks_every_client_once_an_iteration_then_clean_ones():
    algo = FedCorr(iteration1=2, frac1=0.25, rounds1=2)  # K = 8: 2 clients x 4 rounds
    sampling = partial(Streams(3).generator, "sampling")
    state = {}
    for it in range(2):
        seen = []
        for j in range(4):
            ctx = SelectContext(1 + 4 * it + j, 12, 8, 3, sampling)
            seen += algo.select_clients(ctx, state)
        assert sorted(seen) == list(range(8))
    state = {"level": torch.tensor([0.0, 0.5, 0.05, 0.3, 0.0, 0.2, 0.1, 0.9], dtype=torch.float64)}
    for t in (9, 10):
        picked = algo.select_clients(SelectContext(t, 12, 8, 3, sampling), state)
        assert len(picked) == 3 and set(picked) <= {0, 2, 4, 6}
    ctx = SelectContext(11, 12, 8, 3, sampling)  # stage 3: FedAvg's uniform draw
    want = sorted(int(i) for i in sampling(11).choice(8, size=3, replace=False))
    assert algo.select_clients(ctx, state) == want


def test_bad_schedule_is_refused_naming_the_setting():
    sampling = partial(Streams(0).generator, "sampling")
    with pytest.raises(ValueError, match="frac1"):
        FedCorr(frac1=0.1).select_clients(SelectContext(1, 100, 4, 2, sampling), {})
    with pytest.raises(ValueError, match="training.rounds"):
        FedCorr(iteration1=1, frac1=0.5, rounds1=3).select_clients(
            SelectContext(1, 4, 4, 2, sampling), {}
        )
    with pytest.raises(ValueError, match="sample_loss"):
        FedCorr(sample_loss="nope")


def test_proximal_term_and_its_first_batch_skip(tiny):
    fed, apply, p0 = tiny
    algo = FedCorr(mixup=False, beta=5.0)
    ctx = ClientContext(0, 1, 0.1, 10, num_train=9, num_steps=6, steps_per_epoch=3)
    state = {"level": torch.tensor([0.4, 0.0, 0.0, 0.0], dtype=torch.float64)}
    _, carry = algo.client_begin(p0, state, {}, ctx)
    assert carry["mu"].item() == pytest.approx(2.0)  # beta x the client's estimated level
    noise = algo.step_noise(torch.Generator().manual_seed(0), ctx, p0)
    assert noise["prox"].tolist() == [0, 1, 1, 0, 1, 1]  # not on an epoch's first batch
    w = {k: v + 0.1 for k, v in p0.items()}
    batch = Batch(fed.x[:4], fed.y[:4])
    dist = math.sqrt(sum(0.01 * v.numel() for v in p0.values()))
    on = algo.local_loss(apply, w, batch, carry, {"prox": torch.tensor(1.0)})
    off = algo.local_loss(apply, w, batch, carry, {"prox": torch.tensor(0.0)})
    assert off.item() == pytest.approx(algo.data_loss(apply, w, batch).item())
    assert (on - off).item() == pytest.approx(2.0 * dist, rel=1e-5)
    # At w = w_g (an epoch's first steps) the term's gradient is 0, not NaN.
    leaves = {k: v.clone().requires_grad_() for k, v in p0.items()}
    (grad,) = torch.autograd.grad(prox_distance(leaves, p0), [leaves["head.weight"]])
    assert torch.equal(grad, torch.zeros_like(grad))


def test_mixup_loss_by_hand(tiny):
    fed, apply, p0 = tiny
    x, y = fed.x[:4], fed.y[:4]
    key = torch.tensor([0.3, 0.1, 0.9, 0.5])  # sorts to the permutation [1, 0, 3, 2]
    lam = torch.tensor(0.7)
    mixed = 0.7 * x + 0.3 * x[[1, 0, 3, 2]]
    out = apply(p0, mixed)
    want = 0.7 * F.cross_entropy(out, y) + 0.3 * F.cross_entropy(out, y[[1, 0, 3, 2]])
    got = mixup_loss(apply, p0, Batch(x, y), lam, key)
    assert got.item() == pytest.approx(want.item(), rel=1e-6)
    # A padded batch (vectorised executor) mixes the same real rows: pads sort last.
    xp = torch.cat([x[:3], x[:1]])
    padded = mixup_loss(apply, p0, Batch(xp, y, torch.tensor([1.0, 1, 1, 0])), lam, key)
    short = mixup_loss(apply, p0, Batch(x[:3], y[:3]), lam, key)
    assert padded.item() == pytest.approx(short.item(), rel=1e-6)


def test_relabelling_in_a_run_uses_the_global_model_after_each_detection(tiny):
    fed, apply, p0 = tiny
    seen = {}

    @dataclass(frozen=True)
    class Probe(FedCorr):
        name: ClassVar[str] = "probe"

        def aggregate(self, global_params, messages, server_state, ctx):
            new, state = super().aggregate(global_params, messages, server_state, ctx)
            seen[ctx.round] = (new, state)
            return new, state

    # one pre-processing iteration of one round (all 4 clients), one fine-tuning round, no more
    algo = Probe(iteration1=1, frac1=1.0, rounds1=1, lid_k=3, confidence_thres=0.4)
    cfg = TrainConfig(rounds=2, **{**CFG, "clients_per_round": 4})
    run = run_rounds(Run(algo, apply, cfg, p0, executor="sequential"), fed, Streams(2))
    g1, s1 = seen[1]
    g2, s2 = seen[2]
    noisy = [int(i) for i in np.flatnonzero(s1["noisy"].numpy())]
    assert noisy and s2["relabel"] == 2
    for cid in range(4):
        labels = fed.y[fed.train[cid]]
        if cid in noisy:  # pre-processing rule with the round-1 model, then the fine-tuning rule
            x = fed.x[fed.train[cid]]
            probs1 = softmax_outputs(apply, g1, x)
            loss = run.client_states[cid]["loss"]
            level = float(s1["level"][cid])
            labels = relabel_by_loss(labels, loss, probs1, level, 0.8, 0.4)
            labels = relabel_confident(labels, softmax_outputs(apply, g2, x), 0.4)
            assert torch.equal(run.client_states[cid]["labels"], labels)
        else:
            assert "labels" not in run.client_states[cid]


def test_fedcorr_dqnfed_server_step_is_dqnfeds():
    gen = torch.Generator().manual_seed(0)
    g = {"a": torch.randn(3, 4, generator=gen), "b": torch.randn(5, generator=gen)}
    msgs = {
        "grad": {k: torch.randn(3, *v.shape, generator=gen) for k, v in g.items()},
        "d": torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64),
        "weight": torch.tensor([3.0, 4.0, 5.0], dtype=torch.float64),
    }
    ctx = ServerContext(round=5, num_clients=3, client_ids=(0, 1, 2), lr=0.1)
    combo = build_algorithm(
        "fedcorr_dqnfed", iteration1=1, frac1=0.5, rounds1=1
    )  # round 5: stage 3
    dqn = DQNFed(send="pseudo_grad")
    new, state = combo.aggregate(g, msgs, combo.init_server_state(g), ctx)
    want, dstate = dqn.aggregate(g, msgs, dqn.init_server_state(g), ctx)
    for k in g:
        assert torch.equal(new[k], want[k])
    for k in DQNFed.server_scalars:
        assert state[k] == dstate[k] or (math.isnan(state[k]) and math.isnan(dstate[k]))
    assert all(torch.equal(state["dqn"]["prev"][k], g[k]) for k in g)


@pytest.mark.parametrize("name", ["fedcorr", "fedcorr_dqnfed"])
def test_executors_agree_through_every_stage(tiny, name, assert_executors_agree):
    fed, apply, p0 = tiny
    fed.train[1] = fed.train[1][:5]  # a short last batch: mixup over a padded batch
    # DQN-Fed's literal step moves this toy MLP by ‖u‖ of 6 to 20 a round, which turns the
    # executors' float32 rounding into 1e-4 apart; a tenth of the step compares the rules.
    extra = {"server_lr_scale": 0.1} if name == "fedcorr_dqnfed" else {}
    algo = build_algorithm(name, iteration1=1, frac1=0.5, rounds1=1, lid_k=3, **extra)
    cfg = TrainConfig(rounds=4, **CFG)
    runs = [
        run_rounds(Run(algo, apply, cfg, p0, executor=ex), fed, Streams(1))
        for ex in ("sequential", "vectorised")
    ]
    assert [r["server"]["stage"] for r in runs[0].records] == [1.0, 1.0, 2.0, 3.0]
    assert_executors_agree(*runs)
