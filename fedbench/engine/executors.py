"""Executors train the clients of one round; the sequential one is the reference."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from fedbench.algorithms.base import Algorithm, ClientContext, State
from fedbench.engine.batches import batch_plan
from fedbench.engine.config import TrainConfig
from fedbench.engine.federation import Federation
from fedbench.engine.functional import Apply, Params, stack_trees
from fedbench.engine.local import local_train
from fedbench.rng import Streams


@dataclass
class RoundJob:
    """Everything an executor needs to train the clients of one round."""

    algo: Algorithm
    apply: Apply
    fed: Federation
    cfg: TrainConfig
    streams: Streams
    round: int
    lr: float
    global_params: Params
    server_state: State
    client_states: dict[int, State]
    client_ids: list[int]
    pre_losses: dict[int, float]


@dataclass
class RoundOutput:
    """Stacked messages (leading axis follows `client_ids`), new client states, train losses."""

    messages: dict[str, Any]
    client_states: dict[int, State]
    train_losses: torch.Tensor


def stack_messages(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Stack per-client messages: dict leaves become stacked trees, scalars a 1-D tensor."""
    out: dict[str, Any] = {}
    for key, first in messages[0].items():
        values = [m[key] for m in messages]
        if isinstance(first, dict):
            out[key] = stack_trees(values)
        elif isinstance(first, torch.Tensor):
            out[key] = torch.stack(values)
        else:
            out[key] = torch.tensor(values, dtype=torch.float64)
    return out


def client_plan(job: RoundJob, cid: int) -> tuple[list[torch.Tensor], ClientContext]:
    """A client's batches for this round (its seeded `batches` stream) and its context."""
    idx = job.fed.train[cid]
    cfg = job.cfg
    epochs = None if cfg.local_epochs is None else job.algo.local_epochs(cfg.local_epochs)
    rng = job.streams.generator("batches", job.round, cid)
    batches = batch_plan(idx, cfg.batch_size, rng, epochs=epochs, steps=cfg.local_steps)
    ctx = ClientContext(
        client_id=cid,
        round=job.round,
        lr=job.lr,
        rounds=cfg.rounds,
        num_train=len(idx),
        num_steps=len(batches),
        steps_per_epoch=0 if epochs is None else math.ceil(len(idx) / cfg.batch_size),
        pre_loss=job.pre_losses.get(cid),
    )
    return batches, ctx


class SequentialExecutor:
    """One client after another, each through the engine's local-step loop."""

    name = "sequential"

    def run(self, job: RoundJob) -> RoundOutput:
        """Train every client of `job.client_ids`."""
        messages, states, losses = [], {}, []
        cfg, fed = job.cfg, job.fed
        for cid in job.client_ids:
            batches, ctx = client_plan(job, cid)
            state = job.client_states[cid]
            params, carry = job.algo.client_begin(job.global_params, job.server_state, state, ctx)
            noise = job.algo.step_noise(
                job.streams.torch_generator("algorithm", job.round, cid), ctx, job.global_params
            )
            params, loss = local_train(
                job.algo,
                job.apply,
                params,
                carry,
                fed.x,
                fed.y,
                batches,
                job.lr,
                cfg.momentum,
                cfg.weight_decay,
                noise,
            )
            message, states[cid] = job.algo.client_end(job.global_params, params, carry, state, ctx)
            if ctx.pre_loss is not None:
                message["pre_loss"] = ctx.pre_loss
            messages.append(message)
            losses.append(loss)
        return RoundOutput(stack_messages(messages), states, torch.stack(losses))
