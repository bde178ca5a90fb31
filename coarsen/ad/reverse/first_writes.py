"""First writes of array adjoints: ``X_bar = np.zeros(Y.shape)`` whose first use is a loop nest
that adds into each element exactly once becomes ``np.empty`` and ``X_bar[i, j] = ...``.

The reverse of a scalarized matrix-vector product (gemver's ``A @ x``) is the first code to
touch the matrix's adjoint; zeroing the matrix, then reading each element back to add to it, is
two passes over memory that one assignment replaces.

Requires: the generated function's top-level statements (gast) and the names the compiler made.
Guarantees: ``first_writes(body, made)`` returns the statements with the rewrite applied where
it computes the same values, the input unchanged (changed statements are rebuilt).  For a
compiler-made ``X`` initialized at the top level by ``X = np.zeros(Y.shape)``, with ``Y`` a
name assigned only by top-level statements (none after the ones below read its shape), the first later
top-level statement that mentions ``X`` must be a nest of ``for`` loops over ``range(E)`` or
``range(E - 1, -1, -1)``, without ``break``, ``continue`` or ``return``, in which ``X``
appears once: ``X[v0, ..., vk] += e`` directly in the innermost loop's body, indexed by the
loop variables of the nest, outermost first (none assigned in the nest), ``e`` not reading
``X``; and each ``E`` must hold ``Y.shape[d]`` for its depth ``d``: a name assigned once in
the function, to ``Y.shape[d]`` or to ``_same_len(a, b)`` with ``a`` or ``b`` such a name (the
helper returns its first operand or raises), and the nest's depth must be ``Y``'s rank (the
number of loops equals the length of the index).  Each element is then written exactly once,
from zero: the assignment gives the same value (but the sign of a zero: ``0.0 + -0.0`` is
``0.0``, which the assignment keeps negative).

``guarded_first_writes(body, made)`` returns ``(statements, new names)`` and takes the nests
this rule cannot prove, where the proof is a runtime test: the reverse of a broadcast operand,
``X[s0 * i, s1 * j] += e`` (``s0``, ``s1`` the operand's broadcast strides, 1 where its extent
is the result's, 0 where it is broadcast; gemver's ``A + np.outer(u1, v1)``), and extents that
hold ``Y.shape[d]`` at runtime only.  Each element of the index may be the loop variable
``v`` of its depth, ``s * v`` or ``v * s``, or a name assigned once in the nest, to ``s * v``,
directly in the body of the loop of that depth or a deeper one, before the statement's path;
the strides ``s`` and the extents ``E`` that are not ``Y.shape[d]`` by the rule above must
be names assigned once in the function, by a top-level statement before ``X``'s
initialization.  The test, ``_fw = s0 == 1 and ... and E == Y.shape[d] and ...``, is made
before the initialization, which becomes ``np.empty`` where it holds (``np.zeros``
otherwise), and the nest runs as ``if _fw: <nest with X[i, j] = e> else: <the nest>``: where
it holds, every index is its loop variable and each element is written once, as above; where
it does not, the code is what it was.  Only nests of two or more loops are versioned: a
vector's zeroing costs less than a second copy of its nest.
"""
from __future__ import annotations

import copy

import gast

from ...codegen import build as B
from .cleanup import np_allocation

__all__ = ["first_writes", "guarded_first_writes"]


def _assignments(body):
    out = {}
    for st in body:
        for n in gast.walk(st):
            if isinstance(n, gast.Name) and isinstance(n.ctx, (gast.Store, gast.Del)):
                out[n.id] = out.get(n.id, 0) + 1
    return out


def _single_defs(body):
    """{name: value} of names assigned exactly once, by a plain ``name = value``."""
    counts = _assignments(body)
    defs = {}
    for st in body:
        for n in gast.walk(st):
            if isinstance(n, gast.Assign) and len(n.targets) == 1 and \
                    isinstance(n.targets[0], gast.Name) and counts.get(n.targets[0].id) == 1:
                defs[n.targets[0].id] = n.value
    return defs, counts


def _zeros_of(st, made):
    """``(X, Y)`` of ``X = np.zeros(Y.shape)`` with ``X`` compiler-made, else None."""
    alloc = np_allocation(st, made, ("zeros",))
    if alloc is None:
        return None
    a = alloc[2]
    if isinstance(a, gast.Attribute) and a.attr == "shape" and isinstance(a.value, gast.Name):
        return alloc[0], a.value.id
    return None


def _is_dim(node, array, d, defs, after, top_of, depth=0):
    """Whether ``node`` holds ``array.shape[d]`` (module docstring), read in a top-level
    statement after ``after`` (the last one that assigns ``array``)."""
    if depth > 8:
        return False
    if isinstance(node, gast.Subscript) and isinstance(node.value, gast.Attribute) and \
            node.value.attr == "shape" and isinstance(node.value.value, gast.Name) and \
            node.value.value.id == array and isinstance(node.slice, gast.Constant) and \
            node.slice.value == d:
        return top_of.get(id(node), -1) > after
    if isinstance(node, gast.Name) and node.id in defs:
        v = defs[node.id]
        if isinstance(v, gast.Call) and isinstance(v.func, gast.Name) and \
                v.func.id == "_same_len" and len(v.args) == 2:
            return any(_is_dim(a, array, d, defs, after, top_of, depth + 1) for a in v.args)
        return _is_dim(v, array, d, defs, after, top_of, depth + 1)
    return False


def _top_assignments(body):
    """{name: (index of its last top-level ``name = ...``, how many there are)}."""
    out = {}
    for j, st in enumerate(body):
        if isinstance(st, gast.Assign) and len(st.targets) == 1 and \
                isinstance(st.targets[0], gast.Name):
            _, k = out.get(st.targets[0].id, (-1, 0))
            out[st.targets[0].id] = (j, k + 1)
    return out


def _extent(loop):
    """``E`` of ``for v in range(E)`` / ``range(E - 1, -1, -1)``, else None."""
    it = loop.iter
    if not (isinstance(loop.target, gast.Name) and isinstance(it, gast.Call)
            and isinstance(it.func, gast.Name) and it.func.id == "range" and not it.keywords):
        return None
    a = it.args
    if len(a) == 1:
        return a[0]
    if len(a) == 3 and isinstance(a[1], gast.Constant) and a[1].value == -1 and \
            isinstance(a[2], gast.Constant) and a[2].value == -1 and \
            isinstance(a[0], gast.BinOp) and isinstance(a[0].op, gast.Sub) and \
            isinstance(a[0].right, gast.Constant) and a[0].right.value == 1:
        return a[0].left
    if len(a) == 3 and isinstance(a[1], gast.UnaryOp) and isinstance(a[1].op, gast.USub) and \
            isinstance(a[1].operand, gast.Constant) and a[1].operand.value == 1 and \
            isinstance(a[2], gast.UnaryOp) and isinstance(a[2].op, gast.USub) and \
            isinstance(a[2].operand, gast.Constant) and a[2].operand.value == 1 and \
            isinstance(a[0], gast.BinOp) and isinstance(a[0].op, gast.Sub) and \
            isinstance(a[0].right, gast.Constant) and a[0].right.value == 1:
        return a[0].left
    return None


def _mentions(node, name):
    return sum(1 for n in gast.walk(node) if isinstance(n, gast.Name) and n.id == name)


def _find(top, name):
    """``(loops, statement)``: the nest of loops down to the one statement mentioning ``name``
    (directly in the innermost loop's body), else None."""
    loops, node = [], top
    while True:
        if not isinstance(node, gast.For) or node.orelse:
            return None
        loops.append(node)
        hits = [s for s in node.body if _mentions(s, name)]
        if len(hits) != 1:
            return None
        if isinstance(hits[0], gast.For):
            node = hits[0]
            continue
        return loops, hits[0]


def _rewrite(top, loops, st, value):
    """``top`` with ``st`` replaced by ``value`` along the path of ``loops`` (copies)."""
    def rebuild(k):
        lp = copy.copy(loops[k])
        inner = st if k + 1 == len(loops) else loops[k + 1]
        lp.body = [(value if s is st else rebuild(k + 1)) if s is inner else s for s in loops[k].body]
        return lp
    return rebuild(0)


def first_writes(body, made):
    out = list(body)
    inits = [(k, got) for k, got in ((k, _zeros_of(st, made)) for k, st in enumerate(body))
             if got is not None]
    if not inits:
        return out
    defs, counts = _single_defs(body)
    tops = _top_assignments(body)
    top_of = {id(n): j for j, st in enumerate(body) for n in gast.walk(st)}
    names_in = [{n.id for n in gast.walk(st) if isinstance(n, gast.Name)} for st in body]
    for k, (x, y) in inits:
        init = body[k]
        # y assigned by top-level statements only, the last of them before the initialization
        after, n_top = tops.get(y, (-1, 0))
        if counts.get(y, 0) != n_top or after > k or counts.get(x, 0) != 1:
            continue
        later = [j for j in range(k + 1, len(body)) if x in names_in[j]]
        if not later:
            continue
        top = out[later[0]]
        found = _find(top, x)
        if found is None:
            continue
        loops, st = found
        if any(isinstance(n, (gast.Break, gast.Continue, gast.Return)) for n in gast.walk(top)):
            continue
        if not (isinstance(st, gast.AugAssign) and isinstance(st.op, gast.Add)
                and isinstance(st.target, gast.Subscript)
                and isinstance(st.target.value, gast.Name) and st.target.value.id == x
                and _mentions(st, x) == 1):
            continue
        idx = st.target.slice
        elts = idx.elts if isinstance(idx, gast.Tuple) else [idx]
        if len(elts) != len(loops) or not all(
                isinstance(e, gast.Name) and e.id == lp.target.id for e, lp in zip(elts, loops)):
            continue
        # the loop variables are assigned by their loops only (distinct trips, distinct elements)
        if any(sum(1 for n in gast.walk(top) if isinstance(n, gast.Name) and n.id == lp.target.id
                   and isinstance(n.ctx, gast.Store)) != 1 for lp in loops):
            continue
        if len({lp.target.id for lp in loops}) != len(loops):
            continue
        if not all(_extent(lp) is not None and _is_dim(_extent(lp), y, d, defs, after, top_of)
                   for d, lp in enumerate(loops)):
            continue
        assign = gast.Assign(targets=[copy.deepcopy(st.target)], value=st.value, type_comment=None)
        for attr in ("coarsen_comment", "_coarsen_loc"):
            if hasattr(st, attr):
                setattr(assign, attr, getattr(st, attr))
        assign.targets[0].ctx = gast.Store()
        out[later[0]] = _rewrite(top, loops, st, assign)
        empty = copy.copy(init)
        empty.value = copy.deepcopy(init.value)
        empty.value.func.attr = "empty"
        out[k] = empty
    return out


def _stride_of(e, var, local):
    """``(ok, stride name or None)``: ``e`` is ``var`` (no stride), ``s * var``, ``var * s``,
    or a name in ``local`` (assigned once in the nest) whose value is one of those."""
    if isinstance(e, gast.Name) and e.id == var:
        return True, None
    if isinstance(e, gast.Name) and e.id in local:
        e = local[e.id]
    if isinstance(e, gast.BinOp) and isinstance(e.op, gast.Mult):
        for a, b in ((e.left, e.right), (e.right, e.left)):
            if isinstance(a, gast.Name) and isinstance(b, gast.Name) and b.id == var and a.id != var:
                return True, a.id
    return False, None


def _nest_locals(loops, st):
    """{name: (depth, value)} of the names assigned by ``name = value`` directly in the body
    of the nest's loop of that depth, before the statement's path."""
    out = {}
    for j, lp in enumerate(loops):
        child = st if j + 1 == len(loops) else loops[j + 1]
        for s in lp.body:
            if s is child:
                break
            if isinstance(s, gast.Assign) and len(s.targets) == 1 and \
                    isinstance(s.targets[0], gast.Name):
                out[s.targets[0].id] = (j, s.value)
    return out


def guarded_first_writes(body, made):
    """See the module docstring."""
    out = list(body)
    used = {n.id for st in body for n in gast.walk(st) if isinstance(n, gast.Name)}
    new = set()
    defs, counts = _single_defs(body)
    tops = _top_assignments(body)
    top_of = {id(n): j for j, st in enumerate(body) for n in gast.walk(st)}
    for k, st0 in enumerate(body):
        got = _zeros_of(st0, made)
        if got is None:
            continue
        x, y = got
        after, n_top = tops.get(y, (-1, 0))
        if counts.get(y, 0) != n_top or after > k or counts.get(x, 0) != 1:
            continue

        def stable(name, k=k):
            # assigned once in the function, by a top-level statement before the initialization
            return counts.get(name, 0) == 1 and tops.get(name, (k, 0))[0] < k
        later = [j for j in range(k + 1, len(out))
                 if any(isinstance(n, gast.Name) and n.id == x for n in gast.walk(out[j]))]
        if not later:
            continue
        top = out[later[0]]
        found = _find(top, x)
        if found is None or any(isinstance(n, (gast.Break, gast.Continue, gast.Return))
                                for n in gast.walk(top)):
            continue
        loops, st = found
        if not (isinstance(st, gast.AugAssign) and isinstance(st.op, gast.Add)
                and isinstance(st.target, gast.Subscript)
                and isinstance(st.target.value, gast.Name) and st.target.value.id == x
                and _mentions(st, x) == 1):
            continue
        elts = st.target.slice.elts if isinstance(st.target.slice, gast.Tuple) else [st.target.slice]
        vars_ = [lp.target.id for lp in loops]
        if len(elts) != len(loops) or len(set(vars_)) != len(vars_) or len(vars_) < 2:
            continue        # (one axis: zeroing a vector costs less than a second copy of the nest)
        stores = {}
        for n in gast.walk(top):
            if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store):
                stores[n.id] = stores.get(n.id, 0) + 1
        if any(stores.get(v) != 1 for v in vars_):
            continue
        found_locals = {nm: jv for nm, jv in _nest_locals(loops, st).items() if stores.get(nm) == 1}
        local = {nm: v for nm, (_, v) in found_locals.items()}
        depth = {nm: j for nm, (j, _) in found_locals.items()}
        tests, ok = [], True
        for d, (e, v) in enumerate(zip(elts, vars_)):
            good, stride = _stride_of(e, v, local)
            if good and isinstance(e, gast.Name) and e.id in local and depth[e.id] < d:
                good = False        # assigned in an outer trip, before the loop of v runs
            if not good or (stride is not None and not stable(stride)):
                ok = False
                break
            if stride is not None:
                tests.append(B.compare(B.name(stride), "==", 1))
        if not ok or not tests and all(
                _extent(lp) is not None and _is_dim(_extent(lp), y, d, defs, after, top_of)
                for d, lp in enumerate(loops)):
            continue        # nothing to test (the rule above), or not this shape
        for d, lp in enumerate(loops):
            ext = _extent(lp)
            if ext is None:
                ok = False
                break
            if _is_dim(ext, y, d, defs, after, top_of):
                continue
            if not (isinstance(ext, gast.Name) and stable(ext.id)):
                ok = False
                break
            tests.append(B.compare(copy.deepcopy(ext), "==", B.subscript(B.attr(f"{y}.shape"), d)))
        if not ok:
            continue
        j = 0
        while f"_fw{j}" in used:
            j += 1
        flag = f"_fw{j}"
        used.add(flag)
        new.add(flag)
        test = tests[0] if len(tests) == 1 else gast.BoolOp(op=gast.And(), values=tests)
        guard = B.assign(flag, test)
        index = B.tuple_(*vars_) if len(vars_) > 1 else B.name(vars_[0])
        assign = B.assign(B.subscript(B.name(x), index), copy.deepcopy(st.value))
        for attr in ("coarsen_comment", "_coarsen_loc"):
            if hasattr(st, attr):
                setattr(assign, attr, getattr(st, attr))
        fast = _rewrite(top, loops, st, assign)
        branch = B.if_(B.name(flag), [fast], [top])
        init = copy.copy(st0)
        empty = copy.deepcopy(st0.value)
        empty.func.attr = "empty"
        init.value = B.ifexp(B.name(flag), empty, copy.deepcopy(st0.value))
        out[later[0]] = branch
        out[k] = init
        out.insert(k, guard)
        # positions after k moved by one: the remaining initializations are found again
        return guarded_first_writes_more(out, made, new)
    return out, new


def guarded_first_writes_more(body, made, new):
    """The rewrite again, until nothing changes (each rewrite shifts the statements)."""
    out, more = guarded_first_writes(body, made)
    return out, new | more
