"""The opt-in capabilities: what an algorithm may add to the FedAvg core (`base.Algorithm`).

The core is the round every method shares (state, a client's start, its loss, its message, the
server's step). Everything else is a capability an algorithm opts into by naming its class among
its bases, `class FedRep(LocalSteps, PersonalEvaluation, Algorithm)`, and overriding the hooks
it needs; a capability's other hooks keep FedAvg's behaviour, written here. The engine reads each
capability through `fedbench.engine.capabilities` (never by probing an algorithm's attributes),
so an algorithm that does not opt in gets FedAvg's behaviour without carrying its hooks.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import torch

from fedbench.algorithms.base import (
    SUBCLASS_CHECKS,
    Algorithm,
    Batch,
    ClientContext,
    SelectContext,
    ServerContext,
    State,
)
from fedbench.tree import Apply, Params


class LocalSteps:
    """A local step that is more than the loss's gradient and an optimiser step: draws or
    a schedule per step, work before the loss, corrected gradients, frozen parts, its own number
    of local epochs, a batch taken for several steps (read in engine/step.py and
    engine/executors.py)."""

    # `step_noise` returns a schedule, not draws: the same deterministic marks for every client
    # (pFedBreD-mh's B1/B2 pairs). Both executors then hand `local_loss` and `update_mask` each
    # step's mark as a Python float, unbatched under vmap, so a step may branch on it and skip
    # the work the other role needs. May be a property when it depends on a field.
    noise_is_schedule: ClassVar[bool] = False

    # Each mini-batch is taken for `steps_per_batch` consecutive local steps (ClientContext.
    # num_steps counts steps): an alternating update whose `update_mask` trains one part of the
    # model a step, e.g. FedCGAN's discriminator step then its generator step on the same batch.
    steps_per_batch: ClassVar[int] = 1

    def local_epochs(self, epochs: int) -> int:
        """Local epochs per round given the configured E (Ditto, FedRep add their own τ)."""
        return epochs

    def step_noise(
        self, rng: torch.Generator, ctx: ClientContext, global_params: Params
    ) -> torch.Tensor | None:
        """Random draws for all ctx.num_steps local steps, made before the loop (leading axis =
        step), e.g. SuPerFed's per-batch λ."""
        return None

    def before_step(
        self, apply: Apply, params: Params, batch: Batch, carry: State, noise: Any
    ) -> State:
        """Carry entries a step computes before its loss and does not differentiate through
        (FedEvg's SGLD samples, which need input gradients of the current network): they
        replace those entries of `carry` for this step's `local_loss` (every key must be in
        client_begin's carry). Runs outside the parameter-gradient transform in both executors.
        FedAvg: nothing (the engine skips the hook unless it is overridden)."""
        return {}

    def correct_grads(self, grads: Params, params: Params, carry: State) -> Params:
        """Adjust gradients before the optimiser step (SCAFFOLD's control-variate correction)."""
        return grads

    def update_mask(
        self, params: Params, carry: State, noise: torch.Tensor | None
    ) -> dict[str, torch.Tensor] | None:
        """Per-parameter 0/1 factors for this step's update (None = train all): phases that train
        one part while the rest stays frozen, weight decay and momentum included (FedRep, Ditto)."""
        return None


class OwnNetwork:
    """A trained network other than the run's model (FedEM's mixture, pFedBayes' posterior,
    pFedHN's hypernetwork) and its own round-1 parameters (read in engine/loop.py's set-up)."""

    def model(self, apply: Apply) -> Apply:
        """The network over this algorithm's parameter dicts, which the engine trains and
        evaluates (FedEM's mixture of M copies; pFedBayes' posterior mean); FedAvg: `apply`."""
        return apply

    def init_global(
        self,
        init_params: Params,
        fresh: Callable[[int], Params],
        rng: torch.Generator,
        num_clients: int,
    ) -> Params:
        """Round-1 global parameters from the run's initialisation; `fresh(i)` = the i-th
        independent initialisation of the network (FedEM's components), `rng` = the `init`
        stream's generator for parameters of the algorithm's own (pFedHN's hypernetwork)."""
        return dict(init_params)


class PersonalEvaluation:
    """Evaluation protocols beside the global model's (a client's personalised model, fine-tuned
    or selected per client; read in engine/loop.py's evaluation)."""

    # Evaluation protocols beside "global" (the global model on each client's test split).
    personal_protocols: ClassVar[tuple[str, ...]] = ()

    # Derived protocols: name -> (candidate protocols, metric); per client, the candidate with the
    # highest metric on the client's test split (SuPerFed's "best averaged" λ; optimistic).
    selections: ClassVar[dict[str, tuple[tuple[str, ...], str]]] = {}

    # Same, but chosen on the client's validation split (partition val_fraction > 0; not
    # recorded without one) and reported on its test split: an honest counterpart.
    val_selections: ClassVar[dict[str, tuple[tuple[str, ...], str]]] = {}

    def personal_params(self, protocol: str, global_params: Params, client_state: State) -> Params:
        """Parameters a client is evaluated with under a personal protocol."""
        raise KeyError(f"{self.name} has no evaluation protocol {protocol!r}")

    def eval_batches(self, protocol: str) -> int:
        """Training batches (of the run's batch size) a personal protocol fine-tunes on before
        each evaluation; 0 = evaluated as `personal_params` gives it (Per-FedAvg's P needs some).

        The engine draws them fresh at every evaluation from the client's training split, from
        the run's `eval` stream keyed by (round, client); test data are never used."""
        return 0

    def tune_for_eval(
        self, protocol: str, apply: Apply, params: Params, batches: list[Batch]
    ) -> Params:
        """The parameters evaluated under `protocol`, from `personal_params`' output and the
        `eval_batches(protocol)` training batches; never kept for training."""
        return params


class ClientSelection:
    """The server picks its clients itself and may relabel their data (FedCorr's stages; read in
    engine/loop.py's client selection and after its server step)."""

    def select_clients(self, ctx: SelectContext, server_state: State) -> list[int]:
        """The clients that train and are aggregated in round `ctx.round`, sorted: FedAvg,
        `ctx.m` uniformly without replacement from `ctx.sampling(round)`; FedCorr's stages pick
        by stage (every client once per pre-processing iteration, then the clean ones)."""
        rng = ctx.sampling(ctx.round)
        return sorted(int(i) for i in rng.choice(ctx.num_clients, size=ctx.m, replace=False))

    def client_labels(self, client_state: State) -> torch.Tensor | None:
        """The labels the client trains on, aligned with its training indices, in place of
        the pool's (FedCorr's corrected labels, kept in its state); None = the pool's."""
        return None

    def refresh_clients(self, server_state: State, round_: int) -> tuple[int, ...]:
        """Clients whose state `refresh_client` updates after this round's server step,
        whether or not they trained (FedCorr's noisy clients relabelling with the new global
        model); none by default."""
        return ()

    def refresh_client(
        self, global_params: Params, server_state: State, client_state: State, ctx: ClientContext
    ) -> State:
        """A client's new state after the server step, without training (`ctx.split` gives its
        data, `ctx.apply` the network); called for each of `refresh_clients`."""
        return client_state


class CandidateModels:
    """Models scored on each client's data before it trains (FedFomo's downloads; read in
    engine/executors.py)."""

    def candidates(
        self,
        rng: torch.Generator,
        client_id: int,
        round_: int,
        global_params: Params,
        server_state: State,
        client_state: State,
    ) -> list[tuple[int, Params]]:
        """(key, model) pairs whose loss on the client's validation split (its training split
        without one) the engine computes before local training; their keys and losses reach
        `client_begin` in the ClientContext (FedFomo's downloaded models). `rng`: the run's
        `algorithm` stream keyed by (round, client, 1). FedAvg: none."""
        return []


class ServerOutputs:
    """A server whose evaluated model, test rows, kept tensors or logged scalars are not FedAvg's
    (the generative methods' classifier, FedEvg's synthetic set, AAggFF's objective; read in
    engine/loop.py's evaluation and engine/run.py)."""

    # The scalars `server_metrics` may log (figure grids naming one are checked against it).
    server_scalars: ClassVar[tuple[str, ...]] = ()

    def eval_model(
        self, apply: Apply, global_params: Params, server_state: State
    ) -> tuple[Apply, Params]:
        """The network and parameters the engine evaluates as the global model (protocol
        `global` on every client's test split, and the global test set): FedAvg, the global
        model itself; FedCGAN/FedCVAE, the server's classifier trained on generated samples.
        `apply` is the server's own network when `ServerTraining.server_network` names one,
        the run's otherwise."""
        return apply, global_params

    def global_test_rows(self, n: int, batch_size: int, server_state: State) -> tuple[int, int]:
        """(k, d): the global test set's metrics cover its first k of n rows and its loss is
        their summed loss divided by d (FedEvg's release: k = B·⌈M/B⌉, d = n); FedAvg: (n, n)."""
        return n, n

    def artifacts(self, server_state: State) -> dict[str, torch.Tensor]:
        """Tensors of the final server state a run keeps beside its model (artifacts.pt: FedEvg's
        synthetic images and labels, for image grids and FID); none by default."""
        return {}

    def server_metrics(self, server_state: State) -> dict[str, float]:
        """Scalars from the server state that each evaluation record keeps under "server"
        (AAggFF's cumulative global objective for Figure 3.1); none by default."""
        return {}


@dataclass(frozen=True)
class ServerNetwork:
    """A network the server trains that is not the run's: a model of the registry
    (`fedbench.models`, built by the engine for the run's input shape and classes) and its
    parameters, e.g. FedCGAN's ResNet-10 classifier beside its generator."""

    arch: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ServerFit:
    """What the server trains its network on this round, which the engine fits
    (fedbench/engine/server_training.py): `epochs` shuffled passes of `batch` rows of (x, y),
    Adam(lr) with torch's defaults otherwise, cross-entropy, the orders drawn from the round's
    `server` stream. It starts from `init`, or, when `init` is None, from the server network's
    initialisation with seed `seed`."""

    x: torch.Tensor
    y: torch.Tensor
    epochs: int
    batch: int
    lr: float
    init: Params | None = None
    seed: int | None = None


class ServerTraining:
    """The server trains a network on data it holds after each aggregation (FedEvg's classifier
    on its synthetic set, FedCGAN's and FedCVAE's on their samples): the algorithm says on what
    and from where, the engine trains it (read in engine/loop.py's server step)."""

    def server_network(self) -> ServerNetwork | None:
        """The network the server trains; None: the run's own (FedEvg). Built once per run by
        the engine, which hands its forward to `ServerOutputs.eval_model` as `apply`."""
        return None

    def server_fit(
        self, global_params: Params, server_state: State, ctx: ServerContext
    ) -> ServerFit | None:
        """Called after `aggregate` with its outputs: what the server trains this round, or None
        (nothing). May draw from `ctx.rng`; the engine's fit draws from it next."""
        return None

    def server_fitted(
        self, fit: ServerFit, params: Params, state: State, ctx: ServerContext
    ) -> tuple[Params | None, State]:
        """Where the trained `params` go: (the new global parameters, or None to keep the
        aggregated ones; the server state). By default the trained network is the new global
        model (FedEvg's classifier)."""
        return params, state


class FrozenPasses(LocalSteps):
    """Clients that pass over their batches without training (FedLF, FedNL, FedNew, DQN-Fed):
    a pass step runs `before_step` alone, which gathers what the client sends (its full
    gradient, a Newton direction), with no gradient of the local loss and no optimiser step, and
    logs the loss `before_step` leaves in `carry["loss"]` (read in engine/step.py)."""

    def trains(self, noise: Any) -> bool | torch.Tensor:
        """Whether a step trains: False (every step a pass) by default; a 0/1 mark per step
        where passes alternate with training steps (DQN-Fed at E > 1: the marked steps train
        on the local loss as any step, the others stay frozen, momentum and decay included)."""
        return False


CAPABILITIES: tuple[type, ...] = (
    LocalSteps,
    FrozenPasses,
    OwnNetwork,
    PersonalEvaluation,
    ClientSelection,
    CandidateModels,
    ServerOutputs,
    ServerTraining,
)
C = TypeVar("C")


@functools.cache
def _fedavg_with(kind: type) -> Algorithm:
    """FedAvg's behaviour of the capability `kind`, for an algorithm that does not opt into it."""
    cls = type(f"FedAvg{kind.__name__}", (kind, Algorithm), {"__module__": __name__})
    return cls()


def opt_in(algo: Algorithm | type[Algorithm], kind: type[C]) -> C:
    """`algo` (an instance or a class) when it opts into the capability `kind`, otherwise FedAvg's
    behaviour of it (an instance, or its class when `algo` is a class)."""
    if isinstance(algo, type):
        return algo if issubclass(algo, kind) else type(_fedavg_with(kind))  # type: ignore[return-value]
    return algo if isinstance(algo, kind) else _fedavg_with(kind)  # type: ignore[return-value]


def overrides(algo: Algorithm | type[Algorithm], hook: str) -> bool:
    """Whether `algo`'s class (or `algo`, a class) replaces FedAvg's `hook`, a hook of the core
    or of a capability it opts into. The engine asks through `fedbench.engine.capabilities`."""
    cls = algo if isinstance(algo, type) else type(algo)
    for base in (Algorithm, *CAPABILITIES):
        if hook in vars(base):
            return (
                isinstance(cls, type)
                and issubclass(cls, base)
                and getattr(cls, hook) is not getattr(base, hook)
            )
    raise AttributeError(f"{hook!r} is no hook of the FedAvg core or of a capability")


def check_opted_in(cls: type) -> None:
    """TypeError when `cls` writes a hook or flag of a capability it does not opt into (the
    engine would never call it): naming the hook and the base to add."""
    for kind in CAPABILITIES:
        if issubclass(cls, kind):
            continue
        names = {n for n in vars(kind) if not n.startswith("__")}
        for klass in cls.__mro__:
            if klass is object or klass in CAPABILITIES:
                continue
            written = names & set(vars(klass))
            if written:
                name = sorted(written)[0]
                raise TypeError(
                    f"{cls.__name__}.{name} is a hook of the opt-in capability {kind.__name__} "
                    f"(fedbench/algorithms/opt_in.py), which {cls.__name__} does not name, so "
                    f"the engine would never read it: write `class {cls.__name__}"
                    f"({kind.__name__}, ...)`"
                )


SUBCLASS_CHECKS.append(check_opted_in)
