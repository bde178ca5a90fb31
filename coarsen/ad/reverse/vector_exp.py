"""Vector exp: ``math.exp`` calls as the runtime helper ``_exp``, which LLVM vectorizes.

Numba lowers ``math.exp`` to a call of libm's scalar exp per element, so a loop that takes the
exp of every element (softmax, a Gaussian mixture's weights, a logistic loss) runs one call at
a time even where the rest of its body is vectorized.  ``_exp`` (``coarsen.codegen.helpers``)
computes the exponential in straight-line arithmetic that Numba inlines and LLVM vectorizes
with the loop.

Requires: the generated function's statements (gast); the cpu or the python target (the
python target gets the helper too, slower than ``math.exp`` there, so that both targets give
the same bits; CUDA's workspace code keeps ``math.exp``, which CUDA computes in vector form).
Guarantees: ``vector_exp(body)`` returns ``(statements, helpers)``: a new list (the input is
not modified; a statement that changes is a copy) in which every call ``math.exp(x)`` is
``_exp(x)``, and the helpers it calls (``{"_exp"}``, or none where there was no call).  The
values are exp's within one ulp (the helper's note): not libm's bits, but those of every exp of
the module alike, the forward sweep's and the reverse sweep's, so a result read back in the
reverse sweep is the one the forward sweep computed.
"""
from __future__ import annotations

import copy

import gast

from ...codegen import build as B
from ...codegen.gast_queries import substitute

__all__ = ["vector_exp"]

HELPER = "_exp"


def vector_exp(body):
    found = [False]

    def swap(node):
        if isinstance(node, gast.Call) and _is_math_exp(node.func) and len(node.args) == 1 \
                and not node.keywords:
            found[0] = True
            return B.call(B.name(HELPER), swap_all(node.args[0]))
        return None

    def swap_all(node):
        return substitute(copy.deepcopy(node), swap)

    out = [swap_all(st) if any(isinstance(n, gast.Call) and _is_math_exp(n.func)
                               for n in gast.walk(st)) else st for st in body]
    return out, frozenset({HELPER}) if found[0] else frozenset()


def _is_math_exp(func):
    return isinstance(func, gast.Attribute) and func.attr == "exp" and \
        isinstance(func.value, gast.Name) and func.value.id == "math"
