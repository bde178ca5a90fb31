"""``coarsen.jax``: a coarsen-differentiated function as one JAX function, reverse-differentiable.

    F = coarsen.jax.function(loss, wrt=("w", "b"))       # differentiate's options too
    value, (dw, db) = jax.jit(jax.value_and_grad(F, argnums=(0, 1)))(w, b, X, n)

Requires: JAX (``pip install "coarsen[jax]"``), imported on the first ``function(...)``, never
by ``import coarsen``; inside this module ``jax`` is the real JAX.
Guarantees:

* ``function(fn, wrt=None, **options)`` builds ``coarsen.differentiate(fn, wrt, **options)`` at
  once and returns ``F``, built on ``jax.custom_vjp`` and ``jax.pure_callback``.  ``F(*args,
  **kwargs)`` binds its arguments as ``fn`` does and returns a 0-d JAX array.  It works eagerly
  and under ``jax.jit``, ``jax.grad``, ``jax.value_and_grad`` and ``jax.vmap`` (any
  composition of them).  ``wrt=None`` differentiates every float parameter of the call.
* Arguments: float values (JAX arrays, tracers, NumPy float arrays, Python floats) and integer
  arrays travel through JAX (traced under ``jit``); a Python or NumPy integer or bool scalar is
  static: it is closed over, never traced.  coarsen's integer scalars (loop counts, sizes,
  indices) must be concrete: a traced integer scalar (a loop count passed as an argument of a
  jitted function) is refused with a ``CoarsenError`` saying to mark it static
  (``static_argnums``) or close over it.  This is JAX's own rule for loop bounds under reverse
  mode, and it keeps a loop count out of ``vmap``'s batch.
* dtypes: coarsen computes in float64.  The value has the dtype JAX gives the float arguments
  together (``jnp.result_type``: float32 without ``jax_enable_x64``), each gradient its input's
  dtype.  float16, bfloat16 and complex values are refused (``CoarsenError``).
* Differentiation: ``jax.grad`` and ``jax.value_and_grad`` take one coarsen call
  (``g.value_and_grad``) in the forward pass and scale its gradients in the backward pass.
  Differentiating with respect to a float argument outside ``wrt`` is refused at trace time
  (``CoarsenError``; ``custom_vjp``'s ``symbolic_zeros`` says which inputs are perturbed):
  its gradient would silently be zero.
* ``jax.vmap`` goes through coarsen's own batch (``g.batch``, one compiled ``prange`` driver
  over the examples): the callback is vectorized (``vmap_method="expand_dims"``), so it gets
  the batched arguments whole; arguments with a batch axis are batched (``in_axes`` 0), the
  others shared (``None``), except that a ``wrt`` argument without one is repeated along the
  batch, since under ``vmap`` its gradient is per example (coarsen's batch sums shared
  gradients).  Nested ``vmap`` flattens the batch axes.
* Forward mode is not supported: ``jax.jvp``, ``jax.jacfwd``, ``jax.linearize`` of ``F`` raise
  JAX's ``TypeError`` ("can't apply forward-mode autodiff (jvp) to a custom_vjp function"):
  a function has either a custom VJP or a custom JVP in JAX, and reverse mode is what a
  training loop needs.  For forward mode, call ``coarsen.jvp`` on the NumPy values.
* Second derivatives (``jax.grad`` of ``jax.grad``, ``jax.hessian``) are refused at trace time
  with a ``CoarsenError`` that points at ``coarsen.hvp`` and ``coarsen.hessian``.
"""
from __future__ import annotations

import math

import numpy as np

from .bridge import Bridge, BridgeFunction, load

__all__ = ["function", "JaxFunction"]

#: static (closed-over) patterns kept per ``F``: beyond it, a new core per call
MAX_CORES = 64


def function(fn, wrt=None, **options):
    """``F``, a JAX function of ``fn``'s arguments (see the module docstring); ``options``
    are ``coarsen.differentiate``'s."""
    jax = load("jax", "jax")
    return JaxFunction(Bridge(fn, wrt, options, "coarsen.jax.function"), jax)


class JaxFunction(BridgeFunction):
    """``F`` (see the module docstring)."""

    framework = "a JAX"

    def __init__(self, bridge, jax):
        super().__init__(bridge)
        self._jax = jax
        self._cores = {}

    def __call__(self, *args, **kwargs):
        bridge = self.bridge
        values = bridge.bind(args, kwargs)
        statics, dynamic, dyn = [], [], []
        for k, a in enumerate(values):
            kind = self._kind(k, a)
            if kind == "static":
                statics.append((k, a.item() if isinstance(a, np.generic) else a))
            else:
                dynamic.append(k)
                dyn.append(a)
        wrt = bridge.wrt_positions(values, lambda a: self._kind(-1, a) == "float")
        for k in wrt:
            if k not in dynamic or self._kind(k, values[k]) != "float":
                name = bridge.params[k]
                raise bridge.error(f"parameter {name!r} is in wrt but got "
                                   f"{type(values[k]).__name__} {values[k]!r}",
                                   f"pass a float value for {name}")
        key = (tuple(statics), tuple(dynamic), wrt)
        core = self._cores.get(key)
        if core is None:
            core = _core(self._jax, bridge, dict(statics), tuple(dynamic), wrt)
            if len(self._cores) < MAX_CORES:
                self._cores[key] = core
        return core(*dyn)

    def _kind(self, k, a):
        """``"float"``, ``"int"`` (an integer array, traced) or ``"static"``; refuses what
        coarsen cannot take from JAX (``k``: the parameter, -1 when only asking)."""
        if isinstance(a, (bool, int, np.integer, np.bool_)):
            return "static"
        if isinstance(a, (float, np.floating)):
            return "float"
        if not hasattr(a, "dtype") or not hasattr(a, "shape"):
            return "static"
        dtype = np.dtype(a.dtype)
        if dtype.kind == "f":
            if dtype not in (np.float32, np.float64) and k >= 0:
                raise self.bridge.error(f"parameter {self.bridge.params[k]!r} is {dtype}; "
                                        "coarsen takes float64 or float32 (computing in "
                                        "float64)", "pass it as jnp.float32 or jnp.float64")
            return "float"
        if dtype.kind in "iub":
            if a.ndim == 0 and k >= 0:
                return self._static_int(k, a)
            return "int"
        if k >= 0:
            raise self.bridge.error(f"parameter {self.bridge.params[k]!r} has dtype {dtype}; "
                                    "coarsen differentiates real functions",
                                    "pass float or integer values")
        return "static"

    def _static_int(self, k, a):
        """A 0-d integer array must be concrete: its value is static."""
        try:
            int(a)
        except (self._jax.errors.ConcretizationTypeError,
                self._jax.errors.TracerIntegerConversionError):
            name = self.bridge.params[k]
            raise self.bridge.error(
                f"parameter {name!r} is a traced integer ({a.dtype}[]), but coarsen needs its "
                "value when it traces (a loop count, a size or an index is static)",
                f"pass {name} as a Python int: mark it static (jax.jit(f, static_argnums=...)) "
                "or close over it") from None
        return "static"


def _core(jax, bridge, statics, dynamic, wrt):
    """The ``custom_vjp`` function of the dynamic arguments for one pattern of statics."""
    jnp = jax.numpy
    CustomZero = jax.custom_derivatives.SymbolicZero
    n = len(bridge.params)
    active = tuple(i for i, k in enumerate(dynamic) if k in wrt)
    slots = tuple(wrt.index(dynamic[i]) for i in active)

    def values_of(dyn):
        """The values coarsen takes: statics and the host arrays of one example."""
        values = [None] * n
        for k, a in statics.items():
            values[k] = a
        for k, a in zip(dynamic, dyn):
            values[k] = float(a) if a.ndim == 0 and a.dtype.kind == "f" else a
        return values

    def host(shapes, out_dtype, grad_dtypes, with_grads):
        def run(*dyn):
            dyn = [np.asarray(a) for a in dyn]
            lead = [a.shape[:a.ndim - len(s)] for a, s in zip(dyn, shapes)]
            if not any(lead):
                value, grads = bridge.value_and_grad(values_of(dyn))
                value = np.asarray(value, out_dtype)
                if not with_grads:
                    return value
                return value, tuple(np.asarray(grads[s], grad_dtypes[j])
                                    for j, s in enumerate(slots))
            return batched(dyn, lead, shapes, out_dtype, grad_dtypes, with_grads)
        return run

    def batched(dyn, lead, shapes, out_dtype, grad_dtypes, with_grads):
        """The vectorized callback: coarsen's batch over the flattened batch axes."""
        full = np.broadcast_shapes(*lead)
        size = math.prod(full)
        per, in_axes = [], [None] * n
        for k, a, lead_k, s in zip(dynamic, dyn, lead, shapes):
            if lead_k == full or k in wrt:
                a = np.broadcast_to(a.reshape(lead_k + (1,) * (len(full) - len(lead_k)) + s)
                                    if len(lead_k) < len(full) else a, full + s)
                per.append(np.ascontiguousarray(a).reshape((size,) + s))
                in_axes[k] = 0
            else:
                per.append(a.reshape(s))
        values = [None] * n
        for k, a in statics.items():
            values[k] = a
        for k, a in zip(dynamic, per):
            values[k] = float(a) if a.ndim == 0 and a.dtype.kind == "f" else a
        vals, grads = bridge.batch(tuple(in_axes))(values)
        value = np.asarray(vals, out_dtype).reshape(full)
        if not with_grads:
            return value
        return value, tuple(np.asarray(grads[s], grad_dtypes[j]).reshape(full + shapes[active[j]])
                            for j, s in enumerate(slots))

    def call(dyn, with_grads):
        shapes = tuple(tuple(np.shape(a)) for a in dyn)
        floats = [a for i, a in enumerate(dyn) if jnp.issubdtype(jnp.result_type(a), jnp.floating)]
        out_dtype = jnp.result_type(*floats) if floats else jnp.result_type(float)
        grad_dtypes = tuple(jnp.result_type(dyn[i]) for i in active)
        out = jax.ShapeDtypeStruct((), out_dtype)
        if with_grads:
            out = (out, tuple(jax.ShapeDtypeStruct(shapes[i], d)
                              for i, d in zip(active, grad_dtypes)))
        return jax.pure_callback(host(shapes, out_dtype, grad_dtypes, with_grads), out, *dyn,
                                 vmap_method="expand_dims")

    @jax.custom_jvp
    def value_and_grads(*dyn):
        return call(dyn, True)

    @value_and_grads.defjvp
    def _second_order(primals, tangents):
        raise bridge.error("second derivatives (jax.grad of jax.grad, jax.hessian) of a "
                           "coarsen.jax function are not supported",
                           "use coarsen.hvp or coarsen.hessian on the NumPy values")

    @jax.custom_vjp
    def core(*dyn):
        return call(dyn, False)

    def fwd(*prims):
        for i, p in enumerate(prims):
            if p.perturbed and i not in active:
                name = bridge.params[dynamic[i]]
                raise bridge.error(f"{name!r} is differentiated by JAX, but it is not in wrt: "
                                   "its gradient would be zero",
                                   f"add {name!r} to wrt, or leave it out of argnums")
        value, grads = value_and_grads(*[p.value for p in prims])
        return value, grads

    def bwd(grads, gy):
        out = [None] * len(dynamic)
        if not isinstance(gy, CustomZero):
            for i, g in zip(active, grads):
                out[i] = (gy * g).astype(g.dtype)
        return tuple(out)

    core.defvjp(fwd, bwd, symbolic_zeros=True)
    # jit-ed: an eager call runs the traced callback (about 30 ms a call re-traced otherwise);
    # inside a caller's jit, grad or vmap it is inlined
    return jax.jit(core)
