import socket
import urllib.request

import numpy as np
import pytest
import torch

from fedbench.metrics import fid as fid_module
from fedbench.metrics.fid import (
    PROXY_LABEL,
    FeatureExtractor,
    code_sample_sizes,
    feature_stats,
    fid,
    frechet_distance,
    inception_features,
    proxy_features,
)


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Any download or socket connection in these tests fails loudly and is recorded."""
    calls = []

    def refuse(*args, **kwargs):
        calls.append(args)
        raise AssertionError(f"network access attempted: {args!r}")

    monkeypatch.setattr(torch.hub, "load_state_dict_from_url", refuse)
    monkeypatch.setattr(torch.hub, "download_url_to_file", refuse)
    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    yield calls
    assert calls == []


def _spd(rng, d):
    a = rng.normal(size=(d, d))
    return a @ a.T + d * np.eye(d)


def _rotation(rng, d):
    q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    return q


def test_identical_statistics_give_zero():
    rng = np.random.default_rng(0)
    mu, sigma = rng.normal(size=16), _spd(rng, 16)
    assert abs(frechet_distance(mu, sigma, mu, sigma)) <= 1e-6 * np.trace(sigma)


def test_mean_shift_with_same_covariance_is_squared_distance():
    rng = np.random.default_rng(1)
    mu, sigma, shift = rng.normal(size=8), _spd(rng, 8), rng.normal(size=8)
    got = frechet_distance(mu, sigma, mu + shift, sigma)
    assert got == pytest.approx(shift @ shift, rel=1e-6)


def test_diagonal_gaussians_closed_form():
    rng = np.random.default_rng(2)
    s1, s2 = rng.uniform(0.5, 3.0, size=6), rng.uniform(0.5, 3.0, size=6)
    mu1, mu2 = rng.normal(size=6), rng.normal(size=6)
    expected = np.sum(s1 + s2 - 2 * np.sqrt(s1 * s2)) + np.sum((mu1 - mu2) ** 2)
    got = frechet_distance(mu1, np.diag(s1), mu2, np.diag(s2))
    assert got == pytest.approx(expected, rel=1e-9)
    # The same Gaussians in a rotated basis: the covariances are full but commute.
    q = _rotation(rng, 6)
    got = frechet_distance(q @ mu1, q @ np.diag(s1) @ q.T, q @ mu2, q @ np.diag(s2) @ q.T)
    assert got == pytest.approx(expected, rel=1e-8)


def test_sample_statistics_recover_closed_form():
    rng = np.random.default_rng(3)
    d, n = 4, 200_000
    q = _rotation(rng, d)
    s1, s2 = np.array([1.0, 2.0, 0.5, 3.0]), np.array([2.0, 0.5, 1.5, 1.0])
    mu1, mu2 = np.zeros(d), np.array([1.0, -0.5, 0.0, 2.0])
    expected = np.sum(s1 + s2 - 2 * np.sqrt(s1 * s2)) + np.sum((mu1 - mu2) ** 2)
    x1 = rng.multivariate_normal(mu1, q @ np.diag(s1) @ q.T, size=n)
    x2 = rng.multivariate_normal(mu2, q @ np.diag(s2) @ q.T, size=n)
    m1, c1 = feature_stats(x1)
    m2, c2 = feature_stats(x2)
    assert frechet_distance(m1, c1, m2, c2) == pytest.approx(expected, rel=0.03)


def test_feature_stats_match_numpy_cov():
    x = np.random.default_rng(4).normal(size=(10, 3))
    mu, sigma = feature_stats(torch.from_numpy(x).float())
    assert mu.dtype == np.float64 and sigma.shape == (3, 3)
    np.testing.assert_allclose(sigma, np.cov(x.astype(np.float32), rowvar=False), rtol=1e-5)
    with pytest.raises(ValueError, match="at least 2"):
        feature_stats(x[:1])


def test_non_finite_sqrtm_retries_with_eps(monkeypatch):
    real_sqrtm = fid_module.scipy.linalg.sqrtm
    seen = []

    def flaky(a):
        seen.append(a.copy())
        return np.full_like(a, np.nan) if len(seen) == 1 else real_sqrtm(a)

    monkeypatch.setattr(fid_module.scipy.linalg, "sqrtm", flaky)
    sigma = np.diag([1.0, 4.0])
    with pytest.warns(RuntimeWarning, match="not finite"):
        got = frechet_distance(np.zeros(2), sigma, np.zeros(2), sigma)
    np.testing.assert_allclose(seen[1], (sigma + 1e-6 * np.eye(2)) @ (sigma + 1e-6 * np.eye(2)))
    assert got == pytest.approx(-4e-6, abs=1e-9)  # 2*Tr(sigma) - 2*Tr(sigma + eps*I)


def test_complex_sqrtm_real_part_or_error(monkeypatch):
    sigma = np.eye(2)
    small = np.eye(2) + 1e-5j * np.eye(2)
    monkeypatch.setattr(fid_module.scipy.linalg, "sqrtm", lambda a: small)
    assert frechet_distance(np.zeros(2), sigma, np.zeros(2), sigma) == pytest.approx(0.0)
    monkeypatch.setattr(fid_module.scipy.linalg, "sqrtm", lambda a: np.eye(2) + 0.1j * np.eye(2))
    with pytest.raises(ValueError, match="imaginary"):
        frechet_distance(np.zeros(2), sigma, np.zeros(2), sigma)


class Recorder:
    """Records what it is given; features are a few raw pixels (enough for a covariance)."""

    name = "recorder"

    def __init__(self):
        self.seen = []

    def __call__(self, images):
        self.seen.append(images.clone())
        return images.flatten(1)[:, :3]


def _images(n, c=1, seed=0):
    return torch.rand(n, c, 4, 4, generator=torch.Generator().manual_seed(seed))


def test_code_mode_takes_first_128_real_and_maps_them_to_minus_one_one():
    syn, real = _images(100, seed=1), _images(300, seed=2)
    rec = Recorder()
    result = fid(syn, real, "code", extractor=rec)
    got_syn, got_real = rec.seen
    assert torch.equal(got_syn, syn)  # all M synthetic, left in [0, 1]
    assert torch.equal(got_real, real[:128] * 2 - 1)
    assert (result.n_synthetic, result.n_real) == (100, 128)
    assert result.mode == "code" and not result.comparable and result.label == PROXY_LABEL


def test_code_sample_sizes_follow_the_release_zip_of_batch_64_loaders():
    for m in (70, 100, 110, 128):
        assert code_sample_sizes(m, 10_000) == (m, 128)
    assert code_sample_sizes(40, 10_000) == (40, 64)
    assert code_sample_sizes(100, 50) == (64, 50)


def test_standard_mode_uses_all_real_with_the_same_scaling():
    syn, real = _images(100, c=3, seed=3), _images(300, c=3, seed=4)
    rec = Recorder()
    result = fid(syn, real, "standard", extractor=rec)
    got_syn, got_real = rec.seen
    assert torch.equal(got_syn, syn * 2 - 1) and torch.equal(got_real, real * 2 - 1)
    assert (result.n_synthetic, result.n_real) == (100, 300)
    assert any("biased" in n for n in result.notes) and not result.comparable


@pytest.mark.filterwarnings("ignore:Matrix is singular")  # 20 images, 64-d: rank-deficient
def test_proxy_result_is_labelled_not_comparable():
    ext = proxy_features(seed=0)
    assert isinstance(ext, FeatureExtractor)
    syn, real = _images(20, c=3, seed=5), _images(40, c=3, seed=6)
    result = fid(syn, real, "code", extractor=ext)
    assert result.label == "FID-proxy, not comparable to Tables 4.4/4.5"
    assert not result.comparable and np.isfinite(result.value) and result.value >= 0
    assert result.to_dict()["label"] == PROXY_LABEL
    again = fid(syn, real, "code", extractor=proxy_features(seed=0))
    assert again.value == result.value
    assert fid(syn, syn, "standard", extractor=ext).value == pytest.approx(0.0, abs=1e-6)


def test_invalid_inputs_raise():
    rec, a = Recorder(), _images(4)
    with pytest.raises(ValueError, match=r"fid\.mode.*'code', 'standard'.*'paper'"):
        fid(a, a, "paper", extractor=rec)
    with pytest.raises(ValueError, match="synthetic set"):
        fid(torch.empty(0, 1, 4, 4), a, extractor=rec)
    with pytest.raises(ValueError, match="real set"):
        fid(a, torch.empty(0, 1, 4, 4), extractor=rec)
    with pytest.raises(ValueError, match="channels"):
        fid(a, _images(4, c=3), extractor=rec)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        fid(a * 2 - 1, a, extractor=rec)
    assert rec.seen == []


def test_missing_inception_weights_name_the_path_and_the_fix(monkeypatch, tmp_path):
    monkeypatch.setattr(torch.hub, "get_dir", lambda: str(tmp_path / "hub"))
    expected = tmp_path / "hub" / "checkpoints" / "inception_v3_google-0cc3c7bd.pth"
    with pytest.raises(FileNotFoundError) as info:
        inception_features()
    message = str(info.value)
    assert str(expected) in message
    assert "torchvision.models.inception_v3(weights='IMAGENET1K_V1')" in message
    assert "fid.weights" in message
    with pytest.raises(FileNotFoundError, match="elsewhere.pth"):
        inception_features(tmp_path / "elsewhere.pth")


def test_inception_features_read_the_given_file(tmp_path):
    from torchvision.models import inception_v3

    model = inception_v3(weights=None, aux_logits=True, init_weights=False)
    state = model.state_dict()
    marker = torch.full_like(state["Conv2d_1a_3x3.conv.weight"], 0.01)
    state["Conv2d_1a_3x3.conv.weight"] = marker
    path = tmp_path / "inception.pth"
    torch.save(state, path)
    ext = inception_features(path, batch_size=1)
    assert torch.equal(ext.net[0].conv.weight, marker)
    assert not ext.net.training and not ext.reference
    images = _images(2, c=1, seed=7)  # gray 4x4 -> RGB 299x299
    feats = ext(images)
    assert feats.shape == (2, 2048) and torch.isfinite(feats).all()
    # The same as torchvision's own forward up to its average pool (no transform_input).
    pooled = []
    model.load_state_dict(state)
    model.eval().avgpool.register_forward_hook(lambda m, i, o: pooled.append(o.flatten(1)))
    with torch.no_grad():
        x = torch.nn.functional.interpolate(
            images.repeat(1, 3, 1, 1), size=(299, 299), mode="bilinear", align_corners=False
        )
        model(x)
    torch.testing.assert_close(feats, pooled[0])
