import pytest
import torch

from fedbench.metrics.calibration import calibration_by_group, calibration_per_client


def test_ece_mce_by_hand():
    # 15 bins of width 1/15. Samples: conf 0.95 (bin 14) x2, one right; conf 0.5 (bin 7) x2, both
    # right; conf 0.2 (bin 2) x1, wrong.
    conf = torch.tensor([0.95, 0.95, 0.5, 0.5, 0.2])
    hit = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0])
    ece, mce = calibration_by_group(conf, hit, torch.zeros(5, dtype=torch.long), 1)
    # bin 14: |0.5 - 0.95| = 0.45 (n=2); bin 7: |1 - 0.5| = 0.5 (n=2); bin 2: |0 - 0.2| = 0.2 (n=1)
    assert ece.item() == pytest.approx((2 * 0.45 + 2 * 0.5 + 0.2) / 5)
    assert mce.item() == pytest.approx(0.5)


def test_bin_edges_upper_inclusive():
    # conf exactly 1/15 belongs to bin 0 (lower < c <= upper); 1.0 to the last bin.
    conf = torch.tensor([1 / 15, 1.0])
    hit = torch.tensor([0.0, 1.0])
    ece, mce = calibration_by_group(conf, hit, torch.tensor([0, 1]), 2)
    assert ece.tolist() == pytest.approx([1 / 15, 0.0])


def test_per_batch_estimator_averages_batches_per_client():
    conf = torch.tensor([0.9, 0.9, 0.9, 0.6, 0.6])
    hit = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0])
    owner = torch.tensor([0, 0, 0, 1, 1])
    ece, mce = calibration_per_client(conf, hit, owner, 2, batch_size=2)
    # client 0: batch [0.9 hit, 0.9 miss] -> |0.5-0.9| = 0.4; batch [0.9 hit] -> 0.1; mean 0.25
    # client 1: batch [0.6 hit, 0.6 miss] -> |0.5-0.6| = 0.1
    assert ece.tolist() == pytest.approx([0.25, 0.1])
    assert mce.tolist() == pytest.approx([0.25, 0.1])
    whole, _ = calibration_per_client(conf, hit, owner, 2)
    assert whole.tolist() == pytest.approx([abs(2 / 3 - 0.9), 0.1])


def test_evaluation_reports_per_client_calibration(tiny):
    from fedbench.engine.evaluate import evaluate_clients_each, evaluate_clients_shared

    fed, apply, p0 = tiny
    shared = evaluate_clients_shared(apply, p0, fed.x, fed.y, fed.test, 7)
    each = evaluate_clients_each(apply, [p0] * fed.num_clients, fed.x, fed.y, fed.test, 7)
    for c, idx in enumerate(fed.test):
        probs = apply(p0, fed.x[idx]).softmax(-1)
        conf, pred = probs.max(-1)
        hit = (pred == fed.y[idx]).float()
        ece, mce = calibration_by_group(conf, hit, torch.zeros(len(idx), dtype=torch.long), 1)
        assert shared["ece"][c] == pytest.approx(ece.item(), abs=1e-6)
        assert each["mce"][c] == pytest.approx(mce.item(), abs=1e-6)
