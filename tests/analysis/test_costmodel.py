"""The cost model's weights (coarsen.analysis.costmodel; issue 11, item 2).

expr_cost is checked against count_ops (unit weights), against hand-counted values of the printed
code (distinct weights per class, so a mixed-up class shows), on shared DAGs with trees of 2**40
nodes and on a chain deeper than Python's recursion limit.  Calibration runs once, small; the
per-machine cache is checked with a counting fake calibrate in a temporary cache directory."""
import json
import math

import pytest
import sympy
from sympy.codegen.cfunctions import expm1
from sympy.codegen.numpy_nodes import logaddexp

from coarsen.analysis import costmodel as cm
from coarsen.analysis.costmodel import Weights, call_weight, expr_cost
from coarsen.symbolic import count_ops, gamma

x, y, a, b = sympy.symbols("x y a b")
UNIT = Weights(1, 1, 1, 1, 1, 1, 1, 1)
# one power of ten per class: a cost's digits say how many ops of each class were counted
TENS = Weights(add=1, mul=10, div=100, sqrt=1e3, exp=1e4, trig=1e5, pow=1e6, tape=1e7)

SAME_AS_COUNT_OPS = [
    x + y + a,                                   # 2 adds
    x - y,                                       # subtraction absorbs the negation
    -x,
    -x * y + a,
    x * y * a,
    x / y,
    1 / y,
    1 / (x * y),
    a * b / (x * y),
    x ** 2,
    x ** y + sympy.exp(x),
    sympy.sqrt(x) + sympy.sin(y) * sympy.cos(x),
    sympy.Max(x, y, a) + sympy.Min(x, y) + sympy.Abs(a),
    sympy.Piecewise((x, x > 0), (y * y, y < 1), (a, True)),
    gamma(x > 0, a * b, b),
    sympy.And(x > 0, y < 1, sympy.Not(a > b)),
    [x * y, (x, y + 1), {"k": sympy.log(x) - a}, 3, None],
]


@pytest.mark.parametrize("expr", SAME_AS_COUNT_OPS, ids=str)
def test_unit_weights_equal_count_ops(expr):
    assert expr_cost(expr, UNIT) == count_ops(expr)


@pytest.mark.parametrize("expr, unit, tens, ops", [
    (x ** 3, 2, 20, 1),                          # x*x*x: 2 muls (count_ops: 1)
    (x ** 4, 2, 20, 1),                          # squaring twice
    (x ** -2, 2, 110, 1),                        # 1.0/(x*x)
    (x ** -4, 3, 120, 1),
    (1 / sympy.sqrt(x), 2, 1100, 1),             # 1.0/math.sqrt(x)
    (a / y ** 3, 3, 120, 2),                     # a/(y*y*y): one div, 2 muls
    (a * x ** -sympy.Rational(3, 2), 2, 1000100, 2),   # a/x**(1.5): div + pow
    (x ** sympy.Float(-0.5), 1, 1e6, 1),         # printed x**(-0.5): one pow call
    (x ** 5, 3, 30, 1),                          # x**5: Numba expands it, 3 muls by squaring
    (x ** 70, 1, 1e6, 1),                        # beyond 64: priced as one pow call
])
def test_documented_differences(expr, unit, tens, ops):
    assert count_ops(expr) == ops
    assert expr_cost(expr, UNIT) == unit
    assert expr_cost(expr, TENS) == tens


@pytest.mark.parametrize("expr, tens", [
    (x + y * a, 11),
    (x / y - a, 101),
    (-(x * y), 11),
    (sympy.sqrt(x + 1), 1001),
    (sympy.exp(x) + sympy.log(y) + expm1(a), 30002),
    (sympy.sin(x) + sympy.atan2(y, x) + sympy.erf(a) + sympy.tanh(b), 400003),
    (logaddexp(x, y), 20003),                    # max(x, y) + log1p(exp(-abs(x - y)))
    (x ** y, 1e6),
    (x ** (y + 1), 1e6 + 1),                     # the exponent's own ops count
    (sympy.gamma(x), 1e6),                       # SymPy's Gamma function: lgamma, not the phi
    (gamma(x > y, x, y), 2),                     # the phi: one add, its condition another
    (sympy.Max(x, y, a, b), 3),
])
def test_classes_weigh_what_the_weights_say(expr, tens):
    assert expr_cost(expr, TENS) == tens


def test_call_weight_by_name():
    w = Weights(add=1, mul=2, div=3, sqrt=5, exp=7, trig=11, pow=13, tape=17)
    assert [call_weight(n, w) for n in ("Abs", "abs", "Max", "min", "sign", "gamma")] == [1] * 6
    assert call_weight("sqrt", w) == 5
    assert [call_weight(n, w) for n in ("exp", "log", "expm1", "math.log1p")] == [7] * 4
    assert [call_weight(n, w) for n in ("sin", "cos", "tan", "tanh", "atan", "asin", "acos",
                                        "atan2", "sinh", "cosh", "erf", "np.arctan")] == [11] * 12
    assert call_weight("pow", w) == 13 and call_weight("lgamma", w) == 13
    assert call_weight("logaddexp", w) == 3 * 1 + 2 * 7
    with pytest.raises(cm.UnknownCost):                       # unknown: no default weight
        call_weight("no_such_function", w)


def test_shared_subexpressions_count_per_use_and_per_context():
    t = -x * y                                   # absorbed in a sum, a negation alone
    d = y ** -2                                  # a denominator in a product, 1/(y*y) alone
    assert expr_cost([a + t, t], UNIT) == count_ops([a + t, t]) == 4
    assert expr_cost([x * d, d], TENS) == (100 + 10) + (10 + 100)
    s = sympy.sin(x)
    assert expr_cost(sympy.Add(s, sympy.Mul(s, s, evaluate=False), evaluate=False), TENS) \
        == 1 + 10 + 3 * 1e5


def test_dag_with_a_2_to_40_tree_is_exact_and_limit_stops_early():
    e = x
    for _ in range(40):                          # cost(e') = 2 cost(e) + add + mul
        e = sympy.Add(sympy.Mul(e, y, evaluate=False), e, evaluate=False)
    assert expr_cost(e, UNIT) == 2.0 ** 41 - 2
    assert expr_cost(e, TENS) == 11 * (2.0 ** 40 - 1)
    assert expr_cost(e, UNIT, limit=1000) > 1000
    assert count_ops(e, limit=1000) > 1000
    assert expr_cost(x + y, UNIT, limit=1) == 1  # not above the limit: the exact cost


def test_deeper_than_the_recursion_limit():
    e = x
    for _ in range(5000):
        e = sympy.sin(e, evaluate=False)
    assert expr_cost(e, TENS) == 5000 * 1e5


def test_weights_checked_and_keyed():
    assert cm.default_weights() == Weights() and Weights().source == "default"
    assert Weights().key() == Weights(source="calibrated").key()
    assert Weights().key() != Weights(tape=4).key()
    assert Weights(div=8).key() == Weights(div=8.0).key()
    with pytest.raises(ValueError):
        Weights(add=-1)
    with pytest.raises(ValueError):
        Weights(exp=math.inf)
    with pytest.raises(ValueError):
        Weights(source="guessed")


def test_quantize():
    assert [cm.quantize(r) for r in (-3, 0.2, 1.4, 1.6, 2.9, 3.1, 5.9, 6.1, 11.3, 12.5)] == \
        [1, 1, 1, 2, 2, 4, 4, 8, 8, 16]
    assert cm.quantize(1e9) == 128 and cm.quantize(math.nan) == 1 and cm.quantize(math.inf) == 128


def test_calibrate_small():
    pytest.importorskip("numba")
    w = cm.calibrate(trips=20_000, repeats=2)
    assert w.source == "calibrated" and w.add == 1
    for v in w.as_mapping().values():
        assert 1 <= v <= 128 and v == 2.0 ** round(math.log2(v))


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """A temporary cache directory, no in-process memo, and a counting fake calibrate."""
    monkeypatch.setenv("COARSEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(cm.ENV, raising=False)
    calls = []

    def fake(**_):
        calls.append(1)
        return Weights(div=8, trig=32, tape=1, source="calibrated")

    monkeypatch.setattr(cm, "calibrate", fake)
    cm.clear_weights_memo()
    yield calls
    cm.clear_weights_memo()


def test_default_mode(fresh, monkeypatch):
    monkeypatch.setenv(cm.ENV, "default")
    assert cm.machine_weights() == cm.default_weights() and not fresh


def test_calibrated_once_per_machine_then_read_back(fresh, tmp_path):
    w = cm.machine_weights()
    assert w == Weights(div=8, trig=32, tape=1, source="calibrated") and len(fresh) == 1
    path = tmp_path / "cache" / cm.CACHE_FILE
    data = json.loads(path.read_text())
    assert data["weights"]["div"] == 8
    assert cm.machine_weights() is w and len(fresh) == 1          # memoized in the process
    cm.clear_weights_memo()
    assert cm.machine_weights() == w and len(fresh) == 1          # read back from the file
    for text in ("{not json", json.dumps({**data, "machine": "another machine"}),
                 json.dumps({**data, "weights": {"add": 1}})):
        path.write_text(text)
        cm.clear_weights_memo()
        assert cm.machine_weights() == w
        assert json.loads(path.read_text()) == data               # rewritten
    assert len(fresh) == 4
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_failed_calibration_gives_defaults(fresh, monkeypatch, tmp_path):
    def broken(**_):
        raise RuntimeError("no compiler today")

    monkeypatch.setattr(cm, "calibrate", broken)
    monkeypatch.setenv(cm.ENV, "calibrate")
    assert cm.machine_weights() == cm.default_weights()
    assert not (tmp_path / "cache" / cm.CACHE_FILE).exists()
