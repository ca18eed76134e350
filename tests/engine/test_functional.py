import torch

from fedbench.engine.functional import sgd_init, sgd_step, stack_trees, weighted_mean


def test_sgd_step_matches_torch_optim_sgd():
    torch.manual_seed(0)
    p0 = {"a": torch.randn(3, 2), "b": torch.randn(2)}
    grads = [{k: torch.randn_like(v) for k, v in p0.items()} for _ in range(3)]
    ref = {k: torch.nn.Parameter(v.clone()) for k, v in p0.items()}
    opt = torch.optim.SGD(ref.values(), lr=0.1, momentum=0.9, weight_decay=1e-2)
    params, buf = dict(p0), sgd_init(p0)
    for g in grads:
        for k in ref:
            ref[k].grad = g[k].clone()
        opt.step()
        params, buf = sgd_step(params, g, buf, 0.1, 0.9, 1e-2)
    for k in ref:
        torch.testing.assert_close(params[k], ref[k].detach(), rtol=0, atol=1e-6)


def test_weighted_mean_by_hand():
    stacked = stack_trees([{"w": torch.tensor([1.0, 2.0])}, {"w": torch.tensor([3.0, 6.0])}])
    out = weighted_mean(stacked, torch.tensor([1.0, 3.0], dtype=torch.float64))
    # (1*[1,2] + 3*[3,6]) / 4 = [2.5, 5]
    torch.testing.assert_close(out["w"], torch.tensor([2.5, 5.0]))
