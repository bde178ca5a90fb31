"""Bounds checks: which element accesses need an index check, and where it runs.

Requires: a typed ``ir.Function`` (after segment planning, so the structure is the one the
reverse mode emits).
Guarantees: ``plan_bounds(fn)`` returns a ``BoundsPlan``.  Every integer index of every
element read (``getitem``) and write (``Store``) is either

* *proven* in range, and gets no check: the index is a loop variable (or a loop variable
  plus a constant) of ``range(a, b)`` whose bounds are the indexed axis's length
  (``range(X.shape[1])`` indexing ``X[i, j]``, ``range(len(w))`` or ``range(n)`` with
  ``n = len(w)`` indexing ``w[j]``, ``range(1, n - 1)`` indexing ``u[i - 1]`` and ``u[i + 1]``),
  or the same array, axis and index were already accessed (and checked) with neither
  reassigned since, or the index is one ``fn.in_range`` names (``coarsen.ir.scalarize``'s loop
  nests, in range by construction);
* *hoisted*: checked once before the innermost ``for`` loop around it, when the access runs
  on every trip of that loop (not under an ``if`` in it), the array is not reassigned in the
  loop and the index is loop-invariant, the loop variable plus a constant with a unit
  step, or (in a loop of step 1) an induction variable of the loop: an int the body assigns
  once, by ``v = v + c`` on every trip, so that it runs through ``v + k``, ``v + k + c``, ...
  from its value before the loop (the check covers the first and the last index, the loop
  running at least once);
* or checked *inline*, just before the access.

A check accepts what Python accepts: ``-n <= index < n`` (negative indices wrap, in NumPy,
Numba and Python alike) and raises ``IndexError`` naming the source line.  Checks run in the
forward sweep, before the access; the reverse sweep re-uses the forward index values (tapes
restore them), so it needs none.  Slices need none: NumPy and Numba clip their bounds.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..codegen import build as B
from ..ir.nodes import (NEWAXIS, Array, Assign, Const, For, If, Segment, Slice, Store, Var, While,
                        assigned, walk)
from ..ir.primitives import REGISTRY


@dataclass(frozen=True)
class Check:
    """One index check: ``array.shape[axis]`` against ``index`` (an operand), or for a hoisted
    affine check against ``loop var + offset`` over the loop's range (``index`` is None)."""
    array: str
    axis: int
    index: object          # Var or Const, or None for the loop's range
    offset: int            # hoisted affine: the highest index is the loop variable + offset
    lower: bool            # check index >= -n
    upper: bool            # check index < n
    message: str
    low_offset: int = 0    # hoisted affine: the lowest index is the loop variable + low_offset
    per_trip: int = 0      # hoisted induction variable: ``index`` (its value before the loop)
    #                        plus ``offset`` on the first trip, growing by this much per trip


@dataclass
class BoundsPlan:
    inline: dict = field(default_factory=dict)     # id(stmt) -> [Check]
    hoisted: dict = field(default_factory=dict)    # id(For) -> [Check]
    counts: dict = field(default_factory=lambda: {"proven": 0, "hoisted": 0, "inline": 0})


def message(array, axis, loc):
    what = f"axis {axis} of {array}" if not array.startswith("_") else f"axis {axis}"
    where = f"{os.path.basename(loc.filename)}:{loc.lineno}"
    return f"index out of range ({what}) at {where}: {loc.text}"


# A form is (array, axis, c): the value array.shape[axis] + c, or (None, None, c): the constant c.

class _State:
    __slots__ = ("eq", "rng", "aff", "ok", "shp", "iv")

    def __init__(self, eq=None, rng=None, aff=None, ok=None, shp=None, iv=None):
        self.eq = dict(eq or {})      # int variable -> form (its exact value)
        self.rng = dict(rng or {})    # int variable -> (lo form, hi form): lo <= v <= hi
        self.aff = dict(aff or {})    # int variable -> (variable u, k): v == u + k
        self.ok = set(ok or ())       # (array, axis, ("v", name) | ("c", value)) checked
        self.shp = dict(shp or {})    # (array, axis) -> a form equal to array.shape[axis]
        # int variable -> (id of a loop, c, k): on each trip of that loop the variable is
        # its value before the loop + k + c * (trips done so far) (an induction variable)
        self.iv = dict(iv or {})

    def copy(self):
        return _State(self.eq, self.rng, self.aff, self.ok, self.shp, self.iv)

    def norm(self, form):
        """A form in terms of the arrays whose shapes are not known to equal others'."""
        if form is None or form[0] is None:
            return form
        base = self.shp.get((form[0], form[1]))
        return form if base is None else _shift(base, form[2])

    def kill(self, names):
        if not names:
            return
        self.eq = {v: f for v, f in self.eq.items() if v not in names and f[0] not in names}
        self.rng = {v: r for v, r in self.rng.items()
                    if v not in names and not any(b is not None and b[0] in names for b in r)}
        self.aff = {v: a for v, a in self.aff.items() if v not in names and a[0] not in names}
        self.ok = {o for o in self.ok if o[0] not in names and not (o[2][0] == "v" and o[2][1] in names)}
        self.shp = {k: f for k, f in self.shp.items() if k[0] not in names and f[0] not in names}
        self.iv = {v: x for v, x in self.iv.items() if v not in names}

    def meet(self, other):
        return _State({k: v for k, v in self.eq.items() if other.eq.get(k) == v},
                      {k: v for k, v in self.rng.items() if other.rng.get(k) == v},
                      {k: v for k, v in self.aff.items() if other.aff.get(k) == v},
                      self.ok & other.ok,
                      {k: v for k, v in self.shp.items() if other.shp.get(k) == v},
                      {k: v for k, v in self.iv.items() if other.iv.get(k) == v})


def _shift(form, k):
    return None if form is None else (form[0], form[1], form[2] + k)


class _Planner:
    def __init__(self, fn):
        self.fn = fn
        self.types = fn.types
        self.plan = BoundsPlan()
        self.steps = {}         # id of an induction variable's increment -> its step

    def is_int(self, name):
        t = self.types.get(name)
        return t is not None and not isinstance(t, Array) and t.kind == "i64"

    def form(self, operand, st):
        if isinstance(operand, Const):
            v = operand.value
            return (None, None, v) if isinstance(v, int) and not isinstance(v, bool) else None
        return st.eq.get(operand.name)

    def bound(self, operand, st, side):
        """A form bounding the operand from below (side 0) or above (side 1)."""
        f = self.form(operand, st)
        if f is None and isinstance(operand, Var) and operand.name in st.rng:
            f = st.rng[operand.name][side]
        return st.norm(f)

    # ---------------------------------------------------------------- transfer
    def block(self, stmts, st, ctx):
        for s in stmts:
            st = self.stmt(s, st, ctx)
        return st

    def stmt(self, s, st, ctx):
        if isinstance(s, Assign):
            if REGISTRY[s.op].indexing:
                self.access(s, s.args[0].name, s.index, st, ctx)
            return self.assign(s, st)
        if isinstance(s, Store):
            self.access(s, s.array, s.index, st, ctx)
            return st
        if isinstance(s, If):
            inner = (ctx[0], False, ctx[2]) if ctx else None
            a = self.block(s.body, st.copy(), inner)
            b = self.block(s.orelse, st.copy(), inner)
            return a.meet(b)
        if isinstance(s, For):
            killed = assigned(s.body) | {s.var}
            st = st.copy()
            st.kill(killed)
            body = st.copy()
            step = s.step.value if isinstance(s.step, Const) else None
            lo = hi = None
            if isinstance(step, int) and step > 0:
                lo, hi = self.bound(s.start, st, 0), _shift(self.bound(s.stop, st, 1), -1)
            elif isinstance(step, int) and step < 0:
                lo, hi = _shift(self.bound(s.stop, st, 0), 1), self.bound(s.start, st, 1)
            # a bound that names an array reassigned in the body may not hold on later trips
            lo = lo if lo is None or lo[0] not in killed else None
            hi = hi if hi is None or hi[0] not in killed else None
            if lo is not None or hi is not None:
                body.rng[s.var] = (lo, hi)
            body.aff[s.var] = (s.var, 0)
            if step == 1:
                for v, (inc, c) in self.induction(s).items():
                    self.steps[id(inc)] = c
                    body.iv[v] = (id(s), c, 0)
            self.block(s.body, body, (s, True, killed))
            return st
        if isinstance(s, While):
            st = st.copy()
            st.kill(assigned(s.test_body) | assigned(s.body))
            inner = self.block(s.test_body, st.copy(), None)
            self.block(s.body, inner, None)
            return st
        if isinstance(s, Segment):
            if s.plan.lifted is not None and s.plan.kind != "loop":
                rest = [x for x in s.stmts if not any(x is p for p in s.passengers)]
                return self.block(list(s.passengers) + rest, st, ctx)
            return self.block(s.stmts, st, ctx)
        raise TypeError(s)

    def induction(self, loop):
        """{variable: (its increment, step c)} for the int variables the loop's body assigns
        once, by ``v = v + c`` (or ``c + v``, ``v - c``; c a nonzero int) on every trip (a
        statement of the body, or of a segment that is one)."""
        counts = {}
        for st in walk(loop.body):
            if isinstance(st, Assign):
                counts[st.target] = counts.get(st.target, 0) + 1
        out = {}
        top = []
        for st in loop.body:
            top += st.stmts if isinstance(st, Segment) else [st]
        for st in top:
            if not isinstance(st, Assign) or counts.get(st.target) != 1 or \
                    not self.is_int(st.target) or len(st.args) != 2:
                continue
            sign = REGISTRY[st.op].accumulates
            a, b = st.args
            if sign > 0 and isinstance(a, Const):
                a, b = b, a
            if sign and isinstance(a, Var) and a.name == st.target and isinstance(b, Const) \
                    and isinstance(b.value, int) and not isinstance(b.value, bool) and b.value:
                out[st.target] = (st, sign * b.value)
        return out

    def assign(self, s, st):
        t, op, args = s.target, s.op, s.args
        eq = rng = aff = None
        shapes = self.shapes(s, st) if isinstance(self.types.get(t), Array) else {}
        prim = REGISTRY[op]
        if self.is_int(t):
            if prim.dimension and isinstance(args[0], Var):
                eq = (args[0].name, args[1].value, 0)
            elif prim.plain_copy:
                a = args[0]
                eq = self.form(a, st)
                if isinstance(a, Var):
                    rng, aff = st.rng.get(a.name), st.aff.get(a.name) or (a.name, 0)
            elif prim.accumulates and len(args) == 2:       # i + k, k + i, i - k
                a, b = args
                if prim.accumulates > 0 and isinstance(a, Const):
                    a, b = b, a
                if isinstance(a, Var) and isinstance(b, Const) and isinstance(b.value, int) \
                        and not isinstance(b.value, bool):
                    k = b.value * prim.accumulates
                    eq = _shift(st.eq.get(a.name), k)
                    r = st.rng.get(a.name)
                    rng = (_shift(r[0], k), _shift(r[1], k)) if r else None
                    if rng == (None, None):
                        rng = None
                    f = st.aff.get(a.name)
                    aff = (f[0], f[1] + k) if f else (a.name, k)
        iv_before = st.iv
        st = st.copy()
        st.kill({t})
        if eq is not None and eq[0] != t:
            st.eq[t] = eq
        if rng is not None and not any(b is not None and b[0] == t for b in rng):
            st.rng[t] = rng
        if aff is not None and aff[0] != t:
            st.aff[t] = aff
        for d, f in shapes.items():
            if f is not None and f[0] != t:
                st.shp[(t, d)] = f
        c = self.steps.get(id(s))
        if c is not None and t in iv_before:
            loop, c0, k = iv_before[t]
            st.iv[t] = (loop, c0, k + c)
        return st

    def shapes(self, s, st):
        """axis -> a form of the new array's length along it (constructors, copies, and
        element-wise operations of one array with scalars)."""
        op, args = s.op, s.args
        nd = self.types[s.target].ndim
        prim = REGISTRY[op]
        if prim.shape_operands:
            return {d: st.norm(self.form(args[d], st)) for d in range(nd)}
        like = None
        if prim.shape_like:
            like = args[0]
        elif prim.broadcasting and len(args) == 2:
            arrays = [a for a in args if isinstance(a, Var) and isinstance(self.types.get(a.name), Array)]
            if len(arrays) == 1 or (len(arrays) == 2 and arrays[0] == arrays[1]):
                like = arrays[0]
        if isinstance(like, Var):
            t = self.types.get(like.name)
            if isinstance(t, Array) and t.ndim == nd:
                return {d: st.norm((like.name, d, 0)) for d in range(nd)}
        return {}

    # ---------------------------------------------------------------- accesses
    def access(self, s, array, index, st, ctx):
        t = self.types.get(array)
        if not isinstance(t, Array):
            return
        axis = 0
        for it in index:
            if it == NEWAXIS:
                continue
            if isinstance(it, Slice):
                axis += 1
                continue
            self.item(s, array, axis, it, st, ctx)
            axis += 1

    def item(self, s, array, axis, it, st, ctx):
        counts = self.plan.counts
        if isinstance(it, Var) and (array, axis, it.name) in self.fn.in_range:
            counts["proven"] += 1         # a loop nest of coarsen.ir.scalarize
            return
        key = ("c", it.value) if isinstance(it, Const) else ("v", it.name)
        if (array, axis, key) in st.ok:
            counts["proven"] += 1
            return
        lower = upper = True
        if isinstance(it, Const):
            if isinstance(it.value, bool):
                return
            lower, upper = it.value < 0, it.value >= 0
        else:
            lo, hi = st.rng.get(it.name) or (None, None)
            e = st.eq.get(it.name)
            if e is not None:
                lo = hi = e
            lo, hi = st.norm(lo), st.norm(hi)
            n = st.norm((array, axis, 0))
            if lo is not None and lo[2] >= 0:     # a constant or a length, plus c >= 0
                lower = False
            if hi is not None and hi[:2] == n[:2] and hi[2] - n[2] <= -1:
                upper = False
            if hi is not None and hi[0] is None and hi[2] < 0:
                upper = False
        st.ok.add((array, axis, key))
        if not (lower or upper):
            counts["proven"] += 1
            return
        msg = message(array, axis, s.loc)
        loop = ctx[0] if ctx else None
        if loop is not None and ctx[1] and array not in ctx[2] \
                and isinstance(loop.step, Const) and loop.step.value in (1, -1):
            killed = ctx[2]
            check = None
            if isinstance(it, Const) or it.name not in killed:
                check = Check(array, axis, it, 0, lower, upper, msg)
            else:
                a = st.aff.get(it.name)
                if a is not None and a[0] == loop.var:
                    check = Check(array, axis, None, a[1], lower, upper, msg, a[1])
                elif a is not None and a[0] not in killed:
                    # invariant in this loop: an outer loop's variable plus a constant
                    check = Check(array, axis, Var(a[0]), a[1], lower, upper, msg)
                elif st.iv.get(it.name, (None,))[0] == id(loop):
                    # an induction variable of this loop (ADBench's triangular ``idx += 1``)
                    _, c, k = st.iv[it.name]
                    check = Check(array, axis, Var(it.name), k, lower, upper, msg, per_trip=c)
                elif a is not None and st.iv.get(a[0], (None,))[0] == id(loop):
                    # one plus a constant (``L[idx - 1]``)
                    _, c, k = st.iv[a[0]]
                    check = Check(array, axis, Var(a[0]), k + a[1], lower, upper, msg, per_trip=c)
            if check is not None:
                counts["hoisted"] += 1
                checks = self.plan.hoisted.setdefault(id(loop), [])
                for k, c in enumerate(checks):
                    if isinstance(it, Const) and isinstance(c.index, Const) and \
                            (c.array, c.axis, c.upper) == (array, axis, upper):
                        # constant indices: the largest (the most negative) covers the others
                        if abs(it.value) > abs(c.index.value):
                            checks[k] = check
                        break
                    if check.index is None and c.index is None and \
                            (c.array, c.axis, c.message) == (array, axis, msg):
                        # one check covers the accesses of a line at several offsets
                        checks[k] = Check(array, axis, None,
                                          max(o.offset for o in (c, check) if o.upper) if c.upper or upper else 0,
                                          c.lower or lower, c.upper or upper, msg,
                                          min(o.low_offset for o in (c, check) if o.lower) if c.lower or lower else 0)
                        break
                else:
                    if check not in checks:
                        checks.append(check)
                return
        counts["inline"] += 1
        self.plan.inline.setdefault(id(s), []).append(Check(array, axis, it, 0, lower, upper, msg))


def plan_bounds(fn):
    """The ``BoundsPlan`` of a typed function (see the module docstring)."""
    p = _Planner(fn)
    p.block(fn.body, _State(), None)
    return p.plan


# ------------------------------------------------------------------------ generated code

def _plus(node, k):
    if k == 0:
        return node
    return B.binop(node, "+" if k > 0 else "-", abs(k))


def _raise(check):
    import gast
    return gast.Raise(exc=B.call("IndexError", gast.Constant(value=check.message, kind=None)), cause=None)


def _or(tests):
    import gast
    return tests[0] if len(tests) == 1 else gast.BoolOp(op=gast.Or(), values=tests)


def _tests(check, low, high):
    """index >= n (on the highest index) or index < -n (on the lowest); ``low`` and ``high``
    make the expressions of those indices."""
    import gast
    out = []
    if check.upper:
        node = high()
        if isinstance(node, gast.Constant):
            out.append(B.compare(_shape(check), "<=", node))
        else:
            out.append(B.compare(node, ">=", _shape(check)))
    if check.lower:
        node = low()
        if isinstance(node, gast.UnaryOp) and isinstance(node.operand, gast.Constant):
            out.append(B.compare(_shape(check), "<", node.operand))
        else:
            out.append(B.compare(node, "<", gast.UnaryOp(op=gast.USub(), operand=_shape(check))))
    return out


def _shape(check):
    return B.subscript(B.attr(f"{check.array}.shape"), check.axis)


def inline_check(check, val):
    """``if index >= n or index < -n: raise IndexError(...)`` before the access; ``val`` gives
    an operand's expression."""
    def node():
        return B.ex(val(check.index))
    return B.if_(_or(_tests(check, node, node)), [_raise(check)])


def hoisted_check(check, loop, val):
    """The check of an access on every trip of ``loop`` (unit step), run once before it: an
    invariant index, or the loop variable plus ``offset`` at its first and last value; only
    when the loop runs at least once."""
    import gast
    start, stop = loop.start, loop.stop
    up = loop.step.value > 0
    if check.index is not None and check.per_trip:
        # the induction variable over the trips: index + offset, then + per_trip each trip
        def span():
            # |per_trip| * (trips - 1)
            trips = B.binop(B.binop(B.ex(val(stop)), "-", B.ex(val(start))), "-", 1)
            return trips if abs(check.per_trip) == 1 else B.binop(trips, "*", abs(check.per_trip))

        def low():
            node = _const_or(check.index, check.offset, val)
            return B.binop(node, "-", span()) if check.per_trip < 0 else node

        def high():
            node = _const_or(check.index, check.offset, val)
            return B.binop(node, "+", span()) if check.per_trip > 0 else node
    elif check.index is not None:
        def low():
            return _const_or(check.index, check.offset, val)
        high = low
    elif up:
        def low():
            return _const_or(start, check.low_offset, val)

        def high():
            return _const_or(stop, check.offset - 1, val)
    else:
        def low():
            return _const_or(stop, check.low_offset + 1, val)

        def high():
            return _const_or(start, check.offset, val)
    tests = _tests(check, low, high)
    if check.index is None and up and check.upper and not check.lower:
        # stop - 1 + k >= n reads better as stop + k > n
        tests = [B.compare(_const_or(stop, check.offset, val), ">", _shape(check))]
    # the trips > 0 guard, unless the test implies it (stop + k > n >= 0 with start + k <= 0)
    guard = B.compare(val(start), "<" if up else ">", val(stop))
    if isinstance(start, Const) and isinstance(stop, Const):
        if not (start.value < stop.value if up else start.value > stop.value):
            return None
        guard = None
    elif check.index is None and up and not check.lower and isinstance(start, Const) \
            and start.value + check.offset <= 0:
        guard = None
    test = _or(tests)
    if guard is not None:
        test = gast.BoolOp(op=gast.And(), values=[B.ex(guard), test])
    return B.if_(test, [_raise(check)])


def _const_or(operand, k, val):
    if isinstance(operand, Const):
        return B.const(operand.value + k)
    return _plus(B.ex(val(operand)), k)
