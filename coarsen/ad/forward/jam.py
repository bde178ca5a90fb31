"""Unroll and jam of the trips of a loop, for the SIMD form of forward over reverse: ``U``
consecutive trips run together, each inner loop they share running once with the ``U`` trips'
bodies side by side, so that the trips' tangent chains (``z_dot = z_dot + X[i, j] *
w_dot[j]``, one chain of dependent vector adds per trip) overlap instead of waiting on each
other, and an inner loop's loads of a lane-last tangent row serve ``U`` trips.

Requires: the statements of a function body (gast, as ``simd_body`` leaves them) and the set
of every name in the function.
Guarantees: ``jam_loops(stmts, taken, factor)`` returns new statements (the input is not
mutated) and the plans of the loops it jammed.  The jammed code performs every operation of
the original on the same values, and every value the trips share is read and written in the
original order, so the results are the original's bit for bit.  For a top-level
``for i in range(a, b)`` loop (``b - a`` trips, any remainder run after in the loop as
written):

* the names the body assigns are *private* (every read of it in a trip follows a definite
  assignment in that trip, and no statement after the loop reads it before assigning it:
  renamed in each trip of a group) or *shared* (carried from trip to trip, such as an
  accumulator ``loss``, or read after the loop: never renamed); the loop's variable is
  private;
* an array the body writes is shared, made fresh before the loop (``np.zeros``/``np.empty``,
  untouched since but for its ``shape``: no other name can alias it) and read or written
  only element by element (no slices, never bound to another name), or private, bound in the
  trip only to fresh arrays;
* the top-level statements of the body that touch a shared name (from the first to the last
  that does, overlapping spans merged) run as a *unit*, trip after trip, so every shared
  value sees its reads and writes in trip order; the other statements touch only private
  names and names the loop does not write, so the trips' copies of them may run side by
  side;
* an inner ``for j in range(n)`` outside the units is *jammed* (run once per group, the trips'
  bodies one after another in each iteration) where ``n`` is the same in every trip (built
  from names the loop does not assign and trip-invariant assignments of them) and its body
  has no loop; a shared array may be written in it alone (it is then no unit) where every
  occurrence is an accumulation ``a[idx] += e`` (``a[idx] = a[idx] + e``,
  ``_lanes_put(a, idx, _lanes_at(a, idx, K) + e)``) whose index has ``j`` at one position,
  so that each element is updated in one iteration, where the trips run in order;
* at least one inner loop is jammed (else nothing is gained and the loop is left as written);
* the body holds only assignments, ``if``, ``for``, ``raise`` and ``_lanes_put`` calls,
  and calls only to ``math``, the lane helpers, ``np.zeros``/``np.empty`` and a few pure
  builtins; it has at most ``MAX_STATEMENTS`` statements.

Trip ``i + c`` of a group runs with its private names renamed (fresh names); an index check
whose test is the same in every trip (``if n > a.shape[0]: raise IndexError(...)``) runs once
per group; in a jammed inner loop, the accumulations of an array at one trip-invariant index
are chained: the element is loaded once, given each trip's contribution in trip order (the
same adds), and stored once.  A trip that raises ``IndexError`` may do so after later trips
of its group have run part of their bodies (an exception leaves no result to compare).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import NamedTuple

import gast

from ...codegen import build as B

__all__ = ["JamPlan", "jam_loops", "JAM", "MARK"]

#: trips run together
JAM = 4
#: the longest loop body (statements, nested ones counted) copied: Numba's compile time grows
#: with the copies (logistic regression's gradient loop: 78 statements)
MAX_STATEMENTS = 300
#: how the generated code says a loop is jammed (after the number of trips)
MARK = "trips at a time, side by side"

_ALLOWED_STMTS = (gast.Assign, gast.AugAssign, gast.If, gast.For, gast.Raise, gast.Pass,
                  gast.Expr)
_PURE_CALLS = {"float", "int", "abs", "min", "max", "bool", "_lanes_at", "_lanes_zeros",
               "IndexError"}
_SHAPE_ATTRS = {"shape", "size", "ndim"}
_FRESH = {"np.zeros", "np.empty"}
#: the calls that write into their first argument (tested by membership: with ``==``, the
#: mutant ``is`` would be equivalent, the names being interned strings, and survive)
_WRITERS = frozenset({"_lanes_put"})
_ACC_OPS = (gast.Add, gast.Sub)


class NotJammed(Exception):
    """Why a loop is left as written."""


@dataclass(frozen=True)
class JamPlan:
    """One jammed loop: its variable, the trips per group, its private names, the positions
    (in its body) of the inner loops run once per group, the arrays each of those chains in
    registers, the index checks run once per group and the units run trip after trip."""
    var: str
    factor: int
    privates: frozenset
    jammed: tuple
    chained: tuple = ()             # (position, arrays) per jammed loop
    once: frozenset = frozenset()   # positions of index checks the same in every trip
    units: tuple = ()               # (first, last) positions run trip after trip


def jam_loops(stmts, taken, factor=JAM):
    """``stmts`` with each top-level loop that qualifies jammed (see the module docstring),
    and the plans of those loops."""
    taken = set(taken)
    out, plans = [], []
    if factor < 2:
        return list(stmts), plans
    for p, st in enumerate(stmts):
        if isinstance(st, gast.For):
            try:
                plan = _plan(st, stmts[:p], stmts[p + 1:], factor)
            except NotJammed:
                plan = None
            if plan is not None and plan.jammed:
                out.extend(_emit(st, plan, taken))
                plans.append(plan)
                continue
        out.append(st)
    return out, plans


# ---------------------------------------------------------------------- names
def _loads(node):
    return [n.id for n in gast.walk(node) if isinstance(n, gast.Name)
            and isinstance(n.ctx, gast.Load)]


def _stores(node):
    return {n.id for n in gast.walk(node) if isinstance(n, gast.Name)
            and isinstance(n.ctx, gast.Store)}


def _call_name(call):
    f = call.func
    parts = []
    while isinstance(f, gast.Attribute):
        parts.append(f.attr)
        f = f.value
    if not isinstance(f, gast.Name):
        return None
    return ".".join([f.id] + parts[::-1])


def _range_args(loop):
    it = loop.iter
    if (not isinstance(loop.target, gast.Name) or loop.orelse
            or not isinstance(it, gast.Call) or _call_name(it) != "range" or it.keywords
            or not 1 <= len(it.args) <= 2):
        raise NotJammed("not a loop over range(a, b)")
    return it.args


def _same(a, b):
    return gast.dump(a) == gast.dump(b)


# ---------------------------------------------------------------------- the plan
def _plan(loop, before, after, factor):
    _range_args(loop)
    body = loop.body
    mod = gast.Module(body=body, type_ignores=[])
    size = sum(isinstance(n, gast.stmt) for n in gast.walk(mod))
    if size > MAX_STATEMENTS:
        raise NotJammed(f"{size} statements: too long to copy {factor} times")
    var = loop.target.id
    _check_forms(body)
    written = _stores(mod) | {var}
    carried = _Definite(body, written, var).carried
    live = _read_after(after, written)
    if var in carried | live:
        raise NotJammed(f"the loop's variable {var} is read before or after its trips")
    shared = (carried | live) - {var}
    privates = frozenset(written - shared)
    arrays = _shared_arrays(body, written, privates, before)
    invariant = _invariant_names(body, written, arrays)
    candidates = {k for k, st in enumerate(body) if isinstance(st, gast.For)
                  and _jammable_inner(st, written, invariant, arrays)}
    spans = []
    for n in sorted(shared | arrays):
        ks = [k for k, st in enumerate(body) if _touches(st, n, n in arrays)]
        if not ks:
            continue
        if len(ks) == 1 and ks[0] in candidates and n in arrays and _pinned(body[ks[0]], n):
            continue
        spans.append((ks[0], ks[-1]))
    units = _merged(spans)
    inside = {k for a, b in units for k in range(a, b + 1)}
    jammed = tuple(sorted(candidates - inside))
    chained = tuple((k, _chained(body[k], written, invariant, arrays)) for k in jammed)
    once = frozenset(k for k, st in enumerate(body)
                     if k not in inside and _invariant_check(st, written, invariant))
    return JamPlan(var, factor, privates, jammed, chained, once, units)


def _merged(spans):
    out = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return tuple(out)


def _shape_reads(node):
    return {id(n.value) for n in gast.walk(node) if isinstance(n, gast.Attribute)
            and n.attr in _SHAPE_ATTRS and isinstance(n.value, gast.Name)}


def _touches(st, name, array):
    skip = _shape_reads(st) if array else set()
    return any(isinstance(n, gast.Name) and n.id == name and id(n) not in skip
               for n in gast.walk(st))


def _check_forms(body):
    for node in gast.walk(gast.Module(body=body, type_ignores=[])):
        if isinstance(node, gast.stmt) and not isinstance(node, _ALLOWED_STMTS):
            raise NotJammed(f"a {type(node).__name__} statement")
        if isinstance(node, gast.Attribute) and not isinstance(node.ctx, gast.Load):
            raise NotJammed("an attribute is assigned")
        if isinstance(node, gast.Expr) and not (isinstance(node.value, gast.Call)
                                                and _call_name(node.value) in _WRITERS):
            raise NotJammed("an expression statement")
        if isinstance(node, gast.For):
            _range_args(node)
        if isinstance(node, gast.Call):
            fn = _call_name(node)
            if fn is None or not (fn in _PURE_CALLS or fn in _FRESH or fn == "range"
                                  or fn in _WRITERS or fn.startswith("math.")):
                raise NotJammed(f"a call of {fn}")
        if isinstance(node, (gast.Lambda, gast.ListComp, gast.GeneratorExp, gast.Starred,
                             gast.NamedExpr, gast.Yield, gast.Await)):
            raise NotJammed(f"a {type(node).__name__}")


class Update(NamedTuple):
    """An accumulation into one element of an array: ``array[index] op= value``."""
    array: str
    index: object       # the index expression
    value: object       # the value added or subtracted
    op: str             # "+" or "-"
    names: tuple        # the array's occurrences in the statement (its store and its read)
    load: object        # the element read, as the statement writes it


def _op(node):
    return "+" if isinstance(node, gast.Add) else "-"


def _array_update(st):
    """The ``Update`` where ``st`` accumulates into one element (``a[idx] += e``,
    ``a[idx] = a[idx] - e``, ``_lanes_put(a, idx, _lanes_at(a, idx, K) + e)``), else None."""
    if (isinstance(st, gast.AugAssign) and isinstance(st.target, gast.Subscript)
            and isinstance(st.op, _ACC_OPS) and isinstance(st.target.value, gast.Name)):
        t = st.target
        return Update(t.value.id, t.slice, st.value, _op(st.op), (t.value,),
                      gast.Subscript(value=t.value, slice=t.slice, ctx=gast.Load()))
    if (isinstance(st, gast.Assign) and len(st.targets) == 1
            and isinstance(st.targets[0], gast.Subscript)
            and isinstance(st.targets[0].value, gast.Name) and isinstance(st.value, gast.BinOp)
            and isinstance(st.value.op, _ACC_OPS)
            and isinstance(st.value.left, gast.Subscript)
            and _same(st.value.left, gast.Subscript(value=st.targets[0].value,
                                                    slice=st.targets[0].slice,
                                                    ctx=gast.Load()))):
        t = st.targets[0]
        return Update(t.value.id, t.slice, st.value.right, _op(st.value.op),
                      (t.value, st.value.left.value), st.value.left)
    if (isinstance(st, gast.Expr) and isinstance(st.value, gast.Call)
            and _call_name(st.value) in _WRITERS and len(st.value.args) == 3):
        a, idx, v = st.value.args
        if (isinstance(a, gast.Name) and isinstance(v, gast.BinOp) and isinstance(v.op, gast.Add)
                and isinstance(v.left, gast.Call) and _call_name(v.left) == "_lanes_at"
                and len(v.left.args) == 3 and isinstance(v.left.args[0], gast.Name)
                and v.left.args[0].id == a.id and _same(v.left.args[1], idx)):
            return Update(a.id, idx, v.right, _op(v.op), (a, v.left.args[0]), v.left)
    return None


def _mutated(body):
    """The names of the arrays the body writes (``NotJammed`` where one is not a name)."""
    out = set()
    for node in gast.walk(gast.Module(body=body, type_ignores=[])):
        base = None
        if isinstance(node, gast.Subscript) and isinstance(node.ctx, gast.Store):
            base = node.value
        elif isinstance(node, gast.Call) and _call_name(node) in _WRITERS:
            base = node.args[0] if node.args else None
        else:
            continue
        if not isinstance(base, gast.Name):
            raise NotJammed("a write into an array that is not a name")
        out.add(base.id)
    return out


def _shared_arrays(body, written, privates, before):
    """The arrays the body writes that the trips share (see the module docstring); a private
    one must be bound only to fresh arrays, a shared one made fresh before the loop and used
    element by element."""
    mod = gast.Module(body=body, type_ignores=[])
    shared = set()
    for a in _mutated(body):
        if a in privates:
            for node in gast.walk(mod):
                if isinstance(node, gast.Assign) and a in _stores(node) and not (
                        len(node.targets) == 1 and isinstance(node.targets[0], gast.Name)
                        and isinstance(node.value, gast.Call)
                        and _call_name(node.value) in _FRESH):
                    raise NotJammed(f"{a} may alias another array")
            continue
        if a in written:
            raise NotJammed(f"{a} is rebound and written in place")
        _check_fresh(a, before)
        shared.add(a)
    if shared:
        _check_element_uses(mod, shared)
    return shared


def _check_element_uses(mod, arrays):
    """Each occurrence of a shared array is its ``shape``, an element (no slice, not bound
    as it is to a name: a row of a 2-D array would be a view) or a lane helper's array."""
    ok = _shape_reads(mod)
    bound = set()
    for node in gast.walk(mod):
        if isinstance(node, gast.Call) and _call_name(node) in ("_lanes_at", "_lanes_put") \
                and node.args and isinstance(node.args[0], gast.Name):
            ok.add(id(node.args[0]))
        if isinstance(node, gast.Subscript) and isinstance(node.value, gast.Name) \
                and node.value.id in arrays \
                and not any(isinstance(s, gast.Slice) for s in gast.walk(node.slice)):
            ok.add(id(node.value))
        if isinstance(node, gast.Assign) and isinstance(node.value, gast.Subscript):
            bound.add(id(node.value.value))
    for node in gast.walk(mod):
        if isinstance(node, gast.Name) and node.id in arrays and (id(node) not in ok
                                                                  or id(node) in bound):
            raise NotJammed(f"{node.id} is used other than element by element")


def _check_fresh(a, before):
    """``a`` was last bound to a fresh array and nothing since could alias it."""
    for st in reversed(before):
        if a in _stores(st):
            if not (isinstance(st, gast.Assign) and len(st.targets) == 1
                    and isinstance(st.targets[0], gast.Name) and isinstance(st.value, gast.Call)
                    and _call_name(st.value) in _FRESH):
                raise NotJammed(f"{a} may alias another array")
            return
        shapes = _shape_reads(st)
        if any(isinstance(n, gast.Name) and n.id == a and id(n) not in shapes
               for n in gast.walk(st)):
            raise NotJammed(f"{a} is used before the loop")
    raise NotJammed(f"{a} is not made before the loop")


def _pinned(loop, a):
    """Every occurrence of ``a`` in the inner ``loop`` is an accumulation whose index has the
    loop's variable at one position (each element updated in one iteration only)."""
    j = loop.target.id
    inner = gast.Module(body=loop.body, type_ignores=[])
    allowed, position = set(), None
    for node in gast.walk(inner):
        if not isinstance(node, gast.stmt):
            continue
        v = _array_update(node)
        if v is None or v.array != a:
            continue
        idx = v.index
        if a in _loads(v.value) or a in _loads(idx):
            return False
        elts = idx.elts if isinstance(idx, gast.Tuple) else [idx]
        at = [k for k, x in enumerate(elts) if isinstance(x, gast.Name) and x.id == j]
        if not at or (position is not None and position != at[0]):
            return False
        position = at[0]
        allowed.update(id(n) for n in v.names)
    skip = _shape_reads(inner)
    return position is not None and all(
        id(n) in allowed or id(n) in skip for n in gast.walk(inner)
        if isinstance(n, gast.Name) and n.id == a)


def _chained(loop, written, invariant, arrays):
    """The arrays whose updates in a jammed loop can be chained in registers: updated only
    by top-level statements of its body, all of one form and at one index that is the same
    in every trip (built from the loop's variable and trip-invariant names), so that the
    trips' updates of an element are one load, the original adds in trip order, one store."""
    ok = _Outside(written, invariant | {loop.target.id})
    top = {id(st) for st in loop.body}
    sites = {}
    for node in gast.walk(gast.Module(body=loop.body, type_ignores=[])):
        if isinstance(node, gast.stmt):
            v = _array_update(node)
            if v is not None and v.array in arrays:
                sites.setdefault(v.array, []).append(node)
    out = []
    for a, nodes in sites.items():
        first = _array_update(nodes[0]).index
        if _pinned(loop, a) and all(id(st) in top and type(st) is type(nodes[0])
                                    and _same(_array_update(st).index, first) for st in nodes) \
                and _pure(first, ok, arrays):
            out.append(a)
    return frozenset(out)


def _invariant_check(st, written, invariant):
    """``if <trip-invariant test>: raise E('...')``: the same in every trip of a group."""
    if not (isinstance(st, gast.If) and not st.orelse and len(st.body) == 1
            and isinstance(st.body[0], gast.Raise)):
        return False
    exc = st.body[0].exc
    return (st.body[0].cause is None and isinstance(exc, gast.Call)
            and isinstance(exc.func, gast.Name) and not exc.keywords
            and all(isinstance(a, gast.Constant) for a in exc.args)
            and _pure(st.test, _Outside(written, invariant), ()))


#: what holds after a ``raise``: every name (nothing after it runs)
_ALL = None


def _meet(a, b):
    return b if a is _ALL else a if b is _ALL else a & b


class _Definite:
    """The written names some trip reads before a definite assignment in it (``carried``).  A
    branch ``if t:`` at the body's top level, with ``t`` assigned once in the body and before
    it in the trip, tells a later ``if t:`` what its branches may take as assigned (the tangent code assigns a
    partial in one branch and reads it under the same test)."""

    def __init__(self, body, written, var):
        self.written = written
        self.carried = set()
        stores = [n.id for n in gast.walk(gast.Module(body=body, type_ignores=[]))
                  if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store)]
        self.once = {n for n in stores if stores.count(n) == 1}
        self.facts = {}
        self.block(body, {var}, top=True)

    def block(self, stmts, defined, top=False):
        for st in stmts:
            if defined is _ALL:
                return _ALL
            defined = self.stmt(st, defined, top)
        return defined

    def need(self, node, defined):
        for n in _loads(node):
            if n in self.written and n not in defined:
                self.carried.add(n)

    def stmt(self, st, defined, top):
        if isinstance(st, (gast.Assign, gast.AugAssign)):
            self.need(st.value, defined)
            for t in (st.targets if isinstance(st, gast.Assign) else [st.target]):
                self.need(t, defined)       # the index of an element store
                if (isinstance(st, gast.AugAssign) and isinstance(t, gast.Name)
                        and t.id in self.written and t.id not in defined):
                    self.carried.add(t.id)
            return defined | _stores(st)
        if isinstance(st, gast.If):
            self.need(st.test, defined)
            # a test assigned once and already in this trip keeps its value to the end
            key = st.test.id if (isinstance(st.test, gast.Name) and top
                                 and st.test.id in self.once
                                 and st.test.id in defined) else None
            yes = self.block(st.body, defined | self.facts.get((key, True), set()))
            no = self.block(st.orelse, defined | self.facts.get((key, False), set()))
            if key is not None:
                for branch, out in ((True, yes), (False, no)):
                    if out is not _ALL:
                        self.facts[(key, branch)] = self.facts.get((key, branch), set()) | out
            return _meet(yes, no)
        if isinstance(st, gast.For):
            self.need(st.iter, defined)
            self.block(st.body, defined | _stores(st.target))
            return defined
        self.need(st, defined)
        return _ALL if isinstance(st, gast.Raise) else defined


def _read_after(after, written):
    """The written names a statement after the loop may read before assigning them."""
    live, out = set(written), set()
    for st in after:
        out |= live & set(_loads(st))
        if isinstance(st, gast.Assign):
            live -= _stores(st)
    return out


def _pure(node, ok_names, arrays):
    for n in gast.walk(node):
        if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Load) and n.id not in ok_names:
            return False
        if isinstance(n, (gast.Call, gast.IfExp, gast.Lambda)):
            return False
        if isinstance(n, gast.Subscript) and isinstance(n.value, gast.Name) \
                and n.value.id in arrays:
            return False
    return True


class _Outside(set):
    """Names not written by the loop, plus those known trip-invariant."""

    def __init__(self, written, invariant):
        super().__init__()
        self.written, self.invariant = written, invariant

    def __contains__(self, n):
        return n not in self.written or n in self.invariant


def _invariant_names(body, written, arrays):
    """Private names assigned once, at the body's top level, from trip-invariant values."""
    invariant = set()
    counts = {}
    for node in gast.walk(gast.Module(body=body, type_ignores=[])):
        if isinstance(node, gast.Name) and isinstance(node.ctx, gast.Store):
            counts[node.id] = counts.get(node.id, 0) + 1
    ok = _Outside(written, invariant)
    for st in body:
        if (isinstance(st, gast.Assign) and len(st.targets) == 1
                and isinstance(st.targets[0], gast.Name)
                and counts.get(st.targets[0].id) == 1 and _pure(st.value, ok, arrays)):
            invariant.add(st.targets[0].id)
    return invariant


def _jammable_inner(loop, written, invariant, arrays):
    args = loop.iter.args
    if len(args) == 2 and not (isinstance(args[0], gast.Constant)
                               and type(args[0].value) is int and args[0].value >= 0):
        return False
    if not _pure(args[-1], _Outside(written, invariant), arrays):
        return False
    inner = gast.Module(body=loop.body, type_ignores=[])
    if loop.target.id in _stores(inner):
        return False
    return not any(isinstance(n, (gast.For, gast.While)) for n in gast.walk(inner))


# ---------------------------------------------------------------------- the code
class _Rename(gast.NodeTransformer):
    def __init__(self, names):
        self.names = names

    def visit_Name(self, node):
        if node.id in self.names:
            return gast.Name(id=self.names[node.id], ctx=node.ctx, annotation=None,
                             type_comment=None)
        return node


def _fresh(base, taken):
    k = 1
    while f"{base}_j{k}" in taken:
        k += 1
    taken.add(f"{base}_j{k}")
    return f"{base}_j{k}"


def _copy_of(stmts, names):
    out = [copy.deepcopy(s) for s in stmts]
    if names:
        out = [_Rename(names).visit(s) for s in out]
    return out


def _emit(loop, plan, taken):
    U = plan.factor
    var = plan.var
    args = loop.iter.args
    lo, hi, mid = _fresh("_lo", taken), _fresh("_hi", taken), _fresh("_mid", taken)
    start = args[0] if len(args) == 2 else B.const(0)
    renames = [{}] + [{n: _fresh(n, taken) for n in sorted(plan.privates)}
                      for _ in range(1, U)]
    head = [B.assign(lo, copy.deepcopy(start)), B.assign(hi, copy.deepcopy(args[-1])),
            B.assign(mid, B.binop(lo, "+", B.binop(B.binop(B.call("max", B.binop(hi, "-", lo), 0),
                                                         "//", U), "*", U)))]
    head[0].coarsen_comment = (f"{U} {MARK} (what the trips share is read and written in "
                               "trip order)")
    group = [B.assign(renames[c][var], B.binop(var, "+", c)) for c in range(1, U)]
    chained = dict(plan.chained)
    units = dict(plan.units)
    inside = {k for a, b in plan.units for k in range(a + 1, b + 1)}
    for k, st in enumerate(loop.body):
        if k in inside:
            continue
        if k in units:
            # statements that touch what the trips share: trip after trip
            for c in range(U):
                group += _copy_of(loop.body[k:units[k] + 1], renames[c])
        elif k in plan.jammed:
            j = st.target.id
            inner = [B.assign(renames[c][j], j) for c in range(1, U)]
            inner += _jammed_body(st.body, chained.get(k, ()), renames, taken)
            jl = gast.For(target=B.name(j, store=True), iter=copy.deepcopy(st.iter),
                          body=inner, orelse=[], type_comment=None)
            if getattr(st, "coarsen_comment", None):
                jl.coarsen_comment = st.coarsen_comment
            group.append(jl)
        elif k in plan.once:
            group += _copy_of([st], {})
        else:
            for c in range(U):
                group += _copy_of([st], renames[c])
    main = B.for_range(var, [B.name(lo), B.name(mid), B.const(U)], group)
    rest = B.for_range(var, [B.name(mid), B.name(hi)], _copy_of(loop.body, {}))
    rest.coarsen_comment = "the trips left over, one at a time"
    return head + [main, rest]


def _jammed_body(body, chained, renames, taken):
    """The trips' copies of a jammed loop's body, one after another; each update of a
    chained array becomes its contribution (a fresh name), and after the copies each such
    element is loaded once, given the contributions in trip order (the original adds), and
    stored once."""
    U = len(renames)
    updates = {id(st): u for st in body
               for u in [_array_update(st)] if u is not None and u.array in chained}
    parts = {k: [_fresh("_part", taken) for _ in range(U)] for k in updates}
    out = []
    for c in range(U):
        for st in body:
            if id(st) in updates:
                e = _copy_of([gast.Expr(value=updates[id(st)].value)], renames[c])[0].value
                out.append(B.assign(parts[id(st)][c], e))
            else:
                out += _copy_of([st], renames[c])
    # each array in the order of its first update, its updates in trip order
    for a in dict.fromkeys(u.array for u in updates.values()):
        mine = [(k, u) for k, u in updates.items() if u.array == a]
        acc = copy.deepcopy(mine[0][1].load)
        for c in range(U):
            for k, u in mine:
                acc = B.binop(acc, u.op, B.name(parts[k][c]))
        out.append(_store_of(body, mine[0][0], acc))
    return out


def _store_of(body, key, value):
    """The store of ``value`` into the element the update ``key`` (an ``id``) writes."""
    st = next(s for s in body if id(s) == key)
    if isinstance(st, gast.Expr):
        a, idx, _ = st.value.args
        return gast.Expr(value=B.call("_lanes_put", copy.deepcopy(a), copy.deepcopy(idx), value))
    target = st.target if isinstance(st, gast.AugAssign) else st.targets[0]
    return gast.Assign(targets=[gast.Subscript(value=copy.deepcopy(target.value),
                                               slice=copy.deepcopy(target.slice),
                                               ctx=gast.Store())],
                       value=value, type_comment=None)
