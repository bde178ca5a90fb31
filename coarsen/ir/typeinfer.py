"""Type inference: one type per variable, specialized on the argument types of a call.

Requires: an ``ir.Function`` from the frontend and the parameters' types.
Guarantees: ``fn.types`` maps every variable to a ``Scalar`` or ``Array`` type (ints and
floats unify to f64 as in Numba); ``fn.views`` maps every variable that may alias another
array (slices, ``.T``, reshapes, plain ``b = a``) to the array it views.  Ill-typed
programs (indexing a scalar, rank mismatches, a variable that is sometimes an array and
sometimes a scalar) raise ``CoarsenError`` at the offending line.  Augmented assignments to
arrays (``a += e``) become in-place stores, as in NumPy (``coarsen.ir.inplace``).  A growable
list's buffer (``list_start``, ``coarsen.frontend.growable``) takes the type its appends give it
(``list_grow`` is typed from the appended value), then starts as an empty array.  A
subscript's ``...`` is spelled out as the full slices it stands for (``expand_ellipses``; more
than one is refused, as NumPy does), and a read whose subscript holds 1-D integer arrays is
typed as NumPy's advanced indexing and split into its basic view and a ``gather``
(``coarsen.ir.fancy_index``); boolean masks, index arrays above 1-D and stores through index
arrays are refused.
"""
from __future__ import annotations

from dataclasses import replace

from ..errors import CoarsenError
from ..errors import at_stmt as _err
from .backward_typing import typed_backward
from .fancy_index import split_fancy
from .inplace import apply_inplace
from .list_items import check_appended
from .nodes import (ELLIPSIS, Array, Assign, BOOL, Const, F64, For, I64, If, NEWAXIS, Scalar, Slice,
                    Store, Var, While, blocks, uses, walk)
from .primitives import REGISTRY, dt as _dt, dtype_join as _dtype_join, nd as _nd, ops_where

VIEW_OPS = ops_where(lambda p: p.view)    # results that may alias operand 0


def unify(a, b, stmt, name, temp=False):
    """The type of a variable that is ``a`` in one place and ``b`` in another (ints join
    floats); ``CoarsenError`` where they cannot join (``temp``: ``name`` is the compiler's,
    the value of an expression, and the message says so instead of naming it)."""
    if a is None:
        return b
    if b is None or a == b:
        return a
    if isinstance(a, Scalar) and isinstance(b, Scalar):
        return Scalar(_dtype_join(a.kind, b.kind))
    if isinstance(a, Array) and isinstance(b, Array) and a.ndim == b.ndim:
        return Array(_dtype_join(a.dtype, b.dtype), a.ndim)
    if temp:
        raise _err(stmt, f"this expression is {_kind(a)} on one path and {_kind(b)} on another "
                   "(the two branches of a conditional expression, or the values a helper "
                   "returns, differ in rank or kind)",
                   "give both branches the same rank, e.g. index the array (A[0]) or broadcast "
                   "the scalar, or use an if statement with a variable per kind")
    raise _err(stmt, f"variable {name!r} is {a} in one place and {b} in another",
               "use a different variable name for each")


def _kind(t):
    if isinstance(t, Array):
        return f"a {t.ndim}-D {t.dtype} array"
    return {"f64": "a float", "i64": "an int", "bool": "a bool"}.get(getattr(t, "kind", None), str(t))


class Inference:
    def __init__(self, fn, param_types):
        self.fn = fn
        self.types = dict(zip(fn.params, param_types))
        self.changed = True

    def typed_backward(self, rule, residual_types, g_type):
        """A typed copy of a ``custom_vjp`` backward rule's body (``backward_typing``), for the
        type rule of ``custom_vjp_out``: the primitives cannot import inference."""
        return typed_backward(rule, residual_types, g_type, infer)

    def typeof(self, operand, stmt):
        if isinstance(operand, Const):
            v = operand.value
            if isinstance(v, bool):
                return BOOL
            if isinstance(v, int):
                return I64
            return F64
        t = self.types.get(operand.name)
        if t is None:
            raise _err(stmt, f"variable {operand.name!r} may be used before it is assigned",
                       "assign it on every path before its use")
        return t

    def set(self, name, t, stmt):
        old = self.types.get(name)
        new = unify(old, t, stmt, name, name in (self.fn.temps or ()))
        if new != old:
            self.types[name] = new
            self.changed = True

    def run(self):
        for _ in range(20):
            self.changed = False
            self.pending = []
            self.block(self.fn.body)
            if not self.changed:
                break
        # a last pass must see every variable typed
        self.strict = True
        self.block(self.fn.body)
        self.fn.types = self.types
        expand_ellipses(self.fn)
        split_fancy(self.fn)        # integer arrays in subscripts: gather (coarsen.ir.fancy_index)
        normalize_dims(self.fn)
        settle_result_starts(self.fn)
        apply_inplace(self.fn)      # a op= e on arrays: in-place stores (coarsen.ir.inplace)
        self.fn.views = self.views()
        check_appended(self.fn)     # a list's array elements are not changed after (ir.list_items)
        return self.types

    strict = False

    def block(self, stmts):
        for s in stmts:
            if isinstance(s, Assign) and s.attr("result_start"):
                # the result of a function with early returns, before any return: it has the
                # type the returns give it (a float if none does: no return reaches it)
                if s.target in self.types or self.strict:
                    self.set(s.target, self.types.get(s.target, F64), s)
                continue
            if isinstance(s, Assign) and s.attr("list_start"):
                # a growable list's buffer (coarsen.frontend.growable): typed by its appends
                if s.target in self.types:
                    self.set(s.target, self.types[s.target], s)
                elif self.strict:
                    raise _err(s, "a list that is never appended to is not supported",
                               "append to it, or remove it")
                continue
            if isinstance(s, Assign):
                try:
                    t = self.assign_type(s)
                except _Unknown:
                    if self.strict:
                        raise
                    continue
                if s.attr("inplace") and isinstance(s.args[0], Var) \
                        and isinstance(self.types.get(s.args[0].name), Array):
                    t = self.inplace_type(s, t)
                self.set(s.target, t, s)
            elif isinstance(s, Store):
                self.store(s)
            elif isinstance(s, If):
                self.block(s.body)
                self.block(s.orelse)
            elif isinstance(s, For):
                for b in (s.start, s.stop, s.step):
                    self.expect_int(b, s, "range() bounds")
                self.set(s.var, I64, s)
                self.block(s.body)
            elif isinstance(s, While):
                self.block(s.test_body)
                self.block(s.body)

    _AUG = {"add": "+=", "sub": "-=", "mul": "*=", "div": "/=", "pow": "**=", "floordiv": "//=",
            "mod": "%="}

    def inplace_type(self, s, t):
        """``a op= e`` with ``a`` an array updates ``a`` in place: its type stays (NumPy raises
        when the result would need another rank or a dtype ``a`` cannot hold)."""
        a = self.types[s.args[0].name]      # the array updated (its SSA web before ``s``)
        sym = self._AUG.get(s.op, s.op)
        rebind = f"write `a = a {sym[:-1]} ...` to make a new array instead"
        if _nd(t) > a.ndim:
            raise _err(s, f"`{sym}` updates a {a.ndim}-D array in place, but the right-hand side "
                       f"makes the result {_nd(t)}-D (NumPy raises ValueError: non-broadcastable "
                       "output operand)", rebind)
        if self.strict and a.dtype == "bool":
            raise _err(s, f"`{sym}` on a bool array is not supported", rebind)
        if self.strict and _dt(t) != a.dtype:
            raise _err(s, f"`{sym}` updates a {a.dtype} array in place, but the result is {_dt(t)} "
                       f"(NumPy raises UFuncTypeError: cannot cast the result to {a.dtype})",
                       "create the array with a float dtype (np.zeros(n)), or " + rebind)
        return a

    def expect_int(self, operand, stmt, what):
        try:
            t = self.typeof(operand, stmt)
        except CoarsenError:
            if self.strict:
                raise
            return
        if not (isinstance(t, Scalar) and t.kind in ("i64", "bool")):
            raise _err(stmt, f"{what} must be integers, got {t}", "convert with int(...)")

    def arg_types(self, s):
        out = []
        for k, a in enumerate(s.args):
            if k == 0 and s.op == "list_grow" and isinstance(a, Var) and a.name not in self.types:
                out.append(None)     # the list's buffer, typed by this append (primitives.lists)
                continue
            if isinstance(a, Var) and a.name not in self.types:
                if self.strict:
                    self.typeof(a, s)
                raise _Unknown()
            out.append(self.typeof(a, s))
        return out

    def index_type(self, s, arr_t, index, fancy=False):
        """The rank of ``arr_t[index]``; with ``fancy`` (a read) 1-D integer arrays among the
        items index as NumPy's advanced indexing does (``coarsen.ir.fancy_index``)."""
        if not isinstance(arr_t, Array):
            raise _err(s, f"cannot index a {arr_t} value", "only arrays can be indexed")
        nint = nslice = nnew = narr = 0
        if sum(1 for it in index if it == ELLIPSIS) > 1:
            raise _err(s, "an index can only have a single ellipsis ('...')")
        for it in index:
            if it == ELLIPSIS:
                continue
            if it == NEWAXIS:
                nnew += 1
            elif isinstance(it, Slice):
                nslice += 1
                for p in (it.lower, it.upper, it.step):
                    if p is not None:
                        self.expect_int(p, s, "slice bounds")
            else:
                t = self.typeof(it, s)
                if isinstance(t, Array):
                    self.check_fancy_item(s, t, fancy)
                    narr += 1
                    continue
                if t.kind == "f64":
                    raise _err(s, "array indices must be integers", "convert with int(...)")
                nint += 1
        if nint + narr + nslice > arr_t.ndim:
            raise _err(s, f"too many indices for a {arr_t.ndim}-D array")
        if narr:      # the advanced items (arrays and the integers beside them): one axis
            return arr_t.ndim - nint - narr + nnew + 1
        return arr_t.ndim - nint + nnew

    @staticmethod
    def check_fancy_item(s, t, fancy):
        """An array among a subscript's items: a 1-D integer array in a read."""
        if not fancy:
            raise _err(s, "assigning through an index array (fancy indexing) is not supported",
                       "write a loop over the indices")
        if t.dtype == "bool":
            raise _err(s, "indexing with a boolean mask is not supported (its length is known "
                          "only at run time)", "use np.where(mask, x, 0.0), or a loop")
        if t.dtype != "i64":
            raise _err(s, "array indices must be integers", "convert with .astype(np.int64)")
        if t.ndim != 1:
            raise _err(s, f"fancy indexing with a {t.ndim}-D index array is not supported",
                       "index with 1-D integer arrays (or lists of integers)")

    def assign_type(self, s):
        """The result type of ``s``: its primitive's type rule (``coarsen.ir.primitives``)."""
        prim = REGISTRY.get(s.op)
        if prim is None:
            raise _err(s, f"operation {s.op!r} is not supported")
        return prim.type_rule(self, s, self.arg_types(s))

    def store(self, s):
        arr = self.types.get(s.array)
        if arr is None:
            if self.strict:
                raise _err(s, f"{s.array!r} is assigned into before it is defined")
            return
        if not isinstance(arr, Array):
            raise _err(s, f"cannot assign into an element of the scalar {s.array!r}")
        try:
            nd = self.index_type(s, arr, s.index)
            vt = self.typeof(s.value, s)
        except CoarsenError:
            if self.strict:
                raise
            return
        if _nd(vt) > nd:
            raise _err(s, f"cannot store a {_nd(vt)}-D value into a {nd}-D part of {s.array!r}")
        if arr.dtype != "f64" and _dt(vt) == "f64":
            raise _err(s, f"storing a float into the {arr.dtype} array {s.array!r}",
                       "create the array with a float dtype (np.zeros(n))")

    def views(self):
        """view variable -> the array variable it aliases (transitively to the root)."""
        base = {}
        reads = {}
        for s in walk(self.fn.body):
            for u in uses(s):
                if isinstance(u, Var):
                    reads[u.name] = reads.get(u.name, 0) + 1
        temps = getattr(self.fn, "temps", frozenset())
        for s in walk(self.fn.body):
            if isinstance(s, Assign) and s.op in VIEW_OPS and isinstance(self.types.get(s.target), Array):
                src = s.args[0]
                if isinstance(src, Var) and isinstance(self.types.get(src.name), Array):
                    if s.op == "copy" and src.name in temps and reads.get(src.name) == 1:
                        # a, b = b.copy(), a + b: each value is made in a temporary first, then
                        # moved into its target; the temporary is read nowhere else, so the
                        # target owns the array (it is not a view of anything)
                        continue
                    base[s.target] = src.name
        out = {}
        for v in base:
            b = base[v]
            seen = {v}
            while b in base and b not in seen:
                seen.add(b)
                b = base[b]
            out[v] = b
        return out


def spelled_out(index, ndim):
    """``index`` with its ``...`` (``ELLIPSIS``) as the full slices it stands for on an array
    of ``ndim`` axes (NumPy: as many as the other items leave, none, or more than one)."""
    if ELLIPSIS not in index:
        return index
    taken = sum(1 for it in index if it not in (ELLIPSIS, NEWAXIS))
    k = index.index(ELLIPSIS)
    return index[:k] + (Slice(None, None, None),) * (ndim - taken) + index[k + 1:]


def expand_ellipses(fn):
    """Every ``...`` of a subscript spelled out as full slices (in place, ``fn`` typed): no
    later pass meets ``ELLIPSIS``."""
    for block in blocks(fn.body):
        for n, s in enumerate(block):
            if isinstance(s, Assign) and ELLIPSIS in s.index:
                block[n] = replace(s, index=spelled_out(s.index, fn.types[s.args[0].name].ndim))
            elif isinstance(s, Store) and ELLIPSIS in s.index:
                block[n] = replace(s, index=spelled_out(s.index, fn.types[s.array].ndim))


def normalize_dims(fn):
    """``x.shape[-k]`` as ``x.shape[ndim - k]`` (in place, ``fn`` typed): every later pass
    (bounds proofs, reductions, scalarization) sees one spelling of each axis."""
    for block in blocks(fn.body):
        for n, s in enumerate(block):
            if isinstance(s, Assign) and s.op == "dim" and isinstance(s.args[1], Const) \
                    and s.args[1].value < 0:
                ndim = fn.types[s.args[0].name].ndim
                block[n] = replace(s, args=(s.args[0], Const(s.args[1].value + ndim)))


def settle_result_starts(fn):
    """The result's value before any return (``RESULT_START``), in place: a zero of the type
    the returns gave it, an empty array for an array (never read: the ``_returned`` flag
    guards every use), so that a helper or a JVP may return an int or an array early."""
    for block in blocks(fn.body):
        for n, s in enumerate(block):
            if not (isinstance(s, Assign) and (s.attr("result_start") or s.attr("list_start"))):
                continue
            t = fn.types[s.target]
            if isinstance(t, Array):
                if t.dtype not in ("f64", "i64"):
                    raise _err(s, f"a function with several returns that returns a {t.dtype} array",
                               "return from one place (assign the result, then return it once)")
                block[n] = Assign(s.target, "zeros", (Const(0),) * t.ndim, s.loc,
                                  attrs=(("dtype", t.dtype), ("ndim", t.ndim)))
            else:
                zero = {"i64": 0, "bool": False}.get(getattr(t, "kind", None), 0.0)
                block[n] = Assign(s.target, "copy", (Const(zero),), s.loc)


class _Unknown(Exception):
    pass


def infer(fn, param_types):
    return Inference(fn, param_types).run()
