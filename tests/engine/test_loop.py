import json
import math

import pytest
import torch

from fedbench.algorithms import build_algorithm
from fedbench.engine.batches import batch_plan, num_local_steps
from fedbench.engine.build import Run
from fedbench.engine.loop import Callbacks, run_rounds, sample_clients
from fedbench.engine.train_config import TrainConfig
from fedbench.rng import Streams

CFG = dict(rounds=3, batch_size=4, lr=0.1, local_epochs=1, clients_per_round=2)


def test_one_client_one_step_equals_one_sgd_step(tiny):
    fed, apply, p0 = tiny
    # One client, one batch holding its whole training split: FedAvg = one SGD step on it.
    fed.train, fed.test = fed.train[:1], fed.test[:1]
    cfg = TrainConfig(
        rounds=1, batch_size=len(fed.train[0]), lr=0.5, local_epochs=1, clients_per_round=1
    )
    state = run_rounds(Run(build_algorithm("fedavg"), apply, cfg, p0), fed, Streams(0))
    idx = fed.train[0]
    params = {k: v.clone().requires_grad_(True) for k, v in p0.items()}
    loss = torch.nn.functional.cross_entropy(apply(params, fed.x[idx]), fed.y[idx])
    grads = torch.autograd.grad(loss, list(params.values()))
    for (k, v), g in zip(p0.items(), grads):
        torch.testing.assert_close(state.global_params[k], v - 0.5 * g, rtol=0, atol=1e-6)


def test_same_seed_same_records_other_seed_differs(tiny):
    fed, apply, p0 = tiny
    cfg = TrainConfig(**CFG)
    runs = [
        run_rounds(Run(build_algorithm("fedavg"), apply, cfg, p0), fed, Streams(s))
        for s in (1, 1, 2)
    ]
    dump = [json.dumps(r.records, sort_keys=True) for r in runs]
    assert dump[0] == dump[1]
    assert dump[0] != dump[2]


def test_records_hold_per_client_values_and_pack(tiny):
    fed, apply, p0 = tiny
    state = run_rounds(
        Run(build_algorithm("fedavg"), apply, TrainConfig(**CFG), p0), fed, Streams(0)
    )
    assert [r["round"] for r in state.records] == [1, 2, 3]
    last = state.records[-1]
    clients = last["clients"]["global"]
    assert clients["ids"] == [0, 1, 2, 3] and clients["n"] == [3, 3, 3, 3]
    assert last["summary"]["global"]["top1"]["mean"] == pytest.approx(
        sum(clients["top1"]) / 4, abs=1e-5
    )
    assert last["global_test"]["n"] == 20


def test_callbacks_hear_every_record_and_every_round(tiny):
    fed, apply, p0 = tiny
    cfg = TrainConfig(**{**CFG, "rounds": 4, "eval_every": 2})
    heard, rounds = [], []
    state = run_rounds(
        Run(build_algorithm("fedavg"), apply, cfg, p0),
        fed,
        Streams(0),
        Callbacks(
            on_record=heard.append,
            after_round=lambda st, loss: rounds.append((st.round, len(st.records), loss)),
        ),
    )
    assert heard == state.records and [r["round"] for r in heard] == [2, 4]
    # after_round comes after the round's record is appended, once a round, with its loss.
    assert [(t, n) for t, n, _ in rounds] == [(1, 0), (2, 1), (3, 1), (4, 2)]
    losses = [loss for t, _, loss in rounds if t in (2, 4)]
    assert losses == pytest.approx([r["train_loss"] for r in heard], rel=1e-5)
    # Without callbacks the same run gives the same records.
    quiet = run_rounds(Run(build_algorithm("fedavg"), apply, cfg, p0), fed, Streams(0))
    assert json.dumps(quiet.records) == json.dumps(state.records)


def test_divergence_is_recorded_and_stops(tiny):
    fed, apply, p0 = tiny
    fed.x = fed.x * 1e30  # logits overflow to inf: the loss is not finite
    cfg = TrainConfig(**{**CFG, "lr": 1e10})
    state = run_rounds(Run(build_algorithm("fedavg"), apply, cfg, p0), fed, Streams(0))
    assert state.status == "diverged" and state.diverged_round == 1
    assert state.records == [
        {"round": 1, "status": "diverged", "reason": state.records[0]["reason"]}
    ]


def test_sampling_is_seeded_and_independent_of_call_order():
    s = Streams(3)
    a = [sample_clients(s, t, 50, 5) for t in (1, 2, 3)]
    b = [sample_clients(Streams(3), t, 50, 5) for t in (3, 2, 1)][::-1]
    assert a == b and all(len(set(x)) == 5 for x in a)


def test_batch_plan_covers_each_epoch_and_keeps_short_last_batch():
    idx = torch.arange(10, 20)
    rng = Streams(0).generator("batches", 1, 0)
    plan = batch_plan(idx, 4, rng, epochs=2)
    assert [len(b) for b in plan] == [4, 4, 2, 4, 4, 2]
    assert sorted(torch.cat(plan[:3]).tolist()) == list(range(10, 20))
    assert num_local_steps(10, 4, None, 7) == 7
    assert len(batch_plan(idx, 4, rng, epochs=None, steps=7)) == 7


def test_train_all_clients_aggregates_only_sampled(tiny):
    from dataclasses import dataclass
    from typing import ClassVar

    from fedbench.algorithms.base import Algorithm

    seen = {}

    @dataclass(frozen=True)
    class AllTrain(Algorithm):
        train_all_clients: ClassVar[bool] = True

        def aggregate(self, global_params, messages, server_state, ctx):
            seen["n"] = len(messages["weight"])
            seen["ids"] = ctx.client_ids
            return super().aggregate(global_params, messages, server_state, ctx)

    fed, apply, p0 = tiny
    cfg = TrainConfig(**{**CFG, "rounds": 1})
    run_rounds(Run(AllTrain(), apply, cfg, p0), fed, Streams(0))
    assert seen["n"] == 2 and len(seen["ids"]) == 2


@pytest.mark.parametrize(
    "bad, key",
    [
        ({"rounds": 0}, "rounds"),
        ({"lr": -1.0}, "lr"),
        ({"participation": 1.5, "clients_per_round": None}, "participation"),
        ({"lr_decay": 0}, "lr_decay"),
    ],
)
def test_bad_training_values_name_the_key(bad, key):
    with pytest.raises(ValueError, match=key):
        TrainConfig(**{**CFG, **bad})


def test_unknown_training_key_is_named():
    with pytest.raises(ValueError, match="roundz"):
        TrainConfig.from_dict({**CFG, "roundz": 3})


def test_lr_decay_per_round():
    cfg = TrainConfig(**{**CFG, "lr_decay": 0.5})
    assert [cfg.lr_at(t) for t in (1, 2, 3)] == [0.1, 0.05, 0.025]
    assert (
        TrainConfig(**{**CFG, "clients_per_round": None, "participation": 0.1}).sampled_per_round(7)
        == 1
    )
    assert math.isclose(cfg.lr_at(1), 0.1)
