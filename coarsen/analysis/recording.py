"""What the reverse sweep needs recorded: the to-be-recorded analysis of the reverse pass.

Requires: a typed (and planned) ``ir.Function``, activity ``Facts``, and the reads of the
reverse code the emitter generated (``reads_at``: variable -> the statements whose reverse
code reads it; a ``("mid"|"end", segment)`` pair for reads after a segment's passengers or at
its end).
Guarantees: ``find_recomputable`` names the scalar temporaries read from an array whose
element holds still while they live (the reverse sweep re-reads the element instead of taping
it), ``rereads_for_steps`` those of them segment steps re-read; ``find_cheap_recomputable``
the float temporaries of one cheap operation on such reads and values that never change (the
reverse sweep evaluates them again); ``find_int_recomputable`` the
integer and boolean scalars (index arithmetic, trip counts, loop conditions) the reverse sweep
evaluates again instead of taping; ``to_be_recorded`` the variables a later assignment may overwrite before the reverse
sweep reads them; ``tape_sites`` the scalar assignments that must save the value they
overwrite.  A read of an array's shape alone is keyed ``shape_key(name)``: it needs the
name's binding, not the elements, so no store saves elements for it.  None of them changes its inputs.
"""
from __future__ import annotations

from ..ir.nodes import Array, Assign, Const, For, If, Scalar, Segment, Store, Var, While, uses, walk
from ..ir.primitives import primitive
from .activity import intact, is_temp, statement_positions
from .history import history_rows


def find_recomputable(fn, facts):
    """Scalar temporaries (``t = a[i]``) the reverse sweep may re-read from their array:
    ``{temporary: its getitem statement}``."""
    out = {}
    _find(fn, facts, fn.body, out)
    return out


def rereads_for_steps(fn, recomputable):
    """The element reads a segment's reverse step re-reads from their array (the others it
    reads from their variables, taped where they are overwritten): those of
    ``find_recomputable`` whose array is not written inside more loops than enclose the read.
    Re-reading an element of a written array in the reverse sweep makes every write to the
    array save and restore the element it overwrites; that pays where the reads run at least
    as often as the writes (an RNN's state read in the inner loop, written in the outer),
    not where a loop after a time-stepping nest reads its last row (the heat equation's loss:
    every step's writes would be saved for one read each at the end)."""
    order, loops_of = statement_positions(fn.body)
    depth = {}
    for st in walk(fn.body):
        if isinstance(st, Store):
            d = len(loops_of.get(id(st), ()))
            depth[st.array] = max(depth.get(st.array, 0), d)
    return {n: st for n, st in recomputable.items()
            if len(loops_of.get(id(st), ())) >= depth.get(st.args[0].name, 0)}


def _written_before_use(block, getitem, base, idx_vars, after=()):
    """Is ``base`` written, or an index variable reassigned, between the element read
    ``getitem`` and a use of its value (then re-reading the element later would not give
    the value that was used)?  ``after``: the rest of each enclosing block, innermost
    first (a read in a segment or a branch may be used after it)."""
    k = next(i for i, st in enumerate(block) if st is getitem)
    changed = False
    def writes(sub):
        return (isinstance(sub, Store) and sub.array == base) or \
            (isinstance(sub, Assign) and (sub.target in idx_vars or sub.target == base)) or \
            (isinstance(sub, For) and sub.var in idx_vars)

    for st in list(block[k + 1:]) + [x for rest in after for x in rest]:
        # a loop after the read that both uses the value and writes: a later trip's use
        # follows an earlier trip's write, whatever their order in the body
        for loop in walk([st]):
            if isinstance(loop, (For, While)) and any(writes(x) for x in walk([loop])) and \
                    any(isinstance(u, Var) and u.name == getitem.target
                        for x in walk([loop]) for u in uses(x)):
                return True
        # one pass in program order: a write and a later use inside one compound statement
        # (the rest of a function after an early return is one ``if``) count as well
        for sub in walk([st]):
            used = any(isinstance(u, Var) and u.name == getitem.target for u in uses(sub))
            if changed and used:
                return True
            if writes(sub):
                changed = True
                if used:
                    return True
    return False


def recorded_rebound(fn, facts, name):
    """Is ``name`` an array the reverse sweep holds at its forward binding at every reverse
    point: differentiated (``facts.active``), assigned more than once or in a loop, not a set-once
    temporary, not a parameter, not a view, and written element by element through no name
    (its views only read)?  The driver records every such array
    (``coarsen.ad.reverse.driver._settle``): each assignment saves the array it rebinds and
    its reverse restores it, so a read of it in the reverse sweep sees the binding and the
    elements that the forward sweep read at that point."""
    return isinstance(fn.types.get(name), Array) and name in facts.active \
        and name not in facts.set_temps and name not in fn.params and name not in fn.views \
        and not any(fn.views.get(a, a) == name for a in facts.stored)


def _block_local(fn, block, k, name):
    """Is the user's variable ``name``, assigned by ``block[k]``, read only after it in the
    same block (``xij = X[i, j]`` then ``z += xij * w[j]``)?  It then lives like a
    temporary: no read before the assignment (a value from an earlier trip) and none after
    the block (a value that outlives its indices)."""
    if name in fn.params:
        return False
    later = {id(x) for x in walk(block[k + 1:])}
    return all(id(x) in later for x in walk(fn.body)
               if any(isinstance(u, Var) and u.name == name for u in uses(x)))


def _unwritten_view(fn, facts, view):
    """Is ``view`` (a view, ``fn.views``) of an array that keeps one value and that nothing
    writes into, through any of its views?  Its elements then hold still for the whole
    reverse sweep (``np.outer``'s ``ravel`` of a parameter, say)."""
    root = fn.views[view]
    return intact(facts, root) and not any(fn.views.get(a, a) == root for a in facts.stored)


def _find(fn, facts, block, out, loop_vars=(), after=()):
    """Scalar temporaries read from an array, at indices that hold still while the
    temporary lives: the reverse sweep re-reads the element instead of saving it on the
    tape.  ``after``: the rest of each enclosing block, innermost first."""
    for i, s in enumerate(block):
        inner = (block[i + 1:],) + after
        if isinstance(s, Assign) and primitive(s.op).indexing \
                and (is_temp(fn, s.target) or _block_local(fn, block, i, s.target)) \
                and facts.defs.get(s.target) == 1 and not isinstance(fn.types.get(s.target), Array):
            base = s.args[0].name
            # a written array qualifies too: re-reading it in the reverse sweep makes it
            # recorded, so every write saves and restores the element it overwrites, and
            # the array holds its forward contents at each reverse point
            # indices: any integer variable works (the reverse sweep restores what it
            # reads), unless it is reassigned between the read and the use
            # an array rebound in a loop qualifies where the driver records it anyway (active,
            # not set once: ``driver._settle`` saves every binding it overwrites and restores it
            # when the rebinding is reversed) and no rebinding comes between the read and a use
            ok = (intact(facts, base) or recorded_rebound(fn, facts, base)) and \
                (base not in fn.views or _unwritten_view(fn, facts, base))
            idx_vars = {it.name for it in s.index if isinstance(it, Var)}
            if ok and _written_before_use(block, s, base, idx_vars, after):
                ok = False
            if ok:
                out[s.target] = s
        elif isinstance(s, If):
            _find(fn, facts, s.body, out, loop_vars, inner)
            _find(fn, facts, s.orelse, out, loop_vars, inner)
        elif isinstance(s, For):
            _find(fn, facts, s.body, out, loop_vars + (s.var,), inner)
        elif isinstance(s, While):
            _find(fn, facts, s.body, out, loop_vars, inner)
        elif isinstance(s, Segment):
            _find(fn, facts, s.stmts, out, loop_vars, inner)


#: cheap float operations the reverse sweep evaluates again rather than taping their result
FLOAT_RECOMPUTE_OPS = frozenset({"add", "sub", "mul", "neg"})
#: the most operations one re-evaluation may take, its operands expanded
MAX_RECOMPUTE_OPS = 8


def find_cheap_recomputable(fn, facts, reads):
    """Float scalar temporaries the reverse sweep evaluates again instead of taping them:
    ``{temporary: its Assign}``, in definition order.  ``reads``: ``find_recomputable``'s
    element reads.

    A temporary qualifies when it is assigned once, by one operation of
    ``FLOAT_RECOMPUTE_OPS`` (``t = beta * A[p, i]``), whose operands are constants, scalars
    that keep one value (``activity.intact``), element reads of ``reads`` or temporaries that
    qualify themselves, at most ``MAX_RECOMPUTE_OPS`` operations once expanded; and when no
    element it reads, through its operands, can change before a use of the temporary: the
    array is not written and no index variable is reassigned between the assignment and any
    use (``_written_before_use``, as for the element reads themselves).  Its value at each
    reverse-sweep use is then the one the forward sweep used, and nothing is taped for it."""
    out = {}
    size = {}

    def leaves(name):
        """The element reads under a qualifying temporary."""
        if name in reads:
            return [reads[name]]
        st = out[name]
        return [g for a in st.args if isinstance(a, Var) and (a.name in reads or a.name in out)
                for g in leaves(a.name)]

    def operand(a):
        if isinstance(a, Const):
            return 0
        if not isinstance(a, Var) or isinstance(fn.types.get(a.name), Array):
            return None
        if a.name in out:
            return size[a.name]
        if a.name in reads:
            return 0
        t = fn.types.get(a.name)
        if isinstance(t, Scalar) and intact(facts, a.name):
            return 0
        return None

    def visit(block, after):
        for i, s in enumerate(block):
            inner = (block[i + 1:],) + after
            if isinstance(s, Assign):
                t = fn.types.get(s.target)
                if s.op not in FLOAT_RECOMPUTE_OPS or s.index or not isinstance(t, Scalar) \
                        or t.kind != "f64" or not is_temp(fn, s.target) \
                        or facts.defs.get(s.target) != 1 or s.target == fn.result:
                    continue
                sizes = [operand(a) for a in s.args]
                if any(n is None for n in sizes) or 1 + sum(sizes) > MAX_RECOMPUTE_OPS:
                    continue
                out[s.target] = s
                size[s.target] = 1 + sum(sizes)
                for g in leaves(s.target):
                    idx_vars = {it.name for it in g.index if isinstance(it, Var)}
                    if _written_before_use(block, s, g.args[0].name, idx_vars, after):
                        del out[s.target], size[s.target]
                        break
            elif isinstance(s, If):
                visit(s.body, inner)
                visit(s.orelse, inner)
            elif isinstance(s, (For, While)):
                visit(s.body, inner)
            elif isinstance(s, Segment):
                visit(s.stmts, inner)

    visit(fn.body, ())
    return out


#: cheap operations on integers and booleans that the reverse sweep may evaluate again
INT_RECOMPUTE_OPS = frozenset({"add", "sub", "mul", "neg", "floordiv", "mod", "copy", "dim",
                               "eq", "ne", "lt", "le", "gt", "ge", "not", "and", "or", "truth",
                               "bool_operand",
                               "slice_start", "slice_len", "bcast_len", "bcast_stride",
                               "same_len", "chain_lower", "chain_upper"})


def find_int_recomputable(fn, facts):
    """Integer and boolean scalars the reverse sweep evaluates again instead of saving them
    on the int tape: ``{name: its Assign}``, in definition order.

    A scalar qualifies when it is assigned once (``t = i - 1``, ``stop = n - 1``, ``c = i > 0``)
    by a cheap operation (``INT_RECOMPUTE_OPS``) whose operands are constants, indices of the
    range loops around the assignment, variables that keep one value (``activity.intact``;
    an array only as the operand of a dimension) or scalars that qualify themselves; and when
    every read of it comes later in the same block (segments count as part of their block),
    so in the same trip of every loop around it.  Each reverse-sweep read of it then sees the operands with the values they had at
    the assignment: a loop index is set by the reverse loop, the rest never change."""
    counts = {}
    for st in walk(fn.body):
        for u in uses(st):
            if isinstance(u, Var):
                counts[u.name] = counts.get(u.name, 0) + 1
    out = {}
    rebound_dims = {}   # a qualifying scalar -> the rebound arrays whose dimensions it reads

    def operand_ok(st, a, loop_vars):
        if isinstance(a, Const):
            return True
        if not isinstance(a, Var):
            return False
        n = a.name
        if isinstance(fn.types.get(n), Array):
            return st.op == "dim" and (intact(facts, n) or recorded_rebound(fn, facts, n))
        if n in out:
            return True
        if n in loop_vars and facts.defs.get(n) == 1:
            return True
        return intact(facts, n)

    def flat(block):
        # a segment is a straight-line run of its block's statements
        for st in block:
            if isinstance(st, Segment):
                yield from flat(st.stmts)
            else:
                yield st

    def visit(block, loop_vars):
        block = list(flat(block))
        for k, st in enumerate(block):
            if isinstance(st, Assign):
                t = fn.types.get(st.target)
                if st.op in INT_RECOMPUTE_OPS and isinstance(t, Scalar) and t.kind in ("i64", "bool") \
                        and not st.index and facts.defs.get(st.target) == 1 \
                        and st.target not in fn.params and st.target != fn.result \
                        and not intact(facts, st.target) \
                        and all(operand_ok(st, a, loop_vars) for a in st.args):
                    later = sum(1 for x in walk(block[k + 1:]) for u in uses(x)
                                if isinstance(u, Var) and u.name == st.target)
                    arrays = {a.name for a in st.args if isinstance(a, Var)
                              and isinstance(fn.types.get(a.name), Array) and not intact(facts, a.name)}
                    arrays = arrays.union(*(rebound_dims.get(a.name, ()) for a in st.args
                                            if isinstance(a, Var)))
                    if later == counts.get(st.target, 0) and \
                            not (arrays and _rebound_before_reads(block, k, st.target, arrays)):
                        out[st.target] = st
                        if arrays:
                            rebound_dims[st.target] = arrays
            elif isinstance(st, If):
                visit(st.body, loop_vars)
                visit(st.orelse, loop_vars)
            elif isinstance(st, For):
                visit(st.body, loop_vars + (st.var,))
            elif isinstance(st, While):
                visit(st.test_body, loop_vars)
                visit(st.body, loop_vars)

    visit(fn.body, ())
    return out


def _rebound_before_reads(block, k, name, arrays):
    """Is one of ``arrays`` assigned after ``block[k]`` and before (or in) the last statement of
    ``block`` that reads ``name``?  A dimension of a rebound array read again in the reverse
    sweep is then not the one ``block[k]`` read (the reverse sweep restores the binding only
    when it reverses the rebinding)."""
    last = max((j for j in range(k + 1, len(block)) if any(
        isinstance(u, Var) and u.name == name for x in walk([block[j]]) for u in uses(x))),
        default=k)
    return any(isinstance(x, Assign) and x.target in arrays for x in walk(block[k + 1:last + 1]))


#: how a read of an array's shape alone is keyed in ``reads_at`` (``shape_key``): a store into
#: the array leaves its shape as it was, so such a read keeps a store from saving nothing; an
#: assignment that rebinds the name may change it, so there it counts as a read of the name
SHAPE_SUFFIX = ".shape"


def shape_key(name):
    """The ``reads_at`` key of a read of ``name``'s shape alone (``x.shape[0]``)."""
    return name + SHAPE_SUFFIX


def _named(key):
    """The variable a ``reads_at`` key reads, and whether the read is of its shape alone."""
    if key.endswith(SHAPE_SUFFIX):
        return key[:-len(SHAPE_SUFFIX)], True
    return key, False


def to_be_recorded(fn, reads_at, fused=frozenset()):
    """Variables whose values the reverse sweep reads at a point where a later assignment
    (later in program order, or in a loop around both) may have overwritten them: exactly
    these are saved before each assignment and restored when it is reversed.  A value read
    only after its last assignment (an accumulator used after its loop) needs no tape.
    ``fused``: ids of loops whose trips are reversed right after they run
    (``coarsen.analysis.reductions``): a later trip of one never runs before the reverse
    reads of an earlier trip."""
    order, loops_of = statement_positions(fn.body)
    defs = {}
    for st in walk(fn.body):
        if isinstance(st, Assign):
            defs.setdefault(st.target, []).append(st)
        elif isinstance(st, For):
            defs.setdefault(st.var, []).append(st)
    out = set()
    for key, readers in reads_at.items():
        v, _ = _named(key)
        if v in fn.params and v not in defs:
            continue
        for r in readers:
            pr = order[id(r)]
            hit = False
            for d in defs.get(v, ()):
                if isinstance(d, For) and d.var == v:
                    continue   # the reverse loop sets its own index
                if order[id(d)] >= pr or any(lp in loops_of[id(r)] and id(lp) not in fused
                                             for lp in loops_of[id(d)]):
                    hit = True
                    break
            if hit:
                out.add(v)
                break
    # arrays whose elements the reverse sweep reads must be restored across stores (a read
    # of the shape alone is not one: stores keep it)
    stored = {st.array for st in walk(fn.body) if isinstance(st, Store)}
    for v in reads_at:
        if v in stored and isinstance(fn.types.get(v), Array):
            out.add(v)
    return out


def shape_recorded(fn, recorded, reads_at):
    """The arrays of ``recorded`` (``to_be_recorded``) whose every reverse-sweep read is of
    the shape alone (``shape_key``: an adjoint reset ``v_bar = np.zeros(v.shape)`` after the
    reverse of ``v``'s rebinding): saving the shape before each assignment does, where the
    elements would be copied onto the tape whole (Floyd-Warshall's per-trip temporary).  An
    array with no recorded read keeps the whole save."""
    return frozenset(v for v in recorded if isinstance(fn.types.get(v), Array)
                     and shape_key(v) in reads_at and v not in reads_at)


def full_overwrites(fn):
    """``{id(loop): arrays}``: the ``range`` loops that overwrite every element of a 1-D array,
    ``for j in range(n): a[j] = e`` at the top of the loop body, where ``a`` is assigned once,
    by ``np.zeros(n)``/``np.empty(n)``/``np.ones(n)`` with the same ``n`` (through copies; a
    constant or a variable that keeps one value), and neither is a view nor viewed."""
    facts_defs = {}
    for st in walk(fn.body):
        if isinstance(st, Assign):
            facts_defs.setdefault(st.target, []).append(st)

    def root(operand):
        while isinstance(operand, Var):
            ds = facts_defs.get(operand.name, [])
            if len(ds) != 1 or ds[0].op != "copy" or len(ds[0].args) != 1:
                break
            operand = ds[0].args[0]
        return operand

    _, loops_of = statement_positions(fn.body)

    def fixed(operand):
        """A constant, a parameter never assigned, or a variable assigned once outside loops."""
        if isinstance(operand, Const):
            return type(operand.value) is int
        # a loop's stop through copies: an IR operand (``nodes.Operand``), a Var if no Const
        assert isinstance(operand, Var), operand
        ds = facts_defs.get(operand.name, [])
        if not ds:
            return operand.name in fn.params
        return len(ds) == 1 and not loops_of.get(id(ds[0])) and operand.name not in fn.params

    viewed = set(fn.views) | set(fn.views.values())
    out = {}
    for st in walk(fn.body):
        if not isinstance(st, For) or st.start != Const(0) or st.step != Const(1):
            continue
        n = root(st.stop)
        if not fixed(n):
            continue
        for b in st.body:
            if not (isinstance(b, Store) and b.aug is None and b.index == (Var(st.var),)):
                continue
            ds = facts_defs.get(b.array, [])
            t = fn.types.get(b.array)
            if b.array in viewed or b.array in fn.params or len(ds) != 1 \
                    or loops_of.get(id(ds[0])) or not isinstance(t, Array) or t.ndim != 1 \
                    or ds[0].op not in ("zeros", "empty", "ones") or len(ds[0].args) != 1 \
                    or root(ds[0].args[0]) != n:
                continue
            out.setdefault(id(st), set()).add(b.array)
    return out


def tape_sites(fn, reads_at, fused=frozenset()):
    """The scalar assignments that must save the value they overwrite.

    A forward may-analysis over the structured IR: a variable is *pending* from a point whose
    reverse code reads its value until the next assignment to it; an assignment met while its
    variable is pending overwrites a value the reverse sweep will read, so it is taped.
    (An accumulator read only after its loop, say, is then taped once per outer trip, not once
    per inner trip.)  Loops iterate to a fixpoint; both arms of an ``if`` are joined.  A loop
    in ``fused`` (its trips reversed right after they run) is one trip: what its trips read
    is consumed at the trip's end.  A store into an array that is pending is marked too (it
    overwrites elements the reverse sweep reads), and leaves the array pending; a read of an
    array's shape alone (``shape_key``) is pending for the assignments that rebind the name,
    never for stores, which keep the shape."""
    start, mid, end = {}, {}, {}
    for v, readers in reads_at.items():
        for r in readers:
            if isinstance(r, tuple):
                (end if r[0] == "end" else mid).setdefault(id(r[1]), set()).add(v)
            else:
                start.setdefault(id(r), set()).add(v)
    marked = set()
    full = full_overwrites(fn)
    rows = history_rows(fn)
    # stores into a pending array, and history-row stores (history.py): a row store needs no
    # save only if its array is pending at no visit of its loop.  Decided once the flow is
    # done: the fixpoint of an enclosing loop may find the array pending only at a later
    # visit (a read in the loop body after the row loop), and an early verdict of "unsaved"
    # would then drop saves the reverse sweep needs
    pending_stores, row_stores, row_needed = set(), set(), set()

    def flow(block, pending):
        pending = set(pending)
        for st in block:
            pending |= start.get(id(st), set())
            if isinstance(st, Assign):
                if st.target in pending or shape_key(st.target) in pending:
                    marked.add(id(st))
                pending.discard(st.target)
                pending.discard(shape_key(st.target))
            elif isinstance(st, Store):
                if st.array in pending:
                    pending_stores.add(id(st))
            elif isinstance(st, If):
                pending = flow(st.body, pending) | flow(st.orelse, pending)
            elif isinstance(st, For) and id(st) in fused:
                flow(st.body, pending)
            elif isinstance(st, For):
                for a, stores in rows.get(id(st), {}).items():
                    row_stores.update(stores)
                    if a in pending:
                        row_needed.update(stores)
                after = loop(st.body, pending)
                for a in full.get(id(st), ()):
                    # the loop overwrites every element of ``a`` (saving each where ``a`` is
                    # pending): reads of ``a`` before it are served by those saves, so only
                    # the reads in its own trips keep ``a`` pending after it
                    if a in after and a not in loop(st.body, pending - {a}):
                        after = after - {a}
                pending = after
            elif isinstance(st, While):
                pending = flow(st.test_body, pending)
                pending = loop(st.test_body + st.body, pending)
            elif isinstance(st, Segment):
                pending = flow(st.passengers, pending)
                pending |= mid.get(id(st), set())
                pending = flow([x for x in st.stmts if not any(x is p for p in st.passengers)], pending)
            pending |= end.get(id(st), set())
        return pending

    def loop(body, pending):
        entry = set(pending)
        out = set()
        for _ in range(4):
            new = flow(body, entry | out)
            if new <= out:
                break
            out |= new
        return entry | out

    flow(fn.body, set())
    marked |= {k for k in pending_stores if k not in row_stores or k in row_needed}
    return frozenset(marked)


