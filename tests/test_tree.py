import torch

from fedbench.tree import stack_trees, weighted_mean


def test_weighted_mean_by_hand():
    stacked = stack_trees([{"w": torch.tensor([1.0, 2.0])}, {"w": torch.tensor([3.0, 6.0])}])
    out = weighted_mean(stacked, torch.tensor([1.0, 3.0], dtype=torch.float64))
    # (1*[1,2] + 3*[3,6]) / 4 = [2.5, 5]
    torch.testing.assert_close(out["w"], torch.tensor([2.5, 5.0]))
