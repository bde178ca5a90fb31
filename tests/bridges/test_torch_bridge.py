"""``coarsen.torch.function`` with the real PyTorch (CPU build): gradcheck and gradgradcheck
through torch operations before and after ``F``, ``.backward()``, float32, an ``nn.Linear``
feeding a coarsen-differentiated ODE integrator (a ``while`` stopping rule) whose loss falls,
and every refusal the bridge makes."""
import math

import numpy as np
import pytest
import torch

import coarsen
from apps.bench.bridges import ode_batch_loss as ode_loss     # the model the harness times
from coarsen.torch import check_device


def poly_sin(x, a, n):
    s = 0.0
    for i in range(n):
        s = s + a * math.sin(x[i]) * x[i] ** 2
    return s


@coarsen.custom_vjp
def softclip(x):
    return math.tanh(x)


def softclip_fwd(x):
    t = math.tanh(x)
    return t, t


def softclip_bwd(t, g):
    return (g * (1.0 - t * t),)


softclip.defvjp(softclip_fwd, softclip_bwd)


def clipped(x):
    s = 0.0
    for i in range(x.shape[0]):
        s = s + softclip(x[i]) ** 2
    return s


@pytest.fixture(scope="module")
def F():
    return coarsen.torch.function(poly_sin, wrt=("x", "a"))


def _inputs(dtype=torch.float64):
    x = torch.linspace(0.1, 1.0, 5, dtype=dtype).requires_grad_()
    a = torch.tensor(1.3, dtype=dtype).requires_grad_()
    return x, a


def test_value_and_backward_match_coarsen(F):
    x, a = _inputs()
    y = F(x, a, 5)
    assert y.dim() == 0 and y.dtype == torch.float64 and y.requires_grad
    y.backward()
    value, (gx, ga) = F.gradient.value_and_grad(x.detach().numpy(), 1.3, 5)
    assert y.item() == value == poly_sin(x.detach().numpy(), 1.3, 5)
    np.testing.assert_array_equal(x.grad.numpy(), gx)
    assert a.grad.item() == ga
    # keywords bind as the function binds them
    assert F(x, n=5, a=a).item() == value


def test_gradcheck_and_gradgradcheck_through_torch_ops(F):
    x, a = _inputs()

    def G(x, a):
        return torch.exp(F(torch.tanh(x) * 2.0, a * a, 5)) * 0.3 + (x ** 2).sum()

    assert torch.autograd.gradcheck(G, (x, a))
    # second derivatives through coarsen.hvp
    assert torch.autograd.gradgradcheck(G, (x, a))


def test_float32_is_computed_in_float64():
    F = coarsen.torch.function(poly_sin, wrt="x")
    x64, _ = _inputs()
    x32 = x64.detach().float().requires_grad_()
    y = F(x32, 1.3, 5)
    y.backward()
    assert y.dtype == torch.float32 and x32.grad.dtype == torch.float32
    value, gx = F.gradient.value_and_grad(x32.detach().numpy().astype(np.float64), 1.3, 5)
    assert y.item() == np.float32(value)
    np.testing.assert_array_equal(x32.grad.numpy(), gx.astype(np.float32))
    # a float64 tensor among the arguments makes the value float64
    assert F(x32, torch.tensor(1.3, dtype=torch.float64), 5).dtype == torch.float64


def test_nn_linear_feeding_an_ode_integrator_trains():
    torch.manual_seed(0)
    F = coarsen.torch.function(ode_loss, wrt="k")
    feats = torch.rand(8, 3, dtype=torch.float64)
    y0 = np.linspace(0.5, 1.5, 8)
    true_k = (feats @ torch.tensor([0.5, 1.0, -0.3], dtype=torch.float64) + 1.0).numpy()
    target = np.array([_final(kb, y, 1.0, 0.05) for kb, y in zip(true_k, y0)])
    model = torch.nn.Linear(3, 1).double()
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    losses = []
    for _ in range(6):
        opt.zero_grad()
        loss = F(model(feats).squeeze(1), y0, target, 1.0, 0.05)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert all(b < a for a, b in zip(losses, losses[1:])), losses
    assert losses[-1] < 0.5 * losses[0]
    assert model.weight.grad is not None and model.bias.grad is not None


def _final(k, y, t_end, h):
    t = 0.0
    while t < t_end:
        y = y + h * (-k * y + math.sin(t))
        t = t + h
    return y


def test_refusals(F):
    x, a = _inputs()
    with pytest.raises(coarsen.CoarsenError, match="requires grad, but 'n' is not in wrt") as e:
        F(x, a, torch.tensor(5.0, requires_grad=True))
    assert e.value.hint and "detach" in e.value.hint
    F1 = coarsen.torch.function(poly_sin, wrt="x")
    with pytest.raises(coarsen.CoarsenError, match="'a' is not in wrt"):
        F1(x, a, 5)
    with pytest.raises(coarsen.CoarsenError, match="torch.float16"):
        F(x.detach().half(), a, 5)
    with pytest.raises(coarsen.CoarsenError, match="torch.bfloat16"):
        F(x.detach().bfloat16(), a, 5)
    with pytest.raises(coarsen.CoarsenError, match="complex"):
        F(x.detach().to(torch.complex128), a, 5)
    with pytest.raises(coarsen.CoarsenError, match="'x' is in wrt but got a torch.int64 tensor"):
        F(torch.arange(5), a, 5)
    with pytest.raises(coarsen.CoarsenError, match="'a' is in wrt but got int"):
        F(x, 2, 5)
    with pytest.raises(coarsen.CoarsenError, match="device 'meta'") as e:
        F(torch.empty(5, dtype=torch.float64, device="meta"), a, 5)
    assert ".cpu()" in e.value.hint
    with pytest.raises(coarsen.CoarsenError, match="device 'cuda:0'"):
        check_device(F.bridge, "x", torch.device("cuda:0"))
    check_device(F.bridge, "x", torch.device("cpu"))
    with pytest.raises(coarsen.CoarsenError, match="sparse"):
        F(x.detach().to_sparse(), a, 5)
    # an in-place change between forward and backward: PyTorch's version check
    w = torch.linspace(0.1, 1.0, 5, dtype=torch.float64).requires_grad_()
    z = w * 1.0
    y = F(z, a, 5)
    with torch.no_grad():
        z.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_second_derivative_refused_where_hvp_refuses():
    G = coarsen.torch.function(clipped, wrt="x")
    x = torch.tensor([0.3, 0.5], dtype=torch.float64, requires_grad=True)
    y = G(x)
    (gx,) = torch.autograd.grad(y, x, create_graph=True)
    np.testing.assert_allclose(gx.detach().numpy(), 2 * np.tanh([0.3, 0.5]) / np.cosh([0.3, 0.5]) ** 2,
                               rtol=1e-14)
    with pytest.raises(coarsen.CoarsenError, match="second derivatives go through coarsen.hvp") as e:
        gx.sum().backward()
    assert "custom_vjp" in str(e.value)


def test_python_target_and_tensor_loop_count(F):
    Fp = coarsen.torch.function(poly_sin, wrt=("x", "a"), target="python")
    x, a = _inputs()
    Fp(x, a, torch.tensor(5)).backward()        # a 0-d integer tensor is an int
    value, (gx, ga) = F.gradient.value_and_grad(x.detach().numpy(), 1.3, 5)
    np.testing.assert_allclose(x.grad.numpy(), gx, rtol=1e-14)
    assert a.grad.item() == pytest.approx(ga, rel=1e-14)
