"""The public API: ``differentiate`` and the ``Gradient`` it returns.

Requires: the frontend, IR, analyses and reverse mode of this package, and
``coarsen.lowering`` for printing, building and caching.
Guarantees: ``differentiate(fn)`` reads and fences the source at once; each new signature of
argument types (Numba-style: float, int, bool, arrays by dtype and rank) specializes the
gradient on first call, once, and caches it in memory (per ``Gradient``, never re-validated)
and on disk.  The disk key covers everything that shapes the generated code: the fingerprint
of every read the frontend made while lowering (the source of the function and of every
inlined helper from any module, ``@njit`` helpers and closure-captured ones included, their
default values, and the value of every module-level or closure name they read; see
``coarsen.frontend.source``), the signature (module-level arrays' types included), the
options, and the versions of coarsen (with the hash of its code), Python, NumPy, Numba and
SymPy; an entry is served only to the exact key parts it was stored with.  Those reads happen
when a signature is first specialized in a process.
``g(*args, **kwargs)`` binds its arguments like the function (keywords, defaults) and returns
the gradient, ``g.value_and_grad(...)`` the value and the gradient, ``g.source`` the generated
code.  ``wrt`` is checked by ``differentiate`` itself.  Array arguments that overlap in memory
are refused (``CoarsenError`` naming both) when the function writes either of them.
The caller's arrays are never modified.  float32 arrays are computed in float64 and their
gradients returned as float32.
For ``coarsen.export`` and ``coarsen.batching``: ``g.signature_of(args)`` and
``g.specialization(types, signature, workspace=...)`` give a specialization,
``g.last_specialization`` the last call's, ``g.module_arrays`` the module-level arrays the
entry takes after the parameters, ``g.returns_single`` whether the gradient is one value.
"""
from __future__ import annotations

import hashlib
import inspect
import time
from dataclasses import dataclass

import numpy as np

from . import __version__
from .errors import CoarsenError
from .frontend.lower import lower
from .frontend.source import display_path, get_source, unwrap
from .ir.nodes import Array, Assign, Scalar, Store, walk
from .ir.typeinfer import VIEW_OPS, infer
from .analysis.activity import analyze
from .ad.reverse import differentiate_ir
from . import lowering
from .lowering.cache import toolchain_versions

TARGETS = ("cpu", "python")


def _code_fingerprint():
    """Hash of coarsen's own source: a cache entry made by other compiler code never loads."""
    import os
    h = hashlib.sha256(__version__.encode())
    import importlib.util
    roots = [os.path.dirname(__file__), os.path.dirname(lowering.__file__)]
    spec = importlib.util.find_spec("coarsen.symbolic")   # located without importing SymPy
    if spec is not None and spec.origin:
        roots.append(os.path.dirname(spec.origin))
    for root in roots:
        for dirpath, dirnames, filenames in sorted(os.walk(root)):
            dirnames.sort()
            for fname in sorted(filenames):
                if fname.endswith(".py"):
                    with open(os.path.join(dirpath, fname), "rb") as fh:
                        h.update(fname.encode())
                        h.update(fh.read())
    return h.hexdigest()[:16]


_FINGERPRINT = None


def code_fingerprint():
    global _FINGERPRINT
    if _FINGERPRINT is None:
        _FINGERPRINT = _code_fingerprint()
    return _FINGERPRINT


def _arg_type(name, value):
    if isinstance(value, (bool, np.bool_)):
        return Scalar("bool"), "bool"
    if isinstance(value, (int, np.integer)):
        return Scalar("i64"), "int64"
    if isinstance(value, (float, np.floating)):
        return Scalar("f64"), "float64" if not isinstance(value, np.float32) else "float32"
    if isinstance(value, np.ndarray):
        kind = value.dtype.kind
        if kind == "f" and value.dtype.itemsize in (4, 8):
            dt = "f64"
        elif kind in "iu":
            dt = "i64"
        elif kind == "b":
            dt = "bool"
        else:
            raise CoarsenError(f"parameter {name!r}: arrays of dtype {value.dtype} are not supported",
                               hint="pass float64, float32, integer or bool arrays")
        if value.ndim == 0:
            raise CoarsenError(f"parameter {name!r}: 0-d arrays are not supported",
                               hint="pass a Python float instead")
        return Array(dt, value.ndim), f"{value.dtype.name}[{', '.join(':' * value.ndim)}]"
    raise CoarsenError(f"parameter {name!r}: values of type {type(value).__name__} are not supported",
                       hint="pass floats, ints, bools or NumPy arrays")


def _written_positions(fn_ir):
    """Positions in ``fn_ir.params`` (the user's parameters, then module-level arrays) of the
    arrays the function may write: targets of ``Store`` and of in-place updates, and arrays
    that a written variable may view (``b = a``, slices, ``.T``, reshapes), conservatively."""
    written = set()
    views = []
    for s in walk(fn_ir.body):
        if isinstance(s, Store):
            written.add(s.array)
        elif isinstance(s, Assign):
            if s.attr("inplace"):           # ``a += ...``: on an array, a write into a
                written.add(s.target)
                if s.args and hasattr(s.args[0], "name"):
                    written.add(s.args[0].name)
            if s.op in VIEW_OPS and s.args and hasattr(s.args[0], "name"):
                views.append((s.target, s.args[0].name))
    changed = True
    while changed:
        changed = False
        for target, base in views:
            if target in written and base not in written:
                written.add(base)
                changed = True
    return frozenset(i for i, p in enumerate(fn_ir.params) if p in written)


@dataclass
class Specialization:
    signature: tuple
    wrt: tuple
    source: str
    module: object
    entry: object
    ir_text: str
    plan: list
    transform_seconds: float
    compile_seconds: float = 0.0
    compiled: bool = False
    cached: bool = False            # the source came from the on-disk cache
    written: frozenset = frozenset()  # positions (parameters, then module arrays) it may write
    dependencies: str = ""          # fingerprint of the frontend's reads (source.Dependencies)


class Gradient:
    """The gradient of a function; see ``coarsen.differentiate``."""

    def __init__(self, fn, wrt, coarsen, target, boundscheck=True):
        if target not in TARGETS:
            raise CoarsenError(f"unknown target {target!r}", hint=f"use one of {TARGETS}")
        self.fn = unwrap(fn)
        self.src = get_source(self.fn)          # raises CoarsenError when there is no source
        self.params = [a.id for a in self.src.node.args.args]
        self._nparams = len(self.params)
        self._pysig = inspect.signature(self.fn)    # binds keyword arguments and defaults
        self.coarsen = coarsen
        self.target = target
        self.boundscheck = bool(boundscheck)
        self._wrt_spec = wrt
        self._single = wrt is not None and not isinstance(wrt, (tuple, list))
        self._check_wrt_spec()
        self._specs = {}
        self._fast = {}
        self._last = None
        self.__name__ = f"grad_{self.fn.__name__}"
        self.__doc__ = f"Gradient of {self.fn.__qualname__}, generated by coarsen."
        # the fence runs now: unsupported syntax is refused before any call
        fn_ir, _ = lower(self.fn)
        # module-level arrays the function reads enter as extra read-only arguments
        self._global_arrays = list(fn_ir.global_arrays)
        # the parameters' names in the IR and the generated code: the user's, escaped where
        # they look like compiler names or shadow a module the generated code imports
        self.ir_params = list(fn_ir.params[:len(self.params)])
        # what the fence read (functions' sources, defaults, module-level and closure values),
        # for inspection; each specialization keys its code by the reads of the lowering that
        # code comes from (Specialization.dependencies), and takes its written arguments from it
        self.dependencies = fn_ir.dependencies

    def _check_wrt_spec(self):
        """Refuse a ``wrt`` that names no parameter, at ``differentiate()`` (types come later)."""
        spec = self._wrt_spec
        if spec is None:
            return
        items = spec if isinstance(spec, (tuple, list)) else (spec,)
        if not items:
            raise CoarsenError(f"wrt is empty: nothing of {self.fn.__name__} to differentiate",
                               hint="pass wrt=None for every float parameter, or name some")
        for it in items:
            if isinstance(it, (int, np.integer)) and not isinstance(it, (bool, np.bool_)):
                if not 0 <= it < len(self.params):
                    raise CoarsenError(f"wrt position {it} is out of range: {self.fn.__name__} has "
                                       f"{len(self.params)} parameters ({', '.join(self.params)})",
                                       hint=f"use a position from 0 to {len(self.params) - 1}, or a name")
            elif isinstance(it, str):
                if it not in self.params:
                    raise CoarsenError(f"wrt names {it!r}, which is not a parameter of {self.fn.__name__}",
                                       hint=f"parameters are {', '.join(self.params)}")
            else:
                raise CoarsenError(f"wrt entries must be parameter names or positions, got {it!r}",
                                   hint=f"parameters are {', '.join(self.params)}")

    # ------------------------------------------------------------------ wrt
    def _resolve_wrt(self, types):
        spec = self._wrt_spec
        if spec is None:
            names = [p for p, t in zip(self.params, types)
                     if (isinstance(t, Scalar) and t.kind == "f64") or (isinstance(t, Array) and t.dtype == "f64")]
            if not names:
                raise CoarsenError(f"{self.fn.__name__} has no float parameters to differentiate")
            return tuple(names)
        items = spec if isinstance(spec, (tuple, list)) else (spec,)
        out = []
        for it in items:
            if isinstance(it, (int, np.integer)) and not isinstance(it, bool):
                if not 0 <= it < len(self.params):
                    raise CoarsenError(f"wrt position {it} is out of range: {self.fn.__name__} has "
                                       f"{len(self.params)} parameters")
                name = self.params[it]
            elif isinstance(it, str):
                if it not in self.params:
                    raise CoarsenError(f"wrt names {it!r}, which is not a parameter of {self.fn.__name__}",
                                       hint=f"parameters are {', '.join(self.params)}")
                name = it
            else:
                raise CoarsenError(f"wrt entries must be parameter names or positions, got {it!r}")
            t = types[self.params.index(name)]
            if not ((isinstance(t, Scalar) and t.kind == "f64") or (isinstance(t, Array) and t.dtype == "f64")):
                raise CoarsenError(f"cannot differentiate with respect to {name!r}: it is {t}, not a float",
                                   hint="differentiate with respect to float scalars or float arrays")
            out.append(name)
        return tuple(out)

    # ------------------------------------------------------------------ specialization
    def _signature(self, args):
        if len(args) != len(self.params):
            raise CoarsenError(f"{self.fn.__name__} takes {len(self.params)} arguments "
                               f"({', '.join(self.params)}), got {len(args)}")
        types, sig = [], []
        for name, a in zip(self.params, args):
            t, text = _arg_type(name, a)
            types.append(t)
            sig.append(text)
        for a in self._global_arrays:
            t, text = _arg_type("<module-level array>", a)
            types.append(t)
        return tuple(types), tuple(sig)

    def _specialize(self, types, sig, workspace=False):
        """The compiled specialization for argument ``types`` (cached in memory and on disk).
        ``workspace=True`` builds the scalar-only variant whose tapes are passed in (CUDA)."""
        key = (types, self._wrt_spec if not isinstance(self._wrt_spec, list) else tuple(self._wrt_spec),
               workspace)
        spec = self._specs.get(key)
        if spec is not None:
            return spec
        wrt = self._resolve_wrt(types)
        t0 = time.perf_counter()
        # The lowering the code comes from (on a miss) is the one the key describes: its record
        # of reads (helpers' sources, defaults, module-level values) is fingerprinted here.
        fn_ir, _ = lower(self.fn)
        if [id(a) for a in fn_ir.global_arrays] != [id(a) for a in self._global_arrays]:
            raise CoarsenError(f"the module-level arrays that {self.fn.__name__} reads were rebound "
                               "after coarsen.differentiate() was called",
                               hint="call coarsen.differentiate again after changing module-level arrays")
        written = _written_positions(fn_ir)
        deps = fn_ir.dependencies.fingerprint()
        key_parts = dict(dependencies=deps, function=self.fn.__qualname__,
                         module=str(self.fn.__module__), file=self.src.filename,
                         signature=list(sig),
                         module_arrays=[_arg_type("<module-level array>", a)[1]
                                        for a in self._global_arrays],
                         wrt=list(wrt), coarsen=bool(self.coarsen), target=self.target,
                         workspace=workspace, boundscheck=self.boundscheck,
                         version=__version__, code=code_fingerprint(),
                         toolchain=toolchain_versions())
        cache_key = lowering.cache_key(**key_parts)
        cached = None
        try:
            cached = lowering.load(cache_key, parts=key_parts)
        except lowering.LoweringError:
            cached = None
        entry_name = f"value_and_grad_{self.fn.__name__}"
        if cached is not None:
            source, meta = cached
            ir_text = meta.get("ir", "")
            plan = meta.get("plan", [])
        else:
            infer(fn_ir, list(types))
            rt = fn_ir.types.get(fn_ir.result)
            if not (isinstance(rt, Scalar) and rt.kind == "f64"):
                what = "an array" if isinstance(rt, Array) else ("an integer" if rt == Scalar("i64") else str(rt))
                import gast as _gast
                rets = [n for n in _gast.walk(self.src.node) if isinstance(n, _gast.Return)]
                at = rets[-1] if rets else self.src.node
                raise CoarsenError(f"{self.fn.__name__} returns {what}; coarsen differentiates functions "
                                   "that return one float scalar",
                                   filename=self.src.filename, lineno=at.lineno, col_offset=at.col_offset,
                                   source_line=self.src.line(at.lineno),
                                   hint="return a scalar objective, e.g. np.sum(...) or float(...)")
            # the IR names of the parameters (user names are escaped where they look like
            # compiler names: coarsen.frontend.names.Namer)
            wrt_ir = tuple(fn_ir.params[self.params.index(w)] for w in wrt)
            facts = analyze(fn_ir, wrt_ir)
            module, em = differentiate_ir(fn_ir, wrt_ir, facts, entry_name, coarsen=self.coarsen,
                                          workspace=workspace, boundscheck=self.boundscheck)
            plan = [_plan_entry(seg) for seg in em.segments]
            header = (f"Generated by coarsen {__version__} from {self.fn.__module__}.{self.fn.__qualname__} "
                      f"({display_path(self.fn)}:{self.src.node.lineno})\n"
                      f"signature: ({', '.join(sig)}); wrt: {', '.join(wrt)}; "
                      f"{'coarse' if self.coarsen else 'fine-grained'} AD")
            source = lowering.render(module, target="python" if workspace else self.target, header=header)
            from .ir.printer import format_function
            ir_text = format_function(fn_ir)
            try:
                lowering.store_source(cache_key, source, {"ir": ir_text, "wrt": list(wrt), "plan": plan},
                                      parts=key_parts)
            except lowering.LoweringError:
                pass
        transform = time.perf_counter() - t0
        mod = lowering.build(source, name=self.fn.__name__, target="python" if workspace else self.target)
        entry = getattr(mod, entry_name)
        spec = Specialization(tuple(sig), wrt, source, mod, entry, ir_text, plan, transform,
                              cached=cached is not None, written=written, dependencies=deps)
        self._specs[key] = spec
        return spec

    def _prepare(self, args):
        types, sig = self._signature(args)
        spec = self._specialize(types, sig)
        self._last = spec
        conv = []
        for a in tuple(args) + tuple(self._global_arrays):
            if isinstance(a, np.ndarray) and a.dtype.kind == "f" and a.dtype != np.float64:
                a = a.astype(np.float64)
            elif isinstance(a, np.ndarray) and a.dtype.kind in "iu" and a.dtype != np.int64:
                a = a.astype(np.int64)
            elif isinstance(a, (np.floating,)):
                a = float(a)
            elif isinstance(a, np.integer):
                a = int(a)
            conv.append(a)
        return spec, conv

    def _run(self, args):
        # Fast path: the same argument kinds as a previous call need no conversion and no
        # signature work; this keeps the per-call overhead to a few microseconds.
        key = tuple((a.dtype.num, a.ndim) if type(a) is np.ndarray else type(a) for a in args)
        hit = self._fast.get(key)
        if hit is not None:
            spec, plain, casts = hit
            self._last = spec
            if spec.written:
                self._check_aliasing(args, spec.written)
            if plain:
                value, grads, tape = spec.entry(*args, *self._global_arrays)
                self.tape_bytes = 8 * (tape[0] + tape[1])
                res = tuple(g if arr else float(g) for g, arr in zip(grads, casts))
                return float(value), (res[0] if self._single else res)
        spec, conv = self._prepare(args)
        if spec.written:
            self._check_aliasing(args, spec.written)
        t0 = time.perf_counter()
        value, grads, tape = spec.entry(*conv)
        self.tape_bytes = 8 * (int(tape[0]) + int(tape[1]))
        if not spec.compiled:
            spec.compile_seconds = time.perf_counter() - t0
            spec.compiled = True
        out = []
        plain = all(c is a for c, a in zip(conv, args))
        for name, gr in zip(spec.wrt, grads):
            a = args[self.params.index(name)]
            if isinstance(a, np.ndarray):
                if a.dtype != np.float64:
                    plain = False
                gr = np.asarray(gr).astype(a.dtype, copy=False)
            else:
                gr = float(gr)
            out.append(gr)
        if len(self._fast) < 64:
            is_array = tuple(isinstance(args[self.params.index(n)], np.ndarray) for n in spec.wrt)
            self._fast[key] = (spec, plain, is_array)
        res = out[0] if self._single else tuple(out)
        return float(value), res

    def _bind(self, args, kwargs):
        """Positional, keyword and default arguments bound as the function binds them."""
        try:
            bound = self._pysig.bind(*args, **kwargs)
        except TypeError as exc:
            raise CoarsenError(f"{self.fn.__name__} takes {self._nparams} arguments {self._pysig}, "
                               f"got {len(args) + len(kwargs)}: {exc}",
                               hint="pass each parameter once, by position or by name") from None
        bound.apply_defaults()
        return tuple(bound.arguments[p] for p in self.params)

    def _check_aliasing(self, args, written):
        """Refuse array arguments (module-level arrays included) that overlap in memory when the
        function writes either: the generated code copies written arrays at entry, so it would
        not see one write through the other as the function itself does."""
        arrays = [(i, a) for i, a in enumerate(args) if isinstance(a, np.ndarray)]
        if self._global_arrays:
            arrays += [(self._nparams + k, a) for k, a in enumerate(self._global_arrays)]
        n = len(arrays)
        if n < 2:
            return
        for x in range(n):
            i, a = arrays[x]
            for y in range(x + 1, n):
                j, b = arrays[y]
                if (i in written or j in written) and np.may_share_memory(a, b) \
                        and np.shares_memory(a, b):
                    raise self._alias_error(i, j, written)

    def _alias_error(self, i, j, written):
        fname = self.fn.__name__

        def what(k):
            return f"parameter {self.params[k]!r}" if k < self._nparams else \
                f"a module-level array that {fname} reads"
        names = [self.params[k] for k in (i, j) if k < self._nparams and k in written]
        return CoarsenError(
            f"{what(i)} and {what(j)} of {fname} overlap in memory, and {fname} writes "
            f"{' and '.join(repr(n) for n in names)}; the gradient would treat them as separate arrays",
            hint=f"pass a copy of one of them (e.g. {self.params[j if j < self._nparams else i]}.copy())")

    def __call__(self, *args, **kwargs):
        if kwargs or len(args) != self._nparams:
            args = self._bind(args, kwargs)
        return self._run(args)[1]

    def value_and_grad(self, *args, **kwargs):
        if kwargs or len(args) != self._nparams:
            args = self._bind(args, kwargs)
        return self._run(args)

    # ------------------------------------------------------------------ inspection
    @property
    def source(self):
        if self._last is None:
            raise CoarsenError("the gradient is specialized on its first call's argument types; "
                               "call it once (or use g.source_for(*args)) before reading g.source")
        return self._last.source

    def source_for(self, *args):
        types, sig = self._signature(args)
        return self._specialize(types, sig).source

    def ir(self, *args):
        """The IR text of the function specialized for ``args``."""
        types, sig = self._signature(args)
        return self._specialize(types, sig).ir_text

    def report(self, *args, file=None):
        """The segment plan of the specialization for ``args`` (default: the last call's):
        prints it and returns a ``Report`` (a list of one dict per segment of interest)."""
        if args:
            types, sig = self._signature(args)
            spec = self._specialize(types, sig)
            self._last = spec
        elif self._last is not None:
            spec = self._last
        else:
            raise CoarsenError("call the gradient once (or pass example arguments to report) first")
        rep = Report(self.fn.__qualname__, spec.signature, self.coarsen, spec.plan,
                     spec.transform_seconds, getattr(self, "tape_bytes", None))
        import sys
        print(rep.format(), file=file or sys.stdout)
        return rep

    tape_bytes = None

    # ------------------------------------------------------------------ export and batches
    def export(self, path, signature=None):
        """Write the gradient as a standalone module (math, NumPy and Numba only); see
        ``coarsen.export``.  ``signature`` in Numba notation, e.g. "float64[:], int64";
        default: the signature of the last call."""
        from .export import export_gradient
        return export_gradient(self, path, signature=signature)

    def batch(self, in_axes, *, target=None):
        """A batched gradient over argument sets, like ``jax.vmap``: see ``coarsen.batching``."""
        from .batching import batched_gradient
        return batched_gradient(self, in_axes, target=target)

    def specialize(self, args_or_types):
        """The ``Specialization`` for example arguments (a tuple of values)."""
        types, sig = self._signature(tuple(args_or_types))
        return self._specialize(types, sig)

    def signature_of(self, args):
        """``(types, signature)`` of example ``args`` (one per parameter): ``types`` are the IR
        types (module-level arrays' appended), ``signature`` the parameters' Numba type texts."""
        return self._signature(tuple(args))

    def specialization(self, types, signature, *, workspace=False):
        """The ``Specialization`` for ``signature_of``'s ``(types, signature)``;
        ``workspace=True`` is the scalar-only variant whose tapes are passed in (CUDA)."""
        return self._specialize(types, signature, workspace)

    @property
    def module_arrays(self):
        """The module-level arrays the function reads, in the order the generated entry takes
        them (after the parameters), as a tuple: read-only inputs."""
        return tuple(self._global_arrays)

    @property
    def last_specialization(self):
        """The ``Specialization`` of the last call (or ``report``), or ``None`` before any."""
        return self._last

    @property
    def returns_single(self):
        """True when ``wrt`` was one name or position: the gradient is a single value, not a
        tuple."""
        return bool(self._single)

    def __repr__(self):
        return f"<coarsen gradient of {self.fn.__qualname__}>"


def _plan_entry(seg):
    """One segment of interest as plain data (JSON-serializable, cached with the source)."""
    info = seg.info
    jac = info.get("jac")
    lines = info.get("lines") or (seg.loc.lineno, seg.loc.lineno)
    entry = {
        "segment": seg.index,
        "lines": list(lines),
        "kind": info.get("kind", "block"),
        "inputs": list(seg.inputs),
        "outputs": list(seg.outputs),
        "ops_before": int(jac.ops_before) if jac is not None else None,
        "ops_after": int(jac.ops_after) if jac is not None else None,
        "closed_form": info.get("formula") if info.get("kind") == "loop" else None,
        "closed_form_fallback": info.get("closed_form_fallback"),
        "fallback": info.get("fallback"),
        "formula": info.get("formula"),
    }
    if entry["kind"] == "loop" and jac is not None:
        # a closed form replaces a loop: fine AD would pay per trip; count one trip's worth
        entry["ops_before"] = None
    return entry


@dataclass
class Report:
    """The segment plan of one specialization (see ``Gradient.report``)."""
    function: str
    signature: tuple
    coarsen: bool
    segments: list
    transform_seconds: float
    tape_bytes: object = None

    def __iter__(self):
        return iter(self.segments)

    def __len__(self):
        return len(self.segments)

    def __getitem__(self, k):
        return self.segments[k]

    def __repr__(self):
        # short, so that ``g.report()`` at a REPL prompt does not echo the plan a second time
        n = len(self.segments)
        mode = "coarse" if self.coarsen else "fine-grained"
        return f"<coarsen Report of {self.function}: {mode}, {n} segment{'' if n == 1 else 's'}>"

    def __str__(self):
        return self.format()

    def format(self):
        out = [f"coarsen plan for {self.function}({', '.join(self.signature)}), "
               f"{'coarse' if self.coarsen else 'fine-grained (coarsen=False): no segments'}"]
        for e in self.segments:
            a, b = e["lines"]
            where = f"line {a}" if a == b else f"lines {a}-{b}"
            head = f"  segment {e['segment']} ({where}, {e['kind']})"
            if e["fallback"]:
                out.append(f"{head}: fine-grained fallback: {e['fallback']}")
                continue
            ops = ""
            if e["ops_after"] is not None:
                ops = f", ops {e['ops_before']} fine -> {e['ops_after']} coarse" if e["ops_before"] is not None \
                    else f", {e['ops_after']} ops, independent of the trip count"
            out.append(f"{head}: in ({', '.join(e['inputs'])}) out ({', '.join(e['outputs'])}){ops}")
            if e["closed_form"]:
                out.append(f"    closed form: {e['closed_form']}")
            elif e.get("closed_form_fallback"):
                out.append(f"    loop kept: {e['closed_form_fallback']}")
            if e["formula"] and not e["closed_form"]:
                out.append(f"    {e['formula']}")
        out.append(f"  symbolic + code generation time: {self.transform_seconds:.3f} s")
        if self.tape_bytes is not None:
            out.append(f"  tape of the last call: {self.tape_bytes} bytes")
        return "\n".join(out)


def ir_text(fn, *args):
    """The IR of ``fn`` specialized for example ``args``, as text (in the spirit of a jaxpr):
    one primitive per line with its type, loops and branches as nested regions, the gamma and
    mu phis of merged and loop-carried variables.  For the plan after coarsening, see
    ``differentiate(fn).ir(*args)`` and ``.report(*args)``."""
    return Gradient(fn, None, False, "python").ir(*args)


def differentiate(fn, wrt=None, *, coarsen=True, target="cpu", boundscheck=True):
    """The gradient of ``fn``, a plain Python function returning a float scalar.

    ``wrt``: None (every float parameter, a tuple out), a name or position (a single value out),
    or a tuple/list of names or positions (a tuple out, in that order).
    ``coarsen``: True differentiates segments symbolically; False uses fine-grained
    algorithmic AD only (the paper's baseline).  ``target``: "cpu" (Numba) or "python".
    ``boundscheck``: True raises ``IndexError`` naming the source line for an index out of
    range (before the access); False leaves indices unchecked (out of range is then undefined).
    """
    return Gradient(fn, wrt, coarsen, target, boundscheck)
