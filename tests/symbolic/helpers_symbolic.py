"""Numeric helpers for the symbolic tests: evaluate printed code and SymPy references."""
import math

import sympy

from coarsen.symbolic import to_python, assignments_to_python, gamma


def eval_py(expr, env):
    """Evaluate ``to_python(expr)`` with ``math`` and the name -> value mapping ``env``."""
    ns = {"math": math}
    ns.update(env)
    return eval(to_python(expr), ns)


def run_jacobian(jac, env):
    """Execute a LocalJacobian as printed Python; returns (values, partials) as floats."""
    ns = {"math": math}
    ns.update(env)
    for line in assignments_to_python(jac.replacements):
        exec(line, ns)
    values = {o: eval(to_python(v), ns) for o, v in jac.values.items()}
    partials = {k: eval(to_python(v), ns) for k, v in jac.partials.items()}
    return values, partials


def phi_to_piecewise(expr):
    return expr.replace(gamma, lambda c, a, b: sympy.Piecewise((a, c), (b, True)))


def inline(assignments):
    inl = {}
    for s, e in assignments:
        inl[s] = e.xreplace(inl)
    return inl


def ref_value(expr, subs):
    """High-precision numeric value of a SymPy expression at a point (a float)."""
    v = phi_to_piecewise(expr).xreplace({k: sympy.Float(v, 30) for k, v in subs.items()})
    return float(sympy.N(v, 20))


class CountingClock:
    """A deterministic clock for ``Budget(clock=...)``: each reading advances it by ``tick``
    seconds, and reading it more than ``max_reads`` times fails the test.

    With it a budget test checks *how much work* ran before the budget stopped it (the budget
    reads its clock once per step and once per 4096 nodes a size count visits), never how
    long it took: the answer is the same on any machine, under any load.
    """

    def __init__(self, tick: float = 0.0, max_reads: int = 10 ** 5):
        self.tick, self.max_reads = tick, max_reads
        self.reads, self.now = 0, 0.0

    def __call__(self) -> float:
        self.reads += 1
        if self.reads > self.max_reads:
            raise AssertionError(f"the budget's clock was read {self.reads} times: "
                                 "the work it guards is not bounded")
        self.now += self.tick
        return self.now
