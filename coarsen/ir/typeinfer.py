"""Type inference: one type per variable, specialized on the argument types of a call.

Requires: an ``ir.Function`` from the frontend and the parameters' types.
Guarantees: ``fn.types`` maps every variable to a ``Scalar`` or ``Array`` type (ints and
floats unify to f64 as in Numba); ``fn.views`` maps every variable that may alias another
array (slices, ``.T``, reshapes, plain ``b = a``) to the array it views.  Ill-typed
programs (indexing a scalar, rank mismatches, a variable that is sometimes an array and
sometimes a scalar) raise ``CoarsenError`` at the offending line.  Augmented assignments to
arrays (``a += e``) become in-place stores, as in NumPy (``coarsen.ir.inplace``).
"""
from __future__ import annotations

from ..errors import CoarsenError
from .inplace import apply_inplace
from .nodes import (Array, Assign, BOOL, Const, F64, For, I64, If, NEWAXIS, Scalar, Slice,
                    Store, Var, While, walk)

ELEMENTWISE_UNARY = {"neg", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh",
                     "tanh", "arcsinh", "arccosh", "arctanh", "exp", "expm1", "log", "log1p",
                     "log10", "log2", "sqrt", "abs", "erf", "erfc", "floor", "ceil", "sign",
                     "lgamma", "gamma"}
ELEMENTWISE_BINARY = {"add", "sub", "mul", "div", "pow", "floordiv", "mod", "minimum",
                      "maximum", "arctan2", "hypot", "logaddexp"}
COMPARE = {"lt", "le", "gt", "ge", "eq", "ne"}
FLOAT_RESULT = {"div", "arctan2", "hypot", "logaddexp", "sin", "cos", "tan", "arcsin", "arccos",
                "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "exp",
                "expm1", "log", "log1p", "log10", "log2", "sqrt", "erf", "erfc", "lgamma",
                "gamma"}
VIEW_OPS = {"copy", "getitem", "transpose", "reshape", "expand_dims", "flip", "ravel"}


def _err(stmt, problem, hint=None):
    loc = stmt.loc
    return CoarsenError(problem, filename=loc.filename, lineno=loc.lineno, col_offset=loc.col,
                        source_line=loc.text, hint=hint)


def _dtype_join(a, b):
    if "f64" in (a, b):
        return "f64"
    if "i64" in (a, b):
        return "i64"
    return "bool" if a == b == "bool" else "i64"


def _dt(t):
    return t.kind if isinstance(t, Scalar) else t.dtype


def _nd(t):
    return t.ndim if isinstance(t, Array) else 0


def _make(dtype, ndim):
    if ndim == 0:
        return Scalar(dtype)
    return Array(dtype, ndim)


def unify(a, b, stmt, name):
    if a is None:
        return b
    if b is None or a == b:
        return a
    if isinstance(a, Scalar) and isinstance(b, Scalar):
        return Scalar(_dtype_join(a.kind, b.kind))
    if isinstance(a, Array) and isinstance(b, Array) and a.ndim == b.ndim:
        return Array(_dtype_join(a.dtype, b.dtype), a.ndim)
    raise _err(stmt, f"variable {name!r} is {a} in one place and {b} in another",
               "use a different variable name for each")


class Inference:
    def __init__(self, fn, param_types):
        self.fn = fn
        self.types = dict(zip(fn.params, param_types))
        self.changed = True

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
        new = unify(old, t, stmt, name)
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
        apply_inplace(self.fn)      # a op= e on arrays: in-place stores (coarsen.ir.inplace)
        self.fn.views = self.views()
        return self.types

    strict = False

    def block(self, stmts):
        for s in stmts:
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
        for a in s.args:
            if isinstance(a, Var) and a.name not in self.types:
                if self.strict:
                    self.typeof(a, s)
                raise _Unknown()
            out.append(self.typeof(a, s))
        return out

    def index_type(self, s, arr_t, index):
        if not isinstance(arr_t, Array):
            raise _err(s, f"cannot index a {arr_t} value", "only arrays can be indexed")
        nint = nslice = nnew = 0
        for it in index:
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
                    raise _err(s, "indexing with arrays (fancy indexing) is not supported",
                               "index with integers and slices, or write a loop")
                if t.kind == "f64":
                    raise _err(s, "array indices must be integers", "convert with int(...)")
                nint += 1
        if nint + nslice > arr_t.ndim:
            raise _err(s, f"too many indices for a {arr_t.ndim}-D array")
        return arr_t.ndim - nint + nnew

    def assign_type(self, s):
        op = s.op
        ts = self.arg_types(s)
        if op in ELEMENTWISE_BINARY or op == "pow":
            a, b = ts
            nd = max(_nd(a), _nd(b))
            if op in FLOAT_RESULT:
                dt = "f64"
            elif op == "pow":
                exp_nonneg_int = isinstance(s.args[1], Const) and isinstance(s.args[1].value, int) \
                    and s.args[1].value >= 0
                dt = _dtype_join(_dt(a), _dt(b))
                if dt != "f64" and not exp_nonneg_int:
                    dt = "f64"
            else:
                dt = _dtype_join(_dt(a), _dt(b))
            if op == "matmul":
                pass
            return _make(dt, nd)
        if op in ELEMENTWISE_UNARY:
            (a,) = ts
            if op in FLOAT_RESULT:
                return _make("f64", _nd(a))
            if op in ("floor", "ceil", "sign"):
                return _make("f64", _nd(a)) if _dt(a) == "f64" else _make(_dt(a), _nd(a))
            dt = _dt(a)
            return _make("i64" if dt == "bool" else dt, _nd(a))
        if op in COMPARE:
            return _make("bool", max(_nd(t) for t in ts))
        if op in ("not", "truth"):
            if any(isinstance(t, Array) for t in ts):
                raise _err(s, "the truth value of an array is ambiguous", "use np.any/np.all explicitly (not supported) or compare scalars")
            return BOOL
        if op in ("or", "and"):
            return BOOL
        if op == "range_cont":
            return BOOL
        if op == "copy":
            return ts[0]
        if op == "float":
            if isinstance(ts[0], Array):
                raise _err(s, "float() of an array", "index the element first")
            return F64
        if op == "int":
            if isinstance(ts[0], Array):
                raise _err(s, "int() of an array", "index the element first")
            return I64
        if op == "astype":
            return _make(s.attr("dtype"), _nd(ts[0]))
        if op == "where":
            c, a, b = ts
            return _make(_dtype_join(_dt(a), _dt(b)), max(_nd(c), _nd(a), _nd(b)))
        if op == "getitem":
            nd = self.index_type(s, ts[0], s.index)
            return _make(ts[0].dtype, nd)
        if op == "dim":
            if not isinstance(ts[0], Array):
                raise _err(s, "len()/shape of a scalar")
            k = s.args[1].value
            if not 0 <= k < ts[0].ndim:
                raise _err(s, f"shape index {k} out of range for a {ts[0].ndim}-D array")
            return I64
        if op in ("size", "ndim"):
            return I64
        if op in ("sum", "prod", "amax", "amin", "mean", "std", "var"):
            a = ts[0]
            if not isinstance(a, Array):
                if op in ("sum", "prod", "amax", "amin", "mean"):
                    return _make("f64" if op == "mean" else _dt(a), 0)
                raise _err(s, f"{op} of a scalar")
            axis = s.attr("axis")
            keep = s.attr("keepdims")
            dt = "f64" if op in ("mean", "std", "var") or a.dtype == "f64" else "i64"
            if axis is None:
                return _make(dt, a.ndim if keep else 0)
            if not -a.ndim <= axis < a.ndim:
                raise _err(s, f"axis {axis} is out of range for a {a.ndim}-D array")
            return _make(dt, a.ndim if keep else a.ndim - 1)
        if op in ("matmul", "dot"):
            a, b = ts
            if isinstance(a, Scalar) or isinstance(b, Scalar):
                if op == "dot":
                    return _make(_dtype_join(_dt(a), _dt(b)), max(_nd(a), _nd(b)))
                raise _err(s, "@ needs arrays on both sides")
            if a.ndim > 2 or b.ndim > 2:
                raise _err(s, f"{'@' if op == 'matmul' else 'dot'} of arrays with more than 2 dimensions is not supported")
            nd = {(2, 2): 2, (2, 1): 1, (1, 2): 1, (1, 1): 0}[(a.ndim, b.ndim)]
            return _make(_dtype_join(a.dtype, b.dtype), nd)
        if op == "transpose":
            if not isinstance(ts[0], Array):
                raise _err(s, ".T of a scalar")
            return ts[0]
        if op == "flip":
            return ts[0]
        if op == "ravel":
            return _make(_dt(ts[0]), 1)
        if op == "reshape":
            for d in s.args[1:]:
                self.expect_int(d, s, "reshape dimensions")
            return _make(_dt(ts[0]), len(s.args) - 1)
        if op == "expand_dims":
            return _make(_dt(ts[0]), _nd(ts[0]) + 1)
        if op == "copyarr":
            return ts[0]
        if op in ("zeros", "ones", "empty", "full"):
            nd = s.attr("ndim")
            for d in s.args[:nd]:
                self.expect_int(d, s, "array shapes")
            return _make(s.attr("dtype"), nd)
        if op in ("zeros_like", "ones_like", "empty_like", "full_like"):
            a = ts[0]
            if not isinstance(a, Array):
                raise _err(s, f"np.{op} of a scalar")
            how = s.attr("dtype")
            if how in ("like", "elements"):
                # dtype=x.dtype ("like") and np.array([...]) ("elements"): the dtype of the
                # operands after the op's own (coarsen.frontend.array_literals)
                return Array(self.dtype_of_operands(s, ts[2 if op == "full_like" else 1:], how), a.ndim)
            return Array(how or a.dtype, a.ndim)
        if op == "eye":
            self.expect_int(s.args[0], s, "np.eye size")
            return Array(s.attr("dtype"), 2)
        raise _err(s, f"operation {op!r} is not supported")

    def dtype_of_operands(self, s, ts, how):
        """NumPy's dtype for ``dtype=x.dtype`` (``how == "like"``: ``x``'s, an array) or for
        ``np.array`` of scalars (``"elements"``: float if any is, else int); bool is refused (the
        constructors emit float or int arrays only)."""
        if how == "like" and not isinstance(ts[0], Array):
            raise _err(s, "x.dtype of a scalar", "use the dtype itself: np.float64 or np.int64")
        if how == "elements" and any(isinstance(t, Array) for t in ts):
            raise _err(s, "np.array of a list holding arrays is not supported (NumPy would stack them)",
                       "np.array([...]) takes scalars; allocate np.empty((k, n)) and assign rows a[i] = row")
        out = _dt(ts[0])
        for t in ts[1:]:
            out = _dtype_join(out, _dt(t))
        if out == "bool":
            raise _err(s, "a bool array made by np.array([...]) or dtype=x.dtype is not supported",
                       "use float or int values")
        return out

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
        for s in walk(self.fn.body):
            if isinstance(s, Assign) and s.op in VIEW_OPS and isinstance(self.types.get(s.target), Array):
                src = s.args[0]
                if isinstance(src, Var) and isinstance(self.types.get(src.name), Array):
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


class _Unknown(Exception):
    pass


def infer(fn, param_types):
    return Inference(fn, param_types).run()
