"""Server optimisers (Reddi et al. 2021, "Adaptive Federated Optimization", Alg. 2): one component.

`server_step` is a pure function: (global params, aggregated update, optimiser state) -> (new
params, new state). The aggregated update is Σ_i w_i (θ_i - θ), i.e. minus the pseudo-gradient,
from any aggregation rule (FedAvg's sample-size weights, AAggFF's p, ...). FedAvgM, FedAdam,
FedYogi and FedAdagrad are FedAvg's weights fed to it; AAggFF's plug-and-play variants (thesis
Table 3.10) feed their own mixing coefficients to the same function.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from fedbench.algorithms.base import Algorithm, ServerContext, State
from fedbench.algorithms.fedprox import ProxLocal
from fedbench.tree import Params, weighted_mean

SERVER_OPTS = ("sgd", "avgm", "adam", "yogi", "adagrad")


def server_step(
    kind: str,
    params: Params,
    update: Params,
    state: State,
    lr: float = 1.0,
    beta1: float = 0.0,
    beta2: float = 0.999,
    tau: float = 1e-3,
) -> tuple[Params, State]:
    """One server step. `state` holds "m" (first moment / momentum) and "v" (second moment).

    sgd:     θ + lr Δ (lr = 1 is FedAvg).
    avgm:    m = β1 m + Δ;  θ + lr m  (FedAvgM, Hsu et al. 2019).
    adam:    m = β1 m + (1-β1) Δ;  v = β2 v + (1-β2) Δ²;                θ + lr m / (√v + τ).
    yogi:    m as adam;            v = v - (1-β2) Δ² sign(v - Δ²);       θ + lr m / (√v + τ).
    adagrad: m as adam;            v = v + Δ²;                           θ + lr m / (√v + τ).
    The second moment starts at τ² (Reddi et al.'s v_{-1} ≥ τ²); nothing is bias-corrected.
    """
    if kind not in SERVER_OPTS:
        raise ValueError(f"unknown server optimiser {kind!r}; valid: {', '.join(SERVER_OPTS)}")
    if kind == "sgd":
        return {k: p + lr * update[k] for k, p in params.items()}, state
    m_old = state.get("m") or {k: torch.zeros_like(p) for k, p in params.items()}
    if kind == "avgm":
        m = {k: beta1 * m_old[k] + update[k] for k in params}
        return {k: p + lr * m[k] for k, p in params.items()}, {**state, "m": m}
    m = {k: beta1 * m_old[k] + (1 - beta1) * update[k] for k in params}
    v_old = state.get("v") or {k: torch.full_like(p, tau * tau) for k, p in params.items()}
    v = {}
    for k in params:
        sq = update[k] * update[k]
        if kind == "adam":
            v[k] = beta2 * v_old[k] + (1 - beta2) * sq
        elif kind == "yogi":
            v[k] = v_old[k] - (1 - beta2) * sq * torch.sign(v_old[k] - sq)
        else:
            v[k] = v_old[k] + sq
    new = {k: p + lr * m[k] / (v[k].sqrt() + tau) for k, p in params.items()}
    return new, {**state, "m": m, "v": v}


def compensated_lr(
    base: float, compensate: bool, ctx: ServerContext, state: State
) -> tuple[float, State]:
    """The server step size of this round, and the state remembering round 1's client lr.

    With `compensate`, base · lr_1 / lr_t: the AAggFF release divides every server learning rate
    by φ whenever it multiplies the client's by φ (spec aaggff.md §9.6, "server-LR compensation").
    """
    if not compensate:
        return base, state
    lr0 = state.get("lr0", ctx.lr)
    return base * lr0 / ctx.lr, {**state, "lr0": lr0}


@dataclass(frozen=True)
class ServerOptimized(Algorithm):
    """Shared fields of every algorithm whose aggregated update goes through `server_step`.

    `reset_server_state` re-creates the optimiser state every round, as the AAggFF release does
    for its Table 3.10 runs (spec aaggff.md §9.6); the default keeps it (Reddi et al.).
    `server_lr_compensation` scales the server lr by lr_1 / lr_t (the same release, all methods).
    """

    server_opt: str = "sgd"
    server_lr: float = 1.0
    beta1: float = 0.0
    beta2: float = 0.999
    tau: float = 1e-3
    reset_server_state: bool = False
    server_lr_compensation: bool = False

    def __post_init__(self):
        if self.server_opt not in SERVER_OPTS:
            raise ValueError(
                f"{self.name}: unknown server_opt {self.server_opt!r}; valid: {SERVER_OPTS}"
            )
        if not self.server_lr > 0:
            raise ValueError(f"{self.name}: server_lr must be > 0, got {self.server_lr!r}")

    def server_update(
        self, global_params: Params, update: Params, server_state: State, ctx: ServerContext
    ) -> tuple[Params, State]:
        """Apply the aggregated update through the configured optimiser; state under "opt"."""
        lr, server_state = compensated_lr(
            self.server_lr, self.server_lr_compensation, ctx, server_state
        )
        opt = {} if self.reset_server_state else server_state.get("opt", {})
        new, opt = server_step(
            self.server_opt,
            global_params,
            update,
            opt,
            lr,
            self.beta1,
            self.beta2,
            self.tau,
        )
        return new, {**server_state, "opt": opt}


@dataclass(frozen=True)
class FedOpt(ServerOptimized):
    """FedAvg's update fed to a server optimiser (Reddi et al. 2021); `uniform_weights` averages
    the sampled clients equally (the AAggFF release's FedAvg at C < 1, spec §2.4)."""

    name: ClassVar[str] = "fedopt"
    uniform_weights: bool = False

    def aggregate(self, global_params, messages, server_state, ctx: ServerContext):
        w = messages["weight"]
        update = weighted_mean(messages["delta"], torch.ones_like(w) if self.uniform_weights else w)
        return self.server_update(global_params, update, server_state, ctx)


# Defaults: the AAggFF release's Table 3.10 settings (spec aaggff.md §9.6): β1 0.9, β2 0.999,
# τ 1e-4, server lr 1e-2; FedAdagrad has β1 = 0.


@dataclass(frozen=True)
class FedAvgM(FedOpt):
    """FedAvg with server momentum (Hsu et al. 2019): m = β1 m + Δ, θ + lr m."""

    name: ClassVar[str] = "fedavgm"
    server_opt: str = "avgm"
    beta1: float = 0.9


@dataclass(frozen=True)
class FedAdam(FedOpt):
    """FedAdam (Reddi et al. 2021, Alg. 2)."""

    name: ClassVar[str] = "fedadam"
    server_opt: str = "adam"
    server_lr: float = 1e-2
    beta1: float = 0.9
    tau: float = 1e-4


@dataclass(frozen=True)
class FedYogi(FedOpt):
    """FedYogi (Reddi et al. 2021, Alg. 2)."""

    name: ClassVar[str] = "fedyogi"
    server_opt: str = "yogi"
    server_lr: float = 1e-2
    beta1: float = 0.9
    tau: float = 1e-4


@dataclass(frozen=True)
class FedAdagrad(FedOpt):
    """FedAdagrad (Reddi et al. 2021, Alg. 2)."""

    name: ClassVar[str] = "fedadagrad"
    server_opt: str = "adagrad"
    server_lr: float = 1e-2
    beta1: float = 0.0
    tau: float = 1e-4


@dataclass(frozen=True)
class FedProxOpt(ProxLocal, FedOpt):
    """FedProx's local term with FedOpt's server: the AAggFF release's FedProx (uniform weights
    at C < 1, server-lr compensation) or FedProx + any server optimiser."""

    name: ClassVar[str] = "fedprox_opt"
