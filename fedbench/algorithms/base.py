"""The algorithm interface: FedAvg is every hook's default; other algorithms override a few hooks.

Hooks are pure functions over parameter dicts (`Params`): state goes in and comes out, nothing is
mutated, so the engine can run them one client at a time or for all clients of a round at once.
See docs/architecture.md for where each paper's idea plugs in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np
import torch

from fedbench.objectives import masked_mean as masked_mean  # the algorithms' import
from fedbench.objectives import objective_of
from fedbench.tree import Apply, Params, tree_sub, weighted_mean

State = dict[str, Any]


class Batch(NamedTuple):
    """One local mini-batch; `mask` (1 = real sample) is None unless an executor pads batches;
    `weight` = each sample's loss weight (its client's class weight; None unless the run's
    objective weights samples, fedbench/objectives.py)."""

    x: torch.Tensor
    y: torch.Tensor
    mask: torch.Tensor | None = None
    weight: torch.Tensor | None = None


@dataclass(frozen=True)
class ClientContext:
    """What a client knows during one round."""

    client_id: int
    round: int  # 1-based
    lr: float
    rounds: int  # T, the run's total rounds
    num_train: int
    num_steps: int
    steps_per_epoch: int = 0  # 0 when local training counts steps, not epochs
    pre_loss: float | None = None  # global model's loss on the client's train split, if requested
    # The keys of the algorithm's `candidates` for this client and round, and each candidate's
    # mean loss on the client's validation split (its training split without one): FedFomo.
    candidates: tuple[int, ...] = ()
    candidate_losses: tuple[float, ...] = ()
    # The network the client trains (`apply(params, x)`), for hooks that run it outside a local
    # step (FedEvg's upload of energies and input gradients at the end of the round).
    apply: Apply | None = None
    # A new initialisation of the network keyed by (client, round): FedEvg's clients start every
    # round from one. None when the run has no initialiser (bare engine calls).
    fresh: Callable[[], Params] | None = None
    input_shape: tuple[int, ...] = ()  # one sample's shape (() = not given)
    num_classes: int = 0  # L (0 = not given)
    batch_size: int = 0  # the run's local batch size B (0 = not given)
    # The pool's inputs, the labels the client trains on this round (`client_labels` applied)
    # and the client's training indices into both, for hooks that run the network over the
    # client's own data outside the step loop (FedCorr's per-sample losses, LID and
    # relabelling). None in bare engine calls.
    split: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
    num_test: int = 0  # the client's test-split size (FedEvg's evaluation pass before its upload)
    # The run's `algorithm` stream keyed by (round, client, *key), for draws a hook makes outside
    # the step loop (FedEvg's spectral-norm start in `client_begin`); None in bare engine calls.
    algorithm_stream: Callable[..., torch.Generator] | None = None


@dataclass(frozen=True)
class SelectContext:
    """What the server knows when it picks a round's clients: the round, the run's T, K, the
    configured number per round and `sampling(*key)`, the run's `sampling` stream keyed by
    integers (the default draws from `sampling(round)`)."""

    round: int
    rounds: int
    num_clients: int
    m: int
    sampling: Callable[..., np.random.Generator]


@dataclass(frozen=True)
class ServerContext:
    """What the server knows when it aggregates one round."""

    round: int
    num_clients: int  # K, all clients of the federation
    client_ids: tuple[int, ...]  # the clients whose messages are aggregated
    lr: float
    # Every client that trained this round, when more trained than are aggregated
    # (`train_all_clients`): their ids and stacked messages, for statistics over all of them.
    trained_ids: tuple[int, ...] | None = None
    trained: dict[str, Any] | None = None
    # For a server that trains or samples (FedEvg): the network (`apply`), the run's `server`
    # stream keyed by the round, and a new initialisation of the network keyed by the round.
    apply: Apply | None = None
    rng: torch.Generator | None = None
    fresh: Callable[[], Params] | None = None
    rounds: int = 0  # T, the run's total rounds (0 = not given)
    # Whether the round ends with an evaluation of the new global model (FedEvg trains its
    # server classifier only then, as the release does at its evaluation rounds).
    evaluated: bool = True
    # The benchmark's own test set (x, y) held by the server, for server-side metrics (FedEvg's
    # FID of its synthetic set); None when the run has none.
    test: tuple[torch.Tensor, torch.Tensor] | None = None


@dataclass(frozen=True)
class ServerSetup:
    """What the server knows before round 1, for state that depends on the data's shape
    (FedEvg's synthetic images): the input shape of one sample, the number of classes, and the
    run's `server` stream keyed by round 0."""

    input_shape: tuple[int, ...]
    num_classes: int
    rng: torch.Generator
    # The network (`apply(params, x)`; `apply.module` its nn.Module), for state that depends on
    # it (FedCGAN's BatchNorm running statistics); None in bare engine calls.
    apply: Apply | None = None


# Run on every Algorithm subclass when it is made. fedbench.algorithms.opt_in registers its
# capability check here on import, and the package's __init__ imports opt_in, so the check is in
# place before any subclass can be written (base never imports opt_in: that would be a cycle).
SUBCLASS_CHECKS: list[Callable[[type], None]] = []


@dataclass(frozen=True)
class Algorithm:
    """FedAvg (McMahan et al. 2017, Alg. 1; thesis eq. 1.1): sample-size-weighted model average."""

    name: ClassVar[str] = "fedavg"
    # The engine computes the global model's loss on each client's training split before local
    # training and passes it in ClientContext.pre_loss (q-FedAvg, AAggFF).
    needs_pre_loss: ClassVar[bool] = False
    # Every client trains every round; only sampled clients are aggregated (pFedBreD's code).
    train_all_clients: ClassVar[bool] = False
    # Where the default hyperparameters come from when a benchmarked paper gives none, e.g.
    # "FedEM (Marfoq et al. 2021), §5": tables flag such cells. None = nothing to flag.
    defaults_from: ClassVar[str | None] = None
    # Per-step carry updates: `local_loss` returns (loss, updates), `updates` a dict of detached
    # pytrees that replace those carry entries from the next step on; `client_end` receives the
    # last carry. Per-client state that is not trained (pFedBreD's θ_i, FedPAC's statistics)
    # lives there instead of in zero parameters written by SGD, so momentum and weight decay
    # never touch it. Both executors apply it alike (a vectorised client without a batch at a
    # step keeps its carry); the vectorised layer-chain kernels never run such an algorithm.
    # May be a property when it depends on a field.
    carry_updates: ClassVar[bool] = False
    # Why the algorithm runs in the sequential executor only (None: both executors), e.g. the
    # BatchNorm running statistics its forward passes update in place; the vectorised executor
    # refuses it with this reason.
    sequential_only: ClassVar[str | None] = None
    # The training objectives (`training.objective`) the algorithm is defined for; None = any
    # (every algorithm whose losses go through `data_loss` / the bound objective).
    objectives: ClassVar[tuple[str, ...] | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A hook of an opt-in capability that the class does not name is refused when the class
        is made (fedbench/algorithms/opt_in.py::check_opted_in), not ignored by the engine."""
        super().__init_subclass__(**kwargs)
        for check in SUBCLASS_CHECKS:
            check(cls)

    @classmethod
    def check_objective(cls, objective: str, who: str | None = None) -> None:
        """ValueError naming `training.objective` when the algorithm is not defined for it."""
        if cls.objectives is not None and objective not in cls.objectives:
            raise ValueError(
                f"training.objective: {objective!r} is not defined for {who or cls.name}; "
                f"valid: {list(cls.objectives)}"
            )

    def init_server_state(self, global_params: Params, setup: ServerSetup | None = None) -> State:
        """Server state kept across rounds (control variates, mixing weights, synthetic data);
        `setup` (None in bare engine calls) gives the data's shape and a seeded generator."""
        return {}

    def init_client_state(
        self, client_id: int, global_params: Params, fresh: Callable[[], Params]
    ) -> State:
        """Per-client state kept across rounds (local models, control variates).

        `fresh()` returns a new initialisation of the model drawn from the run's `init` stream keyed
        by this client (SuPerFed's independently initialised local models).
        """
        return {}

    def client_begin(
        self, global_params: Params, server_state: State, client_state: State, ctx: ClientContext
    ) -> tuple[Params, State]:
        """Parameters local training starts from, and the `carry` of the local steps (constants,
        unless `carry_updates`)."""
        return dict(global_params), {}

    def local_loss(
        self, apply: Apply, params: Params, batch: Batch, carry: State, noise: torch.Tensor | None
    ) -> torch.Tensor | tuple[torch.Tensor, State]:
        """The loss one local step differentiates (the run's objective, `data_loss`); with
        `carry_updates`, (loss, carry entries for the next step)."""
        return self.data_loss(apply, params, batch)

    def data_loss(self, apply: Apply, params: Params, batch: Batch) -> torch.Tensor:
        """The run's objective (bound to `apply`; mean cross-entropy by default) of `params`
        over the batch's real samples."""
        return objective_of(apply).batch_loss(apply(params, batch.x), batch)

    def client_end(
        self,
        global_params: Params,
        params: Params,
        carry: State,
        client_state: State,
        ctx: ClientContext,
    ) -> tuple[dict[str, Any], State]:
        """The message sent to the server, and the client's new state (`carry`: the last step's)."""
        return {
            "delta": tree_sub(params, global_params),
            "weight": float(ctx.num_train),
        }, client_state

    def aggregate(
        self,
        global_params: Params,
        messages: dict[str, Any],
        server_state: State,
        ctx: ServerContext,
    ) -> tuple[Params, State]:
        """New global parameters from stacked messages (leading axis = client)."""
        mean_delta = weighted_mean(messages["delta"], messages["weight"])
        return {k: global_params[k] + mean_delta[k] for k in global_params}, server_state


def check_settings(
    algo: Algorithm,
    choices: dict[str, tuple[str, ...]] | None = None,
    positive_ints: tuple[str, ...] = (),
    nonnegative: tuple[str, ...] = (),
    positive: tuple[str, ...] = (),
) -> None:
    """ValueError naming the first field of `algo` that is not one of its `choices`, a positive
    integer, >= 0 or > 0 as listed (an algorithm's __post_init__)."""
    for key, valid in (choices or {}).items():
        if getattr(algo, key) not in valid:
            raise ValueError(
                f"{algo.name}: {key} must be one of {valid} (got {getattr(algo, key)!r})"
            )
    for key in positive_ints:
        v = getattr(algo, key)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{algo.name}: {key} must be a positive integer (got {v!r})")
    for keys, ok, what in (
        (nonnegative, lambda v: v >= 0, ">= 0"),
        (positive, lambda v: v > 0, "> 0"),
    ):
        for key in keys:
            if not ok(getattr(algo, key)):
                raise ValueError(f"{algo.name}: {key} must be {what} (got {getattr(algo, key)!r})")
