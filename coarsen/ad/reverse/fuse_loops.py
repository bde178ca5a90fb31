"""Loop fusion: two loops of one block over the same trips run as one loop.

Scalarized array code gives one loop nest per array statement, in both sweeps.  gemver's
reverse sweep reads and updates the matrix adjoint in the reverse of ``A.T @ y``, then reads
it again, element by element, in the reverse of ``A + outer(u1, v1) + ...``: two passes over
an n x n array where the hand-written gradient makes one.  Run as one loop nest, each element
is read while it is still in a register or in L1.

Requires: the generated function's top-level statements (gast) and the names the compiler made.
Guarantees: ``fuse_loops(body, made)`` returns the statements (a new list; the input is not
modified: a block that changes is rebuilt from copies) in which loops ``L1`` and ``L2`` of one
block, ``L2`` the next loop after ``L1``, are one loop ``L1`` whose body is ``L1``'s body then
``L2``'s (``L2``'s variable renamed to ``L1``'s, or assigned from it where the function reads
it elsewhere), the statements between them moved before ``L1`` or after it, when

* both are ``for v in range(...)`` without ``else``, with the same number of arguments, each
  pair the same expression reading nothing ``L1`` or the moved statements assign, or both
  provably equal: names assigned once at the top level (or parameters), ``Y.shape[d]`` of an
  array assigned only by top-level statements (the same assignment for both), the dimensions
  of ``np.empty``/``np.zeros``/``np.ones`` that made ``Y``, and ``_same_len(a, b)``, which
  returns ``a`` and raises unless ``a == b``;
* their bodies hold only assignments and augmented assignments to names and array elements,
  ``if`` and ``for ... in range`` loops (no ``break``, ``continue``, ``return``, ``raise``,
  ``while``, bare calls), calls to ``math`` and ``PURE_CALLS`` only; the loop variables are
  assigned by their loops only, ``L1``'s variable appears nowhere in ``L2`` and ``L2``'s
  nowhere in ``L1``;
* no name that one loop assigns appears in the other (scalars are the loops' own);
* every array either loop stores into is first mentioned in a top-level ``np.zeros`` or
  ``np.empty`` assignment, and up to the loops' top-level statement has only the uses
  ``invariant_sums.no_alias`` allows (no view of it exists while the loops run); and
  for every array both loops access, of which one stores into it, every access in ``L1`` and
  every access in ``L2`` index some axis with their loop variable plus the same constant (the
  trip that touches an element in ``L2`` is the trip that touched it in ``L1``);
* each statement between them is an assignment or augmented assignment (calls to ``math``,
  ``PURE_CALLS`` and ``np.empty``/``np.zeros``/``np.ones`` only) that moves before ``L1`` (it
  shares no assigned name or array with ``L1``, nor with a statement that stays after it) or
  after ``L2`` (the same with ``L2``).

Each name and each array element then goes through the same operations in the same order, so
the results are the same bits.  Where the loops could raise (a ``PURE_CALLS`` helper, an index
out of range on the python target), the fused loop raises where either loop would, possibly
the other loop's error first.  The fused loop's body is then fused in turn, so matching nests
become one nest.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

import gast

from .cleanup import affine, elementwise_uses, index_elts, int_value, plain_range
from .invariant_sums import no_alias
from .loop_order import PURE_CALLS

__all__ = ["fuse_loops"]

_ALLOCATORS = frozenset({"empty", "zeros", "ones"})


@dataclass
class _Facts:
    """What a statement list reads and writes."""
    ok: bool = True
    names_w: set = field(default_factory=set)     # names assigned (loop variables included)
    names_r: set = field(default_factory=set)     # names loaded bare
    shapes: set = field(default_factory=set)      # arrays whose .shape is read
    elem_w: dict = field(default_factory=dict)    # array -> [index elts] stored
    elem_r: dict = field(default_factory=dict)    # array -> [index elts] loaded
    targets: list = field(default_factory=list)   # the For targets inside

    def touches(self):
        return self.names_w | self.names_r | self.shapes | set(self.elem_w) | set(self.elem_r)

    def elements(self):
        return set(self.elem_w) | set(self.elem_r)


def _call_ok(call, allocate):
    f = call.func
    if isinstance(f, gast.Attribute) and isinstance(f.value, gast.Name):
        return f.value.id == "math" or (allocate and f.value.id == "np" and f.attr in _ALLOCATORS)
    return isinstance(f, gast.Name) and f.id in PURE_CALLS


def _expr(e, f, allocate=False):
    skip = set()
    for n in gast.walk(e):
        if id(n) in skip:
            continue
        if isinstance(n, gast.Call):
            if not _call_ok(n, allocate):
                f.ok = False
            if isinstance(n.func, gast.Attribute):
                skip.add(id(n.func.value))           # math / np: modules, not variables
        elif isinstance(n, (gast.Lambda, gast.NamedExpr, gast.Yield, gast.YieldFrom, gast.Await,
                            gast.ListComp, gast.SetComp, gast.DictComp, gast.GeneratorExp)):
            f.ok = False
        elif isinstance(n, gast.Subscript) and isinstance(n.value, gast.Name):
            f.elem_r.setdefault(n.value.id, []).append(index_elts(n.slice))
            skip.add(id(n.value))
        elif isinstance(n, gast.Attribute) and n.attr == "shape" and isinstance(n.value, gast.Name):
            f.shapes.add(n.value.id)
            skip.add(id(n.value))
        elif isinstance(n, gast.Name) and isinstance(n.ctx, gast.Load):
            f.names_r.add(n.id)


def _target(t, f):
    if isinstance(t, gast.Name):
        f.names_w.add(t.id)
    elif isinstance(t, gast.Subscript) and isinstance(t.value, gast.Name):
        f.elem_w.setdefault(t.value.id, []).append(index_elts(t.slice))
        for e in index_elts(t.slice):
            _expr(e, f)
    else:
        f.ok = False


def _scan(stmts, f=None, allocate=False):
    """The facts of ``stmts`` (``f.ok`` false where a statement is outside the fusable forms)."""
    f = _Facts() if f is None else f
    for st in stmts:
        if not f.ok:
            break
        if isinstance(st, gast.Assign) and len(st.targets) == 1:
            _expr(st.value, f, allocate)
            _target(st.targets[0], f)
        elif isinstance(st, gast.AugAssign):
            _expr(st.value, f)
            _target(st.target, f)
            t = st.target
            if isinstance(t, gast.Name):
                f.names_r.add(t.id)
            elif isinstance(t, gast.Subscript) and isinstance(t.value, gast.Name):
                f.elem_r.setdefault(t.value.id, []).append(index_elts(t.slice))
        elif isinstance(st, gast.If) and not allocate:
            _expr(st.test, f)
            _scan(st.body, f)
            _scan(st.orelse, f)
        elif isinstance(st, gast.For) and not allocate:
            if st.orelse or not plain_range(st):
                f.ok = False
                break
            _expr(st.iter, f)
            f.names_w.add(st.target.id)
            f.targets.append(st.target.id)
            _scan(st.body, f)
        elif isinstance(st, gast.Pass) and not allocate:
            continue
        else:
            f.ok = False
    return f


class _Ctx:
    """Facts about the whole function, computed once per round."""

    def __init__(self, body, made):
        self.top, self.made = body, made
        self.counts = {}                 # name -> number of stores anywhere
        self.top_defs = {}               # name -> [(top index, value)] of top-level ``name = v``
        for k, st in enumerate(body):
            for n in gast.walk(st):
                if isinstance(n, gast.Name) and isinstance(n.ctx, (gast.Store, gast.Del)):
                    self.counts[n.id] = self.counts.get(n.id, 0) + 1
            if isinstance(st, gast.Assign) and len(st.targets) == 1 and \
                    isinstance(st.targets[0], gast.Name):
                self.top_defs.setdefault(st.targets[0].id, []).append((k, st.value))
        self.memo = {}

    def unaliased(self, x, pos):
        """Is ``x`` an array that no other name reaches while the top-level statement ``pos``
        runs: its first mention is a top-level ``x = np.zeros(...)`` / ``np.empty(...)`` (not
        a parameter), and up to ``pos`` and in it, ``x`` has only the uses
        ``invariant_sums.no_alias`` allows (fresh allocations, indexing without slices, whole
        updates, arithmetic operands, ``.shape``, ``return``)?"""
        key = (x, pos)
        if key not in self.memo:
            stmts = self.top[:pos + 1]
            first = next((st for st in stmts if any(
                isinstance(n, gast.Name) and n.id == x for n in gast.walk(st))), None)
            self.memo[key] = first is not None and isinstance(first, gast.Assign) and \
                len(first.targets) == 1 and isinstance(first.targets[0], gast.Name) and \
                first.targets[0].id == x and elementwise_uses([first], x)[1] and \
                no_alias(stmts, x)
        return self.memo[key]

    def keys(self, e, pos, depth=0):
        """Values ``e`` (read at top-level position ``pos``) provably equals."""
        if depth > 8:
            return set()
        c = int_value(e)
        if c is not None:
            return {("const", c)}
        if isinstance(e, gast.Name):
            n = self.counts.get(e.id, 0)
            if n == 0:
                return {("param", e.id)}
            defs = self.top_defs.get(e.id, [])
            if n != 1 or len(defs) != 1 or defs[0][0] >= pos:
                return set()
            q, v = defs[0]
            out = {("def", e.id)}
            if isinstance(v, gast.Call) and isinstance(v.func, gast.Name) and \
                    v.func.id == "_same_len" and len(v.args) == 2 and not v.keywords:
                for a in v.args:
                    out |= self.keys(a, q, depth + 1)
            elif isinstance(v, (gast.Name, gast.Subscript)):
                out |= self.keys(v, q, depth + 1)
            return out
        if isinstance(e, gast.Subscript) and isinstance(e.value, gast.Attribute) and \
                e.value.attr == "shape" and isinstance(e.value.value, gast.Name) and \
                int_value(e.slice) is not None:
            y, d = e.value.value.id, int_value(e.slice)
            defs = self.top_defs.get(y, [])
            if self.counts.get(y, 0) != len(defs):
                return set()                     # assigned inside a compound statement
            before = [(q, v) for q, v in defs if q < pos]
            if not before:
                return {("shape", y, d, -1)} if not defs else set()
            q, v = before[-1]
            out = {("shape", y, d, q)}
            if isinstance(v, gast.Call) and isinstance(v.func, gast.Attribute) and \
                    isinstance(v.func.value, gast.Name) and v.func.value.id == "np" and \
                    v.func.attr in _ALLOCATORS and v.args:
                dims = v.args[0].elts if isinstance(v.args[0], gast.Tuple) else [v.args[0]]
                if d < len(dims):
                    out |= self.keys(dims[d], q, depth + 1)
            return out
        return set()


def _mentions(stmts, name):
    return any(isinstance(n, gast.Name) and n.id == name for st in stmts for n in gast.walk(st))


def _same_trips(l1, l2, pos1, pos2, changed, ctx):
    """Do ``l1`` and ``l2`` run over the same values?  ``changed``: the names assigned between
    the two ranges' evaluations."""
    a1, a2 = l1.iter.args, l2.iter.args
    if len(a1) != len(a2):
        return False
    for x, y in zip(a1, a2):
        if gast.dump(x) == gast.dump(y):
            if not {n.id for n in gast.walk(y) if isinstance(n, gast.Name)} & changed:
                continue
        if not ctx.keys(x, pos1) & ctx.keys(y, pos2):
            return False
    return True


def _same_element(a, b, i, j):
    """At some axis ``a`` indexes with ``i`` and ``b`` with ``j``, plus the same constant."""
    for x, y in zip(a, b):
        fx, fy = affine(x), affine(y)
        if fx is not None and fy is not None and fx[0] == i and fy[0] == j and fx[1] == fy[1]:
            return True
    return False


def _loops_fuse(l1, l2, f1, f2, pos, ctx):
    i, j = l1.target.id, l2.target.id
    if not (f1.ok and f2.ok):
        return False
    if i in f1.targets or j in f2.targets or _mentions(l2.body, i) or _mentions(l1.body, j) \
            or i in f1.names_w or j in f2.names_w:
        return False
    if f1.names_w & f2.touches() or f2.names_w & f1.touches() or \
            set(f1.elem_w) & f2.names_r or set(f2.elem_w) & f1.names_r:
        return False
    for x in set(f1.elem_w) | set(f2.elem_w):
        if not ctx.unaliased(x, pos):
            return False
    for x in (set(f1.elem_w) | set(f2.elem_w)) & f1.elements() & f2.elements():
        acc1 = [(e, True) for e in f1.elem_w.get(x, [])] + [(e, False) for e in f1.elem_r.get(x, [])]
        acc2 = [(e, True) for e in f2.elem_w.get(x, [])] + [(e, False) for e in f2.elem_r.get(x, [])]
        for a, wa in acc1:
            for b, wb in acc2:
                if (wa or wb) and not _same_element(a, b, i, j):
                    return False
    return True


def _conflict(a, b):
    """Do two statement lists share a name one of them assigns, or an array one of them stores
    into (an array's ``.shape`` does not change when its elements do)?"""
    return bool(a.names_w & b.touches() or b.names_w & a.touches()
                or set(a.elem_w) & (b.elements() | b.names_r)
                or set(b.elem_w) & (a.elements() | a.names_r))


def _rename(stmts, old, new):
    out = copy.deepcopy(stmts)
    for st in out:
        for n in gast.walk(st):
            if isinstance(n, gast.Name) and n.id == old:
                n.id = new
    return out


def _dead_outside(top, loop, name):
    """Is every mention of ``name`` outside ``loop`` inside another loop that binds it (and
    does not hold ``loop``: there, a read after ``loop`` would see what ``loop`` left): its
    target or its body (its range and its ``else`` read the value from before it)?"""
    inside = set()

    def mark(stmts):
        for st in stmts:
            if isinstance(st, gast.For) and isinstance(st.target, gast.Name) and \
                    st.target.id == name and not any(n is loop for n in gast.walk(st)):
                inside.update(id(n) for part in [st.target] + st.body for n in gast.walk(part))
                mark(st.orelse)
                continue
            for fld in ("body", "orelse"):
                sub = getattr(st, fld, None)
                if isinstance(sub, list) and isinstance(st, (gast.For, gast.While, gast.If)):
                    mark(sub)
    mark(top)
    inside.update(id(n) for n in gast.walk(loop))
    return all(id(n) in inside for st in top for n in gast.walk(st)
               if isinstance(n, gast.Name) and n.id == name)


def _try_pair(block, k, m, pos, ctx):
    """Fuse ``block[k]`` and ``block[m]`` (the next loop after it): the new block, or None."""
    l1, l2 = block[k], block[m]
    pos1, pos2 = pos if pos is not None else (k, m)
    f1, f2 = _scan(l1.body), _scan(l2.body)
    if not _loops_fuse(l1, l2, f1, f2, pos2, ctx):
        return None
    up, down, down_facts = [], [], []
    f1_whole = _scan([l1])
    for st in block[k + 1:m]:
        fs = _scan([st], allocate=True)
        if not fs.ok:
            return None
        if _conflict(fs, f1_whole) or any(_conflict(fs, d) for d in down_facts):
            down.append(st)
            down_facts.append(fs)
        else:
            up.append(st)
    f2_whole = _scan([l2])
    if any(_conflict(d, f2_whole) for d in down_facts):
        return None
    changed = f1_whole.names_w | set(f1.elem_w)
    for d in down_facts:
        changed |= d.names_w | set(d.elem_w)
    if not _same_trips(l1, l2, pos1, pos2, changed, ctx):
        return None
    i, j = l1.target.id, l2.target.id
    if _dead_outside(ctx.top, l2, j):
        tail = _rename(l2.body, j, i)
    else:
        copy_j = gast.Assign(targets=[gast.Name(id=j, ctx=gast.Store(), annotation=None,
                                                type_comment=None)],
                             value=gast.Name(id=i, ctx=gast.Load(), annotation=None,
                                             type_comment=None), type_comment=None)
        tail = [copy_j] + copy.deepcopy(l2.body)
    note = getattr(l2, "coarsen_comment", None)
    if note and not getattr(tail[0], "coarsen_comment", None):
        tail[0].coarsen_comment = note
    fused = copy.copy(l1)
    fused.body = list(l1.body) + tail
    return block[:k] + up + [fused] + down + block[m + 1:]


def _fuse_block(block, pos, ctx):
    """``(block, changed)``: one fusion in ``block`` or in a block nested in it.  ``pos``: the
    top-level positions the ranges are read at (None for the top level itself)."""
    loops = [k for k, st in enumerate(block) if isinstance(st, gast.For) and plain_range(st)
             and not st.orelse]
    for a, b in zip(loops, loops[1:]):
        if any(isinstance(st, (gast.For, gast.While, gast.If)) for st in block[a + 1:b]):
            continue
        new = _try_pair(block, a, b, pos, ctx)
        if new is not None:
            return new, True
    for k, st in enumerate(block):
        if isinstance(st, (gast.For, gast.While, gast.If)):
            inner = pos if pos is not None else (k, k)
            for fld in ("body", "orelse"):
                sub = getattr(st, fld)
                new, changed = _fuse_block(sub, inner, ctx)
                if changed:
                    st = copy.copy(st)
                    setattr(st, fld, new)
                    return block[:k] + [st] + block[k + 1:], True
    return block, False


def fuse_loops(body, made):
    out = list(body)
    for _ in range(256):
        out, changed = _fuse_block(out, None, _Ctx(out, made))
        if not changed:
            break
    return out
