"""Per-FedAvg (Fallah, Mokhtari & Ozdaglar, NeurIPS 2020): FedAvg on the MAML objective.

Under `training.precision: bf16` only the forward passes are autocast: the adaptation step
w' = w - α∇f(w; D) and the meta-gradient are taken on float32 parameters and gradients.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch.func import grad

from fedbench.algorithms.base import Algorithm, Batch, ServerContext, State
from fedbench.algorithms.opt_in import PersonalEvaluation
from fedbench.objectives import objective_of
from fedbench.tree import Apply, Params, weighted_mean


def halves(batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    """0/1 weights of the batch's two halves D (first ceil(n/2) real samples) and D' (the rest).

    Works on padded batches (vmap) as on short ones: padding sits at the end, so both executors
    split the same real samples. A one-sample batch uses that sample for both steps.
    """
    size = batch.y.shape[0]
    real = torch.ones(size) if batch.mask is None else batch.mask.to(torch.float32)
    real = real.to(batch.y.device)
    n = real.sum()
    pos = torch.arange(size, device=batch.y.device)
    first = (pos < torch.div(n + 1, 2, rounding_mode="floor")).float() * real
    second = real - first
    second = torch.where(second.sum() > 0, second, first)
    return first, second


def weighted_loss(apply: Apply, params: Params, batch: Batch, weights: torch.Tensor):
    """The run's objective over the samples with weight 1 (as the batch's real-sample mask)."""
    return objective_of(apply).batch_loss(apply(params, batch.x), batch._replace(mask=weights))


@dataclass(frozen=True)
class PerFedAvg(PersonalEvaluation, Algorithm):
    """Per-FedAvg, first-order (Fallah et al. 2020, Alg. 1 with the FO-MAML gradient, §5;
    objective F_i(w) = f_i(w - α∇f_i(w)), eq. 3), as pFedBreD's release trains it (spec
    pfedbred.md §2): per local iteration w' = w - α∇f(w; D), then w ← w - β∇f(w'; D').

    The engine makes one SGD step per batch, so each engine batch holds both of the method's
    batches: D = its first half, D' = the second (a batch of 2b samples = the release's two
    consecutive batches of b, drawn from one shuffled pass). `local_loss` takes the adaptation
    step itself and returns f(w'; D') with ∇f(w; D) held constant, so its gradient is the FO
    meta-gradient ∇f(w'; D'), and the engine's step with the run's lr is the meta-step β.
    pFedBreD: batch_size = 2 × 20, lr = β = 0.01, alpha = 0.01 (spec §2, §5), plain SGD.
    `server_beta` is the "+AM" trick (spec §1.10: w ← (1-β)w_prev + β·avg, β = 2).

    Protocol `personal` (the paper's P, spec §9.10) = the global model after `eval_steps` SGD
    steps of `eval_lr` on the client's training data, fresh at every evaluation and never kept
    (`personalise`): the engine hands it ceil(eval_steps / 2) training batches of the run's
    batch size, whose halves are consumed in order (b = 20 samples a step, as in training).
    "+FT" = one step more (eval_steps = 3). The release's one step (spec §2) is eval_steps = 1.
    """

    name: ClassVar[str] = "perfedavg"
    personal_protocols: ClassVar[tuple[str, ...]] = ("personal",)
    alpha: float = 0.01
    server_beta: float = 1.0
    eval_steps: int = 2
    eval_lr: float = 0.01

    def __post_init__(self):
        checks = {
            "alpha": self.alpha >= 0,
            "server_beta": self.server_beta > 0,
            "eval_steps": isinstance(self.eval_steps, int) and self.eval_steps >= 0,
            "eval_lr": self.eval_lr > 0,
        }
        for key, ok in checks.items():
            if not ok:
                raise ValueError(f"perfedavg: bad {key} = {getattr(self, key)!r}")

    def local_loss(self, apply: Apply, params: Params, batch: Batch, carry: State, noise):
        first, second = halves(batch)
        point = {k: v.detach() for k, v in params.items()}
        g = grad(lambda p: weighted_loss(apply, p, batch, first))(point)
        # First order: the adaptation's gradient is a constant, so d/dw f(w'; D') = ∇f(w'; D').
        adapted = {k: v - self.alpha * g[k].detach() for k, v in params.items()}
        return weighted_loss(apply, adapted, batch, second)

    def aggregate(self, global_params, messages, server_state, ctx: ServerContext):
        mean_delta = weighted_mean(messages["delta"], messages["weight"])
        step = {k: v + self.server_beta * mean_delta[k] for k, v in global_params.items()}
        return step, server_state

    def personal_params(self, protocol: str, global_params: Params, client_state: State) -> Params:
        if protocol != "personal":
            return super().personal_params(protocol, global_params, client_state)
        return dict(global_params)  # adapted in tune_for_eval

    def eval_batches(self, protocol: str) -> int:
        return -(-self.eval_steps // 2) if protocol == "personal" else 0

    def tune_for_eval(self, protocol, apply, params, batches):
        if protocol != "personal":
            return params
        return self.personalise(apply, params, batches)

    def personalise(self, apply: Apply, global_params: Params, batches: list[Batch]) -> Params:
        """The personalised model: `eval_steps` SGD steps of `eval_lr` from the global model on
        the batches' halves in order (D1, D1', D2, ...), cycled if short; input unchanged."""
        parts = [half for b in batches for half in _split(b)]
        params = dict(global_params)
        for s in range(self.eval_steps):
            b, w = parts[s % len(parts)]
            g = grad(lambda p, b=b, w=w: weighted_loss(apply, p, b, w))(params)
            params = {k: v - self.eval_lr * g[k] for k, v in params.items()}
        return params


def _split(batch: Batch) -> list[tuple[Batch, torch.Tensor]]:
    """A batch with the 0/1 weights of each of its halves (D, D')."""
    first, second = halves(batch)
    return [(batch, first), (batch, second)]
