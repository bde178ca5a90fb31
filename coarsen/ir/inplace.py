"""NumPy's in-place semantics for augmented assignment to arrays, once the types are known.

Requires: a typed ``ir.Function`` (``coarsen.ir.typeinfer`` after its strict pass, which has
already checked every marked ``a op= e`` on an array: ``e`` broadcasts without changing ``a``'s
rank, and the result casts to ``a``'s dtype), before ``fn.views`` is computed.
Guarantees:

* every ``a op= e`` the frontend marked ``inplace`` whose target is an array becomes a store
  into the whole array, as NumPy does it: ``a[:, ..., :] += e`` (``-=``) for ``+``/``-``,
  ``t = a op e; a[:, ..., :] = t`` for the other operators.  Every alias of ``a`` and the
  caller of an inlined helper see the update, in the value and in the gradient.  A shape that
  does not broadcast to ``a``'s raises ``ValueError`` at run time, as NumPy does.  Scalars
  keep the rebinding ``Assign`` (the mark is dropped);
* ``a[i] op= e`` whose e calls a helper reads ``a[i]`` before e, as Python does (the frontend
  marks that read ``aug_read``); when ``a[i]`` is a view (a row of a 2-D array), NumPy's
  in-place operation sees what e wrote, so the read moves to just before the operation;
* a plain alias ``v = a`` of an array (a statement of the user's, or an inlined helper's
  parameter binding) of which either name is written in place is resolved where that is exact:
  the uses of ``v`` that certainly see the same array as ``a`` (until ``v`` or ``a`` is
  rebound) read ``a`` instead, and the alias statement goes.  Writes through either name then
  reach both.  An alias that cannot be resolved so is left to activity analysis, which refuses
  the writes whose order it cannot vouch for;
* a store into a module-level array (through a helper's parameter) raises ``CoarsenError``:
  module-level arrays are read-only inputs.
"""
from __future__ import annotations

import re

from ..errors import at_stmt as _err
from .primitives import primitive
from .nodes import (
    Array,
    Assign,
    For,
    If,
    Slice,
    Store,
    Var,
    While,
    assigned,
    blocks,
    uses,
    walk,
)

_TEMP = re.compile(r"^_t(\d+)$")


def apply_inplace(fn):
    """Rewrite ``fn`` (typed) in place; see the module docstring."""
    _lower_augmented(fn)
    _resolve_aliases(fn)
    _refuse_global_writes(fn)


# ------------------------------------------------------------------ a op= e on arrays
def _lower_augmented(fn):
    types = fn.types
    top = max((int(m.group(1)) for m in map(_TEMP.match, types) if m), default=0)
    counter = [top]
    parent = {}         # union-find over SSA webs: an in-place result is the array it updates
    fn.names.reserve(types)

    def temp():
        # from the module's supply: a custom rule typed apart (its temporaries are not in
        # ``types``) and the function it is called from never share a temporary
        name = fn.names.numbered("_t", "inplace", start=counter[0] + 1)
        counter[0] = int(name[2:])
        fn.temps = fn.temps | {name}
        return name

    def root(name):
        while parent.get(name, name) != name:
            name = parent[name]
        return name

    def rank(name):     # a parameter keeps its name, else the shortest (the user's own)
        return (name not in fn.params, len(name), name)

    def block(stmts):
        out = []
        held = {}       # views read by ``a[i] op= e`` before e: they go right before their use
        for s in stmts:
            if held:
                for name in [u.name for u in uses(s) if isinstance(u, Var) and u.name in held]:
                    out.append(held.pop(name))
            if isinstance(s, Assign) and s.attr("aug_read") is not None:
                s.attrs = tuple(kv for kv in s.attrs if kv[0] != "aug_read")
                if isinstance(types.get(s.target), Array):
                    held[s.target] = s
                    continue
            if isinstance(s, Assign) and s.attr("inplace") is not None:
                s.attrs = tuple(kv for kv in s.attrs if kv[0] != "inplace")
                base = s.args[0].name       # the array updated (its SSA web, before the update)
                t = types.get(base)
                if isinstance(t, Array):
                    # the update defines nothing: its result is the array it updates, so the
                    # web the frontend's SSA split gave the result is that array's web again
                    if s.target != base:
                        if types.get(s.target) != t:
                            raise _err(s, f"variable {s.target!r} is {t} in one place and "
                                       f"{types.get(s.target)} in another",
                                       "use a different variable name for each")
                        ra, rb = root(s.target), root(base)
                        if ra != rb:
                            ra, rb = sorted((ra, rb), key=rank)
                            parent[rb] = ra
                    full = (Slice(None, None, None),) * t.ndim
                    if primitive(s.op).accumulates:     # a += e, a -= e: Store's aug
                        out.append(Store(base, full, s.args[1], s.op, s.loc))
                    else:
                        tmp = temp()
                        types[tmp] = t      # typeinfer checked: a op e has a's rank and dtype
                        out.append(Assign(tmp, s.op, s.args, s.loc, s.index, s.attrs))
                        out.append(Store(base, full, Var(tmp), None, s.loc))
                    continue
            elif isinstance(s, If):
                s.body = block(s.body)
                s.orelse = block(s.orelse)
            elif isinstance(s, For):
                s.body = block(s.body)
            elif isinstance(s, While):
                s.test_body = block(s.test_body)
                s.body = block(s.body)
            out.append(s)
        out.extend(held.values())
        return out

    fn.body = block(fn.body)
    mapping = {v: root(v) for v in parent if root(v) != v}
    if mapping:
        # renaming webs of one source variable to one name keeps every use's reaching
        # definitions: a definition of any other web of that variable on a path between them
        # would have joined that use's web
        for st in walk(fn.body):
            _rename(st, mapping)
        for v in mapping:
            types.pop(v, None)


def _rename(s, mapping):
    """Rename variables (definitions and uses) in the statement itself, not nested blocks."""
    def op(o):
        return Var(mapping[o.name]) if isinstance(o, Var) and o.name in mapping else o

    def index(ix):
        out = []
        for it in ix:
            if isinstance(it, Slice):
                it = Slice(*(op(p) if p is not None else None for p in (it.lower, it.upper, it.step)))
            elif isinstance(it, Var):
                it = op(it)
            out.append(it)
        return tuple(out)

    if isinstance(s, Assign):
        s.target = mapping.get(s.target, s.target)
        s.args = tuple(op(a) for a in s.args)
        s.index = index(s.index)
    elif isinstance(s, Store):
        s.array = mapping.get(s.array, s.array)
        s.value = op(s.value)
        s.index = index(s.index)
    elif isinstance(s, If):
        s.cond = op(s.cond)
    elif isinstance(s, For):
        s.var = mapping.get(s.var, s.var)
        s.start, s.stop, s.step = op(s.start), op(s.stop), op(s.step)
    elif isinstance(s, While):
        s.test = op(s.test)


# ------------------------------------------------------------------ aliases
def _is_alias(s, types):
    return isinstance(s, Assign) and primitive(s.op).plain_copy and len(s.args) == 1 \
        and isinstance(s.args[0], Var) and isinstance(types.get(s.target), Array) \
        and isinstance(types.get(s.args[0].name), Array)


def _refers(s, name):
    """Does the statement itself (not its nested blocks) read or assign the array ``name``?"""
    if isinstance(s, Assign) and s.target == name:
        return True
    if isinstance(s, Store) and s.array == name:
        return True
    # a loop variable is never the array: typeinfer types it i64 (``range`` bounds are ints),
    # and a variable has one type (``unify`` refuses an array in one place, an int in another)
    assert not (isinstance(s, For) and s.var == name), (s.var, "loop variable and array")
    return any(isinstance(u, Var) and u.name == name for u in uses(s))


def _rename_reads(s, old, new):
    """Replace the reads of ``old`` by ``new`` in the statement itself (not nested blocks)."""
    target = s.target if isinstance(s, Assign) else None
    _rename(s, {old: new})
    if target is not None:
        s.target = target


def _resolve_one(fn, block, k):
    """Resolve the alias ``block[k]`` (``v = copy(a)``) if that is exact; True when done."""
    s = block[k]
    v, a = s.target, s.args[0].name
    pair = {v, a}

    def noop(st):   # v = a, a = v, v = v, a = a: no change once v and a are one array
        return isinstance(st, Assign) and primitive(st.op).plain_copy and st.target in pair \
            and len(st.args) == 1 and isinstance(st.args[0], Var) and st.args[0].name in pair

    if v == a:
        del block[k]
        return True
    if v == fn.result or v in fn.live_out:
        # the returned variable (an array result: forward mode), or one read after the body
        # (a backward rule's cotangent), stays itself
        return False
    # the range in which v and a certainly name one array: up to the first statement of this
    # block that rebinds either (a block's statements run in order: the IR has no jumps)
    stop = None
    for i in range(k + 1, len(block)):
        if noop(block[i]):
            continue
        if assigned([block[i]]) & pair:
            stop = i
            break
    rng = block[k + 1:stop] if stop is not None else block[k + 1:]
    inside = {id(x) for x in walk(rng)}
    last = block[stop] if stop is not None else None
    direct = isinstance(last, Assign)
    if not (direct and last.target == v):
        # this definition of v may reach uses past the range: every reference to v must be
        # inside it (or be the reads of the rebinding statement itself)
        for st in walk(fn.body):
            if st is s or id(st) in inside or (direct and st is last):
                continue
            if _refers(st, v):
                return False
    for st in walk(rng):
        _rename_reads(st, v, a)
        if noop(st):
            st.target = a
    if direct:
        _rename_reads(last, v, a)
    block[k + 1:stop if stop is not None else len(block)] = \
        [st for st in rng if not (isinstance(st, Assign) and primitive(st.op).plain_copy
                                  and st.target == a and st.args == (Var(a),))]
    del block[k]
    if not any(_refers(st, v) for st in walk(fn.body)) and v not in fn.params and v != fn.result \
            and v not in fn.live_out:
        fn.types.pop(v, None)
    return True


def _resolve_aliases(fn):
    types = fn.types
    for _ in range(10000):
        written = {s.array for s in walk(fn.body) if isinstance(s, Store)}
        done = False
        for block in blocks(fn.body):
            for k, s in enumerate(block):
                if _is_alias(s, types) and (s.target in written or s.args[0].name in written):
                    if _resolve_one(fn, block, k):
                        done = True
                        break
            if done:
                break
        if not done:
            return


def _refuse_global_writes(fn):
    n = len(getattr(fn, "global_arrays", ()) or ())
    if not n:
        return
    globals_ = set(fn.params[len(fn.params) - n:])
    for s in walk(fn.body):
        if isinstance(s, Store) and s.array in globals_:
            raise _err(s, "writing into a module-level array is not supported (module-level "
                       "arrays are read-only inputs)",
                       "pass the array as a parameter, or copy it into a local array first")
