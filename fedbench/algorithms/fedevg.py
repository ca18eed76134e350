"""FedEvg (thesis ch. IV, Algorithms 4.1/4.2; fedevg.md §1): the server refines a labelled
synthetic set with one SGLD step a round from the clients' energy gradients; no model is averaged.

How it differs from FedAvg, hook by hook. The release vaseline555/FedEvg at commit 24251ca
produced the tables, so its reading is every default; each other reading is a named field
(`variant: thesis` takes the thesis' values where fedevg.md §7 lists a difference). Release
lines: fedevgclient.py (client), fedevgserver.py (server), main.py (rounds), utils.py
(init_weights).

- `init_server_state`: M = L·spc synthetic images x̃ ~ N(0, I) (not clipped before the first
  broadcast), labels fixed and class-sorted, spc per class (server:45-46).
- `client_begin`: every round the client trains a *fresh* classifier (`ClientContext.fresh`, the
  release's `init_weights` in client:105). `groupnorm: inherit` (release): its GroupNorm
  parameters are the global model's, as `init_weights` re-initialises only Linear, Conv and
  BatchNorm2d layers (utils:136-162) of the model the client downloads (server:187-188), which is
  the server classifier last trained; `fresh` re-initialises them too. The carry holds the
  client's copy of x̃ (the PCD buffer, updated each step), the round-start copy D_init, the
  labels, and under `spectral_norm: power` the registered (u, v) (below).
- `step_noise`: per step, the synthetic rows (`randperm(M)[:b]`, client:65) and the SGLD noise of
  its R steps, for b = min(B, M) rows; `pcd_rows: batch` (release, client:121) uses the first
  min(b_s, M) of them, b_s the step's real batch (the last batch of an epoch is short), the
  rest are masked out; `synthetic_batch` uses min(synthetic_batch, M) rows every step.
- `before_step`: R SGLD steps on the selected rows raising their label's logit,
  x̆ ← x̆ − γ·clip(∇ₓE) + σ·ε with E(x, y) = −f(x)[y], then x̆ clipped to [0, 1] (client:70-101;
  eval mode, no gradient to the parameters).
- `local_loss`: x̆ written back to the buffer (the carry update); loss = PCD + CE(real) +
  λ·CE(synthetic) (client:123-134), PCD = −mean f(x)[y] + mean f(x̆)[y̆] (the release's sign;
  `pcd_sign: thesis` takes Alg. 4.2 line 13 literally, which lowers the data's logits); the
  synthetic CE reads D_init's rows (code) or the buffer's rows before the SGLD step (thesis).
- `client_end`: the upload at D_init with the trained classifier: exp(sgn f(x̃_j)[ỹ_j]) and
  ∇ₓE(x̃_j, ỹ_j), clipped to ±grad_clip as the release's `energy_gradient` (client:22-39, 225-227).
- `aggregate`: a_ij = (n_i / Σ n) · exp(sgn f_i(x̃_j)[ỹ_j]) over the sampled clients (n_i = the
  training split), g_j = Σ_i a_ij ∇ₓE_i / Σ_i a_ij, x̃ ← clip(x̃ − β_t·g + δ·ε, 0, 1)
  (server:266-303) with the release's cosine schedule β_t (DDPM cosine betas mapped onto
  [beta_start, beta_end]) and δ (1e-4 in the code, 0.01 in the thesis).
- `server_fit` (ServerTraining: the engine trains it): at the rounds that
  evaluate, the server classifier (server:305-351): a fresh network (`ServerContext.fresh`; under
  `groupnorm: inherit` with the previous classifier's GroupNorm parameters, as the release
  re-initialises its one global model) trained on (x̃, ỹ) for `server_epochs` shuffled passes of
  `server_batch` with Adam(server_lr) and cross-entropy (1 pass of 64 = 2 steps at M = 100, far
  from trained: fedevg.md §7 item 6). It is the new "global model", so the engine's evaluation of
  the global model on every client's test split is the thesis' accuracy (Tables 4.2/4.3). Under
  `inherit` it is also trained after round 1, which the release always evaluates (main:47): its
  GroupNorm parameters are what later rounds inherit.
- `global_test_rows`: `server_test: code` (release) scores the classifier on the global test set
  as the release's loop does, which zips the synthetic batches with the test batches
  (server:366-400): the first B·⌈M/B⌉ test images, the summed loss divided by the whole test
  set's size; `all` scores every test image.

Spectral normalisation of the last layer (the release's `--penult_spectral_norm`) is applied here
to the clients' networks, not in the model, because the release's server classifier has none.
`spectral_norm: power` (default) is the release's: torch's parametrisation registered on the
fresh classifier every round (client:106-107), one power iteration u ← W v/‖W v‖,
v ← Wᵀu/‖Wᵀu‖ per training-mode forward pass (the step's three: real, negatives, synthetic CE, in
that order), none in the eval-mode energy gradients (SGLD and the upload), σ = uᵀWv with u, v
held fixed; u, v ride in the client's carry. Registration (`sn_start: random`, release): u0, v0
~ N(0, I) normalised, from the run's `algorithm` stream keyed by (round, client, SN_STREAM_KEY),
then 15 iterations, and one more in round 1, where register_parametrization's check runs the
forward in training mode (the downloaded global model is in training mode until the server's
first evaluation switches it to eval mode after round 1). The largest singular values of the
release's heads are close (σ2/σ1 ≈ 0.99), so 15 iterations leave σ up to ~2 % below σ_max and
the start matters. `sn_start: uniform` starts from v = 1/√n (no draw) with 15 iterations every
round. `upload_after: evaluation` (release): the client uploads after the release's evaluate()
pass over its test split (server:515-521), whose `sample()` leaves the model in training mode,
so each test batch of B runs three training-mode forwards: 3·⌈n_test/B⌉ more power iterations
before the upload's σ; `training` uploads right after training. `exact` divides `sn_param` by
its largest singular value in every forward (what the power estimate converges to); `none`
leaves it.

Where bf16 is on (`training.precision`), the model's forward runs in bf16; the SGLD updates,
energies, signs, weights and the server step stay float32 here.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch.func import grad

from fedbench.algorithms.base import (
    Algorithm,
    Batch,
    ClientContext,
    ServerContext,
    ServerSetup,
    State,
    check_settings,
    masked_mean,
)
from fedbench.algorithms.opt_in import LocalSteps, ServerFit, ServerOutputs, ServerTraining
from fedbench.objectives import objective_of
from fedbench.tree import Apply, Params

VARIANTS = ("code", "thesis")
FID_MODES = ("none", "code", "standard")
FID_EXTRACTORS = ("inception", "proxy")
SPECTRAL_NORMS = ("power", "exact", "none")
# torch.nn.utils.parametrizations.spectral_norm's defaults, as the release registers it.
SN_INIT_ITERATIONS = 15  # power iterations at registration
SN_EPS = 1e-12
SN_STARTS = ("random", "uniform")
SN_STREAM_KEY = 2  # ClientContext.algorithm_stream key of the start (FedFomo's candidates use 1)
PCD_SIGNS = ("code", "thesis")
PCD_ROWS = ("batch", "synthetic_batch")
UPLOADS = ("evaluation", "training")
EVAL_FORWARDS = 3  # training-mode forwards a test batch in the release's client evaluate()
GROUPNORMS = ("inherit", "fresh")
SERVER_TESTS = ("code", "all")
# The variants' values where thesis and release differ (fedevg.md §6.2, §7 items 5, 7, 8).
PROFILE = {
    "code": {"beta_end": 1.0, "server_noise": 1e-4},
    "thesis": {"beta_end": 0.01, "server_noise": 0.01},
}


def cosine_betas(start: float, end: float, rounds: int, s: float = 0.008) -> torch.Tensor:
    """The release's server step sizes for rounds 1..T (fedevgserver.py:30-37, float32 as there):
    improved-DDPM cosine betas b_t (Nichol & Dhariwal 2021), unclipped, mapped to
    b_t·(end − start) + start; ≈ start for most rounds, `end` at round T."""
    x = torch.linspace(0, rounds, rounds + 1)
    abar = torch.cos(((x / rounds) + s) / (1 + s) * torch.pi * 0.5) ** 2
    abar = abar / abar[0]
    b = 1 - (abar[1:] / abar[:-1])
    return b * (end - start) + start


@dataclass(frozen=True)
class FedEvg(LocalSteps, ServerOutputs, ServerTraining, Algorithm):
    """FedEvg (thesis Alg. 4.1/4.2): energy-based synthetic data refined on the server."""

    name: ClassVar[str] = "fedevg"
    carry_updates: ClassVar[bool] = True
    server_scalars: ClassVar[tuple[str, ...]] = ("energy_grad_norm", "beta", "fid")

    variant: str = "code"
    spc: int = 10  # synthetic samples per class: M = L·spc
    ce_lambda: float = 0.1  # λ, weight of the synthetic cross-entropy
    sgld_step: float = 1.0  # γ, client SGLD step (release --alpha)
    sgld_noise: float = 0.01  # σ, client SGLD noise
    sgld_steps: int = 1  # R
    grad_clip: float | None = 3.0  # elementwise clip of ∇ₓE (release --ld_threshold); None = off
    # The synthetic rows a step: min(its real batch, M) (`batch`, the release) or
    # min(synthetic_batch, M) (`synthetic_batch`).
    pcd_rows: str = "batch"
    synthetic_batch: int = 64
    beta_start: float = 10.0
    beta_end: float | None = None  # None: the variant's (code 1.0, thesis 0.01)
    server_noise: float | None = None  # δ; None: the variant's (code 1e-4, thesis 0.01)
    pcd_sign: str = "code"
    spectral_norm: str = "power"
    sn_param: str = "head.weight"  # the last layer's weight (the registry models' `head`)
    sn_start: str = "random"  # the power iterations' start at registration (docstring)
    upload_after: str = "evaluation"  # the release's evaluation pass before the upload, or none
    groupnorm: str = "inherit"  # the fresh networks' GroupNorm: the global model's, or new
    server_test: str = "code"  # the global test set as the release scores it, or all of it
    server_epochs: int = 1
    server_batch: int = 64
    server_lr: float = 1e-3
    # FID of the synthetic set against the server's test set at the rounds that evaluate
    # (fedbench/metrics/fid.py): `code` = the release's reading, `standard`, or none. The
    # extractor: torchvision's Inception-v3 (weights read from `fid_weights`, default the torch
    # cache; never fetched) or the fixed random CNN `proxy` (tests, CI and machines without the
    # weights: not comparable to Tables 4.4/4.5, and tables say so in their caption).
    fid: str = "code"
    fid_extractor: str = "inception"
    fid_weights: str | None = None

    def __post_init__(self):
        check_settings(
            self,
            choices={
                "variant": VARIANTS,
                "spectral_norm": SPECTRAL_NORMS,
                "pcd_sign": PCD_SIGNS,
                "pcd_rows": PCD_ROWS,
                "sn_start": SN_STARTS,
                "upload_after": UPLOADS,
                "groupnorm": GROUPNORMS,
                "server_test": SERVER_TESTS,
                "fid": FID_MODES,
                "fid_extractor": FID_EXTRACTORS,
            },
            positive_ints=("spc", "sgld_steps", "synthetic_batch", "server_epochs", "server_batch"),
            nonnegative=("ce_lambda", "sgld_step", "sgld_noise", "beta_start", "server_lr"),
        )
        if self.grad_clip is not None and not self.grad_clip > 0:
            raise ValueError(f"fedevg: grad_clip must be > 0 or null (got {self.grad_clip!r})")

    # -- settings --------------------------------------------------------------------------
    def _profile(self, key: str) -> float:
        own = getattr(self, key)
        return PROFILE[self.variant][key] if own is None else own

    def betas(self, rounds: int) -> torch.Tensor:
        """β_t for rounds 1..T."""
        return cosine_betas(self.beta_start, self._profile("beta_end"), rounds)

    def net(self, apply: Apply, carry: State | None = None, train: bool = False) -> Apply:
        """The clients' network: `apply` with the last layer spectrally normalised. Under
        `power`, σ comes from the carry's (sn_u, sn_v), and with `train` every call first takes
        one power iteration, writing the new pair back into `carry` (a dict the caller owns)."""
        if self.spectral_norm == "none":
            return apply
        key = self.sn_param
        if self.spectral_norm == "power" and carry is None:
            raise ValueError("fedevg: spectral_norm power needs the client's (sn_u, sn_v)")

        def normalised(p: Params, x: torch.Tensor) -> torch.Tensor:
            if key not in p:
                raise KeyError(
                    f"fedevg: sn_param {key!r} is not a parameter of the model; "
                    f"valid: {sorted(p)} (or spectral_norm: none)"
                )
            w = p[key]
            if self.spectral_norm == "exact":
                return apply({**p, key: w / torch.linalg.matrix_norm(w, ord=2)}, x)
            if train:
                carry["sn_u"], carry["sn_v"] = power_iteration(w, carry["sn_u"], carry["sn_v"], 1)
            mat = w.flatten(1)
            sigma = carry["sn_u"] @ (mat @ carry["sn_v"])
            return apply({**p, key: w / sigma}, x)

        return normalised

    def _energy_grad(self, net: Apply, p: Params, x: torch.Tensor, y: torch.Tensor):
        """(∇ₓE(x, y), f(x)[y]) with E = −f(x)[y], the parameters held fixed; the gradient
        clipped to ±grad_clip as the release's `energy_gradient`."""
        fixed = {k: v.detach() for k, v in p.items()}

        def energy(xs: torch.Tensor):
            f = net(fixed, xs).float().gather(1, y[:, None]).squeeze(1)
            return -f.sum(), f.detach()

        g, f = grad(energy, has_aux=True)(x)
        if self.grad_clip is not None:
            g = g.clamp(-self.grad_clip, self.grad_clip)
        return g, f

    # -- server ----------------------------------------------------------------------------
    def init_server_state(self, global_params: Params, setup: ServerSetup | None = None) -> State:
        if setup is None:
            raise ValueError("fedevg needs the data's shape and a generator (ServerSetup)")
        if self.fid != "none":  # before round 1: a missing Inception file stops the run now
            feature_extractor(self.fid_extractor, self.fid_weights, str(setup.rng.device))
        L = setup.num_classes
        dtype = next(iter(global_params.values())).dtype if global_params else torch.float32
        x = torch.randn(
            (L * self.spc, *setup.input_shape),
            generator=setup.rng,
            device=setup.rng.device,
            dtype=dtype,
        )
        y = torch.arange(L, device=x.device).repeat_interleave(self.spc)
        return {"x": x, "y": y, "energy_grad_norm": math.nan, "beta": math.nan, "fid": math.nan}

    def aggregate(
        self,
        global_params: Params,
        messages: dict[str, Any],
        server_state: State,
        ctx: ServerContext,
    ) -> tuple[Params, State]:
        x = server_state["x"]
        grads, signs = messages["grad"], messages["esign"]
        w = messages["weight"].to(device=x.device, dtype=grads.dtype)
        a = (w / w.sum())[:, None] * signs  # [S, M]
        tail = (1,) * (grads.dim() - 2)
        mixed = (a.reshape(a.shape + tail) * grads).sum(0) / a.sum(0).reshape(-1, *tail)
        if ctx.rounds < 1 or ctx.rng is None:
            raise ValueError("fedevg: the server step needs ServerContext.rounds and .rng")
        beta = float(self.betas(ctx.rounds)[ctx.round - 1])
        eps = torch.randn(x.shape, generator=ctx.rng, device=x.device, dtype=x.dtype)
        x = (x - beta * mixed + self._profile("server_noise") * eps).clamp(0.0, 1.0)
        state = {**server_state, "x": x, "energy_grad_norm": float(mixed.norm()), "beta": beta}
        if ctx.evaluated and self.fid != "none" and ctx.test is not None:
            state["fid"] = self.fid_of(x, ctx.test[0])
        return global_params, state

    def fid_of(self, synthetic: torch.Tensor, real: torch.Tensor) -> float:
        """FID of the synthetic set against the server's test images (the run's `fid` mode)."""
        return synthetic_fid(synthetic, real, self.fid, self.fid_extractor, self.fid_weights)

    def server_fit(
        self, global_params: Params, server_state: State, ctx: ServerContext
    ) -> ServerFit | None:
        """The classifier the engine evaluates, which the engine trains on the synthetic set:
        at the rounds that evaluate (the release's `_central_evaluate`) and, when later rounds
        inherit its GroupNorm, after round 1 (the release evaluates round 1); the previous one
        kept otherwise. It starts from a fresh network (with the previous classifier's GroupNorm
        parameters under `groupnorm: inherit`) and becomes the global model."""
        if not (ctx.evaluated or (self.groupnorm == "inherit" and ctx.round == 1)):
            return None
        if ctx.fresh is None or ctx.apply is None:
            raise ValueError("fedevg: the server classifier needs ServerContext.fresh and .apply")
        return ServerFit(
            server_state["x"],
            server_state["y"],
            epochs=self.server_epochs,
            batch=self.server_batch,
            lr=self.server_lr,
            init=self._with_groupnorm(ctx.fresh(), global_params, ctx.apply),
        )

    def global_test_rows(self, n: int, batch_size: int, server_state: State) -> tuple[int, int]:
        """`server_test: code`: the first B·⌈M/B⌉ test rows (the release's loop stops with its
        ⌈M/B⌉ synthetic batches), the summed loss over n; `all`: every row."""
        if self.server_test == "all":
            return n, n
        if batch_size < 1:
            raise ValueError("fedevg: server_test code needs the run's batch size")
        m = len(server_state["x"])
        return min(n, batch_size * math.ceil(m / batch_size)), n

    def artifacts(self, server_state: State) -> dict[str, torch.Tensor]:
        """The final synthetic set (class-sorted images in [0, 1], labels)."""
        return {"synthetic_x": server_state["x"], "synthetic_y": server_state["y"]}

    def server_metrics(self, server_state: State) -> dict[str, float]:
        return {k: float(server_state[k]) for k in self.server_scalars}

    # -- clients ---------------------------------------------------------------------------
    def client_begin(
        self, global_params: Params, server_state: State, client_state: State, ctx: ClientContext
    ) -> tuple[Params, State]:
        if ctx.fresh is None:
            raise ValueError("fedevg: clients need a fresh initialisation (ClientContext.fresh)")
        x = server_state["x"]
        neg = x.new_zeros((self._pcd_width(ctx, len(x)), *x.shape[1:]))
        carry = {"buffer": x.clone(), "init": x, "labels": server_state["y"], "neg": neg}
        params = self._with_groupnorm(ctx.fresh(), global_params, ctx.apply)
        if self.spectral_norm == "power":
            carry.update(self._registered(self._sn_weight(params), ctx))
        return params, carry

    def _with_groupnorm(self, fresh: Params, previous: Params, apply: Apply | None) -> Params:
        """`fresh` with `previous`' GroupNorm parameters under `groupnorm: inherit`."""
        if self.groupnorm == "fresh":
            return fresh
        return {**fresh, **{k: previous[k] for k in groupnorm_keys(apply) if k in previous}}

    def _registered(self, w: torch.Tensor, ctx: ClientContext) -> dict[str, torch.Tensor]:
        """(sn_u, sn_v) as the parametrisation leaves them at registration (`sn_start`)."""
        if self.sn_start == "uniform":
            return registered_pair(w, *uniform_start(w), SN_INIT_ITERATIONS)
        if ctx.algorithm_stream is None:
            raise ValueError("fedevg: sn_start random draws from ClientContext.algorithm_stream")
        start = random_start(w, ctx.algorithm_stream(SN_STREAM_KEY))
        # Round 1: one more, from register_parametrization's check in training mode.
        return registered_pair(w, *start, SN_INIT_ITERATIONS + (1 if ctx.round == 1 else 0))

    def _pcd_width(self, ctx: ClientContext, m: int) -> int:
        """The synthetic rows drawn a step: min(B, M) (`pcd_rows: batch`) or
        min(synthetic_batch, M)."""
        if self.pcd_rows == "synthetic_batch":
            return min(self.synthetic_batch, m)
        if ctx.batch_size < 1:
            raise ValueError("fedevg: pcd_rows batch needs ClientContext.batch_size")
        return min(ctx.batch_size, m)

    def _real_rows(self, batch: Batch, width: int) -> torch.Tensor | None:
        """Under `pcd_rows: batch`, 1 for the first min(b, width) of a step's `width` synthetic
        rows (b = the real batch's size: a padded batch's mask counts it), 0 for the rest; None
        when all are read."""
        if self.pcd_rows == "synthetic_batch":
            return None
        b = batch.x.shape[0] if batch.mask is None else batch.mask.sum()
        if isinstance(b, int) and b >= width:
            return None
        return (torch.arange(width, device=batch.x.device) < b).to(torch.float32)

    def _sn_weight(self, params: Params) -> torch.Tensor:
        if self.sn_param not in params:
            raise KeyError(
                f"fedevg: sn_param {self.sn_param!r} is not a parameter of the model; "
                f"valid: {sorted(params)} (or spectral_norm: none)"
            )
        return params[self.sn_param]

    def step_noise(
        self, rng: torch.Generator, ctx: ClientContext, global_params: Params
    ) -> dict[str, torch.Tensor]:
        """Per step: the synthetic rows (`randperm(M)[:b]`) and the noise of its R SGLD steps."""
        if not ctx.num_classes or not ctx.input_shape:
            raise ValueError("fedevg: step draws need ClientContext.num_classes and .input_shape")
        M = ctx.num_classes * self.spc
        b = self._pcd_width(ctx, M)
        dev = rng.device
        idx = (
            torch.stack(
                [torch.randperm(M, generator=rng, device=dev)[:b] for _ in range(ctx.num_steps)]
            )
            if ctx.num_steps
            else torch.zeros((0, b), dtype=torch.long, device=dev)
        )
        eps = torch.randn(
            (ctx.num_steps, self.sgld_steps, b, *ctx.input_shape), generator=rng, device=dev
        )
        return {"idx": idx, "eps": eps}

    def before_step(
        self, apply: Apply, params: Params, batch: Batch, carry: State, noise: Any
    ) -> State:
        """The step's negatives: R SGLD steps from the selected buffer rows, clipped to [0, 1]
        (fedevgclient.py:sample), computed outside the parameter gradient (eval mode: no power
        iteration)."""
        net = self.net(apply, carry)
        buffer = carry["buffer"]
        idx, eps = noise["idx"].to(buffer.device), noise["eps"].to(buffer.device)
        xs, ys = buffer[idx], carry["labels"][idx]
        for r in range(self.sgld_steps):
            g, _ = self._energy_grad(net, params, xs, ys)
            xs = xs - self.sgld_step * g + self.sgld_noise * eps[r]
        return {"neg": xs.clamp(0.0, 1.0).detach()}

    def local_loss(
        self, apply: Apply, params: Params, batch: Batch, carry: State, noise: Any
    ) -> tuple[torch.Tensor, State]:
        sn = {k: carry[k] for k in ("sn_u", "sn_v") if k in carry}
        net = self.net(apply, sn, train=True)
        buffer, labels = carry["buffer"], carry["labels"]
        idx = noise["idx"].to(buffer.device)
        x0, ys, xs = buffer[idx], labels[idx], carry["neg"]
        rows = self._real_rows(batch, idx.shape[-1])  # None: every drawn row is read
        out_real = net(params, batch.x)
        f_real = out_real.float().gather(1, batch.y[:, None]).squeeze(1)
        f_neg = net(params, xs).float().gather(1, ys[:, None]).squeeze(1)
        e_pos, e_neg = -masked_mean(f_real, batch.mask), -masked_mean(f_neg, rows)
        pcd = e_pos - e_neg if self.pcd_sign == "code" else e_neg - e_pos
        synthetic = carry["init"][idx] if self.variant == "code" else x0
        ce = objective_of(apply).batch_loss(out_real, batch)
        logits = net(params, synthetic).float()
        if rows is None:
            ce_synthetic = F.cross_entropy(logits, ys)
        else:
            ce_synthetic = masked_mean(F.cross_entropy(logits, ys, reduction="none"), rows)
            xs = torch.where(rows.reshape(-1, *(1,) * (xs.dim() - 1)) > 0, xs, x0)
        ce = ce + self.ce_lambda * ce_synthetic
        return pcd + ce, {"buffer": buffer.index_copy(0, idx, xs), **sn}

    def client_end(
        self,
        global_params: Params,
        params: Params,
        carry: State,
        client_state: State,
        ctx: ClientContext,
    ) -> tuple[dict[str, Any], State]:
        if ctx.apply is None:
            raise ValueError("fedevg: the upload needs the client's network (ClientContext.apply)")
        sn = {k: carry[k] for k in ("sn_u", "sn_v") if k in carry}
        if self.spectral_norm == "power" and self.upload_after == "evaluation":
            sn["sn_u"], sn["sn_v"] = power_iteration(
                self._sn_weight(params), sn["sn_u"], sn["sn_v"], self._evaluation_iterations(ctx)
            )
        net = self.net(ctx.apply, sn)
        g, f = self._energy_grad(net, params, carry["init"], carry["labels"])
        return {"grad": g, "esign": torch.exp(torch.sign(f)), "weight": float(ctx.num_train)}, {}

    def _evaluation_iterations(self, ctx: ClientContext) -> int:
        """The power iterations of the release's evaluate() pass over the client's test split:
        EVAL_FORWARDS training-mode forwards a batch of B, ⌈n_test/B⌉ batches."""
        if ctx.num_test == 0:
            return 0
        if ctx.batch_size < 1:
            raise ValueError("fedevg: upload_after evaluation needs ClientContext.batch_size")
        return EVAL_FORWARDS * math.ceil(ctx.num_test / ctx.batch_size)


def power_iteration(
    w: torch.Tensor, u: torch.Tensor, v: torch.Tensor, n: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """n steps of torch's spectral-norm power method on the detached matrix w.flatten(1):
    u ← normalize(W v), v ← normalize(Wᵀ u)."""
    mat = w.detach().flatten(1)
    for _ in range(n):
        u = F.normalize(mat @ v, dim=0, eps=SN_EPS)
        v = F.normalize(mat.T @ u, dim=0, eps=SN_EPS)
    return u, v


def random_start(w: torch.Tensor, rng: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """torch's spectral-norm start (parametrizations._SpectralNorm.__init__): u0 then v0 drawn
    from N(0, 1) (here from `rng`), each normalised."""
    mat = w.detach().flatten(1)
    h, n = mat.shape
    u = torch.randn(h, generator=rng, device=rng.device, dtype=mat.dtype)
    v = torch.randn(n, generator=rng, device=rng.device, dtype=mat.dtype)
    u, v = (F.normalize(t, dim=0, eps=SN_EPS).to(mat.device) for t in (u, v))
    return u, v


def uniform_start(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`sn_start: uniform`: v0 = 1/√n, u0 = W v0 normalised (no draw)."""
    mat = w.detach().flatten(1)
    v = torch.full((mat.shape[1],), mat.shape[1] ** -0.5, dtype=mat.dtype, device=mat.device)
    return F.normalize(mat @ v, dim=0, eps=SN_EPS), v


def registered_pair(
    w: torch.Tensor, u0: torch.Tensor, v0: torch.Tensor, iterations: int
) -> dict[str, torch.Tensor]:
    """(sn_u, sn_v) after `iterations` power iterations from (u0, v0), as torch's
    parametrisation leaves them at registration."""
    u, v = power_iteration(w, u0, v0, iterations)
    return {"sn_u": u, "sn_v": v}


def groupnorm_keys(apply: Apply | None) -> list[str]:
    """The parameter names of the GroupNorm layers of `apply.module` (none without a module):
    what the release's init_weights leaves as it was in the FedEvg ResNet-10."""
    module = getattr(apply, "module", None)
    if module is None:
        return []
    return [
        f"{name}.{p}" if name else p
        for name, m in module.named_modules()
        if isinstance(m, torch.nn.GroupNorm)
        for p, _ in m.named_parameters(recurse=False)
    ]


def synthetic_fid(
    images: torch.Tensor, real: torch.Tensor, mode: str, kind: str, weights: str | None
) -> float:
    """FID (fedbench/metrics/fid.py, protocol `mode`) of synthetic images in [0, 1] against the
    server's test images, with the `kind` extractor (FedEvg and its baselines)."""
    from fedbench.metrics.fid import fid

    extractor = feature_extractor(kind, weights, str(images.device))
    return float(fid(images, real, mode, extractor=extractor).value)


@functools.lru_cache(maxsize=4)
def feature_extractor(kind: str, weights: str | None, device: str):
    """The FID feature extractor, built once per process (Inception-v3 reads ~100 MB)."""
    from fedbench.metrics.fid import inception_features, proxy_features

    if kind == "proxy":
        return proxy_features()
    return inception_features(weights, device=device)
