"""Cost classes on the primitive registry (issue 42, item 4).

What a call costs lives on its ``Primitive`` (``cost``, ``partial_cost``, ``aliases``): the cost
model, the strategy planner and the hoisting pass read it there.  Checked here: every primitive
has a cost; every name the cost model can meet has one (the registry's ops and their SymPy
forms, their first and second derivatives, the stable rewrites, the SymPy functions the
printer prints); an unknown name or function raises instead of getting a default weight; and
the costs equal those of the name tables the registry replaced (``LEGACY_*`` below, a frozen
copy: the estimates, hence the plans, must not change)."""
import pytest
import sympy
from sympy.codegen.cfunctions import expm1, log1p, log2, log10
from sympy.codegen.numpy_nodes import logaddexp

from coarsen.analysis import costmodel as cm
from coarsen.analysis.costmodel import CallCost, UnknownCost, Weights, call_cost, function_cost
from coarsen.ir.hoist import hoistable
from coarsen.ir.primitives import REGISTRY, CostClass
from coarsen.ir.primitives.core import Primitive, register
from coarsen.symbolic import (CoarsenPythonPrinter, float_of, gamma as phi, stable_rewrite,
                              to_python)

x, y = sympy.symbols("x y", real=True)
# one power of ten per class: a cost's digits say how many ops of each class were counted
TENS = Weights(add=1, mul=10, div=100, sqrt=1e3, exp=1e4, trig=1e5, pow=1e6, tape=1e7)

# ---- the name tables the registry replaced (costmodel.call_weight, strategy's partials)
LEGACY_ADD = {"Abs", "abs", "fabs", "Max", "Min", "max", "min", "maximum", "minimum", "sign",
              "copysign", "Heaviside", "floor", "ceiling", "ceil", "gamma", "where", "select"}
LEGACY_SQRT = {"sqrt"}
LEGACY_EXP = {"exp", "log", "expm1", "log1p", "log10", "log2"}
LEGACY_TRIG = {"sin", "cos", "tan", "tanh", "sinh", "cosh", "atan", "asin", "acos", "atan2",
               "asinh", "acosh", "atanh", "arctan", "arcsin", "arccos", "arctan2", "arcsinh",
               "arccosh", "arctanh", "erf", "erfc", "hypot"}
LEGACY_POW = {"pow", "lgamma", "loggamma"}
LEGACY_PARTIAL_TRIG = {"sin", "cos", "tan", "sinh", "cosh", "asin", "acos", "atan", "atan2", "erf"}
LEGACY_PARTIAL_DIV = {"log", "log1p", "sqrt"}
LEGACY_PARTIAL_RESULT = {"exp", "expm1", "tanh"}
# the hoisting pass's table (ir/hoist.py), and what the registry adds to it: the inverse
# hyperbolic functions, as dear as the others (trig) and as pure
LEGACY_HOISTED = {"exp", "log", "sin", "cos", "tan", "tanh", "sqrt", "expm1", "log1p", "lgamma",
                  "erf", "erfc", "sinh", "cosh", "arctan", "arcsin", "arccos", "log2", "log10",
                  "gamma"}
HOISTED_SINCE = {"arcsinh", "arccosh", "arctanh", "exp2", "angle"}   # exp2, angle: issue 44


def legacy_weight(name, w):
    for names, weight in ((LEGACY_ADD, w.add), (LEGACY_SQRT, w.sqrt), (LEGACY_EXP, w.exp),
                          (LEGACY_TRIG, w.trig)):
        if name in names:
            return weight
    if name == "logaddexp":
        return 3 * w.add + 2 * w.exp
    return w.pow                    # the pow class, and what any unknown name got


def legacy_partial(name, w):
    if name in LEGACY_PARTIAL_TRIG:
        return legacy_weight(name, w) + w.mul
    if name in LEGACY_PARTIAL_DIV:
        return w.div
    if name in LEGACY_PARTIAL_RESULT:
        return w.mul + w.add
    return w.add


# ---- every SymPy function the cost model can meet
def _functions(e):
    return {f for f in sympy.preorder_traversal(e) if isinstance(f, sympy.Basic) and
            not f.is_Atom and (isinstance(f, sympy.Function) or f.is_Function)}


def lifted_forms():
    """Each liftable primitive's SymPy form, its first and second derivatives, and their
    stable rewrites (what a segment, its local Jacobian and a coarse Hessian hold)."""
    out = []
    z = sympy.Symbol("z", real=True)
    for prim in REGISTRY.values():
        if prim.sympy is None or prim.arity is None or prim.boolean:
            continue
        args = (x, y, z)[:prim.arity]
        e = prim.sympy(*args)
        out.append(e)
        for v in args:
            d = sympy.diff(e, v)
            out.append(d)
            out.extend(sympy.diff(d, u) for u in args)
    out += [stable_rewrite(sympy.exp(x) - 1), stable_rewrite(sympy.log(1 + x)),
            stable_rewrite(sympy.log(sympy.exp(x) + sympy.exp(y)))]
    return out


def printed_functions():
    """The SymPy functions coarsen's printer prints (what can reach generated code): SymPy's
    ``math`` table and the printer's own methods, less what coarsen never builds."""
    printer = CoarsenPythonPrinter()
    names = set(printer.known_functions) - {"Sqrt", "ln", "isinf", "isnan"}
    names |= {"Heaviside", "sign", "logaddexp", "float_of", "Mod", "PowerOutOfRange",
              "PowerOverflows", "PowerUnderflows", "UnderflowCosts", "OrElse"}
    for n in names:
        assert hasattr(printer, "_print_" + n) or n in printer.known_functions, n
    return names


def test_every_primitive_has_a_cost():
    for name, prim in REGISTRY.items():
        assert prim.cost and all(isinstance(c, CostClass) for c in prim.cost), name
        if prim.partial_cost is not None:
            assert all(isinstance(c, CostClass) for c in prim.partial_cost), name
        # its own name finds it
        assert call_cost(name) == CallCost(prim.cost, prim.partial_cost) or name == "gamma"


def test_registration_without_a_cost_is_refused():
    with pytest.raises(ValueError, match="without a cost"):
        register(Primitive("no_cost_op", None, None, arity=1))
    assert "no_cost_op" not in REGISTRY
    with pytest.raises(TypeError, match="CostClass"):
        Primitive("bad_cost_op", None, None, cost=("add",))


def test_every_function_of_a_lifted_form_is_priced():
    seen = set()
    for e in lifted_forms():
        for f in _functions(e):
            got = function_cost(f)                  # raises UnknownCost where there is none
            cm.expr_cost(f, TENS)
            if isinstance(f, sympy.Function):
                assert got.partial is not None, f
                cm.partial_weight(f, TENS)
            seen.add(type(f).__name__)
    # the forms do hold the SymPy names the aliases are for
    assert {"atan", "asin", "hypot", "expm1", "log1p", "logaddexp", "atan2"} <= seen


def test_every_lifted_form_prints():
    """A primitive given ``sympy=`` needs its SymPy function printed as ``math`` code (the
    printer is strict: it raises on a function it does not know)."""
    for e in lifted_forms():
        assert to_python(e)


def test_every_printed_function_is_priced():
    for name in printed_functions():
        got = call_cost(name)
        assert CostClass.CALL not in got.cost, name
        cm.call_weight(name, TENS)


def test_unknown_names_and_functions_raise():
    with pytest.raises(UnknownCost):
        call_cost("no_such_function")
    with pytest.raises(UnknownCost):
        cm.expr_cost(sympy.Function("mystery")(x) + 1, TENS)
    with pytest.raises(UnknownCost):
        cm.expr_cost(sympy.frac(x + y), TENS)       # a SymPy function no primitive stands for
    with pytest.raises(ValueError, match="array routine"):
        cm.call_weight("sum", TENS)                  # CostClass.CALL: not a scalar's cost


@pytest.mark.parametrize("name", sorted(LEGACY_ADD | LEGACY_SQRT | LEGACY_EXP | LEGACY_TRIG |
                                        LEGACY_POW | {"logaddexp", "math.log1p", "np.arctan"}))
def test_weights_equal_the_replaced_tables(name):
    for w in (TENS, Weights()):
        assert cm.call_weight(name, w) == legacy_weight(name.rsplit(".", 1)[-1], w)


def test_function_costs_equal_the_replaced_tables():
    functions = {f for e in lifted_forms() for f in _functions(e)}
    functions |= {sympy.Abs(x), sympy.sign(x), sympy.Heaviside(x), sympy.floor(x),
                  sympy.ceiling(x), sympy.gamma(x), sympy.loggamma(x), sympy.Mod(x, y),
                  float_of(x), phi(x > 0, x, y), expm1(x), log1p(x), log2(x), log10(x),
                  logaddexp(x, y), sympy.factorial(x)}
    for f in functions:
        name = type(f).__name__
        # SymPy's Gamma function was priced as lgamma; anything else unknown as pow
        old_name = {"gamma": "lgamma"}.get(name, name) if f.func is sympy.gamma else name
        if f.func is phi:
            old_name = "gamma"
        for w in (TENS, Weights()):
            assert cm.expr_cost(f.func(*[sympy.Symbol(f"a{i}") for i in range(len(f.args))]),
                                w) == legacy_weight(old_name, w) or f.func is phi, f
            if isinstance(f, sympy.Function):
                assert cm.partial_weight(f, w) == legacy_partial(name, w), f


def test_hoisted_calls():
    hoisted = {n for n in REGISTRY if hoistable(n)}
    assert hoisted == LEGACY_HOISTED | HOISTED_SINCE
    assert not hoistable("abs") and not hoistable("pow") and not hoistable("no_such_op")
