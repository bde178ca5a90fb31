"""Lifting a segment of interest from the IR into SymPy, and differentiating it there.

Requires: a planned ``Segment`` (``coarsen.analysis.segments``) of a typed function, and
``coarsen.symbolic``.
Guarantees: ``lift(segment)`` builds the segment's SSA DAG as SymPy assignments: each
assignment of a variable gets a fresh symbol ``_s<k>_<name><n>`` (values used more than once stay
symbols, never inlined), branches merge through the phi-function ``gamma(c, a, b)``, inputs are
symbols named as the variables themselves (their values on entry; passengers reading the same
array element share the first one's symbol, ``same_element_reads``), and booleans stay inside
the conditions of the ``gamma``s.  ``differentiate_segment`` then asks ``coarsen.symbolic`` for the
local Jacobian (reverse accumulation over the DAG, CSE, stable rewrites) within a size guard and
a time budget, and returns a ``LiftedSegment`` (``coarsen.analysis.plans``); on
``BudgetExceeded`` (or any failure of the symbolic stage) it returns a ``Fallback`` with the
reason, and the caller falls back to fine-grained AD for that segment.  ``closed_form_segment``
returns a ``ClosedFormLoop`` or a ``Fallback``; its powers of the trip count are guarded by
``coarsen.ad.power_guard`` (the loop where they overflow, and where they underflow unless
that provably leaves the value and partials as they are).  Compiler temporaries are told by ``temps``
(the function's ``fn.temps``), never by their spelling.
"""
from __future__ import annotations

import math
from dataclasses import replace

import sympy

from ..analysis.plans import ClosedFormLoop, Fallback, LiftedSegment, VJPPath
from ..ir.nodes import Assign, Const, If, Scalar, Var, uses, walk
from ..ir.primitives import REGISTRY
from .. import symbolic as S
from .float_algebra import FloatAlgebra, fold_float_constants
from .power_guard import power_guards


def _const(v):
    if isinstance(v, bool):
        return sympy.true if v else sympy.false
    if isinstance(v, int):
        return sympy.Integer(v)
    if math.isfinite(v) and float(v).is_integer() and abs(v) < 2 ** 53:
        # exact small integers: SymPy simplifies 1 - p, 2*x... (true division keeps Python floats)
        return sympy.Integer(int(v))
    if not math.isfinite(v):
        raise _Unliftable("non-finite constant")
    # float64's 53 bits: constants that SymPy folds together round as float64 rounds them
    # (0.1*10 is 1.0, not 1.0000000000000000555 at 17 digits)
    return sympy.Float(v, precision=53)


class _Unliftable(Exception):
    pass


def _fallback_reason(exc):
    """Why the symbolic stage gave up on a segment (it then falls back to fine-grained AD)."""
    if isinstance(exc, S.BudgetExceeded):
        return f"symbolic budget exceeded ({exc.reason})"
    if isinstance(exc, _Unliftable):
        return f"cannot lift {exc}"
    return f"symbolic stage failed ({type(exc).__name__}: {str(exc)[:80]})"


class Lifter:
    def __init__(self, seg, types):
        self.seg = seg
        self.types = types
        self.assignments = []
        self.inputs = {}
        self.counts = {}
        self.aliases = {}       # input name -> the input whose symbol it shares (same element)
        self.algebra = FloatAlgebra()   # what SymPy must not fold (coarsen.ad.float_algebra)

    def symbol_for(self, name):
        t = self.types[name]
        if t.kind == "f64":
            return sympy.Symbol(name, real=True)
        if t.kind == "i64":
            return sympy.Symbol(name, integer=True)
        return sympy.Symbol(name)

    def fresh(self, name):
        k = self.counts.get(name, 0) + 1
        self.counts[name] = k
        t = self.types[name]
        return sympy.Symbol(f"_s{self.seg.index}_{name}_{k}",
                            **({"real": True} if t.kind == "f64" else {"integer": True}))

    def val(self, operand, env):
        if isinstance(operand, Const):
            return _const(operand.value)
        if operand.name in env:
            return env[operand.name]
        name = self.aliases.get(operand.name, operand.name)
        if name not in self.inputs:
            self.inputs[name] = self.symbol_for(name)
        return self.inputs[name]

    def expr(self, s, env):
        """The SymPy expression of ``s`` (its primitive's SymPy counterpart)."""
        prim = REGISTRY.get(s.op)
        if prim is None or prim.sympy is None:
            raise _Unliftable(s.op)
        a = [self.val(x, env) for x in s.args]
        folded = fold_float_constants(s.op, a)
        if folded is not None:
            return _const(folded)
        if self.types[s.target].kind == "f64":          # integer algebra is exact
            why = self.algebra.problem(s.op, a, s.loc.lineno)
            if why:
                raise _Unliftable(why)
        if not prim.keeps_booleans:
            # booleans in arithmetic count as 0 and 1
            a = [S.gamma(x, sympy.Integer(1), sympy.Integer(0)) if isinstance(x, sympy.logic.boolalg.Boolean)
                 and not isinstance(x, sympy.Symbol) else x for x in a]
        return prim.sympy(*a)

    inline = frozenset()

    def block(self, stmts, env):
        for s in stmts:
            if isinstance(s, Assign):
                e = self.expr(s, env)
                if self.types[s.target].kind == "bool" or REGISTRY[s.op].transparent \
                        or isinstance(e, (sympy.Symbol, sympy.Number)) or s.target in self.inline:
                    env[s.target] = e        # booleans and copies stay inline
                else:
                    sym = self.fresh(s.target)
                    self.algebra.record(sym, e)
                    self.assignments.append((sym, e))
                    env[s.target] = sym
            elif isinstance(s, If):
                c = self.val(s.cond, env)
                then = self.block(s.body, dict(env))
                other = self.block(s.orelse, dict(env))
                for v in sorted(set(then) | set(other)):
                    a = then.get(v) if v in then else self.val(Var(v), env)
                    b = other.get(v) if v in other else self.val(Var(v), env)
                    if a is b or a == b:
                        env[v] = a
                        continue
                    if self.types[v].kind == "bool":
                        env[v] = sympy.Or(sympy.And(c, a), sympy.And(sympy.Not(c), b))
                        continue
                    sym = self.fresh(v)
                    self.assignments.append((sym, S.gamma(c, a, b)))
                    env[v] = sym
            else:
                raise _Unliftable(type(s).__name__)
        return env


MAX_PATHS = 4


class _TooManyPaths(Exception):
    pass


def _paths(stmts):
    """The straight-line paths through a lifted statement list: (decisions, statements)."""
    result = [((), [])]
    for s in stmts:
        if isinstance(s, Assign):
            for _, st in result:
                st.append(s)
            continue
        new = []
        for dec, st in result:
            for flag, branch in ((True, s.body), (False, s.orelse)):
                for dec2, st2 in _paths(branch):
                    new.append((dec + ((s.cond, flag),) + dec2, st + st2))
        result = new
        if len(result) > MAX_PATHS:
            raise _TooManyPaths()
    return result


def differentiate_segment(seg, types, active, budget, temps=frozenset()):
    """Lift ``seg`` and compute its local Jacobian on each path through its branches.

    A segment with ``if`` statements is differentiated once per path (at most ``MAX_PATHS``),
    each path a straight-line DAG: the reverse sweep chooses the path by the recorded
    conditions.  (Differentiating the merged ``gamma`` form instead would let CSE evaluate a
    branch's subexpressions, say ``sqrt(x)``, on the path where the program never does.)
    Returns a ``LiftedSegment`` with ``paths``: [(decisions, partials, jac)], or a
    ``Fallback``."""
    lifted = [s for s in seg.stmts if not any(s is p for p in seg.passengers)]
    try:
        paths = _paths(lifted)
    except _TooManyPaths:
        return Fallback(f"more than {MAX_PATHS} paths through its branches")
    out, vjps, dags = [], [], []
    formula = None
    total_before = total_after = 0
    for decisions, straight in paths:
        path = _differentiate_path(seg, straight, types, active, budget, temps)
        if isinstance(path, Fallback):
            return path
        partials, jac, path_formula, vjp, dag = path
        out.append((decisions, partials, jac))
        vjps.append(vjp)
        dags.append(dag)
        total_before = max(total_before, jac.ops_before)
        total_after = max(total_after, jac.ops_after)
        if formula is None or len(paths) == 1:
            formula = path_formula
    if len(paths) > 1:
        formula = f"{len(paths)} paths through its branches"
    merged = {}
    for _, partials, _ in out:
        merged.update(partials)
    jac = S.LocalJacobian(replacements=[], values={}, partials={}, ops_before=total_before,
                           ops_after=total_after)
    if any(v is not None for v in vjps):
        # one product per path (a path with a single output gets the product of its partials)
        vjp_paths = [v if v is not None else _vjp_of_partials(
            d, {k: e for k, e in p.items() if types[k[0]].kind == "f64"}, j, seg.index)
            for v, (d, p, j) in zip(vjps, out)]
        vjp_paths = [replace(v, decisions=d) for v, (d, _, _) in zip(vjp_paths, out)]
    else:
        vjp_paths = []
    return LiftedSegment(partials=merged, jac=jac, paths=out, formula=formula,
                         vjp_paths=vjp_paths, dags=dags)


def _seed(index, k):
    return sympy.Symbol(f"_s{index}_g{k}", real=True)


def _vjp_of_partials(decisions, partials, jac, index):
    """The product of a path's (single-output) partials with its output's adjoint."""
    seeds, cot = {}, {}
    for (o, i), e in partials.items():
        if o not in seeds:
            seeds[o] = _seed(index, len(seeds))
        cot[i] = cot.get(i, 0) + sympy.Symbol(seeds[o].name, real=True) * e
    return VJPPath(decisions, cot, {o: s.name for o, s in seeds.items()}, jac)


def _single_use_temps(seg, lifted, temps):
    """Compiler temporaries used once inside the segment and nowhere else: they are inlined
    into their one use (shared values stay symbols), so SymPy sees whole formulas such as the
    logistic sigmoid ``1/(1 + exp(-z))``."""
    counts = {}
    for st in walk(lifted):
        for u in uses(st):
            if isinstance(u, Var):
                counts[u.name] = counts.get(u.name, 0) + 1
    defs = {}
    for st in walk(lifted):
        if isinstance(st, Assign):
            defs[st.target] = defs.get(st.target, 0) + 1
    return frozenset(v for v, n in counts.items() if n == 1 and defs.get(v) == 1 and v in temps
                     and v not in seg.outputs)


def _read_key(st):
    """An element read's primitive and operands, constants compared with their types."""
    def key(x):
        return ("var", x.name) if isinstance(x, Var) else ("const", type(x.value), x.value)
    return st.op, tuple(key(x) for x in st.args), tuple(key(x) for x in st.index)


def same_element_reads(seg, types, active):
    """Passengers that read the same array element as an earlier passenger: {name: earlier}.

    Two element reads ``a = x[i]`` and ``b = x[i]`` (same primitive, array and index operands,
    each target scalar ``f64``, assigned once among the passengers and not an output of the
    segment, both active or both not) hold the same value when no passenger between them assigns the array or an index
    variable (passengers are assignments, never stores, and run before the lifted
    statements, which is when the lifter's input symbols take their values).  Lifting them as
    one symbol lets SymPy cancel ``p*a - p*b``; the forward code is unchanged, and the
    derivative with respect to ``b`` is then the zero the step writes for an unset input.

    The earlier read must be one the lifted statements read: a passenger read only after the
    segment (``a[0]`` in ``s = a[0] * h(a, (a[0] + a[0]) * a[1])``, where ``h`` updates ``a``
    in place, so the reads ride before the update) may be a set-once temporary, whose adjoint
    its one use *assigns*; the step's partial with respect to it would then overwrite that
    use's contribution (a fuzz program got half of ``d/da[0]``)."""
    defs = {}
    for st in seg.passengers:
        defs[st.target] = defs.get(st.target, 0) + 1
    lifted = [x for x in seg.stmts if not any(x is p for p in seg.passengers)]
    run_reads = {u.name for st in walk(lifted) for u in uses(st) if isinstance(u, Var)}
    aliases = {}
    seen = []           # (position, statement) of the reads so far that may be shared
    for k, st in enumerate(seg.passengers):
        prim = REGISTRY.get(st.op)
        if (prim is None or not prim.indexing or st.attrs or defs[st.target] != 1
                or st.target in seg.outputs
                or getattr(types.get(st.target), "kind", None) != "f64"
                or not isinstance(types.get(st.target), Scalar)
                or not all(isinstance(x, (Var, Const)) for x in st.index)
                or not all(isinstance(x, (Var, Const)) for x in st.args)):
            continue
        for j, first in seen:
            if _read_key(first) != _read_key(st) or first.target not in run_reads:
                continue
            if (first.target in active) != (st.target in active):
                continue
            read = {x.name for x in st.args + st.index if isinstance(x, Var)}
            if any(p.target in read for p in seg.passengers[j + 1:k]):
                continue
            aliases[st.target] = aliases.get(first.target, first.target)
            break
        else:
            seen.append((k, st))
    return aliases


def _differentiate_path(seg, lifted, types, active, budget, temps):
    """(partials, local Jacobian, formula) of one straight-line path, or a ``Fallback``."""
    lifter = Lifter(seg, types)
    lifter.inline = _single_use_temps(seg, lifted, temps)
    lifter.aliases = same_element_reads(seg, types, active)
    try:
        env = lifter.block(lifted, {})
        why = _variable_power(lifter.assignments)
        if why:
            return Fallback(why)
        # an int's power to an int exponent in floats, as the statement computes it (Python's
        # 2 ** -3 is 0.125; printed as is, a partial took Numba's int power: 0, or wrapped)
        lifter.assignments = [(sym, _float_powers(e, types)) for sym, e in lifter.assignments]
        outs = {}
        for o in seg.outputs:
            outs[o] = _float_powers(env.get(o, lifter.val(Var(o), env)), types)
        inputs = list(lifter.inputs.values())
        wrt = [sym for name, sym in lifter.inputs.items() if name in active]
        out_syms = []
        bind = []
        for o, e in outs.items():
            if isinstance(e, sympy.Symbol) and e not in out_syms:
                out_syms.append(e)
            else:   # a constant, a boolean, or a value two outputs share (y = x): bind it
                sym = sympy.Symbol(f"_s{seg.index}_{o}_out", real=True)
                bind.append((sym, e))
                out_syms.append(sym)
        jac = S.derivatives(lifter.assignments + bind, inputs, out_syms, budget, wrt=wrt,
                            prefix=f"_s{seg.index}_t")
    except Exception as exc:  # a SymPy failure must never become a wrong gradient
        return Fallback(_fallback_reason(exc))
    if _non_finite(list(jac.partials.values()) + [e for _, e in jac.replacements]):
        return Fallback("the symbolic derivative has a non-finite constant")
    out_names = dict(zip(out_syms, outs.keys()))
    in_names = {sym: name for name, sym in lifter.inputs.items()}
    partials = {}
    for (o, i), e in jac.partials.items():
        # (a boolean output has no adjoint: SymPy's "partials" of a comparison are
        # unevaluated Derivatives, never printed)
        if types[out_names[o]].kind == "f64":
            partials[(out_names[o], in_names[i])] = e
    # (a boolean output has no adjoint: SymPy's "partials" of a comparison are not derivatives)
    differentiated = [o for o in out_syms if any(k[0] == o for k in jac.partials)
                      and types[out_names[o]].kind == "f64"]
    vjp = None
    if len(differentiated) > 1:
        # one reverse sweep with the outputs' adjoints as symbols (seeds): the derivative of
        # sum(seed_o * o), where the Jacobian takes one sweep per output
        try:
            seeds = {o: _seed(seg.index, k) for k, o in enumerate(differentiated)}
            prod = sympy.Symbol(f"_s{seg.index}_vjp", real=True)
            vjac = S.derivatives(lifter.assignments + bind + [(prod, sympy.Add(*[s * o for o, s in seeds.items()]))],
                                 inputs, [prod], budget, wrt=wrt, prefix=f"_s{seg.index}_v")
        except Exception as exc:  # a SymPy failure must never become a wrong gradient
            return Fallback(_fallback_reason(exc))
        if _non_finite(list(vjac.partials.values()) + [e for _, e in vjac.replacements]):
            return Fallback("the symbolic derivative has a non-finite constant")
        vjp = VJPPath((), {in_names[i]: e for (_, i), e in vjac.partials.items()},
                      {out_names[o]: s.name for o, s in seeds.items()}, vjac)
    counts = {}
    for st in lifted:
        if isinstance(st, Assign):
            counts[st.target] = counts.get(st.target, 0) + 1
    carried = [sym for name, sym in lifter.inputs.items() if name in counts]
    # values a variable holds at the segment's end (assigned once on this path): a reverse
    # step may read the variable there instead of recomputing the symbol (the cut strategy)
    targets = {sym for sym, _ in lifter.assignments}
    # (not an input: the step reads an input's entry value under the same name)
    finals = {env[v].name: v for v, k in counts.items()
              if k == 1 and env.get(v) in targets and types[v].kind == "f64"
              and v not in lifter.inputs}
    # values inlined into the DAG (single-use temporaries) that a variable holds at the
    # segment's end: the forward sweep reads them instead of recomputing them (preaccumulate)
    held = {v: env[v] for v, k in counts.items()
            if k == 1 and types[v].kind == "f64" and v not in lifter.inputs
            and isinstance(env.get(v), sympy.Expr) and env[v] not in targets
            and not isinstance(env[v], (sympy.Symbol, sympy.Number))}
    dag = (list(lifter.assignments + bind), list(wrt), carried, finals, held)
    return partials, jac, _formula(outs, lifter.assignments), vjp, dag


def _variable_power(assignments):
    """Why a path with a power of a variable base to a variable exponent stays fine-grained,
    or None: SymPy differentiates ``x**k`` as ``k*x**k/x`` (a nan at ``x = 0``, even for
    ``k = 1``) and ``log(x)*x**k`` (``-inf * 0``); the fine rules guard both (``pow``'s
    partials in ``coarsen.ir.primitives.elementwise``)."""
    for _, e in assignments:
        for node in sympy.preorder_traversal(e):
            if isinstance(node, sympy.Pow) and not node.exp.is_number and \
                    not node.base.is_number:
                return "a power with a variable exponent: its partials at base 0 are guarded " \
                       "by the fine rule"
    return None


def _formula(outs, assignments):
    """Each output as a formula of the segment's inputs, when that stays short."""
    parts = []
    for o, e in outs.items():
        try:
            # a size limit only: the text (shown in the report and cached with the code) must
            # not depend on the machine's load
            full = _inline(assignments, e, S.Budget(max_ops=60, seconds=math.inf))
            text = S.to_python(full)
        except Exception:  # BudgetExceeded or a printing failure: no formula
            text = "..."
        parts.append(f"{o} = {text}")
    return "; ".join(parts)


def _inline(assignments, expr, budget):
    """``expr`` with the assignments substituted (for small loop bodies only)."""
    for sym, e in reversed(assignments):
        if sym in expr.free_symbols:
            expr = expr.xreplace({sym: e})
            budget.check(expr)
    return expr


def closed_form_segment(loop, seg, types, active, budget, temps=frozenset(), live_after=None):
    """Try the phi-calculus on ``for k in range(...)`` whose body is the one segment ``seg``.

    Returns a ``ClosedFormLoop`` (``finals``: exact final values of the loop's carried
    variables in terms of their entry values, the bounds and loop invariants, with
    ``partials`` of those finals), or a ``Fallback`` saying why not.  ``live_after`` (the
    variables read outside the loop; None: all of them may be): a variable the loop carries
    that nothing outside reads, and that no carried value kept reads at its next trip, is
    dead and left out.  A variable assigned only in a branch of the body (``if c: y = e``) is
    carried through its merge; left in, the closed form would read its entry value, which
    may not exist (``y`` assigned nowhere before the loop)."""
    if seg.passengers:
        return Fallback("the loop body reads arrays or computes indices")
    lifter = Lifter(seg, types)
    try:
        env = lifter.block(seg.stmts, {})
        carried = {}
        # carried: the variables the loop leaves to later code or to its next trip; compiler
        # temporaries live within one trip and are never carried
        evolving = [v for v in env if (v in seg.outputs or v in lifter.inputs) and v not in temps]
        updates = {}
        for v in evolving:
            e = env.get(v)
            if e is not None:
                updates[v] = _inline(lifter.assignments, e, budget)
        if live_after is not None:
            updates = _live_updates(updates, live_after, lifter.inputs)
        for v, e in updates.items():
            if types[v].kind == "bool":
                return Fallback(f"{v} is a boolean carried by the loop")
            carried[lifter.symbol_for(v)] = e
        if not carried:
            return Fallback("nothing carried")

        def bound(op):
            if isinstance(op, Const):
                return sympy.Integer(op.value)
            return sympy.Symbol(op.name, integer=True)

        start, stop, step = bound(loop.start), bound(loop.stop), bound(loop.step)
        cf = S.closed_form_loop(carried, sympy.Symbol(loop.var, integer=True), start, stop, step,
                                budget, avoid=frozenset(types))
        if cf is None:
            return Fallback("no closed form: one coarse step per trip")
        cf = replace(cf, finals={v: _floats(_merge_powers(e, cf.trip_count), cf.trip_count, v, types)
                                 for v, e in cf.finals.items()},
                     finals_n={v: _floats(_merge_powers(e, cf.n_symbol), cf.n_symbol, v, types)
                               for v, e in cf.finals_n.items()})
        finals = {}
        assignments = []
        outs = []
        for sym, e in cf.finals.items():
            fin = sympy.Symbol(f"_s{seg.index}_{sym.name}_final", real=True)
            assignments.append((fin, e))
            outs.append(fin)
            finals[sym.name] = e
        inputs = {}
        for e in cf.finals.values():
            for fs in sorted(e.free_symbols, key=lambda s: s.name):     # not the hash seed's order
                if fs.name in types and fs.name != loop.var:
                    inputs[fs.name] = fs
        wrt = [sym for name, sym in inputs.items() if name in active]
        # Partials of the closed form by direct differentiation; a plain CSE would hoist
        # divisions out of the guarded branches (a == 1) and evaluate them unconditionally.
        partial_exprs = {}
        singular = []
        for fin, e in zip(outs, cf.finals.values()):
            for w in wrt:
                d = sympy.diff(e, w)
                budget.check(d)
                if d != 0:
                    why = _singular_points(d, set(wrt), singular)
                    if why:
                        return Fallback(f"closed form kept out: its derivative {why}")
                    partial_exprs[(fin, w)] = d
        read = {fin for fin, sym in zip(outs, cf.finals) if live_after is None or sym.name in live_after}
        strict, underflows = power_guards(
            cf.finals.values(), partial_exprs.values(), cf.trip_count,
            read=[e for fin, e in zip(outs, cf.finals.values()) if fin in read] +
            [d for (fin, _), d in partial_exprs.items() if fin in read])
        singular += [(c, False) for c in strict]
        for e in cf.finals.values():
            _value_singular_points(e, set(inputs.values()), singular)
        if (singular or underflows is not None) and \
                isinstance(sympy.Eq(cf.trip_count, 0), sympy.Eq):   # no trips, no 0*nan
            singular.append((sympy.Eq(cf.trip_count, 0), False))
        # shared subexpressions only where evaluating them ahead is safe (guarded_cse)
        keys = list(partial_exprs)
        reps, reduced = S.guarded_cse([partial_exprs[k] for k in keys], f"_s{seg.index}_c")
        partial_exprs = dict(zip(keys, reduced))
        jac = S.LocalJacobian(replacements=reps, values={}, partials=partial_exprs,
                              ops_before=0, ops_after=S.count_ops([e for _, e in reps] + reduced))
    except Exception as exc:  # a SymPy failure must never become a wrong gradient
        return Fallback(_fallback_reason(exc))
    if _non_finite(list(cf.finals.values()) + list(partial_exprs.values())):
        return Fallback("the closed form has a non-finite constant")
    why = _validate_closed_form(carried, cf, loop, types)
    if why:
        return Fallback(f"closed form failed its numerical check ({why})")
    out_names = {fin: sym.name for fin, sym in zip(outs, cf.finals)}
    partials = {}
    for (o, i), e in jac.partials.items():
        partials[(out_names[o], i.name)] = e
    singular = [_near(c, cf.trip_count) if widen else c for c, widen in
                sorted(set(singular), key=lambda cw: sympy.default_sort_key(cw[0]))]
    if underflows is not None:      # evaluated last: they divide by what the others rule out
        singular = [S.OrElse(sympy.Or(*singular), underflows)]
    return ClosedFormLoop(partials=partials, jac=jac, carried=[sym.name for sym in cf.finals],
                          finals=finals, finals_n={s.name: e for s, e in cf.finals_n.items()},
                          n_symbol=cf.n_symbol, trip_count=cf.trip_count, singular=singular,
                          formula=cf.description)


def _singular_points(expr, active, out):
    """Collect the points where differentiating this closed form term by term is not exact;
    returns a reason when that cannot be handled.

    A guard ``a == c`` on a differentiated variable has a zero derivative on the guarded point
    (wrong for a removable singularity such as ``(a**n - 1)/(a - 1)`` at ``a = 1``); a symbolic
    power of a differentiated base breaks at base 0.  Such points are appended to ``out`` as
    ``(Eq, widen)``: at run time the gradient takes the loop (one coarse step per trip) when
    one holds, and the closed form everywhere else, so it is exact on the whole domain. A
    guard's point is widened to its neighbourhood (``_near``: the closed form cancels there);
    a zero base is not (``x / p`` near ``p = 0`` cancels nothing, and ``|p| <= 1/n`` is no
    neighbourhood of anything whatever the units of ``p``)."""
    for node in sympy.preorder_traversal(expr):
        if isinstance(node, sympy.Piecewise) or S.is_branch_phi(node):
            conds = [c for _, c in node.args] if isinstance(node, sympy.Piecewise) else [node.args[0]]
            for c in conds:
                if isinstance(c, bool) or not (getattr(c, "free_symbols", set()) & active):
                    continue
                if isinstance(c, sympy.Eq):
                    out.append((c, True))
                elif c == sympy.true:
                    continue
                else:
                    return "has a guard on a differentiated variable that is not a single point"
        if isinstance(node, sympy.Pow):
            base, e = node.args
            if base.free_symbols & active and (e.free_symbols or (e.is_number and e < 0)):
                out.append((sympy.Eq(base, 0), False))
    return None


def _value_singular_points(expr, inputs, out):
    """Append ``(Eq, True)`` to ``out`` for each single-point guard of a ``Piecewise`` in a
    closed form's value on any of its inputs, differentiated or not: near ``r = 1`` the value
    ``(r**n - 1)/(r - 1)`` itself cancels (``s = s*r + c``, 10 trips, ``r = 1 + 1e-9``, ``r``
    not differentiated: the value was off by 3.4e-9 relative), so the loop runs in the
    neighbourhood (``_near``) whatever ``wrt`` is."""
    for node in sympy.preorder_traversal(expr):
        if isinstance(node, sympy.Piecewise):
            for _, c in node.args:
                if isinstance(c, sympy.Eq) and c.free_symbols & inputs:
                    out.append((c, True))


def _merge_powers(expr, trips):
    """``expr`` with the powers of different bases to the trip count in one product merged
    into one power: ``0.5**(n - 1) * 2.0**n`` becomes ``2.0 * 1.0**n``, and
    ``0.5**(n - 1) * (2.0*r)**n`` becomes ``2.0 * (1.0*r)**n`` (exact for an integer ``n``).

    The closed form of ``s = a*s + f(k)`` is ``a**n * s + a**(n - 1) * sum(a**-k f(k))``: its
    powers grow and shrink together, and ``2.0**n`` overflowed where the loop's values are
    moderate (``s = 0.5*s + x*k`` gave nan from n = 1015; found by a probe). Applied when
    powers of two or more bases to the trip count appear; the sum is expanded (one level, no
    powers of sums) and, under a ``Piecewise``, folded into its branches first."""
    def n_power(node):
        return isinstance(node, sympy.Pow) and node.exp.has(trips)

    if len({p.base for p in expr.atoms(sympy.Pow) if n_power(p)}) < 2:
        return expr

    def split(p):
        """``(b**c, b**a)`` with ``p = b**c * (b**a)**n`` for an integer ``a``, or None."""
        e = sympy.expand(p.exp)
        a = e.coeff(trips)
        c = sympy.expand(e - a * trips)
        if not a.is_Integer or a == 0 or c.has(trips):
            return None
        return p.base ** c, p.base ** a

    def term(t):
        rest, bases = [], []
        for f in sympy.Mul.make_args(t):
            parts = split(f) if n_power(f) else None
            if parts is None:
                rest.append(f)
            else:
                rest.append(parts[0])
                bases.append(parts[1])
        if len(bases) < 2:
            return t
        return sympy.Mul(*rest) * sympy.Pow(sympy.Mul(*bases), trips)

    def one(e):
        e = sympy.expand(e, power_exp=False, mul=True, multinomial=False, log=False, power_base=False)
        return sympy.Add(*[term(t) for t in sympy.Add.make_args(e)])

    folded = sympy.piecewise_fold(expr)
    if isinstance(folded, sympy.Piecewise):
        return sympy.Piecewise(*[(one(b), c) for b, c in folded.args])
    return one(folded)


def _float_powers(expr, types):
    """``expr`` with each power of an integer-valued base to a symbolic exponent (``2**n``,
    ``k**n`` for an int ``k``) taken in floats (``2.0**n``, ``(1.0*k)**n``).

    The loop computes ``p *= 2`` in floats; its closed form printed ``2 ** _n`` is an int64
    power in Numba, which wraps around (``p *= 2`` over 70 trips gave -0.7 for 8.3e20), and a
    big integer in Python."""
    def int_valued(b):
        if b.is_Integer:
            return True
        syms = b.free_symbols
        return bool(syms) and b.is_polynomial() and \
            all(a.is_Integer for a in b.atoms(sympy.Number)) and \
            all(s.is_integer or getattr(types.get(s.name), "kind", None) in ("i64", "bool")
                for s in syms)

    def fix(node):
        if isinstance(node, sympy.Pow) and not node.exp.is_number and int_valued(node.base):
            base = sympy.Float(int(node.base)) if node.base.is_Integer else \
                sympy.Float(1.0) * node.base
            return sympy.Pow(base, node.exp)
        return node

    return expr.replace(lambda e: isinstance(e, sympy.Pow), fix)


def _floats(expr, trips, v, types):
    """``_float_powers`` of ``v``'s final value; for a float ``v``, its integers in floats too
    (``S.in_floats``: int64 ``n*n*n*r**n`` wrapped at 2**63 where the loop's are floats)."""
    expr = _float_powers(expr, types)
    if types[v.name].kind != "f64":
        return expr
    return S.in_floats(expr, trips, lambda s: s.is_integer or
                       getattr(types.get(s.name), "kind", None) == "i64")


def _near(point, trips):
    """The neighbourhood of a singular point ``Eq(a, b)`` where the loop runs instead of the
    closed form: ``|a - b| * max(1, n) <= 1`` for ``n`` trips.

    Requires: ``point`` an ``Eq`` of ``_singular_points`` and ``trips`` the loop's trip count.
    Guarantees: outside it the closed form keeps its digits.  At a removable singularity such
    as ``(q**n - 1)/(q - 1)`` at ``q = 1``, ``q**n - 1`` cancels: with ``x = n |q - 1|`` the
    closed form's relative error is about ``eps / x`` and its k-th derivative's ``eps / x**(k + 1)``
    (at ``q = 1 + 1e-9``, ``n = 10``, a derivative wrong by half).  Within the neighbourhood
    the loop, exact as the program is, runs; for ``x >= 1`` the cancellation costs a few ulps.
    The exact point ``a == b`` (a zero derivative on a guarded branch, a power of a zero base)
    is inside it.  A point SymPy decided already (``true``, ``false``) is kept as it is."""
    if not isinstance(point, sympy.Eq):
        return point
    a, b = point.args
    return sympy.Le(sympy.Abs(a - b) * sympy.Max(1, trips), 1)


def _non_finite(exprs):
    bad = (sympy.zoo, sympy.nan, sympy.oo, -sympy.oo)
    return any(e.has(*bad) for e in exprs)


#: the working precision of ``_validate_closed_form`` (decimal digits)
_DIGITS = 30


def _live_updates(updates, live_after, inputs):
    """``updates`` (carried variable -> its value after one trip, in the entry values'
    symbols ``inputs``) without the dead ones: those kept are the variables read after the
    loop and, again and again, those whose entry values a kept update reads."""
    back = {sym: name for name, sym in inputs.items()}
    keep = {v for v in updates if v in live_after}
    todo = sorted(keep)
    while todo:
        for sym in updates[todo.pop()].free_symbols:
            name = back.get(sym)
            if name in updates and name not in keep:
                keep.add(name)
                todo.append(name)
    return {v: e for v, e in updates.items() if v in keep}


def _validate_closed_form(carried, cf, loop, types):
    """Check the closed form against running the recurrence, at a few random points and trip
    counts (0 to 4, several starts and steps): a guard against any slip in the symbolic stage."""
    import random
    rnd = random.Random(1234)
    free = set()
    for e in list(carried.values()) + list(cf.finals.values()):
        free |= e.free_symbols
    k = sympy.Symbol(loop.var, integer=True)
    bound_syms = {}
    for op, name in ((loop.start, "start"), (loop.stop, "stop"), (loop.step, "step")):
        if isinstance(op, Var):
            bound_syms[name] = sympy.Symbol(op.name, integer=True)
    for trial in range(6):
        vals = {}
        for sym in free:
            if sym == k or sym in bound_syms.values():
                continue
            # floats at 30 digits: the recurrence's state stays one number per variable (exact
            # rationals grow into nested expressions whose evaluation took seconds)
            vals[sym] = sympy.Float(sympy.Rational(rnd.randint(-9, 9), rnd.randint(1, 5)), _DIGITS) \
                if sym.is_integer is not True else sympy.Integer(rnd.randint(-3, 6))
        start = loop.start.value if isinstance(loop.start, Const) else rnd.randint(-3, 3)
        step = loop.step.value if isinstance(loop.step, Const) else rnd.choice([1, 2, 3, -1, -2])
        trips = trial % 5
        stop = loop.stop.value if isinstance(loop.stop, Const) else start + step * trips
        if "start" in bound_syms:
            vals[bound_syms["start"]] = sympy.Integer(start)
        if "stop" in bound_syms:
            vals[bound_syms["stop"]] = sympy.Integer(stop)
        if "step" in bound_syms:
            vals[bound_syms["step"]] = sympy.Integer(step)
        state = {x: vals.get(x, sympy.Integer(0)) for x in carried}
        for x in carried:
            vals.setdefault(x, state[x])
        state = {x: vals[x] for x in carried}
        for kv in range(start, stop, step):
            env = dict(vals)
            env.update(state)
            env[k] = sympy.Integer(kv)
            state = {x: e.xreplace(env) for x, e in carried.items()}
        for x, fin in cf.finals.items():
            got = fin.xreplace(vals)
            try:
                diff = abs(complex(sympy.N(got - state[x], _DIGITS)))
                scale = max(1.0, abs(complex(sympy.N(state[x], _DIGITS))))
            except (TypeError, ValueError):
                return f"{x} does not evaluate"
            if not diff <= 1e-12 * scale:
                return f"{x} differs after {len(range(start, stop, step))} trips"
        why = _float_check(carried, cf, k, vals, range(start, stop, step))
        if why:
            return why
    return None


def _float_check(carried, cf, k, vals, trips):
    """The closed form as the generated code evaluates it (its printed text, in doubles)
    against the recurrence run in doubles: a form exact in 30 digits may cancel in 16 (a ratio
    0.9 + 0.1 that is 1 + 2.8e-17: ``(r**n - 1) / (r - 1)`` is then 0 / tiny).  A point where the
    recurrence itself fails in doubles proves nothing and is skipped."""
    def run(expr, env):
        return eval(S.to_python(expr), {"math": math}, env)       # noqa: S307 (our own text)

    env0 = {sym.name: (int(v) if v.is_Integer else float(v)) for sym, v in vals.items()}
    try:
        state = {x: env0[x.name] for x in carried}
        for kv in trips:
            env = dict(env0, **{x.name: v for x, v in state.items()})
            env[k.name] = kv
            state = {x: float(run(e, env)) for x, e in carried.items()}
    except (ArithmeticError, ValueError, TypeError):
        return None
    for x, fin in cf.finals.items():
        want = state.get(x)
        if want is None or not math.isfinite(want):
            continue
        try:
            got = float(run(fin, env0))
        except (ArithmeticError, ValueError, TypeError):
            return f"{x} does not evaluate in doubles"
        if not abs(got - want) <= 1e-9 * max(1.0, abs(want)):
            return f"{x} loses its digits in doubles ({got!r} for {want!r})"
    return None
