"""FedCGAN and FedCVAE, FedEvg's baselines (thesis ch. IV; fedevg.md §2, §4): FedAvg of a
conditional generative model, whose samples train the classifier every client evaluates.

The thesis gives neither baseline's architecture nor its training; the release
(vaseline555/FedEvg, commit 24251ca) is what produced Tables 4.2-4.5, and these follow it
(src/client/fedcganclient.py, fedcvaeclient.py; src/server/fedcganserver.py, fedcvaeserver.py;
the models are fedbench/models/fedevg.py's `fedevg_acgan` and `fedevg_cvae`).

How they differ from FedAvg, hook by hook:

- The model's BatchNorm layers keep running statistics, as the release's do: the global ones
  live in the server state (`init_server_state` reads the network's initial buffers), a client
  starts from them (`client_begin`, in its carry), every training forward pass updates its copy
  in place, and the server averages the clients' copies with the parameters' weights (the
  release's FedAvg averages every float buffer beside the parameters, fedavg.py `accumulate`).
- `local_loss`: FedCGAN (steps_per_batch = 2: each batch is taken for a discriminator step, then a
  generator step, the release's two Adam optimisers over disjoint parameters, here one Adam with
  `update_mask` freezing the other half and a step count per leaf): real images scaled to
  [-1, 1]; noise z ~ U(-1, 1)^{2h} conditioned on the batch's *real* labels; D's loss =
  BCE(D(x), 1) + BCE(D(G(z)), 0) + CE(aux(x), y) + CE(aux(G(z)), y_rand), D run once on the
  concatenated [fakes; reals] batch; G's loss = BCE(D(G(z)), 1) + CE(aux(G(z)), y) with the
  same z. D's Dropout(0.5) draws from torch's generator seeded by the step's draw.
  FedCVAE: MSE(decoder(μ + σ·ε, y), x) (mean) + KL(N(μ, σ²) || N(0, I)) summed over the latent
  and averaged over the batch, images in [0, 1].
- `aggregate`: FedAvg of the parameters and the running statistics.
- `server_fit` (ServerTraining): at the rounds that evaluate (the release's
  `_central_evaluate`), the generator (eval mode: running statistics) makes M = L·spc
  class-sorted samples from noise of the server's stream (FedCGAN U(-1, 1)^{2h}, FedCVAE
  N(0, I)), and the engine trains a freshly initialised ReLU ResNet-10 (`server_network`; no
  spectral norm; the run's model init: FedCGAN's normal(0, 0.02), FedCVAE's xavier) on them as
  FedEvg's server classifier (one shuffled pass of 64, Adam 1e-3).
- `eval_model`: that classifier is what the clients evaluate on their holdouts (Tables 4.2/4.3),
  real images scaled to the generator's range first (FedCGAN [-1, 1], FedCVAE [0, 1]), as the
  release's clients do in `evaluate_classifier`.
- FID (Tables 4.4/4.5) of the samples against the server's test set, as FedEvg's: FedCGAN's
  samples mapped to [0, 1]; FedCVAE's passed through x·0.5 + 0.5 first, as the release does
  (fedcvaeserver.py maps its sigmoid output as if it were tanh's, so its FID sees images in
  [0.5, 1]; `release_fid_shift: false` measures the samples as generated).

Both run in the sequential executor only: the running statistics are updated in place by
forward passes, which the vectorised executor's vmap cannot batch.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from fedbench.algorithms.base import (
    Algorithm,
    Batch,
    ClientContext,
    ServerContext,
    ServerSetup,
    State,
    check_settings,
)
from fedbench.algorithms.fedevg import (
    FID_EXTRACTORS,
    FID_MODES,
    feature_extractor,
    synthetic_fid,
)
from fedbench.algorithms.opt_in import (
    LocalSteps,
    ServerFit,
    ServerNetwork,
    ServerOutputs,
    ServerTraining,
)
from fedbench.tree import Apply, Params, tree_sub, weighted_mean

INITS = ("xavier", "normal")
SEED_HIGH = 2**62  # a step's seed is drawn in [0, SEED_HIGH)
DROPOUT_KEY = 0x9E3779B97F4A7C15  # mixes the phase into a step's Dropout seed
_BN_COUNTER = "num_batches_tracked"  # not averaged: unused by BatchNorm with a momentum


def network(apply: Apply, who: str, arch: str, method: str) -> nn.Module:
    """The nn.Module behind the run's `apply`, which must be `arch` (one with `method`): its
    parts are called by name."""
    module = getattr(apply, "module", None)
    if module is None or not hasattr(module, method):
        raise ValueError(f"{who} trains a generative model: set the run's model arch to {arch}")
    return module


def part_call(
    module: nn.Module, part: str, params: Params, stats: dict[str, torch.Tensor], *args: Any
) -> Any:
    """module.<part>(*args) with the `part.*` entries of `params` and of the running statistics
    `stats` (updated in place by a training-mode forward pass)."""
    cut = len(part) + 1
    own = {k[cut:]: v for k, v in params.items() if k.startswith(part + ".")}
    bufs = {k[cut:]: v for k, v in stats.items() if k.startswith(part + ".")}
    return functional_call(getattr(module, part), (own, bufs), args)


@contextlib.contextmanager
def mode(module: nn.Module, training: bool) -> Iterator[None]:
    """`module` in train or eval mode within; its previous mode after."""
    before = module.training
    module.train(training)
    try:
        yield
    finally:
        module.train(before)


@contextlib.contextmanager
def seeded_global_rng(seed: int, device: torch.device) -> Iterator[None]:
    """torch's global generator (Dropout's) seeded with `seed` within; restored after."""
    devices = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield


def precision_scope(apply: Apply, device: torch.device) -> contextlib.AbstractContextManager:
    """The forward passes in the run's precision (`training.precision`: bf16 wraps `apply` with
    it, fedbench/engine/precision.py), for the parts these algorithms call themselves."""
    if getattr(apply, "precision", None) == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


@dataclass(frozen=True)
class GenerativeFedAvg(LocalSteps, ServerOutputs, ServerTraining, Algorithm):
    """FedAvg of a conditional generative model whose samples train the evaluated classifier."""

    name: ClassVar[str] = "generative"
    carry_updates: ClassVar[bool] = True
    sequential_only: ClassVar[str | None] = (
        "its BatchNorm running statistics are updated in place by every forward pass"
    )
    server_scalars: ClassVar[tuple[str, ...]] = ("fid",)
    # The generator's output range; the classifier sees real images mapped to it.
    OUTPUT_RANGE: ClassVar[tuple[float, float]] = (0.0, 1.0)
    ARCH: ClassVar[str] = ""  # the model arch it trains, and a method only that model has
    SAMPLER: ClassVar[str] = ""

    spc: int = 10  # samples per class: M = L·spc
    server_epochs: int = 1
    server_batch: int = 64
    server_lr: float = 1e-3
    classifier_hidden: int = 64
    classifier_init: str = "xavier"
    classifier_init_gain: float = 1.0
    fid: str = "code"
    fid_extractor: str = "inception"
    fid_weights: str | None = None

    def __post_init__(self):
        check_settings(
            self,
            choices={"fid": FID_MODES, "fid_extractor": FID_EXTRACTORS, "classifier_init": INITS},
            positive_ints=("spc", "server_epochs", "server_batch", "classifier_hidden"),
            positive=("server_lr", "classifier_init_gain"),
        )

    # -- what the subclasses define ----------------------------------------------------------
    def train_loss(
        self,
        module: nn.Module,
        params: Params,
        stats: dict[str, torch.Tensor],
        batch: Batch,
        gen: torch.Generator,
        seed: int,
        phase: int,
    ) -> torch.Tensor:
        """One step's loss; forward passes update `stats` in place."""
        raise NotImplementedError

    def generate(
        self,
        module: nn.Module,
        params: Params,
        stats: dict[str, torch.Tensor],
        labels: torch.Tensor,
        rng: torch.Generator,
    ) -> torch.Tensor:
        """Samples for `labels` in OUTPUT_RANGE (eval mode, no gradient)."""
        raise NotImplementedError

    def _network(self, apply: Apply) -> nn.Module:
        return network(apply, self.name, self.ARCH, self.SAMPLER)

    def fid_images(self, samples: torch.Tensor) -> torch.Tensor:
        """The samples as the release's FID sees them (in [0, 1])."""
        lo, hi = self.OUTPUT_RANGE
        return (samples - lo) / (hi - lo)

    # -- server ----------------------------------------------------------------------------
    def init_server_state(self, global_params: Params, setup: ServerSetup | None = None) -> State:
        if setup is None or setup.apply is None:
            raise ValueError(f"{self.name} needs the network and the data's shape (ServerSetup)")
        if self.fid != "none":  # before round 1: a missing Inception file stops the run now
            feature_extractor(self.fid_extractor, self.fid_weights, str(setup.rng.device))
        module = self._network(setup.apply)
        stats = {
            k: v.detach().clone() for k, v in module.named_buffers() if not k.endswith(_BN_COUNTER)
        }
        return {
            "stats": stats,
            "classifier": {},
            "input_shape": tuple(setup.input_shape),
            "num_classes": int(setup.num_classes),
            "fid": math.nan,
        }

    def aggregate(
        self,
        global_params: Params,
        messages: dict[str, Any],
        server_state: State,
        ctx: ServerContext,
    ) -> tuple[Params, State]:
        new, _ = super().aggregate(global_params, messages, server_state, ctx)
        stats = (
            weighted_mean(messages["stats"], messages["weight"]) if server_state["stats"] else {}
        )
        return new, {**server_state, "stats": stats}

    def server_network(self) -> ServerNetwork:
        """The server classifier: the release's ResNet-10 (fedevg_resnet10), trained on the
        samples at the rounds that evaluate."""
        return ServerNetwork(
            "fedevg_resnet10",
            {
                "hidden": self.classifier_hidden,
                "activation": "relu",
                "init": self.classifier_init,
                "init_gain": self.classifier_init_gain,
            },
        )

    def server_fit(
        self, global_params: Params, server_state: State, ctx: ServerContext
    ) -> ServerFit | None:
        """At the rounds that evaluate: `spc` samples per class from the new global generator
        (eval mode, the averaged running statistics), then the classifier's initialisation seed
        from the same stream; the engine trains a classifier so initialised on them."""
        if not ctx.evaluated:
            return None
        if ctx.apply is None or ctx.rng is None:
            raise ValueError(f"{self.name}: the server's sampling needs ServerContext.apply, .rng")
        module = self._network(ctx.apply)
        L = server_state["num_classes"]
        labels = torch.arange(L, device=ctx.rng.device).repeat_interleave(self.spc)
        stats = server_state["stats"]
        with mode(module, False), torch.no_grad(), precision_scope(ctx.apply, labels.device):
            x = self.generate(module, global_params, stats, labels, ctx.rng).float()
        seed = int(torch.randint(0, 2**31 - 1, (1,), generator=ctx.rng, device=ctx.rng.device))
        return ServerFit(
            x, labels, self.server_epochs, self.server_batch, self.server_lr, seed=seed
        )

    def server_fitted(
        self, fit: ServerFit, params: Params, state: State, ctx: ServerContext
    ) -> tuple[Params | None, State]:
        """The classifier kept in the server state (the global model stays the generator), its
        samples in [0, 1] for the artifacts, and their FID."""
        lo, hi = self.OUTPUT_RANGE
        x = fit.x
        state = {
            **state,
            "classifier": params,
            "x": ((x - lo) / (hi - lo)).clamp(0.0, 1.0),
            "y": fit.y,
        }
        if self.fid != "none" and ctx.test is not None:
            images = self.fid_images(x).clamp(0.0, 1.0)
            state["fid"] = synthetic_fid(
                images, ctx.test[0], self.fid, self.fid_extractor, self.fid_weights
            )
        return None, state

    def eval_model(
        self, apply: Apply, global_params: Params, server_state: State
    ) -> tuple[Apply, Params]:
        """The server classifier (`apply`: the server network, `server_network`) on real images
        in [0, 1] mapped to the generator's range."""
        clf = server_state.get("classifier")
        if not clf:
            raise ValueError(
                f"{self.name}: no server classifier yet (it is trained at the rounds that "
                "evaluate, after the aggregation)"
            )
        lo, hi = self.OUTPUT_RANGE

        def scaled(params: Params, x: torch.Tensor) -> torch.Tensor:
            return apply(params, x * (hi - lo) + lo)

        return scaled, clf

    def artifacts(self, server_state: State) -> dict[str, torch.Tensor]:
        """The last evaluation's samples (class-sorted, in [0, 1]) and their labels."""
        if "x" not in server_state:
            return {}
        return {"synthetic_x": server_state["x"], "synthetic_y": server_state["y"]}

    def server_metrics(self, server_state: State) -> dict[str, float]:
        return {"fid": float(server_state["fid"])}

    # -- clients ---------------------------------------------------------------------------
    def client_begin(
        self, global_params: Params, server_state: State, client_state: State, ctx: ClientContext
    ) -> tuple[Params, State]:
        stats = {k: v.clone() for k, v in server_state["stats"].items()}
        return dict(global_params), {"stats": stats}

    def step_noise(
        self, rng: torch.Generator, ctx: ClientContext, global_params: Params
    ) -> dict[str, torch.Tensor]:
        """One seed per batch (its noise, labels, Dropout; shared by the batch's phases) and
        each step's phase."""
        k = self.steps_per_batch
        seeds = torch.randint(0, SEED_HIGH, (ctx.num_steps // k,), generator=rng, device=rng.device)
        phase = torch.arange(ctx.num_steps, device=rng.device) % k
        return {"seed": seeds.repeat_interleave(k), "phase": phase}

    def local_loss(
        self, apply: Apply, params: Params, batch: Batch, carry: State, noise: Any
    ) -> tuple[torch.Tensor, State]:
        module = self._network(apply)
        stats = {k: v.clone() for k, v in carry["stats"].items()}
        seed, phase = int(noise["seed"]), int(noise["phase"])
        gen = torch.Generator(device=batch.x.device).manual_seed(seed)
        with mode(module, True), precision_scope(apply, batch.x.device):
            loss = self.train_loss(module, params, stats, batch, gen, seed, phase)
        return loss, {"stats": stats}

    def client_end(
        self,
        global_params: Params,
        params: Params,
        carry: State,
        client_state: State,
        ctx: ClientContext,
    ) -> tuple[dict[str, Any], State]:
        message = {
            "delta": tree_sub(params, global_params),
            "weight": float(ctx.num_train),
            "stats": carry["stats"],
        }
        return message, client_state


@dataclass(frozen=True)
class FedCGAN(GenerativeFedAvg):
    """FedCGAN (Rasouli et al. 2020 as the FedEvg release runs it): FedAvg of an AC-GAN."""

    name: ClassVar[str] = "fedcgan"
    steps_per_batch: ClassVar[int] = 2  # a discriminator step, then a generator step, on each batch
    OUTPUT_RANGE: ClassVar[tuple[float, float]] = (-1.0, 1.0)
    ARCH: ClassVar[str] = "fedevg_acgan"
    SAMPLER: ClassVar[str] = "generate"

    # The release's FedCGAN scripts pass --init_type normal --init_gain 0.02, which its server
    # applies to the classifier too.
    classifier_init: str = "normal"
    classifier_init_gain: float = 0.02

    def update_mask(self, params: Params, carry: State, noise: Any) -> dict[str, float]:
        """Phase 0 trains the discriminator (`head`), phase 1 the generator (`body`)."""
        part = "head." if int(noise["phase"]) == 0 else "body."
        return {k: float(k.startswith(part)) for k in params}

    def train_loss(self, module, params, stats, batch, gen, seed, phase):
        x, y = batch.x * 2.0 - 1.0, batch.y
        n, dev = len(x), x.device
        noise = torch.rand((n, module.body.noise_dim), generator=gen, device=dev) * 2.0 - 1.0
        fake_label = torch.randint(module.body.num_classes, (n,), generator=gen, device=dev)
        bce = F.binary_cross_entropy_with_logits
        dropout_seed = (seed + phase * DROPOUT_KEY) % SEED_HIGH
        with seeded_global_rng(dropout_seed, dev):
            if phase == 0:  # D on [fakes; reals], the fakes detached
                with torch.no_grad():
                    fake = part_call(module, "body", params, stats, noise, y)
                disc, cls = part_call(module, "head", params, stats, torch.cat([fake, x]))
                d_fake, d_real = disc[:n].float(), disc[n:].float()
                return (
                    bce(d_real, torch.ones_like(d_real))
                    + bce(d_fake, torch.zeros_like(d_fake))
                    + F.cross_entropy(cls[n:].float(), y)
                    + F.cross_entropy(cls[:n].float(), fake_label)
                )
            fake = part_call(module, "body", params, stats, noise, y)
            disc, cls = part_call(module, "head", params, stats, fake)
            disc = disc.float()
            return bce(disc, torch.ones_like(disc)) + F.cross_entropy(cls.float(), y)

    def generate(self, module, params, stats, labels, rng):
        noise = torch.rand((len(labels), module.body.noise_dim), generator=rng, device=rng.device)
        return part_call(module, "body", params, stats, noise * 2.0 - 1.0, labels)


@dataclass(frozen=True)
class FedCVAE(GenerativeFedAvg):
    """FedCVAE (the FedEvg release's multi-round FedAvg of a conditional VAE, not Heinbaugh et
    al.'s one-shot FedCVAE-Ens/KD)."""

    name: ClassVar[str] = "fedcvae"
    ARCH: ClassVar[str] = "fedevg_cvae"
    SAMPLER: ClassVar[str] = "decode"
    # The release maps its [0, 1] samples through x·0.5 + 0.5 before the FID (a tanh mapping
    # applied to a sigmoid's output); false: the samples as generated.
    release_fid_shift: bool = True

    def fid_images(self, samples: torch.Tensor) -> torch.Tensor:
        return samples * 0.5 + 0.5 if self.release_fid_shift else samples

    def train_loss(self, module, params, stats, batch, gen, seed, phase):
        mu, std = part_call(module, "body", params, stats, batch.x)
        eps = torch.randn(mu.shape, generator=gen, device=mu.device)  # float32 in any precision
        recon = part_call(module, "head", params, stats, mu + std * eps, batch.y)
        return F.mse_loss(recon.float(), batch.x) + kl_to_standard_normal(mu.float(), std.float())

    def generate(self, module, params, stats, labels, rng):
        z = torch.randn((len(labels), module.latent), generator=rng, device=rng.device)
        return part_call(module, "head", params, stats, z, labels)


def kl_to_standard_normal(mu: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """KL(N(mu, std²) || N(0, I)) summed over the latent, averaged over the batch, written as
    the release writes it: -0.5·Σ(1 + log std² - mu² - std²)."""
    return (-0.5 * (1 + std.pow(2).log() - mu.pow(2) - std.pow(2)).sum(1)).mean()
