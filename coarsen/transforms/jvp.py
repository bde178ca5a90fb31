"""Forward mode's public API: ``jvp``, the ``Jvp`` it returns, and ``compile_jvp``, its pipeline.

Requires: the frontend, types and activity of this package, forward mode
(``coarsen.ad.forward``), ``coarsen.transforms.artifact`` (``Signature``, ``arg_type``, ``check_wrt``,
``resolve_wrt``, ``written_positions``) and ``coarsen.lowering`` (printing, building, caching).
Guarantees:

* ``coarsen.jvp(fn, wrt=None, *, target="cpu", boundscheck=True, coarsen=True)(*args, tangents=...)``
  returns ``(value, tangent_out)``: ``fn(*args)`` and the directional derivative of ``fn``
  at ``args`` along ``tangents`` (JAX's ``jvp``), two floats, or two new float64 arrays of
  the result's shape for a function that returns a float array.  ``tangents`` has one entry per
  ``wrt`` parameter, shaped like it: a bare value for a single name or position, a tuple (or
  list) for ``wrt=None`` (every float parameter) or a sequence.  A float scalar parameter
  takes a real number, an array parameter an array of its shape (any real dtype, computed in
  float64); anything else raises ``CoarsenError`` naming the parameter, before any code runs.
  ``fn`` must return a float scalar or a float64 array (``coarsen.jacobian`` builds on this).
* ``coarsen.jvp(fn, wrt, directions=K)`` is the vector JVP (JAX's ``vmap`` of ``jvp`` over
  the tangents): each tangent has a leading axis of K directions (``(K,) + shape``, a 1-D
  array of K for a scalar parameter), and the result's tangents have it too, ``(K,)`` or
  ``(K,) + out.shape``.  The primal runs once per call and the tangent code once per
  direction (``coarsen.ad.forward``), row k what a single-direction JVP gives for direction k,
  bit for bit.  K is fixed per ``Jvp`` (1 to ``MAX_DIRECTIONS``); ``batch`` and ``export``
  are refused for it.
* The generated code is ``jvp_<f>(args..., tangents...)``: the primal and its tangents in one
  pass, with no tape.  Coarse by default: segments are planned and lifted to SymPy as for the
  gradient, their tangents pushed through their local Jacobians, and a loop in closed form
  gets a closed-form tangent (``coarsen.ad.forward.segments``); elsewhere, and everywhere with
  ``coarsen=False``, each statement's tangent comes from its primitive's forward rule in the
  registry (``coarsen.ir.primitives``).  Unsupported input raises ``CoarsenError`` (file, line, column,
  hint) before code is generated.  The caller's arrays (arguments and tangents) are never
  modified.  Arrays that overlap in memory are refused when the function writes either.
* ``compile_jvp(fn, signature, options)`` lowers once and returns a frozen ``JvpArtifact``,
  from the disk cache when an entry has exactly its key parts: the parts of the gradient's
  key (the frontend's fingerprint of every read, the function, signature, module-level
  arrays' types, ``wrt``, target, ``boundscheck``, ``coarsen``, coarsen's version and code hash, the
  toolchain) plus ``"transform": "jvp"``, so a JVP entry never serves a gradient or the
  reverse.  Like ``Gradient``, a ``Jvp`` keeps one artifact per signature of argument types
  (never re-validated).
* ``j.source`` (the last call's generated code), ``j.source_for(*args)``, ``j.ir(*args)``
  and ``j.report()`` (prints and returns a ``JvpReport``); ``j.export(path, signature=None)``
  writes the standalone module (``coarsen.transforms.export_sweeps``).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .. import lowering
from .version import __version__
from ..ad.forward import jvp_ir
from ..ad.forward import jam
from ..ad.forward.pipeline import FORWARD
from ..ad.forward.simd import NotVectorized
from ..analysis.activity import analyze
from .arguments import check_aliasing, convert_argument
from .artifact import TARGETS
from ..errors import CoarsenError
from ..frontend.source import display_path, get_source, unwrap
from .base import Transform
from .prepare import code_fingerprint, lower_for, typed_ir
from .report import TransformReport
from .wrappers import array_form, tuple_length
from ..lowering.cache import toolchain_versions

#: the most directions of one vector JVP: each statement's tangent code is written once per
#: direction, so the generated code (and Numba's compile time) grows with it
MAX_DIRECTIONS = 32

__all__ = ["MAX_DIRECTIONS", "Jvp", "JvpArtifact", "JvpOptions", "JvpReport", "compile_jvp", "jvp"]


@dataclass(frozen=True)
class JvpOptions:
    """What ``jvp`` accepts, hashable (``wrt`` as given, a list made a tuple)."""
    wrt: object = None
    target: str = "cpu"
    boundscheck: bool = True
    #: the JVP in coarsen's input language (``jvp_ir``'s ``input_language``): for ``hessian``
    input_language: bool = False
    #: K > 0: a vector JVP along K directions per call (``jvp_ir``'s ``directions``)
    directions: int = 0
    #: coarse forward mode: tangents through lifted segments' local Jacobians and closed forms
    #: (``jvp_ir``'s ``coarsen``); False: fine-grained, one tangent statement per statement
    coarsen: bool = True
    #: with ``directions=K``: the SIMD form (``coarsen.ad.forward.simd``: each tangent K lanes
    #: wide, one vector per float), the same entry and the same numbers; ``compile_jvp``
    #: raises ``CoarsenError`` where the tangent code has a form it does not rewrite
    simd: bool = False
    #: forward passes switched off, by name (``coarsen.ad.forward.pipeline``)
    disable: frozenset = frozenset()

    def __post_init__(self):
        if self.target not in TARGETS:
            raise CoarsenError(f"unknown target {self.target!r}", hint=f"use one of {TARGETS}")
        k = self.directions
        if k is None:
            k = 0
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or \
                not 0 <= k <= MAX_DIRECTIONS:
            raise CoarsenError(f"directions must be an int from 1 to {MAX_DIRECTIONS} (or None), "
                               f"got {self.directions!r}",
                               hint=f"for more directions, call the vector JVP on blocks of at most "
                               f"{MAX_DIRECTIONS}")
        object.__setattr__(self, "directions", int(k))
        if isinstance(self.wrt, list):
            object.__setattr__(self, "wrt", tuple(self.wrt))
        object.__setattr__(self, "boundscheck", bool(self.boundscheck))
        object.__setattr__(self, "coarsen", bool(self.coarsen))
        object.__setattr__(self, "simd", bool(self.simd) and self.directions > 0)
        object.__setattr__(self, "disable", FORWARD.check(self.disable))


@dataclass(frozen=True, eq=False)
class JvpArtifact:
    """One compiled JVP: what ``compile_jvp`` gives for a signature and options."""
    function: str
    signature: tuple            # the parameters' Numba type texts
    types: tuple                # IR types: parameters, then module-level arrays
    options: JvpOptions
    wrt: tuple                  # the differentiated parameters' (source) names
    entry_name: str             # ``jvp_<f>``
    source: str
    module: object
    entry: object
    ir_text: str
    stats: dict                 # what the report shows (tangents, zeros, loops)
    transform_seconds: float
    cached: bool
    written: frozenset          # positions (parameters, then module arrays) it may write
    module_arrays: tuple
    parts: dict                 # the disk key's parts (``"transform": "jvp"`` among them)
    cache_key: str


def compile_jvp(fn, signature, options, *, module_arrays=None):
    """The ``JvpArtifact`` of ``fn`` for ``signature`` and ``options`` (see the module
    docstring); nothing is kept in memory here."""
    t0 = time.perf_counter()
    low = lower_for(fn, signature, options.wrt, module_arrays=module_arrays,
                    transform="coarsen.jvp")
    fn, src, params, wrt, fn_ir = low.fn, low.src, low.params, low.wrt, low.fn_ir
    arrays, types, written = low.arrays, low.types, low.written
    parts = {"transform": "jvp", "dependencies": fn_ir.dependencies.fingerprint(),
             "function": fn.__qualname__, "module": str(fn.__module__), "file": src.filename,
             "signature": list(signature.texts),
             "module_arrays": list(low.array_texts), "wrt": list(wrt),
             "target": options.target, "boundscheck": options.boundscheck,
             "input_language": options.input_language, "directions": options.directions,
             "coarsen": options.coarsen, "simd": options.simd,
             # the trips the SIMD form runs side by side (``coarsen.ad.forward.jam``)
             "jam": jam.JAM if options.simd else 0,
             "disable": sorted(options.disable),
             "version": __version__, "code": code_fingerprint(),
             "toolchain": dict(sorted(toolchain_versions().items()))}
    cache_key = lowering.cache_key(**parts)
    try:
        cached = lowering.load(cache_key, parts=parts)
    except lowering.LoweringError:
        cached = None
    entry_name = f"jvp_{fn.__name__}"
    if cached is not None:
        source, meta = cached
        ir_text_, stats = meta.get("ir", ""), meta.get("stats", {})
    else:
        fn_ir = typed_ir(fn_ir, types, src, options, transform="coarsen.jvp",
                         float_arrays=True)
        wrt_ir = tuple(fn_ir.params[params.index(w)] for w in wrt)
        facts = analyze(fn_ir, wrt_ir)
        try:
            module, em = jvp_ir(fn_ir, wrt_ir, facts, entry_name, options)
        except NotVectorized as exc:
            raise CoarsenError(f"the SIMD form of the vector JVP of {fn.__qualname__} is not "
                               f"available: {exc}", hint="use the vector JVP without simd")
        lifted = [seg.plan for seg in em.segments if seg.plan.lifted is not None]
        stats = {"active": len(facts.active), "tangent_statements": em.tangent_statements,
                 "coarsen": options.coarsen, "segments": len(em.segments),
                 "lifted": len(lifted), "closed_forms": sum(p.kind == "loop" for p in lifted),
                 "coarse_blocks": em.coarse_blocks,
                 "zero_tangents": em.zero_tangents,
                 "tangents": {w: em.dot(w) for w in wrt_ir},
                 "loops": [list(x) for x in em.loop_notes],
                 "jammed": [[p.var, p.factor] for p in getattr(em, "jammed", ())],
                 "passes": list(em.passes_run)}
        header = (f"Generated by coarsen {__version__} from {fn.__module__}.{fn.__qualname__} "
                  f"({display_path(fn)}:{src.node.lineno})\n"
                  f"signature: ({', '.join(signature.texts)}); wrt: {', '.join(wrt)}; "
                  "forward mode (JVP), " + ("coarse" if options.coarsen else "fine-grained")
                  + ", no tape")
        source = lowering.render(module, target=options.target, header=header)
        from ..ir.printer import format_function
        ir_text_ = format_function(fn_ir)
        try:
            # code a segment's symbolic time limit decided depends on the machine's load:
            # used, never stored (as the gradient's)
            if not em.timed_out:
                lowering.store_source(cache_key, source, {"ir": ir_text_, "wrt": list(wrt),
                                                          "stats": stats}, parts=parts)
        except lowering.LoweringError:
            pass
    transform = time.perf_counter() - t0
    mod = lowering.build(source, name=fn.__name__, target=options.target)
    return JvpArtifact(function=fn.__qualname__, signature=tuple(signature.texts), types=types,
                       options=options, wrt=wrt, entry_name=entry_name, source=source,
                       module=mod, entry=getattr(mod, entry_name), ir_text=ir_text_,
                       stats=stats, transform_seconds=transform, cached=cached is not None,
                       written=written, module_arrays=arrays, parts=parts, cache_key=cache_key)


@dataclass
class JvpReport(TransformReport):
    """What ``Jvp.report`` shows for one specialization."""
    function: str
    signature: tuple
    wrt: tuple
    stats: dict
    transform_seconds: float
    cached: bool

    def format(self):
        st = self.stats
        if st.get("coarsen", False):
            how = (f"coarse ({st.get('lifted', 0)} of {st.get('segments', 0)} segments lifted: "
                   f"{st.get('closed_forms', 0)} loops in closed form, "
                   f"{st.get('coarse_blocks', 0)} blocks through their partials, the others "
                   "fine where that is cheaper)")
        else:
            how = "fine-grained (no segments lifted)"
        out = [f"coarsen jvp for {self.function}({', '.join(self.signature)}), forward mode, "
               f"{how}, no tape",
               f"  wrt: {', '.join(self.wrt)}; tangents in: "
               f"{', '.join(st.get('tangents', {}).values())}",
               f"  {st.get('active', 0)} active variables, {st.get('tangent_statements', 0)} "
               f"tangent statements ({st.get('zero_tangents', 0)} set to zero); inactive "
               "values have no tangent"]
        for line, how in st.get("loops", []):
            out.append(f"  loop (line {line}): {how}")
        for var, factor in st.get("jammed", []):
            out.append(f"  loop over {var}: {factor} trips at a time, side by side (unroll and "
                       "jam: its trips meet only through accumulations)")
        out.append(f"  code generation time: {self.transform_seconds:.3f} s"
                   + (" (from the disk cache)" if self.cached else ""))
        return "\n".join(out)


class Jvp(Transform):
    """The JVP of a function; see ``coarsen.jvp``.  Keeps one ``JvpArtifact`` per signature."""

    what = "jvp"

    def __init__(self, fn, wrt=None, target="cpu", boundscheck=True, directions=None,
                 coarsen=True, disable=()):
        self.options = JvpOptions(wrt=wrt, target=target, boundscheck=boundscheck,
                                  directions=directions, coarsen=coarsen, disable=disable)
        self._read(fn, self.options.wrt)
        self._fence()                      # the fence runs now
        self._artifacts = {}
        self._fast = {}                    # arguments.kind_of(args) -> JvpArtifact
        self.__name__ = f"jvp_{self.fn.__name__}"

    def _artifact(self, signature):
        art = self._artifacts.get(signature.types)
        if art is None:
            art = compile_jvp(self.fn, signature, self.options, module_arrays=self._global_arrays)
            self._artifacts[signature.types] = art
        return art

    def _tangents(self, wrt, args, tangents):
        """The tangents as the entry takes them (float64 copies, floats), checked."""
        names = ", ".join(wrt)
        if self._single:
            items = (tangents,)
        elif not isinstance(tangents, (tuple, list)):
            raise self._error(f"tangents must be a tuple of {len(wrt)} value(s), one per wrt "
                              f"parameter ({names}), got {type(tangents).__name__}",
                              "pass tangents=(t1, t2, ...) in the order of wrt")
        else:
            items = tuple(tangents)
        if len(items) != len(wrt):
            raise self._error(f"{len(items)} tangent(s) given for {len(wrt)} wrt parameter(s) "
                              f"({names})", "pass one tangent per wrt parameter, in its order")
        out = []
        K = self.directions
        for name, t in zip(wrt, items):
            a = args[self.params.index(name)]
            tv = np.asarray(t) if not isinstance(t, np.ndarray) else t
            if tv.dtype.kind not in "fiu":
                raise self._error(f"the tangent of {name!r} has dtype {tv.dtype}, not a real "
                                  "number type", f"pass float values shaped like {name}")
            if K:
                # a vector JVP: K directions along a leading axis
                want = (K,) + np.shape(a)
                if tv.shape != want:
                    raise self._error(f"the tangents of {name!r} have shape {tv.shape}, but "
                                      f"{K} directions of {name} have shape {want}",
                                      f"pass an array of shape {want} for {name}: row k is "
                                      "direction k")
                out.append(np.ascontiguousarray(tv, dtype=np.float64))
            elif isinstance(a, np.ndarray):
                if tv.shape != a.shape:
                    raise self._error(f"the tangent of {name!r} has shape {tv.shape}, but "
                                      f"{name} has shape {a.shape}",
                                      f"pass an array of shape {a.shape} for {name}")
                out.append(np.ascontiguousarray(tv, dtype=np.float64))
            else:
                if tv.ndim != 0:
                    raise self._error(f"the tangent of {name!r} has shape {tv.shape}, but "
                                      f"{name} is a scalar", f"pass a float for {name}")
                out.append(float(tv))
        return out

    def _check_aliasing(self, args, written):
        check_aliasing(self.src, self.params, args, self._global_arrays, written)

    def __call__(self, *args, tangents=None, **kwargs):
        if tangents is None:
            raise self._error("coarsen.jvp needs tangents=: one per wrt parameter",
                              "call j(*args, tangents=...)")
        if kwargs or len(args) != len(self.params):
            args = self._bind(args, kwargs)
        if self._module_arrays:
            self._module_arrays.check()
        art = self._cached(args, self._fast, self._artifacts, lambda _, sig: self._artifact(sig))
        self._last = art
        if art.written:
            self._check_aliasing(args, art.written)
        tans = self._tangents(art.wrt, args, tangents)
        conv = [convert_argument(a) for a in tuple(args) + art.module_arrays]
        value, tangent = art.entry(*conv, *tans)
        return value, tangent

    def specialize(self, args):
        """The ``JvpArtifact`` for example ``args`` (a tuple of values)."""
        return self._artifact(self._signature(tuple(args)))

    @property
    def directions(self):
        """K of a vector JVP (``directions=K``), 0 for one direction per call."""
        return self.options.directions

    @property
    def last_signature(self):
        """The last call's parameter types in Numba notation (a tuple of texts), or None."""
        return self._last.signature if self._last is not None else None

    def _single_direction(self, what):
        if self.directions:
            raise self._error(f"{what} of a vector JVP (directions={self.directions}) is not "
                              "supported", f"use coarsen.jvp(fn, wrt) without directions for {what}")

    def batch(self, in_axes, *, target=None):
        """The JVP over many argument sets, like ``jax.vmap``: see ``coarsen.transforms.batching.sweeps``."""
        self._single_direction("batch()")
        from .batching.sweeps import BatchedJvp
        return BatchedJvp(self, in_axes, target)

    def export(self, path, signature=None):
        """Write the JVP as a standalone module defining ``jvp_<f>``; see
        ``coarsen.transforms.export_sweeps``."""
        self._single_direction("export()")
        from .export_sweeps import export_jvp
        return export_jvp(self, path, signature=signature)

    # ------------------------------------------------------------------ inspection
    @property
    def source(self):
        if self._last is None:
            raise CoarsenError("the jvp is specialized on its first call's argument types; "
                               "call it once (or use j.source_for(*args)) before reading j.source")
        return self._last.source

    def _source_for(self, args):
        return self._artifact(self._signature(args)).source

    def _ir_for(self, args):
        return self._artifact(self._signature(args)).ir_text

    def _report(self, args):
        """The ``JvpReport`` of the specialization for ``args`` (None: the last call's)."""
        if args is not None:
            self._last = self._artifact(self._signature(args))
        if self._last is None:
            raise CoarsenError("call the jvp once (or pass example arguments to report) first")
        art = self._last
        return JvpReport(self.fn.__qualname__, art.signature, art.wrt, art.stats,
                         art.transform_seconds, art.cached)


def check_directions(directions):
    """Refuse ``directions=0`` from a user (``JvpOptions`` takes 0 for one direction per call;
    its own check refuses the rest)."""
    if directions is not None and not isinstance(directions, bool) and directions == 0:
        raise CoarsenError(f"directions must be an int from 1 to {MAX_DIRECTIONS} (or None), "
                           "got 0", hint="directions=None for one direction per call")


class TupleJvp(Jvp):
    """The JVP of a function returning a tuple of ``k`` floats: ``(value, tangent)`` are tuples
    of ``k`` floats (with ``directions=K``, the tangent is a tuple of ``k`` arrays of ``K``),
    computed by the JVP of the wrapper that returns the tuple as one array
    (``coarsen.transforms.wrappers.array_form``)."""

    def __init__(self, fn, wrt, target, boundscheck, directions, coarsen, disable=(), *, k):
        super().__init__(fn, wrt, target, boundscheck, directions, coarsen, disable)
        self.k = k

    def __call__(self, *args, tangents=None, **kwargs):
        value, tangent = super().__call__(*args, tangents=tangents, **kwargs)
        t = np.asarray(tangent)
        if self.directions:
            return (tuple(float(v) for v in value),
                    tuple(np.ascontiguousarray(t[:, i]) for i in range(self.k)))
        return tuple(float(v) for v in value), tuple(float(v) for v in t)

    def batch(self, in_axes, *, target=None):
        raise self._error("batch() of the JVP of a function returning a tuple is not supported",
                          "return an array (np.array([a, b])) to batch its JVP")

    def export(self, path, signature=None):
        raise self._error("export() of the JVP of a function returning a tuple is not supported",
                          "return an array (np.array([a, b])) to export its JVP")


def jvp(fn, wrt=None, *, target="cpu", boundscheck=True, directions=None, coarsen=True,
        disable=()):
    """The forward-mode derivative of ``fn`` (see the module docstring):
    ``coarsen.jvp(fn, wrt)(*args, tangents=...) -> (value, tangent_out)``; with
    ``directions=K`` the tangents of K directions per call, along a leading axis;
    ``coarsen=False`` for fine-grained forward mode (no segment lifted); ``disable``: names
    of forward-mode passes to switch off (``coarsen.ad.forward.pipeline``: ``jam``, ``tidy``;
    an unknown name raises ``CoarsenError``)."""
    check_directions(directions)
    base = unwrap(fn)
    src = get_source(base)
    k = tuple_length(src)
    if k is None:
        return Jvp(fn, wrt, target, boundscheck, directions, coarsen, disable)
    # a tuple of k floats (JAX's jvp of a tuple result): the JVP of the generated wrapper
    # returning them as one array, whose value and tangent are handed back as tuples
    return TupleJvp(array_form(base, src, [a.id for a in src.node.args.args], k),
                    wrt, target, boundscheck, directions, coarsen, disable, k=k)
