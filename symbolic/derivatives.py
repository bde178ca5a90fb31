"""Symbolic local Jacobians of a segment of interest (SOI) by reverse accumulation over its DAG.

Requires:

* ``assignments``: an ordered list of ``(Symbol, Expr)`` in SSA form; each right-hand side uses
  inputs, earlier assigned symbols and loop-invariant parameters (any other free symbol is a
  constant: it is not differentiated).  A value used more than once should be its own
  assignment (the caller never inlines shared values; this module never inlines them either);
* ``inputs``: the SOI inputs (Symbols); ``outputs``: Symbols, each an input or assigned;
* ``wrt``: the inputs to differentiate with respect to (default: all inputs);
* ``budget``: a :class:`~.budget.Budget`; its clock starts on first use.

Guarantees (:func:`derivatives` returns a :class:`LocalJacobian`):

* Differentiation follows the DAG, never the inlined tree: one reverse sweep per output, in which
  every assigned symbol ``s = e(v...)`` passes its complete adjoint ``a`` to each operand as
  ``a * de/dv``; ``de/dv`` is rewritten in terms of ``s`` itself where that is an identity
  (``exp``, ``tanh``, ``sqrt``, reciprocals through ``subs(e, s)``, and the logistic sigmoid
  ``1/(c + exp(w))``, ``exp(w)/(c + exp(w))`` by pattern), small adjoints are tidied with
  ``cancel`` (:func:`~.rewrite.tidy`), and an adjoint that feeds more than one operand is bound
  to a symbol, so sizes grow linearly with the number of statements.
* Then the numerically stable rewrites (:func:`~.rewrite.stable_rewrite`: expm1, log1p, cheap
  logaddexp), then one ``sympy.cse`` over all intermediates, bound adjoints, values and partials.
* ``replacements`` is an ordered, dependency-respecting list of ``(Symbol, Expr)``; it keeps the
  caller's intermediate symbols (those still needed) and names every new temporary
  ``{prefix}0, {prefix}1, ...`` in order of definition, skipping names already in use: the same
  input gives the same output, byte for byte.  Trivial copies are removed.
* ``values[o]`` is an expression over inputs, parameters and replacement symbols; when ``o``
  itself stays bound in ``replacements`` (because partials use it), ``values[o]`` is ``o``.
* ``partials[(o, x)]`` is d o / d x over the same symbols; zero partials are omitted.
* ``ops_after`` = :func:`~.ops.count_ops` of all replacements, values and partials (what the
  emitted code evaluates).  ``ops_before`` estimates fine-grained (operation-by-operation)
  reverse-mode AD of the same statements: the primal ops plus, per differentiated output, for
  each operation node ``2`` per active operand (multiply by the adjoint, accumulate) plus ``1``
  for nodes whose local derivative needs its own evaluation (calls, powers) plus ``m - 2`` per
  active operand of an ``m``-ary product (the product of the other factors): about 2-3x the
  primal.  Both counts use the one :func:`~.ops.count_ops`.
* Symbols with unknown realness are differentiated as real symbols (so ``Abs``/``sign`` get
  real derivatives) and mapped back to the caller's symbols in every result.
* Every intermediate expression is checked against the budget; BudgetExceeded propagates.

:func:`naive_derivative_ops` inlines every assignment and differentiates the inlined outputs (no
CSE): the baseline whose size grows exponentially with chains of reused values; it checks the
budget before every SymPy step so it raises instead of hanging.

:func:`local_step_jacobian` is :func:`derivatives` for one loop trip (carried values and
parameters in, updated carried values out); :func:`stored_per_trip` says which loop-varying
values the coarse adjoint step needs per trip.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import sympy
from sympy.core.sorting import default_sort_key

from .budget import Budget
from .ops import count_ops
from .rewrite import stable_rewrite, tidy

__all__ = ["LocalJacobian", "derivatives", "naive_derivative_ops", "local_step_jacobian",
           "stored_per_trip"]

_SUBS_MAX_OPS = 200


@dataclass
class LocalJacobian:
    """Values and partials of an SOI after differentiation, CSE and stable rewrites."""

    replacements: list = field(default_factory=list)   # [(Symbol, Expr)], in order
    values: dict = field(default_factory=dict)         # {out_sym: Expr}
    partials: dict = field(default_factory=dict)       # {(out_sym, in_sym): Expr}, nonzero
    ops_before: int = 0
    ops_after: int = 0

    def all_expressions(self):
        return [e for _, e in self.replacements] + list(self.values.values()) + \
            list(self.partials.values())


def _as_budget(budget):
    b = budget if budget is not None else Budget()
    return b.ensure_started()


def _real_twins(symbols):
    """{sym: real twin} for symbols whose realness is unknown."""
    names_real = {s.name for s in symbols if s.is_real}
    twins = {}
    for s in sorted(symbols, key=default_sort_key):
        if s.is_real is None and isinstance(s, sympy.Symbol) and not isinstance(s, sympy.Dummy):
            if s.name in names_real:
                twins[s] = sympy.Dummy(s.name, real=True)
            else:
                twins[s] = sympy.Symbol(s.name, real=True, **{k: v for k, v in
                                                              s.assumptions0.items()
                                                              if k in ("integer", "positive",
                                                                       "nonnegative")})
    return twins


def _sigmoid_partial(s, e, v):
    """d e / d v in terms of s for e = 1/(c + exp(w)) or exp(w)/(c + exp(w)) (c free of v)."""
    def split(base):
        if not base.is_Add or len(base.args) != 2:
            return None
        for i, t in enumerate(base.args):
            other = base.args[1 - i]
            if isinstance(t, sympy.exp) and v not in other.free_symbols:
                return other, t.args[0]
        return None

    if e.is_Pow and e.exp is sympy.S.NegativeOne:
        sp_ = split(e.base)
        if sp_ is not None:
            c, w = sp_
            return -s * (1 - c * s) * sympy.diff(w, v)
    if e.is_Mul and len(e.args) == 2:
        for i, f in enumerate(e.args):
            g = e.args[1 - i]
            if isinstance(f, sympy.exp) and g.is_Pow and g.exp is sympy.S.NegativeOne:
                sp_ = split(g.base)
                if sp_ is not None and sp_[1] == f.args[0]:
                    return s * (1 - s) * sympy.diff(f.args[0], v)
    return None


def _local_partial(s, e, v, budget):
    d = _sigmoid_partial(s, e, v)
    if d is not None:
        return d
    d = sympy.diff(e, v)
    budget.check(d)
    if not e.is_Atom and d != 0 and count_ops(d, limit=_SUBS_MAX_OPS) <= _SUBS_MAX_OPS:
        try:
            d2 = d.subs(e, s)
        except Exception:
            d2 = d
        if d2 != d and count_ops(d2) <= count_ops(d):
            d = d2
    return d


def _fine_adjoint_ops(expr, active):
    """Fine-grained reverse-mode cost of one sweep through ``expr`` (see module docstring)."""
    total = 0
    stack = [expr]
    while stack:
        e = stack.pop()
        if e.is_Atom or not e.args:
            continue
        args = [a for a in e.args if isinstance(a, sympy.Basic)]
        act = [a for a in args if a.free_symbols & active]
        if act and not isinstance(e, (sympy.core.relational.Relational,)):
            k = len(act)
            total += 2 * k
            if e.is_Pow or (e.is_Function and not e.is_Add):
                total += 1
            if e.is_Mul and len(args) > 2:
                total += k * (len(args) - 2)
        stack.extend(args)
    return total


def _toposort(nodes, prefer, roots):
    """Emit the nodes reachable from roots, dependencies first; DFS in ``prefer`` order."""
    emitted, out = set(), []
    for root in roots:
        if root in emitted or root not in nodes:
            continue
        stack = [(root, False)]
        while stack:
            n, expanded = stack.pop()
            if n in emitted:
                continue
            if expanded:
                emitted.add(n)
                out.append(n)
                continue
            stack.append((n, True))
            deps = sorted((d for d in nodes[n].free_symbols if d in nodes and d not in emitted),
                          key=lambda d: prefer[d], reverse=True)
            stack.extend((d, False) for d in deps)
    return out


@dataclass
class _Segment:
    """A checked segment: its SSA assignments, inputs, outputs, ``wrt`` and ``defs``."""
    assignments: list
    inputs: list
    outputs: list
    wrt: list
    defs: dict


def _checked(assignments, inputs, outputs, wrt, budget) -> _Segment:
    """The arguments of ``derivatives`` sympified and checked (SSA, ``wrt`` among the inputs,
    each output an input or assigned; every right-hand side within the budget)."""
    assignments = [(sympy.sympify(s), sympy.sympify(e)) for s, e in assignments]
    inputs = [sympy.sympify(x) for x in inputs]
    outputs = [sympy.sympify(o) for o in outputs]
    wrt = list(inputs) if wrt is None else [sympy.sympify(x) for x in wrt]
    input_set = set(inputs)
    for x in wrt:
        if x not in input_set:
            raise ValueError(f"derivatives: wrt symbol {x} is not an input")
    defs = {}
    for s, e in assignments:
        if not isinstance(s, sympy.Symbol):
            raise ValueError(f"derivatives: assignment target {s!r} is not a Symbol")
        if s in defs or s in input_set:
            raise ValueError(f"derivatives: {s} assigned twice (or is an input): not SSA")
        budget.check(e)
        defs[s] = e
    for o in outputs:
        if o not in defs and o not in input_set:
            raise ValueError(f"derivatives: output {o} is neither an input nor assigned")
    return _Segment(assignments, inputs, outputs, wrt, defs)


def _with_real_twins(seg: _Segment):
    """``(seg with its symbols of unknown realness replaced by real twins, {twin: symbol} to map
    the results back, the names of every symbol of the segment)``."""
    every = set(seg.inputs) | set(seg.defs) | set(seg.outputs)
    for e in seg.defs.values():
        every |= e.free_symbols
    twins = _real_twins(every)
    back = {v: k for k, v in twins.items()}
    if twins:
        assignments = [(s.xreplace(twins), e.xreplace(twins)) for s, e in seg.assignments]
        seg = _Segment(assignments, [x.xreplace(twins) for x in seg.inputs],
                       [o.xreplace(twins) for o in seg.outputs],
                       [x.xreplace(twins) for x in seg.wrt], dict(assignments))
        every = {s.xreplace(twins) for s in every}
    return seg, back, {s.name for s in every}


def _live_and_active(seg: _Segment):
    """``(the assigned symbols the outputs need, in order; the active symbols: wrt and what
    depends on it)``."""
    defs = seg.defs
    needed, stack = set(), [o for o in seg.outputs if o in defs]
    while stack:
        s = stack.pop()
        if s in needed:
            continue
        needed.add(s)
        stack.extend(v for v in defs[s].free_symbols if v in defs and v not in needed)
    order = [s for s, _ in seg.assignments if s in needed]
    active = set(seg.wrt)
    for s in order:
        if defs[s].free_symbols & active:
            active.add(s)
    return order, active


def _reverse_sweeps(seg: _Segment, order, active, budget):
    """One reverse sweep per active output: ``(partials {(o, x): expr}, nonzero, tidied; the
    adjoints bound to symbols ``_adj<k>``; ops_before, the fine-grained estimate)``."""
    defs = seg.defs
    adj_bindings = []
    partials = {}
    n_adj = 0
    ops_before = count_ops([defs[s] for s in order])
    for o in seg.outputs:
        if o not in active:
            continue
        ops_before += sum(_fine_adjoint_ops(defs[s], active) for s in order)
        adj = {o: sympy.S.One}
        for s in reversed(order):
            if s not in adj:
                continue
            a = tidy(adj.pop(s), budget)
            if a == 0:
                continue
            e = defs[s]
            contribs = []
            for v in sorted((v for v in e.free_symbols if v in active), key=default_sort_key):
                d = _local_partial(s, e, v, budget)
                if d != 0:
                    contribs.append((v, d))
            if len(contribs) > 1 and not a.is_Atom:
                A = sympy.Symbol(f"_adj{n_adj}")
                n_adj += 1
                adj_bindings.append((A, a))
                a = A
            for v, d in contribs:
                term = a * d
                adj[v] = adj[v] + term if v in adj else term
                budget.check(adj[v])
        for x in seg.wrt:
            if x in adj:
                p = tidy(adj[x], budget)
                budget.check(p)
                if p != 0:
                    partials[(o, x)] = p
    return partials, adj_bindings, ops_before


def _live_bindings(bindings, targets):
    """The ``(symbol, expr)`` bindings the ``targets`` (expressions) need, in order."""
    bdef = dict(bindings)
    live, stack = set(), []
    for t in targets:
        stack.extend(t.free_symbols)
    while stack:
        s = stack.pop()
        if s in live or s not in bdef:
            continue
        live.add(s)
        stack.extend(bdef[s].free_symbols)
    return [(s, e) for s, e in bindings if s in live]


def _cse_sequence(bindings, pexprs, outputs, budget):
    """One CSE over the bindings' and the partials' expressions: ``(the ordered (symbol,
    expr) sequence, dependencies first; the reduced partials; every bound symbol)``."""
    exprs = [e for _, e in bindings] + list(pexprs)
    cse_gen = sympy.numbered_symbols("_cse")
    reps, reduced = sympy.cse(exprs, symbols=cse_gen, list=True)
    budget.check_time()
    nb = len(bindings)
    nodes, prefer = {}, {}
    for i, (s, _) in enumerate(bindings):
        nodes[s] = reduced[i]
        prefer[s] = (1, i)
    for i, (t, e) in enumerate(reps):
        nodes[t] = e
        prefer[t] = (0, i)
    reduced_partials = reduced[nb:]
    roots = [s for s, _ in bindings]
    for e in list(reduced_partials) + list(outputs):
        roots.extend(sorted((d for d in e.free_symbols if d in nodes), key=lambda d: prefer[d]))
    seq = [(n, nodes[n]) for n in _toposort(nodes, prefer, roots)]
    return seq, reduced_partials, set(nodes)


def _without_copies(seq, values, pvals, bound, user_syms):
    """``seq``, ``values``, ``pvals`` without trivial copies: a temporary that is exactly a
    user value takes the user's name, and a binding to an atom is substituted."""
    def subst_all(mapping):
        nonlocal seq, values, pvals
        seq = [(s, e.xreplace(mapping)) for s, e in seq]
        values = {k: v.xreplace(mapping) for k, v in values.items()}
        pvals = {k: v.xreplace(mapping) for k, v in pvals.items()}

    changed = True
    while changed:
        changed = False
        for i, (s, e) in enumerate(seq):
            if e.is_Symbol and e in bound and e not in user_syms and s in user_syms:
                # a temp that is exactly a user value: give it the user's name
                j = next(j for j, (t, _) in enumerate(seq) if t == e)
                seq[j] = (s, seq[j][1])
                del seq[i]
                subst_all({e: s})
                changed = True
                break
            if e.is_Atom:
                del seq[i]
                subst_all({s: e})
                changed = True
                break
    return seq, values, pvals


def _inline_lone_outputs(seq, values, pvals, outputs, user_syms):
    """Outputs used only as their own value: their definition inlined into ``values``
    (``seq`` and ``values`` are updated in place)."""
    uses = {}
    for s, e in seq:
        for d in e.free_symbols:
            uses[d] = uses.get(d, 0) + 1
    for e in pvals.values():
        for d in e.free_symbols:
            uses[d] = uses.get(d, 0) + 1
    for o in outputs:
        v = values[o]
        if v.is_Symbol and v in user_syms and uses.get(v, 0) == 0:
            idx = [i for i, (s, _) in enumerate(seq) if s == v]
            if idx:
                values[o] = seq[idx[0]][1]
                del seq[idx[0]]


def derivatives(assignments, inputs, outputs, budget=None, *, wrt=None, prefix="t",
                rewrite=True) -> LocalJacobian:
    """Values and partials d output / d input of an SSA DAG; see the module docstring."""
    budget = _as_budget(budget)
    seg, back, user_names = _with_real_twins(_checked(assignments, inputs, outputs, wrt, budget))
    outputs = seg.outputs
    order, active = _live_and_active(seg)
    partials, adj_bindings, ops_before = _reverse_sweeps(seg, order, active, budget)

    # the bindings the outputs and partials need; the stable rewrites -----------------------
    pkeys = list(partials)
    bindings = _live_bindings([(s, seg.defs[s]) for s in order] + adj_bindings,
                              list(outputs) + [partials[k] for k in pkeys])
    if rewrite:
        bindings = [(s, stable_rewrite(e, budget)) for s, e in bindings]
        for k in pkeys:
            partials[k] = stable_rewrite(partials[k], budget)
    budget.check([e for _, e in bindings] + list(partials.values()))

    # one CSE over everything, then tidying of its result ----------------------------------
    seq, pexprs, bound = _cse_sequence(bindings, [partials[k] for k in pkeys], outputs, budget)
    user_syms = set(seg.defs)
    seq, values, pvals = _without_copies(seq, {o: o for o in outputs}, dict(zip(pkeys, pexprs)),
                                         bound, user_syms)
    _inline_lone_outputs(seq, values, pvals, outputs, user_syms)

    # deterministic names for temporaries ---------------------------------------------------
    rename, k = {}, 0
    for s, _ in seq:
        if s not in user_syms:
            while f"{prefix}{k}" in user_names:
                k += 1
            rename[s] = sympy.Symbol(f"{prefix}{k}", real=True)
            k += 1
    rename.update(back)
    seq = [(s.xreplace(rename), e.xreplace(rename)) for s, e in seq]
    values = {o.xreplace(back): v.xreplace(rename) for o, v in values.items()}
    partials = {(o.xreplace(back), x.xreplace(back)): pvals[(o, x)].xreplace(rename)
                for (o, x) in pkeys}
    ops_after = count_ops([e for _, e in seq]) + count_ops(values) + count_ops(partials)
    return LocalJacobian(seq, values, partials, ops_before, ops_after)


def naive_derivative_ops(assignments, inputs, outputs, budget=None, *, wrt=None) -> int:
    """Ops of the fully inlined outputs plus their (non-CSE'd) derivatives.

    Raises BudgetExceeded when an inlined output or a derivative exceeds the budget (checked
    before every ``diff``, at O(max_ops) cost, so exponentially large trees do not hang it).
    """
    budget = _as_budget(budget)
    inputs = [sympy.sympify(x) for x in inputs]
    wrt = list(inputs) if wrt is None else [sympy.sympify(x) for x in wrt]
    inl = {}
    for s, e in assignments:
        # check each inlined value before it is built into the next one: constructing
        # expressions over a huge tree can itself be slow (SymPy evaluates on construction)
        inl[sympy.sympify(s)] = sympy.sympify(e).xreplace(inl)
        budget.check(inl[sympy.sympify(s)])
    total = 0
    for o in outputs:
        o = sympy.sympify(o)
        v = inl.get(o, o)
        total += budget.check(v)
        for x in wrt:
            d = sympy.diff(v, x)
            total += budget.check(d)
            budget.check(total)
    return total


def local_step_jacobian(carried, body_assignments, params, budget=None, *, prefix="t",
                        rewrite=True) -> LocalJacobian:
    """Per-trip local Jacobian dF/dx_carried, dF/dparams of a loop body without a closed form.

    ``carried``: ordered dict {x_old: x_new} (x_new assigned in ``body_assignments``, or x_old
    itself when the value is not updated); ``params``: loop-invariant inputs to differentiate.
    Partials are keyed ``(x_new, x_old)`` and ``(x_new, param)``.
    """
    inputs = list(carried) + [p for p in params if p not in carried]
    outputs = list(carried.values())
    return derivatives(body_assignments, inputs, outputs, budget, prefix=prefix, rewrite=rewrite)


def stored_per_trip(jac: LocalJacobian, loop_varying) -> list:
    """Loop-varying symbols (carried values, the loop index...) the partials need, per trip.

    Follows the partials through ``jac.replacements`` to the symbols they are computed from and
    returns those in ``loop_varying``, sorted by name: what the forward sweep must store per
    trip (or recompute) for the coarse adjoint step.
    """
    loop_varying = set(loop_varying)
    rdef = dict(jac.replacements)
    seen, stack, out = set(), [], set()
    for e in jac.partials.values():
        stack.extend(e.free_symbols)
    while stack:
        s = stack.pop()
        if s in seen:
            continue
        seen.add(s)
        if s in loop_varying:
            out.add(s)
        if s in rdef:
            stack.extend(rdef[s].free_symbols)
    return sorted(out, key=default_sort_key)
