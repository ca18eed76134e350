"""The sequential executor's local training: a loop of a client's steps (`engine/step.py`, the
hooks' order and the optimisers) over its mini-batches."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import torch
from torch.utils._pytree import tree_map

from fedbench.algorithms.base import Algorithm, Batch, State
from fedbench.algorithms.opt_in import LocalSteps, opt_in
from fedbench.engine.augment import Augment
from fedbench.engine.functional import Adam
from fedbench.engine.step import ClientOptimiser, make_step, merged
from fedbench.tree import Apply, Params


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
    adam: Adam | None = None,
) -> tuple[Params, State, torch.Tensor]:
    """Run the local steps; return the trained parameters, the final carry (the one
    `client_end` receives: client_begin's, with each step's updates when `algo.carry_updates`)
    and the mean training loss (a tensor).

    `augment` = (transform, draws [steps, B]): each batch is transformed with its step's draws.
    `weight`: per-row loss weights of the pool (Federation.weight), None = unweighted.
    `adam`: train with Adam (torch.optim.Adam's bits) instead of SGD (`momentum` must be 0).
    """
    step_fns = make_step(algo, apply, partial(_grad_and_value, create_graph=_graph(apply)))
    if noise is not None and opt_in(algo, LocalSteps).noise_is_schedule:
        noise = noise.tolist()  # one Python float a step: local_loss may branch on it
    opt = ClientOptimiser(params, lr, momentum, weight_decay, adam, in_place=not algo.carry_updates)
    params = opt.start(params)
    loss_sum = torch.zeros((), device=x.device)
    for step, idx in enumerate(batches):
        nz = step_of(noise, step)
        xb = x[idx]
        if augment is not None:
            aug, draws = augment
            xb = aug.apply(xb, {k: v[step, : len(idx)] for k, v in draws.items()})
        batch = Batch(xb, y[idx], None, None if weight is None else weight[idx])
        if step_fns.prepare is not None:
            carry = merged(algo, carry, step_fns.prepare(params, batch, carry, nz))
        if step_fns.passes(nz):  # FrozenPasses: `prepare` did the step's work
            loss, new = carry["loss"], {}
        else:
            grads, loss, mask, new = step_fns.gradient(params, batch, carry, nz)
            params = opt.step(params, grads, mask, step)
        loss_sum = loss_sum + loss.detach()
        if new:
            carry = merged(algo, carry, new)
    return params, carry, loss_sum / max(len(batches), 1)


def step_of(noise: Any, step: int) -> Any:
    """Step `step` of an algorithm's draws: a tensor's row, a dict's rows (`step_noise` may
    return named draws of different shapes), a schedule's float; None for none."""
    if noise is None:
        return None
    if isinstance(noise, dict):
        return {k: v[step] for k, v in noise.items()}
    return noise[step]


def _graph(apply: Apply) -> bool:
    """Whether the step's backward needs grad mode to give torch.func's bits (the model is not
    one of `fedbench.models.PLAIN_BACKWARD`, or apply hides its module)."""
    return not getattr(getattr(apply, "module", None), "plain_backward", False)


def _grad_and_value(
    loss_fn: Callable[..., tuple[torch.Tensor, State]], create_graph: bool = True
) -> Callable[..., Any]:
    """`torch.func.grad_and_value(loss_fn, has_aux=True)` for one client's plain tensors, by
    torch.autograd.grad on leaf copies of the parameters: the same numbers (functorch's grad is
    this autograd.grad call on wrapped tensors) without functorch's first call importing
    torch._dynamo (1.5-3 s of every training process). Unused parameters get zero gradients and
    the outputs are detached. `create_graph` runs the backward in grad mode as torch.func does:
    without it the backward of nn.LSTM's fused CPU kernel and of SiLU (EfficientNet, MobileViT)
    takes other paths, 1e-8 apart; the models of `PLAIN_BACKWARD` give the same bits either way
    and skip it (~10% of a TwoNN step at batch 10). The vectorised executor keeps torch.func."""

    def step(params: Params, *args: Any) -> tuple[Params, tuple[torch.Tensor, State]]:
        with torch.enable_grad():
            leaves = {k: v.detach().requires_grad_() for k, v in params.items()}
            loss, aux = loss_fn(leaves, *args)
            grads = (
                torch.autograd.grad(
                    loss, list(leaves.values()), create_graph=create_graph, allow_unused=True
                )
                if loss.requires_grad
                else (None,) * len(leaves)
            )
        grads = {
            k: torch.zeros_like(v) if g is None else g.detach()
            for (k, v), g in zip(leaves.items(), grads, strict=True)
        }
        return grads, (loss.detach(), tree_map(_detached, aux))

    return step


def _detached(x: Any) -> Any:
    return x.detach() if isinstance(x, torch.Tensor) and x.requires_grad else x
