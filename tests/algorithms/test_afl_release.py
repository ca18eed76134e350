"""AFL under partial participation as the AAggFF release runs it (`variant: code`): λ by hand over
two rounds, the release's server update transcribed, agreement of the readings at C = 1, and the
executors."""

import dataclasses

import numpy as np
import pytest
import torch

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import ServerContext
from fedbench.engine.build import Run
from fedbench.engine.functional import make_apply, params_of
from fedbench.engine.loop import run_rounds, sample_clients
from fedbench.engine.train_config import TrainConfig
from fedbench.models import build_model
from fedbench.rng import Streams

CFG = TrainConfig(
    rounds=2, batch_size=4, lr=0.1, local_epochs=1, clients_per_round=3, momentum=0.5,
)  # fmt: skip


def _msgs(deltas, losses):
    d = torch.as_tensor(deltas, dtype=torch.float64)
    return {
        "delta": {"w": d},
        "weight": torch.ones(len(d), dtype=torch.float64),
        "pre_loss": torch.as_tensor(losses, dtype=torch.float64),
    }


def _ctx(ids, K=5, round_=1):
    return ServerContext(round=round_, num_clients=K, client_ids=tuple(ids), lr=0.1)


def test_release_two_rounds_three_of_five_by_hand():
    # K = 5, C = 3/5, γ = 0.1; λ starts at C·1 = 0.6 each (FedavgServer.mix_coefs).
    algo = build_algorithm("afl", gamma=0.1)
    assert algo.variant == "code"
    # Round 1, S = {0, 2, 4}, F = (1, 2, 4): λ_S + γF = (0.7, 0.8, 1.0), sum 2.5; Proj subtracts
    # (2.5 - 1) / 3 = 0.5 -> (0.2, 0.3, 0.5), all positive. Clients 1 and 3 keep 0.6.
    g1, st = algo.aggregate(
        {"w": torch.zeros(1, dtype=torch.float64)},
        _msgs([[1.0], [2.0], [4.0]], [1.0, 2.0, 4.0]),
        {},
        _ctx([0, 2, 4]),
    )
    np.testing.assert_allclose(st["lam"].numpy(), [0.2, 0.6, 0.3, 0.6, 0.5], atol=1e-12)
    # Aggregated with λ_S as projected: 0.2·1 + 0.3·2 + 0.5·4 = 2.8.
    assert g1["w"].item() == pytest.approx(2.8, abs=1e-12)
    # Round 2, S = {1, 2, 3}, F = (4, 0, 1): (0.6 + 0.4, 0.3 + 0, 0.6 + 0.1) = (1.0, 0.3, 0.7),
    # sum 2.0. Sorted (1.0, 0.7, 0.3): 0.3 - (2.0 - 1)/3 < 0, so the threshold is over the top
    # two, (1.7 - 1)/2 = 0.35 -> (0.65, 0, 0.35). Clients 0 and 4 keep their round-1 values.
    g2, st = algo.aggregate(g1, _msgs([[1.0], [2.0], [4.0]], [4.0, 0.0, 1.0]), st, _ctx([1, 2, 3]))
    np.testing.assert_allclose(st["lam"].numpy(), [0.2, 0.65, 0.0, 0.35, 0.5], atol=1e-12)
    assert g2["w"].item() == pytest.approx(2.8 + 0.65 * 1 + 0.0 * 2 + 0.35 * 4, abs=1e-12)

    # The whole-vector reading gives other weights: λ from 1/K = 0.2, g = (1, 0, 2, 0, 4):
    # λ + γg = (0.3, 0.2, 0.4, 0.2, 0.6), sum 1.7, minus 0.14 -> (0.16, 0.06, 0.26, 0.06, 0.46);
    # aggregated renormalised over S: (0.16·1 + 0.26·2 + 0.46·4) / 0.88.
    whole = build_algorithm("afl", gamma=0.1, variant="whole")
    gw, sw = whole.aggregate(
        {"w": torch.zeros(1, dtype=torch.float64)},
        _msgs([[1.0], [2.0], [4.0]], [1.0, 2.0, 4.0]),
        {},
        _ctx([0, 2, 4]),
    )
    np.testing.assert_allclose(sw["lam"].numpy(), [0.16, 0.06, 0.26, 0.06, 0.46], atol=1e-12)
    assert gw["w"].item() == pytest.approx(2.52 / 0.88, abs=1e-12)


def _release_project(v, s=1):
    """src/server/aflserver.py lines 18-36 (AflServer.update's _project), as released."""
    if (v.sum() == s) and (v >= 0).all():
        return v
    N = len(v)
    u = torch.flip(torch.sort(v)[0], dims=(0,))
    cssv = torch.cumsum(u, dim=0)
    nonzero = torch.nonzero(u.mul(torch.arange(1, N + 1)) > (cssv - s), as_tuple=False)
    rho = 0.0 if len(nonzero) == 0 else nonzero[-1].squeeze()
    theta = cssv[rho].sub(s).div(rho.add(1.0))
    return (v.sub(theta)).clamp(min=0)


def _release_round(mix_coefs, selected_ids, losses, fair_const):
    """src/server/aflserver.py lines 73-81: the new mix_coefs and the coefficient map."""
    K = len(mix_coefs)
    local_losses = torch.tensor([losses[i] for i in selected_ids], dtype=mix_coefs.dtype)
    p_new = torch.zeros(K, dtype=mix_coefs.dtype)
    p_new[selected_ids] = mix_coefs[selected_ids].add(local_losses.mul(fair_const))
    p_new[selected_ids] = _release_project(p_new[selected_ids])
    mask = torch.zeros(K, dtype=mix_coefs.dtype)
    mask[selected_ids] = 1
    mix_coefs = p_new.mul(mask).add(mix_coefs.mul(1 - mask))
    return mix_coefs, {i: mix_coefs[i] for i in selected_ids}


def test_matches_the_release_server_transcribed():
    # Six rounds of 3 of 7 clients with random losses and updates; the release's global step is
    # θ - server_lr Σ_i coef_i (θ - θ_i) (FedavgOptimizer.accumulate/step, server_lr 1).
    rng = np.random.default_rng(0)
    K, m, gamma = 7, 3, 0.5
    mix = torch.full((K,), m / K, dtype=torch.float64)  # mix_coefs = C·1 with C = 3/7
    theta_ref = torch.zeros(2, dtype=torch.float64)
    algo = build_algorithm("afl", gamma=gamma)
    glob, state = {"w": torch.zeros(2, dtype=torch.float64)}, {}
    for t in range(1, 7):
        ids = sorted(rng.choice(K, size=m, replace=False).tolist())
        losses = rng.uniform(0.1, 3.0, size=m)
        deltas = rng.normal(size=(m, 2))
        mix, coef = _release_round(mix, ids, dict(zip(ids, losses)), gamma)
        local = {i: theta_ref + torch.as_tensor(d) for i, d in zip(ids, deltas)}
        theta_ref = theta_ref - sum(coef[i] * (theta_ref - local[i]) for i in ids)
        glob, state = algo.aggregate(glob, _msgs(deltas, losses), state, _ctx(ids, K, t))
        np.testing.assert_allclose(state["lam"].numpy(), mix.numpy(), rtol=0, atol=1e-12)
        np.testing.assert_allclose(glob["w"].numpy(), theta_ref.numpy(), rtol=0, atol=1e-12)


def test_readings_agree_with_every_client_sampled():
    # C = 1: Proj(v + c·1) = Proj(v), so starting at 1 (release) or 1/K gives the same λ.
    rng = np.random.default_rng(1)
    K = 4
    states = {v: {} for v in ("code", "whole")}
    globs = {v: {"w": torch.zeros(3, dtype=torch.float64)} for v in states}
    for t in range(1, 4):
        m = _msgs(rng.normal(size=(K, 3)), rng.uniform(0.1, 2.0, size=K))
        for v in states:
            algo = build_algorithm("afl", gamma=0.3, variant=v)
            globs[v], states[v] = algo.aggregate(globs[v], m, states[v], _ctx(range(K), K, t))
        np.testing.assert_allclose(
            states["code"]["lam"].numpy(), states["whole"]["lam"].numpy(), rtol=0, atol=1e-12
        )
        np.testing.assert_allclose(
            globs["code"]["w"].numpy(), globs["whole"]["w"].numpy(), rtol=0, atol=1e-12
        )
    assert not np.allclose(states["code"]["lam"].numpy(), 1 / K)  # λ did move


@pytest.fixture
def five(federation_factory):
    fed = federation_factory(num_clients=5)
    model = build_model("mlp", (6,), 3, init_seed=1, hidden=5)
    return fed, make_apply(model), params_of(model)


def test_run_keeps_unsampled_entries_and_executors_agree(five, assert_executors_agree):
    fed, apply, p0 = five
    fed.train[1] = fed.train[1][:5]  # uneven clients: a short last batch, fewer steps
    algo = build_algorithm("afl", gamma=0.5)
    seq, vec = (
        run_rounds(Run(algo, apply, CFG, p0, executor=ex), fed, Streams(1))
        for ex in ("sequential", "vectorised")
    )
    assert_executors_agree(seq, vec)
    torch.testing.assert_close(seq.server_state["lam"], vec.server_state["lam"], rtol=0, atol=1e-6)
    lam = seq.server_state["lam"].numpy()
    s1, s2 = (set(sample_clients(Streams(1), t, 5, 3)) for t in (1, 2))
    assert (s1, s2) == ({0, 1, 3}, {1, 3, 4})  # 2 never sampled; 1, 3 twice; 4 enters at C
    assert lam[2] == 0.6  # never sampled: C·1, untouched
    assert lam[[1, 3, 4]].sum() == pytest.approx(1.0, abs=1e-12)  # round 2's projection
    # Client 0, sampled in round 1 only, keeps its round-1 value (round 1 of the same run).
    first = (
        run_rounds(
            Run(algo, apply, dataclasses.replace(CFG, rounds=1), p0, executor="sequential"),
            fed,
            Streams(1),
        )
        .server_state["lam"]
        .numpy()
    )
    assert first[[0, 1, 3]].sum() == pytest.approx(1.0, abs=1e-12)
    assert first[2] == first[4] == 0.6
    assert lam[0] == first[0] and lam[0] + lam[1] + lam[3] != pytest.approx(1.0)
    # The whole-vector reading ends elsewhere (its λ sums to 1 over all five clients).
    other = run_rounds(
        Run(
            build_algorithm("afl", gamma=0.5, variant="whole"),
            apply,
            CFG,
            p0,
            executor="sequential",
        ),
        fed,
        Streams(1),
    )
    assert other.server_state["lam"].sum().item() == pytest.approx(1.0, abs=1e-12)
    assert (
        max((other.global_params[k] - seq.global_params[k]).abs().max().item() for k in p0) > 1e-6
    )


def test_run_readings_agree_at_full_participation(five):
    fed, apply, p0 = five
    cfg = dataclasses.replace(CFG, clients_per_round=5)
    runs = [
        run_rounds(Run(build_algorithm("afl", gamma=0.5, variant=v), apply, cfg, p0, "sequential"),
                   fed, Streams(3))
        for v in ("code", "whole")
    ]  # fmt: skip
    for k in p0:
        torch.testing.assert_close(
            runs[0].global_params[k], runs[1].global_params[k], rtol=0, atol=1e-6
        )
    np.testing.assert_allclose(
        runs[0].server_state["lam"].numpy(), runs[1].server_state["lam"].numpy(), atol=1e-12
    )


def test_variant_is_checked():
    with pytest.raises(ValueError, match="variant"):
        build_algorithm("afl", variant="thesis")
