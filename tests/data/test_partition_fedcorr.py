"""The fedcorr_noniid partitioner: FedCorr's non-IID split (DQN-Fed's Table 12), checked against
the release's util/sampling.py `non_iid_dirichlet_sampling` written out below."""

from __future__ import annotations

import numpy as np
import pytest

from fedbench.config import resolve_partition
from fedbench.data.partition import PARTITIONERS, fedcorr_noniid, make_partition

SPEC = {"kind": "fedcorr_noniid", "num_clients": 8}


def release_split(y_train, num_classes, p, num_users, rs, alpha_dirichlet):
    """The release's function, line for line, with its global np.random (seeded by
    np.random.seed(seed)) replaced by the generator `rs`; also returns Φ and the shares."""
    phi = rs.binomial(1, p, size=(num_users, num_classes))
    n_classes_per_client = np.sum(phi, axis=1)
    while np.min(n_classes_per_client) == 0:
        invalid_idx = np.where(n_classes_per_client == 0)[0]
        phi[invalid_idx] = rs.binomial(1, p, size=(len(invalid_idx), num_classes))
        n_classes_per_client = np.sum(phi, axis=1)
    psi = [list(np.where(phi[:, j] == 1)[0]) for j in range(num_classes)]
    num_clients_per_class = np.array([len(x) for x in psi])
    dict_users, shares = {}, {}
    for class_i in range(num_classes):
        all_idxs = np.where(y_train == class_i)[0]
        p_dirichlet = rs.dirichlet([alpha_dirichlet] * num_clients_per_class[class_i])
        shares[class_i] = dict(zip(psi[class_i], p_dirichlet, strict=True))
        assignment = rs.choice(psi[class_i], size=len(all_idxs), p=p_dirichlet.tolist())
        for client_k in psi[class_i]:
            if client_k in dict_users:
                dict_users[client_k] = set(
                    dict_users[client_k] | set(all_idxs[assignment == client_k])
                )
            else:
                dict_users[client_k] = set(all_idxs[assignment == client_k])
    return dict_users, phi, shares


def pool(n: int = 600, classes: int = 5) -> np.ndarray:
    return np.random.default_rng(99).permutation(np.arange(n) % classes)


@pytest.mark.parametrize("make_rng", [np.random.default_rng, np.random.RandomState])
@pytest.mark.parametrize(("seed", "p", "alpha"), [(0, 0.7, 10.0), (3, 0.3, 0.5), (7, 1.0, 10)])
def test_matches_the_release_draw_for_draw(make_rng, seed, p, alpha):
    labels = pool()
    clients, info = fedcorr_noniid(labels, 8, make_rng(seed), p, alpha)
    ref, phi, _ = release_split(labels, 5, p, 8, make_rng(seed), alpha)
    assert sorted(ref) == list(range(8))  # every client holds a class, so every client is a key
    for k, c in enumerate(clients):
        assert c.dtype == np.int64 and np.all(np.diff(c) > 0)
        assert set(c.tolist()) == ref[k]
        assert info["client_classes"][k] == np.flatnonzero(phi[k]).tolist()


def test_disjoint_covering_and_classes_from_the_presence_row():
    labels = pool()
    clients, info = fedcorr_noniid(labels, 8, np.random.default_rng(1), 0.5, 10.0)
    flat = np.concatenate(clients)
    assert len(flat) == len(np.unique(flat)) == len(labels)  # each sample in exactly one client
    for c, row in zip(clients, info["client_classes"], strict=True):
        assert row and set(labels[c].tolist()) <= set(row)


def test_each_class_is_split_by_its_dirichlet_shares():
    # One big class per client set: the counts are Multinomial(n, q) with the release's q.
    labels = np.repeat(np.arange(3), 20_000)
    clients, _ = fedcorr_noniid(labels, 6, np.random.default_rng(5), 0.7, 2.0)
    _, _, shares = release_split(labels, 3, 0.7, 6, np.random.default_rng(5), 2.0)
    n = 20_000
    for c, q in shares.items():
        assert sum(q.values()) == pytest.approx(1.0)
        for k in range(6):
            got = int((labels[clients[k]] == c).sum())
            if k not in q:
                assert got == 0
                continue
            sd = np.sqrt(n * q[k] * (1 - q[k]))
            assert abs(got - n * q[k]) <= 5 * sd + 1


def test_labels_need_not_be_contiguous():
    labels = np.where(pool() == 2, 9, pool())  # classes 0, 1, 3, 4, 9
    clients, info = fedcorr_noniid(labels, 8, np.random.default_rng(2), 0.7, 10.0)
    ref, _, _ = release_split(
        np.searchsorted([0, 1, 3, 4, 9], labels), 5, 0.7, 8, np.random.default_rng(2), 10.0
    )
    assert [set(c.tolist()) for c in clients] == [ref[k] for k in range(8)]
    assert set().union(*info["client_classes"]) <= {0, 1, 3, 4, 9}


def test_empty_rows_are_drawn_again():
    labels = pool(600, 3)
    clients, info = fedcorr_noniid(labels, 50, np.random.default_rng(0), 0.1, 10.0)
    assert info["redrawn_rows"] > 0  # 0.9^3 of the rows start empty
    assert all(len(row) >= 1 for row in info["client_classes"])
    assert sum(len(c) for c in clients) == len(labels)


def test_a_class_nobody_holds_is_an_error():
    labels = pool(600, 14)
    with pytest.raises(ValueError, match=r"no client drew class.*num_clients or class_prob"):
        fedcorr_noniid(labels, 1, np.random.default_rng(0), 0.05, 10.0)


def test_empty_clients_are_allowed_and_counted():
    # 500 clients on 3,000 samples (the brief's K with a tiny pool): a client's shares may give it
    # no sample, as in the release (an empty set in dict_users).
    labels = np.random.default_rng(0).integers(0, 14, 3_000)
    clients, info = fedcorr_noniid(labels, 500, np.random.default_rng(4), 0.7, 10.0)
    assert len(clients) == 500
    assert info["empty_clients"] == sum(len(c) == 0 for c in clients)
    assert sum(len(c) for c in clients) == 3_000


def test_same_seed_same_split():
    labels = pool()
    part = [make_partition(labels, None, SPEC, np.random.default_rng(s)) for s in (4, 4, 5)]
    assert all(np.array_equal(a, b) for a, b in zip(part[0].train, part[1].train, strict=True))
    assert any(not np.array_equal(a, b) for a, b in zip(part[0].train, part[2].train, strict=True))
    assert part[0].meta["params"] == {"num_clients": 8, "class_prob": 0.7, "alpha": 10.0}


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ({"kind": "fedcorr_noniid"}, "num_clients"),
        ({**SPEC, "p": 0.7}, "'p'"),
        ({**SPEC, "classes_per_client": 10}, "classes_per_client"),
        ({**SPEC, "class_prob": 0.0}, "class_prob"),
        ({**SPEC, "class_prob": 1.5}, "class_prob"),
        ({**SPEC, "class_prob": True}, "class_prob"),
        ({**SPEC, "class_prob": "0.7"}, "class_prob"),
        ({**SPEC, "alpha": 0}, "alpha"),
        ({**SPEC, "alpha": float("inf")}, "alpha"),
        ({**SPEC, "num_clients": 0}, "num_clients"),
        ({**SPEC, "num_clients": 601}, "num_clients"),
    ],
)
def test_bad_keys_and_values_name_the_key(spec, needle):
    with pytest.raises(ValueError, match=needle):
        make_partition(pool(), None, spec, np.random.default_rng(0))


def test_table12_partition_at_smoke_scale(catalog):
    spec = resolve_partition(catalog, "dqnfed-clothing1m-k500", "smoke")
    assert spec["kind"] == "fedcorr_noniid" and "fedcorr_noniid" in PARTITIONERS
    assert (spec["class_prob"], spec["alpha"], spec["num_clients"]) == (0.7, 10.0, 10)
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 14, 800)
    official = np.zeros(800, dtype=bool)
    official[600:] = True
    p = make_partition(labels, None, spec, rng, 14, official_test=official)
    assert len(p.train) == 10
    assert sum(map(len, p.train)) == 600 and sum(map(len, p.test)) == 200
