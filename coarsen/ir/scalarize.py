"""Scalarization: element-wise array expressions become explicit loop nests.

Requires: a typed ``ir.Function`` (``coarsen.ir.typeinfer.infer`` has run: ``fn.types`` and
``fn.views`` are filled in and in-place updates are stores), before activity analysis.

Guarantees: ``scalarize(fn)`` returns a new ``Function`` (``fn`` is not modified) in which each
*array expression* that qualifies is computed element by element in a loop nest, so that
neither sweep allocates its temporaries, the reverse sweep accumulates adjoints element by
element, and segments of interest form per element.  Everything else is left as it was.

An array expression is a tree of compiler temporaries, each assigned once and used once, all
in one block, computed by element-wise primitives (the registry's ``elementwise`` flag) and by
basic-slice reads (``getitem`` with integers, slices and ``np.newaxis``), with at least one
element-wise operation (a dot product needs none); its leaves are scalars and arrays.  It ends in one *sink*:

* a store into a region of an array (``B[1:-1, 1:-1] = c * (...)``, ``u[:] += ...``);
* a sum over every axis (``np.sum(W * e * e)``), accumulated in index order;
* a sum along one axis of a float64 array of rank 2 or more (``np.sum(d * d, axis=0)``, no
  ``keepdims``), assigned to a variable assigned nowhere else: ``out[j] += v[i, j]`` into a
  zeroed array with the loops in index order, so each element adds its terms in the order of
  the summed axis from 0.0, as Numba's ``np.sum(axis=)`` does (the cpu target's bits); the
  tree may be a bare array (softmax's ``np.sum(e, axis=1)``);
* the assignment of the new array to a variable assigned nowhere else (``e = A - target``),
  also a temporary whose one use is a store refused for its overlap (``y[:k] = y[:k] + a *
  y[:k][::-1]``: the store then copies the new array, as NumPy's does; ``unstored``);
* the assignment of the new array to a variable assigned elsewhere too (``path =
  np.minimum(path, ...)`` in a loop): the nest writes a new temporary, moved into the variable
  after it (the tree may read the variable); only for the user's variables that are not
  parameters, not views, and never written element by element through any name
  (``rebindable``: nothing can then write the temporary's memory after the move, and the
  move is not recorded in ``fn.views``);
* a dot product of two 1-D trees (``L[i, :i] @ x[:i]``, ``np.dot(w, x)``), accumulated in
  index order; its two sides must have one length (``same_len``), as NumPy's ``dot`` requires
  (no broadcasting between them);
* a matrix-vector product of a 2-D tree and a 1-D tree (``(beta * A.T) @ y``), assigned to a
  variable assigned nowhere else, each element accumulated in index order; the tree must
  compute something or read a slice (a bare ``A @ x`` or ``A.T @ x`` stays a call: a
  transpose is the call's strides, and ``coarsen.ir.transposed_products`` makes it ``x @ A``).

Besides slices, a tree may read a whole 2-D array transposed (``A.T``).  A read of a read
(``t = a[i1]`` used once, by ``t[i2]``, ``i1`` of integers and full slices) is one read of ``a``
(``path[:, k][:, None]`` is ``path[:, None, k]``: ``scalar_index.compose_index``).

The nest runs over the broadcast shape.  Each leaf's extents (and the stored region's) are
computed at run time with NumPy's slice rules (``slice_len``, ``slice_start``); NumPy's
broadcasting is kept: an axis of length 1 is read at its one element (``bcast_stride``, 0 or 1,
scales the loop index) and extents that do not broadcast raise ``ValueError`` as NumPy does.
The element-wise values are NumPy's; only a sum's rounding may differ (NumPy sums pairwise),
and a matrix-vector product's: its matrix side's scalar factor scales each sum once
(``beta * sum_p A[p, i] y[p]``).  In a nest of two or more loops each statement goes in the
body of the loop whose index it depends on (a read along the outer axis, once per outer trip).
The indices the nests make are in range by construction: ``fn.in_range`` names them, and
bounds planning (``coarsen.analysis.bounds``) checks them no further.  A nest's innermost statements
and the loop each goes in are ``coarsen.ir.scalar_nest``'s.

An expression stays array code when scalarizing it could change what it computes:

* a leaf may alias the stored array (the same base array, through ``fn.views``, unless the
  stored array was made new in the same block and nothing views it since) and is not exactly
  the region being stored (NumPy evaluates the right-hand side before it stores);
* a statement between the tree's first statement and the sink stores, is control flow, or
  reassigns a variable an earlier statement of the tree read;
* a value is neither float64 nor int64, a rank does not fit, or a slice step is not a
  nonzero integer constant.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, replace

from .nodes import (NEWAXIS, Array, Assign, Const, For, I64, If, Scalar, Slice, Store, Var,
                    While, keep_records, uses, walk)
from .primitives import REGISTRY, ops_where
from .scalar_index import (Axis, Leaf, compose_index, constant_slice, full_axes, int_items, same_slice_length,
                           shape_roots, slice_key)
from .scalar_nest import NestBody, levels

ELEMENTWISE = ops_where(lambda p: p.elementwise)
DOTS = ("matmul", "dot")       # of two 1-D arrays: a sum of products
#: stands for a missing slice bound: it clips to the array's ends as ``None`` does
BIG = 2 ** 62
_DTYPES = ("f64", "i64")


@dataclass
class _Expr:
    sink: object          # the Store or Assign that consumes the tree
    kind: str             # "store", "sum", "axsum", "fresh", "rebind", "dot" or "matvec"
    absorbed: list        # positions (in the block) of the tree's statements, ascending
    root: object          # the operand the sink consumes
    rank: int             # the nest's depth
    out: str | None = None    # the new array the nest writes ("fresh": the sink's target)
    axis: int | None = None   # the summed axis ("axsum"), from 0


def scalarize(fn):
    """``fn`` with its qualifying array expressions as loop nests (see the module docstring)."""
    return _Scalarizer(fn).run()


class _Scalarizer:
    def __init__(self, fn):
        self.fn = fn
        self.types = dict(fn.types)
        self.views = dict(fn.views)
        self.temps = set(fn.temps)
        self.in_range = set(fn.in_range)
        self.defs, self.nuses = {}, {}
        used = set(fn.params) | set(fn.types)
        for st in walk(fn.body):
            if isinstance(st, Assign):
                self.defs[st.target] = self.defs.get(st.target, 0) + 1
            elif isinstance(st, For):
                used.add(st.var)
            for u in uses(st):
                if isinstance(u, Var):
                    self.nuses[u.name] = self.nuses.get(u.name, 0) + 1
        fn.names.reserve(used)
        self.names = fn.names      # the module's supply: it knows the names of custom rules too
        self.shape_roots = shape_roots(fn)
        self.lengths = {}       # an extent operand -> (shape root, axis, constant slice) or absent
        self.counter = max([int(n[2:]) for n in used if n[:2] == "_t" and n[2:].isdigit()] or [0])
        self.loops = 0
        self.changed = False
        self.unstored = set()       # the values of the block's refused stores (``block``)
        self.composed = {}          # id of a read t[i2] -> (a, i3) of t = a[i1] (``composable``)
        self.composed_inner = set()  # ids of the reads t = a[i1] composed into another

    # ------------------------------------------------------------------ names
    def new(self, kind, t):
        name = self.names.numbered("_t", "scalarize", start=self.counter + 1)
        self.counter = int(name[2:])
        self.types[name] = t if not isinstance(t, str) else Scalar(t)
        self.temps.add(name)
        return name

    def loop_var(self):
        name = self.names.numbered("_i", "scalarize")
        self.types[name] = I64
        return name

    # ------------------------------------------------------------------ driver
    def run(self):
        body = copy.deepcopy(self.fn.body)
        body = self.block(body)
        if not self.changed:
            return self.fn
        return keep_records(replace(self.fn, body=body, types=self.types, views=self.views,
                                    temps=frozenset(self.temps), in_range=frozenset(self.in_range)),
                            self.fn)

    def block(self, stmts):
        for st in stmts:
            if isinstance(st, If):
                st.body = self.block(st.body)
                st.orelse = self.block(st.orelse)
            elif isinstance(st, For):
                st.body = self.block(st.body)
            elif isinstance(st, While):
                st.test_body = self.block(st.test_body)
                st.body = self.block(st.body)
        exprs, taken = {}, set()
        stores = {pos: self.expression(stmts, pos) for pos, st in enumerate(stmts) if isinstance(st, Store)}
        # a refused store's value (its reads overlap its region otherwise than element for
        # element: y[:k] = y[:k] + a * y[:k][::-1]) is a tree of its own, a new array it copies
        self.unstored = {st.value.name for pos, st in enumerate(stmts)
                         if pos in stores and stores[pos] is None and isinstance(st.value, Var)}
        for pos, st in enumerate(stmts):
            e = stores[pos] if pos in stores else self.expression(stmts, pos)
            if e is not None and not taken.intersection(e.absorbed):
                exprs[pos] = e
                taken.update(e.absorbed)
        if not exprs:
            return stmts
        self.changed = True
        out = []
        for pos, st in enumerate(stmts):
            if pos in exprs:
                out.extend(self.emit(stmts, exprs[pos]))
            elif pos not in taken:
                out.append(st)
        return out

    # ------------------------------------------------------------------ recognition
    def is_arr(self, operand):
        return isinstance(operand, Var) and isinstance(self.types.get(operand.name), Array)

    def expression(self, stmts, pos):
        st = stmts[pos]
        if isinstance(st, Store):
            if not self.is_arr(st.value) or st.aug not in (None, "add", "sub"):
                return None
            region = self.axes(st.array, st.index)
            if region is None or any(a.axis is None for a in region):
                return None
            kind, root, rank = "store", st.value, len(region)
        elif isinstance(st, Assign) and st.op == "sum" and len(st.args) == 1 \
                and st.attr("axis") is None and not st.attr("keepdims") \
                and self.is_arr(st.args[0]) and isinstance(self.types.get(st.target), Scalar):
            kind, root, rank = "sum", st.args[0], self.types[st.args[0].name].ndim
        elif isinstance(st, Assign) and st.op in ELEMENTWISE \
                and isinstance(self.types.get(st.target), Array) \
                and self.defs.get(st.target) == 1 and st.target not in self.fn.params \
                and st.target != self.fn.result \
                and not (st.target in self.temps and self.nuses.get(st.target) == 1
                         and st.target not in self.unstored):
            # (a temporary used once belongs to the tree of its use, unless a refused store)
            kind, root, rank = "fresh", Var(st.target), self.types[st.target].ndim
        elif isinstance(st, Assign) and st.op == "sum" and len(st.args) == 1 \
                and self.axis_sum_axis(st) is not None:
            kind, root, rank = "axsum", st.args[0], self.types[st.args[0].name].ndim
        elif isinstance(st, Assign) and st.op in ELEMENTWISE \
                and isinstance(self.types.get(st.target), Array) \
                and self.defs.get(st.target, 0) > 1 and self.rebindable(st.target):
            kind, root, rank = "rebind", Var(st.target), self.types[st.target].ndim
        elif isinstance(st, Assign) and st.op in DOTS and len(st.args) == 2 \
                and all(self.is_arr(a) and self.types[a.name].ndim == 1 for a in st.args) \
                and isinstance(self.types.get(st.target), Scalar):
            kind, root, rank = "dot", None, 1
        elif isinstance(st, Assign) and st.op in DOTS and len(st.args) == 2 \
                and all(self.is_arr(a) for a in st.args) \
                and [self.types[a.name].ndim for a in st.args] == [2, 1] \
                and isinstance(self.types.get(st.target), Array) \
                and self.types[st.target].ndim == 1 and self.defs.get(st.target) == 1 \
                and st.target not in self.fn.params and st.target != self.fn.result:
            kind, root, rank = "matvec", None, 2
        else:
            return None
        defs = {s.target: k for k, s in enumerate(stmts[:pos]) if isinstance(s, Assign)}
        absorbed = []
        if kind in ("fresh", "rebind", "dot", "matvec"):
            for a in st.args:
                if self.is_arr(a):
                    self.grow(stmts, a.name, defs, absorbed)
            if kind in ("fresh", "rebind"):
                absorbed.append(pos)
        else:
            self.grow(stmts, root.name, defs, absorbed)
        absorbed.sort()
        if kind not in ("dot", "axsum") and not any(stmts[k].op in ELEMENTWISE for k in absorbed) \
                and not (kind == "matvec" and any(stmts[k].op != "transpose" for k in absorbed)):
            # (a matrix-vector product whose tree only transposes stays a call: the
            # transpose is the call's strides)
            return None
        e = _Expr(st, kind, absorbed, root, rank,
                  axis=self.axis_sum_axis(st) if kind == "axsum" else None)
        return e if self.valid(stmts, pos, e) else None

    def grow(self, stmts, name, defs, absorbed):
        k = defs.get(name)
        if k is None or name not in self.temps or self.defs.get(name) != 1 \
                or self.nuses.get(name) != 1:
            return
        s = stmts[k]
        if s.op in ELEMENTWISE:
            absorbed.append(k)
            for a in s.args:
                if self.is_arr(a):
                    self.grow(stmts, a.name, defs, absorbed)
        elif s.op == "getitem" and self.is_arr(s.args[0]) \
                and self.axes(s.args[0].name, s.index) is not None:
            absorbed.append(k)
            inner = self.composable(stmts, s, defs)
            if inner is not None:
                # ``t = a[i1]; u = t[i2]``: one read ``a[i3]``, ``t`` absorbed with it
                absorbed.append(inner)
        elif s.op == "transpose" and len(s.args) == 1 and self.is_arr(s.args[0]) \
                and self.types[s.args[0].name].ndim == 2 and not s.attrs:
            absorbed.append(k)

    def composable(self, stmts, s, defs):
        """The position of ``t = a[i1]`` when the read ``s`` (``t[i2]``) composes with it into
        one basic read of ``a`` (``path[:, k][:, None]`` is ``path[:, None, k]``), else None.
        ``t`` is a temporary of this block used once (by ``s``), and ``i1`` holds integers and
        full slices only: ``t``'s axes are then ``a``'s unindexed axes, in order, and ``s``'s
        items apply to them as they are (``composed``)."""
        t = s.args[0].name
        k = defs.get(t)
        if k is None or t not in self.temps or self.defs.get(t) != 1 or self.nuses.get(t) != 1:
            return None
        inner = stmts[k]
        if inner.op != "getitem" or not self.is_arr(inner.args[0]) or inner.attrs:
            return None
        if not all(self.is_int(it) or it == Slice(None, None, None) for it in inner.index):
            return None
        if self.axes(inner.args[0].name, inner.index) is None:
            return None
        self.composed[id(s)] = (inner.args[0].name, compose_index(
            inner.index, s.index, self.types[inner.args[0].name].ndim))
        self.composed_inner.add(id(inner))
        return k

    def read_of(self, s):
        """``(array, items)`` an absorbed read ``s`` reads (composed with the read it reads)."""
        return self.composed.get(id(s), (s.args[0].name, s.index))

    def axes(self, array, index):
        """The ``Axis`` of each axis of ``array[index]`` (a basic index), or None."""
        nd = self.types[array].ndim
        out, axis = [], 0
        for it in index:
            if it == NEWAXIS:
                out.append(Axis(None, None))
            elif isinstance(it, Slice):
                step = it.step
                if step is not None and not (isinstance(step, Const) and type(step.value) is int
                                             and step.value != 0):
                    return None
                for part in (it.lower, it.upper):
                    if part is not None and not self.is_int(part):
                        return None
                out.append(Axis(axis, it))
                axis += 1
            elif self.is_int(it):
                axis += 1
            else:
                return None
        if axis > nd:
            return None
        out.extend(Axis(a, Slice(None, None, None)) for a in range(axis, nd))
        return out

    def leaf_axes(self, leaf):
        """The axes ``leaf`` reads, in the order of the nest's axes."""
        axs = self.axes(leaf.array, leaf.items)
        return axs[::-1] if leaf.transposed else axs

    def is_int(self, operand):
        if isinstance(operand, Const):
            return type(operand.value) is int
        return isinstance(operand, Var) and self.types.get(operand.name) == I64

    def leaves(self, stmts, e):
        """The tree's leaves: absorbed reads, then whole arrays (in order of first use)."""
        mine = {stmts[k].target for k in e.absorbed if stmts[k] is not e.sink or e.kind != "rebind"}
        out, seen = [], set()
        for k in e.absorbed:
            s = stmts[k]
            if s.op == "getitem":
                if id(s) in self.composed_inner:
                    continue        # read through the read composed with it
                out.append(Leaf(*self.read_of(s), s))
                continue
            if s.op == "transpose":
                out.append(Leaf(s.args[0].name, (), s, transposed=True))
                continue
            for a in s.args:
                if self.is_arr(a) and a.name not in mine and a.name not in seen:
                    seen.add(a.name)
                    out.append(Leaf(a.name, (), None))
        roots = e.sink.args if e.kind in ("dot", "matvec") else \
            (e.root,) if e.kind not in ("fresh", "rebind") else ()
        for r in roots:
            if r.name not in mine and r.name not in seen:
                seen.add(r.name)
                out.append(Leaf(r.name, (), None))
        return out

    def side(self, stmts, e, leaves, operand):
        """The leaves of the subtree that computes ``operand`` (one side of a dot)."""
        by_target = {stmts[k].target: stmts[k] for k in e.absorbed}
        found, todo = set(), [operand.name]
        while todo:
            n = todo.pop()
            s = by_target.get(n)
            if s is None:
                found.add(("whole", n))
            elif s.op in ("getitem", "transpose"):
                found.add(("read", id(s)))
            else:
                todo.extend(a.name for a in s.args if self.is_arr(a))
        return [leaf for leaf in leaves
                if (("read", id(leaf.stmt)) if leaf.stmt is not None else ("whole", leaf.array))
                in found]

    def valid(self, stmts, pos, e):
        absorbed = set(e.absorbed)
        for k in e.absorbed:
            t = self.types[stmts[k].target]
            if not isinstance(t, Array) or t.dtype not in _DTYPES or t.ndim > e.rank:
                return False
        leaves = self.leaves(stmts, e)
        for leaf in leaves:
            t = self.types[leaf.array]
            if t.dtype not in _DTYPES:
                return False
            if len(self.axes(leaf.array, leaf.items)) > e.rank:
                return False
        if e.kind == "store":
            target = e.sink.array
            if self.types[target].dtype not in _DTYPES:
                return False
            if self.types[target].dtype != "f64" and any(
                    self.types[stmts[k].target].dtype == "f64" for k in e.absorbed):
                return False          # NumPy's casting on store is not element-wise code here
            base = self.views.get(target, target)
            region = full_axes(self.axes(target, e.sink.index))
            fresh = self.fresh_in_block(stmts, pos, target, absorbed)
            for leaf in leaves:
                if leaf.array != target and (fresh or self.views.get(leaf.array, leaf.array) != base):
                    continue
                # the one safe overlap: each element read exactly where it is then written
                if leaf.array != target or target in self.views or leaf.transposed \
                        or full_axes(self.axes(leaf.array, leaf.items)) != region \
                        or int_items(leaf.items) != int_items(e.sink.index):
                    return False
        # between the tree's first statement and the sink: no stores, no control flow, and no
        # reassignment of a variable an earlier statement of the tree read
        read = set()
        for k in range(e.absorbed[0] if e.absorbed else pos, pos):
            s = stmts[k]
            if k in absorbed:
                read.update(u.name for u in uses(s) if isinstance(u, Var))
                continue
            if not isinstance(s, Assign) or s.target in read:
                return False
        return True

    def axis_sum_axis(self, st):
        """The axis of ``target = np.sum(a, axis=k)`` that qualifies as a sink (``a`` a float64
        array of rank 2 or more, one integer axis, no other parameter, ``target`` a new array
        assigned once, not a parameter, not the result), from 0; else None."""
        a, t = st.args[0], self.types.get(st.target)
        ax = st.attr("axis")
        if not self.is_arr(a) or not isinstance(t, Array) or type(ax) is not int \
                or st.attr("keepdims") or any(k not in ("axis", "keepdims") for k, _ in st.attrs):
            return None
        nd = self.types[a.name].ndim
        if nd < 2 or t.ndim != nd - 1 or not -nd <= ax < nd or t.dtype != "f64" \
                or self.types[a.name].dtype != "f64" or self.defs.get(st.target) != 1 \
                or st.target in self.fn.params or st.target == self.fn.result:
            return None
        return ax % nd

    def rebindable(self, target):
        """May an element-wise tree assigned to ``target``, a variable assigned elsewhere too
        (``path = np.minimum(path, ...)`` in a loop), become a nest into a new temporary moved
        into ``target`` after it?  The move (``copy``) is recorded as no view: ``target`` is
        the user's (not a parameter, not the result), never written element by element
        (``Store``), directly or through a view, and no view of anything (``fn.views``):
        no write can reach the temporary's memory after the nest, and no analysis needs
        the alias.  (A view of ``target`` only reads: of the old array or of the new.)"""
        if target in self.fn.params or target == self.fn.result or target in self.temps \
                or target in self.views:
            return False
        return not any(isinstance(st, Store) and self.views.get(st.array, st.array) == target
                       for st in walk(self.fn.body))

    def fresh_in_block(self, stmts, pos, target, absorbed):
        """Is ``target`` a new array at ``pos``, that no other variable can view?  It is when
        its last assignment before ``pos`` in this block makes a new array (not a view) and
        no statement since views it: ``fn.views`` is one map for the whole function (``u = v``
        at the end of a loop body makes ``u`` a view of ``v`` there), this is the flow-sensitive
        fact at the store."""
        last = None
        for k in range(pos):
            s = stmts[k]
            if isinstance(s, Assign) and s.target == target:
                last = k
        if last is None or REGISTRY[stmts[last].op].view:
            return False
        for k in range(last + 1, pos):
            s = stmts[k]
            if k in absorbed:
                continue
            if not isinstance(s, (Assign, Store)):
                return False          # nested code may make views of it
            if isinstance(s, Assign) and REGISTRY[s.op].view and Var(target) in s.args:
                return False
        return True

    # ------------------------------------------------------------------ emission
    def extent(self, pre, cache, array, ax):
        """The operand holding the length of ``array[... ax.slice ...]`` along ``ax``."""
        if ax.axis is None:
            return Const(1)
        root = self.shape_roots.get(array, array)
        key = (root, ax.axis, slice_key(ax.slice))
        if key in cache:
            return cache[key]
        n = self.dim(pre, cache, array, ax.axis)
        sl = ax.slice
        if sl.lower is None and sl.upper is None and sl.step is None:
            cache[key] = n
            self.lengths[n] = (root, ax.axis, slice(None))
            return n
        step = sl.step.value if sl.step is not None else 1
        lo = sl.lower if sl.lower is not None else Const(0 if step > 0 else BIG)
        hi = sl.upper if sl.upper is not None else Const(BIG if step > 0 else -BIG)
        e = self.new("e", I64)
        pre.append(Assign(e, "slice_len", (n, lo, hi, Const(step)), self.loc))
        cache[key] = Var(e)
        constant = constant_slice(sl)
        if constant is not None:
            self.lengths[Var(e)] = (root, ax.axis, constant)
        return Var(e)

    def same_length(self, x, n):
        """Whether the extents ``x`` and ``n`` hold one length whatever the arrays' shapes:
        the same axis of arrays of one shape (``shape_roots``) through slices of that
        length for every axis length (``same_slice_length``)."""
        a, b = self.lengths.get(x), self.lengths.get(n)
        return a is not None and b is not None and a[:2] == b[:2] and \
            same_slice_length(a[2], b[2])

    def dim(self, pre, cache, array, axis):
        key = (self.shape_roots.get(array, array), axis)
        if key not in cache:
            d = self.new("d", I64)
            pre.append(Assign(d, "dim", (Var(array), Const(axis)), self.loc))
            cache[key] = Var(d)
        return cache[key]

    def start(self, pre, cache, array, ax):
        """The operand holding the first index of ``ax``'s slice (valid when it is not empty)."""
        sl = ax.slice
        step = sl.step.value if sl.step is not None else 1
        if step > 0 and sl.lower is None:
            return Const(0)
        if step > 0 and isinstance(sl.lower, Const) and sl.lower.value >= 0:
            return sl.lower
        key = ("start", array, ax.axis, slice_key(sl))
        if key not in cache:
            n = self.dim(pre, cache, array, ax.axis)
            lo = sl.lower if sl.lower is not None else Const(BIG)
            s = self.new("s", I64)
            pre.append(Assign(s, "slice_start", (n, lo, Const(step)), self.loc))
            cache[key] = Var(s)
        return cache[key]

    def emit(self, stmts, e):
        """The statements replacing the tree ``e``: extents and starts computed once
        (``pre``), then the loop nest around the element-wise body, then the sink's result."""
        sink = e.sink
        self.loc = sink.loc
        pre, cache = [], {}
        leaves = self.leaves(stmts, e)
        R = e.rank
        extents, equal, swap = self.nest_extents(pre, cache, stmts, e, leaves)
        plans = self.leaf_plans(pre, cache, leaves, extents, equal, R)
        region_plan = []
        if e.kind == "store":
            for d, ax in enumerate(self.axes(sink.array, sink.index)):
                region_plan.append((ax, d, self.start(pre, cache, sink.array, ax), Const(1)))
        acc = zero = None
        if e.kind in ("sum", "dot", "matvec"):
            kind = self.types[sink.target].kind if e.kind != "matvec" else \
                self.types[sink.target].dtype
            acc = self.new("acc", kind)
            zero = Assign(acc, "copy", (Const(0.0 if kind == "f64" else 0),), sink.loc)
            if e.kind != "matvec":
                pre.append(zero)
        if e.kind == "axsum":
            t = self.types[sink.target]
            e.out = sink.target
            pre.append(Assign(e.out, "zeros", tuple(x for d, x in enumerate(extents) if d != e.axis),
                              sink.loc, attrs=(("dtype", t.dtype), ("ndim", t.ndim))))
        if e.kind in ("fresh", "rebind", "matvec"):
            t = self.types[sink.target]
            # a rebinding's tree may read the variable it rebinds: the nest writes a new
            # temporary, moved into the variable after the nest (``rebindable``)
            e.out = self.new("a", t) if e.kind == "rebind" else sink.target
            pre.append(Assign(e.out, "zeros" if e.kind == "matvec" and swap else "empty", tuple(extents[:t.ndim]), sink.loc,
                              attrs=(("dtype", t.dtype), ("ndim", t.ndim))))
        body = NestBody(self, [self.loop_var() for _ in range(R)], plans)
        factor = self.matvec_factor(stmts, e) if e.kind == "matvec" else None
        self.absorb(stmts, e, body, factor)
        self.sink_statements(e, body, acc, factor, swap, region_plan)
        out = pre + self.loop_nest(e, body, acc, zero, factor, swap, extents)
        if e.kind in ("sum", "dot"):
            out.append(Assign(sink.target, "copy", (Var(acc),), sink.loc))
        elif e.kind == "rebind":
            out.append(Assign(sink.target, "copy", (Var(e.out),), sink.loc))
        return out

    def nest_extents(self, pre, cache, stmts, e, leaves):
        """``(extents, equal, swap)``: the operands holding the nest's extents (the stored
        region's, or the broadcast of the leaves', of each side of a dot: the two must then
        have one length, as NumPy's dot requires), the operands known to hold the same length
        as an extent, and whether a matrix-vector product's loops are interchanged."""
        sink = e.sink
        equal = {}      # an extent -> the operands known to hold the same length
        swap = False    # a matrix-vector product's loops interchanged
        R = e.rank
        if e.kind == "store":
            region = self.axes(sink.array, sink.index)
            extents = [self.extent(pre, cache, sink.array, ax) for ax in region]
        elif e.kind == "dot":
            na, nb = (self.broadcast(pre, cache, self.side(stmts, e, leaves, a), R)[0]
                      for a in sink.args)
            n = na
            if na != nb:
                n = Var(self.new("n", I64))
                pre.append(Assign(n.name, "same_len", (na, nb), self.loc))
                equal[n] = (na, nb)
            extents = [n]
        elif e.kind == "matvec":
            # out[i] = sum_p M[i, p] v[p]: the nest runs over (i, p); the 1-D side's leaves
            # align with p as NumPy's broadcasting aligns them with the last axis
            ni, npm = self.broadcast(pre, cache, self.side(stmts, e, leaves, sink.args[0]), 2)
            (npv,) = self.broadcast(pre, cache, self.side(stmts, e, leaves, sink.args[1]), 1)
            n = npm
            if npm != npv:
                n = Var(self.new("n", I64))
                pre.append(Assign(n.name, "same_len", (npm, npv), self.loc))
                equal[n] = (npm, npv)
            extents = [ni, n]
            # a matrix read transposed runs p outer, i inner (``out[i] += ...``: each element
            # still sums in the order of p), so that the matrix is read along its rows
            mats = [leaf for leaf in self.side(stmts, e, leaves, sink.args[0])
                    if len(self.leaf_axes(leaf)) == 2]
            swap = bool(mats) and all(leaf.transposed for leaf in mats)
        else:
            extents = self.broadcast(pre, cache, leaves, R)
        return extents, equal, swap

    def leaf_plans(self, pre, cache, leaves, extents, equal, R):
        """Per leaf: ``(leaf, [(axis, nest axis, first index, broadcast stride)])`` for each
        axis it reads."""
        plans = []
        for leaf in leaves:
            axs = self.leaf_axes(leaf)
            off = R - len(axs)
            per = []
            for p, ax in enumerate(axs):
                if ax.axis is None:
                    continue
                x = self.extent(pre, cache, leaf.array, ax)
                n = extents[off + p]
                if x == n or x in equal.get(n, ()) or self.same_length(x, n):
                    stride = Const(1)
                else:
                    b = self.new("b", I64)
                    pre.append(Assign(b, "bcast_stride", (x, n), self.loc))
                    stride = Var(b)
                per.append((ax, off + p, self.start(pre, cache, leaf.array, ax), stride))
            plans.append((leaf, per))
        return plans

    def absorb(self, stmts, e, body, factor):
        """The scalar statements of the tree's statements other than the sink, in order, into
        ``body``; their targets leave the function's tables (they are scalars of the nest)."""
        for k in e.absorbed:
            s = stmts[k]
            if s is e.sink:
                continue
            if factor is not None and s is factor[0]:
                # the matrix side's scalar factor is applied once per element of the product
                body.scalar[s.target] = body.value(factor[2], s.loc).name
                self.types.pop(s.target, None)
                self.views.pop(s.target, None)
                self.temps.discard(s.target)
                continue
            if id(s) in self.composed_inner:
                # read through the read composed with it: no scalar of its own
                self.types.pop(s.target, None)
                self.views.pop(s.target, None)
                self.temps.discard(s.target)
                continue
            v = self.new("v", self.types[s.target].dtype)
            if s.op in ("getitem", "transpose"):
                leaf, per = body.by_stmt[id(s)]
                index = body.index_of(leaf.array, leaf.items, per, s.loc)
                body.inner.append(Assign(v, "getitem", (Var(leaf.array),), s.loc,
                                         index=index[::-1] if leaf.transposed else index))
            else:
                body.inner.append(Assign(v, s.op, tuple(body.value(a, s.loc) for a in s.args),
                                         s.loc, attrs=s.attrs))
            body.scalar[s.target] = v
            self.types.pop(s.target, None)
            self.views.pop(s.target, None)
            self.temps.discard(s.target)

    def sink_statements(self, e, body, acc, factor, swap, region_plan):
        """The sink's statements in ``body``: the store, the sum's or the product's
        accumulation, or the new array's element."""
        sink, inner, ivars, value = e.sink, body.inner, body.ivars, body.value
        if e.kind == "store":
            idx = body.index_of(sink.array, sink.index, region_plan, sink.loc)
            inner.append(Store(sink.array, idx, value(e.root, sink.loc), sink.aug, sink.loc))
        elif e.kind == "sum":
            inner.append(Assign(acc, "add", (Var(acc), value(e.root, sink.loc)), sink.loc))
        elif e.kind == "axsum":
            # out[j] += v[i, j] with the loops in index order: each element of the result sums
            # its terms in the order of the summed axis, from 0.0 (as Numba's np.sum(axis=))
            kept = [i for d, i in enumerate(ivars) if d != e.axis]
            for d, i in enumerate(kept):
                self.in_range.add((e.out, d, i))
            inner.append(Store(e.out, tuple(Var(i) for i in kept), value(e.root, sink.loc), "add",
                               sink.loc))
        elif e.kind in ("dot", "matvec"):
            t = self.types[sink.target]
            v = self.new("v", t.kind if e.kind == "dot" else t.dtype)
            sides = [value(a, sink.loc) for a in sink.args]
            if factor is not None and swap:
                # p outer: the factor scales the vector's element, once per p
                f = self.new("v", t.dtype)
                inner.append(Assign(f, "mul", (factor[1], sides[1]), sink.loc))
                sides[1] = Var(f)
            inner.append(Assign(v, "mul", tuple(sides), sink.loc))
            if e.kind == "matvec" and swap:
                self.in_range.add((sink.target, 0, ivars[0]))
                inner.append(Store(sink.target, (Var(ivars[0]),), Var(v), "add", sink.loc))
            else:
                inner.append(Assign(acc, "add", (Var(acc), Var(v)), sink.loc))
        else:
            v = self.new("v", self.types[sink.target].dtype)
            inner.append(Assign(v, sink.op, tuple(value(a, sink.loc) for a in sink.args),
                                sink.loc, attrs=sink.attrs))
            idx = tuple(Var(i) for i in ivars)
            for d, i in enumerate(ivars):
                self.in_range.add((e.out, d, i))
            inner.append(Store(e.out, idx, Var(v), None, sink.loc))

    def loop_nest(self, e, body, acc, zero, factor, swap, extents):
        """The loops around ``body``'s statements, each statement in the loop whose index it
        depends on (``levels``); a matrix-vector product's accumulator is reset and stored
        around its inner loop."""
        sink, R, ivars = e.sink, e.rank, body.ivars
        order = [1, 0] if swap else list(range(R))     # the loops, outermost first
        nested = levels(body.inner, [ivars[d] for d in order], acc)
        if e.kind == "matvec" and not swap:
            self.in_range.add((sink.target, 0, ivars[0]))
            total = Var(acc)
            after = []
            if factor is not None:
                total = Var(self.new("v", self.types[sink.target].dtype))
                after.append(Assign(total.name, "mul", (factor[1], Var(acc)), sink.loc))
            nested[0] = [zero] + nested[0]
            after.append(Store(sink.target, (Var(ivars[0]),), total, None, sink.loc))
        nest = nested[R - 1] if R else body.inner
        for d in reversed(range(R)):
            nest = [For(ivars[order[d]], Const(0), extents[order[d]], Const(1), nest, sink.loc)]
            if d > 0:
                nest = nested[d - 1] + nest
            if d == 1 and e.kind == "matvec" and not swap:
                nest = nest + after
        return nest

    def matvec_factor(self, stmts, e):
        """``(statement, scalar, matrix operand)`` when the matrix side of a matrix-vector
        product is a scalar times a tree (``(beta * A.T) @ y``), else None.  The product then
        sums the tree's products and scales each sum once (``beta * sum_p A[p, i] y[p]``), so
        that the reverse sweep accumulates the scalar's adjoint once per element of the result
        rather than once per element of the matrix; only the rounding of the product changes."""
        by_target = {stmts[k].target: stmts[k] for k in e.absorbed}
        st = by_target.get(e.sink.args[0].name)
        if st is None or st.op != "mul" or len(st.args) != 2:
            return None
        for q in (0, 1):
            a, other = st.args[q], st.args[1 - q]
            scalar = isinstance(a, Const) or (isinstance(a, Var)
                                              and isinstance(self.types.get(a.name), Scalar))
            if scalar and self.is_arr(other) and self.types[other.name].ndim == 2:
                return st, a, other
        return None

    def broadcast(self, pre, cache, leaves, R):
        """The operands holding the broadcast extents of ``leaves`` along the nest's axes."""
        extents = []
        for d in range(R):
            cands = []
            for leaf in leaves:
                axs = self.leaf_axes(leaf)
                p = d - (R - len(axs))
                if p >= 0:
                    x = self.extent(pre, cache, leaf.array, axs[p])
                    if x not in cands:
                        cands.append(x)
            cands = [c for c in cands if c != Const(1)] or [Const(1)]
            n = cands[0]
            for c in cands[1:]:
                if self.same_length(c, n):
                    continue
                b = self.new("b", I64)
                pre.append(Assign(b, "bcast_len", (n, c), self.loc))
                n = Var(b)
            extents.append(n)
        return extents

    def position(self, inner, array, plan, ivars, loc):
        """The index along ``plan``'s axis at the loop indices: ``start + step*(stride*i)``."""
        ax, d, start, stride = plan
        step = ax.slice.step.value if ax.slice.step is not None else 1
        i = Var(ivars[d])
        if stride != Const(1):
            t = self.new("j", I64)
            inner.append(Assign(t, "mul", (stride, i), loc))
            i = Var(t)
        if step != 1:
            t = self.new("j", I64)
            inner.append(Assign(t, "mul", (Const(step), i), loc))
            i = Var(t)
        if start != Const(0):
            t = self.new("j", I64)
            inner.append(Assign(t, "add", (start, i), loc))
            i = Var(t)
        self.in_range.add((array, ax.axis, i.name))
        return i

