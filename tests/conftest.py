"""Shared fixtures: a tiny federation that trains in milliseconds."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

from fedbench.config import load_catalog  # noqa: E402
from fedbench.engine.federation import Federation  # noqa: E402
from fedbench.engine.functional import make_apply, params_of  # noqa: E402
from fedbench.models import build_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# FEDBENCH_TEST_DEVICE=cuda puts the tiny federation and model on that device (default cpu), so
# the executor and precision tests run there (README: "On a GPU"); other tests stay on the CPU.
TEST_DEVICE = torch.device(os.environ.get("FEDBENCH_TEST_DEVICE", "cpu"))


def make_federation(
    num_clients: int = 4,
    per_client: int = 12,
    dim: int = 6,
    classes: int = 3,
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> Federation:
    """Linearly separable-ish toy data split evenly into clients with 75/25 train/test."""
    rng = np.random.default_rng(seed)
    n = num_clients * per_client
    w = rng.normal(size=(dim, classes))
    x = rng.normal(size=(n, dim)).astype(np.float32)
    y = (x @ w).argmax(1).astype(np.int64)
    idx = np.arange(n).reshape(num_clients, per_client)
    cut = per_client * 3 // 4
    x_test = rng.normal(size=(20, dim)).astype(np.float32)
    y_test = (x_test @ w).argmax(1).astype(np.int64)
    return Federation.from_arrays(
        x,
        y,
        [r[:cut] for r in idx],
        [r[cut:] for r in idx],
        x_test,
        y_test,
        classes,
        torch.device(device),
    )


@pytest.fixture
def tiny():
    """(federation, apply, initial params) for a 1-hidden-layer MLP on toy data, on TEST_DEVICE."""
    fed = make_federation(device=TEST_DEVICE)
    model = build_model("mlp", (6,), 3, init_seed=1, hidden=5).to(TEST_DEVICE)
    return fed, make_apply(model), params_of(model)


@pytest.fixture
def federation_factory():
    """`make_federation` itself, for tests that need a differently shaped federation."""
    return make_federation


@pytest.fixture(scope="module")
def catalog():
    """The project's catalog (config/config.yaml), loaded once per test module."""
    return load_catalog(ROOT / "config" / "config.yaml")


def _assert_executors_agree(seq, vec) -> None:
    """A sequential and a vectorised run agree: global parameters within 1e-5, and every
    evaluation summary statistic and train loss within 1e-4, round by round."""
    for k in seq.global_params:
        diff = (seq.global_params[k] - vec.global_params[k]).abs().max().item()
        assert diff <= 1e-5, (k, diff)
    assert len(seq.records) == len(vec.records)
    for a, b in zip(seq.records, vec.records):
        for proto, summary in a["summary"].items():
            for metric, pack in summary.items():
                for stat, value in pack.items():
                    assert b["summary"][proto][metric][stat] == pytest.approx(value, abs=1e-4)
        assert b["train_loss"] == pytest.approx(a["train_loss"], abs=1e-4)


@pytest.fixture
def assert_executors_agree():
    """`_assert_executors_agree(seq, vec)`, for the executor-equivalence tests."""
    return _assert_executors_agree
