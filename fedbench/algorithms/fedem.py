"""FedEM (Marfoq et al., NeurIPS 2021): federated multi-task learning under a mixture of
distributions; every client mixes M shared component models with its own weights π_i."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F

from fedbench.algorithms.base import Algorithm, Batch, ClientContext, ServerContext, State
from fedbench.algorithms.opt_in import OwnNetwork, PersonalEvaluation
from fedbench.algorithms.pair import joined, split
from fedbench.tree import Apply, Params, tree_sub, weighted_mean

PI = "mix.pi"  # mixture weights in a parameter dict (global: the "global" protocol's weights)
ACC = "mix.acc"  # the round's summed responsibilities, accumulated through the SGD step


def prefix(m: int) -> str:
    """Key prefix of component m."""
    return f"m{m}."


def component_nll(apply: Apply, params: Params, batch: Batch, m_count: int) -> torch.Tensor:
    """Per-sample negative log-likelihood of every component, [M, B]."""
    out = []
    for m in range(m_count):
        logp = F.log_softmax(apply(split(params, prefix(m)), batch.x), dim=-1)
        out.append(-logp.gather(-1, batch.y.unsqueeze(-1)).squeeze(-1))
    return torch.stack(out)


def responsibilities(nll: torch.Tensor, pi: torch.Tensor) -> torch.Tensor:
    """E-step: q(z = m | x, y) ∝ π_m p_m(y | x) from per-sample NLLs [M, B], over m."""
    logpi = torch.log(pi.clamp_min(1e-30)).to(nll.dtype).unsqueeze(-1)
    return torch.softmax(logpi - nll, dim=0)


@dataclass(frozen=True)
class FedEM(OwnNetwork, PersonalEvaluation, Algorithm):
    """FedEM (Marfoq et al. 2021, Alg. 1 with the local solver of Alg. 3): client i's data follow
    a mixture Σ_m π_im p_m(y | x; θ_m) of M components shared by all clients. Each round a
    sampled client runs an E-step, q_im(x, y) ∝ π_im p_m(y | x; θ_m^(k-1)) with the received
    components and its previous π_i; trains every component on Σ_m q_im CE(θ_m) with the
    engine's local steps (one batch per step, all components at once); and sets π_i to the mean
    of q over its samples (M-step). The server averages each component's update with sample-size
    weights. The parameter dict holds the M components under `m0.`, `m1.`, ... and the mixture
    weights under `mix.pi`; the model is the mixture, log Σ_m π_m softmax(f_m(x)).

    Deviation (the hooks see one batch at a time): the E-step and π's mean run over the round's
    local batches (R = 20 batches of 20 in pFedBreD's settings), each sample's q computed with the
    round-start components, instead of one pass over the whole local dataset. The sum of q rides
    in `mix.acc` through the SGD step (gradient -Σq, value 0), so π is that exact mean under
    plain SGD (no momentum or weight decay, as pFedBreD trains). Component 0 starts from the
    run's initialisation, component m ≥ 1 from an independent one (`fresh(m)`), as FedEM's
    release seeds its learners apart; π_i starts uniform.

    Protocols: `personal` = client i's mixture with its π_i (pFedBreD's "FedEM -G": the union of
    the clients' test splits is its global test, §1.11, §9.21); "global" = the mixture with the
    sample-weighted mean of the last round's client weights. With M = 1 this is FedAvg exactly.
    Hyperparameters: pFedBreD gives none (spec pfedbred.md §2, §9.21); M = 3 follows FedEM's
    paper (§5 and App. I use M = 3 components throughout).
    """

    name: ClassVar[str] = "fedem"
    personal_protocols: ClassVar[tuple[str, ...]] = ("personal",)
    defaults_from: ClassVar[str | None] = (
        "FedEM (Marfoq et al., NeurIPS 2021), §5 / App. I: M = 3 components"
    )
    # Its E-step and mixture are likelihoods of each component's softmax: cross-entropy only.
    objectives: ClassVar[tuple[str, ...] | None] = ("cross_entropy",)
    components: int = 3

    def __post_init__(self):
        if not isinstance(self.components, int) or self.components < 1:
            raise ValueError(f"fedem: components must be an integer >= 1, got {self.components!r}")

    def _uniform(self, like: torch.Tensor) -> torch.Tensor:
        return torch.full((self.components,), 1.0 / self.components, dtype=like.dtype)

    def model(self, apply: Apply) -> Apply:
        m_count = self.components

        def mixture(params: Params, x: torch.Tensor) -> torch.Tensor:
            logp = torch.stack(
                [F.log_softmax(apply(split(params, prefix(m)), x), dim=-1) for m in range(m_count)]
            )
            logpi = torch.log(params[PI].clamp_min(1e-30)).to(logp.dtype)
            return torch.logsumexp(logp + logpi.reshape(-1, 1, 1), dim=0)

        mixture.component = apply  # local_loss trains the components one by one
        return mixture

    def init_global(self, init_params: Params, fresh, rng, num_clients: int) -> Params:
        out: Params = {}
        for m in range(self.components):
            out.update(joined(prefix(m), init_params if m == 0 else fresh(m)))
        first = next(iter(init_params.values()))
        out[PI] = self._uniform(first).to(first.device)
        return out

    def init_client_state(self, client_id: int, global_params: Params, fresh) -> State:
        return {"pi": global_params[PI].clone()}

    def _components(self, params: Params) -> Params:
        return {k: v for k, v in params.items() if not k.startswith("mix.")}

    def client_begin(self, global_params, server_state, client_state, ctx: ClientContext):
        start = self._components(global_params)
        params = {**start, ACC: torch.zeros_like(client_state["pi"])}
        return params, {"start": start, "pi": client_state["pi"]}

    def local_loss(self, apply: Apply, params: Params, batch: Batch, carry: State, noise):
        component = getattr(apply, "component", apply)
        # The round-start components are constants of the step: q carries no gradient.
        q = responsibilities(
            component_nll(component, carry["start"], batch, self.components), carry["pi"]
        ).detach()
        nll = component_nll(component, params, batch, self.components)
        per_sample = (q * nll).sum(dim=0)
        if batch.mask is None:
            data, q_sum = per_sample.mean(), q.sum(dim=1)
        else:
            data = (per_sample * batch.mask).sum() / batch.mask.sum().clamp(min=1)
            q_sum = (q * batch.mask).sum(dim=1)
        acc = params[ACC]
        # Value exactly 0, gradient -Σq: the SGD step adds lr·Σq to mix.acc.
        return data - ((acc - acc.detach()) * q_sum.to(acc.dtype)).sum()

    def client_end(self, global_params, params, carry, client_state, ctx: ClientContext):
        acc = params[ACC]
        total = acc.sum()
        pi = torch.where(total > 0, acc / total.clamp_min(1e-30), client_state["pi"])
        start = carry["start"]
        message = {
            "delta": tree_sub({k: params[k] for k in start}, start),
            "pi": pi,
            "weight": float(ctx.num_train),
        }
        return message, {"pi": pi}

    def aggregate(self, global_params, messages, server_state, ctx: ServerContext):
        mean_delta = weighted_mean(messages["delta"], messages["weight"])
        out = {k: global_params[k] + d for k, d in mean_delta.items()}
        w = messages["weight"] / messages["weight"].sum()
        pi = messages["pi"]
        out[PI] = torch.tensordot(w.to(pi.dtype), pi, dims=1)
        return out, server_state

    def personal_params(self, protocol: str, global_params: Params, client_state: State) -> Params:
        if protocol != "personal":
            return super().personal_params(protocol, global_params, client_state)
        return {**self._components(global_params), PI: client_state["pi"]}
