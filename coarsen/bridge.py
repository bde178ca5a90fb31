"""What the framework bridges share (``coarsen.torch``, ``coarsen.jax``, ``coarsen.scipy``):
one ``Bridge`` per wrapped function, over the public transforms.

Requires: a plain Python function coarsen differentiates (``coarsen.differentiate``'s input),
``wrt`` as ``differentiate`` takes it, and ``differentiate``'s keyword options.
Guarantees:

* ``load(module, extra)`` imports a framework on first use and returns it; where it is not
  installed, a ``CoarsenError`` that names the extra to install (``pip install
  "coarsen[torch]"``).  Nothing here imports a framework at import time.
* ``Bridge(fn, wrt, options, who)`` builds ``coarsen.differentiate(fn, wrt, **options)`` at
  once (the fence runs now: unsupported syntax is refused when the bridge is made).
  ``bind(args, kwargs)`` binds a call's arguments as ``fn`` binds them (one value per
  parameter); ``wrt_positions(is_float)`` the positions of the parameters to differentiate
  (``wrt=None``: those whose value ``is_float`` says is a float, the rule
  ``differentiate`` applies to the converted values); ``value_and_grad(values)`` is one
  call of the gradient, its gradients always a tuple in ``wrt`` order; ``hvp(values, v)``
  is ``coarsen.hvp`` of the same function (built on first use; ``v`` a tuple in ``wrt`` order,
  the result too), its refusal re-raised as a ``CoarsenError`` that says the second
  derivative is what was refused; ``batch(in_axes)`` is ``g.batch(in_axes)``, kept per
  ``in_axes``, with the same tuple convention.
* ``error(problem, hint)``: a ``CoarsenError`` located at ``fn``'s definition, starting with
  the bridge's name (``who``).
* ``BridgeFunction(bridge, framework)``: the base of the framework's ``F``: ``F.bridge``,
  ``F.gradient`` (the ``differentiate`` gradient it calls), ``__name__`` and ``__doc__`` of
  the function.
* ``Layout``: the flat vector of the ``wrt`` values (raveled, concatenated in ``wrt`` order):
  ``unflatten(x)`` (floats for scalar parameters, arrays shaped like theirs) and
  ``flatten(parts)``.
"""
from __future__ import annotations

import importlib
import inspect
import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .errors import CoarsenError
from .transforms.artifact import bind_arguments, function_error
from .transforms.gradient import differentiate
from .transforms.hessian import hvp

__all__ = ["Bridge", "BridgeFunction", "Layout", "load"]

#: ``differentiate``'s options that ``coarsen.hvp`` also takes (second derivatives)
HVP_OPTIONS = ("target", "boundscheck", "coarsen")


def load(module, extra):
    """``import module`` (the real framework, once per process); ``CoarsenError`` naming the
    extra where it is not installed."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        pip = f'pip install "coarsen[{extra}]"' if extra else f"pip install {module}"
        raise CoarsenError(f"coarsen.{extra or module} needs {module}, which is not installed "
                           f"({exc})", hint=pip) from None


class Bridge:
    """One wrapped function: its gradient, its Hessian-vector products, its batches."""

    def __init__(self, fn, wrt, options, who):
        self.who = who
        self.spec = wrt
        self.options = dict(options)
        self.gradient = differentiate(fn, wrt, **options)
        g = self.gradient
        self.fn, self.params, self.single = g.fn, tuple(g.params), g.returns_single
        self._pysig = inspect.signature(self.fn)
        items = () if wrt is None else (wrt if isinstance(wrt, (tuple, list)) else (wrt,))
        #: the positions ``wrt`` names (None: every float parameter, known per call)
        self.named = None if wrt is None else tuple(
            self.params.index(w) if isinstance(w, str) else int(w) for w in items)
        self._hvp = None
        self._batches = {}

    # ------------------------------------------------------------------ arguments
    def bind(self, args, kwargs):
        """One value per parameter, bound as ``fn`` binds ``args`` and ``kwargs``."""
        if not kwargs and len(args) == len(self.params):
            return args
        return bind_arguments(self.fn, self._pysig, self.params, args, kwargs)

    def wrt_positions(self, values, is_float):
        """The positions of the parameters to differentiate for these values."""
        if self.named is not None:
            return self.named
        return tuple(k for k, a in enumerate(values) if is_float(a))

    def error(self, problem, hint):
        return function_error(self.gradient.src, f"{self.who}: {problem}", hint)

    # ------------------------------------------------------------------ the transforms
    def value_and_grad(self, values):
        """``(value, gradients)``: one call of the gradient; a tuple of gradients always."""
        value, grads = self.gradient.value_and_grad(*values)
        return value, ((grads,) if self.single else grads)

    def hvp(self, values, v):
        """``H v`` (a tuple in ``wrt`` order) by ``coarsen.hvp``; ``v`` a tuple in that order."""
        try:
            if self._hvp is None:
                opts = {k: self.options[k] for k in HVP_OPTIONS if k in self.options}
                self._hvp = hvp(self.fn, self.spec, **opts)
            out = self._hvp(*values, v[0] if self.single else tuple(v))
        except CoarsenError as exc:
            raise self.error(f"second derivatives go through coarsen.hvp, which refuses "
                             f"{self.fn.__name__}: {exc.problem}",
                             exc.hint or "differentiate once, or use coarsen.hvp on a "
                             "function it takes") from exc
        return (out,) if self.single else tuple(out)

    def batch(self, in_axes):
        """``g.batch(in_axes)`` (kept per ``in_axes``) as a function of the values giving
        ``(values, gradients)``, the gradients a tuple."""
        bg = self._batches.get(in_axes)
        if bg is None:
            bg = self._batches[in_axes] = self.gradient.batch(in_axes)
        single = self.single

        def run(values):
            vals, grads = bg(*values)
            return vals, ((grads,) if single else tuple(grads))
        return run


class BridgeFunction:
    """What every bridge's ``F`` has: its ``Bridge`` and the function's name and doc."""

    framework = "a framework"

    def __init__(self, bridge):
        self.bridge = bridge
        self.__name__ = bridge.fn.__name__
        self.__doc__ = f"{bridge.fn.__qualname__} as {self.framework} function, differentiated by coarsen."

    @property
    def gradient(self):
        """The ``coarsen.differentiate`` gradient ``F`` calls."""
        return self.bridge.gradient


@dataclass(frozen=True)
class Layout:
    """The ``wrt`` values as one flat float64 vector, in ``wrt`` order."""
    names: tuple
    shapes: tuple           # () for a float scalar parameter

    @cached_property
    def sizes(self):
        return tuple(math.prod(s) for s in self.shapes)

    @cached_property
    def size(self):
        return sum(self.sizes)

    def unflatten(self, x):
        """The values of ``x`` per parameter: floats for scalars, arrays (views) else."""
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 1 or x.shape[0] != self.size:
            raise CoarsenError(f"x has shape {x.shape}, but the wrt parameters "
                               f"({', '.join(self.names)}) hold {self.size} values",
                               hint=f"pass a 1-D array of {self.size} floats")
        out, at = [], 0
        for shape, n in zip(self.shapes, self.sizes):
            out.append(float(x[at]) if shape == () else x[at:at + n].reshape(shape))
            at += n
        return tuple(out)

    def flatten(self, parts):
        """One float64 vector of ``parts`` (one per parameter), raveled and concatenated."""
        return np.concatenate([np.ravel(np.asarray(p, dtype=np.float64)) for p in parts]) \
            if parts else np.zeros(0)
