"""Shared fixtures: a tiny federation that trains in milliseconds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

from fedbench import testing  # noqa: E402
from fedbench.config import load_catalog  # noqa: E402
from fedbench.testing import make_federation  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# FEDBENCH_TEST_DEVICE=cuda puts the tiny federation and model on that device (default cpu), so
# the executor and precision tests run there (README: "On a GPU"); other tests stay on the CPU.
TEST_DEVICE = torch.device(os.environ.get("FEDBENCH_TEST_DEVICE", "cpu"))


@pytest.fixture
def tiny():
    """(federation, apply, initial params) for a 1-hidden-layer MLP on toy data, on TEST_DEVICE."""
    apply, params = testing.tiny_network(TEST_DEVICE)
    return make_federation(device=TEST_DEVICE), apply, params


@pytest.fixture
def federation_factory():
    """`make_federation` itself, for tests that need a differently shaped federation."""
    return make_federation


@pytest.fixture(scope="module")
def catalog():
    """The project's catalog (config/config.yaml), loaded once per test module."""
    return load_catalog(ROOT / "config" / "config.yaml")


@pytest.fixture
def assert_executors_agree():
    """`fedbench.testing.assert_executors_agree(seq, vec)`, for the executor-equivalence tests."""
    return testing.assert_executors_agree
