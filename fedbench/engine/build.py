"""A `Run` from its resolved spec: the one place a spec becomes a model, an algorithm, an engine
config, an objective and an executor (training, the cost estimate, the loss landscape and the
benchmarks all use it; `run_rounds` trains a Run)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import Algorithm
from fedbench.engine.functional import make_apply, params_of
from fedbench.engine.train_config import TrainConfig
from fedbench.engine.vectorised import resolve_executor
from fedbench.models import build_model
from fedbench.models.recurrent import choose_recurrent_impl
from fedbench.objectives import Objective, build_objective
from fedbench.rng import Streams, init_streams
from fedbench.tree import Apply, Params


class DatasetShape(Protocol):
    """What building a model needs of a prepared dataset (an `ArrayDataset` or a stand-in)."""

    x_train: np.ndarray
    num_classes: int
    extras: dict[str, np.ndarray]


@dataclass(frozen=True, eq=False)
class Run:
    """What `run_rounds` trains: the algorithm, the network's apply function and its initial
    parameters, the engine config and the executor. `build_run` makes one from a spec; a test
    builds one by hand from the first four (the rest have their defaults)."""

    algorithm: Algorithm
    apply: Apply
    config: TrainConfig
    init_params: Params
    # "sequential" | "vectorised"; None: the config's (`auto` means vectorised in run_rounds).
    executor: str | None = None
    # An independent initialisation of the network keyed by integers in the same `init` stream:
    # (client,) for a client's own model, (client, round) for one per client and round (FedEvg),
    # (K, round) for the server's network (no client has id K). None: the algorithm needs none.
    fresh_init: Callable[..., Params] | None = None
    # From a spec only: the network (initialised from the run's `init` stream, on the run's
    # device), the objective, why the executor was chosen and the recurrent layers' choice.
    model: nn.Module | None = None
    objective: Objective | None = None
    executor_reason: str = ""
    lstm_impl: str | None = None


def build_run(
    spec: dict[str, Any],
    ds: DatasetShape,
    device: torch.device | str = "cpu",
    streams: Streams | None = None,
    *,
    train: bool = True,
) -> Run:
    """The Run of a resolved spec: the model (its output layer sized by the objective: one logit
    under `bce_logit`), the algorithm, the TrainConfig, the objective, and the executor resolved
    against the model (`training.executor`; `auto`: vectorised where vmap is exact), with the
    recurrent layers set for it; initial weights from the `init` stream of `streams` (default:
    the run's, `Streams(spec["seed"])`), or of `training.init_seed` when set.

    `train=False` builds the network only to score given weights (the loss landscape): no
    executor is resolved and recurrent layers stay as built."""
    streams = Streams(spec["seed"]) if streams is None else streams
    cfg = TrainConfig.from_dict(spec["training"])
    init_rng = init_streams(streams, cfg.init_seed)
    algo = build_algorithm(spec["algorithm"]["algorithm"], **spec["algorithm"]["params"])
    objective = build_objective(cfg.objective)
    outputs = objective.outputs(ds.num_classes)

    def model_with(init_seed: int) -> nn.Module:
        return build_model(
            spec["model"]["arch"],
            input_shape=tuple(ds.x_train.shape[1:]),
            num_classes=outputs,
            init_seed=init_seed,
            extras=ds.extras,
            **spec["model"]["params"],
        ).to(device)

    def fresh_init(*key: int) -> Params:
        return params_of(model_with(init_rng.torch_seed("init", 1, *key)))

    model = model_with(init_rng.torch_seed("init"))
    executor, why, lstm_impl = None, "", None
    if train:
        executor, why = resolve_executor(cfg.executor, model)
        lstm_impl = choose_recurrent_impl(model, executor)
    apply, init = make_apply(model), params_of(model)
    return Run(algo, apply, cfg, init, executor, fresh_init, model, objective, why, lstm_impl)
