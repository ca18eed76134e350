"""What an algorithm adds to FedAvg, read once: the one place the engine asks which hooks an
algorithm replaces (`overrides`).

FedAvg (`fedbench/algorithms/base.py::Algorithm`) is the core; the capabilities an algorithm opts
into are the classes of `fedbench/algorithms/opt_in.py` (the engine reaches their hooks through
`opt_in(algo, Capability)`, FedAvg's behaviour for an algorithm without them). The fields below
say which hooks an algorithm's class overrides, for the engine's fast paths.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cache

from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.opt_in import overrides


@dataclass(frozen=True)
class Capabilities:
    """Which optional hooks an algorithm's class overrides (False: FedAvg's behaviour)."""

    select_clients: bool  # picks its own clients each round (loop.select_clients)
    client_labels: bool  # clients train on labels of their own (FedCorr's relabelling)
    candidates: bool  # candidate models scored on each client's split (executors)
    step_noise: bool  # per-step draws from the client's `algorithm` stream (executors)
    before_step: bool  # prepares each step, not differentiated (engine/step.py)
    local_loss: bool  # an objective of its own (the layer-chain kernels serve none)
    data_loss: bool
    correct_grads: bool  # corrects each step's gradients (engine/step.py)
    update_mask: bool  # freezes parts of the model per step (engine/step.py)
    client_end: bool  # a message other than FedAvg's delta (executors write FedAvg's in place)

    @property
    def own_objective(self) -> bool:
        return self.local_loss or self.data_loss


@cache
def _of_class(cls: type[Algorithm]) -> Capabilities:
    return Capabilities(**{f.name: overrides(cls, f.name) for f in fields(Capabilities)})


def capabilities(algo: Algorithm) -> Capabilities:
    """The capabilities of `algo`'s class (computed once per class)."""
    return _of_class(type(algo))
