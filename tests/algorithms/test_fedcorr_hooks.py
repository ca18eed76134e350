"""The engine hooks FedCorr added: clients chosen by the algorithm, labels of a client's own
that it trains on, and client state refreshed after the server step."""

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

import pytest
import torch

from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.opt_in import ClientSelection
from fedbench.engine.build import Run
from fedbench.engine.loop import run_rounds, sample_clients
from fedbench.engine.train_config import TrainConfig
from fedbench.rng import Streams

CFG = dict(rounds=3, batch_size=4, lr=0.1, local_epochs=1, clients_per_round=2, eval_every=1)


@dataclass(frozen=True)
class OwnLabels(ClientSelection, Algorithm):
    """Clients 0 and 2 train on labels of their own, (y + 1) mod 3, kept in their state."""

    name: ClassVar[str] = "own_labels"

    def init_client_state(self, client_id, global_params, fresh):
        return {"own": client_id in (0, 2)}

    def client_labels(self, client_state):
        return client_state.get("labels")

    def refresh_clients(self, server_state, round_):
        return (0, 2) if round_ == 1 else ()

    def refresh_client(self, global_params, server_state, client_state, ctx):
        x, y, idx = ctx.split
        return {**client_state, "labels": (y[idx] + 1) % 3}


@pytest.mark.parametrize("executor", ["sequential", "vectorised"])
def test_clients_train_on_their_own_labels_after_a_refresh(tiny, executor):
    fed, apply, p0 = tiny
    cfg = TrainConfig(**{**CFG, "clients_per_round": 4})
    y0 = fed.y.clone()
    run = run_rounds(Run(OwnLabels(), apply, cfg, p0, executor=executor), fed, Streams(1))
    for cid in (0, 2):
        assert torch.equal(run.client_states[cid]["labels"], (fed.y[fed.train[cid]] + 1) % 3)
    # Reference: FedAvg for round 1 on the pool's labels, then on a pool with those rows changed.
    y = fed.y.clone()
    for cid in (0, 2):
        y[fed.train[cid]] = (y[fed.train[cid]] + 1) % 3
    first = run_rounds(
        Run(Algorithm(), apply, dataclasses.replace(cfg, rounds=1), p0, executor=executor),
        fed,
        Streams(1),
    )
    relabelled = dataclasses.replace(fed, y=y)
    ref = run_rounds(
        Run(Algorithm(), apply, cfg, p0, executor=executor), relabelled, Streams(1), resume=first
    )
    for k in p0:
        torch.testing.assert_close(run.global_params[k], ref.global_params[k], atol=1e-6, rtol=0)
    assert torch.equal(fed.y, y0)  # the caller's pool (and so every test split) is untouched


@dataclass(frozen=True)
class FirstTwo(ClientSelection, Algorithm):
    name: ClassVar[str] = "first_two"

    def select_clients(self, ctx, server_state):
        return [0, 1] if ctx.round % 2 else super().select_clients(ctx, server_state)


def test_clients_chosen_by_the_algorithm_else_the_default_draw(tiny):
    fed, apply, p0 = tiny
    picked = {}

    @dataclass(frozen=True)
    class Probe(FirstTwo):
        def aggregate(self, global_params, messages, server_state, ctx):
            picked[ctx.round] = ctx.client_ids
            return super().aggregate(global_params, messages, server_state, ctx)

    run_rounds(Run(Probe(), apply, TrainConfig(**CFG), p0), fed, Streams(7))
    assert picked[1] == picked[3] == (0, 1)
    assert list(picked[2]) == sample_clients(Streams(7), 2, 4, 2)


def test_a_bad_choice_of_clients_is_refused(tiny):
    fed, apply, p0 = tiny

    @dataclass(frozen=True)
    class Twice(ClientSelection, Algorithm):
        def select_clients(self, ctx, server_state):
            return [1, 1]

    with pytest.raises(ValueError, match="select_clients"):
        run_rounds(Run(Twice(), apply, TrainConfig(**CFG), p0), fed, Streams(7))
