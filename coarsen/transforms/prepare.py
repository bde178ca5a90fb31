"""The front of every transform's pipeline: one function's source lowered for one signature.

Requires: a Python function (or a Numba dispatcher) with source, a ``Signature``
(``coarsen.transforms.artifact``) and the transform's ``wrt`` option.
Guarantees: ``lower_for(...)`` returns a ``Lowered`` (the untyped IR, whose record of reads
makes the cache key, the module-level arrays it found, the full list of IR types, the written
positions and the resolved ``wrt``), or raises ``CoarsenError`` when the module-level arrays
were rebound since the transform was made or the signature does not fit; ``typed_ir`` types
that IR for the signature (where an ``np.array([...])`` turns out to hold arrays, it lowers
the function again with that call as NumPy's stack), refuses a result that is not one float,
and scalarizes element-wise array code on the cpu target (``coarsen.ir.scalarize``); ``code_fingerprint()`` is the hash of
coarsen's own source (a cache key part: an entry made by other compiler code never loads).
``compile_gradient`` (``coarsen.transforms.gradient``), ``compile_jvp`` (``coarsen.transforms.jvp``) and the
instrumented build of ``coarsen.transforms.tape_lines`` share them, so the three read a function the same
way.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
from dataclasses import dataclass

from .. import lowering
from .version import __version__
from .artifact import arg_type, resolve_wrt, written_positions
from ..errors import CoarsenError
from ..frontend.lower import lower
from ..frontend.source import get_source, unwrap
from ..ir.nodes import Array, Scalar
from ..ir.scalarize import scalarize
from ..ir.slice_chains import compose_slice_chains
from ..ir.transposed_products import transposed_products
from ..ir.hoist import hoist_invariant_calls
from ..ir.typeinfer import infer
from ..ir.primitives.constructors import ARRAYS_IN_LITERAL
from ..frontend.joins import STACKED_SITES


def _code_fingerprint():
    h = hashlib.sha256(__version__.encode())
    # the whole package (this file is in coarsen/transforms/: its folder alone left the
    # frontend, ir, codegen and ad out, and entries of other compiler code loaded)
    roots = [os.path.dirname(os.path.dirname(__file__)), os.path.dirname(lowering.__file__)]
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
    """Hash of coarsen's own source (computed once per process)."""
    global _FINGERPRINT
    if _FINGERPRINT is None:
        _FINGERPRINT = _code_fingerprint()
    return _FINGERPRINT


@dataclass(frozen=True, eq=False)
class Lowered:
    """One function lowered for one signature (before types)."""
    fn: object                  # the plain Python function
    src: object                 # its ``FunctionSource``
    params: list                # the parameters' source names
    wrt: tuple                  # the resolved ``wrt`` (source names)
    fn_ir: object               # the untyped ``ir.Function`` (``infer`` fills it in)
    arrays: tuple               # the module-level arrays it reads, in entry order
    array_texts: tuple          # their Numba type texts
    types: tuple                # IR types: parameters, then module-level arrays
    written: frozenset          # positions (parameters, then module arrays) it may write


def lower_for(fn, signature, wrt, *, module_arrays=None, transform="coarsen.differentiate"):
    """Lower ``fn`` for ``signature`` (see the module docstring).  ``module_arrays``, when
    given, are the arrays the caller saw when the transform was made: the lowering must find
    the same objects.  ``signature.types`` may leave out the module-level arrays' types."""
    fn = unwrap(fn)
    src = get_source(fn)                    # raises CoarsenError when there is no source
    params = [a.id for a in src.node.args.args]
    n = len(params)
    wrt = resolve_wrt(wrt, params, signature.types, fn.__name__)
    # Lowered once per artifact, and this one IR serves both uses: its record of reads (with
    # the module-level arrays it found and what it writes) makes the cache key, and on a miss
    # the same object goes on through the later stages.  It is lowered here, not reused from
    # the fence the transform ran when it was made: the key must describe the lowering the
    # code comes from, read when the signature is first specialized (README), and each
    # signature needs an untyped IR of its own (infer fills in and rewrites it).
    fn_ir, _ = lower(fn)
    arrays = tuple(fn_ir.global_arrays)
    if module_arrays is not None and [id(a) for a in arrays] != [id(a) for a in module_arrays]:
        raise CoarsenError(f"the module-level arrays that {fn.__name__} reads were rebound "
                           f"after {transform}() was called",
                           hint=f"call {transform} again after changing module-level arrays")
    array_types = [arg_type("<module-level array>", a) for a in arrays]
    types = tuple(signature.types)
    if len(types) == n:
        types += tuple(t for t, _ in array_types)
    if len(signature.texts) != n or list(types[n:]) != [t for t, _ in array_types]:
        raise CoarsenError(f"the signature {signature} does not match {fn.__name__}'s {n} parameters "
                           f"and {len(arrays)} module-level arrays",
                           hint="build it with Signature.of(params, args, module_arrays)")
    # with the types: only arrays are written (a float among them sent every call through
    # the slow path, which checks arrays for aliasing and converts the arguments)
    return Lowered(fn, src, params, wrt, fn_ir, arrays, tuple(text for _, text in array_types),
                   types, written_positions(fn_ir, types))


def _inferred(fn_ir, types, src):
    """``fn_ir`` typed (``infer``); where an ``np.array([...])`` of ``src``'s function holds
    arrays (which the lowering, without types, wrote as element stores: inference refuses
    them at the call), the function lowered again with each such call as a stack of its
    elements (``coarsen.frontend.joins.STACKED_SITES``), found one at a time, and typed.
    Other functions are inferred once, as before."""
    sites = frozenset()
    while True:
        try:
            infer(fn_ir, list(types))
            return fn_ir
        except CoarsenError as e:
            site = (e.filename, e.lineno, e.col_offset)
            if e.problem != ARRAYS_IN_LITERAL or site in sites:
                raise
            sites = sites | {site}
        token = STACKED_SITES.set(sites)
        try:
            fn_ir, _ = lower(src.fn)
        finally:
            STACKED_SITES.reset(token)


def typed_ir(fn_ir, types, src, options, *, transform="coarsen", float_arrays=False):
    """``fn_ir`` typed for ``types`` (in place, as ``infer`` does), its result checked to be
    one float (or, with ``float_arrays``, a float64 array: forward mode), then scalarized on
    the cpu target when ``options.scalarize`` (a new ``Function``), and its loop-invariant
    transcendental calls hoisted into tables on the cpu target (``coarsen.ir.hoist``):
    Numba's scalar math follows NumPy's (``inf`` and ``nan``,
    ``error_model='numpy'``) where Python's raises (``ZeroDivisionError``, math domain
    errors), so the python target keeps array code and its calls where they were."""
    fn_ir = _inferred(fn_ir, types, src)
    check_returns_float(fn_ir, src, transform, float_arrays=float_arrays)
    if getattr(options, "scalarize", False) and options.build_target == "cpu":
        # r[:k][::-1] as one slice of r, which the nests then read (coarsen.ir.slice_chains)
        fn_ir = scalarize(compose_slice_chains(fn_ir))
        # A.T @ v as v @ A: the matrix read in its layout, its adjoint added in place
        fn_ir = transposed_products(fn_ir)
    if getattr(options, "build_target", None) == "cpu":
        # loop-invariant transcendental calls in tables before their loops (coarsen.ir.hoist)
        fn_ir = hoist_invariant_calls(fn_ir)
    return fn_ir


def check_returns_float(fn_ir, src, transform="coarsen", *, float_arrays=False):
    """Refuse (at the last ``return``) a function whose typed result is not a float scalar
    (nor, with ``float_arrays``, a float64 array)."""
    rt = fn_ir.types.get(fn_ir.result)
    if isinstance(rt, Scalar) and rt.kind == "f64":
        return
    if float_arrays and isinstance(rt, Array) and rt.dtype == "f64":
        return
    what = "an array" if isinstance(rt, Array) else ("an integer" if rt == Scalar("i64") else str(rt))
    import gast
    rets = [n for n in gast.walk(src.node) if isinstance(n, gast.Return)]
    at = rets[-1] if rets else src.node
    kinds = "one float scalar or a float64 array" if float_arrays else "one float scalar"
    raise CoarsenError(f"{src.fn.__name__} returns {what}; {transform} differentiates functions "
                       f"that return {kinds}",
                       filename=src.filename, lineno=at.lineno, col_offset=at.col_offset,
                       source_line=src.line(at.lineno),
                       hint="return a scalar objective, e.g. np.sum(...) or float(...)")
