"""The only local-step loop: a client's mini-batch steps through the algorithm's hooks."""

from __future__ import annotations

from typing import Any

import torch
from torch.func import grad_and_value

from fedbench.algorithms.base import Algorithm, Batch, State
from fedbench.engine.augment import Augment
from fedbench.engine.functional import Apply, Params, sgd_init, sgd_step


def local_train(*args: Any, **kwargs: Any) -> tuple[Params, torch.Tensor]:
    """`local_train_carry` without the final carry: the trained parameters and the mean
    training loss (a tensor)."""
    params, _, loss = local_train_carry(*args, **kwargs)
    return params, loss


def local_train_carry(
    algo: Algorithm,
    apply: Apply,
    params: Params,
    carry: State,
    x: torch.Tensor,
    y: torch.Tensor,
    batches: list[torch.Tensor],
    lr: float,
    momentum: float,
    weight_decay: float,
    noise: torch.Tensor | None = None,
    augment: tuple[Augment, dict[str, torch.Tensor]] | None = None,
    weight: torch.Tensor | None = None,
) -> tuple[Params, State, torch.Tensor]:
    """Run the local steps; return the trained parameters, the final carry (the one
    `client_end` receives: client_begin's, with each step's updates when `algo.carry_updates`)
    and the mean training loss (a tensor).

    `augment` = (transform, draws [steps, B]): each batch is transformed with its step's draws.
    `weight`: per-row loss weights of the pool (Federation.weight), None = unweighted.
    """
    updates = algo.carry_updates

    def loss_fn(p: Params, cr: State, xb: torch.Tensor, yb: torch.Tensor, wb, nz):
        out = algo.local_loss(apply, p, Batch(xb, yb, None, wb), cr, nz)
        return out if updates else (out, {})

    step_grad = grad_and_value(loss_fn, has_aux=True)
    buf = sgd_init(params)
    loss_sum = torch.zeros((), device=x.device)
    for step, idx in enumerate(batches):
        nz = None if noise is None else noise[step]
        xb = x[idx]
        if augment is not None:
            aug, draws = augment
            xb = aug.apply(xb, {k: v[step, : len(idx)] for k, v in draws.items()})
        wb = None if weight is None else weight[idx]
        grads, (loss, new) = step_grad(params, carry, xb, y[idx], wb, nz)
        grads = algo.correct_grads(grads, params, carry)
        mask = algo.update_mask(params, carry, nz)
        params, buf = sgd_step(params, grads, buf, lr, momentum, weight_decay, mask)
        loss_sum = loss_sum + loss.detach()
        if new:
            if not new.keys() <= carry.keys():
                raise KeyError(
                    f"{algo.name}: updates of {sorted(new.keys() - carry.keys())}, "
                    "not in client_begin's carry"
                )
            carry = {**carry, **new}
    return params, carry, loss_sum / max(len(batches), 1)
