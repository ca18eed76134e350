"""FedHEAL (Chen, Huang & Ye, "Fair Federated Learning under Domain Skew with Local Consistency
and Domain Diversity", CVPR 2024), a fair first-order baseline of DQN-Fed (specs/qffl-dqnfed.md
§B.4.1-B.4.2). FedAvg's local training; each client masks the coordinates of its update whose
direction disagrees with its own history (FPHL), and the server weights clients by the distance
of their masked updates, with momentum (FAEL).

What the release (github.com/yuhangchen0/FedHEAL, commit 770e094) does, file by file:

- `main.py`: `--threshold` 0.3 (τ, the consistency threshold), `--beta` 0.4 (β, the momentum of
  the weight update), `--wHEAL` 1 (both parts on; 0 leaves `euclidean_distance` empty and
  crashes, so the release's plain FedAvg is `models/fedavg.py`), `--alpha` 0.5 (the Dirichlet
  concentration of the data split, not a FedHEAL setting), `--online_ratio` 1 (every client
  every round), `--averaging weight` (n_k weights, unused by FedHEAL), 200 rounds of 10 local
  epochs; `utils/best_args.py`: local lr 0.001, batch 64 (Digits) or 16 (Office-Caltech).
- `models/fedavgheal.py`: each online client trains as FedAvg does (SGD, momentum 0.9, weight
  decay 1e-5, cross-entropy); then u_k = θ − θ_k over the whole state dict, m_k =
  `consistency_mask(k, u_k)`, the upload is u_k ⊙ m_k and its distance `compute_distance`;
  then `get_params_diff_weights` and `aggregate_nets_parameter`.
- `models/utils/federated_model.py`:
  `consistency_mask`: at round 0, m = 1 and h_k = 1[u_k ≥ 0] (the share of rounds in which each
  coordinate went down, δ_k = θ_k − θ ≤ 0); later, c = h_k where u_k ≥ 0 and 1 − h_k elsewhere
  (the share of earlier rounds whose direction agrees with this one), m = 1[c > τ], then
  h_k ← (h_k·t + 1[u_k ≥ 0]) / (t + 1) with t the 0-based round index (the running mean).
  `compute_distance`: d_k = Σ over parameter tensors of ‖u_k ⊙ m_k‖₂ (a sum of per-tensor
  norms, buffers excluded). `get_params_diff_weights`: for each online client, Δp_k = (1 − β)
  Δp_k^prev + β d_k / Σ d (the sum over every client's latest distance: all clients ever
  seen), p_k = p_k^prev + Δp_k (p_k^prev = 1/M at a client's first round, M the clients per
  round; Δp^prev = 0), both kept unnormalised; w = p_S / Σ_S p. `aggregate_nets_parameter`:
  per coordinate, θ ← θ − Σ_k a_k/Σ_j a_j · u_k ⊙ m_k with a_k = w_k m_k (w_k where Σ a = 0,
  where every upload is 0 anyway): the masked clients drop out of that coordinate's average.

As the release, except: the parameter dict holds trainable parameters only (BatchNorm running
statistics are not averaged here); the release's `self.increase_history = None` would fail at
its first item assignment (read as `{}`); and a round whose distances are all 0 adds β·0 (the
release divides by zero). Named readings where the release is silent or narrower:

- `history_count: participations` (default): the running mean counts the client's own earlier
  rounds; `rounds` is the release's formula with the global round index t. They agree when every
  client takes part every round, the only setting the release runs (a client first seen after
  round 0 hits a missing history there); here a first participation starts like round 0.
- `distance: layer_sum` (default, the release) or `l2` (the whole masked update's Euclidean
  norm, which the release's name `euclidean_distance` suggests; the paper's text was not read).
- `distance_total: seen` (default, the release: every client's latest distance) or `round` (the
  sampled clients' distances only); they agree under full participation.
- `consistency_mask: false` uploads whole updates; `fair_weights: false` weights by n_k. Both
  off is FedAvg, bit for bit.

DQN-Fed fixes "(α, β) = (0.5, 0.5), (γ_s, γ_c) = (0.5, 0.9)" (004:L906), names that
FedHEAL's release mostly does not use. Of them it has `--alpha` (the split's Dirichlet 0.5: a
data setting) and `--beta`: β = 0.5 is `beta`. The one FedHEAL setting left is τ: α = 0.5 read as
τ, or γ_s = 0.5 read as τ, both give `threshold` = 0.5; γ_c = 0.9 is the client SGD momentum the
release hard-codes (a training setting: `training.momentum`). Defaults: `threshold` 0.5, `beta`
0.5 (DQN-Fed's cells); the release's own are 0.3 and 0.4.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from fedbench.algorithms.base import Algorithm, ClientContext, ServerContext, State
from fedbench.tree import Params, tree_sub, weighted_mean

HISTORY_COUNTS = ("participations", "rounds")
DISTANCES = ("layer_sum", "l2")
DISTANCE_TOTALS = ("seen", "round")


def direction_mask(
    delta: Params, history: Params | None, count: int, threshold: float
) -> tuple[Params, Params]:
    """FPHL's mask and the new direction history from a client's update δ = θ_k − θ.

    `history` = the share of the client's earlier `count` rounds in which each coordinate went
    down (δ ≤ 0, the release's u = −δ ≥ 0); None at its first round: mask 1, history 1[δ ≤ 0].
    Otherwise a coordinate is kept when the share of earlier rounds agreeing with this round's
    direction exceeds `threshold`, and the history becomes the running mean over count + 1."""
    down = {k: (v <= 0).to(v.dtype) for k, v in delta.items()}
    if history is None:
        return {k: torch.ones_like(v) for k, v in delta.items()}, down
    mask = {
        k: (torch.where(down[k] > 0, h, 1 - h) > threshold).to(delta[k].dtype)
        for k, h in history.items()
    }
    new = {k: (h * count + down[k]) / (count + 1) for k, h in history.items()}
    return mask, new


def update_distance(update: Params, form: str) -> float:
    """A (masked) update's size: the sum of per-tensor L2 norms (`layer_sum`, the release) or the
    L2 norm of the whole vector (`l2`), accumulated in float64 as the release's Python floats."""
    norms = [float(torch.linalg.vector_norm(v)) for v in update.values()]
    if form == "layer_sum":
        return sum(norms)
    return sum(n * n for n in norms) ** 0.5


def fael_weights(
    distances: torch.Tensor,
    ids: tuple[int, ...],
    num_clients: int,
    state: State,
    beta: float,
    total: str = "seen",
) -> tuple[torch.Tensor, State]:
    """FAEL's aggregation weights of the sampled clients `ids` from their distances d_k, and the
    new server state: Δp_k = (1 − β) Δp_k^prev + β d_k / Σ d, p_k = p_k^prev + Δp_k (p^prev =
    1/M at a first round), w = p_S / Σ_S p. Σ d runs over every client's latest distance
    (`seen`) or this round's (`round`); state holds K-vectors (float64) `p`, `dp`, `dist` and
    `seen`, created at the first call."""
    K, M = num_clients, len(ids)
    d = distances.to(torch.float64).cpu()
    p = state.get("p", torch.zeros(K, dtype=torch.float64)).clone()
    dp = state.get("dp", torch.zeros(K, dtype=torch.float64)).clone()
    last = state.get("dist", torch.zeros(K, dtype=torch.float64)).clone()
    seen = state.get("seen", torch.zeros(K, dtype=torch.bool)).clone()
    idx = torch.as_tensor(ids, dtype=torch.long)
    last[idx] = d
    denom = float(last.sum() if total == "seen" else d.sum())
    share = d / denom if denom > 0 else torch.zeros_like(d)
    dp[idx] = (1 - beta) * dp[idx] + beta * share
    p[idx] = torch.where(seen[idx], p[idx], torch.full_like(d, 1.0 / M)) + dp[idx]
    seen[idx] = True
    w = p[idx] / p[idx].sum()
    return w, {**state, "p": p, "dp": dp, "dist": last, "seen": seen}


def masked_average(deltas: Params, masks: Params, weights: torch.Tensor) -> Params:
    """The release's per-coordinate average of masked updates: Σ_k a_k / Σ_j a_j · δ_k with a_k
    = w_k m_k (w_k where Σ a = 0, where every masked update is 0)."""
    out = {}
    for k, d in deltas.items():
        w = weights.to(device=d.device, dtype=d.dtype).view(-1, *([1] * (d.dim() - 1)))
        a = w * masks[k]
        tot = a.sum(0, keepdim=True)
        coef = torch.where(tot == 0, w.expand_as(a), a / torch.where(tot == 0, 1, tot))
        out[k] = (coef * d).sum(0)
    return out


@dataclass(frozen=True)
class FedHEAL(Algorithm):
    """FedHEAL (Chen et al., CVPR 2024, §3.2-3.3 as released): consistency-masked uploads,
    distance-weighted aggregation with momentum."""

    name: ClassVar[str] = "fedheal"
    threshold: float = 0.5  # τ (release `--threshold`, 0.3)
    beta: float = 0.5  # β (release `--beta`, 0.4)
    consistency_mask: bool = True
    fair_weights: bool = True
    history_count: str = "participations"
    distance: str = "layer_sum"
    distance_total: str = "seen"

    def __post_init__(self):
        if not 0 <= self.threshold < 1:
            raise ValueError(f"fedheal: threshold must be in [0, 1), got {self.threshold!r}")
        if not 0 <= self.beta <= 1:
            raise ValueError(f"fedheal: beta must be in [0, 1], got {self.beta!r}")
        for key, valid in (
            ("history_count", HISTORY_COUNTS),
            ("distance", DISTANCES),
            ("distance_total", DISTANCE_TOTALS),
        ):
            if getattr(self, key) not in valid:
                raise ValueError(
                    f"fedheal: {key} must be one of {valid}, got {getattr(self, key)!r}"
                )

    def client_end(
        self,
        global_params: Params,
        params: Params,
        carry: State,
        client_state: State,
        ctx: ClientContext,
    ) -> tuple[dict[str, Any], State]:
        delta = tree_sub(params, global_params)
        message: dict[str, Any] = {"weight": float(ctx.num_train)}
        if self.consistency_mask:
            count = client_state.get("count", 0)
            t = count if self.history_count == "participations" else ctx.round - 1
            mask, history = direction_mask(delta, client_state.get("history"), t, self.threshold)
            delta = {k: v * mask[k] for k, v in delta.items()}
            message["mask"] = mask
            client_state = {**client_state, "history": history, "count": count + 1}
        message["delta"] = delta
        message["distance"] = update_distance(delta, self.distance)
        return message, client_state

    def aggregate(
        self,
        global_params: Params,
        messages: dict[str, Any],
        server_state: State,
        ctx: ServerContext,
    ) -> tuple[Params, State]:
        weights = messages["weight"]
        if self.fair_weights:
            weights, server_state = fael_weights(
                messages["distance"],
                ctx.client_ids,
                ctx.num_clients,
                server_state,
                self.beta,
                self.distance_total,
            )
        if self.consistency_mask:
            up = masked_average(messages["delta"], messages["mask"], weights)
        else:
            up = weighted_mean(messages["delta"], weights)
        return {k: global_params[k] + up[k] for k in global_params}, server_state
