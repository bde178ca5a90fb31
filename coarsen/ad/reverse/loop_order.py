"""Loop order: the reverse of a loop whose trips commute runs its trips forward.

The reverse sweep runs a loop's trips last to first, ``range(E - 1, -1, -1)``: in general a
trip's adjoint needs the adjoints of the trips after it.  Where the emitted trips do not see
each other (the reverse of a map, of a dot product's inner loop, of a scalarized outer
product), nothing needs that order, and a loop counting down over memory is one LLVM leaves
scalar: gemver's reverse sweep took 1.5x the time of the same loops counting up.

Requires: the generated function's top-level statements (gast), the names the compiler made,
the rank of every array name (``ranks``: the variables', the adjoints', the tapes'; a name
outside it that the function subscripts is an array of unknown rank) and the reverse loops
marked by the emitter (``REVERSE_MARK``, set by ``reverse_range``).
Guarantees: ``forward_order(body, made, ranks)`` returns the statements (a new list, the input not
modified: where a loop is rewritten, the statements are copies) with each marked loop
``for v in range(a, b, -1)`` whose trips commute rewritten as ``for v in range(b + 1, a + 1)``
(with a counter, as at the end of this docstring).  The trips of a loop ``L`` commute when, in its body (nested
statements included):

* the statements are assignments, augmented assignments, ``if`` and ``for ... in range``
  loops, without ``break``, ``continue``, ``return``, ``raise`` or bare calls, and every call
  is one of ``PURE_CALLS`` (``math`` functions, a few builtins, the pure runtime helpers); the
  loop variable is not assigned;
* every scalar name assigned in ``L`` is
  - an *accumulator*: only updated by ``v += e`` or ``v -= e`` and read nowhere else in ``L``
    (the sum is the same in any order, to rounding), or
  - *trip-local*: read in a trip only after that trip assigned it (a must-definition walk),
    and not live after ``L`` (a liveness walk of the enclosing blocks; the loop variable and
    inner loops' variables too), or
  - a *zeroed accumulator*: updated by ``v += e``/``v -= e``, read anywhere in the trip, and
    reset by ``v = 0.0`` as the last statement of ``L``'s body that touches it, with ``v``
    0.0 when ``L`` starts (the last top-level statement before ``L`` that writes ``v`` is
    ``v = 0.0``, ``L`` a top-level statement): every trip starts from 0.0;
* in ``L`` every array (a name of ``ranks``, or one the function subscripts) appears only
  indexed at all of its axes, its rank known, without slices, or for its ``.shape``: no name
  ``L`` assigns holds an array or a view (a read of fewer axes than the rank, ``X[0]`` of a
  matrix, is a row), so ``L`` writes memory only through its element stores;
* every array ``L`` stores into is compiler-made (or the user's, made fresh:
  ``cleanup.fresh_elementwise``), appears in the function only allocated fresh, read at all
  of its axes (a row read could be held by a name), stored into without slices or updated
  as a whole (``X += ...``): no other name reaches it; and every two of its accesses
  in ``L`` of which one is a plain store ``X[...] = e``, or one a read and the other an
  augmented store ``X[...] += e``, either meet only within a trip (at some axis both index
  with ``L``'s variable plus the same constant: different trips, different elements) or
  never (at some axis both index with one name ``L`` does not assign, or with none, plus
  different constants: the heat stencil's adjoint reads row ``t + 1`` and adds into row
  ``t``).  Augmented stores commute with each other.

Then each trip computes the same values in either order, the accumulators add the same terms
(in the other order: the sums may differ by rounding), and nothing after the loop sees a
difference but those sums.

A loop whose trips commute but for a *counter* (``_induction``: its body starts with
``v = v - c`` or ``v -= c``, ``c`` a positive int constant, the reverse of GMM's ``idx += 1``
at the end of each forward trip, and no other statement of the loop assigns ``v``) becomes::

    v = v - c * max(a - b, 0)       # where the reverse loop leaves v (c * the trips)
    if v >= 0:
        _iv = v
        for i in range(b + 1, a + 1):
            <the rest of the body, reading _iv for v>
            _iv += c
    else:
        v = v + c * max(a - b, 0)
        <the loop as it was>

Trip ``i`` reads the same value of the counter in either order, and ``v`` leaves with the
same value.  A tape position (``_fpos``, ``_ipos``) is never below 0: it needs no ``else``,
and ``_iv = max(v, 0)`` says so to Numba.  The first branch is the point: counting up from a value known to be 0 or above,
Numba drops its checks of negative indices (GMM's reverse triangle: 15 % of the gradient's
time).  Where the counter starts below 0 (Python's negative indices) the loop runs as before.
"""
from __future__ import annotations

import copy

import gast

from .cleanup import (affine, fresh_elementwise, index_elts, int_value, nonnegative_names,
                      only_elementwise, plain_range, runs_test, same_side)
from .tapes import FP, IP

__all__ = ["REVERSE_MARK", "PURE_CALLS", "forward_order", "pure_call"]

#: the attribute ``reverse_range`` sets on the loops it emits
REVERSE_MARK = "_coarsen_reverse"

#: the calls a loop whose trips commute may make (no side effects, no exceptions but NumPy's)
PURE_CALLS = frozenset({"float", "int", "abs", "min", "max", "bool", "range", "_bcast_len",
                        "_bcast_stride", "_same_len", "_range_len", "_slice_start", "_slice_len",
                        "_chain_lower", "_chain_upper"})


def _is_zero(node):
    return isinstance(node, gast.Constant) and type(node.value) in (int, float) and node.value == 0


def pure_call(call):
    """Is ``call`` one of ``math``'s functions or of ``PURE_CALLS``?"""
    f = call.func
    if isinstance(f, gast.Attribute) and isinstance(f.value, gast.Name) and f.value.id == "math":
        return True
    return isinstance(f, gast.Name) and f.id in PURE_CALLS


def _reads(node):
    """Names ``node`` (an expression or a statement's target) loads."""
    return {n.id for n in gast.walk(node) if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Load)}


# ---------------------------------------------------------------- liveness (scalars)

def _ue(stmts, defined=frozenset()):
    """``(upward-exposed reads, must-defined names)`` of a statement list: the names read
    before the list assigns them on every path, and those it assigns on every path."""
    ue, d = set(), set(defined)
    for st in stmts:
        u, d = _ue_stmt(st, d)
        ue |= u
    return ue, d


def _ue_stmt(st, d):
    if isinstance(st, gast.Assign):
        u = _reads(st.value) - d
        d = set(d)
        for t in st.targets:
            if isinstance(t, gast.Name):
                d.add(t.id)
            else:
                u |= _reads(t) - d
        return u, d
    if isinstance(st, gast.AugAssign):
        u = (_reads(st.value) | _reads(st.target)) - d
        if isinstance(st.target, gast.Name):
            u |= {st.target.id} - d
            d = d | {st.target.id}
        return u, d
    if isinstance(st, gast.If):
        u = _reads(st.test) - d
        u1, d1 = _ue(st.body, d)
        u2, d2 = _ue(st.orelse, d)
        return u | u1 | u2, d1 & d2
    if isinstance(st, gast.For):
        u = _reads(st.iter) - d
        inner = set(d) | ({st.target.id} if isinstance(st.target, gast.Name) else set())
        u1, _ = _ue(st.body, inner)
        return u | u1 | (_reads(st.target) - d), d
    if isinstance(st, gast.While):
        u = _reads(st.test) - d
        u1, _ = _ue(st.body, d)
        return u | u1, d
    return {n.id for n in gast.walk(st) if isinstance(n, gast.Name)} - d, d


def _live_out(path, node):
    """Names live right after ``node`` (a statement in the innermost block of ``path``)."""
    if not path:
        return set()
    owner, block = path[-1]
    k = next(i for i, s in enumerate(block) if s is node)
    ue, d = _ue(block[k + 1:])
    if owner is None:
        end = set()
    elif isinstance(owner, gast.For):
        first = {owner.target.id} if isinstance(owner.target, gast.Name) else set()
        nxt, _ = _ue(owner.body, first)
        end = nxt | _reads(owner.iter) | _live_out(path[:-1], owner)
    elif isinstance(owner, gast.While):
        nxt, _ = _ue(owner.body)
        end = nxt | _reads(owner.test) | _live_out(path[:-1], owner)
    else:                           # an If: after either branch, what follows the If
        end = _live_out(path[:-1], owner)
    return ue | (end - d)


# ---------------------------------------------------------------- the trips of one loop

class _Facts:
    def __init__(self):
        self.aug = {}          # name -> count of ``v += e`` / ``v -= e``
        self.other_aug = set()  # names updated by another operator
        self.plain = {}        # name -> count of ``v = e``
        self.reads = {}        # name -> count of loads outside its own augmented update
        self.stores = {}       # array -> [(index node, is plain)]
        self.read_arrays = set()
        self.read_idx = {}     # array -> [index node of each element read]
        self.targets = set()   # inner loops' variables
        self.ok = True


def _collect(stmts, f, var):
    for st in stmts:
        if not f.ok:
            return
        if isinstance(st, gast.Assign) and len(st.targets) == 1:
            t = st.targets[0]
            _loads(st.value, f)
            if _target(t, f, var, True):
                f.plain[t.id] = f.plain.get(t.id, 0) + 1
        elif isinstance(st, gast.AugAssign):
            t = st.target
            _loads(st.value, f)
            if _target(t, f, var, False):
                if isinstance(st.op, (gast.Add, gast.Sub)):
                    f.aug[t.id] = f.aug.get(t.id, 0) + 1
                else:
                    f.other_aug.add(t.id)
        elif isinstance(st, gast.If):
            _loads(st.test, f)
            _collect(st.body, f, var)
            _collect(st.orelse, f, var)
        elif isinstance(st, gast.For):
            if st.orelse or not plain_range(st):
                f.ok = False
                return
            _loads(st.iter, f)
            if st.target.id == var:
                f.ok = False
            f.targets.add(st.target.id)
            _collect(st.body, f, var)
        elif isinstance(st, gast.Pass):
            continue
        else:
            f.ok = False


def _target(t, f, var, plain):
    """Record a statement's target: True for a name (not the loop variable), an element store
    otherwise (False)."""
    if isinstance(t, gast.Name):
        if t.id == var:
            f.ok = False
        return True
    if isinstance(t, gast.Subscript) and isinstance(t.value, gast.Name):
        _loads(t.slice, f)
        f.stores.setdefault(t.value.id, []).append((t.slice, plain))
    else:
        f.ok = False
    return False


def _loads(expr, f):
    for n in gast.walk(expr):
        if isinstance(n, gast.Call) and not pure_call(n):
            f.ok = False
        elif isinstance(n, (gast.Lambda, gast.NamedExpr, gast.Yield, gast.Await)):
            f.ok = False
        elif isinstance(n, gast.Subscript) and isinstance(n.value, gast.Name):
            f.read_arrays.add(n.value.id)
            f.read_idx.setdefault(n.value.id, []).append(n.slice)
        if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Load):
            f.reads[n.id] = f.reads.get(n.id, 0) + 1


def _defined_first(stmts, names, d):
    """Does every read of ``names`` in ``stmts`` follow an assignment of it in the same trip?
    Returns the must-defined set after ``stmts``, or None."""
    d = set(d)
    for st in stmts:
        if isinstance(st, gast.If):
            if _reads(st.test) & names - d:
                return None
            d1 = _defined_first(st.body, names, d)
            d2 = _defined_first(st.orelse, names, d)
            if d1 is None or d2 is None:
                return None
            d = d1 & d2
        elif isinstance(st, gast.For):
            if _reads(st.iter) & names - d:
                return None
            if _defined_first(st.body, names, d | {st.target.id}) is None:
                return None
        else:
            u, d2 = _ue_stmt(st, d)
            if u & names:
                return None
            d = d2
    return d


def _zero_on_entry(path, loop, name):
    """Is ``name`` 0.0 when the top-level ``loop`` starts?"""
    if len(path) != 1:
        return False
    block = path[0][1]
    k = next(i for i, s in enumerate(block) if s is loop)
    for st in reversed(block[:k]):
        writes = any(isinstance(n, gast.Name) and n.id == name and isinstance(n.ctx, gast.Store)
                     for n in gast.walk(st))
        if writes:
            return isinstance(st, gast.Assign) and len(st.targets) == 1 and \
                isinstance(st.targets[0], gast.Name) and st.targets[0].id == name and \
                _is_zero(st.value)
    return False


def _reset_last(body, name):
    """Is the last statement of ``body`` (top level) that mentions ``name`` a ``name = 0.0``,
    the only plain assignment of ``name`` in ``body``?"""
    for st in reversed(body):
        if any(isinstance(n, gast.Name) and n.id == name for n in gast.walk(st)):
            return isinstance(st, gast.Assign) and len(st.targets) == 1 and \
                isinstance(st.targets[0], gast.Name) and st.targets[0].id == name and \
                _is_zero(st.value)
    return False


def _commutes(loop, path, top_body, made, arrays, induction=None, nonneg=frozenset()):
    """Do the trips of ``loop`` (reached through ``path``) commute (module docstring)?
    ``top_body``: the function's statements up to the top-level one holding ``loop``;
    ``arrays``: the rank of each array name (None: unknown); ``induction``: the counter
    ``_induction`` found, which the rewrite recomputes."""
    var = loop.target.id
    f = _Facts()
    _collect(loop.body, f, var)
    if not f.ok or not _elements_only(loop.body, arrays):
        return False
    scalars = set(f.aug) | set(f.plain) | f.other_aug | f.targets
    if induction is not None:
        v = induction[0]
        # _induction found ``v`` stored once in the loop, by its first statement (``v -= c`` or
        # ``v = v - c``: an ``aug`` or ``plain`` fact): never an inner loop's variable nor
        # updated by another operator, each of which would be a second store
        assert v not in f.targets and v not in f.other_aug, v
        scalars.discard(v)
    zeroed, local = set(), set()
    for v in scalars | ({induction[0]} if induction else set()):
        # a name the loop assigns is named whole there: _elements_only refused the loop if
        # it were an array (subscripted anywhere, or in ``arrays``), which an element store
        # or read of it would make it
        assert v not in f.stores and v not in f.read_arrays, v
    for v in scalars:
        if v in f.other_aug:
            local.add(v)
        elif v not in f.plain and v not in f.targets and not f.reads.get(v, 0):
            continue                # an accumulator: its own updates read it, nothing else
        elif v in f.aug and f.plain.get(v) == 1 and v not in f.targets and \
                _reset_last(loop.body, v) and _zero_on_entry(path, loop, v):
            zeroed.add(v)
        else:
            local.add(v)
    if local and _defined_first(loop.body, local, zeroed) is None:
        return False
    if (local | {var}) & _live_out(path, loop):
        return False
    assigned = scalars | {var} | ({induction[0]} if induction else set())
    for a, stores in f.stores.items():
        # no other name reaches the array (none holds a view: ``arrays[a]``, known here, tells
        # a row read from an element); in the loop, _elements_only saw only its elements
        rank = arrays[a]
        unaliased = only_elementwise(top_body, a, rank) if a in made else \
            fresh_elementwise(top_body, a, rank)
        if not unaliased:
            return False
        accesses = [(index_elts(idx), "p" if plain else "u") for idx, plain in stores] + \
            [(index_elts(idx), "r") for idx in f.read_idx.get(a, ())]
        for n, (x, kx) in enumerate(accesses):
            for y, ky in accesses[n:]:
                if "p" not in (kx, ky) and not ("r" in (kx, ky) and kx != ky):
                    continue        # two reads, or two augmented stores: they commute
                if not (_own_element(x, y, var) or _disjoint(x, y, var, assigned, nonneg)):
                    return False
    return True


def _own_element(x, y, var):
    """At some axis both index with the loop variable plus the same offset: the two accesses
    meet only within one trip."""
    for a, b in zip(x, y):
        fa, fb = affine(a), affine(b)
        if fa is not None and fa == fb and fa[0] == var:
            return True
    return False


def _disjoint(x, y, var, assigned, nonneg=frozenset()):
    """At some axis both index with one name the loop leaves unchanged (or none) plus
    different offsets, on the same side of zero (``cleanup.same_side``: ``X[-1]`` is
    ``X[0]`` on a one-element axis): the two accesses never meet."""
    for a, b in zip(x, y):
        fa, fb = affine(a), affine(b)
        if fa is not None and fb is not None and fa[0] == fb[0] and fa[1] != fb[1] and \
                fa[0] not in assigned and same_side(fa, fb, nonneg):
            return True
    return False


def _elements_only(stmts, arrays):
    """In ``stmts``, every name of ``arrays`` (and every subscripted name) appears only indexed
    at all of its axes, known, without slices (a read of fewer axes than the rank is a view,
    and a name bound to it would alias the array: a store through that name no subscript
    shows), or for its ``.shape``.  The other names are then scalars: no statement of
    ``stmts`` writes an array but through an element store."""
    inside = set()
    for st in stmts:
        for n in gast.walk(st):
            if isinstance(n, gast.Subscript) and isinstance(n.value, gast.Name):
                idx = index_elts(n.slice)
                rank = arrays.get(n.value.id)
                if rank is None or len(idx) != rank or any(isinstance(i, gast.Slice) for i in idx):
                    return False
                inside.add(id(n.value))
            elif isinstance(n, gast.Attribute) and n.attr == "shape" and isinstance(n.value, gast.Name):
                inside.add(id(n.value))
    return all(id(n) in inside for st in stmts for n in gast.walk(st)
               if isinstance(n, gast.Name) and n.id in arrays)


def _forward_range(it):
    """``range(b + 1, a + 1)`` for ``range(a, b, -1)``, written plainly."""
    a, b = it.args[0], it.args[1]

    def plus_one(e):
        if isinstance(e, gast.BinOp) and isinstance(e.op, gast.Sub) and int_value(e.right) == 1:
            return e.left
        if int_value(e) is not None:
            return gast.Constant(value=int_value(e) + 1, kind=None)
        return gast.BinOp(left=e, op=gast.Add(), right=gast.Constant(value=1, kind=None))

    lo, hi = plus_one(b), plus_one(a)
    args = [hi] if isinstance(lo, gast.Constant) and lo.value == 0 else [lo, hi]
    return gast.Call(func=gast.Name(id="range", ctx=gast.Load(), annotation=None, type_comment=None),
                     args=args, keywords=[])


def _marked(st):
    it = st.iter
    return getattr(st, REVERSE_MARK, False) and plain_range(st) and len(it.args) == 3 and \
        int_value(it.args[2]) == -1 and not st.orelse


def _top_index(body, loop, path):
    """The index in ``body`` of the top-level statement holding ``loop``."""
    outer = path[1][0] if len(path) > 1 else loop
    return next(k for k, st in enumerate(body) if st is outer)


def forward_order(body, made, ranks):
    """The module docstring; ``ranks``: the number of axes of each array name (the variables',
    their adjoints', the tapes'); a name not in it that the function subscripts somewhere is
    an array of unknown rank, any other a scalar."""
    out = list(body)
    todo = []

    def visit(block, path):
        for st in block:
            if isinstance(st, gast.For) and _marked(st):
                todo.append((st, path))
            for field in ("body", "orelse"):
                sub = getattr(st, field, None)
                if isinstance(sub, list) and isinstance(st, (gast.For, gast.While, gast.If)):
                    visit(sub, path + [(st, sub)])

    visit(out, [(None, out)])
    # decide on the unchanged code, then rewrite (a loop's rewrite changes no other decision:
    # only its range changes, and the liveness walk reads the range's names alike; a loop with
    # a counter becomes statements around it, in its own block)
    chosen, counted = [], []
    nonneg = nonnegative_names(out)
    arrays = dict(ranks)
    for st in out:
        for n in gast.walk(st):
            if isinstance(n, gast.Subscript) and isinstance(n.value, gast.Name):
                arrays.setdefault(n.value.id, None)
    for st, path in todo:
        top = out[:_top_index(out, st, path) + 1]
        if _commutes(st, path, top, made, arrays, nonneg=nonneg):
            chosen.append(st)
            continue
        ind = _induction(st)
        if ind is not None and _commutes(st, path, top, made, arrays, ind, nonneg=nonneg):
            counted.append((st, ind))
    if not chosen and not counted:
        return out
    # the input is not modified: rewrite a copy (the memo maps each loop to its copy)
    memo = {}
    out = copy.deepcopy(out, memo)
    for st in chosen:
        memo[id(st)].iter = _forward_range(st.iter)
    if counted:
        fresh = _Fresh(out)
        out = _replace(out, {id(memo[id(st)]): (v, c, fresh.name()) for st, (v, c) in counted})
    return out


# ---------------------------------------------------------------- loops with a counter

def _induction(loop):
    """``(v, c)`` where ``loop``'s body starts with ``v = v - c`` or ``v -= c`` (``c`` a positive
    int constant: the reverse of a counter the forward trip raised by ``c`` last), no other
    statement of the loop assigns ``v`` and its bounds do not read ``v``; else None."""
    if not loop.body or runs_test(loop) is None:      # the bounds are read again: pure ones
        return None
    st = loop.body[0]
    if isinstance(st, gast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], gast.Name) \
            and isinstance(st.value, gast.BinOp) and isinstance(st.value.op, gast.Sub) \
            and isinstance(st.value.left, gast.Name) and st.value.left.id == st.targets[0].id:
        v, c = st.targets[0].id, int_value(st.value.right)
    elif isinstance(st, gast.AugAssign) and isinstance(st.target, gast.Name) and \
            isinstance(st.op, gast.Sub):
        v, c = st.target.id, int_value(st.value)
    else:
        return None
    if c is None or c <= 0 or v == loop.target.id:
        return None
    # the rewrite moves the counter before the loop and evaluates the bounds again: bounds that
    # read the counter would see it moved (the emitter copies such a bound into a temporary,
    # so its loops never read the counter there; a hand-made loop might)
    if any(isinstance(n, gast.Name) and n.id == v for n in gast.walk(loop.iter)):
        return None
    stores = [n for n in gast.walk(loop)
              if isinstance(n, gast.Name) and n.id == v and isinstance(n.ctx, gast.Store)]
    return (v, c) if len(stores) == 1 else None


def _counted(loop, v, c, iv):
    """The statements replacing the reverse loop ``loop`` (a copy, reused in the ``else``)
    whose trips commute but for the counter ``v`` (``v -= c`` first in each trip)."""
    fwd = _forward_range(loop.iter).args          # range(lo, hi) or range(hi)
    length = fwd[0] if len(fwd) == 1 else gast.BinOp(left=fwd[1], op=gast.Sub(), right=fwd[0])
    trips = gast.Call(func=_nm("max"), args=[copy.deepcopy(length), gast.Constant(value=0, kind=None)],
                      keywords=[])
    total = trips if c == 1 else gast.BinOp(left=gast.Constant(value=c, kind=None), op=gast.Mult(),
                                            right=trips)

    def shift(op):
        return gast.Assign(targets=[_nm(v, True)], value=gast.BinOp(
            left=_nm(v), op=op, right=copy.deepcopy(total)), type_comment=None)

    body = [_renamed(st, v, iv) for st in loop.body[1:]]
    body.append(gast.AugAssign(target=_nm(iv, True), op=gast.Add(),
                               value=gast.Constant(value=c, kind=None)))
    ahead = gast.For(target=copy.deepcopy(loop.target), iter=_forward_range(loop.iter),
                     body=body, orelse=[], type_comment=None)
    start = gast.Assign(targets=[_nm(iv, True)], value=_nm(v), type_comment=None)
    first = shift(gast.Sub())
    text = getattr(loop, "coarsen_comment", None)
    if text:
        first.coarsen_comment = text
    if v in (FP, IP):
        # a tape position is never below 0: max(v, 0) is v, and tells Numba so (it then drops
        # its checks of negative indices); the tape's entries are read in the order they were
        # pushed
        start.value = gast.Call(func=_nm("max"), args=[_nm(v), gast.Constant(value=0, kind=None)],
                                keywords=[])
        start.coarsen_comment = f"the trips in forward order, reading the tape from {v} up"
        return [first, start, ahead]
    test = gast.Compare(left=_nm(v), ops=[gast.GtE()], comparators=[gast.Constant(value=0, kind=None)])
    branch = gast.If(test=test, body=[start, ahead], orelse=[shift(gast.Add()), loop])
    branch.coarsen_comment = (
        f"the trips in forward order, {v} counting up from where they leave it: Numba drops "
        f"its checks of negative indices where {v} starts at 0 or above")
    return [first, branch]


def _renamed(node, old, new):
    """A copy of ``node`` with the loads of ``old`` loading ``new``."""
    node = copy.deepcopy(node)
    for n in gast.walk(node):
        if isinstance(n, gast.Name) and n.id == old and isinstance(n.ctx, gast.Load):
            n.id = new
    return node


def _nm(id_, store=False):
    return gast.Name(id=id_, ctx=gast.Store() if store else gast.Load(), annotation=None,
                     type_comment=None)


class _Fresh:
    """Counter names ``_iv1``, ``_iv2``, ... that the function does not use."""

    def __init__(self, body):
        self.used = {n.id for st in body for n in gast.walk(st) if isinstance(n, gast.Name)}
        self.k = 0

    def name(self):
        while True:
            self.k += 1
            if f"_iv{self.k}" not in self.used:
                self.used.add(f"_iv{self.k}")
                return f"_iv{self.k}"


def _replace(stmts, counters):
    """``stmts`` with each loop whose id is in ``counters`` (``(v, c, counter name)``) replaced
    by its ``_counted`` statements, inner ones first (the blocks on the way are rebuilt in
    place: ``stmts`` is the rewrite's own copy)."""
    out = []
    for st in stmts:
        for field in ("body", "orelse"):
            sub = getattr(st, field, None)
            if isinstance(sub, list) and isinstance(st, (gast.For, gast.While, gast.If)):
                setattr(st, field, _replace(sub, counters))
        if id(st) in counters:
            out.extend(_counted(st, *counters[id(st)]))
        else:
            out.append(st)
    return out
