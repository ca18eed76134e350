"""All clients of a round (or a chunk of them) train in lockstep through torch.func.vmap.

The same algorithm hooks as the sequential executor run here: `client_begin` / `client_end` once per
client, `local_loss` and `correct_grads` vmapped over stacked parameters at every step. Clients
whose last batch is short are padded and masked (the padded samples carry weight 0); clients with
fewer steps are frozen by a step mask, not fed fake data.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import torch
from torch import nn
from torch.func import grad_and_value, vmap
from torch.utils._pytree import tree_flatten, tree_unflatten

from fedbench.algorithms.base import Batch
from fedbench.engine.executors import RoundJob, RoundOutput, client_plan, stack_messages
from fedbench.engine.functional import Params, sgd_init, sgd_step

log = logging.getLogger("fedbench.engine")

DEFAULT_MEMORY_BUDGET_MB = 2048


def stack_pytrees(trees: list[Any]) -> Any:
    """Stack a list of same-structured pytrees (dicts of tensors, floats) along a new axis 0."""
    flat = [tree_flatten(t) for t in trees]
    spec = flat[0][1]
    leaves = []
    for i in range(len(flat[0][0])):
        column = [f[0][i] for f in flat]
        leaves.append(
            torch.stack(column)
            if isinstance(column[0], torch.Tensor)
            else torch.tensor(column, dtype=torch.float32)
        )
    return tree_unflatten(leaves, spec)


def chunk_size(
    num_params: int, batch_size: int, sample_numel: int, budget_mb: int, override: int | None
) -> int:
    """Clients per vmapped chunk: the override, else what fits the memory budget.

    Per client: about 8 copies of the parameters (params, grads, momentum, their updates, carry)
    plus a batch of inputs with a few activation-sized buffers; a deliberate over-estimate.
    """
    if override is not None:
        return override
    per_client = 4 * (8 * num_params + 4 * batch_size * max(sample_numel, 1))
    return max(1, int(budget_mb * 2**20 // per_client))


def has_batch_stats(model: nn.Module) -> bool:
    """True when the model has layers whose output depends on other samples (BatchNorm)."""
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())


def resolve_executor(requested: str, model: nn.Module) -> tuple[str, str]:
    """`auto` -> vectorised where it is exact for this model; returns (name, reason)."""
    if requested != "auto":
        return requested, "requested"
    if has_batch_stats(model):
        return "sequential", "model has BatchNorm: per-client batch statistics under vmap untested"
    return "vectorised", "auto: model has no cross-sample layers, vmap is exact"


class VectorisedExecutor:
    """vmap(grad(local_loss)) over stacked client parameters, chunked to a memory budget."""

    name = "vectorised"

    def __init__(self, chunk: int | None = None, budget_mb: int = DEFAULT_MEMORY_BUDGET_MB):
        self.chunk = chunk
        self.budget_mb = budget_mb

    def run(self, job: RoundJob) -> RoundOutput:
        """Train every client of `job.client_ids`, a chunk at a time."""
        num_params = sum(v.numel() for v in job.global_params.values())
        size = chunk_size(
            num_params,
            job.cfg.batch_size,
            math.prod(job.fed.x.shape[1:]),
            self.budget_mb,
            self.chunk,
        )
        messages, states, losses = [], {}, []
        for start in range(0, len(job.client_ids), size):
            m, s, l = self._run_chunk(job, job.client_ids[start : start + size])
            messages += m
            states.update(s)
            losses.append(l)
        return RoundOutput(stack_messages(messages), states, torch.cat(losses))

    def _run_chunk(self, job: RoundJob, ids: list[int]):
        algo, cfg, fed = job.algo, job.cfg, job.fed
        plans, ctxs, starts, carries, noises = [], [], [], [], []
        for cid in ids:
            plan, ctx = client_plan(job, cid)
            params, carry = algo.client_begin(
                job.global_params, job.server_state, job.client_states[cid], ctx
            )
            noise = algo.step_noise(
                job.streams.torch_generator("algorithm", job.round, cid), ctx, job.global_params
            )
            plans.append(plan)
            ctxs.append(ctx)
            starts.append(params)
            carries.append(carry)
            noises.append(noise)
        n_clients, n_steps, B = len(ids), max(len(p) for p in plans), cfg.batch_size
        device = fed.x.device
        index = torch.zeros(n_steps, n_clients, B, dtype=torch.long, device=device)
        mask = torch.zeros(n_steps, n_clients, B, dtype=fed.x.dtype, device=device)
        for c, plan in enumerate(plans):
            index[:, c, :] = fed.train[ids[c]][0]  # padding points at a real sample, masked out
            for s, b in enumerate(plan):
                index[s, c, : len(b)] = b
                mask[s, c, : len(b)] = 1.0
        active = mask.amax(dim=2) > 0  # [steps, clients]
        params = stack_pytrees(starts)
        carry = stack_pytrees(carries)
        noise = None
        if noises[0] is not None:
            padded = [torch.cat([n, n.new_zeros((n_steps - len(n), *n.shape[1:]))]) for n in noises]
            noise = torch.stack(padded).to(device).transpose(0, 1)  # [steps, clients, ...]

        def step(p: Params, xb, yb, mb, cr, nz):
            def loss_fn(q: Params) -> torch.Tensor:
                return algo.local_loss(job.apply, q, Batch(xb, yb, mb), cr, nz)

            g, value = grad_and_value(loss_fn)(p)
            upd = algo.update_mask(p, cr, nz)
            return algo.correct_grads(g, p, cr), value, {} if upd is None else upd

        vstep = vmap(step, in_dims=(0, 0, 0, 0, 0, None if noise is None else 0))
        buf = sgd_init(params)
        loss_sum = torch.zeros(n_clients, device=device)
        for s in range(n_steps):
            rows = index[s]
            grads, value, upd = vstep(
                params,
                fed.x[rows],
                fed.y[rows],
                mask[s],
                carry,
                None if noise is None else noise[s],
            )
            new_p, new_b = sgd_step(params, grads, buf, job.lr, cfg.momentum, cfg.weight_decay, upd)
            keep = active[s]
            params = {k: _where(keep, new_p[k], params[k]) for k in params}
            buf = {k: _where(keep, new_b[k], buf[k]) for k in buf}
            loss_sum = loss_sum + torch.where(keep, value.detach(), torch.zeros_like(value))
        messages, states = [], {}
        for c, cid in enumerate(ids):
            trained = {k: v[c] for k, v in params.items()}
            message, states[cid] = algo.client_end(
                job.global_params, trained, carries[c], job.client_states[cid], ctxs[c]
            )
            if ctxs[c].pre_loss is not None:
                message["pre_loss"] = ctxs[c].pre_loss
            messages.append(message)
        steps = torch.tensor([len(p) for p in plans], device=device, dtype=loss_sum.dtype)
        return messages, states, loss_sum / steps.clamp(min=1)


def _where(keep: torch.Tensor, new: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
    return torch.where(keep.view(-1, *([1] * (new.dim() - 1))), new, old)
