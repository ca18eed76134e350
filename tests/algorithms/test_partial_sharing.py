"""FedPer, LG-FedAvg, FedRep: what they share, what stays local, and equivalences to FedAvg."""

import pytest
import torch

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import ClientContext
from fedbench.algorithms.partial_sharing import aggregate_shared
from fedbench.engine.batches import batch_plan
from fedbench.engine.build import Run
from fedbench.engine.functional import sgd_init, sgd_step
from fedbench.engine.loop import run_rounds, sample_clients
from fedbench.engine.train_config import TrainConfig
from fedbench.rng import Streams

CFG = dict(batch_size=4, lr=0.1, local_epochs=1, momentum=0.9, weight_decay=1e-3)
SHARED = {"fedper": "body.", "fedrep": "body.", "lgfedavg": "head."}


def _run(algo, tiny, rounds=3, m=3):
    fed, apply, p0 = tiny
    cfg = TrainConfig(rounds=rounds, clients_per_round=m, **CFG)
    return run_rounds(Run(algo, apply, cfg, p0), fed, Streams(3))


@pytest.mark.parametrize("name", ["fedper", "lgfedavg"])
def test_round1_shared_part_equals_fedavg(name, tiny):
    # Round 1: every client's local part is still the global init's, so training is FedAvg's.
    part = _run(build_algorithm(name), tiny, rounds=1)
    avg = _run(build_algorithm("fedavg"), tiny, rounds=1)
    for k, v in part.global_params.items():
        if k.startswith(SHARED[name]):
            torch.testing.assert_close(v, avg.global_params[k], rtol=0, atol=1e-6)
        else:
            assert torch.equal(v, tiny[2][k])


@pytest.mark.parametrize("name", sorted(SHARED))
def test_only_shared_keys_sent_and_unshared_global_never_changes(name, tiny):
    fed, apply, p0 = tiny
    algo = build_algorithm(name)
    state = algo.init_client_state(0, p0, None)
    ctx = ClientContext(client_id=0, round=1, lr=0.1, rounds=3, num_train=9, num_steps=3)
    start, carry = algo.client_begin(p0, {}, state, ctx)
    trained = {k: v + 1.0 for k, v in start.items()}
    message, new_state = algo.client_end(p0, trained, carry, state, ctx)
    shared = {k for k in p0 if k.startswith(SHARED[name])}
    assert shared and set(message["delta"]) == shared
    assert set(new_state["local"]) == set(p0) - shared
    assert all(torch.equal(new_state["local"][k], trained[k]) for k in new_state["local"])

    out = _run(algo, tiny)
    for k, v in out.global_params.items():
        assert torch.equal(v, p0[k]) != (k in shared), k


@pytest.mark.parametrize("name", sorted(SHARED))
def test_personal_model_joins_global_shared_and_own_local_part(name, tiny):
    fed, apply, p0 = tiny
    out = _run(build_algorithm(name), tiny, rounds=2, m=1)
    algo = build_algorithm(name)
    trained = {c for t in (1, 2) for c in sample_clients(Streams(3), t, 4, 1)}
    assert len(trained) < 4
    for c, state in out.client_states.items():
        personal = algo.personal_params("personal", out.global_params, state)
        for k, v in personal.items():
            expect = out.global_params[k] if k.startswith(SHARED[name]) else state["local"][k]
            assert torch.equal(v, expect)
            # A never-sampled client keeps the global initialisation's local part (release).
            if c not in trained and not k.startswith(SHARED[name]):
                assert torch.equal(v, p0[k])


def test_aggregate_updates_only_sent_keys_by_hand():
    g = {"body.w": torch.tensor([1.0, 1.0]), "head.w": torch.tensor([5.0])}
    messages = {
        "delta": {"body.w": torch.tensor([[4.0, 0.0], [0.0, 8.0]])},
        "weight": torch.tensor([1.0, 3.0], dtype=torch.float64),
    }
    new = aggregate_shared(g, messages)
    # body: 1 + (1 * (4, 0) + 3 * (0, 8)) / 4 = (2, 7); head untouched.
    torch.testing.assert_close(new["body.w"], torch.tensor([2.0, 7.0]))
    assert torch.equal(new["head.w"], g["head.w"])


def test_fedrep_phases_by_hand():
    algo = build_algorithm("fedrep", tau=2)
    assert algo.local_epochs(1) == 3
    ctx = ClientContext(0, 1, 0.1, 3, num_train=4, num_steps=6, steps_per_epoch=2)
    noise = algo.step_noise(None, ctx, {})
    # E = 6 / 2 - tau = 1 head epoch (2 steps), then tau = 2 body epochs (4 steps).
    assert noise.tolist() == [0, 0, 1, 1, 1, 1]
    mask = algo.update_mask({"body.w": 0, "head.w": 0}, {}, noise[0])
    assert (mask["body.w"].item(), mask["head.w"].item()) == (0.0, 1.0)
    with pytest.raises(ValueError, match="local_epochs"):
        algo.step_noise(None, ClientContext(0, 1, 0.1, 3, 4, num_steps=5), {})


def test_fedrep_round_equals_fedavg_sgd_restricted_to_each_phase(tiny):
    # Every client: FedAvg's local SGD on the head for E epochs, then on the body for tau epochs
    # (frozen part: no step, no momentum, no weight decay); the server averages bodies only.
    fed, apply, p0 = tiny
    algo = build_algorithm("fedrep", tau=2)
    out = _run(algo, tiny, rounds=1, m=4)
    streams, bodies = Streams(3), []
    for c in range(4):
        plan = batch_plan(fed.train[c], 4, streams.generator("batches", 1, c), epochs=3)
        p, buf = dict(p0), sgd_init(p0)
        for s, idx in enumerate(plan):
            q = {k: v.clone().requires_grad_(True) for k, v in p.items()}
            loss = torch.nn.functional.cross_entropy(apply(q, fed.x[idx]), fed.y[idx])
            grads = dict(zip(q, torch.autograd.grad(loss, list(q.values()))))
            on = "head." if s < 3 else "body."
            mask = {k: torch.tensor(float(k.startswith(on))) for k in p}
            p, buf = sgd_step(p, grads, buf, 0.1, 0.9, 1e-3, mask)
        for k, v in out.client_states[c]["local"].items():
            torch.testing.assert_close(v, p[k], rtol=0, atol=1e-6)
        bodies.append(p)
    for k, v in out.global_params.items():
        expect = torch.stack([b[k] for b in bodies]).mean(0) if k.startswith("body.") else p0[k]
        torch.testing.assert_close(v, expect, rtol=0, atol=1e-6)


def test_partial_sharing_needs_body_and_head():
    with pytest.raises(ValueError, match="body"):
        build_algorithm("fedper").init_client_state(0, {"w": torch.zeros(1)}, None)
