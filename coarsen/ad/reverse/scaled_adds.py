"""Scaled adds: the reverse sweep's ``X_bar += s_bar * _acc`` and ``X_bar += _outer(a, b)`` as
loop helper calls, rank-one passes into one matrix fused.

A reduction loop reversed in place (``coarsen.ad.reverse.fused``) leaves, per input array,
one whole-array update ``X_bar += s_bar * _acc<k>`` for the reverse sweep.  Numba compiles
each such array expression into a kernel of its own: about 0.45 s apiece on our machines,
which is most of the compile time of small array functions (six of them took 2.8 s of
``arrays.reductions_3d``'s 12 s).  ``_add_scaled<N>(X_bar, s_bar, _acc<k>)`` is one loop
nest, compiled once per module and rank, and allocates no temporary for ``s_bar * _acc``.

Requires: the generated function's statements (gast), in which ``fused`` marked each such
update with ``SCALED_MARK`` (the rank of the arrays; both have the input's shape).
Guarantees: ``scaled_add_calls(body)`` returns ``(statements, helpers)``: the statements (a
new list, the input not modified; a statement that changes is a new node) in which every
marked ``X += s * A`` (``X``, ``s``, ``A`` names) is the statement
``_add_scaled<N>(X, s, A)``, and the runtime helper names it used.  The helper
(``coarsen.codegen.runtime.add_scaled``) checks that the shapes agree and computes ``X[i...] += s * A[i...]`` per element: the operations of the array expression, so
the same bits.  Every ``X += _outer(a, b)`` (names; an adjoint of a matrix-vector product,
``coarsen.ir.primitives.linalg``) is ``_outer_add(X, a, b)``: ``X[i, j] += a[i] * b[j]`` in
place, the same operations without the temporary matrix (``X``, 2-D, is an adjoint; ``a`` and
``b``, 1-D, are an adjoint and a primal value, neither of which views it).  Then, per block,
two such passes into one ``X`` become one (``_outer_add2``, ``_fused_outer_adds``) and an
``X = np.zeros(S)`` whose next mention is such a pass becomes that pass's write
(``_outer_first``/``_outer_first2``, ``_outer_first_writes``): the same operations in the
same order, one pass over the matrix where there were two or three.  Likewise an
``X = np.zeros(S)`` (or a scratch ``_scratch_zeros``) whose next mention is
``_add_scaled<N>(X, s, A)`` becomes ``np.empty`` (``_scratch_empty``) and
``_set_scaled<N>(X, s, A)``, ``X[i...] = 0.0 + s * A[i...]`` (``_scaled_first_writes``).  Other statements are
unchanged.  Meant for the cpu target (on the python
target a loop of Python statements would be slower than NumPy's expression).
"""
from __future__ import annotations

import copy

import gast

from ...codegen import build as B
from ...codegen.runtime import add_scaled, set_scaled

__all__ = ["SCALED_MARK", "scaled_add_calls"]

#: the attribute ``fused`` sets on a reduction loop's scaled update (the arrays' rank)
SCALED_MARK = "_coarsen_scaled_rank"


def _operands(st):
    """``(X, s, A)`` of a marked ``X += s * A`` with names only, else None."""
    v = st.value
    if isinstance(st, gast.AugAssign) and isinstance(st.op, gast.Add) and \
            isinstance(st.target, gast.Name) and isinstance(v, gast.BinOp) and \
            isinstance(v.op, gast.Mult) and isinstance(v.left, gast.Name) and \
            isinstance(v.right, gast.Name):
        return st.target.id, v.left.id, v.right.id
    return None


def _outer_operands(st):
    """``(X, a, b)`` of ``X += _outer(a, b)`` with names only, else None."""
    v = st.value if isinstance(st, gast.AugAssign) else None
    if isinstance(v, gast.Call) and isinstance(st.op, gast.Add) and \
            isinstance(st.target, gast.Name) and isinstance(v.func, gast.Name) and \
            v.func.id == "_outer" and len(v.args) == 2 and not v.keywords and \
            all(isinstance(a, gast.Name) for a in v.args):
        return st.target.id, v.args[0].id, v.args[1].id
    return None


def scaled_add_calls(body):
    helpers = set()

    scaled = {}     # id of an _add_scaledN call made here -> (N, its operand names)

    def block(stmts):
        out = []
        for st in stmts:
            ops = _outer_operands(st)
            if ops is not None:
                helpers.add("_outer_add")
                out.append(_with_comment(gast.Expr(value=B.call(
                    B.name("_outer_add"), *[B.name(n) for n in ops])), st))
                continue
            rank = getattr(st, SCALED_MARK, None)
            ops = _operands(st) if rank else None
            if ops is not None:
                name = add_scaled(rank)
                helpers.add(name)
                call = _with_comment(gast.Expr(value=B.call(
                    B.name(name), *[B.name(n) for n in ops])), st)
                scaled[id(call)] = (rank, ops)
                out.append(call)
                continue
            if isinstance(st, (gast.For, gast.While, gast.If)):
                body, orelse = block(st.body), block(st.orelse)
                if any(a is not b for a, b in zip(body + orelse, st.body + st.orelse)):
                    st = copy.copy(st)      # copy on write: the input is not modified
                    st.body, st.orelse = body, orelse
            out.append(st)
        out = _outer_first_writes(_fused_outer_adds(out, helpers), helpers)
        return _scaled_first_writes(out, scaled, helpers)

    return block(list(body)), helpers


def _outer_add_args(st):
    """The argument names of a statement ``_outer_add(X, a, b)`` or ``_outer_add2(X, a, b,
    c, d)`` (names only), else None."""
    v = st.value if isinstance(st, gast.Expr) else None
    if isinstance(v, gast.Call) and isinstance(v.func, gast.Name) and not v.keywords and \
            (v.func.id, len(v.args)) in (("_outer_add", 3), ("_outer_add2", 5)) and \
            all(isinstance(a, gast.Name) for a in v.args):
        return [a.id for a in v.args]
    return None


def _with_comment(new, *olds):
    """``new`` with the source-line comment of the first of ``olds`` that has one."""
    comments = [c for o in olds for c in [getattr(o, "coarsen_comment", None)] if c]
    if comments:
        new.coarsen_comment = comments[0]
    return new


#: calls that only read their array arguments (the products' helpers)
_READING_CALLS = ("_bmm", "_mm")


def _only_read(stmt, names):
    """Does ``stmt`` at most read the arrays ``names``: each mention loaded, and an operand of
    arithmetic, an element read, a ``.shape``/``.size``/``.ndim``, or an argument of a
    product helper (``_READING_CALLS``)?  (A call of another helper, such as
    ``_add_scaled1(q_bar, ...)``, may write into its arguments.)"""
    parents = {}
    for node in gast.walk(stmt):
        for child in gast.iter_child_nodes(node):
            parents[id(child)] = node
    for node in gast.walk(stmt):
        if not (isinstance(node, gast.Name) and node.id in names):
            continue
        if not isinstance(node.ctx, gast.Load):
            return False
        up = parents.get(id(node))
        if isinstance(up, (gast.BinOp, gast.UnaryOp, gast.Compare)):
            continue
        if isinstance(up, gast.Subscript) and up.value is node and isinstance(up.ctx, gast.Load):
            continue
        if isinstance(up, gast.Attribute) and up.attr in ("shape", "size", "ndim"):
            continue
        if isinstance(up, gast.Call) and node is not up.func and isinstance(up.func, gast.Name) \
                and up.func.id.startswith(_READING_CALLS):
            continue
        return False
    return True


def _fused_outer_adds(stmts, helpers):
    """``_outer_add(X, a, b)`` and the next statement of the block that mentions ``X``,
    ``_outer_add(X, c, d)``, as one pass ``_outer_add2(X, a, b, c, d)`` where the first was:
    ``X[i, j] = (X[i, j] + a[i] * b[j]) + c[i] * d[j]``, the operations of the two passes in
    their order.  Only where the statements between them at most read ``c`` and ``d``
    (``_only_read``: the fused pass goes where the first was, and the second would have read
    the same values), or else at most read ``a`` and ``b`` (it goes where the second was);
    nothing between mentions ``X``, and ``a``, ``b``, ``c``, ``d`` do not view ``X``, as for
    ``_outer_add``, so the fused pass reads what the two would have read."""
    out = list(stmts)
    for i, st in enumerate(stmts):
        ops = _outer_add_args(out[i]) if out[i] is st else None
        if ops is None or len(ops) != 3:
            continue
        name = ops[0]
        for j in range(i + 1, len(stmts)):
            if name in _names(stmts[j]):
                break
        else:
            continue
        later = _outer_add_args(stmts[j]) if out[j] is stmts[j] else None
        if later is None or len(later) != 3 or later[0] != name or name in ops[1:] + later[1:]:
            continue
        between = stmts[i + 1:j]
        if all(_only_read(s, set(later[1:])) for s in between):
            at, gone = i, j          # the second pass's operands hold still: it moves up
        elif all(_only_read(s, set(ops[1:])) for s in between):
            at, gone = j, i          # the first pass's operands hold still: it moves down
        else:
            continue
        helpers.add("_outer_add2")
        out[at] = _with_comment(gast.Expr(value=B.call(
            B.name("_outer_add2"), *[B.name(n) for n in ops + later[1:]])), st, stmts[j])
        out[gone] = None
    return [s for s in out if s is not None]


def _names(node, ctx=None):
    return {n.id for n in gast.walk(node) if isinstance(n, gast.Name)
            and (ctx is None or isinstance(n.ctx, ctx))}


def _zeros_shape(st):
    """``(X, shape)`` of ``X = np.zeros(shape)`` (float64; ``shape`` names, attributes,
    subscripts, tuples and constants: no call), else None."""
    if not (isinstance(st, gast.Assign) and len(st.targets) == 1
            and isinstance(st.targets[0], gast.Name)):
        return None
    v = st.value
    if not (isinstance(v, gast.Call) and isinstance(v.func, gast.Attribute) and v.func.attr == "zeros"
            and isinstance(v.func.value, gast.Name) and v.func.value.id == "np"
            and len(v.args) == 1 and not v.keywords):
        return None
    allowed = (gast.Name, gast.Attribute, gast.Subscript, gast.Tuple, gast.Constant, gast.Load)
    if not all(isinstance(n, allowed) for n in gast.walk(v.args[0])):
        return None
    return st.targets[0].id, v.args[0]


def _outer_first_writes(stmts, helpers):
    """``X = np.zeros(S)`` whose next mention (in the same block) is ``_outer_add(X, a, b)``
    (or ``_outer_add2``): the allocation goes and that call is ``X = _outer_first(S, a, b)``
    (``_outer_first2``), which checks ``S`` and writes ``0.0 + a[i] * b[j]`` per element: the
    value the zeros and the pass gave, bit for bit, in one pass instead of two.  Only where
    no statement between them assigns a name that ``S`` reads (``S`` means the same shape
    at the call) and ``X`` is not among the products' operands."""
    out = list(stmts)
    for i, st in enumerate(stmts):
        found = _zeros_shape(st)
        if found is None:
            continue
        name, shape = found
        for j in range(i + 1, len(stmts)):
            if name in _names(stmts[j]):
                break
        else:
            continue
        ops = _outer_add_args(stmts[j])
        if ops is None or ops[0] != name or name in ops[1:] or out[j] is not stmts[j]:
            continue
        if any(_names(shape) & _names(s, gast.Store) for s in stmts[i + 1:j]):
            continue
        helper = "_outer_first" if len(ops) == 3 else "_outer_first2"
        helpers.add(helper)
        call = B.call(B.name(helper), copy.deepcopy(shape), *[B.name(n) for n in ops[1:]])
        out[j] = _with_comment(B.assign(name, call), stmts[j])
        out[i] = None
    return [s for s in out if s is not None]


def _scratch_zeros_of(st):
    """The name ``X`` of ``_ftape, X, _wtop = _scratch_zeros(_ftape, _wtop, S, size)`` (the plain
    call, not under a condition), else None."""
    v = st.value if isinstance(st, gast.Assign) and len(st.targets) == 1 else None
    t = st.targets[0] if v is not None else None
    if isinstance(t, gast.Tuple) and len(t.elts) == 3 and isinstance(t.elts[1], gast.Name) and \
            isinstance(v, gast.Call) and isinstance(v.func, gast.Name) and \
            v.func.id == "_scratch_zeros" and not v.keywords:
        return t.elts[1].id
    return None


def _scaled_first_writes(stmts, scaled, helpers):
    """``X = np.zeros(S)`` or ``_ftape, X, _wtop = _scratch_zeros(...)`` whose next mention
    (in the same block) is ``_add_scaledN(X, s, A)`` (made by this pass: ``scaled``): the
    allocation is ``np.empty(S)`` (``_scratch_empty``) and the call ``_set_scaledN(X, s, A)``,
    which checks the shapes and writes ``0.0 + s * A[i]`` per element: the value the zeros and
    the pass gave, bit for bit, in one pass instead of two (a reduction loop reversed trip by
    trip leaves ``_acc`` and this pair for each array it reads: ``np.sum(C * C)``'s ``C_bar``).
    Only where ``X`` is not ``A`` and not ``s``."""
    out = list(stmts)
    for i, st in enumerate(stmts):
        found = _zeros_shape(st)
        name = found[0] if found is not None else _scratch_zeros_of(st)
        if name is None or out[i] is not st:
            continue
        for j in range(i + 1, len(stmts)):
            if name in _names(stmts[j]):
                break
        else:
            continue
        got = scaled.get(id(stmts[j]))
        if got is None or out[j] is not stmts[j] or got[1][0] != name or name in got[1][1:]:
            continue
        rank, ops = got
        alloc = copy.deepcopy(st)
        if found is not None:
            alloc.value.func.attr = "empty"
        else:
            alloc.value.func.id = "_scratch_empty"
            helpers.add("_scratch_empty")
        out[i] = alloc
        helper = set_scaled(rank)
        helpers.add(helper)
        out[j] = _with_comment(gast.Expr(value=B.call(B.name(helper), *[B.name(n) for n in ops])),
                               stmts[j])
    return out
