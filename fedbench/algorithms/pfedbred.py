"""pFedBreD_ns (Shi et al., NeurIPS 2023): personalised priors through a Bregman-Moreau envelope.

Under `training.precision: bf16` only the forward passes are autocast: the prior means, the
prox iterations, the Bregman terms and the envelope gradients are float32.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch.func import grad, grad_and_value

from fedbench.algorithms.base import Algorithm, Batch, ClientContext, State
from fedbench.algorithms.opt_in import LocalSteps, PersonalEvaluation, ServerOutputs
from fedbench.algorithms.pfedme import PFedMe, write_term
from fedbench.tree import Apply, Params, tree_sub, tree_zeros_like

PRIORS = ("lg", "meg", "mh")
VARIANTS = ("code", "paper")
BATCHES = ("two", "one")


def half_sq(x: Params) -> torch.Tensor:
    """g = g* = ½‖·‖², the spherical Gaussian (maximum-entropy) instance "ns" (spec §1.6)."""
    return 0.5 * sum((v * v).sum() for v in x.values())


def identity(x: Params) -> Params:
    """∇g for g = ½‖·‖² (and ∇²g = I)."""
    return x


def bregman(x: Params, y: Params, g=half_sq, grad_g=identity) -> torch.Tensor:
    """D_g(x, y) = g(x) - g(y) - <∇g(y), x - y> (Eq. 1); its gradient in x is ∇g(x) - ∇g(y).
    For the Gaussian instance (g = ½‖·‖²) this is ½‖x - y‖², computed so."""
    if g is half_sq and grad_g is identity:
        return half_sq({k: x[k] - y[k] for k in x})
    gy = grad_g(y)
    return g(x) - g(y) - sum((gy[k] * (x[k] - y[k])).sum() for k in x)


@dataclass(frozen=True)
class PFedBreD(LocalSteps, PersonalEvaluation, ServerOutputs, Algorithm):
    """pFedBreD_ns (Shi et al. 2023, Alg. 1 with the Gaussian prior, first order: Dμ ≈ I).

    Per local iteration on batch B: the prior mean μ by `prior` (Eq. 14): lg μ = w - η_α∇f(w;B),
    meg μ = w - η(w_mem - θ_i), mh = both; θ_i ← `prox_iters` steps of size `alpha` on
    f(θ;B) + λ D_g*(θ, μ) (the Bregman prox map); w takes the engine's SGD step (lr = α_m) on
    ∇F_i ≈ λ∇_μ D_g*(θ_i, μ) = λ(μ - θ_i). θ_i and w_mem (w after the client's previous local
    training, init w^(0)) persist in the client state; w is sent; the server takes
    w ← (1 - β) w + β · n_i-weighted mean of the sampled clients' w.

    `variant: code` (default; the released code produced Tables 1-2, spec §9.3): the prox loop is
    warm-started at μ (lg), w (meg) or u (mh); mh's loss gradient is the FO-MAML step
    u = w - η_α∇f(w') with w' = w - η_α∇f(w) (Eq. 24 with η̃_α = η_α/η, η̃ = η_α),
    μ = u - η(w_mem - θ_i) and w's step starts from u (§1.9). `batches` says which data mh's
    iteration reads (code only; lg, meg and `variant: paper` read one batch per iteration):
    `two` (default; localpFedBreD_ns_mh.py draws two consecutive batches of its loader per
    iteration) pairs the engine's steps: the first of a pair (B1) only takes ∇f(w; B1) (w, its
    momentum and weight decay frozen that step, as `step_noise` marks), the second (B2) takes
    ∇f(w'; B2), the K prox steps, w's update and the FT step on B2. So R iterations are 2R engine
    steps of the batch size (`training.local_steps: 40` for R = 20), and a pair may straddle an
    epoch's end, its short last batch in place, as with the release's loader (whose passes also
    run on across rounds; the engine starts each round's, for every method). `one` (fedbench's
    earlier reading): one step per iteration, both gradients and the prox steps on its batch, R
    steps reading half the release's data.
    `variant: paper` (§1.8): the prox loop starts from θ_{i,r-1}; mh is the plain sum of the lg
    and meg terms. lg's η_α is `eta_alpha` in both variants (0.01, the paper; §9.4): the
    release's lg used η = 0.05, which `eta_alpha: 0.05` reproduces.
    `beta` = 2 is the AM trick (C.4). `ft` (FT trick, §9.11): protocol `personal` evaluates θ_i
    after one more SGD step of `ft_lr` on the client's last local batch (mh two: its B2), not
    kept for training.
    `train_all` (§9.6; release and Alg. 1 line 4): all N clients train each round, only the
    sampled ones are aggregated; false = only sampled clients train (memory = last participation).
    Protocol `global` is the paper's G, `personal` (θ_i) its P (§1.11; P is the weighted mean).
    Each client also sends its last iteration's envelope gradient v_i = λ(μ_{i,R} - θ_{i,R})
    (mh code: without the FO-MAML step), and the server logs the sampled clients' GCE (Fig. 2)
    and, when every client trains, all N clients' (`gce_all`, spec §9.22).
    Only w is a trained parameter: θ_i, the envelope gradient, the FT model and (mh two) B1's
    gradient are carry entries that local steps replace (`carry_updates`), so the engine's
    momentum and weight decay, where a run sets them, act on w alone.
    """

    name: ClassVar[str] = "pfedbred"
    personal_protocols: ClassVar[tuple[str, ...]] = ("personal",)
    server_scalars: ClassVar[tuple[str, ...]] = ("gce", "gce_all")
    carry_updates: ClassVar[bool] = True
    prior: str = "mh"
    variant: str = "code"
    batches: str = "two"
    lam: float = 15.0
    eta: float = 0.05
    eta_alpha: float = 0.01
    alpha: float = 0.01
    prox_iters: int = 5
    beta: float = 1.0
    ft: bool = False
    ft_lr: float = 0.01
    train_all: bool = True

    def __post_init__(self):
        checks = {
            "prior": self.prior in PRIORS,
            "variant": self.variant in VARIANTS,
            "batches": self.batches in BATCHES,
            "lam": self.lam >= 0,
            "eta": self.eta >= 0,
            "eta_alpha": self.eta_alpha >= 0,
            "alpha": self.alpha > 0,
            "prox_iters": isinstance(self.prox_iters, int) and self.prox_iters >= 1,
            "beta": self.beta > 0,
            "ft": isinstance(self.ft, bool),
            "ft_lr": self.ft_lr > 0,
            "train_all": isinstance(self.train_all, bool),
        }
        for key, ok in checks.items():
            if not ok:
                raise ValueError(f"pfedbred: bad {key} = {getattr(self, key)!r}")

    @property
    def train_all_clients(self) -> bool:
        return self.train_all

    @property
    def two_batch(self) -> bool:
        """Whether each iteration spans two engine steps (mh's code variant, `batches: two`)."""
        return self.batches == "two" and self.prior == "mh" and self.variant == "code"

    @property
    def memorised(self) -> bool:
        """Whether the prior uses the memorised envelope gradient (meg, mh)."""
        return self.prior != "lg"

    def init_client_state(self, client_id: int, global_params: Params, fresh) -> State:
        state = {"theta": dict(global_params)}
        if self.memorised:
            state["mem"] = dict(global_params)
        return state

    def client_begin(self, global_params, server_state, client_state, ctx: ClientContext):
        # θ_i, the envelope gradient of the client's last step (zero before any) and, with FT,
        # θ_i's fine-tuned copy (θ_i itself before any step): replaced at every local step.
        carry = {
            "lr": torch.tensor(
                ctx.lr, dtype=torch.float64, device=next(iter(global_params.values())).device
            ),
            "theta": client_state["theta"],
            "env": tree_zeros_like(global_params),
        }
        if self.ft:
            carry["ft"] = client_state["theta"]
        if self.memorised:
            carry["mem"] = client_state["mem"]
        if self.two_batch:
            carry["grad"] = tree_zeros_like(global_params)  # the previous step's ∇f (B1's)
        return dict(global_params), carry

    def step_noise(self, rng, ctx: ClientContext, global_params):
        """mh two: 1 at the second step of each pair (B2), 0 at the first (B1); else None.
        Deterministic, so `rng` is not used."""
        if not self.two_batch:
            return None
        if ctx.steps_per_epoch == 0 and ctx.num_steps % 2:
            raise ValueError(
                "pfedbred batches: two pairs the local steps (B1, B2): training.local_steps "
                f"must be even (2R for R iterations), got {ctx.num_steps}"
            )
        return (torch.arange(ctx.num_steps) % 2).float()

    @property
    def noise_is_schedule(self) -> bool:
        """mh two's B1/B2 marks are the same for every client (see `step_noise`)."""
        return self.two_batch

    def update_mask(self, params, carry, noise):
        # mh two: w (its momentum and weight decay too) stays put at a pair's first step.
        if not self.two_batch:
            return None
        return dict.fromkeys(params, torch.full((), float(noise)))

    def prior_mean(
        self, f, w: Params, theta: Params, mem: Params | None
    ) -> tuple[Params, Params, Params | None]:
        """(μ, base, g): the prior mean (Eq. 14), the point w's step and (code) the prox loop
        start from, and the loss gradient that moved w to base in the code's mh (else None)."""
        base, g_code = w, None
        if self.prior != "meg":
            g = grad(f)(w)
            if self.prior == "mh" and self.variant == "code":
                g = grad(f)({k: w[k] - self.eta_alpha * g[k] for k in w})
                g_code = g
            mu = {k: w[k] - self.eta_alpha * g[k] for k in w}
            if g_code is not None:
                base = mu
        else:
            mu = dict(w)
        if self.memorised:
            mu = {k: torch.add(mu[k], mem[k] - theta[k], alpha=-self.eta) for k in mu}
        return mu, base, g_code

    def prox(self, f, theta: Params, mu: Params) -> Params:
        """θ after `prox_iters` steps of size α on f(θ) + λ D_g*(θ, μ), detached."""
        # ∇_θ [f(θ) + λ D_g*(θ, μ)] = ∇f(θ) + λ (∇g*(θ) - ∇g*(μ)) = ∇f(θ) + λ (θ - μ) for the
        # Gaussian g* (∇g* = identity), so a step is lerp(θ, μ, αλ) - α ∇f(θ): two fused ops
        # (these updates dominate a round's memory traffic).
        for _ in range(self.prox_iters):
            g = grad(f)(theta)
            theta = {
                k: torch.add(
                    torch.lerp(theta[k], mu[k], self.alpha * self.lam), g[k], alpha=-self.alpha
                )
                for k in theta
            }
        return {k: v.detach() for k, v in theta.items()}

    def local_loss(self, apply: Apply, params: Params, batch: Batch, carry: State, noise):
        def f(q: Params) -> torch.Tensor:
            return self.data_loss(apply, q, batch)

        if self.two_batch:
            return self.two_batch_loss(f, params, carry, noise)
        w = {k: v.detach() for k, v in params.items()}
        prev = carry["theta"]
        mu, base, g_code = self.prior_mean(f, w, prev, carry.get("mem"))
        if self.variant == "code":
            theta = mu if self.prior == "lg" else dict(base)
        else:
            theta = prev
        theta = self.prox(f, theta, mu)
        # ∇F_i ≈ λ ∇²g*(μ)[μ - θ_i] = λ (μ - θ_i) (Eq. 13 with Dμ ≈ I, ∇²g* = I).
        diff, scale = {k: mu[k] - theta[k] for k in mu}, self.lam
        if g_code is not None:
            # The code's w ← u - lr ∇F_i, with u = w - η_α g: the extra η_α g / lr in the gradient.
            extra = self.eta_alpha / carry["lr"]
            diff, scale = {k: self.lam * diff[k] + extra * g_code[k] for k in diff}, 1.0
        envelope = f(theta) + self.lam * bregman(theta, mu)
        loss = envelope.detach() + write_term(params, diff, scale)
        # The envelope gradient is overwritten every step: the client sends its last step's.
        updates = {"theta": theta, "env": {k: self.lam * (mu[k] - theta[k]) for k in mu}}
        if self.ft:
            gt = grad(f)(theta)
            updates["ft"] = {k: theta[k] - self.ft_lr * gt[k] for k in theta}
        return loss, updates

    def two_batch_loss(self, f, params: Params, carry: State, noise):
        """One engine step of mh's two-batch iteration (localpFedBreD_ns_mh.py `train`).

        B1 (mark 0): g = ∇f(w; B1), kept in the carry; no update. B2 (mark 1): w' = w - η_α g,
        u = w - η_α∇f(w'; B2), μ = u - η(w_mem - θ_i), θ_i ← K prox steps on B2 from u, w's step
        to u - lr λ(μ - θ_i). The marks are a schedule (`noise_is_schedule`), one Python float a
        step for one client and a vmapped chunk alike, so B1 runs one gradient only.
        """
        if noise is None:
            raise ValueError("pfedbred batches: two needs the step marks of `step_noise`")
        w = {k: v.detach() for k, v in params.items()}
        if noise < 0.5:  # B1: w stays put (update_mask), the loss is f's at w
            g, value = grad_and_value(f)(w)
            return value.detach() + write_term(params, tree_zeros_like(w)), {"grad": g}
        # B2: the step's gradient point is w' = w - η_α ∇f(w; B1).
        g = grad(f)({k: w[k] - self.eta_alpha * carry["grad"][k] for k in w})
        u = {k: w[k] - self.eta_alpha * g[k] for k in w}
        prev = carry["theta"]
        mu = {k: torch.add(u[k], carry["mem"][k] - prev[k], alpha=-self.eta) for k in u}
        theta = self.prox(f, dict(u), mu)
        # w ← u - lr λ (μ - θ_i) = w - lr (λ (μ - θ_i) + η_α g / lr).
        extra = self.eta_alpha / carry["lr"]
        diff = {k: self.lam * (mu[k] - theta[k]) + extra * g[k] for k in w}
        envelope = f(theta) + self.lam * bregman(theta, mu)
        loss = envelope.detach() + write_term(params, diff)
        updates = {"grad": g, "theta": theta, "env": {k: self.lam * (mu[k] - theta[k]) for k in mu}}
        if self.ft:
            gt = grad(f)(theta)
            updates["ft"] = {k: theta[k] - self.ft_lr * gt[k] for k in theta}
        return loss, updates

    def client_end(self, global_params, params, carry, client_state, ctx: ClientContext):
        state = {"theta": carry["theta"]}
        if self.memorised:
            state["mem"] = dict(params)
        if self.ft:
            state["ft"] = carry["ft"]
        message = {
            "delta": tree_sub(params, global_params),
            "weight": float(ctx.num_train),
            "envelope": carry["env"],
        }
        return message, state

    # w ← (1 - β) w + β · mean: the same server step as pFedMe's (Alg. 1 line 12), which also
    # keeps the sampled clients' GCE of the envelope gradients.
    aggregate = PFedMe.aggregate
    server_metrics = PFedMe.server_metrics

    def personal_params(self, protocol: str, global_params: Params, client_state: State) -> Params:
        if protocol != "personal":
            return super().personal_params(protocol, global_params, client_state)
        if self.ft and "ft" in client_state:
            return dict(client_state["ft"])
        return dict(client_state["theta"])
