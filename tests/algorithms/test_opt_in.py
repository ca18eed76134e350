"""fedbench/algorithms/opt_in.py: the FedAvg core is small, everything else is a capability an
algorithm names among its bases, and an unnamed capability's hook is refused, not ignored."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import ClassVar

import pytest
import torch

from fedbench.algorithms import ALGORITHMS, build_algorithm
from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.opt_in import (
    CAPABILITIES,
    ClientSelection,
    LocalSteps,
    OwnNetwork,
    PersonalEvaluation,
    ServerOutputs,
    opt_in,
    overrides,
)


def _hooks(cls: type) -> set[str]:
    return {n for n, v in vars(cls).items() if inspect.isfunction(v) and not n.startswith("_")}


def test_the_core_has_at_most_eight_hooks_and_no_capability_repeats_one():
    core = _hooks(Algorithm)
    assert core == {
        "init_server_state",
        "init_client_state",
        "client_begin",
        "local_loss",
        "data_loss",
        "client_end",
        "aggregate",
    }
    seen = set(core)
    for kind in CAPABILITIES:
        assert not _hooks(kind) & seen, kind.__name__
        seen |= _hooks(kind)


def test_an_algorithm_without_a_capability_gets_fedavgs_behaviour_of_it():
    fedavg = build_algorithm("fedavg")
    steps = opt_in(fedavg, LocalSteps)
    assert steps is not fedavg
    assert steps.local_epochs(3) == 3 and steps.steps_per_batch == 1
    assert steps.update_mask({}, {}, None) is None
    assert opt_in(fedavg, PersonalEvaluation).personal_protocols == ()
    assert opt_in(fedavg, ServerOutputs).server_metrics({}) == {}
    apply = object()
    assert opt_in(fedavg, OwnNetwork).model(apply) is apply
    # A class asks the same way (the workflow's checks read classes).
    assert opt_in(ALGORITHMS["fedavg"], ServerOutputs).server_scalars == ()


def test_an_algorithm_with_a_capability_is_asked_itself():
    superfed = build_algorithm("superfed")
    assert opt_in(superfed, PersonalEvaluation) is superfed
    assert opt_in(superfed, PersonalEvaluation).personal_protocols != ()
    assert opt_in(ALGORITHMS["fedcorr"], ClientSelection) is ALGORITHMS["fedcorr"]
    assert overrides(superfed, "step_noise") and not overrides(superfed, "correct_grads")
    assert not overrides(build_algorithm("fedavg"), "step_noise")
    with pytest.raises(AttributeError, match="no hook"):
        overrides(superfed, "no_such_hook")


def test_a_capability_hook_written_without_naming_the_capability_is_refused():
    with pytest.raises(TypeError, match=r"Mine.update_mask .* LocalSteps.*class Mine\(LocalSteps"):

        @dataclass(frozen=True)
        class Mine(Algorithm):
            name: ClassVar[str] = "mine"

            def update_mask(self, params, carry, noise):
                return None

    with pytest.raises(TypeError, match="personal_protocols .* PersonalEvaluation"):

        @dataclass(frozen=True)
        class Flagged(Algorithm):
            personal_protocols: ClassVar[tuple[str, ...]] = ("local",)


def test_naming_the_capability_lets_the_hook_in():
    @dataclass(frozen=True)
    class Frozen(LocalSteps, Algorithm):
        name: ClassVar[str] = "frozen"

        def update_mask(self, params, carry, noise):
            return {k: torch.zeros(()) for k in params}

    algo = Frozen()
    assert opt_in(algo, LocalSteps) is algo and overrides(algo, "update_mask")
    assert algo.update_mask({"w": torch.ones(2)}, {}, None)["w"].item() == 0.0
