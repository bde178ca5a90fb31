"""``coarsen.jacobian``: the Jacobian of a function returning a float scalar, a tuple of float
scalars or a float64 array, by forward-mode columns or reverse-mode rows.

Requires: ``coarsen.transforms.sweeps`` (the compiled drivers), ``coarsen.jvp`` (forward mode, which returns array tangents for array results),
``coarsen.differentiate`` (reverse mode), ``coarsen.transforms.wrappers`` (generated wrapper functions)
and the frontend's lowering and typing (``coarsen.transforms.prepare``), run once per signature to learn
the result's type.
Guarantees:

* ``coarsen.jacobian(fn, wrt=None, mode="auto", *, target="cpu", boundscheck=True, coarsen=True)(*args)``
  returns, for each ``wrt`` parameter (a bare value for one name or position, a tuple in
  ``wrt``'s order for a sequence or ``None``, every float parameter), the array of shape
  ``out.shape + in.shape`` of the partial derivatives (JAX's ``jacobian``): ``J[i..., j...] =
  d out[i...] / d in[j...]``; a float where both are scalars.  For a function returning a
  tuple of ``k`` float scalars, a tuple of ``k`` such results, one per output (JAX's layout).
* ``mode="forward"``: one JVP sweep per input element (the column of a unit tangent; one
  direction per sweep), on the function itself, or for a tuple result on a generated wrapper
  ``np.array([r[0], ..., r[k-1]])``.  ``mode="reverse"``: one gradient sweep per output
  element, of the generated wrapper ``np.sum(fn(...) * _seed)`` (both flattened to the seed's
  size) with ``_seed`` a unit array (a scalar result is differentiated as it stands); the
  result's shape is learned from one plain-Python call of ``fn`` (on copies of the arguments)
  per signature, array shapes, integer and boolean arguments and integer and boolean arrays'
  contents, and learned again when a call finds another size (a float can set it: the
  flattening raises instead of broadcasting a length-1 result against the stale seed); a
  float that changes the shape but not the size is not seen (README: use forward mode).  ``mode="auto"``: forward when the inputs have fewer
  elements than the output, reverse otherwise.  Both modes give the same values to rounding.
  The sweeps of one call run inside one compiled function (``coarsen.transforms.sweeps``: the JVP or the
  row gradient with a driver appended that loops over the unit directions), so Python's
  per-call overhead is paid once per Jacobian; each column or row is what one sweep of the
  JVP or the row gradient gives, bit for bit.  ``parallel=True``: the sweeps in a
  ``numba.prange`` loop on the cpu target (not where the generated code has parallel loops of
  its own), the same numbers, bit for bit.  ``directions=K`` (forward mode): a vector JVP of
  K directions per sweep (``coarsen.jvp(..., directions=K)``), blocks of K columns, the
  primal once per block, each column the single-direction sweep's, bit for bit; its code
  holds K copies of the tangent code, so Numba compiles longer (ADBench's dense BA Jacobian
  at size s, K = 8: 8.4 s to 15.5 s to the first result, cold; 88 us to 73 us per call).
  ``Jacobian(..., directions=K, simd=True)`` (what ``coarsen.hessian`` uses): the vector JVP
  in its SIMD form (``JvpOptions.simd``), the same columns bit for bit; a tangent form the
  rewrite does not know raises ``CoarsenError`` at the first call; not exported.
* Unsupported input raises ``CoarsenError`` (file, line, column, hint) before code is
  generated, as ``jvp`` and ``differentiate`` do; a result that is not float (an integer
  array, a tuple with an array in it) is refused at the first call.  The caller's arrays are
  never modified.
* ``J.source`` (the last call's generated code: the JVP or the row gradient), ``J.mode_used``
  and ``J.report()`` (prints and returns a ``JacobianReport``).
"""
from __future__ import annotations

import io
import math
from dataclasses import dataclass

import numpy as np

from ..ad.forward.pipeline import FORWARD
from ..ad.passes import as_names
from ..ad.reverse.pipeline import REVERSE
from .gradient import differentiate
from .artifact import Signature, resolve_wrt
from ..errors import CoarsenError
from .arguments import check_aliasing, convert_argument, converted, kind_of
from .jvp import JvpOptions, check_directions, compile_jvp, jvp
from ..ir.nodes import Array
from .base import Transform
from .prepare import lower_for, typed_ir
from .report import TransformReport
from .sweeps import driver_module, forward_driver, rows_driver
from .wrappers import array_form, fresh_name, make_wrapper, tuple_length

__all__ = ["Jacobian", "JacobianReport", "jacobian"]

MODES = ("auto", "forward", "reverse")


class _ShapeChanged(Exception):
    """A reverse-mode call found the result's shape changed from the one learned."""


@dataclass
class JacobianReport(TransformReport):
    """What ``Jacobian.report`` shows: the mode, the sweeps, and the inner transform's report."""
    function: str
    mode: str
    sweeps: int
    out_shape: tuple
    in_shapes: tuple
    inner: str

    def format(self):
        what = ("forward mode: one JVP sweep per input element (the column of a unit tangent)"
                if self.mode == "forward" else
                "reverse mode: one gradient sweep per output element (the row of a unit seed)")
        shapes = ", ".join(str(s) for s in self.in_shapes)
        return "\n".join([f"coarsen jacobian of {self.function}: {what}",
                          f"  output shape {self.out_shape}, input shapes {shapes}: "
                          f"{self.sweeps} sweeps", self.inner.rstrip()])


@dataclass(frozen=True)
class SweepProgram:
    """One signature's compiled sweeps: the generated JVP or row gradient with its driver."""
    mode: str               # "forward" or "reverse"
    compiled: object        # ``sweeps.DriverModule``
    module_arrays: tuple    # what the entry takes after the parameters (and the seed)
    written: frozenset      # positions of the parameters the code may write
    source: str             # the generated JVP or gradient (without the driver)
    inner: object           # the ``Jvp`` or row ``Gradient`` that reports on it
    example: tuple          # small arguments of its signature (for its report)
    entry_name: str         # the generated entry's name
    wrt_pos: tuple          # the positions of the differentiated parameters
    ranks: tuple            # their ranks
    result_rank: int        # the result's rank (0: a float)
    parallel: bool          # the driver's columns or rows run in a ``numba.prange`` loop
    lanes: int = 0          # forward mode: directions per call of a vector JVP (0: one)


class Jacobian(Transform):
    """The Jacobian of a function; see ``coarsen.jacobian``."""

    what = "jacobian"

    def __init__(self, fn, wrt=None, mode="auto", target="cpu", boundscheck=True,
                 parallel=False, directions=None, coarsen=True, *, simd=False, disable=()):
        if mode not in MODES:
            raise CoarsenError(f"unknown mode {mode!r}", hint=f"use one of {MODES}")
        # passes switched off: each name is a forward pass (the columns' JVPs), a reverse one
        # (the rows' gradients) or both (``tidy``)
        self.disable_forward, self.disable_reverse = split_disable(disable)
        # checks the target and the number of directions
        check_directions(directions)
        self.directions = JvpOptions(wrt=wrt, target=target, boundscheck=boundscheck,
                                     directions=directions).directions
        if self.directions and parallel:
            raise CoarsenError("coarsen.jacobian takes parallel=True or directions=K, not both",
                               hint="parallel runs single-direction sweeps on several threads; "
                                    "directions runs K directions per sweep on one")
        self._read(fn, wrt)
        self.wrt, self.mode, self.target, self.boundscheck = wrt, mode, target, boundscheck
        self.parallel = bool(parallel)
        # coarse forward mode and coarse row gradients (``coarsen=False``: fine-grained)
        self.coarsen = bool(coarsen)
        # with directions=K: the vector JVP in its SIMD form (``JvpOptions.simd``)
        self.simd = bool(simd) and bool(self.directions)
        self.k = tuple_length(self.src)
        self.array_fn = array_form(self.fn, self.src, self.params, self.k)
        self._fence(self.array_fn)              # the fence runs now
        self._jvps, self._rows, self._results, self._shapes = {}, {}, {}, {}
        self._drivers = {}                      # (mode, wrt, types) -> SweepProgram
        self._kinds = {}                        # arguments.kind_of(args) -> (Signature, wrt)
        self._last = None                       # (mode, inner transform, sweeps, out, ins)
        self._last_signature = None             # the last call's parameters' type texts
        self.__name__ = f"jacobian_{self.fn.__name__}"

    # ------------------------------------------------------------------ pieces
    def _result_type(self, sig):
        """The IR type of ``fn``'s (array-form) result for ``sig`` (a float or float64 array
        checked), from one lowering and typing."""
        rt = self._results.get(sig.types)
        if rt is None:
            low = lower_for(self.array_fn, sig, self.wrt, transform="coarsen.jacobian")
            opts = JvpOptions(target=self.target)
            fn_ir = typed_ir(low.fn_ir, low.types, low.src, opts, transform="coarsen.jacobian",
                             float_arrays=True)
            rt = self._results[sig.types] = fn_ir.types[fn_ir.result]
        return rt

    def _out_shape(self, sig, args):
        """The result's shape: ``()`` for a float, ``(k,)`` for a tuple, else from one
        plain-Python call of ``fn`` on copies of ``args`` per array shapes and integer and
        boolean values (those determine the shapes of a function in coarsen's language)."""
        rt = self._result_type(sig)
        if not isinstance(rt, Array):
            return ()
        if self.k is not None:
            return (self.k,)
        key = self._shape_key(sig, args)
        shape = self._shapes.get(key)
        if shape is None:
            copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
            shape = self._shapes[key] = tuple(np.shape(self.fn(*copies)))
        return shape

    @staticmethod
    def _shape_key(sig, args):
        # an int or bool array's contents too: a result shaped by them keeps its size where
        # (2, 3) becomes (3, 2), which the wrapper's reshape does not catch (a stale layout)
        return (sig.types, tuple((a.shape, a.tobytes() if a.dtype.kind in "biu" else None)
                                 if isinstance(a, np.ndarray) else
                                 a if isinstance(a, (bool, int, np.integer, np.bool_)) else None
                                 for a in args))

    def _jvp(self, wrt):
        j = self._jvps.get(wrt)
        if j is None:
            j = self._jvps[wrt] = jvp(self.array_fn, wrt, target=self.target,
                                      boundscheck=self.boundscheck, coarsen=self.coarsen,
                                      disable=self.disable_forward)
        return j

    def _row_gradient(self, wrt, scalar):
        key = (wrt, scalar)
        g = self._rows.get(key)
        if g is None:
            if scalar:
                g = differentiate(self.fn, wrt=wrt, target=self.target,
                                  boundscheck=self.boundscheck, coarsen=self.coarsen,
                                  disable=self.disable_reverse)
            else:
                taken = set(self.params)
                f, np_ = fresh_name("_f", taken), fresh_name("np", taken)
                seed = fresh_name("_seed", taken)
                call = f"{f}({', '.join(self.params)})"
                row = make_wrapper("jacobian row", f"_row_{self.fn.__name__}",
                                   self.params + [seed],
                                   # both flat, of the seed's size, so that a result whose
                                   # size is not the one learned (it can depend on a float or
                                   # an int array's contents) raises instead of broadcasting
                                   # against the seed (_rows_of learns it again)
                                   [f"return {np_}.sum({np_}.reshape({call}, {seed}.size) * "
                                    f"{np_}.reshape({seed}, {seed}.size))"],
                                   {f: self.array_fn, np_: np},
                                   f"{self.fn.__module__}.{self.fn.__qualname__}")
                g = differentiate(row.fn, wrt=wrt, target=self.target,
                                  boundscheck=self.boundscheck, coarsen=self.coarsen,
                                  disable=self.disable_reverse)
            self._rows[key] = g
        return g

    # ------------------------------------------------------------------ the call
    def __call__(self, *args, **kwargs):
        if kwargs or len(args) != len(self.params):
            args = self._bind(args, kwargs)
        if self._module_arrays:
            self._module_arrays.check()
        kind = kind_of(args)
        hit = self._kinds.get(kind)
        if hit is None:
            sig = Signature.of(self.params, tuple(args), self._global_arrays, self.fn.__name__)
            hit = (sig, resolve_wrt(self.wrt, self.params, sig.types, self.fn.__name__))
            if len(self._kinds) < 64:
                self._kinds[kind] = hit
        sig, wrt = hit
        self._last_signature = sig.texts
        ins = [np.shape(args[self.params.index(w)]) for w in wrt]
        n_in = sum(math.prod(s) for s in ins)
        mode = self.mode
        if mode != "forward":
            out = self._out_shape(sig, args)
            if mode == "auto":
                mode = "forward" if n_in < int(np.prod(out)) else "reverse"
        if n_in == 0 and mode == "forward":
            out = self._out_shape(sig, args)
            J, inner, sweeps = np.zeros((int(np.prod(out)), 0)), None, 0
        elif mode == "forward":
            J, out, inner = self._columns(wrt, sig, args, ins)
            sweeps = n_in
        else:
            try:
                J, inner = self._rows_of(wrt, sig, args, ins, out)
            except _ShapeChanged:
                return self(*args)              # with the result's shape learned again
            sweeps = int(np.prod(out))
        self._last = (mode, inner, sweeps, out, tuple(ins))
        return self.pack(J, out, ins)

    def _driver(self, mode, wrt, sig, args):
        """The ``SweepProgram`` of ``mode`` for ``wrt`` and the signature: the generated JVP
        (forward) or row gradient (reverse) with its sweep driver appended."""
        key = (mode, wrt, sig.types)
        prog = self._drivers.get(key)
        if prog is not None:
            return prog
        ranks = [np.ndim(args[self.params.index(w)]) for w in wrt]
        wrt_pos = [self.params.index(w) for w in wrt]
        name = f"jacobian_{self.fn.__name__}"
        rt = self._result_type(sig)
        result_rank = rt.ndim if isinstance(rt, Array) else 0
        lanes = 0
        if mode == "forward":
            # directions=K: a vector JVP of K directions per call, the primal once per block
            # of K columns
            lanes = self.directions
            art = compile_jvp(self.array_fn, sig, JvpOptions(wrt=wrt, target=self.target,
                                                            boundscheck=self.boundscheck,
                                                            directions=lanes,
                                                            coarsen=self.coarsen,
                                                            simd=self.simd,
                                                            disable=self.disable_forward),
                              module_arrays=self._global_arrays)
            parallel = self._parallel_for(art.source)
            text = forward_driver(art.entry_name, len(self.params), len(art.module_arrays),
                                  wrt_pos, ranks, result_rank, self.target, parallel, lanes)
            compiled = driver_module(art.source, art.entry_name, text, "_jacobian_fwd", name,
                                     self.target)
            written = frozenset(art.written)
            inner = self._jvp(wrt)
            example = tuple(np.zeros((1,) * a.ndim, a.dtype) if isinstance(a, np.ndarray)
                            else a for a in args)
        else:
            g = self._row_gradient(wrt, False)
            seed = np.zeros((1,) * self._result_type(sig).ndim)
            example = tuple(np.zeros((1,) * a.ndim, a.dtype) if isinstance(a, np.ndarray)
                            else a for a in args) + (seed,)
            art = g.specialize(example)
            parallel = self._parallel_for(art.source)
            text = rows_driver(art.entry_name, len(self.params), len(art.module_arrays),
                               wrt_pos, ranks, self.target, parallel)
            compiled = driver_module(art.source, art.entry_name, text, "_jacobian_rev", name,
                                     self.target)
            written = frozenset(k for k in art.written if k < len(self.params))
            inner = g
        prog = self._drivers[key] = SweepProgram(mode, compiled, tuple(art.module_arrays),
                                                 written, art.source, inner, example,
                                                 art.entry_name, tuple(wrt_pos), tuple(ranks),
                                                 result_rank, parallel, lanes)
        return prog

    def _parallel_for(self, source):
        """Sweeps in parallel: asked for, on the cpu target, and not where the generated code
        has parallel loops of its own (Numba does not nest them)."""
        return self.parallel and self.target == "cpu" and "parallel=True" not in source

    def _converted(self, prog, args):
        if prog.written:
            check_aliasing(self.src, self.params, args, (), prog.written)
        return [convert_argument(a) for a in args]

    def _columns(self, wrt, sig, args, ins):
        prog = self._driver("forward", wrt, sig, args)
        J, out = prog.compiled.driver(*self._converted(prog, args), *converted(prog.module_arrays))
        return J, tuple(int(x) for x in out), prog

    def _rows_of(self, wrt, sig, args, ins, out):
        if out == ():
            g = self._row_gradient(wrt, True)
            grads = g(*args)
            J = np.concatenate([np.ravel(x) for x in grads])[None, :]
            return J, g
        prog = self._driver("reverse", wrt, sig, args)
        try:
            J = prog.compiled.driver(*self._converted(prog, args), np.zeros(out),
                                     *converted(prog.module_arrays))
        except ValueError:
            # the result's size is not the learned one: learn it again, from this call
            key = self._shape_key(sig, args)
            self._shapes.pop(key, None)
            if self._out_shape(sig, args) == out:
                raise
            raise _ShapeChanged() from None
        return J, prog

    def pack(self, J, out, ins):
        """JAX's layout of the dense ``(out size, in size)`` matrix ``J`` (``out`` the
        result's shape, ``ins`` the ``wrt`` parameters' shapes): what a call returns."""
        if self.k is None and len(ins) == 1:
            # one wrt parameter (the Hessian's forward over reverse): J itself, reshaped
            b = J.reshape(tuple(out) + tuple(ins[0]))
            b = float(b) if b.ndim == 0 else b
            return b if self._single else (b,)
        starts = np.cumsum([0] + [int(np.prod(s)) for s in ins])

        def layout(rows, oshape):
            res = []
            for p, s in enumerate(ins):
                b = J[rows, starts[p]:starts[p + 1]].reshape(tuple(oshape) + tuple(s))
                res.append(float(b) if b.ndim == 0 else b)
            return res[0] if self._single else tuple(res)

        if self.k is not None:
            return tuple(layout(i, ()) for i in range(self.k))
        return layout(slice(None), out)

    def forward_program(self, args):
        """The forward-mode ``SweepProgram`` (the JVP and its driver) for example ``args``
        and the resolved ``wrt`` (what ``export`` writes)."""
        sig = Signature.of(self.params, tuple(args), self._global_arrays, self.fn.__name__)
        wrt = resolve_wrt(self.wrt, self.params, sig.types, self.fn.__name__)
        return self._driver("forward", wrt, sig, args), wrt

    @property
    def last_signature(self):
        """The last call's parameter types in Numba notation (a tuple of texts), or None."""
        return self._last_signature

    def batch(self, in_axes, *, target=None):
        """Per-set Jacobians over many argument sets, like ``jax.vmap``, each computed in
        forward mode (as ``export`` writes it); see ``coarsen.transforms.batching.sweeps``."""
        from .batching.sweeps import BatchedJacobian
        return BatchedJacobian(self, in_axes, target)

    def export(self, path, signature=None):
        """Write the Jacobian as a standalone module defining ``jacobian_<f>`` (forward mode:
        one JVP sweep per input element, in one compiled function); see
        ``coarsen.transforms.export_sweeps``."""
        from .export_sweeps import export_jacobian
        return export_jacobian(self, path, signature=signature)

    # ------------------------------------------------------------------ inspection
    @property
    def mode_used(self):
        """The mode of the last call (``"forward"`` or ``"reverse"``)."""
        return self._last[0] if self._last else None

    @property
    def source(self):
        if self._last is None:
            raise CoarsenError("the jacobian is specialized on its first call's argument types; "
                               "call it once before reading J.source")
        if self._last[1] is None:
            raise CoarsenError("the last call had no input elements, hence no sweeps and no "
                               "generated code")
        return self._last[1].source

    def _source_for(self, args):
        """The generated code of the call on ``args`` (which it runs)."""
        self(*args)
        return self.source

    def _ir_for(self, args):
        """The IR of the function (its array form: a tuple result made one array)."""
        sig = self._signature(args)
        return self._jvp(resolve_wrt(self.wrt, self.params, sig.types, self.fn.__name__)).ir(*args)

    def _report(self, args):
        """The ``JacobianReport`` of the call on ``args`` (which it runs), default the last."""
        if args is not None:
            self(*args)
        if self._last is None:
            raise CoarsenError("call the jacobian once (or pass example arguments to report) "
                               "before asking for its report")
        mode, inner, sweeps, out, ins = self._last
        buf = io.StringIO()
        if isinstance(inner, SweepProgram):
            inner.inner.report(*inner.example, file=buf)
        elif inner is not None:
            inner.report(file=buf)
        return JacobianReport(self.fn.__qualname__, mode, sweeps, out, ins, buf.getvalue())


def jacobian(fn, wrt=None, mode="auto", *, target="cpu", boundscheck=True, parallel=False,
             directions=None, coarsen=True, disable=()):
    """The Jacobian of ``fn`` (see the module docstring): ``coarsen.jacobian(fn, wrt)(*args)``
    has shape ``out.shape + in.shape`` per ``wrt`` parameter; ``parallel=True`` runs its
    sweeps in parallel on the cpu target; ``directions=K`` runs forward mode's columns K per
    sweep (a vector JVP); ``coarsen=False``: fine-grained sweeps; ``disable``: names of passes
    to switch off, forward-mode ones for the columns, reverse-mode ones for the rows (``tidy``
    names both; an unknown name raises ``CoarsenError``)."""
    return Jacobian(fn, wrt, mode, target, boundscheck, parallel, directions, coarsen,
                    disable=disable)


def split_disable(disable):
    """``disable`` (pass names) as (the forward-mode ones, the reverse-mode ones), frozensets;
    ``CoarsenError`` naming any name that is neither."""
    names = as_names(disable, "name forward-mode or reverse-mode passes")
    forward, reverse = FORWARD.all_names, REVERSE.all_names
    unknown = sorted(n for n in names if n not in forward and n not in reverse)
    if unknown:
        raise CoarsenError(f"unknown pass {', '.join(map(repr, unknown))} in disable",
                           hint=f"the forward passes: {', '.join(forward)}; the reverse "
                                f"passes: {', '.join(reverse)}")
    return (frozenset(n for n in names if n in forward),
            frozenset(n for n in names if n in reverse))
