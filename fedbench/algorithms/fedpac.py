"""FedPAC (Xu, Tong & Huang, ICLR 2023): a shared feature extractor aligned to global class
centroids, and per-client linear classifiers combined with weights from a small quadratic
program over the clients' feature statistics."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
from torch import nn

from fedbench.algorithms.base import (
    Algorithm,
    Batch,
    ClientContext,
    ServerContext,
    ServerSetup,
    State,
    masked_mean,
)
from fedbench.algorithms.opt_in import LocalSteps, OwnNetwork, PersonalEvaluation
from fedbench.objectives import objective_of
from fedbench.tree import Apply, Params, weighted_mean

PAC = "fedpac."  # the algorithm's own entries of a parameter dict (never passed to the network)
HEADS = PAC + "heads."  # global dict: every client's personalised classifier, stacked [K, ...]
ALIGNS = ("mse", "sq")
# The release zeroes combination weights below 1e-3 and renormalises (tools.get_head_agg_weight,
# agg_classifier_weighted_p).
ALPHA_EPS = 1e-3


def classifier_keys(params: Params) -> tuple[str, ...]:
    """The last 2-D `*.weight` of the network (its final linear layer) and its bias, if any."""
    weights = [
        k
        for k, v in params.items()
        if not k.startswith(PAC) and k.endswith(".weight") and v.dim() == 2
    ]
    if not weights:
        raise ValueError(f"fedpac: no linear classifier among the parameters {list(params)}")
    layer = weights[-1][: -len(".weight")]
    return tuple(k for k in (f"{layer}.weight", f"{layer}.bias") if k in params)


def features_and_logits(
    apply: Apply, layer: str, params: Params, x: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(f(x), logits): the input of the classifier layer `layer`, captured by a forward pre-hook
    for the duration of one forward pass (the network is not changed), and the network's output.
    Under `training.precision: bf16` the features come out of autocast in bfloat16: they are
    cast back, so the alignment term, the class centroids and the statistics stay float32."""
    module = getattr(apply, "module", None)
    if module is None:
        raise ValueError("fedpac: needs the network's module (apply.module) to read its features")
    target = module.get_submodule(layer)
    if not isinstance(target, nn.Linear):
        raise ValueError(f"fedpac: the classifier {layer!r} must be nn.Linear, got {type(target)}")
    box: list[torch.Tensor] = []
    handle = target.register_forward_pre_hook(lambda _m, args: box.append(args[0]))
    try:
        logits = apply(params, x)
    finally:
        handle.remove()
    return box[0].float(), logits


def alignment(
    f: torch.Tensor,
    y: torch.Tensor,
    centroids: torch.Tensor,
    has: torch.Tensor,
    mask: torch.Tensor | None,
    per_dim: bool,
) -> torch.Tensor:
    """FedPAC's R_i: mean over the batch of ||f(x) - c_y||² (0 for a class without a centroid);
    `per_dim` also divides by the feature width (the release's nn.MSELoss)."""
    dist = ((f - centroids[y]) ** 2).sum(-1) * has[y]
    if per_dim:
        dist = dist / f.shape[-1]
    return masked_mean(dist, mask)


def simplex_qp(p: np.ndarray) -> np.ndarray:
    """argmin_α αᵀPα over the simplex (α ≥ 0, Σα = 1) for a symmetric PSD P, exactly.

    With P = AᵀA, write β = sα (α on the simplex, s ≥ 0): ||Aβ||² + (1ᵀβ - 1)² is minimised over
    s by s = 1/(1 + ||Aα||²) at the value ||Aα||²/(1 + ||Aα||²), increasing in ||Aα||²; so the
    non-negative least-squares solution β* (Lawson-Hanson active set, scipy's nnls) gives
    α* = β*/1ᵀβ*.
    """
    from scipy.optimize import nnls  # local: scipy is start-up cost for every run

    m = p.shape[0]
    if m == 1:
        return np.ones(1)
    evals, evecs = np.linalg.eigh((p + p.T) / 2)
    a = np.sqrt(np.clip(evals, 0.0, None))[:, None] * evecs.T  # AᵀA = P
    beta, _ = nnls(np.vstack([a, np.ones((1, m))]), np.r_[np.zeros(m), 1.0], maxiter=50 * m)
    return beta / beta.sum()


def combination_weights(v: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """Row i = client i's classifier-combination weights over the round's clients (FedPAC eq. 9
    as in the release): argmin Σ_j α_j² V_j + ||h_i - Σ_j α_j h_j||² on the simplex, where
    h_j[k] = p_j(k) μ_j,k; weights below ALPHA_EPS zeroed, the rest renormalised."""
    vv = v.detach().double().cpu().numpy()
    hh = h.detach().double().reshape(len(vv), -1).cpu().numpy()
    rows = []
    for i in range(len(vv)):
        g = hh[i] - hh  # row j: h_i - h_j
        alpha = simplex_qp(np.diag(vv) + g @ g.T)
        alpha = np.where(alpha > ALPHA_EPS, alpha, 0.0)
        rows.append(alpha / alpha.sum())
    return torch.as_tensor(np.stack(rows), dtype=h.dtype, device=h.device)


@dataclass(frozen=True)
class FedPAC(LocalSteps, OwnNetwork, PersonalEvaluation, Algorithm):
    """FedPAC (Xu et al. 2023, Alg. 1): the network's last linear layer is the client's
    classifier φ_i, the rest the shared feature extractor θ. A sampled client first trains φ_i
    with θ frozen, then θ with φ_i frozen on CE + λ R_i, R_i = mean ||f_θ(x) - c_y||² to the
    server's global class centroids c (eq. 4; none in round 1, nor for a class no client of the
    last round had). It sends θ, φ_i, its class feature sums and counts, V_i and h_i. The server
    averages the models (sample-weighted), sets c_k = the count-weighted class means, and gives
    each sampled client the α_i-weighted sum of the round's classifiers, α_i the solution of
    the simplex QP of `combination_weights` (exact: `simplex_qp`).

    Statistics come from the round's own batches (the engine gives hooks no separate pass over a
    client's data): V_i and h_i from the head phase, where θ is the received one (the release
    computes them with it over the training split, so a head phase of one epoch gives them
    exactly); the class sums from the body phase, each sample's features at its step (the release
    recomputes them after training). Each step adds its batch's sums to accumulators in the
    carry (`carry_updates`), so the optimiser never touches them.

    Defaults (release: `--lam 1.0` with nn.MSELoss, i.e. `align: mse` = R_i / width; `sq` = the
    paper's squared norm; one classifier epoch, `head_epochs`, before the E feature-extractor
    epochs). Counting steps (pFedBreD's R = 20), the first `head_steps` steps (at most R - 1)
    train the classifier. One lr for both phases, not the release's classifier lr 0.1; momentum
    and weight decay as the run sets them (release: 0.5 and 5e-4; a part's momentum buffer is
    frozen with the part). `collaborate: false` keeps each client's own classifier (no α).
    Protocols: `personal` = global θ with the client's classifier; "global" = the averaged model.
    """

    name: ClassVar[str] = "fedpac"
    personal_protocols: ClassVar[tuple[str, ...]] = ("personal",)
    defaults_from: ClassVar[str | None] = (
        "FedPAC (Xu, Tong & Huang, ICLR 2023), §5 and release defaults: lambda = 1 with the "
        "release's MSE alignment, one classifier epoch before the feature extractor's, "
        "combination weights below 1e-3 dropped"
    )
    lam: float = 1.0
    align: str = "mse"
    head_epochs: int = 1
    head_steps: int = 0  # 0 = unset; required when training counts steps
    collaborate: bool = True
    carry_updates: ClassVar[bool] = True

    def __post_init__(self):
        checks = {
            "lam": isinstance(self.lam, int | float) and math.isfinite(self.lam) and self.lam >= 0,
            "align": self.align in ALIGNS,
            "head_epochs": isinstance(self.head_epochs, int) and self.head_epochs >= 1,
            "head_steps": isinstance(self.head_steps, int) and self.head_steps >= 0,
            "collaborate": isinstance(self.collaborate, bool),
        }
        for key, ok in checks.items():
            if not ok:
                raise ValueError(f"fedpac: bad {key} = {getattr(self, key)!r}")

    def model(self, apply: Apply) -> Apply:
        def network(params: Params, x: torch.Tensor) -> torch.Tensor:
            return apply({k: v for k, v in params.items() if not k.startswith(PAC)}, x)

        if hasattr(apply, "module"):
            network.module = apply.module
        return network

    def init_global(self, init_params: Params, fresh, rng, num_clients: int) -> Params:
        heads = {
            HEADS + k: init_params[k].unsqueeze(0).repeat(num_clients, *[1] * init_params[k].dim())
            for k in classifier_keys(init_params)
        }
        return {**init_params, **heads}

    def local_epochs(self, epochs: int) -> int:
        return self.head_epochs + epochs

    def init_server_state(self, global_params: Params, setup: ServerSetup | None = None) -> State:
        w = global_params[classifier_keys(global_params)[0]]
        return {"centroids": torch.zeros_like(w), "has": w.new_zeros(w.shape[0])}

    def init_client_state(self, client_id: int, global_params: Params, fresh) -> State:
        return {"id": client_id}

    def merged(self, global_params: Params, client_id: int) -> Params:
        """Global feature extractor with client `client_id`'s classifier."""
        cls = classifier_keys(global_params)
        return {
            k: global_params[HEADS + k][client_id] if k in cls else v
            for k, v in global_params.items()
            if not k.startswith(PAC)
        }

    def client_begin(self, global_params, server_state, client_state, ctx: ClientContext):
        params = self.merged(global_params, ctx.client_id)
        w = params[classifier_keys(params)[0]]
        c = w.shape[0]
        carry = {
            "centroids": server_state["centroids"],
            "has": server_state["has"],
            # Statistics of the classifier phase (pre) and the extractor phase (post).
            "pre": {"sum": torch.zeros_like(w), "sq": w.new_zeros(c), "cnt": w.new_zeros(c)},
            "post": {"sum": torch.zeros_like(w), "cnt": w.new_zeros(c)},
        }
        return params, carry

    def phases(self, ctx: ClientContext) -> torch.Tensor:
        """Per step: 0 = classifier phase (extractor frozen), 1 = feature-extractor phase."""
        if ctx.steps_per_epoch:
            head = self.head_epochs * ctx.steps_per_epoch
        elif ctx.num_steps:
            if self.head_steps < 1 or ctx.num_steps < 2:
                raise ValueError(
                    f"fedpac: counting steps (training.local_steps = {ctx.num_steps}) needs "
                    f"head_steps >= 1 and at least 2 steps, got head_steps = {self.head_steps}"
                )
            # At most R - 1: reduced scales (fewer steps) still train the extractor.
            head = min(self.head_steps, ctx.num_steps - 1)
        else:
            head = 0
        return (torch.arange(ctx.num_steps) >= head).float()

    def step_noise(self, rng, ctx: ClientContext, global_params):
        # Deterministic phases, so `rng` is not used.
        return self.phases(ctx)

    def update_mask(self, params, carry, noise):
        cls = classifier_keys(params)
        head = 1 - noise
        return {k: head if k in cls else noise for k in params}

    def local_loss(self, apply: Apply, params: Params, batch: Batch, carry: State, noise):
        layer = classifier_keys(params)[0][: -len(".weight")]
        f, logits = features_and_logits(apply, layer, params, batch.x)
        data = objective_of(apply).batch_loss(logits, batch)  # the run's objective (CE)
        r = alignment(f, batch.y, carry["centroids"], carry["has"], batch.mask, self.align == "mse")
        loss = data + noise * self.lam * r
        # Statistics of this batch's real samples, added to the accumulators of its phase.
        classes = torch.arange(params[layer + ".weight"].shape[0], device=batch.y.device)
        onehot = (batch.y[:, None] == classes).to(f.dtype)
        if batch.mask is not None:
            onehot = onehot * batch.mask[:, None]
        fd = f.detach()
        sums, cnt = onehot.T @ fd, onehot.sum(0)
        batch_stats = {"sum": sums, "sq": onehot.T @ (fd * fd).sum(-1), "cnt": cnt}
        pre, post, head = carry["pre"], carry["post"], 1 - noise
        updates = {
            "pre": {k: v + head * batch_stats[k] for k, v in pre.items()},
            "post": {k: v + noise * batch_stats[k] for k, v in post.items()},
        }
        return loss, updates

    def client_end(self, global_params, params, carry, client_state, ctx: ClientContext):
        pre, post = carry["pre"], carry["post"]
        n = pre["cnt"].sum().clamp(min=1)
        # V_i = (1/n_i) [Σ_k p_k E||f||²_k - Σ_k p_k² ||μ_k||²] (release's statistics_extraction).
        var = (pre["sq"].sum() / n - (pre["sum"] ** 2).sum() / n**2) / max(ctx.num_train, 1)
        # Copies: an executor's trained tensors may be views of its stacked buffers.
        model = {k: t.clone() for k, t in params.items()}
        message = {
            "model": model,
            "weight": float(ctx.num_train),
            "stats": {
                "v": var.double().clamp(min=0),
                "h": pre["sum"] / n,
                "sum": post["sum"].clone(),
                "cnt": post["cnt"].clone(),
            },
        }
        return message, client_state

    def aggregate(self, global_params, messages, server_state, ctx: ServerContext):
        models, stats = messages["model"], messages["stats"]
        new = weighted_mean(models, messages["weight"])
        cnt = stats["cnt"].sum(0)
        has = (cnt > 0.5).to(cnt.dtype)
        centroids = stats["sum"].sum(0) / cnt.clamp(min=1)[:, None] * has[:, None]
        m = len(ctx.client_ids)
        alpha = (
            combination_weights(stats["v"], stats["h"])
            if self.collaborate
            else torch.eye(m, dtype=stats["h"].dtype, device=stats["h"].device)
        )
        ids = torch.tensor(ctx.client_ids, dtype=torch.long)
        for k in classifier_keys(global_params):
            heads = global_params[HEADS + k].clone()
            heads[ids] = torch.tensordot(alpha.to(models[k].dtype), models[k], dims=1)
            new[HEADS + k] = heads
        return new, {"centroids": centroids, "has": has}

    def personal_params(self, protocol: str, global_params: Params, client_state: State) -> Params:
        if protocol != "personal":
            return super().personal_params(protocol, global_params, client_state)
        return self.merged(global_params, client_state["id"])
