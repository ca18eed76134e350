"""engine/capabilities.py: the one place the engine asks which of FedAvg's hooks an algorithm
replaces."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from fedbench.algorithms import ALGORITHMS, build_algorithm
from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.opt_in import CAPABILITIES
from fedbench.engine.capabilities import Capabilities, capabilities

ENGINE = Path(__file__).resolve().parents[2] / "fedbench" / "engine"


def _on(name: str, **params) -> set[str]:
    caps = capabilities(build_algorithm(name, **params))
    return {f.name for f in fields(Capabilities) if getattr(caps, f.name)}


def test_every_field_is_a_hook_of_the_core_or_of_an_opt_in_capability():
    for f in fields(Capabilities):
        owners = [k for k in (Algorithm, *CAPABILITIES) if callable(vars(k).get(f.name))]
        assert len(owners) == 1, f.name


def test_fedavg_has_none_and_others_name_their_own():
    assert _on("fedavg") == set()
    assert _on("fedprox") == {"local_loss"}
    assert _on("scaffold") == {"correct_grads", "client_end"}
    assert _on("dqnfed") >= {"before_step", "local_loss", "client_end"}
    assert capabilities(build_algorithm("fedprox")).own_objective
    assert not capabilities(build_algorithm("fedavg")).own_objective


def test_read_once_per_class():
    a, b = build_algorithm("fedprox", mu=0.1), build_algorithm("fedprox", mu=0.2)
    assert capabilities(a) is capabilities(b)
    assert capabilities(a) is not capabilities(ALGORITHMS["fedavg"]())


def test_the_engine_asks_nowhere_else():
    askers = sorted(
        p.name
        for p in ENGINE.glob("*.py")
        if "overrides(" in p.read_text() and p.name != "capabilities.py"
    )
    assert askers == []
