"""The vectorised executor gives the sequential executor's numbers, for every algorithm."""

import pytest
import torch

from fedbench.algorithms import ALGORITHMS, build_algorithm
from fedbench.engine.build import Run
from fedbench.engine.loop import run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.engine.vectorised import chunk_size, resolve_executor
from fedbench.models import build_model
from fedbench.rng import Streams

# Uneven client sizes so some clients run fewer steps and last batches are short.
CFG = dict(
    rounds=5,
    batch_size=4,
    lr=0.1,
    local_epochs=2,
    clients_per_round=3,
    momentum=0.9,
    weight_decay=1e-3,
    eval_every=1,
)
# pFedMe at its default mu = 15 with the unsquared per-layer prox is chaotic at lr 0.1: float32
# rounding differences between any two exact implementations grow ~100x per round.
PARAMS = {
    "fedprox": {"mu": 0.1},
    "superfed": {"start": 0.4, "mode": "lm", "nu": 1.0, "mu": 0.1},
    "pfedme": {"mu": 1.0},
    # pFedBayes' default σ = softplus(-3) ≈ 0.05 puts 1/σ² ≈ 400 in the KL gradients, which
    # amplifies float32 rounding past 1e-5 at lr 0.1 with momentum; σ ≈ 0.7 exercises the same
    # code well-conditioned.
    "pfedbayes": {"rho_init": 0.0},
    # FedEvg's server step at β = 10 turns a rounding difference that flips one logit's sign
    # into a jump across [0, 1] (tests/algorithms/test_fedevg.py); a small β compares the rules.
    "fedevg": {"beta_start": 0.05, "beta_end": 0.05, "spc": 2, "synthetic_batch": 4, "fid": "none"},
    # FedNL's default μ = 1e-3 divides the gradient by ~1e-3 where the diagonal estimate is 0:
    # steps of ~1e3 x the gradient make any two float32 runs part. μ = 10 compares the rules.
    "fednl": {"mu": 10.0},
    # FedNew's CG assumes H + ρI positive definite; the tiny MLP's Hessian is indefinite at ρ = 1
    # and CG's steps then blow up. ρ = 10 keeps the system definite.
    "fednew": {"rho": 10.0},
    # FedCorr on 4 clients: a pre-processing iteration of one round (all 4 clients, then the
    # noisy ones relabel), then usual training (its default frac1 = 0.002 needs K >= 500; the
    # fine-tuning stage in both executors: tests/algorithms/test_fedcorr.py).
    # DQN-Fed's literal step on the toy MLP's pseudo-gradients reaches ‖u‖ ~ 1e3 in some
    # rounds, which parts any two float32 runs; its opt-in clip (B-D26) compares the rules.
    "fedcorr": {"iteration1": 1, "frac1": 1.0, "rounds1": 0, "lid_k": 3},
    "fedcorr_dqnfed": {
        "iteration1": 1,
        "frac1": 1.0,
        "rounds1": 0,
        "lid_k": 3,
        "max_update_norm": 0.5,
    },
}
# Training settings an algorithm needs: AAggFF-S is defined for full participation only.
CFG_FOR = {
    "dqnfed": {"local_epochs": 2},  # E = 2: a frozen pass, an SGD epoch, a pass
    # Its curvature pair's y = ḡ(θ̂) − ḡ(θ^t) after one epoch is a difference of near-equal
    # gradients: 2% apart in bf16 (test_precision); two epochs move θ̂ far enough (0.6%).
    "fedcorr_dqnfed": {"local_epochs": 2},
    "fedlf": {"local_epochs": 1},  # clients send one pass's full gradient, no local training
    "fednl": {"local_epochs": 1},
    "fednew": {"local_epochs": None, "local_steps": 1},  # one Newton-system solve a round
    "aaggff_s": {"clients_per_round": 4},
    "aaggff_s_prox": {"clients_per_round": 4},
}


def _fresh(p0):
    """Per-client initialisations that differ from the global one and from each other."""

    def fresh(client_id, round_=0):  # keyed (client,) or (client, round), as run_rounds keys it
        g = torch.Generator().manual_seed(100 + client_id + 1000 * round_)
        return {k: 0.3 * torch.randn(v.shape, generator=g).to(v.device) for k, v in p0.items()}

    return fresh


def _uneven(tiny_fed):
    tiny_fed.train[1] = tiny_fed.train[1][:5]
    tiny_fed.train[2] = tiny_fed.train[2][:2]
    return tiny_fed


# Algorithms that run in the sequential executor only (FedCGAN, FedCVAE: BatchNorm running
# statistics) are refused by the vectorised one (tests/algorithms/test_fedgen.py).
BOTH = [n for n in sorted(ALGORITHMS) if not ALGORITHMS[n].sequential_only]  # the rest


@pytest.mark.parametrize("name", BOTH)
@pytest.mark.parametrize("chunk", [None, 2])
def test_executors_agree(name, chunk, tiny, assert_executors_agree):
    fed, apply, p0 = tiny
    fed = _uneven(fed)
    algo = build_algorithm(name, **PARAMS.get(name, {}))
    runs = {}
    for ex in ("sequential", "vectorised"):
        cfg = TrainConfig(**{**CFG, **CFG_FOR.get(name, {})}, chunk_size=chunk)
        runs[ex] = run_rounds(
            Run(algo, apply, cfg, p0, executor=ex, fresh_init=_fresh(p0)), fed, Streams(5)
        )
    assert_executors_agree(runs["sequential"], runs["vectorised"])


# (arch, input shape, build settings): convolutional nets the vectorised executor runs (no
# running statistics), at test sizes.
CONV_NETS = [
    ("twocnn", (1, 12, 12), {"hidden": 16, "channels": (4, 8)}),
    ("resnet18_gn", (3, 8, 8), {"widths": (4, 8, 8, 8)}),
]


@pytest.mark.parametrize("arch,shape,settings", CONV_NETS, ids=[a for a, _, _ in CONV_NETS])
def test_round_params_agree_on_a_cnn(arch, shape, settings):
    import numpy as np

    from fedbench.engine.federation import Federation
    from fedbench.engine.functional import make_apply, params_of

    rng = np.random.default_rng(0)
    x = rng.random((30, *shape), dtype=np.float32)
    y = rng.integers(0, 10, 30)
    idx = np.arange(30).reshape(3, 10)
    fed = Federation.from_arrays(
        x, y, list(idx[:, :7]), list(idx[:, 7:]), x[:0], y[:0], 10, torch.device("cpu")
    )
    model = build_model(arch, shape, 10, init_seed=0, **settings)
    cfg = TrainConfig(rounds=1, batch_size=3, lr=0.05, local_epochs=1, clients_per_round=3)
    out = [
        run_rounds(
            Run(build_algorithm("fedavg"), make_apply(model), cfg, params_of(model), executor=ex),
            fed,
            Streams(1),
        )
        for ex in ("sequential", "vectorised")
    ]
    p0 = params_of(model)
    moved = max((out[0].global_params[k] - p0[k]).abs().max().item() for k in p0)
    assert moved > 1e-3  # the round trained
    for k in out[0].global_params:
        assert (out[0].global_params[k] - out[1].global_params[k]).abs().max() <= 1e-5, k


def test_auto_picks_vectorised_without_batchnorm_and_says_why():
    name, why = resolve_executor("auto", build_model("twonn", (1, 28, 28), 10, init_seed=0))
    assert name == "vectorised" and "exact" in why
    bn = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.BatchNorm1d(3))
    name, why = resolve_executor("auto", bn)
    assert name == "sequential" and "BatchNorm" in why
    assert resolve_executor("sequential", bn) == ("sequential", "requested")
    lstm = build_model("nextchar_lstm", (80,), 100, init_seed=0, vocab_size=100)
    name, why = resolve_executor("auto", lstm)
    assert name == "sequential" and "recurrent" in why


def test_chunk_size_fits_budget():
    assert chunk_size(1000, 10, 784, 1, 7) == 7
    n = chunk_size(200_000, 10, 784, 100, None)
    assert n >= 1 and n * 4 * (8 * 200_000) <= 100 * 2**20
    assert chunk_size(10**9, 10, 784, 1, None) == 1


def test_many_clients_in_chunks_agree(federation_factory):
    fed = federation_factory(num_clients=12, per_client=8)
    model = build_model("mlp", (6,), 3, init_seed=2, hidden=4)
    from fedbench.engine.functional import make_apply, params_of

    cfg = TrainConfig(
        rounds=2, batch_size=3, lr=0.1, local_epochs=1, clients_per_round=12, chunk_size=5
    )
    a, b = (
        run_rounds(
            Run(build_algorithm("scaffold"), make_apply(model), cfg, params_of(model), executor=ex),
            fed,
            Streams(0),
        )
        for ex in ("sequential", "vectorised")
    )
    for k in a.global_params:
        assert (a.global_params[k] - b.global_params[k]).abs().max() <= 1e-5


@pytest.mark.parametrize("executor", ["sequential", "vectorised"])
def test_fedavg_deltas_written_in_place_equal_client_ends_messages_bit_for_bit(executor, tiny):
    """Both executors write FedAvg's deltas straight into the stacked message; an algorithm
    that overrides `client_end` with FedAvg's own goes through the per-client path."""
    from dataclasses import dataclass

    from fedbench.algorithms.base import Algorithm

    @dataclass(frozen=True)
    class SameEnd(Algorithm):
        def client_end(self, global_params, params, carry, client_state, ctx):
            return super().client_end(global_params, params, carry, client_state, ctx)

    fed, apply, p0 = tiny
    fed = _uneven(fed)
    runs = [
        run_rounds(Run(algo, apply, TrainConfig(**CFG), p0, executor=executor), fed, Streams(5))
        for algo in (build_algorithm("fedavg"), SameEnd())
    ]
    for k in p0:
        assert torch.equal(runs[0].global_params[k], runs[1].global_params[k]), k
    assert runs[0].records == runs[1].records


def test_delta_buffers_reused_only_when_nothing_else_holds_them():
    """A kept buffer comes back when only the executor holds it; a server that kept the tensor,
    or a view of its memory, gets it intact and the round a new buffer; a new shape, a new one."""
    from fedbench.engine.executors import DeltaBuffers

    like = {"w": torch.zeros(3, 2), "b": torch.zeros(2)}
    bufs = DeltaBuffers()
    first = bufs.take(like, 4)
    ptr = first["w"].data_ptr()
    del first
    second = bufs.take(like, 4)
    assert second["w"].data_ptr() == ptr
    second["w"].fill_(7.0)
    kept_tensor, kept_view = second["w"], second["b"][1:]
    kept_view.fill_(5.0)
    del second
    third = bufs.take(like, 4)
    assert third["w"].data_ptr() != kept_tensor.data_ptr()
    assert third["b"].data_ptr() != kept_view.data_ptr()
    third["w"].fill_(0.0)
    third["b"].fill_(0.0)
    assert torch.all(kept_tensor == 7.0) and torch.all(kept_view == 5.0)
    del third
    assert bufs.take(like, 5)["w"].shape == (5, 3, 2)


@pytest.mark.parametrize("executor", ["sequential", "vectorised"])
def test_fedavg_rounds_reuse_their_delta_buffers_and_kept_deltas_stay_intact(executor, tiny):
    """Over a real run on the CPU each round writes its deltas into the last round's buffer (the
    loop drops the round's messages before the next); a server that keeps the deltas keeps its
    own."""
    from dataclasses import dataclass

    from fedbench.algorithms.base import Algorithm

    seen: list[int] = []

    @dataclass(frozen=True)
    class Watch(Algorithm):
        def aggregate(self, global_params, messages, server_state, ctx):
            seen.append(messages["delta"]["head.weight"].data_ptr())
            return super().aggregate(global_params, messages, server_state, ctx)

    @dataclass(frozen=True)
    class Keep(Algorithm):
        def aggregate(self, global_params, messages, server_state, ctx):
            kept = dict(server_state.get("kept", {}))
            kept[ctx.round] = (
                messages["delta"],
                {k: v.clone() for k, v in messages["delta"].items()},
            )
            new, _ = super().aggregate(global_params, messages, server_state, ctx)
            return new, {"kept": kept}

    fed, apply, p0 = tiny
    assert "head.weight" in p0
    cfg = TrainConfig(**CFG)
    run_rounds(Run(Watch(), apply, cfg, p0, executor=executor), fed, Streams(5))
    assert len(seen) == CFG["rounds"]
    assert len(set(seen)) == (1 if fed.x.device.type == "cpu" else len(seen))  # GPU: never kept
    state = run_rounds(Run(Keep(), apply, cfg, p0, executor=executor), fed, Streams(5))
    kept = state.server_state["kept"]
    assert len(kept) == CFG["rounds"]
    assert len({d["head.weight"].data_ptr() for d, _ in kept.values()}) == CFG["rounds"]
    for deltas, copy in kept.values():
        for k in copy:
            assert torch.equal(deltas[k], copy[k]), k
