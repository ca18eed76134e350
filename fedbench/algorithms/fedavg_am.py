"""FedAvg with a server step β ("+AM", aggregate momentum; pFedBreD C.4, spec pfedbred.md §1.10)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from fedbench.algorithms.base import Algorithm, ServerContext
from fedbench.algorithms.server_opt import server_step
from fedbench.tree import weighted_mean


@dataclass(frozen=True)
class FedAvgAM(Algorithm):
    """FedAvg whose server moves β times the averaged update: w ← (1 - β) w + β avg(w_i), i.e.
    w + β mean(Δ_i) (pFedBreD's Alg. 1 line 12 applied to FedAvg, β = 2 for "+AM").
    β = 1 is FedAvg."""

    name: ClassVar[str] = "fedavg_am"
    beta: float = 2.0

    def __post_init__(self):
        if not self.beta > 0:
            raise ValueError(f"fedavg_am: bad beta = {self.beta!r}")

    def aggregate(self, global_params, messages, server_state, ctx: ServerContext):
        mean_delta = weighted_mean(messages["delta"], messages["weight"])
        return server_step("sgd", global_params, mean_delta, server_state, lr=self.beta)
