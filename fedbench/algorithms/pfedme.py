"""pFedMe (Dinh, Tran & Nguyen, NeurIPS 2020): personalised models as Moreau envelopes.

Under `training.precision: bf16` only the forward passes are autocast: the K inner prox
iterations, θ and the envelope gradient λ(w - θ) are float32.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch.func import grad

from fedbench.algorithms.base import Algorithm, Batch, ClientContext, ServerContext, State
from fedbench.algorithms.fedprox import PROX_FORMS, prox_term
from fedbench.algorithms.opt_in import LocalSteps, PersonalEvaluation, ServerOutputs
from fedbench.algorithms.pair import FED, LOC, joined, split
from fedbench.metrics.coherence import flatten_rows, gce
from fedbench.tree import Apply, Params, tree_sub, weighted_mean

VARIANTS = ("code", "paper")
EVALS = ("code", "local")


def write_term(params: Params, value: Params, scale: float | torch.Tensor = 1.0) -> torch.Tensor:
    """A loss term with value 0 whose gradient w.r.t. `params` is `scale * value` (held constant).

    Sets a parameter's gradient directly (the paper variant's λ (w - θ̃), pFedBreD's ∇F_i):
    one dot product per tensor (d - d.detach() is 0 with gradient `value`).
    """
    d = sum(params[k].reshape(-1) @ value[k].detach().reshape(-1) for k in params)
    return (d - d.detach()) * scale


@dataclass(frozen=True)
class PFedMe(LocalSteps, PersonalEvaluation, ServerOutputs, Algorithm):
    """pFedMe (Dinh et al. 2020, Alg. 1; bi-level objective F_i(w) = min_θ f_i(θ) + (λ/2)||θ - w||²,
    eq. 2), in the SuPerFed release's form by default.

    `variant: code` (spec superfed.md §3): each round the local model θ^l and the federated model
    θ^f start from the global model; θ^l trains E epochs on CE + mu * prox(θ^l, θ^f) with θ^f
    held constant, and after each epoch θ^f ← θ^f - lr * mu * (θ^f - θ^l); θ^f is sent.
    `variant: paper`: every local step solves the inner problem on the batch approximately
    (`inner_steps` = K gradient steps of `inner_lr` from w), then w takes the step
    lr * mu * ∇prox(w, θ̃) (= lr * λ (w - θ̃) for the squared form); w is sent. Deviations from
    the paper: the engine's momentum and weight decay act on w; the inner solve starts from w;
    the server weights clients by n_i. `beta` is the paper's server step (1 = plain averaging;
    2 = pFedBreD's "+AM"). `train_all`: every client trains every round and only the sampled
    ones are aggregated (pFedMe's and pFedBreD's releases). `ft`: protocol `personal` evaluates
    the personal model after one more SGD step of `ft_lr` on one training batch ("+FT").
    `prox: auto` = the variant's own form (code: mu * sum_l ||.||_2 unsquared over weight
    tensors; paper: (mu/2)||.||²).
    `eval: code` (default; produced Tables 2.3-2.5): the release overwrites the local model with
    the global aggregate before evaluating, so protocol `personal` = θ^g. `eval: local`: the
    client's model from its last round (code: θ^l; paper: the last step's θ̃), the global
    initialisation for a never-sampled client.
    `variant: paper` with `eval: local` and the squared prox also sends the envelope gradient
    λ(w_{i,R} - θ̃_{i,R}), and the server logs the sampled clients' GCE (pFedBreD Fig. 2).
    Both variants keep what a step computes for later steps in the carry (`carry_updates`), not
    in parameters: the code variant's θ^f (replaced at the first step of each epoch after the
    first), the paper variant's θ̃ (replaced every step).
    """

    name: ClassVar[str] = "pfedme"
    personal_protocols: ClassVar[tuple[str, ...]] = ("personal",)
    server_scalars: ClassVar[tuple[str, ...]] = ("gce", "gce_all")
    carry_updates: ClassVar[bool] = True
    mu: float = 15.0
    variant: str = "code"
    eval: str = "code"
    prox: str = "auto"
    inner_steps: int = 5
    inner_lr: float = 0.01
    beta: float = 1.0
    train_all: bool = False
    ft: bool = False
    ft_lr: float = 0.01

    def __post_init__(self):
        checks = {
            "variant": self.variant in VARIANTS,
            "eval": self.eval in EVALS,
            "prox": self.prox == "auto" or self.prox in PROX_FORMS,
            "mu": self.mu >= 0,
            "inner_steps": isinstance(self.inner_steps, int) and self.inner_steps >= 1,
            "inner_lr": self.inner_lr > 0,
            "beta": self.beta > 0,
            "train_all": isinstance(self.train_all, bool),
            "ft": isinstance(self.ft, bool),
            "ft_lr": self.ft_lr > 0,
        }
        for key, ok in checks.items():
            if not ok:
                raise ValueError(f"pfedme: bad {key} = {getattr(self, key)!r}")

    @property
    def train_all_clients(self) -> bool:
        return self.train_all

    @property
    def prox_form(self) -> str:
        """The proximal term's form after resolving `auto`."""
        if self.prox != "auto":
            return self.prox
        return "layer_norm" if self.variant == "code" else "squared"

    def init_client_state(self, client_id: int, global_params: Params, fresh) -> State:
        return {"local": dict(global_params)} if self.eval == "local" else {}

    def client_begin(self, global_params, server_state, client_state, ctx: ClientContext):
        if self.variant == "paper":
            carry = {}
            if self.eval == "local":  # θ̃ of the client's last step (its last model before one)
                carry["pers"] = client_state["local"]
            return joined(FED, global_params), carry
        self._epochs(ctx)  # θ^f's schedule needs epochs: fail here, before any step
        carry = {"fed": global_params, "lr": torch.tensor(ctx.lr, dtype=torch.float64)}
        return joined(LOC, global_params), carry

    def _epochs(self, ctx: ClientContext) -> int:
        if ctx.num_steps and not ctx.steps_per_epoch:
            raise ValueError("pfedme: θ^f is updated per epoch; set training.local_epochs")
        return ctx.num_steps // ctx.steps_per_epoch if ctx.steps_per_epoch else 1

    def step_noise(self, rng, ctx: ClientContext, global_params):
        # Which steps update θ^f first (deterministic, so `rng` is not used).
        if self.variant == "paper":
            return None
        epochs = self._epochs(ctx)
        if epochs == 1:
            return None
        steps = torch.arange(ctx.num_steps).unsqueeze(1)
        starts = torch.arange(1, epochs) * ctx.steps_per_epoch
        return (steps == starts).any(1).float()  # [steps]: 1 at the first step of epochs 2..E

    def local_loss(self, apply: Apply, params: Params, batch: Batch, carry: State, noise):
        if self.variant == "paper":
            return self._paper_loss(apply, params, batch, carry, noise)
        loc, fed = split(params, LOC), carry["fed"]
        loss = self.data_loss(apply, loc, batch)
        if noise is None:  # one epoch: θ^f stays the global model until client_end
            return loss + self.mu * prox_term(loc, fed, self.prox_form), {}
        # At the first step of epochs 2..E (noise = 1), θ^f's update at the end of the previous
        # epoch (from θ^l before this step), already this step's prox target; elsewhere a no-op.
        pull = {k: self.mu * (fed[k] - loc[k]).detach() for k in fed}
        fed = {k: (fed[k] - noise * carry["lr"] * pull[k]).detach() for k in fed}
        return loss + self.mu * prox_term(loc, fed, self.prox_form), {"fed": fed}

    def _paper_loss(self, apply: Apply, params: Params, batch: Batch, carry: State, noise):
        w = split(params, FED)
        anchor = {k: v.detach() for k, v in w.items()}

        def inner(theta: Params) -> torch.Tensor:
            return self.data_loss(apply, theta, batch) + self.mu * prox_term(
                theta, anchor, self.prox_form
            )

        theta = dict(anchor)
        squared = self.prox_form == "squared"
        for _ in range(self.inner_steps):
            if squared:  # ∇ = ∇f(θ) + mu (θ - w): lerp(θ, w, lr mu) - lr ∇f(θ), two fused ops
                g = grad(lambda q: self.data_loss(apply, q, batch))(theta)
                c = self.inner_lr * self.mu
                theta = {
                    k: torch.add(torch.lerp(theta[k], anchor[k], c), g[k], alpha=-self.inner_lr)
                    for k in theta
                }
            else:
                g = grad(inner)(theta)
                theta = {k: theta[k] - self.inner_lr * g[k] for k in theta}
        theta = {k: v.detach() for k, v in theta.items()}
        # The envelope's value f(θ̃) + mu * prox(θ̃, w); its gradient in w is mu * ∇_w prox
        # (= mu (w - θ̃) for the squared form, written directly).
        if squared:
            value = self.data_loss(apply, theta, batch) + self.mu * prox_term(
                anchor, theta, "squared"
            )
            loss = value.detach() + write_term(w, {k: anchor[k] - theta[k] for k in w}, self.mu)
        else:
            loss = self.data_loss(apply, theta, batch) + self.mu * prox_term(
                w, theta, self.prox_form
            )
        return loss, ({"pers": theta} if "pers" in carry else {})

    def client_end(self, global_params, params, carry, client_state, ctx: ClientContext):
        if self.variant == "paper":
            fed = split(params, FED)
            personal = carry.get("pers", {})
        else:
            personal = split(params, LOC)
            # The last epoch's update of θ^f (the carry's, after the earlier epochs'), after the
            # final step.
            fed = {k: v - ctx.lr * self.mu * (v - personal[k]) for k, v in carry["fed"].items()}
        message = {"delta": tree_sub(fed, global_params), "weight": float(ctx.num_train)}
        if self.variant == "paper" and personal and self.prox_form == "squared":
            # ∇F_i(w) = λ(w - θ̃) (eq. 2's envelope), at the final w and last step's θ̃.
            message["envelope"] = {k: self.mu * (fed[k] - personal[k]) for k in fed}
        return message, ({"local": personal} if self.eval == "local" else client_state)

    def aggregate(self, global_params, messages, server_state, ctx: ServerContext):
        mean_delta = weighted_mean(messages["delta"], messages["weight"])
        if "envelope" in messages:
            server_state = {**server_state, "gce": gce(flatten_rows(messages["envelope"]))}
            # Spec §9.22: also over all N clients when all of them trained (train_all).
            if ctx.trained is not None:
                server_state["gce_all"] = gce(flatten_rows(ctx.trained["envelope"]))
        return {k: v + self.beta * mean_delta[k] for k, v in global_params.items()}, server_state

    def server_metrics(self, server_state: State) -> dict[str, float]:
        """The GCE of the last aggregated round's envelope gradients (`gce`: the aggregated
        clients'; `gce_all`: every client's, when all trained), when clients send them."""
        return {k: server_state[k] for k in ("gce", "gce_all") if k in server_state}

    def personal_params(self, protocol: str, global_params: Params, client_state: State) -> Params:
        if protocol != "personal":
            return super().personal_params(protocol, global_params, client_state)
        if self.eval == "code":
            return dict(global_params)
        return dict(client_state["local"])

    def eval_batches(self, protocol: str) -> int:
        return 1 if self.ft and protocol == "personal" else 0

    def tune_for_eval(self, protocol, apply, params, batches):
        """FT (pFedBreD C.4, spec pfedbred.md §9.11): one SGD step of `ft_lr` on one training
        batch of the personal model, evaluated and never kept."""
        if not (self.ft and protocol == "personal"):
            return params
        g = grad(lambda p: self.data_loss(apply, p, batches[0]))(params)
        return {k: v - self.ft_lr * g[k] for k, v in params.items()}
