import math

import pytest
import torch

from fedbench.metrics.coherence import flatten_rows, gce


def test_orthogonal_vectors_have_no_coherence():
    assert gce(torch.eye(4)) == pytest.approx(0.0, abs=1e-12)
    # Orthogonal but of different lengths: the coherence ignores the norms.
    assert gce(torch.diag(torch.tensor([1e-3, 5.0, 1e4]))) == pytest.approx(0.0, abs=1e-12)


def test_parallel_vectors_are_fully_coherent():
    v = torch.tensor([[1.0, 2.0, 3.0], [-2.0, -4.0, -6.0]])
    assert gce(v) == pytest.approx(1.0, abs=1e-12)


def test_two_by_two_by_hand():
    # G = [[1, 1], [1, 2]]: det 1, G_11 G_22 = 2 -> 1 - 1/2.
    assert gce(torch.tensor([[1.0, 0.0], [1.0, 1.0]])) == pytest.approx(0.5)


def test_three_by_three_by_hand():
    # G = [[1, 1, 1], [1, 2, 2], [1, 2, 3]]: det 1, diagonal product 6 -> 1 - 1/6.
    v = torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    assert gce(v) == pytest.approx(5 / 6)
    # Row scales cancel, however extreme (det(G) alone would overflow float64 here).
    assert gce(v * torch.tensor([[1e200], [3.0], [1e-200]], dtype=torch.float64)) == (
        pytest.approx(5 / 6)
    )


def test_more_vectors_than_dimensions_are_dependent():
    assert gce(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])) == 1.0


def test_a_zero_vector_has_no_direction():
    assert math.isnan(gce(torch.tensor([[1.0, 0.0], [0.0, 0.0]])))


def test_flatten_rows_concatenates_each_clients_tensors():
    stacked = {"a": torch.arange(4.0).reshape(2, 2), "b": torch.arange(12.0).reshape(2, 3, 2)}
    rows = flatten_rows(stacked)
    assert rows.shape == (2, 8)
    assert rows[1].tolist() == [2.0, 3.0, *range(6, 12)]
