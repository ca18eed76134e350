"""Executors train the clients of one round; the sequential one is the reference."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import torch

from fedbench.algorithms.base import Algorithm, ClientContext, State
from fedbench.algorithms.opt_in import CandidateModels, LocalSteps, opt_in
from fedbench.engine.batches import batch_plan, num_local_steps
from fedbench.engine.capabilities import capabilities
from fedbench.engine.evaluate import client_losses
from fedbench.engine.federation import Federation
from fedbench.engine.local import local_train_carry
from fedbench.engine.train_config import TrainConfig
from fedbench.rng import Streams
from fedbench.tree import Apply, Params, stack_trees, tree_to


@dataclass(kw_only=True)
class RoundJob:
    """Everything an executor needs to train the clients of one round (named fields only)."""

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
    # fresh_init(*key): a new initialisation of the network (run_rounds' `fresh_init`), if any.
    fresh_init: Callable[..., Params] | None = None


@dataclass
class RoundOutput:
    """Stacked messages (leading axis follows `client_ids`), new client states, train losses."""

    messages: dict[str, Any]
    client_states: dict[int, State]
    train_losses: torch.Tensor


def stack_messages(
    messages: list[dict[str, Any]], device: torch.device | None = None
) -> dict[str, Any]:
    """Stack per-client messages: dict leaves become stacked trees, scalars a 1-D tensor; with
    `device`, everything on it (a hook may build a message's tensors on the CPU)."""
    if device is not None:
        messages = [tree_to(m, device) for m in messages]
    out: dict[str, Any] = {}
    for key, first in messages[0].items():
        values = [m[key] for m in messages]
        if isinstance(first, dict):
            out[key] = stack_trees(values)
        elif isinstance(first, torch.Tensor):
            out[key] = torch.stack(values)
        else:
            out[key] = torch.tensor(values, dtype=torch.float64, device=device)
    return out


def candidate_losses(job: RoundJob, cid: int) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """The keys of the algorithm's candidate models for client `cid` and their mean losses on
    its validation split (training split without one); empty unless the algorithm has some."""
    if not capabilities(job.algo).candidates:
        return (), ()
    rng = job.streams.torch_generator("algorithm", job.round, cid, 1)
    pairs = opt_in(job.algo, CandidateModels).candidates(
        rng, cid, job.round, job.global_params, job.server_state, job.client_states[cid]
    )
    fed = job.fed
    split = fed.val[cid] if fed.val and len(fed.val[cid]) else fed.train[cid]
    losses = tuple(
        client_losses(
            job.apply, params, fed.x, fed.y, [split], job.cfg.eval_batch_size, fed.weight
        )[0]
        for _, params in pairs
    )
    return tuple(key for key, _ in pairs), losses


def client_context(job: RoundJob, cid: int, num_steps: int) -> ClientContext:
    """What client `cid` knows in this round."""
    cfg = job.cfg
    n = len(job.fed.train[cid])
    keys, losses = candidate_losses(job, cid)
    return ClientContext(
        client_id=cid,
        round=job.round,
        lr=job.lr,
        rounds=cfg.rounds,
        num_train=n,
        num_steps=num_steps,
        steps_per_epoch=0 if cfg.local_epochs is None else math.ceil(n / cfg.batch_size),
        pre_loss=job.pre_losses.get(cid),
        candidates=keys,
        candidate_losses=losses,
        apply=job.apply,
        fresh=None if job.fresh_init is None else partial(job.fresh_init, cid, job.round),
        input_shape=tuple(job.fed.x.shape[1:]),
        num_classes=job.fed.num_classes,
        batch_size=cfg.batch_size,
        split=(job.fed.x, job.fed.y, job.fed.train[cid]),
        num_test=len(job.fed.test[cid]),
        algorithm_stream=partial(job.streams.torch_generator, "algorithm", job.round, cid),
    )


def _epochs(job: RoundJob) -> int | None:
    epochs = job.cfg.local_epochs
    return None if epochs is None else opt_in(job.algo, LocalSteps).local_epochs(epochs)


def client_plan(job: RoundJob, cid: int) -> tuple[list[torch.Tensor], ClientContext]:
    """A client's batches for this round (its seeded `batches` stream) and its context."""
    rng = job.streams.generator("batches", job.round, cid)
    batches = batch_plan(
        job.fed.train[cid], job.cfg.batch_size, rng, epochs=_epochs(job), steps=job.cfg.local_steps
    )
    repeat = opt_in(job.algo, LocalSteps).steps_per_batch
    if repeat > 1:  # an alternating update: each batch for `steps_per_batch` steps in a row
        batches = [idx for idx in batches for _ in range(repeat)]
    return batches, client_context(job, cid, len(batches))


def host_plan(job: RoundJob, cid: int) -> tuple[np.ndarray, np.ndarray]:
    """`client_plan`'s batches as host arrays: rows [steps, B] (short batches padded with one of
    the client's own samples) and the real size of each batch; the same draws, in numpy."""
    idx = job.fed.train[cid]
    B = job.cfg.batch_size
    n = len(idx)
    total = num_local_steps(n, B, _epochs(job), job.cfg.local_steps) if n else 0
    if total == 0:
        return np.zeros((0, B), dtype=np.int64), np.zeros(0, dtype=np.int64)
    host = idx.cpu().numpy()
    rng = job.streams.generator("batches", job.round, cid)
    per_pass = math.ceil(n / B)
    passes = math.ceil(total / per_pass)
    flat = np.full((passes, per_pass * B), host[0], dtype=np.int64)
    for p in range(passes):
        flat[p, :n] = host[rng.permutation(n)]
    rows = flat.reshape(passes * per_pass, B)[:total]
    sizes = np.full((passes, per_pass), B, dtype=np.int64)
    sizes[:, -1] = n - (per_pass - 1) * B
    return rows, sizes.reshape(-1)[:total]


def client_noise(job: RoundJob, cid: int, ctx: ClientContext) -> torch.Tensor | None:
    """The algorithm's per-step draws for this client (its `algorithm` stream)."""
    if not capabilities(job.algo).step_noise:
        return None  # FedAvg's hook draws nothing: skip seeding a generator
    rng = job.streams.torch_generator("algorithm", job.round, cid)
    return tree_to(
        opt_in(job.algo, LocalSteps).step_noise(rng, ctx, job.global_params), job.fed.x.device
    )


def client_draws(job: RoundJob, cid: int, num_steps: int) -> dict[str, torch.Tensor] | None:
    """This client's augmentation draws for the round ([steps, B]; its `augment` stream)."""
    aug = job.cfg.augment
    if aug is None or not aug.random:
        return None
    gen = job.streams.torch_generator("augment", job.round, cid)
    return aug.draw(gen, (num_steps, job.cfg.batch_size))


def _unshared(buf: torch.Tensor) -> bool:
    """Whether nothing but the caller holds `buf` (a local name and getrefcount's argument) or
    its memory (no view or other tensor on its storage). Without torch's storage use count
    (a private function), never."""
    use_count = getattr(torch._C, "_storage_Use_Count", None)
    if use_count is None or sys.getrefcount(buf) > 3:
        return False
    # buf's own tensor and the storage object made here to ask.
    return use_count(buf.untyped_storage()._cdata) <= 2


class DeltaBuffers:
    """The round's stacked deltas ([clients, *shape] per parameter, FedAvg's `client_end`), kept
    from one round to the next. On a CPU a fresh buffer is mapped and unmapped by the allocator
    every round, and its first write page-faults: for TwoNN's first layer at 100 clients (63 MB)
    that costs ten times the subtraction that fills it. A kept buffer is reused only when
    nothing else holds it, no reference to the tensor and no view of its memory (so a server
    that keeps last round's deltas keeps them intact); otherwise a new one is made. Every row is
    written each round, so the values do not depend on what the buffer held. On a GPU the
    caching allocator already keeps freed blocks (and a kept buffer would hold memory through
    the evaluation): there every round takes a new one."""

    def __init__(self) -> None:
        self._kept: dict[str, torch.Tensor] = {}

    def take(self, like: Params, clients: int) -> dict[str, torch.Tensor]:
        """A [clients, *shape] buffer per parameter of `like`, in its dtype and device."""
        out = {}
        for k, v in like.items():
            shape = (clients, *v.shape)
            buf = self._kept.pop(k, None)
            if (
                buf is None
                or buf.shape != shape
                or buf.dtype != v.dtype
                or buf.device != v.device
                or not _unshared(buf)
            ):
                buf = torch.empty(shape, dtype=v.dtype, device=v.device)
            if buf.device.type == "cpu":
                self._kept[k] = buf
            out[k] = buf
        return out


class SequentialExecutor:
    """One client after another, each through the engine's local-step loop."""

    name = "sequential"

    def __init__(self) -> None:
        self._deltas = DeltaBuffers()

    def describe(self) -> dict[str, Any]:
        """How the last round ran (for run.yaml)."""
        return {}

    def run(self, job: RoundJob) -> RoundOutput:
        """Train every client of `job.client_ids`. With FedAvg's `client_end`, each client's
        delta is written straight into the round's stacked message (the same bits as stacking
        its `tree_sub`, without a second copy of every client's model)."""
        messages, states, losses = [], {}, []
        cfg, fed = job.cfg, job.fed
        stacked_end = not capabilities(job.algo).client_end
        if stacked_end:
            out = self._deltas.take(job.global_params, len(job.client_ids))
        for i, cid in enumerate(job.client_ids):
            batches, ctx = client_plan(job, cid)
            state = job.client_states[cid]
            params, carry = tree_to(
                job.algo.client_begin(job.global_params, job.server_state, state, ctx), fed.x.device
            )
            noise = client_noise(job, cid, ctx)
            draws = client_draws(job, cid, len(batches))
            params, carry, loss = local_train_carry(
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
                None if draws is None else (cfg.augment, draws),
                fed.weight,
                adam=cfg.adam(),
            )
            losses.append(loss)
            if stacked_end:
                for k, v in params.items():
                    torch.sub(v, job.global_params[k], out=out[k][i])
                states[cid] = state
                continue
            message, states[cid] = job.algo.client_end(job.global_params, params, carry, state, ctx)
            if ctx.pre_loss is not None:
                message["pre_loss"] = ctx.pre_loss
            messages.append(message)
        stacked = (
            fedavg_messages(job, out) if stacked_end else stack_messages(messages, fed.x.device)
        )
        return RoundOutput(stacked, states, torch.stack(losses))


def fedavg_messages(job: RoundJob, deltas: dict[str, torch.Tensor]) -> dict[str, Any]:
    """The round's stacked messages of FedAvg's `client_end` from the stacked deltas: the
    clients' training-split sizes as weights and their pre-training losses if asked (float64,
    as `stack_messages` makes them)."""
    ids, dev = job.client_ids, job.fed.x.device
    sizes = [float(len(job.fed.train[i])) for i in ids]
    stacked = {"delta": deltas, "weight": torch.tensor(sizes, dtype=torch.float64, device=dev)}
    if job.pre_losses:
        losses = [job.pre_losses[i] for i in ids]
        stacked["pre_loss"] = torch.tensor(losses, dtype=torch.float64, device=dev)
    return stacked
