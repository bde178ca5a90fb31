"""The generated gradient as a program in coarsen's input language, for forward mode over
reverse mode (``coarsen.hessian``'s forward-over-reverse path).

Requires: the ``Artifact`` of a ``Gradient`` generated for the python target without index
checks (``coarsen.differentiate(fn, wrt, target="python", boundscheck=False)``), and
``coarsen.wrappers`` (generated functions the frontend reads like user code).
Guarantees: ``gradient_program(art, about)`` returns a ``GradientProgram``: a ``Wrapper``
whose function takes the parameters of ``fn`` and returns the gradient with respect to the
one ``wrt`` parameter, the generated entry's statements as they stand (the user's names, the
adjoints ``<name>_bar``); or a ``NotAProgram`` saying why the gradient is not one:

* tapes: a reverse sweep that reads values the forward sweep saved (forward mode would have
  to carry tangents of the tapes and their growth);
* module-level arrays (the entry takes them as extra parameters), several ``wrt``
  parameters, parallel loops;
* a call of a generated helper (the runtime's broadcasting and product helpers, which check
  shapes with ``raise``);
* a structure other than one function ending in ``return (value, (gradient,), tape counts)``.

Only the return is rewritten (to ``return <gradient>``); comments are dropped.  Nothing is
compiled here: forward mode (``coarsen.jacobian``) reads the wrapper and refuses what it
cannot differentiate, as for any user function.
"""
from __future__ import annotations

import ast
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
    wrt: str                # the differentiated parameter (the function's name for it)


@dataclass(frozen=True)
class NotAProgram:
    """Why a generated gradient is not read back as a program."""
    reason: str


def gradient_program(art, about):
    """The gradient of ``art`` (see the module docstring) as a ``GradientProgram``, or a
    ``NotAProgram`` with the reason; ``about`` names the function (the wrapper's file)."""
    if art.taped_entry is not None or art.tapes:
        return NotAProgram("its reverse sweep reads a tape")
    if art.module_arrays:
        return NotAProgram("it reads module-level arrays")
    if len(art.wrt) != 1:
        return NotAProgram("it has several wrt parameters")
    tree = ast.parse(art.source)
    defs = {st.name: st for st in tree.body if isinstance(st, ast.FunctionDef)}
    entry = defs.get(art.entry_name)
    if entry is None or any(not isinstance(st, (ast.FunctionDef, ast.Import, ast.ImportFrom))
                            for st in tree.body):
        return NotAProgram("its module holds more than its entry")
    for node in ast.walk(entry):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id not in BUILTINS:
            return NotAProgram(f"it calls the generated helper {node.func.id}")
        if isinstance(node, ast.Attribute) and node.attr == "prange":
            return NotAProgram("it has parallel loops")
        if isinstance(node, ast.Return) and node is not entry.body[-1]:
            return NotAProgram("it returns early")
    gradient = _gradient_of(entry.body[-1])
    if gradient is None:
        return NotAProgram("its result is not (value, (gradient,), tape counts)")
    params = tuple(a.arg for a in entry.args.args)
    body = [ast.unparse(st) for st in entry.body[:-1]] + [f"return {gradient}"]
    lines = [line for text in body for line in text.splitlines()]
    wrapper = make_wrapper("gradient", f"grad_{art.entry_name}", list(params), lines,
                           {"math": __import__("math"), "np": np}, about)
    return GradientProgram(wrapper, params, art.wrt[0])


def _gradient_of(ret):
    """The name of the gradient in ``return (value, (gradient,), (floats, ints))``, else None."""
    if not (isinstance(ret, ast.Return) and isinstance(ret.value, ast.Tuple)
            and len(ret.value.elts) == 3):
        return None
    grads = ret.value.elts[1]
    if isinstance(grads, ast.Tuple) and len(grads.elts) == 1 and isinstance(grads.elts[0], ast.Name):
        return grads.elts[0].id
    return None
