"""``coarsen.hessian`` and ``coarsen.hvp``: second derivatives of a float-scalar function, by
forward mode over the generated gradient (forward over reverse, the Hessian's first choice)
or reverse mode over the generated forward-mode program (reverse over forward).

Forward over reverse (``Hessian``, ``method="auto"`` or ``"forward-over-reverse"``): the
gradient of ``fn`` generated for the python target without index checks is read back as a
program (``coarsen.transforms.gradient_program``: no tape, ``wrt`` floats or float64 arrays (several:
packed into one flat array), no runtime helpers, no parallel loops, no module-level arrays) and ``coarsen.jacobian`` of it, forward
mode with K directions per sweep, is the Hessian: each sweep runs the gradient once with K
tangent lanes.  On the cpu target the vector JVP is first asked for in its SIMD form
(``JvpOptions.simd``: each float tangent K lanes in vector registers, array tangents
lane-last; K from ``simd_lanes``), else (a tangent form the rewrite refuses, or the python
target) ``LANES`` unrolled scalar lanes; both give the same Hessian, bit for bit (each lane
is the single-direction JVP's column).  Where the gradient is not such a program, ``"auto"`` falls
back to reverse over forward (the report says why) and ``"forward-over-reverse"`` raises
``CoarsenError`` with the reason at the first call; ``parallel=True`` means reverse over
forward.  ``h.method_used`` names the last call's method.  The rest of this docstring is
reverse over forward's, which ``hvp``, ``batch`` and ``export`` always use.

Requires: ``coarsen.transforms.jvp.compile_jvp`` (the JVP program of ``fn``, generated for the
python target without index checks: plain Python in coarsen's input language),
``coarsen.differentiate`` (reverse mode, coarse by default), ``coarsen.transforms.wrappers`` and
``coarsen.transforms.sweeps``.
Guarantees:

* For each signature of argument types, the JVP ``jvp_<f>(args..., tangents...)`` of ``fn``
  is generated once, and a generated wrapper ``_hvp_<f>(args..., _v_<w>...)`` returns its
  tangent, ``grad f(args) . v``; ``coarsen.differentiate`` of that wrapper with respect to the
  ``wrt`` parameters reads the JVP's source like any user helper (it is inlined), so the
  gradient of the directional derivative, ``H v``, is one reverse sweep over the primal and
  tangent code, planned, coarsened and compiled like any gradient.  No second-order engine:
  both transforms are the first-order ones.
* ``coarsen.hvp(fn, wrt=None, *, target="cpu", boundscheck=True, coarsen=True)(*args, v)``
  returns ``H v`` shaped like the gradient (a bare value for one ``wrt`` name or position, a
  tuple for ``None`` or a sequence); ``v`` is shaped like the ``wrt`` parameters (a bare value
  for one, a tuple for several; also ``v=`` by keyword).  A wrong count or shape raises
  ``CoarsenError``.
* ``coarsen.hessian(fn, wrt=None, ...)(*args)``: one Hessian-vector product per input element
  (the column of a unit ``v``); ``in.shape + in.shape`` for one ``wrt`` parameter (a float for
  a scalar one), JAX's nested tuple ``H[p][q]`` (shape ``p.shape + q.shape``) for several.  The
  columns are computed independently: the result is symmetric to rounding, not by copying.
  All the columns of one call run inside one compiled function (``coarsen.transforms.sweeps``: the
  wrapper's gradient with a driver appended that loops over the unit vectors), so Python's
  per-call overhead is paid once per Hessian; ``hvp`` calls the same module's entry.
  ``coarsen.hessian(fn, ..., parallel=True)`` runs the columns in a ``numba.prange`` loop on
  the cpu target (not where the gradient has parallel loops of its own: Numba does not nest
  them), with the same numbers, bit for bit.
* Unsupported input raises ``CoarsenError`` before code is generated: the function's own
  constructs at the ``hessian``/``hvp`` call (the frontend's fence) or at the first call
  (forward mode's rules, types, a result that is not one float); a JVP program that reverse
  mode cannot read back (a primitive whose forward-mode code uses a construct outside the
  input language) is refused at the first call, at the function, naming the generated line.
* ``h.source`` (the generated gradient of the wrapper), ``h.jvp_source`` (the JVP it
  differentiates) and ``h.report()`` (prints and returns a ``SecondOrderReport``).
"""
from __future__ import annotations

import io
import math
from dataclasses import dataclass

import numpy as np
from numba.core.errors import NumbaError

from ..ad.forward import jam
from .gradient import differentiate
from .artifact import resolve_wrt
from ..errors import CoarsenError, at_stmt
from .arguments import check_aliasing, convert_argument, converted
from .jvp import JvpOptions, compile_jvp
from ..frontend.custom_calls import custom_calls
from .gradient_program import NotAProgram, gradient_program
from .base import Transform
from .prepare import lower_for, typed_ir
from .report import TransformReport
from .sweeps import driver_module, hessian_driver
from .wrappers import fresh_name, make_wrapper

__all__ = ["Hessian", "Hvp", "SecondOrderReport", "hessian", "hvp"]


@dataclass(frozen=True)
class HvpProgram:
    """What one signature needs: the JVP artifact, the wrapper and its gradient."""
    jvp: object             # ``JvpArtifact`` (python target, no index checks)
    wrapper: object         # ``Wrapper``: ``_hvp_<f>(args..., v...)``
    gradient: object        # ``Gradient`` of the wrapper w.r.t. ``wrt``
    wrt: tuple              # the resolved ``wrt`` names
    compiled: object        # ``sweeps.DriverModule``: the gradient's module, Hessian driver
    module_arrays: tuple    # what the gradient's entry takes after the vectors
    written: frozenset      # positions (parameters, then vectors, module arrays) it may write
    artifact: object        # the gradient's ``Artifact``
    example: tuple          # small arguments of the wrapper's signature (for its report)
    wrt_pos: tuple          # the positions of ``wrt`` among the parameters
    parallel: bool          # the driver's columns run in a ``numba.prange`` loop


@dataclass
class SecondOrderReport(TransformReport):
    """What ``h.report()`` shows."""
    function: str
    transform: str          # "hessian" or "hvp"
    sweeps: int             # reverse sweeps of the last call
    wrt: tuple
    inner: str              # the wrapper's gradient report

    method: str = "reverse over forward"
    why: str = ""           # why not forward over reverse (``method="auto"``)

    def format(self):
        if self.method == "forward over reverse":
            return "\n".join([
                f"coarsen {self.transform} of {self.function}: forward mode over the generated "
                "gradient (forward over reverse)",
                f"  wrt: {', '.join(self.wrt)}; {self.sweeps} columns in the last call, "
                f"{self.inner.strip()}"])
        return "\n".join([
            f"coarsen {self.transform} of {self.function}: reverse mode over the generated JVP "
            "(reverse over forward)" + (f"; not forward over reverse: {self.why}" if self.why
                                        else ""),
            f"  wrt: {', '.join(self.wrt)}; {self.sweeps} Hessian-vector product(s) in the last "
            "call, one reverse sweep each over the primal and tangent code",
            self.inner.rstrip()])


class _SecondOrder(Transform):
    transform = "hessian"

    @property
    def what(self):
        return self.transform

    def __init__(self, fn, wrt=None, target="cpu", boundscheck=True, coarsen=True,
                 parallel=False):
        JvpOptions(wrt=wrt, target=target, boundscheck=boundscheck)     # checks the target
        self._read(fn, wrt)
        self.wrt, self.target, self.boundscheck, self.coarsen = wrt, target, boundscheck, coarsen
        self.parallel = bool(parallel)
        self._fence()                           # the fence runs now
        self._programs = {}
        self._fast = {}                         # kind_of(args) -> HvpProgram
        self._last = None                       # (HvpProgram, sweeps)
        self.__name__ = f"{self.transform}_{self.fn.__name__}"

    def _program(self, args):
        return self._cached(args, self._fast, self._programs, self._build)

    def _checked(self, sig):
        """The function lowered and typed for ``sig``; raises ``CoarsenError`` where it calls a
        function with a custom rule (both methods: forward mode over a gradient that calls a
        rule's backward function differentiates the rule's residuals through the primal's own
        code, a bisection solver's flat steps included, not through the rule)."""
        low = lower_for(self.fn, sig, self.wrt, module_arrays=self._global_arrays,
                        transform=f"coarsen.{self.transform}")
        typed_ir(low.fn_ir, low.types, low.src, JvpOptions(),     # one float result, checked
                 transform=f"coarsen.{self.transform}")
        for call in custom_calls(low.fn_ir):    # the rules run their solvers undifferentiated
            raise at_stmt(call, f"coarsen.{self.transform} of a function that calls "
                          f"{call.attr('primal')}, which has a {call.attr('kind')} rule, is not "
                          "supported: the rule gives first derivatives only (what it computes "
                          "is not differentiated again)",
                          "take the Hessian of a version of the function without the rule")
        return low

    def _jvp_artifact(self, sig):
        """The JVP that reverse mode reads back, for ``sig``."""
        return compile_jvp(self.fn, sig, JvpOptions(wrt=self.wrt, target="python",
                                                    boundscheck=False, input_language=True,
                                                    coarsen=False),
                           module_arrays=self._global_arrays)

    def _build(self, args, sig):
        self._checked(sig)
        # the JVP fine-grained, as reverse mode then reads it back: the reverse pass coarsens
        # (its loops' closed forms included), and the two methods keep giving one Hessian
        art = self._jvp_artifact(sig)
        taken = set(self.params)
        vs = [fresh_name(f"_v_{w}", taken) for w in art.wrt]
        taken |= set(vs)
        arrays = [fresh_name(f"_module_array{i}", taken) for i in range(len(art.module_arrays))]
        taken |= set(arrays)
        jv, r = fresh_name("_jvp", taken), fresh_name("_r", taken)
        wrapper = make_wrapper(
            "hvp", f"_hvp_{self.fn.__name__}", self.params + vs,
            [f"{r} = {jv}({', '.join(self.params + arrays + vs)})", f"return {r}[1]"],
            {jv: art.entry, **dict(zip(arrays, art.module_arrays))},
            f"{self.fn.__module__}.{self.fn.__qualname__}")
        try:
            grad = differentiate(wrapper.fn, wrt=tuple(art.wrt), target=self.target,
                                 boundscheck=self.boundscheck, coarsen=self.coarsen)
        except CoarsenError as exc:
            where = f" ({exc.filename}:{exc.lineno}: {(exc.source_line or '').strip()})" \
                if exc.lineno else ""
            raise self._error(f"coarsen.{self.transform}: reverse mode cannot read back the JVP "
                              f"that forward mode generated for {self.fn.__name__}{where}: "
                              f"{exc.problem}",
                              "use coarsen.jacobian of the gradient's arrays, or rewrite the "
                              "construct in plain loops") from None
        zeros = [np.zeros(np.shape(args[self.params.index(w)])) if np.ndim(
            args[self.params.index(w)]) else 0.0 for w in art.wrt]
        example = tuple(np.zeros((1,) * a.ndim, a.dtype) if isinstance(a, np.ndarray) else a
                        for a in tuple(args) + tuple(zeros))
        gart = grad.specialize(example)
        ranks = [np.ndim(args[self.params.index(w)]) for w in art.wrt]
        wrt_pos = [self.params.index(w) for w in art.wrt]
        # columns in parallel, unless the gradient has parallel loops itself (no nesting)
        parallel = self.parallel and self.target == "cpu" and "parallel=True" not in gart.source
        driver = hessian_driver(gart.entry_name, len(self.params), len(gart.module_arrays),
                                wrt_pos, ranks, self.target, parallel)
        compiled = driver_module(gart.source, gart.entry_name, driver, "_hessian",
                                 f"hessian_{self.fn.__name__}", self.target)
        return HvpProgram(art, wrapper, grad, tuple(art.wrt),
                          compiled, tuple(gart.module_arrays),
                          # the gradient program copies what it writes; the function's own writes
                          # (art.written) are what make overlapping arguments another function
                          frozenset(gart.written) | frozenset(art.written), gart,
                          example, tuple(wrt_pos), parallel)

    def _converted(self, prog, args):
        """The arguments as the entry takes them, checked for overlaps the code cannot take."""
        if prog.written:
            n = len(self.params)
            written = {k for k in prog.written if k < n}
            check_aliasing(self.src, self.params, args, (), written)
        return [convert_argument(a) for a in args]

    def _vectors(self, prog, args, v):
        """``v`` as the wrapper takes it (float64 copies, floats), checked."""
        wrt = prog.wrt
        if self._single:
            items = (v,)
        elif not isinstance(v, (tuple, list)):
            raise self._error(f"v must be a tuple of {len(wrt)} value(s), one per wrt parameter "
                              f"({', '.join(wrt)}), got {type(v).__name__}",
                              "pass v=(v1, v2, ...) in the order of wrt")
        else:
            items = tuple(v)
        if len(items) != len(wrt):
            raise self._error(f"{len(items)} vector(s) given for {len(wrt)} wrt parameter(s) "
                              f"({', '.join(wrt)})", "pass one v per wrt parameter, in its order")
        out = []
        for name, t in zip(wrt, items):
            a = args[self.params.index(name)]
            tv = np.asarray(t)
            if tv.dtype.kind not in "fiu":
                raise self._error(f"v for {name!r} has dtype {tv.dtype}, not a real number type",
                                  f"pass float values shaped like {name}")
            if tv.shape != np.shape(a):
                raise self._error(f"v for {name!r} has shape {tv.shape}, but {name} has shape "
                                  f"{np.shape(a)}", f"pass values shaped like {name}")
            out.append(np.array(tv, dtype=np.float64) if isinstance(a, np.ndarray) else float(tv))
        return out

    def _hvp(self, prog, args, vs):
        """``H v`` (one reverse sweep), each array in its argument's dtype, as ``Gradient``
        gives it."""
        r = prog.compiled.entry(*self._converted(prog, args), *vs, *converted(prog.module_arrays))
        out = []
        for w, g in zip(prog.wrt, r[1]):
            a = args[self.params.index(w)]
            out.append(np.asarray(g).astype(a.dtype, copy=False) if isinstance(a, np.ndarray)
                       else float(g))
        return tuple(out)

    def program(self, args):
        """The ``HvpProgram`` (the JVP, the wrapper's gradient and the Hessian driver) for
        example ``args`` (what ``export`` writes)."""
        return self._program(tuple(args))

    @property
    def last_signature(self):
        """The last call's parameter types in Numba notation (a tuple of texts), or None."""
        if self._last is None:
            return None
        prog = self._last[0]
        if isinstance(prog, ForwardOverReverse):     # its wrapper takes the same parameters
            return prog.jacobian.last_signature
        return prog.jvp.signature

    def export(self, path, signature=None):
        """Write the Hessian as a standalone module defining ``hessian_<f>`` and ``hvp_<f>``;
        see ``coarsen.transforms.export_sweeps``."""
        from .export_sweeps import export_hessian
        return export_hessian(self, path, signature=signature)

    # ------------------------------------------------------------------ inspection
    @property
    def source(self):
        if self._last is None:
            raise CoarsenError(f"the {self.transform} is specialized on its first call's "
                               "argument types; call it once before reading .source")
        prog = self._last[0]
        if isinstance(prog, ForwardOverReverse):
            return prog.jacobian.source
        return prog.artifact.source

    @property
    def jvp_source(self):
        if self._last is None:
            raise CoarsenError(f"call the {self.transform} once before reading .jvp_source")
        if isinstance(self._last[0], ForwardOverReverse):
            raise CoarsenError("the last call ran forward mode over the gradient: read "
                               ".gradient_source (the gradient) and .source (its JVP)")
        return self._last[0].jvp.source

    @property
    def gradient_source(self):
        """The gradient that forward mode differentiated (forward over reverse), as read."""
        if self._last is None or not isinstance(self._last[0], ForwardOverReverse):
            raise CoarsenError("the last call did not run forward over reverse: read .source "
                               "(the gradient of the JVP) and .jvp_source")
        return self._last[0].program.wrapper.source

    @property
    def method_used(self):
        """``"forward over reverse"`` or ``"reverse over forward"``: the last call's."""
        if self._last is None:
            raise CoarsenError(f"call the {self.transform} once before reading .method_used")
        return getattr(self._last[0], "method", "reverse over forward")

    def _ir_for(self, args):
        """The IR of the function for ``args`` (as forward mode typed it)."""
        return self._jvp_artifact(self._signature(args)).ir_text

    def _report(self, args):
        """The ``SecondOrderReport`` of the call on ``args`` (default: the last call)."""
        if args is not None:
            self._specialize(args)
        if self._last is None:
            raise CoarsenError(f"call the {self.transform} once (or pass example arguments to "
                               "report) before asking for its report")
        prog, sweeps = self._last
        if isinstance(prog, ForwardOverReverse):
            how = ("as SIMD vectors of its lanes (lane-last tangent arrays)" + (
                       f"; {prog.jammed} loop(s) {jam.JAM} {jam.MARK} (unroll and jam)"
                       if prog.jammed else "") if prog.simd
                   else "with the tangents of its lanes" +
                   (f" (not SIMD vectors: {prog.not_simd})" if prog.not_simd else ""))
            return SecondOrderReport(self.fn.__qualname__, self.transform, sweeps, prog.wrt,
                                     f"{prog.lanes} per sweep, each sweep the gradient once "
                                     + how, prog.method)
        buf = io.StringIO()
        prog.gradient.report(*prog.example, file=buf)
        return SecondOrderReport(self.fn.__qualname__, self.transform, sweeps, prog.wrt,
                                 buf.getvalue(), why=getattr(self, "_why", ""))


class Hvp(_SecondOrder):
    """Hessian-vector products of a function; see ``coarsen.hvp``."""
    transform = "hvp"

    def _specialize(self, args):
        """Specialize for ``args`` (the function's, without ``v``) as a call would."""
        self._last = (self._program(args), 1)

    def _source_for(self, args):
        return self._program(args).artifact.source

    def __call__(self, *args, v=None, **kwargs):
        if v is None:
            if not args:
                raise self._error("coarsen.hvp needs v: h(*args, v)", "pass v last or as v=")
            args, v = args[:-1], args[-1]
        if kwargs or len(args) != len(self.params):
            args = self._bind(args, kwargs)
        if self._module_arrays:
            self._module_arrays.check()
        prog = self._program(args)
        out = self._hvp(prog, args, self._vectors(prog, args, v))
        self._last = (prog, 1)
        return out[0] if self._single else out

    def batch(self, in_axes, *, target=None):
        """Per-set ``H v`` over many argument sets, like ``jax.vmap``: see
        ``coarsen.transforms.batching.sweeps``."""
        from .batching.sweeps import BatchedHvp
        return BatchedHvp(self, in_axes, target)


#: how ``coarsen.hessian`` composes the first-order transforms
METHODS = ("auto", "forward-over-reverse", "reverse-over-forward")
#: the most tangent lanes of one forward-over-reverse sweep (``coarsen.jvp``'s directions)
LANES = 8


#: lanes times columns of one SIMD sweep: a lane-last tangent array of ``size`` elements and K
#: lanes takes 8 K size bytes, 16 KiB at this bound (two of them, the gradient's read and its
#: accumulated tangents, in a 48 KiB L1 data cache with room to spare)
SIMD_BUDGET = 2048


def simd_lanes(size):
    """The lanes per sweep of the SIMD form for ``size`` columns: a multiple of 8 (one
    AVX-512 vector per chunk of 8 lanes) from 8 to 32; one sweep where 32 lanes cover the
    columns, else as few sweeps as cover them with at most ``SIMD_BUDGET // size`` lanes each
    (at least 8), the lanes spread evenly.  Logistic regression, 100 features, medians of
    interleaved calls on a busy 2-core machine (every one the same Hessian, bit for bit):
    8 unrolled lanes 0.90 to 1.10 ms; SIMD 16 lanes 450 to 545 us, 24 lanes 465 to 585 us,
    32 lanes 560 to 735 us (its tangent arrays no longer fit in L1)."""
    if size <= 32:
        return -(-size // 8) * 8
    most = max(8, min(32, SIMD_BUDGET // size // 8 * 8))
    sweeps = -(-size // most)
    per = -(-size // sweeps)
    return -(-per // 8) * 8


@dataclass(frozen=True)
class ForwardOverReverse:
    """A Hessian as the Jacobian, by forward mode, of the generated gradient."""
    program: object         # ``gradient_program.GradientProgram``
    jacobian: object        # ``Jacobian`` of its wrapper, forward mode, ``lanes`` directions
    gradient: object        # the ``Gradient`` (python target) whose source it reads
    wrt: tuple              # the ``wrt`` names
    lanes: int
    method: str = "forward over reverse"
    simd: bool = False      # the vector JVP's SIMD form (``coarsen.ad.forward.simd``)
    not_simd: str = ""      # on the cpu target, why the unrolled lanes run instead
    jammed: int = 0         # loops of the SIMD form run ``jam.JAM`` trips at a time


class Hessian(_SecondOrder):
    """The Hessian of a function; see ``coarsen.hessian``."""
    transform = "hessian"

    def __init__(self, fn, wrt=None, target="cpu", boundscheck=True, coarsen=True,
                 parallel=False, method="auto"):
        if method not in METHODS:
            raise CoarsenError(f"method must be one of {', '.join(map(repr, METHODS))}, "
                               f"got {method!r}")
        if method == "forward-over-reverse" and parallel:
            raise CoarsenError("parallel=True runs reverse over forward's columns in parallel; "
                               "it does not combine with method='forward-over-reverse'",
                               hint="drop one of them")
        super().__init__(fn, wrt, target, boundscheck, coarsen, parallel)
        self.method = method
        self._fr = {}           # signature types -> ForwardOverReverse or NotAProgram
        self._fr_fast = {}      # kind_of(args) -> the same
        self._why = ""

    def _forward_over_reverse(self, args):
        """The ``ForwardOverReverse`` for ``args``, or a ``NotAProgram`` saying why not."""
        got = self._cached(args, self._fr_fast, self._fr, self._build_forward_over_reverse)
        if isinstance(got, NotAProgram) and self.method == "forward-over-reverse":
            raise self._error(f"coarsen.hessian(method='forward-over-reverse'): the gradient of "
                              f"{self.fn.__name__} is not a program forward mode reads: "
                              f"{got.reason}", "use method='auto' or 'reverse-over-forward'")
        return got

    def _build_forward_over_reverse(self, args, sig):
        from .jacobian import Jacobian
        if self.parallel:
            return NotAProgram("parallel=True runs reverse over forward's columns in parallel")
        if self._global_arrays:
            return NotAProgram("it reads module-level arrays")
        self._checked(sig)
        names = resolve_wrt(self.wrt, self.params, sig.types, self.fn.__name__)
        vals = [args[self.params.index(n)] for n in names]
        if not all(isinstance(v, float) or (isinstance(v, np.ndarray) and v.dtype == np.float64
                                            and v.size) for v in vals):
            return NotAProgram("a wrt parameter is neither a float nor a float64 array")
        # math.exp kept (not the vector helper _exp): forward mode reads the gradient back
        grad = differentiate(self.fn, wrt=names if len(names) > 1 else names[0],
                             target="python", boundscheck=False, coarsen=self.coarsen,
                             disable=("vector_exp",))
        prog = gradient_program(grad.specialize(tuple(args)),
                                f"{self.fn.__module__}.{self.fn.__qualname__}",
                                tuple(np.ndim(v) for v in vals))
        if isinstance(prog, NotAProgram):
            return prog
        size = sum(int(np.size(v)) for v in vals)
        # the entry's parameters are the function's, in order (renamed where a name clashes)
        pos = tuple(self.params.index(n) for n in names)
        wrt = pos if len(pos) > 1 else pos[0]
        # forward mode over the generated gradient, fine-grained: the gradient's adjoint
        # steps were coarsened already, and lifting them again gains nothing measured; first
        # the SIMD form (K-lane vectors), else K unrolled scalar lanes
        why = ""
        if self.target == "cpu":
            try:
                lanes = simd_lanes(size)
                jac = Jacobian(prog.wrapper.fn, wrt, "forward", self.target, self.boundscheck,
                               False, lanes, coarsen=False, simd=True)
                jac(*args)
                return ForwardOverReverse(prog, jac, grad, names, lanes, simd=True,
                                          jammed=jac.source.count(jam.MARK))
            except CoarsenError as exc:
                # the rewrite's reason, without the generated wrapper's name
                why = exc.problem.split(" is not available: ")[-1]
            except NumbaError as exc:
                why = f"Numba did not compile it ({type(exc).__name__})"
        lanes = min(size, LANES)
        try:
            # read back, generated and compiled now: a refusal falls back (a parallel
            # reduction's per-block partials, ``np.zeros((_nblocks,) + w.shape)``, are outside
            # the input language)
            jac = Jacobian(prog.wrapper.fn, wrt, "forward", self.target, self.boundscheck,
                           False, lanes, coarsen=False)
            jac(*args)
        except CoarsenError as exc:
            return NotAProgram(f"forward mode cannot read it back ({exc.problem})")
        return ForwardOverReverse(prog, jac, grad, names, lanes, not_simd=why)

    def __call__(self, *args, **kwargs):
        if kwargs or len(args) != len(self.params):
            args = self._bind(args, kwargs)
        if self._module_arrays:
            self._module_arrays.check()
        if self.method != "reverse-over-forward":
            fr = self._forward_over_reverse(args)
            if isinstance(fr, ForwardOverReverse):
                out = fr.jacobian(*args)
                shapes = [np.shape(args[self.params.index(n)]) for n in fr.wrt]
                if not fr.program.packed:
                    self._last = (fr, math.prod(shapes[0]))
                    return out if self._single else ((out,),)
                n = sum(math.prod(sh) for sh in shapes)
                self._last = (fr, n)
                return self._blocks(np.hstack([np.reshape(j, (n, -1)) for j in out]), shapes)
            self._why = fr.reason
        prog = self._program(args)
        shapes = [np.shape(args[k]) for k in prog.wrt_pos]
        n = sum(math.prod(s) for s in shapes)
        if n:
            dense = prog.compiled.driver(*self._converted(prog, args), *converted(prog.module_arrays))
        else:
            dense = np.zeros((0, 0))
        self._last = (prog, n)
        return self._blocks(dense, shapes)

    def _specialize(self, args):
        """Specialize for ``args`` as a call does: the call itself."""
        self(*args)

    def _source_for(self, args):
        """The generated code of the call on ``args`` (which it runs)."""
        self(*args)
        return self.source

    def _blocks(self, dense, shapes):
        """The Hessian as the call returns it, from its dense matrix: one block for one
        ``wrt`` (a float for a scalar), JAX's nested tuple ``H[p][q]`` for several."""
        starts = [0]
        for s in shapes:
            starts.append(starts[-1] + math.prod(s))

        def block(p, q):
            b = dense[starts[p]:starts[p + 1], starts[q]:starts[q + 1]]
            b = b.reshape(shapes[p] + shapes[q])
            return float(b[()]) if b.ndim == 0 else b

        if self._single:
            return block(0, 0)
        return tuple(tuple(block(p, q) for q in range(len(shapes))) for p in range(len(shapes)))

    def batch(self, in_axes, *, target=None):
        """Per-set Hessians over many argument sets, like ``jax.vmap``: see
        ``coarsen.transforms.batching.sweeps``."""
        from .batching.sweeps import BatchedHessian
        return BatchedHessian(self, in_axes, target)


def hvp(fn, wrt=None, *, target="cpu", boundscheck=True, coarsen=True):
    """Hessian-vector products of ``fn`` (see the module docstring): ``coarsen.hvp(fn,
    wrt)(*args, v)`` is ``H v``, shaped like the gradient."""
    return Hvp(fn, wrt, target, boundscheck, coarsen)


def hessian(fn, wrt=None, *, target="cpu", boundscheck=True, coarsen=True, parallel=False,
            method="auto"):
    """The Hessian of ``fn`` (see the module docstring): ``in.shape + in.shape`` for one
    ``wrt`` parameter, JAX's nested tuple for several; ``parallel=True`` runs its columns in
    parallel on the cpu target; ``method``: ``"auto"`` (forward over reverse where the
    gradient is a program forward mode reads, else reverse over forward),
    ``"forward-over-reverse"`` or ``"reverse-over-forward"``."""
    return Hessian(fn, wrt, target, boundscheck, coarsen, parallel, method)
