"""Activity analysis and the facts the reverse sweep needs about variables.

Requires: a typed ``ir.Function`` (``coarsen.ir.typeinfer``).
Guarantees: ``Facts`` with
* ``active``: float variables that depend on a differentiated input (varied) and on which the
  result depends (useful); only they get adjoints;
* ``defs``/``in_loop``: how many places assign each variable and whether one is in a loop (a
  variable assigned once outside every loop keeps its value for the whole reverse sweep);
* ``stored``: arrays written by element or slice;
* ``set_temps``: compiler temporaries defined once and used once, in the same block, as a
  differentiable operand: their adjoint is *set* by that one use instead of accumulated;
* ``materialize``: temporaries that view an array written while they may still see it
  (``_write_after_view``, the rule a user's view is refused by): they are copied when made, so
  later writes cannot change them; a view of an array written only before it stays a view.
``statement_positions(body)`` numbers the statements in walk order and lists the loops around
each (the reverse sweep's tape analysis uses it too).
Named views of an array that is written, and writes through views, are refused: NumPy's
aliasing would make their values (and gradients) depend on write order.
"""
from __future__ import annotations

import re

from dataclasses import dataclass, field

from ..errors import at_stmt as _err
from ..ir.nodes import (Array, Assign, For, If, Segment, Store, Var, While, is_float, uses,
                        walk, walk_with_depth)
from ..ir.primitives import primitive


@dataclass
class Facts:
    active: set
    defs: dict
    in_loop: set
    stored: set
    set_temps: set
    materialize: set
    use_counts: dict = field(default_factory=dict)


def is_temp(fn, name):
    """Is ``name`` a compiler temporary of ``fn``?  Known by origin: the frontend and the
    in-place rewriting record the temporaries they make in ``fn.temps``."""
    return name in fn.temps


def analyze(fn, wrt):
    types = fn.types
    defs, in_loop, stored = {}, set(), set()
    for p in fn.params:
        defs[p] = 1
    for s, depth in walk_with_depth(fn.body):
        target = s.target if isinstance(s, Assign) else s.var if isinstance(s, For) else None
        if target is not None:
            defs[target] = defs.get(target, 0) + 1
            if depth > 0 or isinstance(s, For):
                in_loop.add(target)
        if isinstance(s, Store):
            stored.add(s.array)

    # varied: forward closure from the differentiated inputs
    varied = set(wrt)
    changed = True
    while changed:
        changed = False
        for s in walk(fn.body):
            if isinstance(s, Assign) and s.target not in varied and is_float(types[s.target]):
                pos = primitive(s.op).diff_positions(len(s.args))
                if any(isinstance(s.args[p], Var) and s.args[p].name in varied for p in pos):
                    varied.add(s.target)
                    changed = True
            elif isinstance(s, Store) and s.array not in varied:
                if isinstance(s.value, Var) and s.value.name in varied:
                    varied.add(s.array)
                    changed = True
    # useful: backward closure from the result
    useful = {fn.result}
    changed = True
    while changed:
        changed = False
        for s in walk(fn.body):
            if isinstance(s, Assign) and s.target in useful:
                for p in primitive(s.op).diff_positions(len(s.args)):
                    a = s.args[p]
                    if isinstance(a, Var) and a.name not in useful:
                        useful.add(a.name)
                        changed = True
            elif isinstance(s, Store) and s.array in useful:
                if isinstance(s.value, Var) and s.value.name not in useful:
                    useful.add(s.value.name)
                    changed = True
    active = {v for v in varied & useful if is_float(types.get(v))}
    for s in walk(fn.body):
        if isinstance(s, Assign) and primitive(s.op).undifferentiable and s.target in active:
            raise _err(s, f"math.{s.op} of a differentiated value has no derivative rule",
                       f"{s.op} may only see values that do not depend on the differentiated inputs")

    # aliasing rules
    views = fn.views
    written_roots = {views.get(a, a) for a in stored}
    materialize = set()
    for s in walk(fn.body):
        if isinstance(s, Store) and s.array in views:
            if views[s.array] == s.array:
                # the chain of aliases comes back to the array: names that trade arrays
                shown_as = shown(fn, s.array)
                raise _err(s, f"writing into {shown_as}, which trades arrays with another name "
                           "(a swap such as 'u, un = un, u', or 'tmp = u; u = un; un = tmp'): "
                           "the gradient cannot follow writes into arrays that change names",
                           f"make a new array at each step instead ({shown_as.strip(chr(39))} = a new array, "
                           f"e.g. an expression or .copy()) and write into that")
            raise _err(s, f"writing into {shown(fn, s.array)}, which is a view of "
                       f"{shown(fn, views[s.array])}",
                       f"write into {shown(fn, views[s.array])} directly, or make a copy with .copy()")
    order, loops_of = statement_positions(fn.body)
    for s in walk(fn.body):
        if isinstance(s, Assign) and s.target in views and views[s.target] in written_roots:
            if not _write_after_view(s, views[s.target], views, order, loops_of, fn.body):
                # nothing writes the array while the view sees it: a view (correlation's
                # `z.T @ z` of a `z` its scalarized nest wrote before: strides, not a copy)
                continue
            if is_temp(fn, s.target):
                materialize.add(s.target)
            else:
                what = shown(fn, s.target)
                raise _err(s, f"{what} is a view of {shown(fn, views[s.target])}, which is "
                           "modified elsewhere in the function",
                           (f"take a snapshot with {s.target} = ....copy()" if what == repr(s.target)
                            else "take a snapshot with .copy() of it where it is made") +
                           f", or index {shown(fn, views[s.target])} directly where you need it")

    # use counts and block-local single uses
    use_counts = {}
    for s in walk(fn.body):
        for u in uses(s):
            if isinstance(u, Var):
                use_counts[u.name] = use_counts.get(u.name, 0) + 1
    set_temps = set()

    def scan(block):
        defined_here = set()
        for s in block:
            if isinstance(s, Assign) and is_temp(fn, s.target):
                defined_here.add(s.target)
            if isinstance(s, Assign) and s.target in active:
                for p in primitive(s.op).diff_positions(len(s.args)):
                    a = s.args[p]
                    if isinstance(a, Var) and a.name in defined_here and use_counts.get(a.name) == 1 \
                            and defs.get(a.name) == 1 and a.name in active:
                        set_temps.add(a.name)
            if isinstance(s, Store) and s.array in active and isinstance(s.value, Var):
                a = s.value.name
                if a in defined_here and use_counts.get(a) == 1 and defs.get(a) == 1 and a in active:
                    set_temps.add(a)
            if isinstance(s, If):
                scan(s.body)
                scan(s.orelse)
            elif isinstance(s, For):
                scan(s.body)
            elif isinstance(s, While):
                scan(s.test_body)
                scan(s.body)

    scan(fn.body)
    return Facts(active, defs, in_loop, stored, set_temps, materialize, use_counts)


def intact(facts, name):
    """True when a variable keeps one value for the whole reverse sweep."""
    return facts.defs.get(name, 0) <= 1 and name not in facts.in_loop


def is_array(types, name):
    return isinstance(types.get(name), Array)


def statement_positions(body):
    """``(order, loops_of)``: ``order[id(st)]`` is the walk-order position of every statement
    of ``body`` (into ``If`` arms, loop bodies, a ``While``'s test body and segments), and
    ``loops_of[id(st)]`` the tuple of ``For``/``While`` loops enclosing it, outermost first."""
    order, loops_of = {}, {}

    def visit(block, loops):
        for st in block:
            order[id(st)] = len(order)
            loops_of[id(st)] = loops
            if isinstance(st, If):
                visit(st.body, loops)
                visit(st.orelse, loops)
            elif isinstance(st, (For, While)):
                inner = loops + (st,)
                if isinstance(st, While):
                    visit(st.test_body, inner)
                visit(st.body, inner)
            elif isinstance(st, Segment):
                visit(st.stmts, loops)
    visit(body, ())
    return order, loops_of


def _write_after_view(view_def, root, views, order, loops_of, body):
    """May the array ``root`` be written while the view made by ``view_def`` still sees it?

    A write later in program order counts unless ``root`` is rebound to a new array between
    the two; a write earlier in an enclosing loop counts unless ``root`` is rebound earlier in
    that loop (the next trip's writes then go to a new array).
    """
    p = order[id(view_def)]
    stmts = list(walk(body))
    rebinds = [order[id(st)] for st in stmts if isinstance(st, Assign) and st.target == root
               and not primitive(st.op).plain_copy]
    for st in stmts:
        if not isinstance(st, Store) or views.get(st.array, st.array) != root:
            continue
        q = order[id(st)]
        if q > p:
            if not any(p < r < q for r in rebinds):
                return True
        else:
            shared = [lp for lp in loops_of[id(view_def)] if lp in loops_of[id(st)]]
            for lp in shared:
                start = order[id(lp)]
                if not any(start < r < q for r in rebinds):
                    return True
    return False


#: the value a helper returns (``lower``: ``_<helper>_result``; a tuple's ``_<helper>_result_<k>``)
_RESULT = re.compile(r"^_(\w+?)_result(_\d+)?\d*$")
#: an SSA web of a variable (``coarsen.ir.ssa.split_webs``: ``numbered(var, "ssa", start=2, sep="_")``)
_WEB = re.compile(r"^(.+)_\d+$")


def shown(fn, name):
    """``name`` as a message shows it: the user's variable (an SSA web of it, ``w_2`` for the
    second value assigned to ``w``, shows as ``w``), or what a compiler variable holds (the
    value a helper returns, a temporary value), never the compiler's spelling."""
    m = _RESULT.match(name)
    if m:
        return f"a value {m.group(1)}() returns" if m.group(2) else f"the value {m.group(1)}() returns"
    if is_temp(fn, name):
        return "a temporary value"
    names = getattr(fn, "names", None)
    web = _WEB.match(name) if names is not None and names.owner(name) == "ssa" else None
    if web:
        return repr(web.group(1))
    return repr(name)
