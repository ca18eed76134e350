"""The only round loop: sample, train, aggregate, evaluate, stop on divergence."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import torch

from fedbench.algorithms.base import (
    Algorithm,
    Batch,
    SelectContext,
    ServerContext,
    ServerSetup,
)
from fedbench.algorithms.opt_in import (
    ClientSelection,
    OwnNetwork,
    PersonalEvaluation,
    ServerOutputs,
    opt_in,
)
from fedbench.engine.augment import Augment
from fedbench.engine.batches import batch_plan
from fedbench.engine.build import Run
from fedbench.engine.capabilities import capabilities
from fedbench.engine.evaluate import (
    client_losses,
    evaluate_clients_each,
    evaluate_clients_shared,
    evaluate_global,
)
from fedbench.engine.executors import RoundJob, RoundOutput, SequentialExecutor, client_context
from fedbench.engine.federation import Federation
from fedbench.engine.per_class import per_class_losses
from fedbench.engine.precision import check_device, matmul_scope, with_precision
from fedbench.engine.server_training import ServerNet, server_net, train_server
from fedbench.engine.train_config import TrainConfig
from fedbench.engine.vectorised import VectorisedExecutor
from fedbench.metrics import PACK_STATS, distribution_pack
from fedbench.metrics.names import CLIENT_METRICS, OPTIONAL_METRICS
from fedbench.objectives import CROSS_ENTROPY, build_objective, with_objective
from fedbench.rng import Streams, init_streams
from fedbench.tree import Apply, Params, tree_all_finite, tree_to


@dataclass
class RunState:
    """The evolving state of a run (global model, server and client state)."""

    global_params: Params
    server_state: dict[str, Any]
    client_states: dict[int, dict[str, Any]]
    round: int = 0
    status: str = "ok"
    diverged_round: int | None = None
    records: list[dict[str, Any]] = field(default_factory=list)
    executor_info: dict[str, Any] = field(default_factory=dict)  # how the executor ran (run.yaml)


def sample_clients(streams: Streams, round_: int, num_clients: int, m: int) -> list[int]:
    """Uniformly without replacement, from the run's `sampling` stream keyed by round."""
    rng = streams.generator("sampling", round_)
    return sorted(int(i) for i in rng.choice(num_clients, size=m, replace=False))


def select_clients(
    algo: Algorithm, streams: Streams, round_: int, rounds: int, num_clients: int, m: int, state
) -> list[int]:
    """The round's clients: `sample_clients` unless the algorithm picks its own
    (`ClientSelection.select_clients`, checked: distinct client ids, at least one)."""
    if not capabilities(algo).select_clients:
        return sample_clients(streams, round_, num_clients, m)
    ctx = SelectContext(round_, rounds, num_clients, m, partial(streams.generator, "sampling"))
    ids = sorted(int(i) for i in opt_in(algo, ClientSelection).select_clients(ctx, state))
    if not ids or len(set(ids)) < len(ids) or not 0 <= ids[0] <= ids[-1] < num_clients:
        raise ValueError(f"{algo.name}.select_clients: round {round_} picked {ids}")
    return ids


def labelled(algo: Algorithm, fed: Federation, client_states: dict[int, Any]) -> Federation:
    """The federation whose pool labels carry each client's own training labels
    (`ClientSelection.client_labels`) in its training rows; `fed` itself when none has any."""
    if not capabilities(algo).client_labels:
        return fed
    y = None
    for i in range(fed.num_clients):
        labels = opt_in(algo, ClientSelection).client_labels(client_states[i])
        if labels is None:
            continue
        if labels.shape != fed.train[i].shape:
            raise ValueError(
                f"{algo.name}.client_labels: client {i} has {tuple(labels.shape)} labels for "
                f"{len(fed.train[i])} training samples"
            )
        if y is None:
            y = fed.y.clone()
        y[fed.train[i]] = labels.to(y.device, y.dtype)
    return fed if y is None else dataclasses.replace(fed, y=y)


def _round(v: float) -> float:
    """Fixed precision in the output so files compare byte for byte across identical runs."""
    return float(f"{v:.6g}") if math.isfinite(v) else v


def select_per_client(
    results: list[dict[str, list]], metric: str, by: list[dict[str, list]] | None = None
) -> dict[str, list]:
    """Per client, the candidate with the highest `metric` in `by`, reported from `results`.

    `by` defaults to `results` (chosen on the test split itself: optimistic, and tables say so);
    given, it holds the same candidates on another split (validation). Ties go to the first
    candidate, and so does a client absent from `by` (no validation samples).
    """
    first = results[0]
    scores = [dict(zip(r["ids"], r[metric])) for r in (results if by is None else by)]
    out: dict[str, list] = {"ids": first["ids"], "n": first["n"], "choice": []}
    keys = [k for k in CLIENT_METRICS if all(k in r for r in results)]
    for key in keys:
        out[key] = []
    for j, cid in enumerate(first["ids"]):
        values = [s.get(cid, -math.inf) for s in scores]
        best = max(range(len(values)), key=values.__getitem__)
        out["choice"].append(best)
        for key in keys:
            out[key].append(results[best][key][j])
    return out


def _pack(values: list[float], n: list[int], defined_only: bool = False) -> dict[str, float]:
    """The distribution pack over the clients; `defined_only`: over those whose value is not NaN
    (auroc: a client whose split holds one class has none), every stat NaN when no client has
    one, so a table shows a dash. Other metrics keep a NaN visible in the pack."""
    keep = [j for j, v in enumerate(values) if not (defined_only and math.isnan(v))]
    if not keep:
        return {s: math.nan for s in PACK_STATS}
    if len(keep) < len(values):
        values, n = [values[j] for j in keep], [n[j] for j in keep]
    return {s: _round(v) for s, v in distribution_pack(values, n).items()}


# Key of the `eval` stream's fine-tuning batches (`eval_batches`); the landscape uses 24.
TUNE_KEY = 1
AUGMENT_TEST_KEY = 2  # `eval` stream key of the test-split augmentation draws (augment.test)


def augmented_test_split(
    fed: Federation, aug: Augment, streams: Streams, round_: int
) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
    """The clients' test samples transformed with this evaluation's draws (`eval` stream keyed
    by the round), as (x, y, per-client indices into them); the pool itself is untouched."""
    idx = [t for t in fed.test]
    flat = torch.cat(idx) if idx else torch.zeros(0, dtype=torch.long)
    gen = streams.torch_generator("eval", AUGMENT_TEST_KEY, round_)
    x = aug.apply(fed.x[flat], aug.draw(gen, (len(flat),)))
    bounds = [0, *torch.cumsum(torch.tensor([len(t) for t in idx]), 0).tolist()]
    local = [torch.arange(a, b, device=flat.device) for a, b in zip(bounds, bounds[1:])]
    return x, fed.y[flat], local


def tuning_batches(
    fed: Federation, streams: Streams, round_: int, client: int, count: int, batch_size: int
) -> list[Batch]:
    """`count` training batches of client `client` for evaluation-time fine-tuning: shuffled
    passes over its training split from the `eval` stream keyed by (round, client)."""
    rng = streams.generator("eval", TUNE_KEY, round_, client)
    plan = batch_plan(fed.train[client], batch_size, rng, steps=count)
    w = fed.weight
    return [Batch(fed.x[idx], fed.y[idx], None, None if w is None else w[idx]) for idx in plan]


def bind_applies(
    algo: Algorithm, apply: Apply, fed: Federation, cfg: TrainConfig
) -> tuple[Apply, Apply, Federation]:
    """(training network, evaluation network, federation) of a run: the algorithm's network over
    the forward pass in `training.precision` and in `training.eval_precision` (innermost, so an
    algorithm's own terms, the loss and everything after stay float32), bound to the run's
    objective, and the federation with that objective's row weights. Checks both precisions
    against the data's device and the objective against the algorithm."""
    objective = build_objective(cfg.objective)
    algo.check_objective(objective.name)
    device = fed.x.device
    check_device(cfg.precision, device)
    check_device(cfg.eval_precision, device, "training.eval_precision")

    def bound(precision: str) -> Apply:
        net = opt_in(algo, OwnNetwork).model(with_precision(apply, precision))
        return net if objective.name == CROSS_ENTROPY.name else with_objective(net, objective)

    train_apply = bound(cfg.precision)
    eval_apply = train_apply if cfg.eval_precision == cfg.precision else bound(cfg.eval_precision)
    if objective.name != CROSS_ENTROPY.name:
        fed = dataclasses.replace(fed, weight=objective.row_weights(fed))
    return train_apply, eval_apply, fed


def evaluate_round(
    algo: Algorithm,
    apply: Apply,
    fed: Federation,
    state: RunState,
    cfg: TrainConfig,
    streams: Streams | None = None,
    server_apply: Apply | None = None,
) -> dict[str, Any]:
    """Per-client metrics under every protocol, their distribution packs, the global test set.

    `server_apply`: the server's own network (ServerTraining.server_network), which
    `eval_model` is handed in place of `apply`.

    With a validation split, the candidates of `val_selections` are also evaluated on it,
    to choose each client's protocol there; only the chosen protocol's test metrics are recorded.
    A protocol with `eval_batches(protocol) > 0` fine-tunes each client's parameters on
    that many of its training batches first (drawn from `streams`, which it then needs).
    """
    personal = opt_in(algo, PersonalEvaluation)  # FedAvg's: the global protocol alone
    server = opt_in(algo, ServerOutputs)
    val_candidates = {c for cands, _ in personal.val_selections.values() for c in cands}
    if not fed.val:
        val_candidates = set()
    clients, on_val = {}, {}
    w = fed.weight  # per-row loss weights of a weighting objective (None = unweighted)
    test_split = (fed.x, fed.y, fed.test, w)
    aug = cfg.augment
    if aug is not None and aug.test and aug.random:
        if streams is None:
            raise ValueError("training.augment.test: evaluation needs the run's streams")
        x_aug, y_aug, local = augmented_test_split(fed, aug, streams, state.round)
        test_split = (x_aug, y_aug, local, None if w is None else w[torch.cat(list(fed.test))])
    val_split = (fed.x, fed.y, fed.val, w)
    per_class: dict[str, dict[str, list]] = {}  # training.per_class_loss, final round only
    want_per_class = cfg.per_class_loss and state.round == cfg.rounds

    # What "global" evaluates: the global model, or what the algorithm says stands for it.
    g_apply, g_params = server.eval_model(
        server_apply or apply, state.global_params, state.server_state
    )

    def evaluate(protocol: str, splits: list[tuple]) -> list[dict[str, list]]:
        if protocol == "global":
            return [
                evaluate_clients_shared(
                    g_apply, g_params, x, y, s, cfg.eval_batch_size, cfg.ece_batch, ws
                )
                for x, y, s, ws in splits
            ]
        per_client = [  # built once, evaluated on every split
            personal.personal_params(protocol, state.global_params, state.client_states[i])
            for i in range(fed.num_clients)
        ]
        count = personal.eval_batches(protocol)
        if count > 0:
            if streams is None:
                raise ValueError(f"{algo.name}: protocol {protocol!r} fine-tunes, needs streams")
            per_client = [
                personal.tune_for_eval(
                    protocol,
                    apply,
                    params,
                    tuning_batches(fed, streams, state.round, i, count, cfg.batch_size),
                )
                if len(fed.train[i]) > 0
                else params
                for i, params in enumerate(per_client)
            ]
        if want_per_class:
            res = per_class_losses(
                apply, per_client, *test_split[:3], fed.num_classes, cfg.eval_batch_size
            )
            for key in ("global_loss", "local_loss"):
                res[key] = [[_round(v) for v in row] for row in res[key]]
            per_class[protocol] = res
        return [
            evaluate_clients_each(
                apply, per_client, x, y, s, cfg.eval_batch_size, cfg.ece_batch, ws
            )
            for x, y, s, ws in splits
        ]

    for protocol in ("global", *personal.personal_protocols):
        if protocol in val_candidates:
            clients[protocol], on_val[protocol] = evaluate(protocol, [test_split, val_split])
        else:
            (clients[protocol],) = evaluate(protocol, [test_split])
    for name, (candidates, metric) in personal.selections.items():
        clients[name] = select_per_client([clients[c] for c in candidates], metric)
    if on_val:
        for name, (candidates, metric) in personal.val_selections.items():
            by = [on_val[c] for c in candidates]
            clients[name] = select_per_client([clients[c] for c in candidates], metric, by)
    summary = {}
    for protocol, res in clients.items():
        keys = [k for k in CLIENT_METRICS if k in res]
        for key in keys:
            res[key] = [_round(v) for v in res[key]]
        if res["ids"]:
            summary[protocol] = {
                key: _pack(res[key], res["n"], key in OPTIONAL_METRICS) for key in keys
            }
    # The algorithm's share of the global test set: its first `rows`, the loss's sum over / `den`.
    rows, den = server.global_test_rows(len(fed.y_test), cfg.batch_size, state.server_state)
    glob = evaluate_global(
        g_apply, g_params, fed.x_test[:rows], fed.y_test[:rows], cfg.eval_batch_size
    )
    if glob is not None and den != rows:
        glob["loss"] = glob["loss"] * rows / den
    if glob is not None:
        glob = {k: (_round(v) if k != "n" else v) for k, v in glob.items()}
    out = {"global_test": glob, "clients": clients, "summary": summary}
    if per_class:
        out["per_class_loss"] = per_class
    return out


@dataclass(frozen=True)
class Callbacks:
    """What a caller of `run_rounds` hears of the run (each event optional):
    `on_record(record)` for every metrics record as it is appended (an evaluation round, or the
    round that diverged); `after_round(state, train_loss)` at the end of every round that did
    not diverge (progress, checkpoints, timing stamps)."""

    on_record: Callable[[dict[str, Any]], None] | None = None
    after_round: Callable[[RunState, float], None] | None = None


def run_rounds(
    run: Run,
    fed: Federation,
    streams: Streams,
    callbacks: Callbacks | None = None,
    *,
    resume: RunState | None = None,
    runner: SequentialExecutor | VectorisedExecutor | None = None,
) -> RunState:
    """Train `run` on `fed` for its config's rounds; every evaluation round appends one record.

    `run.executor` overrides the config's executor; `auto` means vectorised here (`build_run`
    resolves `auto` against the model, falling back to sequential where vmap is not exact).
    `run.fresh_init(*key)` gives a new model initialisation keyed by integers: (client,) for a
    client's own model (algorithms with independently initialised local models), (client, round)
    for a client's fresh model of a round (ClientContext.fresh), (K, round) for the server's
    (ServerContext.fresh). `resume` (a checkpoint's state) continues after its round instead of
    initialising. `runner` (from `make_executor`) trains instead of a new executor: the
    benchmarks keep one over their one-round runs so that each times a round as the rounds after
    the first of a real run (kernel paths built, buffers kept).
    """
    algo, apply, cfg, init_params = run.algorithm, run.apply, run.config, run.init_params
    fresh_init, executor = run.fresh_init, run.executor
    callbacks = callbacks or Callbacks()
    on_record, after_round = callbacks.on_record, callbacks.after_round

    def fresh_for(client_id: int) -> Callable[[], Params]:
        def fresh() -> Params:
            if fresh_init is None:
                raise ValueError(f"{algo.name} needs fresh_init to initialise client models")
            return fresh_init(client_id)

        return fresh

    device = fed.x.device
    train_apply, apply, fed = bind_applies(algo, apply, fed, cfg)
    init_params = opt_in(algo, OwnNetwork).init_global(
        init_params,
        lambda i: fresh_for(i)(),
        init_streams(streams, cfg.init_seed).torch_generator("init", 2),
        fed.num_clients,
    )
    runner = runner or make_executor(executor or cfg.executor, cfg)
    K = fed.num_clients
    snet = server_net(algo, tuple(fed.x.shape[1:]), fed.num_classes, device)
    server_apply = None if snet is None else snet.apply
    if resume is not None:
        state = resume
    else:
        state = RunState(
            global_params=dict(init_params),
            server_state=algo.init_server_state(
                init_params,
                ServerSetup(
                    tuple(fed.x.shape[1:]),
                    fed.num_classes,
                    streams.torch_generator("server", 0, device=device),
                    train_apply,
                ),
            ),
            client_states={
                i: tree_to(algo.init_client_state(i, init_params, fresh_for(i)), device)
                for i in range(K)
            },
        )
    m = cfg.sampled_per_round(K)

    def emit(record: dict[str, Any]) -> None:
        state.records.append(record)
        if on_record is not None:
            on_record(record)

    improved: list[float] = []  # training.improved_clients: rho_t of the rounds since a record
    for t in range(state.round + 1, cfg.rounds + 1):
        state.round = t
        lr = cfg.lr_at(t)
        sampled = select_clients(algo, streams, t, cfg.rounds, K, m, state.server_state)
        train_ids = list(range(K)) if algo.train_all_clients else sampled
        fed_t = labelled(algo, fed, state.client_states)  # the labels clients train on
        before = _global_losses(algo, apply, fed_t, cfg, state, sampled, server_apply)
        job = RoundJob(
            algo=algo,
            apply=train_apply,
            fed=fed_t,
            cfg=cfg,
            streams=streams,
            round=t,
            lr=lr,
            global_params=state.global_params,
            server_state=state.server_state,
            client_states=state.client_states,
            client_ids=train_ids,
            pre_losses=_pre_losses(algo, apply, fed_t, cfg, state.global_params, train_ids),
            fresh_init=fresh_init,
        )
        with matmul_scope(cfg.precision, device):
            out = runner.run(job)
        state.client_states.update(out.client_states)
        server = ServerContext(
            round=t,
            num_clients=K,
            client_ids=tuple(sampled),
            lr=lr,
            apply=train_apply,
            rng=streams.torch_generator("server", t, device=device),
            fresh=None if fresh_init is None else partial(fresh_init, K, t),
            rounds=cfg.rounds,
            evaluated=_evaluates(t, cfg),
            test=(fed.x_test, fed.y_test) if len(fed.x_test) else None,
        )
        _aggregate(algo, state, out, train_ids, sampled, server, snet)
        _refresh(algo, state, job)
        if before is not None:
            after = _global_losses(algo, apply, fed_t, cfg, state, sampled, server_apply)
            share = sum(a <= b for a, b in zip(after, before)) / len(before)
            improved.append(_round(share))
        train_loss = float(out.train_losses.mean())
        del out  # the round's messages: the executor may reuse their buffers (DeltaBuffers)
        reason = _divergence(train_loss, state.global_params)
        if reason is not None:
            state.status, state.diverged_round = "diverged", t
            emit({"round": t, "status": "diverged", "reason": reason})
            break
        if _evaluates(t, cfg):
            with matmul_scope(cfg.eval_precision, device):
                record = _eval_record(
                    algo, apply, fed, state, cfg, streams, lr, train_loss, server_apply
                )
            if improved:
                record["improved_clients"] = improved[-1]
                record["improved_clients_rounds"] = improved
                improved = []
            emit(record)
        if after_round is not None:
            after_round(state, train_loss)
    state.executor_info = runner.describe()
    return state


def _evaluates(t: int, cfg: TrainConfig) -> bool:
    """Whether round t ends with an evaluation record (every eval_every rounds and the last)."""
    return t % cfg.eval_every == 0 or t == cfg.rounds


def make_executor(name: str, cfg: TrainConfig) -> SequentialExecutor | VectorisedExecutor:
    """The executor `name` ("sequential" or "vectorised") with the config's settings."""
    if name == "sequential":
        return SequentialExecutor()
    return VectorisedExecutor(cfg.chunk_size, cfg.memory_budget_mb, cfg.conv_kernel)


def _pre_losses(
    algo: Algorithm,
    apply: Apply,
    fed: Federation,
    cfg: TrainConfig,
    global_params: Params,
    train_ids: list[int],
) -> dict[int, float]:
    """Each training client's loss of the global model before training (if the algorithm asks)."""
    if not algo.needs_pre_loss:
        return {}
    losses = client_losses(
        apply,
        global_params,
        fed.x,
        fed.y,
        [fed.train[i] for i in train_ids],
        cfg.eval_batch_size,
        fed.weight,
    )
    return dict(zip(train_ids, losses))


def _global_losses(
    algo: Algorithm,
    apply: Apply,
    fed: Federation,
    cfg: TrainConfig,
    state: RunState,
    clients: list[int],
    server_apply: Apply | None = None,
) -> list[float] | None:
    """training.improved_clients: each of `clients`' full training loss under the model that
    protocol `global` evaluates (None when not asked for)."""
    if not cfg.improved_clients:
        return None
    g_apply, g_params = opt_in(algo, ServerOutputs).eval_model(
        server_apply or apply, state.global_params, state.server_state
    )
    splits = [fed.train[i] for i in clients]
    with torch.no_grad():
        return client_losses(
            g_apply, g_params, fed.x, fed.y, splits, cfg.eval_batch_size, fed.weight
        )


def _aggregate(
    algo: Algorithm,
    state: RunState,
    out: RoundOutput,
    train_ids: list[int],
    sampled: list[int],
    ctx: ServerContext,
    snet: ServerNet | None = None,
) -> None:
    """The server step over the sampled clients' messages (all trained clients' ride along when
    every client trains), then the server's own training (ServerTraining, on `snet` when the
    algorithm names a network of its own); updates the state's global parameters and server
    state."""
    messages = out.messages
    if algo.train_all_clients:
        rows = torch.tensor([train_ids.index(i) for i in sampled])
        messages = _select_rows(messages, rows)
        ctx = dataclasses.replace(ctx, trained_ids=tuple(train_ids), trained=out.messages)
    state.global_params, state.server_state = algo.aggregate(
        state.global_params, messages, state.server_state, ctx
    )
    state.global_params, state.server_state = train_server(
        algo, state.global_params, state.server_state, ctx, snet
    )


def _refresh(algo: Algorithm, state: RunState, job: RoundJob) -> None:
    """After the server step: each client the algorithm names updates its state without
    training (`ClientSelection.refresh_clients` / `refresh_client`), with the round's data."""
    selection = opt_in(algo, ClientSelection)  # FedAvg's refreshes no client
    for cid in selection.refresh_clients(state.server_state, job.round):
        ctx = client_context(job, cid, 0)
        new = selection.refresh_client(
            state.global_params, state.server_state, state.client_states[cid], ctx
        )
        state.client_states[cid] = tree_to(new, job.fed.x.device)


def _divergence(train_loss: float, global_params: Params) -> str | None:
    """Why the run has diverged after this round, or None."""
    if not math.isfinite(train_loss):
        return "non-finite training loss"
    if not tree_all_finite(global_params):
        return "non-finite global parameters"
    return None


def _eval_record(
    algo: Algorithm,
    apply: Apply,
    fed: Federation,
    state: RunState,
    cfg: TrainConfig,
    streams: Streams,
    lr: float,
    train_loss: float,
    server_apply: Apply | None = None,
) -> dict[str, Any]:
    """One metrics.jsonl record: the round, its training loss, every evaluation, server scalars."""
    record = {
        "round": state.round,
        "status": "ok",
        "lr": _round(lr),
        "train_loss": _round(train_loss),
    }
    record.update(evaluate_round(algo, apply, fed, state, cfg, streams, server_apply))
    server = opt_in(algo, ServerOutputs).server_metrics(state.server_state)
    if server:
        record["server"] = {k: _round(float(v)) for k, v in server.items()}
    return record


def _select_rows(messages: dict[str, Any], rows: torch.Tensor) -> dict[str, Any]:
    """Keep the given rows (clients) of stacked messages."""
    out = {}
    for key, v in messages.items():
        if isinstance(v, dict):
            out[key] = {k: t[rows.to(t.device)] for k, t in v.items()}
        else:
            out[key] = v[rows.to(v.device)]
    return out
