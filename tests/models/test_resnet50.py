"""ResNet-50 for Table 12: torchvision's network; pretrained weights read from the torch cache,
never downloaded (a clear error without them); tests write their own weight file."""

import pytest
import torch
import torchvision

from fedbench.models import build_model


def test_pretrained_weights_are_read_from_the_torch_cache_only(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.hub, "get_dir", lambda: str(tmp_path))
    with pytest.raises(ValueError) as err:
        build_model("resnet50", (3, 32, 32), 14, init_seed=0)
    path = tmp_path / "checkpoints" / "resnet50-0676ba61.pth"
    assert str(path) in str(err.value) and "download.pytorch.org" in str(err.value)
    # a weight file of torchvision's layout (random weights, written here) is loaded as is
    ref = torchvision.models.resnet50()
    path.parent.mkdir()
    torch.save(ref.state_dict(), path)
    net = build_model("resnet50", (3, 32, 32), 14, init_seed=0)
    assert torch.equal(net.body[0].weight, ref.conv1.weight)
    assert torch.equal(net.body[7][2].conv3.weight, ref.layer4[2].conv3.weight)
    assert net.head.weight.shape == (14, 2048)
    # BatchNorm on batch statistics: no running buffers a forward pass could write
    assert not any("running" in name for name, _ in net.named_buffers())


def test_a_shrunk_network_for_smoke_runs_and_its_refusals():
    net = build_model("resnet50", (3, 16, 16), 14, 0, pretrained=False, layers=[1, 1, 1, 1], base=4)
    assert net(torch.rand(2, 3, 16, 16)).shape == (2, 14)
    assert sum(p.numel() for p in net.parameters()) < 100_000
    with pytest.raises(ValueError, match="pretrained"):
        build_model("resnet50", (3, 16, 16), 14, 0, layers=[1, 1, 1, 1])
    with pytest.raises(ValueError, match="base"):
        build_model("resnet50", (3, 16, 16), 14, 0, pretrained=False, base=0)
