"""training.improved_clients: DQN-Fed's rho_t (eq. 29), the share of the round's sampled clients
whose training loss under the global model did not rise over the round."""

import pytest

from fedbench.algorithms import build_algorithm
from fedbench.engine.build import Run
from fedbench.engine.evaluate import client_losses
from fedbench.engine.loop import run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.rng import Streams

CFG = dict(batch_size=4, lr=2.0, local_epochs=1, clients_per_round=4)


def test_rho_is_the_share_of_clients_whose_loss_did_not_rise(tiny):
    fed, apply, p0 = tiny
    algo = build_algorithm("fedavg")
    run = run_rounds(
        Run(algo, apply, TrainConfig(rounds=1, improved_clients=True, **CFG), p0), fed, Streams(2)
    )
    splits = list(fed.train)
    before = client_losses(apply, p0, fed.x, fed.y, splits, 1024)
    after = client_losses(apply, run.global_params, fed.x, fed.y, splits, 1024)
    expected = sum(a <= b for a, b in zip(after, before)) / len(splits)
    (record,) = run.records
    assert record["improved_clients"] == pytest.approx(expected, abs=1e-6)
    assert record["improved_clients_rounds"] == [record["improved_clients"]]
    # lr 2 on the toy data: one client's loss rises in round 1, so the share is strictly between
    assert 0 < expected < 1, (before, after)


def test_every_round_since_the_last_record_is_kept_and_the_default_adds_nothing(tiny):
    fed, apply, p0 = tiny
    algo = build_algorithm("fedavg")
    cfg = dict(CFG, rounds=6, eval_every=3, clients_per_round=2)
    on = run_rounds(
        Run(algo, apply, TrainConfig(**cfg, improved_clients=True), p0), fed, Streams(1)
    )
    off = run_rounds(Run(algo, apply, TrainConfig(**cfg), p0), fed, Streams(1))
    assert [len(r["improved_clients_rounds"]) for r in on.records] == [3, 3]
    for r in on.records:
        assert r["improved_clients"] == r["improved_clients_rounds"][-1]
        assert all(v in (0.0, 0.5, 1.0) for v in r["improved_clients_rounds"])  # 2 sampled
    assert all("improved_clients" not in r for r in off.records)
    # The extra loss passes do not change training.
    for k in on.global_params:
        assert on.global_params[k].equal(off.global_params[k])


def test_a_bad_value_names_the_key():
    with pytest.raises(ValueError, match=r"training\.improved_clients: must be true or false"):
        TrainConfig(**CFG, rounds=1, improved_clients="yes")
