"""One local step, hook by hook: the only place that knows the hooks' order and the optimisers.

A client's step on a batch is, in this order:

    carry |= algo.before_step(apply, params, batch, carry, noise)     `prepare` (not differentiated)
    grads, loss (, updates) = grad of algo.local_loss(apply, params, batch, carry, noise)
    grads = algo.correct_grads(grads, params, carry)                  `finish`
    mask  = algo.update_mask(params, carry, noise)                    `finish` (frozen leaves)
    params, opt_state = the optimiser's step (SGD: torch.optim.SGD's bits, momentum and weight
                        decay; or Adam), leaves under a 0 mask frozen
    carry |= updates                                                  (`algo.carry_updates`)

A pass of `FrozenPasses` (`algo.trains(noise)` False) stops after `prepare`: no gradient, no
optimiser step, the loss `prepare` left in `carry["loss"]`; a 0/1 mark trains as above, masked.

`make_step(algo, apply, differentiate)` gives these pieces for one client's tensors, with the
gradient taken by `differentiate` (the sequential executor's autograd pass, or torch.func's
`grad_and_value`, which the vectorised executor vmaps over a chunk of clients). The sequential
executor is a loop over them (`engine/local.py`, optimiser `ClientOptimiser`); the vectorised
executor vmaps `prepare` and `gradient` over its clients (optimiser `stacked_step`), and its
layer-chain kernels swap in their own gradients and vmap `finish` over them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from fedbench.algorithms.base import Algorithm, Batch, State
from fedbench.algorithms.opt_in import FrozenPasses, LocalSteps, opt_in
from fedbench.engine.capabilities import capabilities
from fedbench.engine.functional import (
    Adam,
    adam_init,
    adam_step_,
    adam_update,
    masks_refused,
    sgd_init,
    sgd_step,
    sgd_step_,
    sgd_update,
)
from fedbench.tree import Apply, Params

Mask = dict[str, torch.Tensor] | None


@dataclass(frozen=True)
class Step:
    """The pieces of one local step of `algo` (see the module docstring for their order).

    prepare(params, batch, carry, noise) -> carry entries; None when the algorithm has no
        `before_step`.
    gradient(params, batch, carry, noise) -> (grads, loss, mask, updates): the local loss's
        gradient, corrected, the step's update mask (None: train every leaf) and the carry
        entries the loss returned ({} without `carry_updates`); a step `FrozenPasses` marks
        train-or-not is masked by its mark.
    finish(grads, params, carry, noise) -> (grads, mask): the hooks after the gradient, for a
        gradient taken elsewhere (the layer-chain kernels, which skip it when the algorithm has
        neither hook: `fedbench.engine.capabilities`).
    passes(noise) -> whether the step (for every client, given its noise) is a pass of
        `FrozenPasses`: `prepare` alone, no gradient and no optimiser step, the step's loss the
        one `prepare` left in `carry["loss"]`; False for every other algorithm.
    """

    prepare: Callable[[Params, Batch, State, Any], State] | None
    gradient: Callable[[Params, Batch, State, Any], tuple[Params, torch.Tensor, Mask, State]]
    finish: Callable[[Params, Params, State, Any], tuple[Params, Mask]]
    passes: Callable[[Any], bool]


def make_step(
    algo: Algorithm,
    apply: Apply,
    differentiate: Callable[[Callable[..., Any]], Callable[..., Any]],
) -> Step:
    """The step of `algo` on `apply`'s network. `differentiate(loss_fn)` returns
    `(params, *args) -> (grads, (loss, updates))` for `loss_fn(params, *args) -> (loss, updates)`
    (grads with respect to the first argument)."""
    updates = algo.carry_updates
    hooks = opt_in(algo, LocalSteps)  # FedAvg's step hooks unless the algorithm has its own

    def loss_fn(params: Params, batch: Batch, carry: State, noise: Any):
        out = algo.local_loss(apply, params, batch, carry, noise)
        return out if updates else (out, {})

    grad_value = differentiate(loss_fn)

    def finish(grads: Params, params: Params, carry: State, noise: Any) -> tuple[Params, Mask]:
        return hooks.correct_grads(grads, params, carry), hooks.update_mask(params, carry, noise)

    def gradient(params: Params, batch: Batch, carry: State, noise: Any):
        grads, (loss, new) = grad_value(params, batch, carry, noise)
        grads, mask = finish(grads, params, carry, noise)
        return grads, loss, mask, new

    passes = _never
    if isinstance(algo, FrozenPasses):
        trained = gradient

        def passes(noise: Any) -> bool:  # a step that trains nothing
            return algo.trains(noise) is False

        def gradient(params: Params, batch: Batch, carry: State, noise: Any):
            trains = algo.trains(noise)
            grads, loss, mask, new = trained(params, batch, carry, noise)
            mask = {k: trains if mask is None else mask[k] * trains for k in params}
            return grads, loss, mask, new

    prepare = None
    if capabilities(algo).before_step:

        def prepare(params: Params, batch: Batch, carry: State, noise: Any) -> State:
            return hooks.before_step(apply, params, batch, carry, noise)

    return Step(prepare, gradient, finish, passes)


def _never(noise: Any) -> bool:
    return False


def merged(algo: Algorithm, carry: State, new: State) -> State:
    """`carry` with a step's entries replaced (each must be a key of client_begin's carry)."""
    check_carry_keys(algo, carry, new)
    return {**carry, **new}


def check_carry_keys(algo: Algorithm, carry: State, new: State) -> None:
    """A step's carry entries (`before_step`'s, or `local_loss`'s updates) must be keys of
    client_begin's carry (both executors)."""
    if not new.keys() <= carry.keys():
        raise KeyError(
            f"{algo.name}: updates of {sorted(new.keys() - carry.keys())}, "
            "not in client_begin's carry"
        )


class ClientOptimiser:
    """One client's local optimiser (the sequential executor): SGD with torch.optim.SGD's bits
    (momentum, weight decay), or Adam (torch.optim.Adam's bits; `momentum` must be 0).

    Without carry updates nothing a step returns can alias the parameters, so after its first
    step (which writes new leaves) the client trains them in place (`in_place`: `sgd_update`,
    sgd_step's numbers without its temporaries); the caller's parameter dict keeps its leaves.
    """

    def __init__(
        self,
        params: Params,
        lr: float,
        momentum: float,
        weight_decay: float,
        adam: Adam | None,
        in_place: bool,
    ):
        self.lr, self.momentum, self.weight_decay, self.adam = lr, momentum, weight_decay, adam
        self.in_place = in_place
        self.buf = sgd_init(params) if adam is None and (momentum or not in_place) else {}
        self.state = None if adam is None else adam_init(params)
        self.masked = False  # whether an update mask has frozen a leaf yet (Adam)

    def start(self, params: Params) -> Params:
        """The parameters the steps train (a copy of the dict when trained in place)."""
        return dict(params) if self.in_place else params

    def step(self, params: Params, grads: Params, mask: Mask, step: int) -> Params:
        """Step `step` (0-based); returns the parameters after it."""
        if self.adam is not None:
            self.masked = self.masked or mask is not None
            if not self.in_place or self.masked:
                params = dict(params)
            # After a mask, a leaf frozen so far may still be the caller's: write new leaves.
            owned = self.in_place and step > 0 and not self.masked
            self.state = adam_update(params, grads, self.state, self.lr, self.adam, owned, mask)
        elif self.in_place:
            self.buf = sgd_update(
                params,
                grads,
                self.buf,
                self.lr,
                self.momentum,
                self.weight_decay,
                mask,
                params_owned=step > 0,
            )
        else:
            params, self.buf = sgd_step(
                params, grads, self.buf, self.lr, self.momentum, self.weight_decay, mask
            )
        return params


def stacked_state(optimizer: str, momentum: float, params: Params) -> dict[str, Any]:
    """A chunk's local optimiser state (stacked leaves): Adam's moments, SGD's momentum buffers."""
    if optimizer == "adam":
        return adam_init(params)
    return {k: torch.zeros_like(v) for k, v in params.items()} if momentum else {}


def stacked_step(
    algo: Algorithm,
    cfg: Any,
    adam: Adam | None,
    params: Params,
    grads: Params,
    state: dict[str, Any],
    lr: float,
    s: int,
    scale: Mask,
    masked: bool,
) -> None:
    """Lockstep step `s` (0-based) of the local optimiser on a chunk's stacked leaves, in place
    (`adam`: cfg.adam(); `scale`: per-client 0/1 factors of clients without a batch and of the
    update mask)."""
    if adam is None:
        sgd_step_(params, grads, state, lr, cfg.momentum, cfg.weight_decay, scale)
        return
    if masked:
        raise masks_refused(algo.name)
    adam_step_(params, grads, state, lr, adam, s + 1, scale)
