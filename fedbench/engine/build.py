"""A run's pieces from its resolved spec: the one place a spec becomes a model, an algorithm, an
engine config and an objective (training, the cost estimate and the loss landscape all use it)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import Algorithm
from fedbench.engine.config import TrainConfig
from fedbench.engine.functional import params_of
from fedbench.metrics.objectives import Objective, build_objective
from fedbench.models import build_model
from fedbench.rng import Streams, init_streams
from fedbench.tree import Params


class DatasetShape(Protocol):
    """What building a model needs of a prepared dataset (an `ArrayDataset` or a stand-in)."""

    x_train: np.ndarray
    num_classes: int
    extras: dict[str, np.ndarray]


@dataclass(frozen=True)
class RunParts:
    """What one run trains and evaluates, built from its spec by `build_run`."""

    model: nn.Module  # initialised from the run's `init` stream, on the run's device
    algorithm: Algorithm
    config: TrainConfig
    objective: Objective
    # An independent initialisation of the network keyed by integers in the same `init` stream:
    # (client,) for a client's own model, (client, round) for one per client and round (FedEvg),
    # (K, round) for the server's network (no client has id K).
    fresh_init: Callable[..., Params]


def build_run(
    spec: dict[str, Any],
    ds: DatasetShape,
    device: torch.device | str = "cpu",
    streams: Streams | None = None,
) -> RunParts:
    """The model (its output layer sized by the objective: one logit under `bce_logit`), the
    algorithm, the TrainConfig and the objective of a resolved spec; initial weights from the
    `init` stream of `streams` (default: the run's, `Streams(spec["seed"])`), or of
    `training.init_seed` when set."""
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
    return RunParts(model, algo, cfg, objective, fresh_init)
