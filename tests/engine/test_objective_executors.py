"""Under every training objective the vectorised executor gives the sequential one's numbers,
for algorithms whose losses reach it through different hooks (spec aaggff.md §13.9-13.10)."""

import numpy as np
import pytest
import torch

from fedbench.algorithms import build_algorithm
from fedbench.engine.build import Run
from fedbench.engine.federation import Federation
from fedbench.engine.functional import make_apply, params_of
from fedbench.engine.loop import run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.models import build_model
from fedbench.objectives import build_objective
from fedbench.rng import Streams

CFG = dict(
    rounds=2,
    batch_size=4,
    lr=0.1,
    local_epochs=1,
    clients_per_round=3,
    momentum=0.9,
    weight_decay=1e-3,
    eval_every=1,
)
# FedAvg (data_loss), q-FedAvg and AAggFF (pre-loss), TERM and PropFair (fair_baselines.py),
# Per-FedAvg (its own half-batch loss).
ALGOS = {
    "fedavg": {},
    "qfedavg": {},
    "aaggff_d": {},
    "term": {},
    "propfair": {},
    "perfedavg": {},
}


def _federation(classes: int, seq: bool = False) -> Federation:
    """4 clients of uneven size (short last batches, fewer steps) with 75/25 splits."""
    rng = np.random.default_rng(0)
    sizes = [12, 9, 7, 12]
    n = sum(sizes)
    if seq:  # [n, 2, 5]: input ids, then targets with some specials (0-3)
        ids = rng.integers(0, classes, size=(n, 6))
        x = np.stack([ids[:, :-1], ids[:, 1:]], axis=1).astype(np.float32)
        y = ids[:, -1]
    else:
        w = rng.normal(size=(6, classes))
        x = rng.normal(size=(n, 6)).astype(np.float32)
        y = (x @ w + rng.normal(size=(n, classes))).argmax(1)
    bounds = np.cumsum([0, *sizes])
    train, test = [], []
    for a, b in zip(bounds, bounds[1:]):
        cut = a + (b - a) * 3 // 4
        train.append(np.arange(a, cut))
        test.append(np.arange(cut, b))
    return Federation.from_arrays(x, y, train, test, x[:0], y[:0], classes, torch.device("cpu"))


CASES = {
    "bce_logit": lambda: (_federation(2), build_model("mlp", (6,), 1, init_seed=1, hidden=5)),
    "class_weighted_ce": lambda: (
        _federation(3),
        build_model("mlp", (6,), 3, init_seed=1, hidden=5),
    ),
    "token_ce": lambda: (
        _federation(12, seq=True),
        build_model(
            "stacked_lstm",
            (2, 5),
            12,
            init_seed=1,
            vocab_size=12,
            embed_dim=4,
            hidden=6,
            layers=1,
            output="all",
        ),
    ),
}


# Per-FedAvg's adaptation step (a gradient inside the loss) through the unrolled LSTM under vmap
# takes ~15 s on a CPU; its loss reaches every objective the same way (batch_loss with its halves
# as the mask), tested under the other two.
COMBOS = [
    (o, a) for o in sorted(CASES) for a in sorted(ALGOS) if (o, a) != ("token_ce", "perfedavg")
]


@pytest.mark.parametrize(("objective", "name"), COMBOS)
def test_executors_agree_under_objective(objective, name, assert_executors_agree):
    fed, model = CASES[objective]()
    apply, p0 = make_apply(model), params_of(model)
    algo = build_algorithm(name, **ALGOS[name])
    cfg = TrainConfig(**CFG, objective=objective)
    runs = {
        ex: run_rounds(Run(algo, apply, cfg, p0, executor=ex), fed, Streams(5))
        for ex in ("sequential", "vectorised")
    }
    seq, vec = runs["sequential"], runs["vectorised"]
    assert seq.status == vec.status == "ok"
    assert_executors_agree(seq, vec)


def test_objective_changes_training():
    """A weighting objective is not silently plain cross-entropy: FedAvg ends elsewhere."""
    fed, model = CASES["class_weighted_ce"]()
    apply, p0 = make_apply(model), params_of(model)
    algo = build_algorithm("fedavg")
    ends = [
        run_rounds(
            Run(algo, apply, TrainConfig(**CFG, objective=o), p0, executor="sequential"),
            fed,
            Streams(5),
        ).global_params
        for o in ("cross_entropy", "class_weighted_ce")
    ]
    assert any(not torch.equal(ends[0][k], ends[1][k]) for k in ends[0])


def test_bce_logit_reports_auroc_from_one_logit():
    fed, model = CASES["bce_logit"]()
    state = run_rounds(
        Run(
            build_algorithm("fedavg"),
            make_apply(model),
            TrainConfig(**CFG, objective="bce_logit"),
            params_of(model),
            executor="sequential",
        ),
        fed,
        Streams(5),
    )
    res = state.records[-1]["clients"]["global"]
    assert "auroc" in res and len(res["auroc"]) == 4
    assert build_objective("bce_logit").outputs(fed.num_classes) == 1
