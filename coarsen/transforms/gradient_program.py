"""The generated gradient as a program in coarsen's input language, for forward mode over
reverse mode (``coarsen.hessian``'s forward-over-reverse path).

Requires: the ``Artifact`` of a ``Gradient`` generated for the python target without index
checks (``coarsen.differentiate(fn, wrt, target="python", boundscheck=False)``), and
``coarsen.transforms.wrappers`` (generated functions the frontend reads like user code).
Guarantees: ``gradient_program(art, about)`` returns a ``GradientProgram``: a ``Wrapper``
whose function takes the parameters of ``fn`` and returns the gradient, the generated entry's
statements as they stand (the user's names, the adjoints ``<name>_bar``): for one ``wrt``
parameter its gradient as it is, for several one flat float64 array of them all, in ``wrt``'s
order, each raveled (``packed``); or a ``NotAProgram`` saying why the gradient is not one:

* tapes: a reverse sweep that reads values the forward sweep saved (forward mode would have
  to carry tangents of the tapes and their growth);
* module-level arrays (the entry takes them as extra parameters), parallel loops;
* a call of a generated helper (the runtime's broadcasting and product helpers, which check
  shapes with ``raise``), except ``_int_divisor``, read as its operand (forward mode checks the
  divisions of the code it generates);
* a structure other than one function ending in ``return (value, (gradient,), tape counts)``.

Only the return is rewritten (to ``return <gradient>``, or the packing of several); comments
are dropped.  Nothing is
compiled here: forward mode (``coarsen.jacobian``) reads the wrapper and refuses what it
cannot differentiate, as for any user function.
"""
from __future__ import annotations

import ast
import math
from dataclasses import dataclass

import numpy as np

from .wrappers import Wrapper, make_wrapper

__all__ = ["GradientProgram", "NotAProgram", "gradient_program"]

#: names a converted gradient may call besides ``math.*`` and ``np.*``
BUILTINS = frozenset({"range", "float", "int", "bool", "abs", "min", "max", "len"})


@dataclass(frozen=True)
class GradientProgram:
    """The gradient of one ``wrt`` parameter as a function of the parameters."""
    wrapper: Wrapper
    params: tuple           # its parameters: the generated entry's, which are the function's
                            # in order (renamed where one would clash with a generated name)
    wrt: tuple              # the differentiated parameters (the function's names for them)
    packed: bool            # several: the result is one flat array of their gradients


@dataclass(frozen=True)
class NotAProgram:
    """Why a generated gradient is not read back as a program."""
    reason: str


def gradient_program(art, about, ranks=(1,)):
    """The gradient of ``art`` (see the module docstring) as a ``GradientProgram``, or a
    ``NotAProgram`` with the reason; ``about`` names the function (the wrapper's file);
    ``ranks``: the ``wrt`` parameters' ranks (0 for a float), in ``art.wrt``'s order."""
    if art.taped_entry is not None or art.tapes:
        return NotAProgram("its reverse sweep reads a tape")
    if art.module_arrays:
        return NotAProgram("it reads module-level arrays")
    tree = ast.parse(art.source)
    defs = {st.name: st for st in tree.body if isinstance(st, ast.FunctionDef)}
    entry = defs.get(art.entry_name)
    if entry is None or any(not isinstance(st, (ast.FunctionDef, ast.Import, ast.ImportFrom))
                            for st in tree.body):
        return NotAProgram("its module holds more than its entry")
    entry = _Unchecked().visit(entry)
    for node in ast.walk(entry):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id not in BUILTINS:
            return NotAProgram("its array code calls a runtime helper (broadcasting, matrix "
                               f"products or reductions along an axis: {node.func.id})")
        if isinstance(node, ast.Attribute) and node.attr == "prange":
            return NotAProgram("it has parallel loops")
        if isinstance(node, ast.Return) and node is not entry.body[-1]:
            return NotAProgram("it returns early")
    grads = _gradients_of(entry.body[-1], len(art.wrt))
    if grads is None:
        return NotAProgram("its result is not (value, (gradients...), tape counts)")
    params = tuple(a.arg for a in entry.args.args)
    body = [ast.unparse(st) for st in entry.body[:-1]]
    if len(grads) == 1:
        body.append(f"return {grads[0]}")
    else:
        body += _packing(grads, ranks, _names(entry))
    lines = [line for text in body for line in text.splitlines()]
    wrapper = make_wrapper("gradient", f"grad_{art.entry_name}", list(params), lines,
                           {"math": math, "np": np}, about)
    return GradientProgram(wrapper, params, tuple(art.wrt), len(grads) > 1)


class _Unchecked(ast.NodeTransformer):
    """``_int_divisor(b)`` as ``b``: the check of an int divisor (it raises Python's
    ``ZeroDivisionError``) is made again by the code forward mode generates from the program."""

    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "_int_divisor" and len(node.args) == 1:
            return node.args[0]
        return node


def _gradients_of(ret, n):
    """The names of the ``n`` gradients in ``return (value, (g1, ...), (floats, ints))``,
    else None."""
    if not (isinstance(ret, ast.Return) and isinstance(ret.value, ast.Tuple)
            and len(ret.value.elts) == 3):
        return None
    grads = ret.value.elts[1]
    if isinstance(grads, ast.Tuple) and len(grads.elts) == n \
            and all(isinstance(g, ast.Name) for g in grads.elts):
        return [g.id for g in grads.elts]
    return None


def _names(fn):
    return {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)} | \
        {a.arg for a in fn.args.args}


def _packing(grads, ranks, taken):
    """Statements that return ``grads`` in one flat array (each array raveled, each float
    one entry), with names no other name of the entry has."""
    def fresh(base):
        k = 1
        while f"{base}{k}" in taken:
            k += 1
        taken.add(f"{base}{k}")
        return f"{base}{k}"
    out, at = fresh("_packed"), fresh("_at")
    sizes = [f"{g}.size" if r else "1" for g, r in zip(grads, ranks)]
    lines = [f"{out} = np.empty({' + '.join(sizes)})", f"{at} = 0"]
    for g, r, size in zip(grads, ranks, sizes):
        if r == 0:
            lines.append(f"{out}[{at}] = {g}")
        else:
            lines.append(f"{out}[{at}:{at} + {size}] = {g if r == 1 else f'{g}.ravel()'}")
        lines.append(f"{at} = {at} + {size}")
    return lines + [f"return {out}"]
