"""Choosing a personal protocol per client on a validation split, reporting its test metrics."""

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest
import torch

from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.opt_in import PersonalEvaluation
from fedbench.engine.federation import Federation
from fedbench.engine.loop import RunState, evaluate_round, select_per_client
from fedbench.engine.train_config import TrainConfig

CLASSES = 3
PROTOCOLS = ("c0", "c1", "c2")  # protocol ck: a model that predicts class k for every input


@dataclass(frozen=True)
class ConstantPredictors(PersonalEvaluation, Algorithm):
    """Personal protocol ck predicts class k, so its top-1 on a split is the share of label k."""

    personal_protocols: ClassVar[tuple[str, ...]] = PROTOCOLS
    selections: ClassVar[dict] = {"test_pick": (PROTOCOLS, "top1")}
    val_selections: ClassVar[dict] = {"val_pick": (PROTOCOLS, "top1")}

    def personal_params(self, protocol, global_params, client_state):
        bias = torch.zeros(CLASSES)
        bias[int(protocol[1:])] = 5.0
        return {"w": torch.zeros(2, CLASSES), "b": bias}


def apply(params, x):
    return x @ params["w"] + params["b"]


# Per client: (train, test, val) labels. Client 0: validation prefers c2, test prefers c0.
# Client 1: c1 and c2 tie on validation (1 of 2 each), so the smaller-λ-first rule picks c1.
# Client 2: no validation samples, so it falls back to the first candidate, c0.
LABELS = [
    ([0, 1], [0, 0, 0, 2], [2, 2, 0]),
    ([1, 2], [2, 2, 1, 0], [1, 2]),
    ([0, 0], [1, 1, 2, 0], []),
]


def federation(with_val: bool = True) -> Federation:
    y, train, test, val = [], [], [], []
    for tr, te, va in LABELS:
        for split, labels in ((train, tr), (test, te), (val, va)):
            split.append(np.arange(len(y), len(y) + len(labels)))
            y.extend(labels)
    x = np.zeros((len(y), 2), dtype=np.float32)
    return Federation.from_arrays(
        x,
        np.array(y),
        train,
        test,
        x[:0],
        np.zeros(0, dtype=np.int64),
        CLASSES,
        torch.device("cpu"),
        val=val if with_val else None,
    )


def record(fed: Federation) -> dict:
    params = {"w": torch.zeros(2, CLASSES), "b": torch.zeros(CLASSES)}
    state = RunState(params, {}, {i: {} for i in range(fed.num_clients)})
    cfg = TrainConfig(rounds=1, batch_size=2, lr=0.1, local_epochs=1, clients_per_round=1)
    return evaluate_round(ConstantPredictors(), apply, fed, state, cfg)


def test_val_selection_picks_best_validation_protocol_and_reports_its_test_metrics():
    out = record(federation())["clients"]
    expected_choice = []
    for _, _, va in LABELS:
        val_share = [np.mean(np.array(va) == k) if va else -np.inf for k in range(CLASSES)]
        expected_choice.append(int(np.argmax(val_share)))  # argmax: first of ties
    assert expected_choice == [2, 1, 0]  # the cases the labels were built for
    pick = out["val_pick"]
    assert pick["ids"] == [0, 1, 2] and pick["choice"] == expected_choice
    test_top1 = [np.mean(np.array(te) == k) for (_, te, _), k in zip(LABELS, expected_choice)]
    assert pick["top1"] == pytest.approx(test_top1)  # [0.25, 0.25, 0.25]
    for j, k in enumerate(expected_choice):
        assert pick["loss"][j] == out[PROTOCOLS[k]]["loss"][j]  # the chosen protocol's test row
    # The test-chosen protocol differs: it sees the test labels (0.75, 0.5, 0.5).
    assert out["test_pick"]["top1"] == pytest.approx([0.75, 0.5, 0.5])
    assert out["test_pick"]["choice"] == [0, 2, 1]


def test_no_validation_split_records_nothing_extra():
    rec = record(federation(with_val=False))
    assert "val_pick" not in rec["clients"] and "val_pick" not in rec["summary"]
    assert set(rec["clients"]) == {"global", *PROTOCOLS, "test_pick"}


def test_select_by_another_split_with_ties_and_missing_clients():
    def res(ids, top1):
        return {
            "ids": ids,
            "n": [4] * len(ids),
            "top1": top1,
            "loss": [0.0] * len(ids),
            "top5": [1.0] * len(ids),
            "ece": [0.0] * len(ids),
            "mce": [0.0] * len(ids),
        }

    test = [res([0, 1, 2], [0.9, 0.1, 0.3]), res([0, 1, 2], [0.2, 0.8, 0.6])]
    val = [res([0, 1], [0.5, 0.5]), res([0, 1], [0.25, 0.75])]  # client 2 has no validation
    out = select_per_client(test, "top1", by=val)
    assert out["choice"] == [0, 1, 0] and out["top1"] == [0.9, 0.8, 0.3]
    assert select_per_client(test, "top1")["choice"] == [0, 1, 1]  # test-chosen, for contrast
