"""FedAvg that sleeps in each round's aggregation: a long-running job for the cluster script's
faults (a job cancelled between its checkpoint rounds, a job past its time limit). Its numbers are
FedAvg's; the sleep only stretches the wall clock."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar

from fedbench.algorithms.base import Algorithm


@dataclass(frozen=True)
class SlowFedAvg(Algorithm):
    """FedAvg, `sleep_s` seconds longer a round."""

    name: ClassVar[str] = "slow_fedavg"
    sleep_s: float = 0.0

    def aggregate(self, global_params, messages, server_state, ctx):
        time.sleep(self.sleep_s)
        return super().aggregate(global_params, messages, server_state, ctx)
