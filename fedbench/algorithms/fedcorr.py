"""FedCorr (Xu, Chen, Quek & Chong, CVPR 2022, "Multi-Stage Federated Learning for Label Noise
Correction"), as its release (github.com/Xu-Jingyi/FedCorr, main.py) runs it, and DQN-Fed's
"FedCorr + DQN-Fed" (specs/qffl-dqnfed.md B-D29: the same stages with DQN-Fed's server step).

The run's rounds are FedCorr's three stages in a row (the schedule is a function of the round):

1. Pre-processing: `iteration1` iterations of S = int(1/frac1) rounds; each round trains
   m1 = int(K·frac1) clients, every client once per iteration (a fresh permutation of the K
   clients per iteration from the run's `sampling` stream). A client trains with mixup and the
   proximal term β·μ_k·‖w − w_g‖ (not squared; left out of every epoch's first batch, as the
   release's `batch_idx > 0`), μ_k = its noise level estimated at the previous iteration's end
   (0 in the first). After training it computes, with its local model over its own training
   split, each sample's softmax output, the per-sample loss and the LID of each output among
   the client's outputs (k = `lid_k`); it sends the mean LID and the share of its samples in the
   higher-mean component of a two-component GMM of those losses. At an iteration's end the
   server fits a two-component GMM to every client's cumulative LID: clients in the higher-mean
   component are noisy, their noise level is that share (0 for the clean ones). With
   `correction`, each noisy client then relabels, with the new global model (`refresh_client`,
   after the server step): of its int(n · level · relabel_ratio) highest-loss samples, those
   the model predicts with confidence > `confidence_thres` take the predicted label.
2. Fine-tuning (`fine_tuning`, `rounds1` rounds): only clients whose estimated level is
   ≤ `clean_set_thres` are sampled, min(m, #clean) a round; no proximal term. At its end, with
   `correction`, every noisy client relabels each sample the global model predicts with
   confidence > `confidence_thres`.
3. Usual training: the rest of the run's rounds, m clients a round uniformly (FedAvg's draw).

Labels a client has corrected live in its state and are the ones it trains on
(`client_labels`). Aggregation: the sample-size-weighted mean (FedAvg), or DQN-Fed's minimum-
norm step (`FedCorrDQN`). Mixup (λ ~ Beta(α, α) and a permutation per batch, drawn before the
loop) applies in every stage, as the release's `--mixup` does.

Choices where the release cannot be followed bit for bit, or leaves a gap:
- The per-sample loss is, as the release computes it, cross-entropy applied to the softmax
  outputs (`sample_loss: code`); `ce` is the cross-entropy of the logits.
- The outputs for LID and losses are taken on un-augmented inputs (the release passes its
  training transform), in chunks of 100 as its loader; a network with BatchNorm uses whatever
  statistics the model uses in training (the suite's pretrained networks: batch statistics).
- sklearn's GaussianMixture takes random_state 0 (the release: the run's seed).
- LID with fewer than k + 1 samples uses the n − 1 neighbours there are and keeps k in the
  numerator (as the release's slicing does); a client with one sample gets LID 0.
- Stage 2 with no client below `clean_set_thres` (the release divides by zero) samples from
  every client.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from fedbench.algorithms.base import (
    Algorithm,
    Batch,
    ClientContext,
    SelectContext,
    ServerContext,
    ServerSetup,
    State,
    check_settings,
    objective_of,
)
from fedbench.algorithms.dqnfed import DQNFed
from fedbench.algorithms.dqnfed_math import BFGS_FORMS, curvature_ok, decrement
from fedbench.algorithms.opt_in import ClientSelection, LocalSteps, ServerOutputs
from fedbench.objectives import CROSS_ENTROPY
from fedbench.tree import Apply, Params, tree_sub

SAMPLE_LOSSES = ("code", "ce")
CHUNK = 100  # rows per forward pass over a client's split (the release's loader batch)
GMM_SEED = 0
LID_EPS = 1e-6  # the release's eps in lid_term


# -- the maths of FedCorr's own terms (pure functions; tests check them by hand) ----------------
def lid(outputs: torch.Tensor, k: int, eps: float = LID_EPS) -> torch.Tensor:
    """Each row's local intrinsic dimensionality among the rows (the MLE of Amsaleg et al.
    2015, as the release's `lid_term`): with d_1 ≤ … ≤ d_k the distances to its k nearest
    other rows, LID = −k / (Σ_i log(d_i / (d_k + eps)) + eps). Euclidean distances in float64,
    row blocks at a time (memory O(block · n))."""
    x = outputs.double()
    n = x.shape[0]
    if n < 2:
        return torch.zeros(n, dtype=torch.float64, device=x.device)
    take = min(k + 1, n)
    out = []
    for start in range(0, n, 1024):
        d = torch.cdist(x[start : start + 1024], x)
        near = d.topk(take, dim=1, largest=False).values[:, 1:]  # position 0: the row itself
        logs = torch.log(near / (near[:, -1:] + eps)).sum(1)
        out.append(-k / (logs + eps))
    return torch.cat(out)


def gmm_high(values: torch.Tensor | np.ndarray) -> np.ndarray:
    """Whether each value lies in the higher-mean component of a two-component Gaussian
    mixture fitted to the values (sklearn's GaussianMixture, as the release); all False for
    fewer than two values."""
    v = np.asarray(torch.as_tensor(values).detach().cpu().double()).reshape(-1, 1)
    if len(v) < 2:
        return np.zeros(len(v), dtype=bool)
    from sklearn.mixture import GaussianMixture

    gmm = GaussianMixture(n_components=2, random_state=GMM_SEED).fit(v)
    clean = int(np.argsort(gmm.means_[:, 0])[0])
    return gmm.predict(v) != clean


def sample_losses(probs: torch.Tensor, labels: torch.Tensor, how: str = "code") -> torch.Tensor:
    """Per-sample losses from softmax outputs: `code`, cross-entropy applied to the outputs
    themselves (the release feeds its softmax to CrossEntropyLoss); `ce`, −log p_y."""
    if how == "code":
        return F.cross_entropy(probs, labels, reduction="none")
    return -torch.log(probs.gather(1, labels[:, None]).squeeze(1))


def relabel_by_loss(
    labels: torch.Tensor,
    losses: torch.Tensor,
    probs: torch.Tensor,
    level: float,
    ratio: float,
    threshold: float,
) -> torch.Tensor:
    """Pre-processing correction: of the int(n · level · ratio) highest-loss samples, those
    whose predicted class has probability > `threshold` take it."""
    count = int(len(labels) * level * ratio)
    top = torch.argsort(-losses.to(probs.device), stable=True)[:count]
    conf, pred = probs.max(1)
    pick = top[conf[top] > threshold]
    new = labels.clone()
    new[pick] = pred[pick].to(new.dtype)
    return new


def relabel_confident(labels: torch.Tensor, probs: torch.Tensor, threshold: float) -> torch.Tensor:
    """Post-fine-tuning correction: every sample predicted with probability > `threshold`
    takes the prediction."""
    conf, pred = probs.max(1)
    return torch.where(conf > threshold, pred.to(labels.dtype), labels)


def prox_distance(params: Params, anchor: Params) -> torch.Tensor:
    """‖w − w_g‖ over all parameters (the release's unsquared term), with a zero gradient where
    w = w_g instead of 0/0."""
    sq = sum(((params[k] - anchor[k]) ** 2).sum() for k in params)
    pos = sq > 0
    return torch.where(pos, torch.sqrt(torch.where(pos, sq, torch.ones_like(sq))), 0.0 * sq)


def mixup_loss(apply: Apply, params: Params, batch: Batch, lam: torch.Tensor, key: torch.Tensor):
    """Mixup (Zhang et al. 2018) as the release's `mixup_data` + `mixup_criterion`: inputs
    λx + (1 − λ)x[π], loss λ·CE(y) + (1 − λ)·CE(y[π]); π sorts the batch's keys (a padded
    batch's pads sort last and keep among themselves, so both executors mix the same rows)."""
    n = batch.x.shape[0]
    key = key[:n]
    if batch.mask is not None:
        key = key + 2 * (1 - batch.mask)
    perm = torch.argsort(key)
    mixed = lam * batch.x + (1 - lam) * batch.x[perm]
    out = apply(params, mixed)
    obj = objective_of(apply)
    a = obj.batch_loss(out, batch._replace(x=mixed))
    b = obj.batch_loss(out, batch._replace(x=mixed, y=batch.y[perm]))
    return lam * a + (1 - lam) * b


def softmax_outputs(apply: Apply, params: Params, x: torch.Tensor) -> torch.Tensor:
    """The network's softmax outputs over `x`, CHUNK rows at a time, without gradients."""
    with torch.no_grad():
        return torch.cat(
            [
                torch.softmax(apply(params, x[s : s + CHUNK]).float(), 1)
                for s in range(0, len(x), CHUNK)
            ]
        )


@dataclass(frozen=True)
class FedCorr(LocalSteps, ClientSelection, ServerOutputs, Algorithm):
    """FedCorr (Xu et al. 2022, Alg. 1 and the release's main.py): LID-based noisy-client
    detection with adaptive proximal terms, fine-tuning on clean clients, label correction."""

    name: ClassVar[str] = "fedcorr"
    objectives: ClassVar[tuple[str, ...]] = (CROSS_ENTROPY.name,)
    server_scalars: ClassVar[tuple[str, ...]] = ("stage", "noisy_clients", "noise_level_mean")
    defaults_from: ClassVar[str | None] = "FedCorr's release, README 1.2 (Clothing1M column)"

    iteration1: int = 2
    frac1: float = 0.002
    rounds1: int = 50
    beta: float = 5.0
    lid_k: int = 20
    relabel_ratio: float = 0.8
    confidence_thres: float = 0.9
    clean_set_thres: float = 0.1
    fine_tuning: bool = True
    correction: bool = True
    mixup: bool = True
    mixup_alpha: float = 1.0
    sample_loss: str = "code"

    def __post_init__(self):
        for key in ("iteration1", "rounds1", "lid_k"):
            v = getattr(self, key)
            if not isinstance(v, int) or isinstance(v, bool) or v < (1 if key == "lid_k" else 0):
                raise ValueError(f"{self.name}: {key} must be an integer >= "
                                 f"{1 if key == 'lid_k' else 0} (got {v!r})")  # fmt: skip
        check_settings(
            self,
            choices={"sample_loss": SAMPLE_LOSSES, "fine_tuning": (True, False),
                     "correction": (True, False), "mixup": (True, False)},
            nonnegative=("beta", "clean_set_thres", "mixup_alpha"),
            positive=("frac1",),
        )  # fmt: skip
        for key in ("frac1", "relabel_ratio", "confidence_thres"):
            if not 0 <= getattr(self, key) <= 1:
                raise ValueError(
                    f"{self.name}: {key} must be in [0, 1] (got {getattr(self, key)!r})"
                )

    # -- the schedule ----------------------------------------------------------------------
    @property
    def per_iteration(self) -> int:
        """S, rounds per pre-processing iteration (the release's int(1/frac1))."""
        return int(1 / self.frac1)

    @property
    def stage1_rounds(self) -> int:
        return self.iteration1 * self.per_iteration

    @property
    def stage2_rounds(self) -> int:
        return self.rounds1 if self.fine_tuning else 0

    def stage(self, round_: int) -> int:
        """1, 2 or 3: the stage round `round_` (1-based) belongs to."""
        if round_ <= self.stage1_rounds:
            return 1
        return 2 if round_ <= self.stage1_rounds + self.stage2_rounds else 3

    def iteration(self, round_: int) -> int:
        """The pre-processing iteration (0-based) of a stage-1 round."""
        return (round_ - 1) // self.per_iteration

    def select_clients(self, ctx: SelectContext, server_state: State) -> list[int]:
        K, t = ctx.num_clients, ctx.round
        if ctx.rounds < self.stage1_rounds + self.stage2_rounds:
            raise ValueError(
                f"{self.name}: training.rounds = {ctx.rounds} < the pre-processing "
                f"({self.iteration1} x {self.per_iteration}) and fine-tuning ({self.stage2_rounds})"
                " rounds; raise training.rounds or lower iteration1 / frac1 / rounds1"
            )
        stage = self.stage(t)
        if stage == 1:
            m1 = int(K * self.frac1)
            if m1 < 1:
                raise ValueError(
                    f"{self.name}: frac1 = {self.frac1} picks int(K * frac1) = 0 of K = {K} "
                    "clients a pre-processing round; set frac1 >= 1 / K"
                )
            it = self.iteration(t)
            j = (t - 1) % self.per_iteration
            order = ctx.sampling(0, it).permutation(K)  # every client once per iteration
            return sorted(int(i) for i in order[j * m1 : (j + 1) * m1])
        if stage == 2:
            level = server_state.get("level")
            clean = (
                np.arange(K)
                if level is None
                else np.flatnonzero(level.numpy() <= self.clean_set_thres)
            )
            if len(clean) == 0:
                clean = np.arange(K)
            m = min(ctx.m, len(clean))
            return sorted(int(i) for i in ctx.sampling(t).choice(clean, size=m, replace=False))
        return super().select_clients(ctx, server_state)

    # -- clients ---------------------------------------------------------------------------
    def client_labels(self, client_state: State) -> torch.Tensor | None:
        return client_state.get("labels")

    def client_begin(
        self, global_params: Params, server_state: State, client_state: State, ctx: ClientContext
    ) -> tuple[Params, State]:
        carry: State = {}
        if self.stage(ctx.round) == 1 and self.beta > 0:
            level = server_state.get("level")
            mu = 0.0 if level is None else float(level[ctx.client_id])
            device = next(iter(global_params.values())).device
            carry = {"anchor": global_params, "mu": torch.tensor(self.beta * mu, device=device)}
        return dict(global_params), carry

    def step_noise(
        self, rng: torch.Generator, ctx: ClientContext, global_params: Params
    ) -> dict[str, torch.Tensor] | None:
        """Per step: mixup's λ and sort keys of the permutation, and (pre-processing, β > 0)
        whether the proximal term applies (not on an epoch's first batch)."""
        out: dict[str, torch.Tensor] = {}
        steps = ctx.num_steps
        if self.stage(ctx.round) == 1 and self.beta > 0:
            per = ctx.steps_per_epoch or steps
            out["prox"] = (torch.arange(steps) % max(per, 1) != 0).float()
        if self.mixup:
            seed = int(torch.randint(0, 2**62, (1,), generator=rng))
            if self.mixup_alpha > 0:
                lam = np.random.default_rng(seed).beta(self.mixup_alpha, self.mixup_alpha, steps)
            else:
                lam = np.ones(steps)
            out["lam"] = torch.as_tensor(lam, dtype=torch.float32)
            out["key"] = torch.rand(steps, ctx.batch_size or ctx.num_train, generator=rng)
        return out or None

    def local_loss(
        self, apply: Apply, params: Params, batch: Batch, carry: State, noise: Any
    ) -> torch.Tensor:
        if noise is not None and "lam" in noise:
            loss = mixup_loss(apply, params, batch, noise["lam"], noise["key"])
        else:
            loss = self.data_loss(apply, params, batch)
        if "anchor" in carry:
            loss = loss + carry["mu"] * noise["prox"] * prox_distance(params, carry["anchor"])
        return loss

    def _split(self, ctx: ClientContext) -> tuple[torch.Tensor, torch.Tensor]:
        if ctx.split is None or ctx.apply is None:
            raise ValueError(f"{self.name}: the client needs its training split and network")
        x, y, idx = ctx.split
        return x[idx], y[idx]

    def client_end(
        self,
        global_params: Params,
        params: Params,
        carry: State,
        client_state: State,
        ctx: ClientContext,
    ) -> tuple[dict[str, Any], State]:
        message = self.update_message(global_params, params, carry, ctx)
        if self.stage(ctx.round) != 1:
            return message, client_state
        x, y = self._split(ctx)
        probs = softmax_outputs(ctx.apply, params, x)
        losses = sample_losses(probs, y, self.sample_loss)
        message["lid"] = float(lid(probs, self.lid_k).mean()) if len(x) else 0.0
        message["noise_share"] = float(gmm_high(losses).mean()) if len(x) else 0.0
        state = {
            **client_state,
            "loss": losses.float(),
            "loss_iteration": self.iteration(ctx.round),
        }
        return message, state

    def update_message(
        self, global_params: Params, params: Params, carry: State, ctx: ClientContext
    ) -> dict[str, Any]:
        """What the aggregation rule needs from a client: FedAvg's delta and weight."""
        return {"delta": tree_sub(params, global_params), "weight": float(ctx.num_train)}

    def refresh_clients(self, server_state: State, round_: int) -> tuple[int, ...]:
        if not server_state.get("relabel"):
            return ()
        return tuple(int(i) for i in np.flatnonzero(server_state["noisy"].numpy()))

    def refresh_client(
        self, global_params: Params, server_state: State, client_state: State, ctx: ClientContext
    ) -> State:
        x, y = self._split(ctx)
        probs = softmax_outputs(ctx.apply, global_params, x)
        if server_state["relabel"] == 2:
            return {**client_state, "labels": relabel_confident(y, probs, self.confidence_thres)}
        if client_state.get("loss_iteration") != server_state["iteration"]:
            return client_state  # it did not train this iteration: no losses to rank
        level = float(server_state["level"][ctx.client_id])
        new = relabel_by_loss(
            y, client_state["loss"], probs, level, self.relabel_ratio, self.confidence_thres
        )
        return {**client_state, "labels": new}

    # -- server ----------------------------------------------------------------------------
    def init_server_state(self, global_params: Params, setup: ServerSetup | None = None) -> State:
        return {"relabel": 0, "stage": 1.0, "noisy_clients": math.nan, "noise_level_mean": math.nan}

    def server_update(
        self,
        global_params: Params,
        messages: dict[str, Any],
        server_state: State,
        ctx: ServerContext,
    ) -> tuple[Params, State]:
        """The aggregation rule of every stage: FedAvg's sample-size-weighted mean."""
        return super().aggregate(global_params, messages, server_state, ctx)

    def aggregate(
        self,
        global_params: Params,
        messages: dict[str, Any],
        server_state: State,
        ctx: ServerContext,
    ) -> tuple[Params, State]:
        new, state = self.server_update(global_params, messages, server_state, ctx)
        state = {**state, "relabel": 0}
        t, K = ctx.round, ctx.num_clients
        stage = self.stage(t)
        state["stage"] = float(stage)
        if stage == 1:
            zeros = torch.zeros(K, dtype=torch.float64)
            lids = state.get("lid_iteration", zeros).clone()
            shares = state.get("share_iteration", zeros).clone()
            ids = torch.tensor(ctx.client_ids)
            lids[ids] = messages["lid"].detach().cpu().double()
            shares[ids] = messages["noise_share"].detach().cpu().double()
            state["lid_iteration"], state["share_iteration"] = lids, shares
            if t % self.per_iteration == 0:  # the iteration's end: detect the noisy clients
                lid_sum = state.get("lid_sum", zeros) + lids
                noisy = torch.from_numpy(gmm_high(lid_sum))
                level = torch.where(noisy, shares, zeros)
                state.update(
                    lid_sum=lid_sum,
                    noisy=noisy,
                    level=level,
                    iteration=self.iteration(t),
                    lid_iteration=zeros,
                    share_iteration=zeros,
                    noisy_clients=float(noisy.sum()),
                    noise_level_mean=float(level.mean()),
                )
                state["relabel"] = 1 if self.correction else 0
        elif stage == 2 and t == self.stage1_rounds + self.stage2_rounds and "noisy" in state:
            state["relabel"] = 2 if self.correction else 0
        return new, state

    def server_metrics(self, server_state: State) -> dict[str, float]:
        return {k: float(server_state[k]) for k in self.server_scalars}


@dataclass(frozen=True)
class FedCorrDQN(FedCorr):
    """ "FedCorr + DQN-Fed" (DQN-Fed paper, Table 12; B-D29): FedCorr's stages, detection and
    relabelling unchanged, every round's aggregation replaced by DQN-Fed's server step on
    pseudo-gradients.

    A client trains as in FedCorr and sends g = (θ^t − θ̂)/(η · steps) (DQN-Fed's `send:
    pseudo_grad`) with its decrement d̃ = gᵀHg, H the inverse-BFGS matrix of the curvature pairs
    (θ^t − θ^{t−1}, ḡ(θ^t) − ḡ(θ^{t−1})) and (θ̂ − θ^t, ḡ(θ̂) − ḡ(θ^t)), each kept under DQN-Fed's
    curvature guard; ḡ = the mean cross-entropy gradient over the client's training split (its
    current labels, no mixup), computed at the round's end (DQN-Fed's frozen passes give the
    mean of mini-batch gradients instead; B-D3's "matrix after all updates"). The server takes
    DQN-Fed's minimum-norm step u = Gᵀ(GGᵀ)⁻¹d̃ (fedbench/algorithms/dqnfed.py).
    """

    name: ClassVar[str] = "fedcorr_dqnfed"
    server_scalars: ClassVar[tuple[str, ...]] = FedCorr.server_scalars + DQNFed.server_scalars

    bfgs_form: str = "inverse"
    server_lr_scale: float = 1.0
    max_update_norm: float | None = None
    ridge_eps: float = 0.0

    def __post_init__(self):
        super().__post_init__()
        if self.bfgs_form not in BFGS_FORMS:
            raise ValueError(f"{self.name}: bfgs_form must be one of {BFGS_FORMS}")
        self._dqn()  # DQN-Fed checks its own settings

    def _dqn(self) -> DQNFed:
        return DQNFed(
            bfgs_form=self.bfgs_form,
            send="pseudo_grad",
            server_lr_scale=self.server_lr_scale,
            max_update_norm=self.max_update_norm,
            ridge_eps=self.ridge_eps,
        )

    def init_server_state(self, global_params: Params, setup: ServerSetup | None = None) -> State:
        state = super().init_server_state(global_params, setup)
        dqn = self._dqn().init_server_state(global_params, setup)
        return {**state, "dqn": dqn, **{k: dqn[k] for k in DQNFed.server_scalars}}

    def client_begin(
        self, global_params: Params, server_state: State, client_state: State, ctx: ClientContext
    ) -> tuple[Params, State]:
        params, carry = super().client_begin(global_params, server_state, client_state, ctx)
        return params, {**carry, "prev": server_state["dqn"]["prev"]}

    def update_message(
        self, global_params: Params, params: Params, carry: State, ctx: ClientContext
    ) -> dict[str, Any]:
        keys = list(global_params)
        x, y = self._split(ctx)

        def flat(tree: Params) -> torch.Tensor:
            return torch.cat([tree[k].reshape(-1) for k in keys]).double()

        scale = 1.0 / (ctx.lr * max(ctx.num_steps, 1))
        g = {k: (global_params[k] - params[k]) * scale for k in keys}
        grads = [mean_gradient(ctx.apply, p, x, y) for p in (carry["prev"], global_params, params)]
        points = [flat(p) for p in (carry["prev"], global_params, params)]
        pairs = []
        for i in range(2):
            s, yy = points[i + 1] - points[i], flat(grads[i + 1]) - flat(grads[i])
            if curvature_ok(s, yy):
                pairs.append((s, yy))
        d = decrement(flat(g), pairs, self.bfgs_form)
        return {"grad": g, "d": d, "weight": float(ctx.num_train)}

    def server_update(
        self,
        global_params: Params,
        messages: dict[str, Any],
        server_state: State,
        ctx: ServerContext,
    ) -> tuple[Params, State]:
        """DQN-Fed's server step on the round's (g_k, d̃_k)."""
        sent = {"grad": messages["grad"], "d": messages["d"], "weight": messages["weight"]}
        new, dqn = self._dqn().aggregate(global_params, sent, server_state["dqn"], ctx)
        return new, {**server_state, "dqn": dqn, **{k: dqn[k] for k in DQNFed.server_scalars}}


def mean_gradient(apply: Apply, params: Params, x: torch.Tensor, y: torch.Tensor) -> Params:
    """The mean cross-entropy gradient of `params` over (x, y), CHUNK rows at a time."""
    n = max(len(x), 1)
    total = {k: torch.zeros_like(v) for k, v in params.items()}
    for s in range(0, len(x), CHUNK):
        with torch.enable_grad():
            leaves = {k: v.detach().requires_grad_() for k, v in params.items()}
            loss = F.cross_entropy(
                apply(leaves, x[s : s + CHUNK]), y[s : s + CHUNK], reduction="sum"
            )
            got = torch.autograd.grad(loss, list(leaves.values()), allow_unused=True)
        for (k, _), g in zip(leaves.items(), got, strict=True):
            if g is not None:
                total[k] += g.detach()
    return {k: v / n for k, v in total.items()}
