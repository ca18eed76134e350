"""FedHEAL: FedAvg with both parts off, the direction mask, the distance, the masked average and
the momentum weights by hand over two rounds, bad settings."""

import math

import pytest
import torch

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import ClientContext, ServerContext
from fedbench.algorithms.fedheal import (
    direction_mask,
    fael_weights,
    masked_average,
    update_distance,
)
from fedbench.engine.build import Run
from fedbench.engine.loop import run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.rng import Streams

CFG = dict(rounds=3, batch_size=4, lr=0.1, local_epochs=2, clients_per_round=3, momentum=0.9)


def _ctx(cid=0, round_=1, n=10):
    return ClientContext(cid, round_, 0.1, 10, num_train=n, num_steps=1)


def _sctx(ids, K=3, round_=1):
    return ServerContext(round=round_, num_clients=K, client_ids=tuple(ids), lr=0.1)


def _t(*v):
    return torch.tensor(v, dtype=torch.float32)


def test_without_mask_and_fair_weights_fedheal_is_fedavg_bit_for_bit(tiny):
    fed, apply, p0 = tiny
    cfg = TrainConfig(**CFG)
    runs = [
        run_rounds(Run(algo, apply, cfg, p0), fed, Streams(5))
        for algo in (
            build_algorithm("fedavg"),
            build_algorithm("fedheal", consistency_mask=False, fair_weights=False),
        )
    ]
    for k, v in runs[0].global_params.items():
        assert torch.equal(runs[1].global_params[k], v), k


def test_the_full_algorithm_moves_away_from_fedavg(tiny):
    fed, apply, p0 = tiny
    cfg = TrainConfig(**CFG)
    avg = run_rounds(Run(build_algorithm("fedavg"), apply, cfg, p0), fed, Streams(5))
    heal = run_rounds(Run(build_algorithm("fedheal"), apply, cfg, p0), fed, Streams(5))
    flat = [torch.cat([r.global_params[k].flatten() for k in sorted(p0)]) for r in (avg, heal)]
    assert torch.isfinite(flat[1]).all() and not torch.allclose(*flat)
    # Every client took part once at least: its direction history is a share in [0, 1].
    for state in heal.client_states.values():
        for h in state["history"].values():
            assert ((h >= 0) & (h <= 1)).all()


def test_direction_mask_by_hand_over_three_rounds():
    # Round 1: everything kept; history = 1[δ ≤ 0] (the release's u = θ - θ_k ≥ 0, zero included).
    mask, h = direction_mask({"w": _t(0.5, -0.2, 0.0, 0.3)}, None, 0, 0.5)
    assert mask["w"].tolist() == [1, 1, 1, 1] and h["w"].tolist() == [0, 1, 1, 0]
    # Round 2: down = [0, 0, 1, 1]; agreement with the one earlier round = [1, 0, 1, 0];
    # kept where > τ = 0.5; history = (h·1 + down) / 2.
    mask, h = direction_mask({"w": _t(0.1, 0.4, -0.3, -0.2)}, h, 1, 0.5)
    assert mask["w"].tolist() == [1, 0, 1, 0] and h["w"].tolist() == [0, 0.5, 1, 0.5]
    # Round 3: down = [0, 1, 0, 1]; agreement = [1, 0.5, 0, 0.5]: τ = 0.3 keeps [1, 1, 0, 1],
    # τ = 0.5 keeps only the first (strictly greater, as the release).
    d3 = {"w": _t(0.2, -0.1, 0.1, -0.4)}
    assert direction_mask(d3, h, 2, 0.3)[0]["w"].tolist() == [1, 1, 0, 1]
    mask, h3 = direction_mask(d3, h, 2, 0.5)
    assert mask["w"].tolist() == [1, 0, 0, 0]
    torch.testing.assert_close(h3["w"], _t(0, 2 / 3, 2 / 3, 2 / 3))


@pytest.mark.parametrize("count, expected", [("participations", 1), ("rounds", 4)])
def test_client_end_masks_the_upload_and_counts_its_history(count, expected):
    algo = build_algorithm("fedheal", threshold=0.5, history_count=count)
    g = {"a": _t(0, 0), "b": _t(0)}
    # First seen at round 3: everything kept, distance = ‖(3, -4)‖ + ‖(12)‖ = 17.
    msg, state = algo.client_end(g, {"a": _t(3, -4), "b": _t(12)}, {}, {}, _ctx(round_=3))
    assert msg["distance"] == pytest.approx(17.0) and msg["weight"] == 10.0
    assert msg["mask"]["a"].tolist() == [1, 1] and state["count"] == 1
    # Round 5: a flips (masked), b agrees; the history's weight is the earlier rounds counted.
    msg, state = algo.client_end(g, {"a": _t(-1, -2), "b": _t(5)}, {}, state, _ctx(round_=5))
    assert msg["mask"]["a"].tolist() == [0, 1] and msg["mask"]["b"].tolist() == [1]
    assert msg["delta"]["a"].tolist() == [0, -2] and msg["distance"] == pytest.approx(2 + 5)
    assert state["history"]["a"].tolist() == pytest.approx([1 / (expected + 1), 1.0])


def test_distance_forms_by_hand():
    up = {"a": _t(3, 4), "b": _t(0, 5)}
    assert update_distance(up, "layer_sum") == pytest.approx(10.0)  # 5 + 5: the release
    assert update_distance(up, "l2") == pytest.approx(math.sqrt(50))


def test_fael_weights_by_hand_over_two_rounds():
    # K = 3, M = 2, β = 0.5. Round 1, clients (0, 1), d = (1, 3): Σd = 4, Δp = 0.5·(1/4, 3/4),
    # p = 1/2 + Δp = (5/8, 7/8), w = (5/12, 7/12).
    w, s = fael_weights(torch.tensor([1.0, 3.0]), (0, 1), 3, {}, 0.5)
    torch.testing.assert_close(w, torch.tensor([5 / 12, 7 / 12], dtype=torch.float64))
    # Round 2, clients (1, 2), d = (1, 2). `seen`: Σd over every client's latest distance =
    # 1 (client 0, stale) + 1 + 2 = 4. Δp_1 = 0.5·3/8 + 0.5·1/4 = 5/16, p_1 = 7/8 + 5/16 =
    # 19/16; Δp_2 = 0.5·2/4 = 1/4, p_2 = 1/2 + 1/4 = 12/16; w = (19/31, 12/31).
    w2, s2 = fael_weights(torch.tensor([1.0, 2.0]), (1, 2), 3, s, 0.5)
    torch.testing.assert_close(w2, torch.tensor([19 / 31, 12 / 31], dtype=torch.float64))
    assert s2["p"].tolist() == pytest.approx([5 / 8, 19 / 16, 3 / 4])
    # `round`: Σd = 3 this round: Δp_1 = 3/16 + 1/6, Δp_2 = 1/3.
    w3, _ = fael_weights(torch.tensor([1.0, 2.0]), (1, 2), 3, s, 0.5, total="round")
    p1, p2 = 7 / 8 + 3 / 16 + 1 / 6, 1 / 2 + 1 / 3
    assert w3.tolist() == pytest.approx([p1 / (p1 + p2), p2 / (p1 + p2)])
    # β = 0: no distance information enters; the weights stay uniform.
    w0, _ = fael_weights(torch.tensor([1.0, 3.0]), (0, 1), 3, {}, 0.0)
    assert w0.tolist() == [0.5, 0.5]


def test_masked_average_by_hand():
    # w = (1/4, 3/4); coordinate 0 kept by both: (2/4 + 18/4) = 5; coordinate 1 by client 0
    # only: its own 4; coordinate 2 by none: 0.
    deltas = {"w": torch.tensor([[2.0, 4.0, 0.0], [6.0, 0.0, 0.0]])}
    masks = {"w": torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])}
    out = masked_average(deltas, masks, torch.tensor([0.25, 0.75], dtype=torch.float64))
    assert out["w"].tolist() == [5.0, 4.0, 0.0]


def test_aggregate_combines_weights_and_masks_over_two_rounds():
    algo = build_algorithm("fedheal", beta=0.5)
    g = {"w": _t(1.0, 1.0)}

    def msgs(deltas, masks, dist):
        return {
            "delta": {"w": torch.tensor(deltas)},
            "mask": {"w": torch.tensor(masks)},
            "distance": torch.tensor(dist, dtype=torch.float64),
            "weight": torch.tensor([10.0, 10.0], dtype=torch.float64),
        }

    # Round 1: w = (5/12, 7/12) (d = 1, 3); coordinate 1 kept by client 1 only.
    m1 = msgs([[1.0, 0.0], [3.0, 3.0]], [[1.0, 0.0], [1.0, 1.0]], [1.0, 3.0])
    g1, s1 = algo.aggregate(g, m1, {}, _sctx((0, 1)))
    assert g1["w"].tolist() == pytest.approx([1 + 5 / 12 + 3 * 7 / 12, 1 + 3])
    # Round 2, clients (1, 2): w = (19/31, 12/31) (d = 1, 2, client 0's 1 still counted).
    m2 = msgs([[1.0, 0.0], [2.0, 0.0]], [[1.0, 0.0], [1.0, 0.0]], [1.0, 2.0])
    g2, _ = algo.aggregate(g1, m2, s1, _sctx((1, 2), round_=2))
    assert g2["w"].tolist() == pytest.approx([g1["w"][0].item() + 43 / 31, 4.0])


@pytest.mark.parametrize(
    "params, key",
    [
        ({"threshold": 1.0}, "threshold"),
        ({"threshold": -0.1}, "threshold"),
        ({"beta": 1.5}, "beta"),
        ({"history_count": "epochs"}, "history_count"),
        ({"distance": "l1"}, "distance"),
        ({"distance_total": "all"}, "distance_total"),
        ({"tau": 0.3}, "tau"),
    ],
)
def test_bad_settings_name_their_key(params, key):
    with pytest.raises(ValueError, match=key):
        build_algorithm("fedheal", **params)
