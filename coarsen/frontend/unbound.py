"""Reads of variables that may be unbound: ``UnboundLocalError`` where Python raises it.

Requires: the untyped, structured IR body the frontend lowered (before ``ssa.split_webs``, so
each name is one source variable, every web of it), the function's parameters and result,
``source_names`` (IR name -> the user's spelling of that variable: an escaped ``u_y`` is
``_y``, an inlined helper's ``h1_y`` is ``y``) and ``fresh(base)``, the frontend's supply of
compiler names.
Guarantees: ``guard_unbound_reads`` returns the body unchanged (the same list) where every read
of a user variable is definitely bound.  Otherwise, for each user variable ``v`` with a read
that may run before any assignment to ``v`` (assigned only in one branch of an ``if``, only in
a loop that may run no trip, a loop index read after ``for i in range(n)``), it adds a flag
``_bound_v``: ``False`` at the top of the function, ``True`` after each assignment to ``v``
(at the top of the body of a ``for`` over ``v``), and before each such read the statement
``_chk = unbound_check(_bound_v)`` (``coarsen.ir.primitives.checks``: it raises
``UnboundLocalError("cannot access local variable 'v' where it is not associated with a
value")`` where the flag is False, as Python does, in both sweeps' targets and both modes).
Ordinary IR statements, so every later pass keeps their order and meaning: the forward sweep
raises before the read, and no gradient is returned.

"Definitely bound" is the classic must-analysis on the structure (an ``if`` binds what both
branches bind; a loop what it binds before its first test), with one refinement so the common
case costs nothing: a loop known to run at least once (``range`` with constant or
constant-propagated bounds that has trips, a ``while`` whose first test folds to true, such as
the counter of ``for i in range(3)`` whose index is read after it) binds what its first trip
binds.  Reads of the compiler's own names are not checked: the frontend binds them before
every read on a path that runs (an early return's result starts at ``0.0``).
"""
from __future__ import annotations

from ..ir.nodes import Assign, Const, For, If, Store, Var, While, index_operands

#: the ops the constant folding of loop tests knows: ints and bools only
_FOLD = {
    "copy": lambda a: a, "neg": lambda a: -a, "not": lambda a: not a, "truth": bool,
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b, "eq": lambda a, b: a == b, "ne": lambda a, b: a != b,
    "and": lambda a, b: a and b, "or": lambda a, b: a or b,
    "range_cont": lambda i, stop, step: i < stop if step > 0 else i > stop,
}


def _known(value):
    return isinstance(value, (bool, int))


def _operands(st):
    """The operands ``st`` reads itself (not its nested blocks; a ``While``'s test apart)."""
    if isinstance(st, Assign):
        return list(st.args) + list(index_operands(st.index))
    if isinstance(st, Store):
        return [Var(st.array), st.value] + list(index_operands(st.index))
    if isinstance(st, If):
        return [st.cond]
    if isinstance(st, For):
        return [st.start, st.stop, st.step]
    return []


def _assigned(stmts):
    out = set()
    for st in stmts:
        if isinstance(st, Assign):
            out.add(st.target)
        elif isinstance(st, For):
            out.add(st.var)
            out |= _assigned(st.body)
        elif isinstance(st, If):
            out |= _assigned(st.body) | _assigned(st.orelse)
        elif isinstance(st, While):
            out |= _assigned(st.test_body) | _assigned(st.body)
    return out


class _Analysis:
    """Which reads may find their variable unbound (``reads``: id(stmt) -> names; a ``While``'s
    test under ``("test", id)``) and the function result's (``result``)."""

    def __init__(self, users):
        self.users = users          # the names checked: the user's variables
        self.reads = {}

    def value(self, op, env):
        if isinstance(op, Const):
            return op.value if _known(op.value) else None
        return env.get(op.name)

    def read(self, key, operands, bound):
        for op in operands:
            if isinstance(op, Var) and op.name in self.users and op.name not in bound:
                names = self.reads.setdefault(key, [])
                if op.name not in names:
                    names.append(op.name)

    def block(self, stmts, bound, env):
        """``(bound, env)`` after ``stmts``: the names bound on every path, and the ints and
        bools whose value is known (both updated in place)."""
        for st in stmts:
            self.stmt(st, bound, env)
        return bound, env

    def stmt(self, st, bound, env):
        self.read(id(st), _operands(st), bound)
        if isinstance(st, Assign):
            fold = _FOLD.get(st.op)
            vals = [self.value(a, env) for a in st.args]
            env.pop(st.target, None)
            if fold is not None and not st.index and vals and all(_known(v) for v in vals):
                try:
                    out = fold(*vals)
                except (TypeError, ArithmeticError):
                    out = None
                if _known(out):
                    env[st.target] = out
            bound.add(st.target)
        elif isinstance(st, If):
            cond = self.value(st.cond, env)
            b1, e1 = self.block(st.body, set(bound), dict(env))
            b2, e2 = self.block(st.orelse, set(bound), dict(env))
            if cond is True:
                b2, e2 = b1, e1
            elif cond is False:
                b1, e1 = b2, e2
            bound |= b1 & b2
            merged = {k: v for k, v in e1.items() if k in e2 and e2[k] == v
                      and type(e2[k]) is type(v)}
            env.clear()
            env.update(merged)
        elif isinstance(st, For):
            start, stop, step = (self.value(a, env) for a in (st.start, st.stop, st.step))
            runs = (None not in (start, stop, step) and step != 0
                    and (start < stop if step > 0 else start > stop))
            for name in _assigned([st]):
                env.pop(name, None)
            # a trip sees what every earlier trip bound: at least what the loop's entry bound
            inner, _ = self.block(st.body, bound | {st.var}, dict(env))
            if runs:
                bound |= inner - {st.var}
        elif isinstance(st, While):
            first = dict(env)
            tested, first = self.block(st.test_body, set(bound), first)
            runs = self.value(st.test, first) is True
            for name in _assigned([st]):
                env.pop(name, None)
            tested, _ = self.block(st.test_body, set(bound), dict(env))
            self.read(("test", id(st)), [st.test], tested)
            inner, _ = self.block(st.body, set(tested), dict(env))
            bound |= inner if runs else tested
        elif not isinstance(st, Store):
            raise TypeError(st)


def guard_unbound_reads(body, params, result, source_names, fresh):
    """``body`` with its possibly unbound reads checked (see the module docstring)."""
    users = set(source_names) - set(params)
    an = _Analysis(users)
    bound, _ = an.block(body, set(params), {})
    if result in users and result not in bound:
        an.reads[("result",)] = [result]
    if not an.reads:
        return body
    guarded = sorted({v for names in an.reads.values() for v in names})
    flags = {v: fresh("_bound_" + v) for v in guarded}

    def check(v, loc):
        return Assign(fresh("_chk"), "unbound_check", (Var(flags[v]),), loc,
                      attrs=(("name", source_names[v]),))

    def set_flag(v, loc):
        return Assign(flags[v], "copy", (Const(True),), loc)

    def block(stmts):
        out = []
        for st in stmts:
            out.extend(check(v, st.loc) for v in an.reads.get(id(st), ()))
            if isinstance(st, Assign):
                out.append(st)
                if st.target in flags:
                    out.append(set_flag(st.target, st.loc))
                continue
            if isinstance(st, If):
                st = If(st.cond, block(st.body), block(st.orelse), st.loc)
            elif isinstance(st, For):
                head = [set_flag(st.var, st.loc)] if st.var in flags else []
                st = For(st.var, st.start, st.stop, st.step, head + block(st.body), st.loc,
                         parallel=st.parallel)
            elif isinstance(st, While):
                tail = [check(v, st.loc) for v in an.reads.get(("test", id(st)), ())]
                st = While(block(st.test_body) + tail, st.test, block(st.body), st.loc)
            out.append(st)
        return out

    loc = body[0].loc
    out = [Assign(flags[v], "copy", (Const(False),), loc) for v in guarded] + block(body)
    last = body[-1].loc
    out.extend(check(v, last) for v in an.reads.get(("result",), ()))
    return out
