"""`training.optimizer: adam`: torch.optim.Adam's bits in the sequential executor, the same steps
on stacked clients, both executors agree, and bad settings name their key."""

import pytest
import torch

from fedbench.algorithms import build_algorithm
from fedbench.engine.build import Run
from fedbench.engine.functional import Adam, adam_init, adam_step_, adam_update
from fedbench.engine.loop import run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.rng import Streams


@pytest.mark.parametrize("weight_decay", [0.0, 1e-2])
@pytest.mark.parametrize("betas", [(0.9, 0.999), (0.5, 0.999)])
def test_adam_update_gives_torch_optim_adams_bits(weight_decay, betas):
    torch.manual_seed(0)
    p0 = {"a": torch.randn(257, 31), "b": torch.randn(37)}
    ref = {k: torch.nn.Parameter(v.clone()) for k, v in p0.items()}
    opt = torch.optim.Adam(
        ref.values(), lr=1e-3, betas=betas, weight_decay=weight_decay, foreach=False
    )
    mine, state = dict(p0), adam_init(p0)
    adam = Adam(betas=betas, weight_decay=weight_decay)
    for step in range(4):
        g = {k: torch.randn_like(v) for k, v in p0.items()}
        for k in ref:
            ref[k].grad = g[k].clone()
        opt.step()
        state = adam_update(mine, g, state, 1e-3, adam, params_owned=step > 0)
        for k in ref:
            assert torch.equal(mine[k], ref[k].detach()), (step, k)
    assert state["step"] == 4
    for k, v in p0.items():  # the first step wrote new leaves: the caller's stay put
        assert not torch.equal(v, mine[k])


def test_stacked_adam_equals_each_client_alone_and_inactive_clients_keep_everything():
    g = torch.Generator().manual_seed(1)
    C = 3
    p0 = {"w": torch.randn(C, 5, 4, generator=g), "b": torch.randn(C, 4, generator=g)}
    adam = Adam(betas=(0.5, 0.999), weight_decay=1e-4)
    stacked = {k: v.clone() for k, v in p0.items()}
    state = adam_init(stacked)
    alone = [{k: v[c].clone() for k, v in p0.items()} for c in range(C)]
    alone_state = [adam_init(a) for a in alone]
    for s in range(4):
        grads = {k: torch.randn(v.shape, generator=g) for k, v in p0.items()}
        active = torch.tensor([1.0, 1.0, 0.0 if s >= 2 else 1.0])  # client 2: two steps only
        scale = None if active.all() else dict.fromkeys(p0, active)
        before = {k: v[2].clone() for k, v in stacked.items()}
        adam_step_(stacked, grads, state, 1e-2, adam, s + 1, scale)
        for c in range(C):
            if active[c]:
                alone_state[c] = adam_update(
                    alone[c], {k: v[c] for k, v in grads.items()}, alone_state[c], 1e-2, adam, True
                )
        if s >= 2:
            for k in p0:
                assert torch.equal(stacked[k][2], before[k])
    for c in range(C):
        for k in p0:
            assert torch.equal(stacked[k][c], alone[c][k]), (c, k)
            assert torch.equal(state["m"][k][c], alone_state[c]["m"][k])
            assert torch.equal(state["v"][k][c], alone_state[c]["v"][k])


def _cfg(**kw):
    base = dict(
        rounds=2,
        batch_size=4,
        lr=1e-2,
        local_epochs=2,
        clients_per_round=3,
        optimizer="adam",
        betas=(0.5, 0.999),
        weight_decay=1e-4,
    )
    return TrainConfig(**{**base, **kw})


def test_both_executors_train_alike_with_adam(tiny):
    fed, apply, p0 = tiny
    runs = {}
    for ex in ("sequential", "vectorised"):
        runs[ex] = run_rounds(
            Run(build_algorithm("fedavg"), apply, _cfg(), p0, executor=ex), fed, Streams(0)
        )
    seq, vec = runs["sequential"], runs["vectorised"]
    moved = max((seq.global_params[k] - p0[k]).abs().max().item() for k in p0)
    assert moved > 1e-3  # Adam trained the model
    for k in p0:
        torch.testing.assert_close(seq.global_params[k], vec.global_params[k], rtol=0, atol=1e-5)


def test_adam_and_sgd_differ(tiny):
    fed, apply, p0 = tiny
    adam = run_rounds(
        Run(build_algorithm("fedavg"), apply, _cfg(), p0, executor="sequential"), fed, Streams(0)
    )
    sgd = run_rounds(
        Run(build_algorithm("fedavg"), apply, _cfg(optimizer="sgd"), p0, executor="sequential"),
        fed,
        Streams(0),
    )
    assert any(not torch.allclose(adam.global_params[k], sgd.global_params[k]) for k in p0)


@pytest.mark.parametrize(
    "kw, key",
    [
        ({"optimizer": "rmsprop"}, "training.optimizer"),
        ({"momentum": 0.9}, "training.momentum"),
        ({"betas": (0.9,)}, "training.betas"),
        ({"betas": (0.9, 1.5)}, "training.betas"),
        ({"eps": 0.0}, "training.eps"),
    ],
)
def test_bad_optimizer_settings_name_their_key(kw, key):
    with pytest.raises(ValueError, match=key):
        _cfg(**kw)


def test_yaml_lists_become_betas_tuples():
    assert TrainConfig.from_dict(
        {
            "rounds": 1,
            "batch_size": 2,
            "lr": 0.1,
            "local_epochs": 1,
            "participation": 1.0,
            "optimizer": "adam",
            "betas": [0.5, 0.999],
        }
    ).adam() == Adam(betas=(0.5, 0.999))


def test_update_masks_with_adam_refused_by_the_vectorised_executor(tiny):
    fed, apply, p0 = tiny
    algo = build_algorithm("fedrep")
    with pytest.raises(ValueError, match="executor: sequential"):
        run_rounds(Run(algo, apply, _cfg(), p0, executor="vectorised"), fed, Streams(0))


def test_masked_adam_equals_two_torch_optimisers_stepping_in_turn():
    # FedCGAN's discriminator and generator: two torch Adams over disjoint parameters, stepped
    # alternately; one masked Adam with a step count per leaf gives their bits.
    torch.manual_seed(3)
    p0 = {"d": torch.randn(13, 7), "g": torch.randn(9)}
    ref = {k: torch.nn.Parameter(v.clone()) for k, v in p0.items()}
    kw = {"lr": 1e-3, "betas": (0.5, 0.999), "weight_decay": 1e-4, "foreach": False}
    opts = {k: torch.optim.Adam([ref[k]], **kw) for k in ref}
    mine, state = dict(p0), adam_init(p0)
    adam = Adam(betas=(0.5, 0.999), weight_decay=1e-4)
    for step in range(6):
        turn = "d" if step % 2 == 0 else "g"
        g = {k: torch.randn_like(v) for k, v in p0.items()}  # the frozen leaf's is ignored
        ref[turn].grad = g[turn].clone()
        opts[turn].step()
        mask = {"d": torch.tensor(float(turn == "d")), "g": float(turn == "g")}
        state = adam_update(mine, g, state, 1e-3, adam, params_owned=False, mask=mask)
        for k in ref:
            assert torch.equal(mine[k], ref[k].detach()), (step, k)
    assert state["steps"] == {"d": 3, "g": 3} and state["step"] == 6
    for k, v in p0.items():
        assert not torch.equal(v, mine[k])  # new leaves: the caller's stay put


def test_adam_masks_other_than_zero_or_one_name_the_parameter():
    p0 = {"w": torch.ones(2)}
    with pytest.raises(ValueError, match="'w'"):
        adam_update(dict(p0), p0, adam_init(p0), 0.1, Adam(), False, {"w": 0.5})
