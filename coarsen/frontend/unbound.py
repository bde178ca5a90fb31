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
branches bind; a loop what it binds before its first test), with two refinements so the common
case costs nothing: a loop known to run at least once (``range`` with constant or
constant-propagated bounds that has trips, a ``while`` whose first test folds to true, such as
the counter of ``for i in range(3)`` whose index is read after it, or ``while True`` with a
``break``) binds what its first trip binds; and what is bound where a boolean flag has a value
is kept through the join (``if c: y = ... else: return``: ``y`` is bound wherever the return
flag is False, which is where the guarded rest of the function runs; ``not``, ``and``, ``or``
and copies of flags are followed, any assignment of a flag forgets it).  Reads of the
compiler's own names are not checked: the frontend binds them before every read on a path
that runs (an early return's result starts at ``0.0``).
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


_TOP = None      # the bound set of paths that cannot be taken: every name


def _meet(a, b):
    if a is _TOP:
        return b
    if b is _TOP:
        return a
    return a & b


class _State:
    """What holds at a point on every path to it: ``bound`` (names bound), ``env`` (ints and
    bools of known value), ``facts`` ((flag, value) -> names bound on the paths where the bool
    ``flag`` has that value, beyond ``bound``: after ``if c: y = ... else: return``, ``y`` where
    the return flag is False) and ``lits`` (bool -> the (flag, value) literals that hold where
    it is True, and where it is False: ``_t = not(_returned)``)."""

    def __init__(self, bound, env=None, facts=None, lits=None):
        self.bound = set(bound)
        self.env = dict(env or {})
        self.facts = dict(facts or {})
        self.lits = dict(lits or {})

    def copy(self):
        return _State(self.bound, self.env, self.facts, self.lits)

    def literals(self, op, truth):
        """The (flag, value) literals that hold where the operand ``op`` is ``truth``."""
        if not isinstance(op, Var):
            return frozenset()
        known = self.lits.get(op.name, (frozenset(), frozenset()))
        return known[0 if truth else 1] | {(op.name, truth)}

    def assume(self, literals):
        for flag, value in literals:
            self.bound |= self.facts.get((flag, value), set())

    def kill(self, names):
        """``names`` are assigned: what was known of their values goes."""
        for n in names:
            self.env.pop(n, None)
            self.lits.pop(n, None)
        self.facts = {k: v for k, v in self.facts.items() if k[0] not in names}
        self.lits = {k: v for k, v in self.lits.items()
                     if not any(f in names for lit in v for f, _ in lit)}

    def bound_where(self, flag, value):
        known = self.env.get(flag)
        if isinstance(known, bool):
            return self.bound if known == value else _TOP
        return self.bound | self.facts.get((flag, value), set())

    @staticmethod
    def join(a, b):
        out = _State(a.bound & b.bound)
        out.env = {k: v for k, v in a.env.items() if k in b.env and b.env[k] == v
                   and type(b.env[k]) is type(v)}
        flags = {k[0] for k in list(a.facts) + list(b.facts)}
        flags |= {k for st in (a, b) for k, v in st.env.items() if isinstance(v, bool)}
        for flag in flags:
            for value in (False, True):
                where = _meet(a.bound_where(flag, value), b.bound_where(flag, value))
                if where is not _TOP and where - out.bound:
                    out.facts[(flag, value)] = where - out.bound
        out.lits = {k: v for k, v in a.lits.items() if b.lits.get(k) == v}
        return out


class _Analysis:
    """Which reads may find their variable unbound (``reads``: id(stmt) -> names; a ``While``'s
    test under ``("test", id)``, the function result under ``("result",)``)."""

    def __init__(self, users):
        self.users = users          # the names checked: the user's variables
        self.reads = {}

    @staticmethod
    def value(op, env):
        if isinstance(op, Const):
            return op.value if _known(op.value) else None
        return env.get(op.name)

    def read(self, key, operands, bound):
        for op in operands:
            if isinstance(op, Var) and op.name in self.users and op.name not in bound:
                names = self.reads.setdefault(key, [])
                if op.name not in names:
                    names.append(op.name)

    def block(self, stmts, state):
        """``state`` after ``stmts`` (updated in place)."""
        for st in stmts:
            state = self.stmt(st, state)
        return state

    def assign(self, st, state):
        fold = _FOLD.get(st.op)
        vals = [self.value(a, state.env) for a in st.args]
        lits = None
        if len(st.args) == 1 and st.op in ("not", "truth", "copy", "bool_operand"):
            t, f = state.literals(st.args[0], True), state.literals(st.args[0], False)
            lits = (f, t) if st.op == "not" else (t, f)
        elif st.op == "or":
            lits = (frozenset(), state.literals(st.args[0], False) | state.literals(st.args[1], False))
        elif st.op == "and":
            lits = (state.literals(st.args[0], True) | state.literals(st.args[1], True), frozenset())
        state.kill({st.target})
        if lits is not None and (lits[0] or lits[1]) and not st.index:
            state.lits[st.target] = lits
        if fold is not None and not st.index and vals and all(_known(v) for v in vals):
            try:
                out = fold(*vals)
            except (TypeError, ArithmeticError):
                out = None
            if _known(out):
                state.env[st.target] = out
        state.bound.add(st.target)

    def stmt(self, st, state):
        self.read(id(st), _operands(st), state.bound)
        if isinstance(st, Assign):
            self.assign(st, state)
            return state
        if isinstance(st, If):
            cond = self.value(st.cond, state.env)
            then, other = state.copy(), state.copy()
            then.assume(state.literals(st.cond, True))
            other.assume(state.literals(st.cond, False))
            then = self.block(st.body, then)
            other = self.block(st.orelse, other)
            if cond is True:
                return then
            if cond is False:
                return other
            return _State.join(then, other)
        if isinstance(st, For):
            start, stop, step = (self.value(a, state.env) for a in (st.start, st.stop, st.step))
            runs = (None not in (start, stop, step) and step != 0
                    and (start < stop if step > 0 else start > stop))
            state.kill(_assigned([st]))
            # a trip sees what every earlier trip bound: at least what the loop's entry bound
            inner = state.copy()
            inner.bound.add(st.var)
            inner = self.block(st.body, inner)
            if runs:
                state.bound |= inner.bound - {st.var}
            return state
        if isinstance(st, While):
            first = self.block(st.test_body, state.copy())
            runs = self.value(st.test, first.env) is True
            state.kill(_assigned([st]))
            tested = self.block(st.test_body, state.copy())
            self.read(("test", id(st)), [st.test], tested.bound)
            inner = tested.copy()
            inner.assume(tested.literals(st.test, True))
            inner = self.block(st.body, inner)
            out = tested.copy()
            out.bound |= inner.bound if runs else set()
            out.kill(_assigned([st]))
            return out
        if isinstance(st, Store):
            return state
        raise TypeError(st)


def guard_unbound_reads(body, params, result, source_names, fresh):
    """``body`` with its possibly unbound reads checked (see the module docstring)."""
    users = set(source_names) - set(params)
    an = _Analysis(users)
    bound = an.block(body, _State(params)).bound
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
