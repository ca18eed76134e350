"""training.precision: a bf16 round moves every algorithm's parameters as the fp32 round does, to
bfloat16's rounding; master weights, optimiser state and client states stay float32."""

import pytest
import torch
from test_executors import CFG_FOR, PARAMS, _fresh

from fedbench.algorithms import ALGORITHMS, build_algorithm
from fedbench.algorithms.opt_in import OwnNetwork, opt_in
from fedbench.engine.build import Run
from fedbench.engine.loop import run_rounds
from fedbench.engine.precision import PRECISIONS, with_precision
from fedbench.engine.train_config import TrainConfig
from fedbench.rng import Streams, init_streams

CFG = dict(rounds=1, batch_size=4, lr=0.1, local_epochs=1, clients_per_round=3, momentum=0.9)
# bfloat16 keeps 8 significant bits (relative rounding 2^-9 = 0.2%); a round's forward and
# backward passes chain a few roundings, so its update may differ from float32's by about a
# percent of its size (largest seen: 0.66%, FedAvg-style servers 0.4%). A path that ignored the
# setting would differ by exactly 0 (checked too).
REL_TOL = 0.02


def _flat(params):
    return torch.cat([v.flatten() for _, v in sorted(params.items())])


def _init(algo, p0, fed):
    """The round-1 global parameters run_rounds starts from (an algorithm's own layout)."""
    gen = init_streams(Streams(3), None).torch_generator("init", 2)
    return _flat(opt_in(algo, OwnNetwork).init_global(p0, _fresh(p0), gen, fed.num_clients))


def _floats(tree):
    if isinstance(tree, dict):
        for v in tree.values():
            yield from _floats(v)
    elif isinstance(tree, torch.Tensor) and tree.is_floating_point():
        yield tree


# FedCGAN and FedCVAE train their own generative networks, not the tiny model:
# tests/algorithms/test_fedgen.py runs their bf16 round.
OWN_NETWORK = {n for n in ALGORITHMS if getattr(ALGORITHMS[n], "ARCH", "")}


@pytest.mark.parametrize("executor", ["sequential", "vectorised"])
@pytest.mark.parametrize("name", sorted(set(ALGORITHMS) - OWN_NETWORK))
def test_a_bf16_round_equals_the_fp32_round_to_bf16_rounding(name, executor, tiny):
    fed, apply, p0 = tiny
    algo = build_algorithm(name, **PARAMS.get(name, {}))
    runs = {}
    for precision in ("fp32", "bf16"):
        cfg = TrainConfig(**{**CFG, **CFG_FOR.get(name, {})}, precision=precision)
        runs[precision] = run_rounds(
            Run(algo, apply, cfg, p0, executor=executor, fresh_init=_fresh(p0)), fed, Streams(3)
        )
    if name == "fedevg":
        # FedEvg's round moves the server's synthetic images, x <- x - beta * mixed + noise (the
        # same noise in both runs); its classifier, refitted on them, barely moves in one round
        # (by 2e-10 on the CPU, by nothing on a GPU). The step's drift is beta * |mixed|.
        s32, s16 = runs["fp32"].server_state, runs["bf16"].server_state
        drift = s32["beta"] * s32["energy_grad_norm"]
        assert drift > 0
        rel = ((s16["x"] - s32["x"]).norm() / drift).item()
    else:
        start = _init(algo, p0, fed)
        d32 = _flat(runs["fp32"].global_params) - start
        d16 = _flat(runs["bf16"].global_params) - start
        assert d32.norm() > 0
        rel = ((d16 - d32).norm() / d32.norm()).item()
    assert 0 < rel <= REL_TOL, rel
    # Master weights, client states (personal models, optimiser-free carries) stay float32.
    state = runs["bf16"]
    assert {t.dtype for t in _floats(state.global_params)} == {torch.float32}
    assert {t.dtype for t in _floats(state.client_states)} <= {torch.float32, torch.float64}


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_the_layer_chain_kernels_cast_their_operands(momentum, tiny):
    """FedAvg's vectorised round on an MLP runs the hand-written kernels (fused SGD without
    momentum): they honour bf16 and keep the master weights float32."""
    fed, apply, p0 = tiny
    algo = build_algorithm("fedavg")
    runs = {
        p: run_rounds(
            Run(
                algo,
                apply,
                TrainConfig(**{**CFG, "momentum": momentum}, precision=p),
                p0,
                executor="vectorised",
            ),
            fed,
            Streams(1),
        )
        for p in ("fp32", "bf16")
    }
    assert runs["bf16"].executor_info["vectorised_path"] == "batched layer-chain kernels"
    d32, d16 = (_flat(runs[p].global_params) - _flat(p0) for p in ("fp32", "bf16"))
    assert 0 < ((d16 - d32).norm() / d32.norm()).item() <= REL_TOL
    assert {v.dtype for v in runs["bf16"].global_params.values()} == {torch.float32}


def test_the_forward_pass_alone_runs_in_bf16_and_returns_float32(tiny):
    fed, apply, p0 = tiny
    seen = []

    def probe(params, x):
        out = apply(params, x)
        seen.append(out.dtype)
        return out

    probe.module = apply.module
    out = with_precision(probe, "bf16")(p0, fed.x[:4])
    assert seen == [torch.bfloat16] and out.dtype == torch.float32
    assert with_precision(probe, "fp32") is probe


@pytest.mark.parametrize("key", ["precision", "eval_precision"])
def test_a_bad_value_names_the_key_and_the_valid_ones(key):
    with pytest.raises(ValueError, match=rf"training\.{key}.*{PRECISIONS}"):
        TrainConfig(**CFG, **{key: "fp16"})


def test_tf32_on_the_cpu_is_an_error_that_says_what_to_use(tiny, federation_factory):
    _, apply, p0 = tiny
    fed = federation_factory()  # on the CPU also where FEDBENCH_TEST_DEVICE puts `tiny` on a GPU
    p0 = {k: v.cpu() for k, v in p0.items()}
    cfg = TrainConfig(**CFG, precision="tf32")
    with pytest.raises(ValueError, match=r"training\.precision: tf32 .*CUDA.*cpu.*fp32.*bf16"):
        run_rounds(Run(build_algorithm("fedavg"), apply, cfg, p0), fed, Streams(0))


def test_evaluation_stays_float32_unless_asked(tiny):
    fed, apply, p0 = tiny
    cfg = dict(CFG, eval_every=1)
    algo = build_algorithm("fedavg")
    fp32 = run_rounds(Run(algo, apply, TrainConfig(**cfg), p0), fed, Streams(0))
    mixed = run_rounds(Run(algo, apply, TrainConfig(**cfg, precision="bf16"), p0), fed, Streams(0))
    both = run_rounds(
        Run(algo, apply, TrainConfig(**cfg, precision="bf16", eval_precision="bf16"), p0),
        fed,
        Streams(0),
    )
    # Same weights evaluated: the bf16-trained model scored in float32 twice gives one number;
    # scored in bf16 it moves by rounding.
    again = run_rounds(Run(algo, apply, TrainConfig(**cfg, precision="bf16"), p0), fed, Streams(0))
    assert mixed.records[-1]["summary"] == again.records[-1]["summary"]
    loss = lambda r: r.records[-1]["summary"]["global"]["loss"]["mean"]  # noqa: E731
    assert loss(both) != loss(mixed)
    assert loss(mixed) != loss(fp32)
