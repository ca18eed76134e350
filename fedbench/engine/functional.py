"""Engine machinery over parameter dicts: functional model application and the local optimiser.

Parameter-tree types and maths live in `fedbench.tree`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.func import functional_call

from fedbench.tree import Apply, Params, tree_zeros_like


def params_of(model: nn.Module) -> Params:
    """Detached copies of a module's trainable parameters, by name."""
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def make_apply(model: nn.Module) -> Apply:
    """`apply(params, x)`: the model's forward pass with `params` in place of its own.

    `apply.module` keeps the module so an executor can inspect its layers (batched kernels).
    """
    buffers = dict(model.named_buffers())

    def apply(params: Params, x: torch.Tensor) -> torch.Tensor:
        return functional_call(model, (params, buffers), (x,))

    apply.module = model
    return apply


def sgd_init(params: Params) -> Params:
    """Momentum buffers for `sgd_step` (a fresh optimiser per client per round)."""
    return tree_zeros_like(params)


def sgd_step(
    params: Params,
    grads: Params,
    buf: Params,
    lr: float,
    momentum: float = 0.0,
    weight_decay: float = 0.0,
    mask: dict[str, torch.Tensor] | None = None,
) -> tuple[Params, Params]:
    """One step of torch.optim.SGD (dampening 0, no Nesterov), out of place, with its bits:
    d = g + wd·p (one fused multiply-add), then (momentum) d = μ·buf + d, then p + (−lr)·d
    (fused, as torch.optim's `add_(d, alpha=-lr)`).

    `mask[k]` (0/1, a scalar or one value per stacked client) freezes parameter k and its momentum
    for this step, as if it were not in the optimiser.
    """
    new = dict(params)
    new_b = sgd_update(new, grads, buf, lr, momentum, weight_decay, mask, params_owned=False)
    return new, new_b


def sgd_update(
    params: Params,
    grads: Params,
    buf: Params,
    lr: float,
    momentum: float = 0.0,
    weight_decay: float = 0.0,
    mask: dict[str, torch.Tensor] | None = None,
    params_owned: bool = True,
) -> Params:
    """One SGD step on the dict's leaves: in place (p += −lr·g over all leaves at once, one fused
    pass as torch.optim's foreach SGD, with its bits), masked leaves replaced by p − lr·m·g.
    Returns the new momentum buffers (`buf` itself without momentum). `params_owned=False` (a
    client's first step): the leaves are someone else's (the global model's), so this step writes
    new ones into the dict, which later steps own and update in place: no copy of the model per
    client."""
    new_b = {}
    plain_k, plain_p, plain_g = [], [], []
    for k, p in params.items():
        g = grads[k]
        if weight_decay:
            g = g.add(p, alpha=weight_decay)
        if momentum:
            g = buf[k] * momentum + g
            new_b[k] = g
        if mask is not None and k in mask:
            m = _broadcast(mask[k], p)
            params[k] = torch.addcmul(p, m, g, value=-lr)
            if momentum:
                new_b[k] = m * g + (1 - m) * buf[k]
        else:
            plain_k.append(k)
            plain_p.append(p)
            plain_g.append(g)
    if plain_p:
        if params_owned:
            torch._foreach_add_(plain_p, plain_g, alpha=-lr)
        else:
            moved = torch._foreach_add(plain_p, plain_g, alpha=-lr)
            for k, new in zip(plain_k, moved, strict=True):
                params[k] = new
    return new_b if momentum else buf


def sgd_step_(
    params: Params,
    grads: Params,
    buf: Params,
    lr: float,
    momentum: float = 0.0,
    weight_decay: float = 0.0,
    scale: dict[str, torch.Tensor] | None = None,
) -> None:
    """`sgd_step` in place on stacked leaves (leading client axis), for an executor's own buffers.

    `scale[k]` (0/1 per client, shape [clients]) plays `sgd_step`'s mask: clients without a batch
    this step, or parts an algorithm freezes, keep their weights and momentum.
    """
    for k, p in params.items():
        g = grads[k]
        if weight_decay:
            g = g.add(p, alpha=weight_decay)
        s = None if scale is None else scale.get(k)
        if momentum:
            b = buf[k]
            if s is None:
                g = b.mul_(momentum).add_(g)
            else:
                s = _broadcast(s, b)
                g = b * momentum + g
                b.copy_(s * g + (1 - s) * b)
        if s is None:
            p.add_(g, alpha=-lr)
        else:
            p.addcmul_(_broadcast(s, p), g, value=-lr)


def _broadcast(m: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Give a per-client factor trailing singleton axes so it broadcasts over `like`."""
    m = torch.as_tensor(m, dtype=like.dtype, device=like.device)
    return m.reshape(m.shape + (1,) * (like.dim() - m.dim()))


@dataclass(frozen=True)
class Adam:
    """The local optimiser `training.optimizer: adam`: torch.optim.Adam (L2 weight decay added to
    the gradient, not decoupled; no AMSGrad), a fresh state per client per round as with SGD.

    `adam_update` (one client, the sequential executor) gives torch.optim.Adam's bits;
    `adam_step_` runs the same operations on stacked clients in lockstep. Every active client of a
    lockstep step has taken the same number of steps (a client's batches are a prefix of the
    longest plan), so the bias corrections are Python floats as in torch's single-tensor path.
    """

    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0


def masks_refused(algo_name: str) -> ValueError:
    """The error of an algorithm that freezes parameters with update masks under Adam in the
    vectorised executor (its lockstep Adam keeps one step count per chunk, not per leaf and
    client; the sequential executor keeps one per leaf)."""
    return ValueError(
        f"{algo_name} freezes parameters with update masks, which the vectorised executor's "
        "Adam does not support; use training.executor: sequential (or optimizer: sgd)"
    )


def adam_init(params: Params) -> dict[str, Any]:
    """Adam's state for `params`: both moments at zero, no step taken (`step` counts the
    optimiser's steps, `steps[k]` those that updated leaf k: fewer when masks froze it)."""
    return {
        "m": tree_zeros_like(params),
        "v": tree_zeros_like(params),
        "step": 0,
        "steps": dict.fromkeys(params, 0),
    }


def _adam_moments(p, g, m, v, opt: Adam, step: int) -> tuple[torch.Tensor, float]:
    """Update the moments of one leaf in place; return Adam's denominator and the first moment's
    bias correction."""
    beta1, beta2 = opt.betas
    if opt.weight_decay:
        g = g.add(p, alpha=opt.weight_decay)
    m.lerp_(g, 1 - beta1)
    v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
    bias1 = 1 - beta1 ** float(step)
    bias2_sqrt = (1 - beta2 ** float(step)) ** 0.5
    return (v.sqrt() / bias2_sqrt).add_(opt.eps), bias1


def adam_update(
    params: Params,
    grads: Params,
    state: dict[str, Any],
    lr: float,
    opt: Adam,
    params_owned: bool,
    mask: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One Adam step of one client with torch.optim.Adam's arithmetic; in place on the leaves
    unless `params_owned` is False (the first step writes new leaves, as `sgd_update`).

    `mask[k]` = 0 leaves leaf k, its moments and its step count untouched, as if it were in
    another torch optimiser that does not step now (FedCGAN's discriminator and generator, two
    Adams in the release); 1 or absent = updated. Other values are refused."""
    steps = dict(state["steps"])
    for k, p in params.items():
        if mask is not None and k in mask and not _mask_on(mask[k], k):
            continue
        steps[k] += 1
        denom, bias1 = _adam_moments(p, grads[k], state["m"][k], state["v"][k], opt, steps[k])
        if params_owned:
            p.addcdiv_(state["m"][k], denom, value=-(lr / bias1))
        else:
            params[k] = torch.addcdiv(p, state["m"][k], denom, value=-(lr / bias1))
    return {**state, "step": state["step"] + 1, "steps": steps}


def _mask_on(m: Any, key: str) -> bool:
    """A one-client Adam mask entry: True for 1, False for 0 (a float or a 0-d tensor)."""
    v = float(m)
    if v not in (0.0, 1.0):
        raise ValueError(
            f"update mask of {key!r} is {v:g}: under training.optimizer: adam a parameter is "
            "either trained (1) or frozen (0) at a step"
        )
    return v == 1.0


def adam_step_(
    params: Params,
    grads: Params,
    state: dict[str, Any],
    lr: float,
    opt: Adam,
    step: int,
    scale: dict[str, torch.Tensor] | None = None,
) -> None:
    """`adam_update` in place on stacked leaves (leading client axis) at lockstep step `step`
    (1-based); `scale[k]` (0/1 per client) keeps clients without a batch exactly where they were,
    moments included."""
    for k, p in params.items():
        s = None if scale is None else scale.get(k)
        m, v = state["m"][k], state["v"][k]
        if s is not None:
            old = (p.clone(), m.clone(), v.clone())
        denom, bias1 = _adam_moments(p, grads[k], m, v, opt, step)
        p.addcdiv_(m, denom, value=-(lr / bias1))
        if s is not None:
            keep = _broadcast(s, p) == 0
            for new, before in zip((p, m, v), old, strict=True):
                new.copy_(torch.where(keep, before, new))
