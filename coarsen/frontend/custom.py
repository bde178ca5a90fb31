"""Custom derivative rules: ``@coarsen.custom_vjp`` and ``@coarsen.custom_jvp``, with JAX's
signatures.

Requires: nothing (plain Python objects; the frontend, ``coarsen.frontend.custom_calls``,
reads them when a differentiated function calls one).
Guarantees: a decorated function still runs as plain Python when it is called directly
(``f(*args)`` calls the function it decorates).  It carries its rules:

* ``f = custom_vjp(fun)``, then ``f.defvjp(f_fwd, f_bwd)``: ``f_fwd(*args)`` returns ``(out,
  residuals)`` (``residuals`` a tuple literal or one value), ``f_bwd(residuals, g)`` returns a
  tuple with one cotangent per float argument of ``fun``, each shaped like that argument;
* ``f = custom_jvp(fun)``, then ``f.defjvp(rule)`` (usable as a decorator; it returns the rule):
  ``rule(primals, tangents)`` returns ``(primal_out, tangent_out)``, ``tangent_out`` linear in
  ``tangents`` and shaped like ``primal_out``.

The rules are plain functions in coarsen's input language: where a differentiated function
calls ``f``, they are inlined and compiled with the rest, and they take precedence over
inlining ``fun``.  Rules must be plain Python functions (``def`` in a file) or ``numba.njit``
dispatchers; anything else is refused here, with a ``CoarsenError``.
"""
from __future__ import annotations

import functools
import types

from ..errors import CoarsenError


def _plain(rule, what, owner):
    fn = getattr(rule, "py_func", rule)
    if not isinstance(fn, types.FunctionType) or fn.__name__ == "<lambda>":
        code = getattr(fn, "__code__", None)
        raise CoarsenError(f"the {what} rule of {owner} must be a plain Python function, "
                           f"not {rule!r}", hint="define it with `def` in a file",
                           filename=getattr(code, "co_filename", None),
                           lineno=getattr(code, "co_firstlineno", None))
    return rule


class CustomRules:
    """What ``custom_vjp`` and ``custom_jvp`` share: the function, called as it is."""
    kind = ""

    def __init__(self, fun, **options):
        if options:
            raise CoarsenError(f"coarsen.{self.kind} takes no options (got "
                               f"{', '.join(sorted(options))})",
                               hint="pass every argument to the rules; nondiff_argnums is not "
                                    "supported")
        _plain(fun, "primal", getattr(fun, "__name__", repr(fun)))
        functools.update_wrapper(self, fun)
        self.fun = fun

    def __call__(self, *args, **kwargs):
        return self.fun(*args, **kwargs)

    def __repr__(self):
        return f"<coarsen.{self.kind} {self.fun.__qualname__}>"


class custom_vjp(CustomRules):
    """``@coarsen.custom_vjp``: a function whose reverse-mode derivative is given by a rule
    (``defvjp``)."""
    kind = "custom_vjp"

    def __init__(self, fun, **options):
        super().__init__(fun, **options)
        self.fwd = None
        self.bwd = None

    def defvjp(self, fwd, bwd):
        """Set the rules: ``fwd(*args) -> (out, residuals)``, ``bwd(residuals, g) ->
        (cotangent, ...)``, one cotangent per float argument."""
        self.fwd = _plain(fwd, "forward", self.__name__)
        self.bwd = _plain(bwd, "backward", self.__name__)


class custom_jvp(CustomRules):
    """``@coarsen.custom_jvp``: a function whose directional derivative is given by a rule
    (``defjvp``); reverse mode differentiates the rule's tangent, which is linear in the
    tangents."""
    kind = "custom_jvp"

    def __init__(self, fun, **options):
        super().__init__(fun, **options)
        self.jvp = None

    def defjvp(self, rule):
        """Set the rule ``rule(primals, tangents) -> (primal_out, tangent_out)``; returns it,
        so ``@f.defjvp`` works as a decorator."""
        self.jvp = _plain(rule, "jvp", self.__name__)
        return rule


