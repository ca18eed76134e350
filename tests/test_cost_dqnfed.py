"""fedbench.cost on the DQN-Fed grid: a dataset that keeps some classes (`classes`) and a merged
pool whose partition tests each client on its official test rows (`test_split: official`)."""

from __future__ import annotations

from fedbench import cost
from fedbench.config import resolve_run
from fedbench.grid import all_runs, load_grid


def _sizes(catalog, dataset, partition):
    spec = resolve_run(catalog, "paper", dataset, partition, "dqnfed-mlp", "fedavg", 0)
    template = cost._template(spec["dataset"]["source"], cost._freeze(spec["dataset"]["params"]))
    return template.num_classes, cost.run_sizes(spec, template.num_classes)


def test_three_class_clients_on_their_official_test_images(catalog):
    # Fashion-MNIST holds 6,000 training and 1,000 test images per class: classes [0, 2, 6] in
    # one merged pool, one client per class, each tested on its class's official test images
    # (and no global test set: the merge moved it into the pool)
    classes, sizes = _sizes(catalog, "dqnfed-fmnist", "dqnfed-classes")
    assert classes == 3
    assert sizes.train == (6000, 6000, 6000) and sizes.test == (1000, 1000, 1000)
    assert sizes.n_global == 0


def test_classes_without_the_merge_keep_the_official_test_set(catalog):
    # the selection's split: 10 % of each class's 6,000 training images held out; the 3,000
    # official test images of the three classes stay the global test set
    _, sizes = _sizes(catalog, "dqnfed-fmnist-train", "dqnfed-classes-val")
    assert sum(sizes.train) + sum(sizes.test) == 18_000
    assert sizes.test == (600, 600, 600) and sizes.n_global == 3_000


def test_pool_sizes():
    # (training rows, official test rows in the pool, global test set)
    assert cost.pool_sizes("fashion_mnist", {}, None) == (60_000, 0, 10_000)
    assert cost.pool_sizes("fashion_mnist", {}, {"pool": "merged"}) == (60_000, 10_000, 0)
    assert cost.pool_sizes("fashion_mnist", {"classes": [1, 3]}, None) == (12_000, 0, 2_000)


def test_the_other_datasets_of_the_paper(catalog):
    # FEM-orig: 500 LEAF writers; Shakespeare Setup 1 / 2: 31 roles / 20 roles of > 10,000
    # samples (each an entry of its own: LEAF's 1,129 users would be the wrong client count);
    # CINIC-10: train + valid and test merged (270,000 images)
    femnist = cost.nominal("femnist", {"max_clients": 500, "seed": 0})
    assert femnist.clients == 500 and "APPROXIMATION" in femnist.origin
    s1 = {"vocab": "leaf80", "max_clients": 31, "min_samples": 2, "seed": 0}
    s2 = {**s1, "max_clients": 20, "min_samples": 10_001}
    assert len(cost.natural_sizes("leaf_shakespeare", s1)) == 31
    assert cost.natural_sizes("leaf_shakespeare", s2).mean() > 10_000
    assert cost.nominal("leaf_shakespeare").clients == 1_129
    assert cost.pool_sizes("cinic10", {}, {"pool": "merged"}) == (180_000, 90_000, 0)
    assert cost.pool_sizes("cinic10", {"split": "train"}, None) == (90_000, 0, 90_000)


def test_every_dqnfed_run_falls_in_a_cell(catalog):
    grid = load_grid("config/papers/dqnfed.yaml", catalog)
    cells = cost.group_cells(catalog, grid, "paper")
    # chosen rows (B-D13) are costed at their group's first value, before any choice exists
    assert sum(len(c.runs) for c in cells) == len(all_runs(grid, catalog, "paper", "first"))
    table9 = [c for c in cells if c.spec["dataset"]["name"] == "dqnfed-fmnist"]
    assert table9 and {c.sizes.num_clients for c in table9} == {3}
