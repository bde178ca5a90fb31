"""SSA webs: every variable of the IR is split into its live ranges.

Requires: an untyped ``ir.Function`` from the frontend (structured: blocks, ``If``, ``For``,
``While``; no ``Segment`` yet).
Guarantees: a ``Function`` (the input is not modified; returned as it is when no variable
splits) in which each variable name
stands for exactly one *web*: the union of the definitions that reach a common use (reaching
definitions, computed on the structure, with loops iterated to a fixpoint).  Two unrelated
uses of one source name, such as a loop index ``i`` reused by a later loop, or ``c`` first
an int loop index and later a float, become two variables, each with its own type.  The web
that holds a parameter (or else the first definition in program order) keeps the name; the
others get the first free ``<name>_<k>``, ``k = 2, 3, ...`` (a name no variable uses, so the
user's names stay readable and never clash).  A merged value (an ``If`` join, or a value
carried around a loop) is one web, so the gamma and mu phis still read off the structure.
Array element and slice writes (``Store``) update the array in place: they use the web of
the array they write and define nothing.
"""
from __future__ import annotations

from dataclasses import fields, replace

from .nodes import (Assign, For, Function, If, Segment, Slice, Store, Var, While,
                    index_operands, walk)

_PARAM = "param"


class _UnionFind:
    def __init__(self):
        self.parent = {}

    def add(self, x):
        self.parent.setdefault(x, x)

    def find(self, x):
        root = x
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[x] != root:
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, a, b):
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            # the smaller key (earlier in program order) is the representative
            if rb < ra:
                ra, rb = rb, ra
            self.parent[rb] = ra


def _join(a, b):
    out = dict(a)
    for v, defs in b.items():
        out[v] = out.get(v, frozenset()) | defs
    return out


class _Webs:
    """Reaching definitions over the structured IR; each definition is ``(order, var)``."""

    def __init__(self, fn):
        self.uf = _UnionFind()
        self.order = {}          # id(defining node) -> program-order number
        self.var_of = {}         # def key -> variable
        n = 0
        for p in fn.params:
            key = (n, p)
            self.uf.add(key)
            self.var_of[key] = p
            n += 1
        for st in walk(fn.body):
            if isinstance(st, (Assign, For)):
                self.order[id(st)] = n
                n += 1
        self.params = {p: frozenset({(i, p)}) for i, p in enumerate(fn.params)}
        self.use_defs = {}       # (id(node), var) -> def keys reaching that use

    def define(self, node, var):
        key = (self.order[id(node)], var)
        self.uf.add(key)
        self.var_of[key] = var
        return key

    def use(self, node, var, state):
        defs = state.get(var, frozenset())
        if not defs:
            return
        self.use_defs[(id(node), var)] = defs
        first = None
        for d in sorted(defs):
            if first is None:
                first = d
            else:
                self.uf.union(first, d)

    def uses(self, node, operands, state):
        for op in operands:
            if isinstance(op, Var):
                self.use(node, op.name, state)

    def block(self, stmts, state):
        for st in stmts:
            state = self.stmt(st, state)
        return state

    def stmt(self, st, state):
        if isinstance(st, Assign):
            self.uses(st, st.args, state)
            self.uses(st, index_operands(st.index), state)
            state = dict(state)
            state[st.target] = frozenset({self.define(st, st.target)})
            return state
        if isinstance(st, Store):
            self.use(st, st.array, state)
            self.uses(st, [st.value], state)
            self.uses(st, index_operands(st.index), state)
            return state
        if isinstance(st, If):
            self.uses(st, [st.cond], state)
            return _join(self.block(st.body, dict(state)), self.block(st.orelse, dict(state)))
        if isinstance(st, For):
            self.uses(st, [st.start, st.stop, st.step], state)
            var_def = frozenset({self.define(st, st.var)})
            head = dict(state)
            while True:
                inner = dict(head)
                inner[st.var] = var_def
                out = self.block(st.body, inner)
                new_head = _join(state, out)
                if new_head == head:
                    break
                head = new_head
            after = dict(head)
            after[st.var] = after.get(st.var, frozenset()) | var_def
            return after
        if isinstance(st, While):
            head = dict(state)
            while True:
                tested = self.block(st.test_body, dict(head))
                self.uses(st, [st.test], tested)
                out = self.block(st.body, dict(tested))
                new_head = _join(state, out)
                if new_head == head:
                    break
                head = new_head
            return tested
        if isinstance(st, Segment):
            raise TypeError("SSA webs are computed before segments are planned")
        raise TypeError(st)


def split_webs(fn: Function) -> Function:
    """``fn`` with every variable split into its SSA webs (see the module docstring)."""
    w = _Webs(fn)
    end = w.block(fn.body, dict(w.params))
    result_defs = end.get(fn.result, frozenset())
    w.use(fn, fn.result, end)

    # webs per variable, ordered by their first definition
    webs = {}
    for key in sorted(w.var_of):
        root = w.uf.find(key)
        var = w.var_of[key]
        webs.setdefault(var, [])
        if root not in webs[var]:
            webs[var].append(root)
    split = {v: roots for v, roots in webs.items() if len(roots) > 1}
    if not split:
        return fn

    # new webs' names come from the module's supply, which knows the names of code lowered
    # apart from the body (a custom_vjp rule's) as well as the body's own
    fn.names.reserve(webs)
    for st in walk(fn.body):
        if isinstance(st, Store):
            fn.names.reserve([st.array])
    name_of = {}
    for var, roots in sorted(split.items()):
        # the parameter's web, else the first defined, keeps the name
        for k, root in enumerate(roots):
            if k == 0:
                name_of[root] = var
                continue
            name_of[root] = fn.names.numbered(var, "ssa", start=2, sep="_")

    def web_name(var, key):
        if var not in split:
            return var
        return name_of[w.uf.find(key)]

    def def_name(node, var):
        if var not in split:
            return var
        return web_name(var, (w.order[id(node)], var))

    def use_name(node, var):
        if var not in split:
            return var
        defs = w.use_defs.get((id(node), var))
        if not defs:
            # read where nothing reaches (a path on which Python would raise
            # UnboundLocalError): keep the first web's name
            return var
        return web_name(var, next(iter(defs)))

    def opnd(node, op):
        if isinstance(op, Var):
            return Var(use_name(node, op.name))
        return op

    def index(node, idx):
        out = []
        for item in idx:
            if isinstance(item, Var):
                out.append(Var(use_name(node, item.name)))
            elif isinstance(item, Slice):
                out.append(Slice(*(opnd(node, p) if p is not None else None
                                   for p in (item.lower, item.upper, item.step))))
            else:
                out.append(item)
        return tuple(out)

    def block(stmts):
        return [stmt(s) for s in stmts]

    def stmt(st):
        if isinstance(st, Assign):
            return replace(st, target=def_name(st, st.target),
                           args=tuple(opnd(st, a) for a in st.args), index=index(st, st.index))
        if isinstance(st, Store):
            return replace(st, array=use_name(st, st.array), value=opnd(st, st.value),
                           index=index(st, st.index))
        if isinstance(st, If):
            return replace(st, cond=opnd(st, st.cond), body=block(st.body), orelse=block(st.orelse))
        if isinstance(st, For):
            return replace(st, var=def_name(st, st.var), start=opnd(st, st.start),
                           stop=opnd(st, st.stop), step=opnd(st, st.step), body=block(st.body))
        if isinstance(st, While):
            return replace(st, test_body=block(st.test_body), test=opnd(st, st.test),
                           body=block(st.body))
        raise TypeError(st)

    result = fn.result
    if result in split and result_defs:
        result = web_name(result, next(iter(result_defs)))
    out = replace(fn, body=block(fn.body), result=result)
    for attr, value in vars(fn).items():      # what the frontend attached beyond the fields
        if attr not in {f.name for f in fields(fn)}:
            setattr(out, attr, value)
    return out
