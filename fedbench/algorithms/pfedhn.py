"""pFedHN (Shamsian et al., ICML 2021): a server-side hypernetwork generates each client's model
from a learned client embedding."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch

from fedbench.algorithms.base import Algorithm, ClientContext, ServerContext, ServerSetup, State
from fedbench.algorithms.opt_in import OwnNetwork, PersonalEvaluation
from fedbench.tree import Apply, Params, tree_sub

HN = "hn."
EMB = "hn.emb"  # [N, d] client embeddings (a personal dict holds one client's row [d])
BODY, HEAD = "hn.body.", "hn.head."


def _uniform(shape: tuple[int, ...], bound: float, rng: torch.Generator) -> torch.Tensor:
    return (torch.rand(shape, generator=rng) * 2 - 1) * bound


def init_hypernetwork(
    targets: Params, num_clients: int, embed_dim: int, hidden: int, layers: int, rng
) -> Params:
    """Embeddings ~ N(0, 1) (nn.Embedding's init); an MLP of `layers` Linear layers (ReLU
    between) embed_dim -> hidden -> ... -> hidden; one linear head per target tensor, weight
    [*shape, hidden] and bias [*shape], all Linear layers U(±1/√fan_in) (nn.Linear's init)."""
    out: Params = {EMB: torch.randn((num_clients, embed_dim), generator=rng)}
    fan_in = embed_dim
    for j in range(layers):
        bound = 1 / math.sqrt(fan_in)
        out[f"{BODY}{j}.weight"] = _uniform((hidden, fan_in), bound, rng)
        out[f"{BODY}{j}.bias"] = _uniform((hidden,), bound, rng)
        fan_in = hidden
    bound = 1 / math.sqrt(hidden)
    for k, v in targets.items():
        out[f"{HEAD}{k}.weight"] = _uniform((*v.shape, hidden), bound, rng).to(v.dtype)
        out[f"{HEAD}{k}.bias"] = _uniform(tuple(v.shape), bound, rng).to(v.dtype)
    return {k: v.to(next(iter(targets.values())).device) for k, v in out.items()}


def generate(hnet: Params, embedding: torch.Tensor) -> Params:
    """Target-network parameters h(v; φ) for one embedding v [d]."""
    a, j = embedding, 0
    while f"{BODY}{j}.weight" in hnet:
        if j > 0:
            a = torch.relu(a)
        a = hnet[f"{BODY}{j}.weight"] @ a + hnet[f"{BODY}{j}.bias"]
        j += 1
    out = {}
    for k, w in hnet.items():
        if k.startswith(HEAD) and k.endswith(".weight"):
            name = k[len(HEAD) : -len(".weight")]
            out[name] = w @ a + hnet[f"{HEAD}{name}.bias"]
    return out


@dataclass(frozen=True)
class PFedHN(OwnNetwork, PersonalEvaluation, Algorithm):
    """pFedHN (Shamsian et al. 2021, Alg. 1, eq. 4): the server holds a hypernetwork φ and one
    embedding v_i per client (both in the global parameter dict, `hn.*`). In each round a
    sampled client receives θ_i = h(v_i; φ), trains it with the engine's local steps to θ̃_i and
    sends Δθ_i = θ̃_i - θ_i. The server steps φ and v_i along the vector-Jacobian product
    (∇_{φ,v_i} θ_i)ᵀ(θ_i - θ̃_i): for φ the mean over the round's clients (the paper samples
    one client per step), for v_i its own client's; with SGD (`server_lr`, momentum, weight
    decay), as the release's hypernetwork optimiser.

    Hypernetwork (pFedHN release, models.py / trainer defaults): embedding dim 1 + N/4,
    `layers` = 1 + n_hidden = 4 Linear layers of width 100 (ReLU between), one linear head per
    target tensor; server SGD lr 1e-2, momentum 0.9, weight decay 1e-3. Client side: pFedBreD's
    shared settings (lr 0.01, R = 20 steps) instead of pFedHN's 50 inner steps of lr 5e-3.
    Protocols: `personal` = h(v_i; φ) (pFedHN evaluates the generated model); "global" =
    h(mean embedding; φ), a reference only (pFedHN has no global model).
    """

    name: ClassVar[str] = "pfedhn"
    personal_protocols: ClassVar[tuple[str, ...]] = ("personal",)
    defaults_from: ClassVar[str | None] = (
        "pFedHN (Shamsian et al., ICML 2021), §5 and release trainer defaults: embedding dim "
        "1 + N/4, hidden 100, 3 hidden layers, server SGD lr 1e-2, momentum 0.9, wd 1e-3"
    )
    embed_dim: int = -1  # -1 = 1 + N/4 (release)
    hidden: int = 100
    layers: int = 4
    server_lr: float = 1e-2
    server_momentum: float = 0.9
    server_weight_decay: float = 1e-3

    def __post_init__(self):
        checks = {
            "embed_dim": isinstance(self.embed_dim, int)
            and (self.embed_dim >= 1 or self.embed_dim == -1),
            "hidden": isinstance(self.hidden, int) and self.hidden >= 1,
            "layers": isinstance(self.layers, int) and self.layers >= 1,
            "server_lr": self.server_lr > 0,
            "server_momentum": 0 <= self.server_momentum < 1,
            "server_weight_decay": self.server_weight_decay >= 0,
        }
        for key, ok in checks.items():
            if not ok:
                raise ValueError(f"pfedhn: bad {key} = {getattr(self, key)!r}")

    def model(self, apply: Apply) -> Apply:
        def network(params: Params, x: torch.Tensor) -> torch.Tensor:
            if EMB not in params:  # target-network weights (local training)
                return apply(params, x)
            emb = params[EMB]
            return apply(generate(params, emb.mean(0) if emb.dim() == 2 else emb), x)

        return network

    def init_global(self, init_params: Params, fresh, rng, num_clients: int) -> Params:
        dim = self.embed_dim if self.embed_dim > 0 else int(1 + num_clients / 4)
        return init_hypernetwork(init_params, num_clients, dim, self.hidden, self.layers, rng)

    def init_client_state(self, client_id: int, global_params: Params, fresh) -> State:
        return {"id": client_id}

    def init_server_state(self, global_params: Params, setup: ServerSetup | None = None) -> State:
        return {"momentum": {k: torch.zeros_like(v) for k, v in global_params.items()}}

    def client_begin(self, global_params, server_state, client_state, ctx: ClientContext):
        with torch.no_grad():
            theta = generate(global_params, global_params[EMB][ctx.client_id])
        return dict(theta), {"start": theta}

    def client_end(self, global_params, params, carry, client_state, ctx: ClientContext):
        message = {"delta": tree_sub(params, carry["start"]), "weight": float(ctx.num_train)}
        return message, client_state

    def aggregate(self, global_params, messages, server_state, ctx: ServerContext):
        deltas, ids = messages["delta"], ctx.client_ids
        with torch.enable_grad():
            hnet = {k: v.detach().requires_grad_(True) for k, v in global_params.items()}
            inner = 0.0
            for row, cid in enumerate(ids):
                theta = generate(hnet, hnet[EMB][cid])
                # ⟨θ_i, θ_i - θ̃_i⟩ with the difference held fixed: its gradient is the VJP.
                inner = inner + sum((theta[k] * -deltas[k][row]).sum() for k in theta)
            grads = dict(zip(hnet, torch.autograd.grad(inner, list(hnet.values()))))
        new, momentum = {}, {}
        for k, p in global_params.items():
            g = grads[k] if k == EMB else grads[k] / len(ids)
            g = g + self.server_weight_decay * p
            buf = self.server_momentum * server_state["momentum"][k] + g
            momentum[k] = buf
            new[k] = p - self.server_lr * buf
        return new, {"momentum": momentum}

    def personal_params(self, protocol: str, global_params: Params, client_state: State) -> Params:
        if protocol != "personal":
            return super().personal_params(protocol, global_params, client_state)
        return {**global_params, EMB: global_params[EMB][client_state["id"]]}
