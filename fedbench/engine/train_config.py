"""Training hyperparameters of one run (frozen, validated on construction)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from fedbench.engine.augment import Augment
from fedbench.engine.functional import Adam
from fedbench.engine.precision import PRECISIONS
from fedbench.objectives import OBJECTIVES

EXECUTORS = ("auto", "sequential", "vectorised")
# the vectorised layer chain's convolutions (fedbench/engine/vectorised.py says what each does)
CONV_KERNELS = ("per_client", "channels_last", "gemm", "fastest")
OPTIMIZERS = ("sgd", "adam")


@dataclass(frozen=True)
class TrainConfig:
    """Rounds, participation, the local optimiser and evaluation cadence."""

    rounds: int
    batch_size: int
    lr: float
    local_epochs: int | None = None
    local_steps: int | None = None
    clients_per_round: int | None = None
    participation: float | None = None
    # lr at round t (1-based) = lr * lr_decay ** ((t - 1) // lr_decay_every): every round by
    # default, a step decay every s rounds with lr_decay_every = s (AAggFF's phi and s)
    lr_decay: float = 1.0
    lr_decay_every: int = 1
    # The clients' local optimiser, with torch.optim's arithmetic: sgd (momentum, weight_decay) or
    # adam (betas, eps, weight_decay as L2 on the gradient; FedEvg's release trains with Adam).
    optimizer: str = "sgd"
    momentum: float = 0.0
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    eval_every: int = 1
    eval_batch_size: int = 1024
    # ECE/MCE over consecutive test batches of this size, averaged per client (SuPerFed code's
    # estimator, which explains Table 2.6's magnitudes); None = over each client's whole split.
    ece_batch: int | None = None
    executor: str = "auto"  # auto = vectorised where exact for the model, else sequential
    chunk_size: int | None = None  # clients per vmapped chunk; None = from the memory budget
    memory_budget_mb: int = 2048
    # How the vectorised executor's layer chain runs convolutions (fedbench/engine/vectorised.py,
    # CONV_KERNELS): per_client (oneDNN per client, NCHW in float32, the default and every
    # record's bits), channels_last (oneDNN per client, channels-last in every dtype), gemm
    # (im2col + one batched GEMM over the chunk) or fastest (a timed probe of the three per layer
    # shape, once per run; run.yaml's vectorised_conv says what it chose). All but per_client may
    # change float32 results by rounding.
    conv_kernel: str = "per_client"
    # Training-time augmentation (rotate, hflip, normalize): a mapping in YAML, an Augment here.
    augment: Augment | None = None
    # At the final evaluation only, each personalised model's mean test loss per class on its own
    # split and on the union of the splits (pFedBreD Figs 3/9): K models x the whole test set.
    per_class_loss: bool = False
    # DQN-Fed's rho_t (eq. 29): the share of the round's sampled clients whose full training loss
    # under the global model did not rise from theta^t to theta^(t+1) (the model `global`
    # evaluates); two extra loss passes over their training splits a round. Each record holds
    # `improved_clients` (its round's share) and `improved_clients_rounds` (every round's since
    # the previous record or a resume, oldest first).
    improved_clients: bool = False
    # Seed of the `init` stream (global and client model initial weights) instead of the run's
    # seed: every seed of a grid then starts from the same weights and differs only in sampling
    # and batch order, as pFedBreD's release does its repetitions (one seed(2022), same init).
    init_seed: int | None = None
    # How outputs are scored in training and evaluation (fedbench/objectives.py): softmax
    # cross_entropy, or the AAggFF release's bce_logit, class_weighted_ce, token_ce.
    objective: str = "cross_entropy"
    # Arithmetic of the local steps and of evaluation (fedbench/engine/precision.py): fp32, bf16
    # (autocast forward/backward, float32 master weights, optimiser state and aggregation) or
    # tf32 (CUDA only). Evaluation stays float32 unless eval_precision asks otherwise.
    precision: str = "fp32"
    eval_precision: str = "fp32"

    def __post_init__(self):
        if not isinstance(self.augment, (Augment, type(None))):
            object.__setattr__(self, "augment", Augment.from_dict(self.augment))

        def bad(key: str, why: str):
            raise ValueError(f"training.{key}: {why} (got {getattr(self, key)!r})")

        for key in ("rounds", "batch_size", "eval_every", "eval_batch_size"):
            if not isinstance(getattr(self, key), int) or getattr(self, key) < 1:
                bad(key, "must be a positive integer")
        if not self.lr > 0:
            bad("lr", "must be > 0")
        if (self.local_epochs is None) == (self.local_steps is None):
            raise ValueError(
                "training: set exactly one of local_epochs and local_steps "
                f"(got local_epochs={self.local_epochs!r}, local_steps={self.local_steps!r})"
            )
        for key in ("local_epochs", "local_steps"):
            v = getattr(self, key)
            if v is not None and (not isinstance(v, int) or v < 1):
                bad(key, "must be a positive integer")
        if (self.clients_per_round is None) == (self.participation is None):
            raise ValueError(
                "training: set exactly one of clients_per_round and participation "
                f"(got {self.clients_per_round!r}, {self.participation!r})"
            )
        if self.clients_per_round is not None and (
            not isinstance(self.clients_per_round, int) or self.clients_per_round < 1
        ):
            bad("clients_per_round", "must be a positive integer")
        if self.participation is not None and not 0 < self.participation <= 1:
            bad("participation", "must be in (0, 1]")
        if not 0 < self.lr_decay <= 1:
            bad("lr_decay", "must be in (0, 1]")
        if not isinstance(self.lr_decay_every, int) or self.lr_decay_every < 1:
            bad("lr_decay_every", "must be a positive integer")
        if self.init_seed is not None and (
            isinstance(self.init_seed, bool)
            or not isinstance(self.init_seed, int)
            or self.init_seed < 0
        ):
            bad("init_seed", "must be a non-negative integer or null (null = the run's seed)")
        if not 0 <= self.momentum < 1:
            bad("momentum", "must be in [0, 1)")
        if self.weight_decay < 0:
            bad("weight_decay", "must be >= 0")
        if self.optimizer not in OPTIMIZERS:
            bad("optimizer", f"must be one of {OPTIMIZERS}")
        if self.optimizer == "adam" and self.momentum:
            bad("momentum", "is SGD's; with optimizer adam set betas instead (or momentum: 0)")
        betas = self.betas
        if not (
            isinstance(betas, (list, tuple))
            and len(betas) == 2
            and all(isinstance(b, (int, float)) and 0 <= b < 1 for b in betas)
        ):
            bad("betas", "must be two numbers in [0, 1), e.g. [0.9, 0.999]")
        object.__setattr__(self, "betas", tuple(float(b) for b in betas))
        if not self.eps > 0:
            bad("eps", "must be > 0")
        if self.ece_batch is not None and (
            not isinstance(self.ece_batch, int) or self.ece_batch < 1
        ):
            bad("ece_batch", "must be a positive integer or null")
        if self.chunk_size is not None and (
            not isinstance(self.chunk_size, int) or self.chunk_size < 1
        ):
            bad("chunk_size", "must be a positive integer or null")
        if not isinstance(self.memory_budget_mb, int) or self.memory_budget_mb < 1:
            bad("memory_budget_mb", "must be a positive integer")
        if not isinstance(self.per_class_loss, bool):
            bad("per_class_loss", "must be true or false")
        if not isinstance(self.improved_clients, bool):
            bad("improved_clients", "must be true or false")
        if self.objective not in OBJECTIVES:
            bad("objective", f"must be one of {sorted(OBJECTIVES)}")
        if self.conv_kernel not in CONV_KERNELS:
            bad("conv_kernel", f"must be one of {CONV_KERNELS}")
        if self.executor not in EXECUTORS:
            bad("executor", f"must be one of {EXECUTORS}")
        for key in ("precision", "eval_precision"):
            if getattr(self, key) not in PRECISIONS:
                bad(key, f"must be one of {PRECISIONS}")

    def adam(self) -> Adam | None:
        """The local Adam of `optimizer: adam`; None under SGD."""
        if self.optimizer != "adam":
            return None
        return Adam(betas=self.betas, eps=self.eps, weight_decay=self.weight_decay)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainConfig:
        """Build from a config mapping; unknown keys are an error naming the valid ones."""
        valid = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(d) - set(valid))
        if unknown:
            raise ValueError(f"training: unknown key(s) {unknown}; valid: {valid}")
        missing = [k for k in ("rounds", "batch_size", "lr") if k not in d]
        if missing:
            raise ValueError(f"training: missing key(s) {missing}")
        return cls(**d)

    def sampled_per_round(self, num_clients: int) -> int:
        """Clients sampled per round: the fixed count, or max(int(C * K), 1), at most K."""
        if self.clients_per_round is not None:
            return min(self.clients_per_round, num_clients)
        return min(max(int(self.participation * num_clients), 1), num_clients)

    def lr_at(self, round_: int) -> float:
        """Learning rate of round `round_` (1-based)."""
        return self.lr * self.lr_decay ** ((round_ - 1) // self.lr_decay_every)
