"""FedFomo: the first-order weights and the start model by hand, ε-greedy downloads, no
downloads is local training alone, and the executors agree."""

import pytest
import torch

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import Algorithm, ClientContext
from fedbench.algorithms.fedfomo import OWN, fomo_weights
from fedbench.algorithms.opt_in import CandidateModels
from fedbench.engine.batches import batch_plan
from fedbench.engine.build import Run
from fedbench.engine.loop import run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.rng import Streams

CFG = TrainConfig(rounds=3, batch_size=4, lr=0.1, local_epochs=1, clients_per_round=3)


def test_weights_by_hand():
    # raw: (1 - 0.5)/1 = 0.5; (1 - 1.5) < 0 -> 0; (1 - 0.8)/0.5 = 0.4; normalised by 0.9.
    got = fomo_weights(1.0, [0.5, 1.5, 0.8], [1.0, 2.0, 0.5])
    assert got == pytest.approx([5 / 9, 0.0, 4 / 9], rel=1e-12)
    assert fomo_weights(1.0, [2.0], [1.0]) == [0.0]  # no better model: keep one's own


def test_start_model_and_affinity_by_hand():
    algo = build_algorithm("fedfomo", models=2)
    own = {"w": torch.tensor([0.0, 0.0])}
    server = {"models": {1: {"w": torch.tensor([1.0, 0.0])}, 2: {"w": torch.tensor([0.0, 2.0])}}}
    state = {"model": own, "affinity": {}}
    ctx = ClientContext(
        client_id=0, round=2, lr=0.1, rounds=3, num_train=4, num_steps=1,
        candidates=(OWN, 1, 2), candidate_losses=(1.0, 0.5, 0.6),
    )  # fmt: skip
    start, carry = algo.client_begin({}, server, state, ctx)
    # w_1 = (1 - 0.5)/‖(1, 0)‖ = 0.5, w_2 = (1 - 0.6)/‖(0, 2)‖ = 0.2 -> 5/7, 2/7.
    torch.testing.assert_close(start["w"], torch.tensor([5 / 7, 4 / 7]))
    _, new_state = algo.client_end({}, start, carry, state, ctx)
    assert new_state["affinity"].keys() == {1, 2}
    assert abs(new_state["affinity"][1] - 5 / 7) < 1e-12
    assert abs(new_state["affinity"][2] - 2 / 7) < 1e-12


def test_downloads_greedy_by_affinity_or_random():
    server = {"models": {j: {"w": torch.tensor([float(j)])} for j in range(5)}}
    state = {"model": {"w": torch.tensor([0.0])}, "affinity": {1: 0.1, 3: 0.9, 4: 0.5}}
    greedy = build_algorithm("fedfomo", models=2, epsilon=0.0)
    pairs = greedy.candidates(torch.Generator(), 0, 1, {}, server, state)
    assert [k for k, _ in pairs] == [OWN, 3, 4]
    explore = build_algorithm("fedfomo", models=3, epsilon=1.0, epsilon_decay=0.0)
    for seed in range(5):
        keys = [k for k, _ in explore.candidates(torch.Generator().manual_seed(seed), 2, 4, {},
                                                 server, state)]  # fmt: skip
        assert keys[0] == OWN and len(set(keys[1:])) == 3 and 2 not in keys[1:]


def test_no_downloads_is_local_training_alone(tiny):
    fed, apply, p0 = tiny
    cfg = TrainConfig(rounds=2, batch_size=4, lr=0.1, local_epochs=1, clients_per_round=4)
    out = run_rounds(Run(build_algorithm("fedfomo", models=0), apply, cfg, p0), fed, Streams(6))
    for c in (0, 3):
        p = dict(p0)
        for t in (1, 2):
            plan = batch_plan(fed.train[c], 4, Streams(6).generator("batches", t, c), epochs=1)
            for idx in plan:
                q = {k: v.clone().requires_grad_(True) for k, v in p.items()}
                loss = torch.nn.functional.cross_entropy(apply(q, fed.x[idx]), fed.y[idx])
                grads = torch.autograd.grad(loss, list(q.values()))
                p = {k: v - 0.1 * g for (k, v), g in zip(p.items(), grads)}
        for k, v in p.items():
            torch.testing.assert_close(out.client_states[c]["model"][k], v, rtol=0, atol=1e-6)


def test_sequential_and_vectorised_agree(tiny, assert_executors_agree):
    fed, apply, p0 = tiny
    fed.train[1] = fed.train[1][:5]  # fewer steps and a short last batch (padded under vmap)
    algo = build_algorithm("fedfomo", models=2)
    seq, vec = (
        run_rounds(Run(algo, apply, CFG, p0, executor=ex), fed, Streams(8))
        for ex in ("sequential", "vectorised")
    )
    assert_executors_agree(seq, vec)
    for c, state in seq.client_states.items():
        assert state["affinity"].keys() == vec.client_states[c]["affinity"].keys()
        for k, v in state["model"].items():
            torch.testing.assert_close(v, vec.client_states[c]["model"][k], rtol=0, atol=1e-5)


def test_engine_scores_candidates_on_the_client_split(tiny):
    fed, apply, p0 = tiny
    seen = {}

    class Probe(CandidateModels, Algorithm):
        def candidates(self, rng, client_id, round_, global_params, server_state, client_state):
            return [(7, p0)]

        def client_begin(self, global_params, server_state, client_state, ctx):
            seen[ctx.client_id] = (ctx.candidates, ctx.candidate_losses)
            return super().client_begin(global_params, server_state, client_state, ctx)

    cfg = TrainConfig(rounds=1, batch_size=4, lr=0.1, local_epochs=1, clients_per_round=4)
    run_rounds(Run(Probe(), apply, cfg, p0, executor="sequential"), fed, Streams(1))
    assert sorted(seen) == [0, 1, 2, 3]
    for c, (keys, losses) in seen.items():
        idx = fed.train[c]  # no validation split here: the training split
        expected = torch.nn.functional.cross_entropy(apply(p0, fed.x[idx]), fed.y[idx]).item()
        assert keys == (7,) and losses[0] == pytest.approx(expected, rel=1e-5)
