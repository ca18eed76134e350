"""Exact per-client AUROC (Mann-Whitney U, ties one half) and its place in evaluation records."""

import math
import warnings

import numpy as np
import pytest
import torch

from fedbench.metrics.classification import auroc_per_group
from fedbench.metrics.fairness import auroc
from fedbench.objectives import binary_score

metrics = pytest.importorskip("sklearn.metrics")


def _one(scores, labels) -> float:
    s = torch.as_tensor(scores, dtype=torch.float64)
    return float(auroc_per_group(s, torch.as_tensor(labels) == 1, torch.zeros(len(s)), 1)[0])


def test_tiny_case_by_hand():
    # Positives 0.9, 0.3; negatives 0.5, 0.3, 0.1. Pairs (pos > neg): 0.9 beats all 3; 0.3 beats
    # 0.1, ties 0.3 (one half), loses to 0.5 -> (3 + 1.5) / 6 = 0.75.
    assert _one([0.9, 0.5, 0.3, 0.3, 0.1], [1, 0, 1, 0, 0]) == pytest.approx(0.75)
    assert _one([0.1, 0.9], [1, 0]) == 0.0 and _one([0.1, 0.9], [0, 1]) == 1.0
    assert _one([0.4, 0.4, 0.4], [1, 0, 0]) == 0.5  # all tied


@pytest.mark.parametrize("seed", range(5))
def test_matches_sklearn_on_random_and_tied_scores(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 200))
    y = rng.integers(0, 2, n)
    y[:2] = [0, 1]
    continuous = rng.normal(size=n) + y
    tied = np.round(continuous, 0)  # few distinct values: many ties across classes
    for s in (continuous, tied):
        assert _one(s, y) == pytest.approx(metrics.roc_auc_score(y, s), abs=1e-12)
        assert auroc(s, y) == pytest.approx(metrics.roc_auc_score(y, s), abs=1e-12)


def test_groups_are_independent_and_one_class_groups_are_nan():
    rng = np.random.default_rng(7)
    owner = rng.integers(0, 4, 300)
    y = rng.integers(0, 2, 300)
    y[owner == 2] = 1  # group 2 has positives only
    s = np.round(rng.normal(size=300) + 0.5 * y, 1)
    got = auroc_per_group(
        torch.as_tensor(s), torch.as_tensor(y) == 1, torch.as_tensor(owner), 5
    ).tolist()
    for g in (0, 1, 3):
        m = owner == g
        assert got[g] == pytest.approx(metrics.roc_auc_score(y[m], s[m]), abs=1e-12)
    assert math.isnan(got[2]) and math.isnan(got[4])  # one class; no samples
    # sklearn: undefined too (1.2, the release's, raises; recent versions warn and give NaN).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ref = metrics.roc_auc_score(y[owner == 2], s[owner == 2])
        except ValueError:
            ref = math.nan
    assert math.isnan(ref)


def test_non_finite_score_gives_nan():
    assert math.isnan(_one([0.1, float("nan"), 0.3], [0, 1, 1]))


def test_binary_score_only_for_two_classes():
    logits = torch.tensor([[0.0, 2.0], [1.0, -1.0]])
    assert binary_score(logits).tolist() == [2.0, -2.0]
    assert binary_score(torch.zeros(3, 5)) is None


def test_evaluation_records_auroc_for_binary_models_only():
    from fedbench.engine.evaluate import (
        evaluate_clients_each,
        evaluate_clients_shared,
        evaluate_global,
    )

    g = torch.Generator().manual_seed(0)
    x = torch.randn(60, 3, generator=g)
    y = (x[:, 0] + 0.5 * torch.randn(60, generator=g) > 0).long()
    y[40:50] = 1  # client 2: one class
    w = torch.tensor([[0.3, -0.2, 0.1], [1.0, 0.4, -0.3]])

    def apply(params, xb):
        return xb @ params["w"].T

    idx = [torch.arange(0, 20), torch.arange(20, 40), torch.arange(40, 50), torch.arange(0)]
    shared = evaluate_clients_shared(apply, {"w": w}, x, y, idx, 7)
    each = evaluate_clients_each(apply, [{"w": w}] * 4, x, y, idx, 7)
    score = (x @ (w[1] - w[0])).numpy()
    for j in range(2):
        want = metrics.roc_auc_score(y[idx[j]].numpy(), score[idx[j].numpy()])
        assert shared["auroc"][j] == pytest.approx(want, abs=1e-6)
        assert each["auroc"][j] == pytest.approx(want, abs=1e-6)
    assert shared["ids"] == [0, 1, 2] and math.isnan(shared["auroc"][2])
    assert math.isnan(each["auroc"][2])
    glob = evaluate_global(apply, {"w": w}, x, y, 7)
    assert glob["auroc"] == pytest.approx(metrics.roc_auc_score(y.numpy(), score), abs=1e-6)
    # A 3-class model: no auroc at all (multiclass AUROC is not defined here).
    w3 = torch.randn(3, 3, generator=g)
    assert "auroc" not in evaluate_clients_shared(apply, {"w": w3}, x, y, idx, 7)
