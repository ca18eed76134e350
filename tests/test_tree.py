import math

import pytest
import torch

from fedbench.tree import stack_trees, tree_all_finite, weighted_mean


def test_weighted_mean_by_hand():
    stacked = stack_trees([{"w": torch.tensor([1.0, 2.0])}, {"w": torch.tensor([3.0, 6.0])}])
    out = weighted_mean(stacked, torch.tensor([1.0, 3.0], dtype=torch.float64))
    # (1*[1,2] + 3*[3,6]) / 4 = [2.5, 5]
    torch.testing.assert_close(out["w"], torch.tensor([2.5, 5.0]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_all_finite_finds_one_bad_value_anywhere(dtype, bad):
    """The divergence check (aminmax per leaf) against isfinite: one NaN or inf at any place of
    any leaf makes the tree non-finite; a huge finite float64 stays finite."""
    tree = {"a": torch.randn(5, 7).to(dtype), "b": torch.randn(3).to(dtype)}
    assert tree_all_finite(tree)
    for key, leaf in tree.items():
        for i in range(leaf.numel()):
            bad_tree = {k: v.clone() for k, v in tree.items()}
            bad_tree[key].view(-1)[i] = bad
            assert not tree_all_finite(bad_tree), (key, i)
    assert tree_all_finite({"w": torch.tensor([1e300, -1e300], dtype=torch.float64)})


def test_all_finite_other_leaves():
    """Empty and integer leaves are finite; a complex leaf is checked on both parts."""
    assert tree_all_finite({}) and tree_all_finite({"e": torch.zeros(0), "i": torch.arange(4)})
    assert tree_all_finite({"c": torch.tensor([1 + 2j])})
    assert not tree_all_finite({"c": torch.tensor([1 + 2j, complex(0, math.inf)])})
    assert not tree_all_finite({"c": torch.tensor([complex(math.nan, 0)])})
