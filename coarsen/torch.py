"""``coarsen.torch``: a coarsen-differentiated function as one differentiable PyTorch operation.

    F = coarsen.torch.function(loss, wrt=("w", "b"))      # differentiate's options too
    y = F(w, b, X, n)              # w, b tensors; X a tensor or array; n an int
    y.backward()                   # fills w.grad and b.grad

Requires: PyTorch (``pip install "coarsen[torch]"``), imported on the first
``function(...)``, never by ``import coarsen``; inside this module ``torch`` is the real PyTorch.
Guarantees:

* ``function(fn, wrt=None, **options)`` builds ``coarsen.differentiate(fn, wrt, **options)``
  at once (unsupported code is refused then) and returns ``F``.  ``F(*args, **kwargs)`` binds
  its arguments as ``fn`` does.  Any parameter may be a tensor (CPU, strided); the others are
  Python or NumPy values, passed as they are.  ``wrt=None`` differentiates every float
  parameter of the call.
* Conversion: a float64 or float32 tensor is handed to coarsen as a NumPy view (no copy); a 0-d
  tensor as a Python ``float`` (``int`` for integer dtypes); integer and bool tensors as NumPy
  views (coarsen computes with int64).  coarsen computes in float64: float32 arrays are
  converted by coarsen (its one conversion, ``coarsen.transforms.arguments``) and their
  gradients come back as float32.  ``F`` returns a 0-d tensor whose dtype is float32 where
  every float tensor argument is float32, float64 otherwise (PyTorch's promotion of float32 and
  float64, and float64 where no argument is a float tensor); each gradient has its input's
  dtype.
* One coarsen call per ``F`` call: the forward pass runs ``g.value_and_grad`` and keeps the
  gradients, and ``backward`` scales them by the incoming gradient (the inputs are saved with
  ``save_for_backward``, so an in-place change before ``backward`` is an error, not a stale
  gradient).  ``backward`` fills ``.grad`` of the ``wrt`` tensors that require it; a tensor that
  requires grad on a parameter outside ``wrt`` is refused (``CoarsenError``): its gradient would
  silently be zero.
* Second derivatives (``create_graph=True``, ``gradgradcheck``): the gradient returned by
  ``backward`` is itself differentiable, its vector-Jacobian product is a Hessian-vector product
  by ``coarsen.hvp`` of the same function (``differentiate``'s options ``target``,
  ``boundscheck`` and ``coarsen`` carried over).  Where ``coarsen.hvp`` refuses the function
  (forward mode's rules, a JVP program reverse mode cannot read back), the double backward
  raises that refusal as a ``CoarsenError`` saying it is the second derivative.  Second
  derivatives with respect to parameters outside ``wrt`` do not arise: those tensors may not
  require grad.
* Refused with a ``CoarsenError`` naming the parameter and what to pass, before coarsen runs:
  a tensor on another device than the CPU (``.cpu()``; ``g.batch(..., target="cuda")`` is the
  one path that takes device tensors today), a sparse tensor, a float dtype other than float64
  and float32 (float16, bfloat16), a complex tensor, a non-float tensor or value for a ``wrt``
  parameter.
"""
from __future__ import annotations

import numpy as np

from .bridge import Bridge, BridgeFunction, load

__all__ = ["function", "TorchFunction", "check_device"]

_classes = {}


def function(fn, wrt=None, **options):
    """``F``, a differentiable PyTorch function of ``fn``'s arguments (see the module
    docstring); ``options`` are ``coarsen.differentiate``'s."""
    torch = load("torch", "torch")
    return TorchFunction(Bridge(fn, wrt, options, "coarsen.torch.function"), torch)


def check_device(bridge, name, device):
    """``CoarsenError`` where ``device`` (a ``torch.device``) is not the CPU."""
    if device.type != "cpu":
        raise bridge.error(
            f"parameter {name!r} is a tensor on device {str(device)!r}; the function runs on "
            "the CPU", f"pass {name}.cpu() and move the result back with .to(device) (device "
            "tensors are taken by g.batch(..., target='cuda') only, for now)")


class TorchFunction(BridgeFunction):
    """``F`` (see the module docstring)."""

    framework = "a PyTorch"

    def __init__(self, bridge, torch):
        super().__init__(bridge)
        self._torch = torch
        self._apply = _autograd(torch).apply
        self._Tensor, self._strided = torch.Tensor, torch.strided
        self._f64, self._f32 = torch.float64, torch.float32
        self._patterns = {}         # (tensor positions, wrt) -> _Pattern

    def __call__(self, *args, **kwargs):
        bridge, torch = self.bridge, self._torch
        values = bridge.bind(args, kwargs)
        conv = list(values)
        tensors, positions, dtype = [], [], None
        for k, a in enumerate(values):
            if isinstance(a, self._Tensor):
                conv[k], dt = self._numpy(k, a)
                tensors.append(a)
                positions.append(k)
                if dt is not None:
                    dtype = dt if dtype is None or dtype is dt else torch.float64
        positions = tuple(positions)
        wrt = bridge.wrt_positions(conv, _is_float)
        pattern = self._patterns.get((positions, wrt))
        if pattern is None:
            pattern = self._pattern(positions, wrt)
        for i in pattern.others:
            if tensors[i].requires_grad:
                name = bridge.params[positions[i]]
                raise bridge.error(
                    f"the tensor of parameter {name!r} requires grad, but {name!r} is not in "
                    "wrt: its gradient would be zero", f"add {name!r} to wrt, or pass "
                    f"{name}.detach()")
        for k in pattern.untensored:
            if not _is_float(conv[k]):
                self._not_float(k, conv[k])
        return self._apply(_Call(bridge, conv, pattern, dtype or torch.float64), *tensors)

    def _pattern(self, positions, wrt):
        pattern = _Pattern(positions, wrt)
        if len(self._patterns) < 64:
            self._patterns[(positions, wrt)] = pattern
        return pattern

    def _numpy(self, k, a):
        """``(value, float dtype or None)``: the NumPy value coarsen takes for tensor ``a`` of
        parameter ``k`` (a Python number for a 0-d tensor) and its float dtype."""
        dt = a.dtype
        if (dt is self._f64 or dt is self._f32) and a.is_cpu and a.layout is self._strided:
            if a.ndim == 0:
                return a.item(), dt
            return a.numpy(force=True), dt       # a view: detached, CPU, no negative bit
        bridge, torch = self.bridge, self._torch
        name = bridge.params[k]
        if not a.is_cpu:
            check_device(bridge, name, a.device)
        if a.layout is not torch.strided:
            raise bridge.error(f"parameter {name!r} is a {a.layout} tensor",
                               f"pass {name}.to_dense()")
        if a.is_floating_point():
            raise bridge.error(f"parameter {name!r} is a {dt} tensor; coarsen takes float64 "
                               "or float32 (computing in float64)", f"pass {name}.double()")
        if a.is_complex():
            raise bridge.error(f"parameter {name!r} is a complex tensor; coarsen "
                               "differentiates real functions", "pass real tensors")
        if bridge.named is not None and k in bridge.named:
            self._not_float(k, a)
        return (a.item() if a.ndim == 0 else a.numpy(force=True)), None

    def _not_float(self, k, a):
        name = self.bridge.params[k]
        what = f"a {a.dtype} tensor" if isinstance(a, self._torch.Tensor) else \
            f"{type(a).__name__} {a!r}" if np.ndim(a) == 0 else f"an array of {np.asarray(a).dtype}"
        raise self.bridge.error(f"parameter {name!r} is in wrt but got {what}; gradients are "
                                "taken with respect to floats",
                                f"pass a float64 or float32 tensor for {name}")


def _is_float(a):
    """Whether a converted value is a float (differentiated under ``wrt=None``)."""
    return type(a) is float or (isinstance(a, np.ndarray) and a.dtype.kind == "f") \
        or isinstance(a, np.floating)


class _Pattern:
    """What a call's tensor positions and ``wrt`` decide (kept per pair): ``active``, the
    indices among the call's tensors of the ``wrt`` ones, ``slots`` their indices in the
    gradient tuple; ``others`` the indices of the tensors outside ``wrt``; ``untensored`` the
    ``wrt`` positions that got no tensor."""
    __slots__ = ("positions", "wrt", "active", "slots", "others", "untensored")

    def __init__(self, positions, wrt):
        self.positions, self.wrt = positions, wrt
        self.active = tuple(i for i, k in enumerate(positions) if k in wrt)
        self.slots = tuple(wrt.index(positions[i]) for i in self.active)
        self.others = tuple(i for i, k in enumerate(positions) if k not in wrt)
        self.untensored = tuple(k for k in wrt if k not in positions)


class _Call:
    """One call of ``F``: its values, pattern and result dtype; the gradients its forward
    pass computed."""
    __slots__ = ("bridge", "values", "wrt", "dtype", "grads", "active", "slots")

    def __init__(self, bridge, values, pattern, dtype):
        self.bridge, self.values, self.dtype, self.grads = bridge, values, dtype, None
        self.wrt, self.active, self.slots = pattern.wrt, pattern.active, pattern.slots


def _autograd(torch):
    """The ``torch.autograd.Function`` of ``F`` (made once, after importing torch)."""
    got = _classes.get("fn")
    if got is not None:
        return got

    NUMPY = {torch.float64: np.float64, torch.float32: np.float32}

    def as_tensor(g, like):
        t = torch.from_numpy(g if isinstance(g, np.ndarray) else np.array(g))
        return t if t.dtype is like.dtype else t.to(like.dtype)

    class CoarsenFunction(torch.autograd.Function):
        """``F``'s operation: the value forward, the kept gradients backward."""

        @staticmethod
        def forward(ctx, call, *tensors):
            value, grads = call.bridge.value_and_grad(call.values)
            call.grads = grads
            ctx.call = call
            ctx.save_for_backward(*tensors)
            return torch.from_numpy(np.array(value, dtype=NUMPY[call.dtype]))

        @staticmethod
        def backward(ctx, gy):
            call = ctx.call
            tensors = ctx.saved_tensors          # checks the inputs' versions
            out = [None] * (1 + len(tensors))
            if not call.active:
                return tuple(out)
            if torch.is_grad_enabled():
                # create_graph: the gradient as a differentiable function of the inputs
                grads = GradientOf.apply(call, *tensors)
            else:
                grads = [as_tensor(call.grads[s], tensors[i])
                         for i, s in zip(call.active, call.slots)]
            need = ctx.needs_input_grad
            for i, g in zip(call.active, grads):
                if need[1 + i]:
                    out[1 + i] = gy * g
            return tuple(out)

    class GradientOf(torch.autograd.Function):
        """The kept gradients of the ``wrt`` tensors; backward: Hessian-vector products."""

        @staticmethod
        def forward(ctx, call, *tensors):
            ctx.call = call
            ctx.n = len(tensors)
            return tuple(as_tensor(call.grads[s], tensors[i]).clone()
                         for i, s in zip(call.active, call.slots))

        @staticmethod
        def backward(ctx, *gs):
            call = ctx.call
            given = dict(zip(call.slots, gs))
            v = []
            for s, k in enumerate(call.wrt):
                shape = np.shape(call.values[k])
                g = given.get(s)
                if g is None:
                    v.append(0.0 if shape == () else np.zeros(shape))
                else:
                    g = g.detach().to(torch.float64)
                    v.append(g.item() if shape == () else g.numpy())
            hv = call.bridge.hvp(call.values, tuple(v))
            out = [None] * (1 + ctx.n)
            for i, s, g in zip(call.active, call.slots, gs):
                h = torch.from_numpy(np.array(hv[s], dtype=np.float64))
                out[1 + i] = h if g is None else h.to(g.dtype)
            return tuple(out)

    _classes["fn"] = CoarsenFunction
    return CoarsenFunction
