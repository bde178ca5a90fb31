"""The cost model's weights: what one operation costs in compiled code, and what an expression costs.

Requires: SymPy expressions as built by coarsen (arithmetic, ``math``-module functions, ``Abs``,
``Max``/``Min``, relationals, ``And``/``Or``/``Not``, ``Piecewise``, the branch phi
``coarsen.symbolic.gamma``), or (nested) lists/tuples/dicts of them, exactly as
``coarsen.symbolic.count_ops`` takes them.  Calibration needs Numba; without it (or on any error)
the defaults are used.

Guarantees:

* ``Weights`` (frozen): the relative cost of one float64 operation in Numba-compiled code, an add
  being 1; ``Weights.key()`` is a stable short text of the eight weights (not of ``source``, which
  does not change generated code), for cache keys.  Weights are finite and >= 0 (checked).
* ``expr_cost(obj, weights, limit=None)`` is a pure function of (expressions, weights): the
  weighted twin of ``count_ops``, with the same traversal and the same inputs.  It prices the code
  that ``coarsen.symbolic.to_python`` prints for the expression *tree* (a subexpression used twice
  costs twice), but walks the shared DAG SymPy holds only once per node (memoized by object
  identity, explicit stack): O(DAG size), no recursion limit, even when the tree is 2**40 nodes.
  Rules:

  - an n-ary sum: n - 1 adds (a negated term is a subtraction); a lone negation ``-a``: one add;
    a comparison, ``Not``: one add; ``And``/``Or``: arity - 1 adds; ``Piecewise``: one add per
    condition (the final ``True`` arm is free); the branch phi ``gamma(c, a, b)``: one add;
  - a product of n factors: n - 1 operations (one more when every factor is a denominator,
    ``1/(a*b)``); when some factor is a denominator (a power with a negative *rational* exponent,
    which the printer moves below the fraction bar) one of them is a division (``a*b/(c*d)``:
    2 muls and 1 div, as printed), the others muls; a denominator's own power is then priced
    without its division;
  - ``x**n`` for an integer 2 <= |n| <= 64 (Numba expands a literal integer power):
    multiplications by squaring (``x**2`` 1 mul, ``x**3``
    and ``x**4`` 2 muls), plus a division when n < 0 (unless it is a denominator, see above);
    ``x**-1``: a division; ``x**(1/2)`` (or a Float 0.5): ``sqrt``; ``x**(-1/2)``: ``sqrt`` +
    div; any other power (symbolic, any other fraction or Float, |n| > 4) is one ``pow``, also
    with a negative exponent; the exponent's own cost is added;
  - a call: the weight of its cost (``function_cost``; ``Max``/``Min`` of k > 2 arguments:
    k - 1 of them);
  - symbols, numbers, ``True``/``False``: 0.

  Differences from ``count_ops`` by design (everything else equals ``count_ops`` when every
  weight is 1): ``x**3``, ``x**4`` cost 2 (count_ops: 1); a negative power other than -1 costs its
  positive power plus the division (``x**-2``: 2; ``x**(-1/2)``: 2; ``a/b**3``: 3).
  With ``limit`` the walk stops as soon as the cost is known to exceed ``limit`` and returns that
  partial cost (> limit), like ``count_ops(limit=)``.
* What a call costs comes from the primitive registry (``coarsen.ir.primitives``): each entry's
  ``cost`` (``CostClass`` members) and ``partial_cost``, found by the op's name, its ``aliases``
  (the SymPy function's name, ``atan``, ``Abs``, ``Max``, ``ceiling``; the builtin printed code
  calls, ``max``) or its ``math`` spellings; and, for the SymPy functions no primitive stands
  for, from ``SYMBOLIC_COSTS`` (coarsen.symbolic's branch phi, ``float_of`` and closed-form
  guards; SymPy's ``Heaviside`` and ``factorial``), which a SymPy function's class finds first.
  ``call_cost(name)`` returns the ``CallCost`` of a name (a ``math.``/``np.`` prefix is
  ignored; ``"gamma"`` is the branch phi, as SymPy names it); ``function_cost(expr)`` that of a
  SymPy function node (SymPy's Gamma function is the primitive ``gamma``);
  ``call_weight(name, weights)`` and ``partial_weight(expr, weights)`` price them.  A name or
  function with no cost raises ``UnknownCost`` (never a default weight), and pricing a
  ``CostClass.CALL`` (an array routine) raises ``ValueError``.
* ``calibrate(trips=, repeats=)`` measures this machine (best of ``repeats`` timings of dependent
  chains in ``@njit`` kernels: one add is T(add, add) - T(add) per trip, the loop overhead
  2 T(add) - T(add, add); each kernel's time less the overhead and less the adds that keep its
  chain bounded (``sqrt(x) + c``, ``exp(c - x)``, ``sin(x) + c``, ``x**1.37 + c``), divided by one
  add; the tape is a forward add chain that pushes each value and a reverse add chain that pops
  it, less the two chains, so it prices only what the tape adds to latency-bound code) and returns
  ``Weights(source="calibrated")`` whose weights are ``quantize``d ratios: powers of two in
  [1, 128]; it raises if Numba is missing or a timing is unusable.  About 1.5 s with Numba's
  import and compilation at the default sizes (2-core machine).
* ``machine_weights()`` never raises: ``$COARSEN_COST_WEIGHTS`` = ``"default"`` gives
  ``default_weights()``; unset or ``"calibrate"`` gives this machine's calibrated weights, measured
  once per machine and kept in ``<cache_dir>/cost_weights.json`` under a machine key (CPU model,
  architecture, Numba and Python versions; a corrupt or mismatching file is recomputed and
  replaced atomically) and memoized in the process (``clear_weights_memo()`` forgets it); any
  other value, or any failure, gives the defaults.

Why quantize: generated code depends on the weights (the planner picks recompute, preaccumulate or
fine per segment from them), and the cache keys do too.  Raw timing ratios wander by a few percent
from run to run; rounding each to the nearest power of two (by value: the boundaries lie at 1.5,
3, 6, 12, 24, 48 and 96) makes a re-calibration on the same machine give the same weights, hence
the same code, except for a ratio that sits within noise of a boundary.  A factor of two is also
about the precision such a model has: real costs depend on the surrounding code.
"""
from __future__ import annotations

import json
import math
import os
import platform
import tempfile
import threading
import time
from dataclasses import dataclass

import sympy
from sympy.core.function import AppliedUndef
from sympy.core.relational import Relational
from sympy.logic.boolalg import And, BooleanAtom, Not, Or, Xor

from coarsen.symbolic import (OrElse, PowerOutOfRange, PowerOverflows, PowerUnderflows,
                              UnderflowCosts, float_of, gamma as branch_phi, is_branch_phi)

from ..ir.primitives import REGISTRY, CostClass

__all__ = ["Weights", "default_weights", "calibrate", "machine_weights", "clear_weights_memo",
           "expr_cost", "call_weight", "call_cost", "function_cost", "partial_weight", "price",
           "CallCost", "UnknownCost", "SYMBOLIC_COSTS", "quantize", "ENV", "CACHE_FILE"]

ENV = "COARSEN_COST_WEIGHTS"
CACHE_FILE = "cost_weights.json"
_FORMAT = 4                       # bump when the kernels, the quantization or the floor change
_WEIGHT_NAMES = ("add", "mul", "div", "sqrt", "exp", "trig", "pow", "tape")
_QMIN, _QMAX = 1.0, 128.0


@dataclass(frozen=True)
class Weights:
    """Relative cost of one operation in compiled (Numba, float64) code, an add = 1."""
    add: float = 1.0      # add, subtract, negate, compare, Abs, Min/Max, sign
    mul: float = 1.0
    div: float = 4.0      # division, reciprocal (x**-1)
    sqrt: float = 4.0     # sqrt (x**0.5, x**-0.5 count as sqrt + div where negative)
    exp: float = 16.0     # exp, log, expm1, log1p
    trig: float = 24.0    # sin, cos, tan, tanh, atan, asin, acos, atan2, sinh, cosh, erf...
    pow: float = 32.0     # x**y with y not a small integer or +-1/2
    tape: float = 2.0     # one float64 pushed to a tape in the forward sweep and popped in the
                          # reverse sweep (store, load, position bumps, cache traffic)
    source: str = "default"   # "default" or "calibrated"

    def __post_init__(self):
        for name in _WEIGHT_NAMES:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                    or v < 0:
                raise ValueError(f"Weights.{name} must be a finite number >= 0, got {v!r}")
            object.__setattr__(self, name, float(v))
        if self.source not in ("default", "calibrated"):
            raise ValueError(f"Weights.source must be 'default' or 'calibrated', got "
                             f"{self.source!r}")

    def key(self) -> str:
        """Stable short text of the eight weights (``source`` excluded), for cache keys."""
        return "cw:" + ",".join(f"{n}={getattr(self, n):.17g}" for n in _WEIGHT_NAMES)

    def as_mapping(self) -> dict[str, float]:
        """The eight weights by name (what the JSON cache stores)."""
        return {n: getattr(self, n) for n in _WEIGHT_NAMES}

    def of(self, cls: CostClass) -> float:
        """The weight of one operation of ``cls`` (``FREE``: 0; ``CALL`` raises ValueError)."""
        if cls is CostClass.FREE:
            return 0.0
        if cls is CostClass.CALL:
            raise ValueError("the cost model does not price a call of an array routine "
                             "(CostClass.CALL)")
        return getattr(self, cls.value)


def default_weights() -> Weights:
    """The built-in weights (``source="default"``)."""
    return Weights()


# --------------------------------------------------------------------------- call weights
class UnknownCost(LookupError):
    """A call the cost model has no cost for: register the primitive with its ``cost`` (or,
    for a SymPy function no primitive stands for, add it to ``SYMBOLIC_COSTS``)."""


@dataclass(frozen=True)
class CallCost:
    """The cost of one call (``CostClass`` members) and of its local partial in fine-grained
    reverse mode (None where it has none)."""
    cost: tuple
    partial: tuple | None


_ADD, _POW = (CostClass.ADD,), (CostClass.POW,)
#: the SymPy functions no primitive stands for, by class: coarsen.symbolic's branch phi (one
#: add, a select), ``float_of`` and the closed forms' guards (priced as the dearest class, what
#: they cost before calls were priced from the registry: cheaper would change plans), and
#: SymPy's ``Heaviside`` (a select) and ``factorial`` that its printer prints.  The guards are
#: no ``sympy.Function``, so the fine estimate never asks for their partial.
SYMBOLIC_COSTS: dict[type, CallCost] = {
    branch_phi: CallCost(_ADD, _ADD),
    float_of: CallCost(_POW, _ADD),
    sympy.Heaviside: CallCost(_ADD, _ADD),
    sympy.factorial: CallCost(_POW, _ADD),
    PowerOutOfRange: CallCost(_POW, None),
    PowerOverflows: CallCost(_POW, None),
    PowerUnderflows: CallCost(_POW, None),
    UnderflowCosts: CallCost(_POW, None),
    OrElse: CallCost(_POW, None),
}
_SYMBOLIC_BY_NAME = {cls.__name__: c for cls, c in SYMBOLIC_COSTS.items()}

_INDEX: dict[str, CallCost] = {}
_INDEXED = [0]


def _registry_index() -> dict[str, CallCost]:
    """name -> CallCost over the registry: every op's name, aliases and ``math`` spellings
    (rebuilt when the registry grows); a name two primitives claim raises."""
    if _INDEXED[0] != len(REGISTRY):
        index, owner = {}, {}
        for prim in REGISTRY.values():
            entry = CallCost(prim.cost, prim.partial_cost)
            for n in dict.fromkeys((prim.name, *prim.aliases, *prim.math)):
                if n in owner and owner[n] != prim.name:
                    raise ValueError(f"cost model: {n!r} names both {owner[n]!r} and "
                                     f"{prim.name!r}")
                owner[n] = prim.name
                index[n] = entry
        _INDEX.clear()
        _INDEX.update(index)
        _INDEXED[0] = len(REGISTRY)
    return _INDEX


def _lookup(name: str, symbolic: bool) -> CallCost:
    if symbolic and name in _SYMBOLIC_BY_NAME:
        return _SYMBOLIC_BY_NAME[name]
    got = _registry_index().get(name)
    if got is None:
        raise UnknownCost(f"the cost model has no cost for a call of {name!r}: register the "
                          "primitive with cost= (coarsen/ir/primitives) or, for a SymPy function "
                          "no primitive stands for, add it to costmodel.SYMBOLIC_COSTS")
    return got


def call_cost(name: str) -> CallCost:
    """The cost of a call by its SymPy or Python name (a ``math.``/``np.`` prefix is ignored;
    ``"gamma"`` is the branch phi); raises ``UnknownCost``."""
    return _lookup(name.rsplit(".", 1)[-1], True)


def function_cost(e) -> CallCost:
    """The cost of the SymPy function node ``e``: by its class in ``SYMBOLIC_COSTS``, else by
    its name in the registry (``sympy.gamma``, the Gamma function, is the primitive ``gamma``;
    an undefined function by its name); raises ``UnknownCost``."""
    got = SYMBOLIC_COSTS.get(type(e))
    if got is not None:
        return got
    name = str(e.func) if isinstance(e, AppliedUndef) else type(e).__name__
    return _lookup(name, False)


def price(costs, weights: Weights) -> float:
    """The weight of a tuple of ``CostClass`` members."""
    return sum(weights.of(c) for c in costs)


def call_weight(name: str, weights: Weights) -> float:
    """Weight of one call by its SymPy/Python name (a ``math.``/``np.`` prefix is ignored)."""
    return price(call_cost(name).cost, weights)


def partial_weight(e, weights: Weights) -> float:
    """What fine-grained reverse mode pays for the local partial of the SymPy call ``e``
    (``partial_cost`` of its primitive); raises ``UnknownCost`` where it has none."""
    got = function_cost(e)
    if got.partial is None:
        raise UnknownCost(f"the cost model has no partial cost for {type(e).__name__}")
    return price(got.partial, weights)


# --------------------------------------------------------------------------- expression cost
def _roots(obj) -> list:
    """The expressions in ``obj`` in count_ops' order (explicit stack; no recursion)."""
    out = []
    todo = [obj]
    while todo:
        o = todo.pop()
        if isinstance(o, sympy.Basic):
            out.append(o)
        elif isinstance(o, dict):
            todo.extend(reversed(list(o.values())))
        elif isinstance(o, tuple) and len(o) == 2 and isinstance(o[0], sympy.Symbol) \
                and isinstance(o[1], (sympy.Basic, int, float)):
            todo.append(o[1])
        elif isinstance(o, (list, tuple)):
            todo.extend(reversed(o))
        elif isinstance(o, (int, float, bool)) or o is None:
            continue
        else:
            out.append(sympy.sympify(o))
    return out


def _small_power(exp) -> tuple[int, bool] | None:
    """(|n|, is_half) for an exponent the printer emits without ``pow``, else None: a rational
    +-1/2 (``sqrt``), a Float 0.5, or an integer with |n| <= 64 (a Float exponent other than
    0.5 prints as ``x**(2.0)``, a ``pow`` call)."""
    if exp.is_Rational:
        if exp.q == 2 and abs(exp.p) == 1:
            return 0, True
        if exp.is_Integer and abs(int(exp)) <= 64:
            # x*x*x up to 3; ``x**6`` beyond, which Numba expands for a literal integer
            # exponent into multiplications by squaring (no pow call)
            return abs(int(exp)), False
        return None
    if exp.is_Float and float(exp) == 0.5:
        return 0, True
    return None


def _int_power_muls(n: int) -> int:
    """Multiplications of ``x**n`` by squaring: 0, 0, 1, 2, 2 for n = 0..4."""
    return max(0, n.bit_length() - 1 + bin(n).count("1") - 1)


def _is_denominator(f) -> bool:
    """A factor the printer moves below the fraction bar: a power with a negative rational
    exponent (``a*x**-2`` prints ``a/(x*x)``; ``a*x**-0.5`` stays ``a*x**(-0.5)``)."""
    return f.is_Pow and f.exp.is_Rational and f.exp.is_negative


def _node(e, absorbed: bool, w: Weights) -> tuple[float, list]:
    """Own cost of node ``e`` and its children as (expr, absorbed) pairs."""
    if e.is_Atom or isinstance(e, BooleanAtom) or not e.args:
        return 0.0, []
    args = e.args
    if e.is_Add:
        return (len(args) - 1) * w.add, [
            (a, a.is_Mul and a.args[0] is sympy.S.NegativeOne) for a in args]
    if e.is_Mul:
        factors = list(args)
        own = 0.0
        if factors[0] is sympy.S.NegativeOne:
            factors = factors[1:]
            if not absorbed:
                own += w.add
        kids = [(f, f.is_Pow and _is_denominator(f)) for f in factors]
        ndens = sum(1 for _, d in kids if d)
        nops = len(factors) - 1 + (1 if ndens == len(factors) else 0)
        if ndens:
            own += w.div + (nops - 1) * w.mul
        else:
            own += nops * w.mul
        return own, kids
    if e.is_Pow:
        small = _small_power(e.exp)
        if small is None:
            own = w.pow                 # x**(-1.37) is one pow call, also below a fraction bar
        else:
            n, half = small
            own = _int_power_muls(n) * w.mul + (w.sqrt if half else 0.0)
            if e.exp.is_negative and not absorbed:
                own += w.div
        return own, [(e.base, False), (e.exp, False)]
    if isinstance(e, sympy.Piecewise):
        own = sum(w.add for _, c in args if c is not sympy.true)
        kids = []
        for ex, c in args:
            kids.append((ex, False))
            kids.append((c, False))
        return own, kids
    if isinstance(e, (And, Or, Xor)):
        return (len(args) - 1) * w.add, [(a, False) for a in args]
    if isinstance(e, (Not, Relational)):
        return w.add, [(a, False) for a in args]
    if isinstance(e, (sympy.Max, sympy.Min)):
        return max(1, len(args) - 1) * price(function_cost(e).cost, w), \
            [(a, False) for a in args]
    if is_branch_phi(e):
        return w.add, [(a, False) for a in args]
    if isinstance(e, (sympy.Function, sympy.Derivative, sympy.Integral, sympy.Sum,
                      sympy.Product)) or e.is_Function:
        return price(function_cost(e).cost, w), [(a, False) for a in args]
    # Tuple, containers, other Basic: their contents only
    return 0.0, [(a, False) for a in args if isinstance(a, sympy.Basic)]


def expr_cost(obj, weights: Weights, limit: float | None = None) -> float:
    """Weighted operation cost of ``obj`` (see the module docstring); > limit once above it."""
    memo: dict[tuple[int, bool], float] = {}
    pending: dict[tuple[int, bool], tuple[float, list]] = {}
    total = 0.0
    for root in _roots(obj):
        stack = [(root, False, False)]
        cost = 0.0
        while stack:
            e, absorbed, expanded = stack.pop()
            key = (id(e), absorbed)
            if not expanded:
                if key in memo:
                    continue
                own, kids = _node(e, absorbed, weights)
                if not kids:
                    memo[key] = own
                    continue
                kids = [(k, a) for k, a in kids if not k.is_Atom]     # atoms cost nothing
                if not kids:
                    memo[key] = own
                    continue
                pending[key] = (own, kids)
                stack.append((e, absorbed, True))
                stack.extend((k, a, False) for k, a in kids)
                continue
            own, kids = pending.pop(key)
            cost = own + sum([memo[(id(k), a)] for k, a in kids])
            memo[key] = cost
            if limit is not None and total + cost > limit:
                return total + cost
        total += memo[(id(root), False)]
        if limit is not None and total > limit:
            return total
    return total


# --------------------------------------------------------------------------- calibration
def quantize(ratio: float) -> float:
    """Nearest power of two by value (ties up), clamped to [1, 128]; 1 for NaN or <= 1."""
    if math.isnan(ratio) or ratio <= _QMIN:
        return _QMIN
    if ratio >= _QMAX:
        return _QMAX
    lo = 2.0 ** math.floor(math.log2(ratio))
    q = lo if ratio - lo < 2 * lo - ratio else 2 * lo
    return min(_QMAX, max(_QMIN, q))


def _kernels():
    """The timing kernels (Numba imported here, so that the module imports without it)."""
    from numba import njit

    @njit(cache=False)
    def k_add(n, x, c):
        for _ in range(n):
            x = x + c
        return x

    @njit(cache=False)
    def k_add2(n, x, c):
        for _ in range(n):
            x = (x + c) + c
        return x

    @njit(cache=False)
    def k_mul(n, x, c):
        for _ in range(n):
            x = x * c
        return x

    @njit(cache=False)
    def k_div(n, x, c):
        for _ in range(n):
            x = x / c
        return x

    @njit(cache=False)
    def k_sqrt(n, x, c):            # sqrt + add; fixed point 2.618...
        for _ in range(n):
            x = math.sqrt(x) + c
        return x

    @njit(cache=False)
    def k_exp(n, x, c):             # exp + subtract; fixed point 0.567...
        for _ in range(n):
            x = math.exp(c - x)
        return x

    @njit(cache=False)
    def k_sin(n, x, c):             # sin + add; fixed point 1.93...
        for _ in range(n):
            x = math.sin(x) + c
        return x

    @njit(cache=False)
    def k_pow(n, x, c, p):          # pow + add; fixed point near 0.14
        for _ in range(n):
            x = x ** p + c
        return x

    @njit(cache=False)
    def k_tape(n, x, c, buf):       # forward: add chain + push; reverse: pop + add chain
        for i in range(n):
            x = x + c
            buf[i] = x
        y = 0.0
        for j in range(n):
            y = y + buf[n - 1 - j]
        return x + y

    return k_add, k_add2, k_mul, k_div, k_sqrt, k_exp, k_sin, k_pow, k_tape


def _best(fn, args, repeats: int) -> float:
    fn(*args)                       # compile (first call) and warm up
    best = math.inf
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        r = fn(*args)
        t = time.perf_counter() - t0
        if not math.isfinite(r):
            raise ArithmeticError(f"calibration kernel {fn} diverged")
        best = min(best, t)
    return best


#: the least weight of a taped float (see ``calibrate``)
TAPE_FLOOR = 2.0


def calibrate(*, trips: int = 200_000, repeats: int = 5) -> Weights:
    """Measure this machine's weights (see the module docstring); raises if it cannot."""
    raw = _measure_ratios(trips, repeats)
    weights = {k: quantize(v) for k, v in raw.items()}
    # the dependent chain hides a tape's store and load (they are off its critical path, and
    # the buffer stays in cache): the measured ratio is about 0.  Generated gradients are
    # throughput-bound and their tapes outgrow the cache, where a taped float costs at least
    # its store and its load: TAPE_FLOOR adds.  (Measured on the chains of paper_repro's claim
    # (e) and the apps: with 1, the model preferred taping partials where that lost to fine.)
    weights["tape"] = max(weights["tape"], TAPE_FLOOR)
    return Weights(**weights, source="calibrated")


def _measure_ratios(trips: int, repeats: int) -> dict[str, float]:
    """Unquantized cost ratios to one dependent add, by weight name."""
    import numpy as np

    if trips < 1000:
        raise ValueError("calibrate: trips must be at least 1000")
    k_add, k_add2, k_mul, k_div, k_sqrt, k_exp, k_sin, k_pow, k_tape = _kernels()
    n = int(trips)
    buf = np.empty(n, dtype=np.float64)
    t_add1 = _best(k_add, (n, 1.0, 1e-9), repeats)
    t_add2 = _best(k_add2, (n, 1.0, 1e-9), repeats)
    add = t_add2 - t_add1                       # one dependent add
    overhead = max(0.0, t_add1 - add)           # loop control, call: what is not the chain
    if not add > 0 or add < 1e-3 * t_add1:
        raise ArithmeticError("calibrate: the add chain did not time (got %r s)" % (add,))

    def ratio(t, extra_adds=0):
        return (t - overhead - extra_adds * add) / add

    raw = {
        "add": 1.0,
        "mul": ratio(_best(k_mul, (n, 1.0, 1.0 - 1e-12), repeats)),
        "div": ratio(_best(k_div, (n, 1.0, 1.0 - 1e-12), repeats)),
        "sqrt": ratio(_best(k_sqrt, (n, 1.0, 1.0), repeats), 1),
        "exp": ratio(_best(k_exp, (n, 0.5, 0.0), repeats), 1),
        "trig": ratio(_best(k_sin, (n, 1.0, 1.0), repeats), 1),
        "pow": ratio(_best(k_pow, (n, 0.1, 0.1, 1.37), repeats), 1),
        "tape": (_best(k_tape, (n, 0.0, 1e-9, buf), repeats) - 2 * overhead - 2 * add) / add,
    }
    return raw


# --------------------------------------------------------------------------- machine weights
_MEMO: dict[str, Weights] = {}
_LOCK = threading.Lock()


def clear_weights_memo() -> None:
    """Forget the in-process weights (the next ``machine_weights()`` reads the file again)."""
    with _LOCK:
        _MEMO.clear()


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                head, _, value = line.partition(":")
                if head.strip() in ("model name", "Hardware", "cpu model", "Processor"):
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _machine_key() -> str:
    from coarsen.lowering.cache import toolchain_versions

    tv = toolchain_versions()
    return "|".join((f"format {_FORMAT}", platform.machine(), _cpu_model(),
                     f"numba {tv.get('numba')}", f"python {tv.get('python')}"))


def _read_cached(path, key: str) -> Weights | None:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        if not isinstance(data, dict) or data.get("machine") != key:
            return None
        ws = data.get("weights")
        if not isinstance(ws, dict) or set(ws) != set(_WEIGHT_NAMES):
            return None
        return Weights(**{n: ws[n] for n in _WEIGHT_NAMES}, source="calibrated")
    except (OSError, ValueError, TypeError):
        return None


def _write_cached(path, key: str, w: Weights) -> None:
    text = json.dumps({"machine": key, "weights": w.as_mapping()}, sort_keys=True, indent=1)
    fd, tmp = tempfile.mkstemp(prefix=".cost_weights.", suffix=".tmp", dir=os.fspath(path.parent))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _calibrated_for_machine() -> Weights:
    path = None
    key = None
    try:
        from coarsen.lowering.cache import cache_dir

        key = _machine_key()
        path = cache_dir() / CACHE_FILE
        cached = _read_cached(path, key)
        if cached is not None:
            return cached
    except Exception:
        path = None
    try:
        w = calibrate()
    except Exception:
        return default_weights()
    if path is not None:
        try:
            _write_cached(path, key, w)
        except Exception:
            pass
    return w


def machine_weights() -> Weights:
    """This machine's weights per ``$COARSEN_COST_WEIGHTS`` (see the module docstring); never raises."""
    mode = os.environ.get(ENV, "calibrate").strip().lower() or "calibrate"
    if mode not in ("default", "calibrate"):
        mode = "default"
    with _LOCK:
        w = _MEMO.get(mode)
        if w is None:
            try:
                w = default_weights() if mode == "default" else _calibrated_for_machine()
            except Exception:
                w = default_weights()
            _MEMO[mode] = w
        return w

