"""Pure helpers over parameter dicts: functional model application and the local optimiser."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from torch import nn
from torch.func import functional_call

Params = dict[str, torch.Tensor]
Apply = Callable[[Params, torch.Tensor], torch.Tensor]


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


def tree_map(fn: Callable[..., torch.Tensor], *trees: Params) -> Params:
    """Apply `fn` leaf-wise over parameter dicts with the same keys."""
    return {k: fn(*(t[k] for t in trees)) for k in trees[0]}


def tree_sub(a: Params, b: Params) -> Params:
    """a - b, leaf-wise."""
    return {k: a[k] - b[k] for k in a}


def tree_add(a: Params, b: Params, scale: float = 1.0) -> Params:
    """a + scale * b, leaf-wise."""
    return {k: a[k] + scale * b[k] for k in a}


def tree_zeros_like(a: Params) -> Params:
    """Zeros shaped like `a`."""
    return {k: torch.zeros_like(v) for k, v in a.items()}


def tree_sq_norm(a: Params, keys: Iterable[str] | None = None) -> torch.Tensor:
    """Sum of squared entries over all (or the given) leaves."""
    keys = a.keys() if keys is None else keys
    return sum((a[k] * a[k]).sum() for k in keys)


def tree_all_finite(a: Params) -> bool:
    """True when no leaf holds NaN or inf."""
    return all(bool(torch.isfinite(v).all()) for v in a.values())


def stack_trees(trees: list[Params]) -> Params:
    """Stack a list of parameter dicts along a new leading client axis."""
    return {k: torch.stack([t[k] for t in trees]) for k in trees[0]}


def weighted_mean(stacked: Params, weights: torch.Tensor) -> Params:
    """Sum_i w_i x_i / sum_i w_i over the leading axis of each stacked leaf."""
    w = weights / weights.sum()
    return {
        k: torch.tensordot(w.to(device=v.device, dtype=v.dtype), v, dims=1)
        for k, v in stacked.items()
    }


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
    """One step of torch.optim.SGD (dampening 0, no Nesterov), out of place.

    `mask[k]` (0/1, a scalar or one value per stacked client) freezes parameter k and its momentum
    for this step, as if it were not in the optimiser.
    """
    new_p, new_b = {}, {}
    for k, p in params.items():
        g = grads[k]
        if weight_decay:
            g = g + weight_decay * p
        if momentum:
            g = momentum * buf[k] + g
            new_b[k] = g
        else:
            new_b[k] = buf[k]
        if mask is not None and k in mask:
            m = _broadcast(mask[k], p)
            new_p[k] = p - lr * m * g
            new_b[k] = m * new_b[k] + (1 - m) * buf[k]
        else:
            new_p[k] = p - lr * g
    return new_p, new_b


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
