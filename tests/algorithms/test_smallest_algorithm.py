"""The smallest algorithm (docs/architecture.md shows it): FedProx's proximal term as two hooks,
added from a temporary module and a registry line, with no other change to fedbench."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import fedbench.algorithms as algorithms
from fedbench.algorithms import ALGORITHMS, build_algorithm
from fedbench.registry import LazyRegistry
from fedbench.testing import assert_executors_agree, assert_same_run, train_tiny

ROOT = Path(__file__).resolve().parents[2]


def _documented_source() -> str:
    """The class as docs/architecture.md prints it, with the imports it needs."""
    doc = (ROOT / "docs" / "architecture.md").read_text()
    section = doc.split("## The smallest algorithm", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    head = (
        "from dataclasses import dataclass\nfrom typing import ClassVar\n\n"
        "from fedbench.algorithms.base import Algorithm\n\n\n"
    )
    return head + code


@pytest.fixture
def prox(tmp_path, monkeypatch):
    """The documented class in a module of its own, registered as `prox`."""
    (tmp_path / "my_prox.py").write_text(_documented_source())
    monkeypatch.syspath_prepend(str(tmp_path))
    targets = {n: ALGORITHMS.target(n) for n in ALGORITHMS} | {"prox": "my_prox:Prox"}
    monkeypatch.setattr(algorithms, "ALGORITHMS", LazyRegistry(targets))
    return lambda **kw: build_algorithm("prox", **kw)


def test_at_mu_zero_it_is_fedavg(prox):
    assert_same_run(train_tiny(prox(mu=0.0)), train_tiny(build_algorithm("fedavg")))


def test_its_term_is_fedprox_squared_term(prox):
    """(mu/2)||w - w_g||^2 is the built-in FedProx's paper form: the runs agree."""
    ours = train_tiny(prox(mu=0.5))
    builtin = train_tiny(build_algorithm("fedprox", mu=0.5, prox="squared"))
    fedavg = train_tiny(build_algorithm("fedavg"))
    moved = False
    for k, v in builtin.global_params.items():
        assert (ours.global_params[k] - v).abs().max() <= 1e-6, k
        moved = moved or not v.equal(fedavg.global_params[k])
    assert moved  # the term changed the run: the comparison is not FedAvg against FedAvg


def test_both_executors_agree(prox):
    seq = train_tiny(prox(mu=0.5))
    vec = train_tiny(prox(mu=0.5), executor="vectorised")
    assert_executors_agree(seq, vec)


def test_an_unknown_hyperparameter_is_named(prox):
    with pytest.raises(ValueError, match=r"unknown hyperparameter\(s\) \['nu'\]; valid: \['mu'\]"):
        prox(nu=1.0)
