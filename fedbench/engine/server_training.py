"""The server's own training (the `ServerTraining` capability): the network it trains, built
once per run, and the fit of a round's `ServerFit`, the one optimiser loop on the server side."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from fedbench.algorithms.base import Algorithm, ServerContext, State
from fedbench.algorithms.opt_in import ServerFit, ServerTraining, opt_in
from fedbench.engine.functional import make_apply, params_of
from fedbench.models import build_model
from fedbench.tree import Apply, Params


@dataclass(frozen=True)
class ServerNet:
    """The network a server trains that is not the run's: its forward and its initialisation."""

    apply: Apply
    arch: str
    input_shape: tuple[int, ...]
    num_classes: int
    params: dict[str, object]
    device: torch.device

    def init(self, seed: int) -> Params:
        """The network's parameters initialised with `seed` (the model registry's rule)."""
        return params_of(self._build(seed))

    def _build(self, seed: int) -> torch.nn.Module:
        model = build_model(self.arch, self.input_shape, self.num_classes, seed, **self.params)
        return model.to(self.device)


def server_net(
    algo: Algorithm, input_shape: tuple[int, ...], num_classes: int, device: torch.device
) -> ServerNet | None:
    """The server's own network of `algo` for the run's data (None: it trains the run's, or
    nothing); its structure is built once, with seed 0, and called with given parameters."""
    spec = opt_in(algo, ServerTraining).server_network()
    if spec is None:
        return None
    shape, params = tuple(input_shape), dict(spec.params)
    model = build_model(spec.arch, shape, num_classes, 0, **params).to(device)
    return ServerNet(make_apply(model), spec.arch, shape, num_classes, params, device)


def fit(task: ServerFit, apply: Apply, init: Params, rng: torch.Generator) -> Params:
    """`task`'s training from `init` (the release's server classifier: fedevgserver.py,
    fedcganserver.py, fedcvaeserver.py `_central_evaluate`): `epochs` shuffled passes (orders
    from `rng`) of `batch` rows of (x, y), Adam(lr) with torch's defaults otherwise,
    cross-entropy."""
    x, y = task.x, task.y
    leaves = {k: v.detach().clone().requires_grad_(True) for k, v in init.items()}
    opt = torch.optim.Adam(list(leaves.values()), lr=task.lr)
    with torch.enable_grad():
        for _ in range(task.epochs):
            order = torch.randperm(len(x), generator=rng, device=rng.device)
            for start in range(0, len(x), task.batch):
                idx = order[start : start + task.batch].to(x.device)
                loss = F.cross_entropy(apply(leaves, x[idx]).float(), y[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
    return {k: v.detach() for k, v in leaves.items()}


def train_server(
    algo: Algorithm,
    global_params: Params,
    server_state: State,
    ctx: ServerContext,
    net: ServerNet | None,
) -> tuple[Params, State]:
    """After `aggregate`: the algorithm's `server_fit` of the round, fitted on its network (the
    run's, `ctx.apply`, unless `net`), and handed back through `server_fitted`."""
    training = opt_in(algo, ServerTraining)
    task = training.server_fit(global_params, server_state, ctx)
    if task is None:
        return global_params, server_state
    if ctx.rng is None:
        raise ValueError(f"{algo.name}: the server's training needs ServerContext.rng")
    if net is None:
        if task.init is None or ctx.apply is None:
            raise ValueError(
                f"{algo.name}: a fit of the run's network needs ServerFit.init and "
                "ServerContext.apply"
            )
        apply, init = ctx.apply, task.init
    else:
        if task.init is None and task.seed is None:
            raise ValueError(f"{algo.name}: ServerFit needs `init` or `seed`")
        apply = net.apply
        init = task.init if task.init is not None else net.init(task.seed)
    params = fit(task, apply, init, ctx.rng)
    new_global, state = training.server_fitted(task, params, server_state, ctx)
    return (global_params if new_global is None else new_global), state
