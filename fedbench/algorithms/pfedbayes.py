"""pFedBayes (Zhang et al., ICML 2022): personalised FL by variational Bayesian inference with
mean-field Gaussian weights, a personal posterior per client pulled to a global prior by KL.

Under `training.precision: bf16` only the network's forward pass is autocast: the weight
samples μ + σ·ε (σ = softplus(ρ), the noise scale) and the KL terms stay float32.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F

from fedbench.algorithms.base import Algorithm, Batch, ClientContext, State
from fedbench.algorithms.opt_in import LocalSteps, OwnNetwork, PersonalEvaluation
from fedbench.algorithms.pair import joined, split
from fedbench.tree import Apply, Params, tree_sub

MU, RHO = "mu.", "rho."  # a distribution's means and softplus-parametrised scales
PERS, GLOB = "p.", "g."  # during local training: the personal posterior, the local global copy


def sigma(rho: torch.Tensor) -> torch.Tensor:
    """σ = log(1 + exp(ρ)), the scale of a mean-field Gaussian weight."""
    return F.softplus(rho)


def gaussian_kl(mu_q: Params, rho_q: Params, mu_p: Params, rho_p: Params) -> torch.Tensor:
    """KL(N(μ_q, σ_q²) || N(μ_p, σ_p²)) summed over every weight (diagonal Gaussians)."""
    total = 0.0
    for k in mu_q:
        sq, sp = sigma(rho_q[k]), sigma(rho_p[k])
        term = torch.log(sp / sq) + (sq**2 + (mu_q[k] - mu_p[k]) ** 2) / (2 * sp**2) - 0.5
        total = total + term.sum()
    return total


def sample_weights(mu: Params, rho: Params, eps: torch.Tensor) -> Params:
    """Reparameterised draw w = μ + σ(ρ)·ε from flat standard-normal draws `eps` (keys in order)."""
    out, start = {}, 0
    for k, m in mu.items():
        n = m.numel()
        out[k] = m + sigma(rho[k]) * eps[start : start + n].reshape(m.shape)
        start += n
    return out


@dataclass(frozen=True)
class PFedBayes(LocalSteps, OwnNetwork, PersonalEvaluation, Algorithm):
    """pFedBayes (Zhang et al. 2022, Alg. 1, eqs. 6-8): each weight is a Gaussian N(μ, σ²),
    σ = softplus(ρ). The server holds the global distribution v = (μ, ρ). Each local step, client
    i (n_i samples) takes one SGD step on both of
      its personal posterior θ_i: -E_{q_θi}[log p(batch | w)] + (ζ/n_i) KL(q_θi || p_v),
        the expectation by `mc_samples` reparameterised draws w = μ + σ ε, ε from `step_noise`;
      its copy of the global distribution v_i: (ζ/n_i) KL(q_θi || p_v), θ_i held fixed.
    The server averages the copies with sample-size weights (the paper's β = 1). θ_i persists
    across rounds and starts as the global distribution.

    Deviations: the two updates of a step use the same (pre-step) values and the engine's one
    learning rate (pFedBreD's shared lr 0.01 for both; the release steps θ_i first, then v_i with
    its own lr); μ starts from the run's initialisation (shared by every algorithm of a cell)
    instead of the release's U(-weight_scale, weight_scale) draw. Evaluation uses the posterior
    mean μ: protocol `personal` = θ_i's μ, "global" = v's μ.

    Hyperparameters: pFedBreD gives none (spec pfedbred.md §2, §9.21); ζ = 10, ρ init -3 and one
    Monte-Carlo draw per step are pFedBayes' (paper §5 / release main.py defaults: zeta 10,
    rho_offset -3; one ε draw per batch). pFedBayes has no exact FedAvg limit (v moves only
    through the KL term); ζ = 0 with σ -> 0 is local SGD alone (tests).
    """

    name: ClassVar[str] = "pfedbayes"
    personal_protocols: ClassVar[tuple[str, ...]] = ("personal",)
    defaults_from: ClassVar[str | None] = (
        "pFedBayes (Zhang et al., ICML 2022), §5 and release defaults: zeta = 10, rho init -3, "
        "1 MC sample per step"
    )
    zeta: float = 10.0
    rho_init: float = -3.0
    mc_samples: int = 1

    def __post_init__(self):
        checks = {
            "zeta": math.isfinite(self.zeta) and self.zeta >= 0,
            "rho_init": math.isfinite(self.rho_init),
            "mc_samples": isinstance(self.mc_samples, int) and self.mc_samples >= 1,
        }
        for key, ok in checks.items():
            if not ok:
                raise ValueError(f"pfedbayes: bad {key} = {getattr(self, key)!r}")

    def model(self, apply: Apply) -> Apply:
        def posterior_mean(params: Params, x: torch.Tensor) -> torch.Tensor:
            return apply(split(params, MU), x)

        return posterior_mean

    def init_global(self, init_params: Params, fresh, rng, num_clients: int) -> Params:
        rho = {k: torch.full_like(v, self.rho_init) for k, v in init_params.items()}
        return {**joined(MU, init_params), **joined(RHO, rho)}

    def init_client_state(self, client_id: int, global_params: Params, fresh) -> State:
        return {"personal": dict(global_params)}

    def client_begin(self, global_params, server_state, client_state, ctx: ClientContext):
        params = {**joined(PERS, client_state["personal"]), **joined(GLOB, global_params)}
        return params, {"n": float(max(ctx.num_train, 1))}

    def step_noise(self, rng, ctx: ClientContext, global_params):
        size = sum(v.numel() for k, v in global_params.items() if k.startswith(MU))
        return torch.randn((ctx.num_steps, self.mc_samples, size), generator=rng)

    def local_loss(self, apply: Apply, params: Params, batch: Batch, carry: State, noise):
        p_mu, p_rho = split(params, PERS + MU), split(params, PERS + RHO)
        g_mu, g_rho = split(params, GLOB + MU), split(params, GLOB + RHO)
        data = 0.0
        for s in range(self.mc_samples):
            w = sample_weights(p_mu, p_rho, noise[s].to(next(iter(p_mu.values())).dtype))
            data = data + self.data_loss(apply, joined(MU, w), batch)
        if self.zeta == 0:  # no prior: skip the KL, whose gradients overflow as σ -> 0
            return data / self.mc_samples
        detach = lambda d: {k: v.detach() for k, v in d.items()}  # noqa: E731
        kl_personal = gaussian_kl(p_mu, p_rho, detach(g_mu), detach(g_rho))
        kl_global = gaussian_kl(detach(p_mu), detach(p_rho), g_mu, g_rho)
        return data / self.mc_samples + self.zeta / carry["n"] * (kl_personal + kl_global)

    def client_end(self, global_params, params, carry, client_state, ctx: ClientContext):
        message = {
            "delta": tree_sub(split(params, GLOB), global_params),
            "weight": float(ctx.num_train),
        }
        return message, {"personal": split(params, PERS)}

    def personal_params(self, protocol: str, global_params: Params, client_state: State) -> Params:
        if protocol != "personal":
            return super().personal_params(protocol, global_params, client_state)
        return dict(client_state["personal"])
