"""Vector exp: ``math.exp`` in a loop whose trips are independent as the runtime helper
``_exp``, which LLVM vectorizes with the loop.

Numba lowers ``math.exp`` to a call of libm's scalar exp per element, so a loop that takes the
exp of every element (softmax's ``np.exp(X - m[:, None])``, a table of exps) runs one call at a
time even where the rest of its body is vectorized.  ``_exp`` (``coarsen.codegen.helpers``)
computes the exponential in straight-line arithmetic that Numba inlines and LLVM vectorizes
with the loop: 200,000 exps in about 200 us against libm's 600.  Run one element at a time it
is slower than libm's (its polynomial is one long chain: Monte Carlo paths, a sum of exps, 1.3
to 2.6x slower measured), so only loops that vectorize get it.

Requires: the generated function's statements (gast), after every pass that reads the code's
``math`` calls as pure (it runs last of the entry's passes); the cpu or the python target (the
python target gets the helper too, slower than ``math.exp`` there, so that both targets give
the same bits; CUDA's workspace code keeps ``math.exp``).
Guarantees: ``vector_exp(body)`` returns ``(statements, helpers)``: a new list (the input is
not modified; a statement that changes is a copy) in which every call ``math.exp(x)`` in the
body of an innermost loop (``for v in range(...)`` without ``else``, no loop inside) whose
trips are independent is ``_exp(x)``, with the helpers it calls (``{"_exp"}``, or none).  A
loop's trips are independent when its body only assigns (names and array elements), hands no
name from one trip to the next (``cleanup.carried_names``: a sum ``s += ...`` is a chain), and
calls only ``math.exp``, ``math.sqrt``, ``math.fabs``, ``abs``, ``min``, ``max`` and
``float`` (what LLVM computes in vector form; another libm call keeps the loop scalar).  The
values are exp's within one ulp (the helper's note), not libm's bits: an exp in such a loop
and one elsewhere may differ in the last bit, the same on both targets.
"""
from __future__ import annotations

import copy

import gast

from ...codegen import build as B
from ...codegen.gast_queries import substitute
from .cleanup import carried_names, plain_range, rewrite_inner

__all__ = ["vector_exp"]

HELPER = "_exp"

#: the calls a loop may make and still vectorize (``math.<name>`` or a builtin)
_MATH_OK = frozenset({"exp", "sqrt", "fabs"})
_BUILTIN_OK = frozenset({"abs", "min", "max", "float"})


def vector_exp(body):
    found = [False]

    def swap(node):
        if isinstance(node, gast.Call) and _is_math(node.func, "exp") and len(node.args) == 1 \
                and not node.keywords:
            found[0] = True
            return B.call(B.name(HELPER), substitute(copy.deepcopy(node.args[0]), swap))
        return None

    def block(stmts):
        out = []
        for st in stmts:
            if isinstance(st, gast.For) and _independent(st):
                st = copy.copy(st)
                st.body = [substitute(copy.deepcopy(s), swap) if _has_exp(s) else s for s in st.body]
            elif isinstance(st, (gast.For, gast.While, gast.If)):
                st = rewrite_inner(st, block)
            out.append(st)
        return out

    out = block(list(body))
    return out, frozenset({HELPER}) if found[0] else frozenset()


def _independent(loop):
    """Is ``loop`` an innermost range loop whose trips are independent (module docstring),
    with an exp in its body?"""
    if loop.orelse or not plain_range(loop) or not any(_has_exp(s) for s in loop.body):
        return False
    for st in loop.body:
        if not isinstance(st, (gast.Assign, gast.AugAssign)):
            return False
        for n in gast.walk(st):
            if isinstance(n, gast.Call) and not _vector_call(n.func):
                return False
    return not carried_names(loop.body) and loop.target.id not in {
        n.id for s in loop.body for n in gast.walk(s) if isinstance(n, gast.Name)
        and isinstance(n.ctx, gast.Store)}


def _vector_call(func):
    if isinstance(func, gast.Name):
        return func.id in _BUILTIN_OK
    return any(_is_math(func, name) for name in _MATH_OK)


def _has_exp(st):
    return any(isinstance(n, gast.Call) and _is_math(n.func, "exp") for n in gast.walk(st))


def _is_math(func, name):
    return isinstance(func, gast.Attribute) and func.attr == name and \
        isinstance(func.value, gast.Name) and func.value.id == "math"
