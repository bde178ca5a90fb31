"""Every argument of a call of a NumPy/math function or array method coarsen accepts is either
understood (the value and the gradient are NumPy's) or refused with a ``CoarsenError`` naming
it (``coarsen.frontend.signatures``): none is dropped.

The first tests are issue 41's repros: ``np.transpose(x, (1, 0, 2))`` dropped its axes (every
axis reversed: wrong values and gradients, silently), ``axes=`` was refused.  The sweep then
takes every spelling of the frontend's tables (``MATH_FUNCS``, ``NUMPY_FUNCS``,
``LINALG_FUNCS``, ``BUILTIN_FUNCS``, the methods of ``METHOD_UNDERSTOOD``) and, for each
optional parameter of its signature (``signatures.signature_of``: NumPy's own, by
``inspect.signature``), passes it by position and by keyword.  ``BASES`` (below) gives each
function's required arguments; a spelling with optional parameters and no base fails the test,
as does a parameter with no sample value: the tables cannot drift from the registry.
"""
from __future__ import annotations

import importlib
import inspect
import math
import re
import sys

import numpy as np
import pytest

import coarsen
from coarsen import CoarsenError
from coarsen.frontend.calls import METHOD_UNDERSTOOD
from coarsen.frontend.signatures import signature_of, spelling_object
from coarsen.frontend.source import BUILTIN_FUNCS, LINALG_FUNCS, MATH_FUNCS, NUMPY_FUNCS
from tests.oracle import check_against_oracle

P = inspect.Parameter


# ------------------------------------------------------------------ issue 41: np.transpose's axes
W3 = np.linspace(-1.0, 1.0, 24)


def t2_pos(x):
    y = np.transpose(x, (1, 0))
    return np.sum(np.sin(y[0]) * y[1]) + y[2, 0] * y[0, 1]


def t2_kw(x):
    y = np.transpose(x, axes=(1, 0))
    return np.sum(np.sin(y[0]) * y[1]) + y[2, 0] * y[0, 1]


def t2_identity(x):
    y = np.transpose(x, (0, 1))
    return np.sum(np.sin(y[0]) * y[1]) + y[1, 0] * y[0, 2]


def t2_negative(x):
    y = np.transpose(x, (-1, 0))
    return np.sum(np.sin(y[0]) * y[1]) + y[2, 0] * y[0, 1]


def t3_pos(x):
    y = np.transpose(x, (1, 0, 2))
    return np.sum(y[0] * np.cos(y[1])) + y[2, 1, 3] * y[0, 1, 0]


def t3_kw(x):
    y = np.transpose(x, axes=(1, 0, 2))
    return np.sum(y[0] * np.cos(y[1])) + y[2, 1, 3] * y[0, 1, 0]


def t3_method(x):
    y = x.transpose(1, 0, 2)
    return np.sum(y[0] * np.cos(y[1])) + y[2, 1, 3] * y[0, 1, 0]


def t3_method_tuple(x):
    y = x.transpose((1, 0, 2))
    return np.sum(y[0] * np.cos(y[1])) + y[2, 1, 3] * y[0, 1, 0]


def t3_cycle(x):
    y = np.transpose(x, (2, 0, 1))          # shape (4, 2, 3)
    z = np.sin(y) * np.reshape(W3, (4, 2, 3))
    return np.sum(z[1] * y[3]) + np.sum(z)


def t3_in_expression(x):
    return np.sum(np.transpose(x * x, (0, 2, 1))[1] * np.transpose(x, (0, 2, 1))[0])


X2 = np.array([[0.3, -1.2, 0.7], [1.1, 0.4, -0.5]])
X3 = np.linspace(-1.3, 1.7, 24).reshape(2, 3, 4) + 0.01 * np.arange(24).reshape(2, 3, 4) ** 1.5

TRANSPOSES = [(t2_pos, X2), (t2_kw, X2), (t2_identity, X2), (t2_negative, X2),
              (t3_pos, X3), (t3_kw, X3), (t3_method, X3), (t3_method_tuple, X3), (t3_cycle, X3),
              (t3_in_expression, X3)]


@pytest.mark.parametrize("coarse", [True, False], ids=["coarse", "fine"])
@pytest.mark.parametrize("fn,x", TRANSPOSES, ids=[f.__name__ for f, _ in TRANSPOSES])
def test_transpose_axes_value_and_gradient_python(fn, x, coarse):
    check_against_oracle(fn, (x.copy(),), target="python", coarse=coarse)


@pytest.mark.parametrize("coarse", [True, False], ids=["coarse", "fine"])
@pytest.mark.parametrize("fn,x", [(t2_pos, X2), (t3_pos, X3), (t3_kw, X3)],
                         ids=["t2_pos", "t3_pos", "t3_kw"])
def test_transpose_axes_value_and_gradient_cpu(fn, x, coarse):
    check_against_oracle(fn, (x.copy(),), target="cpu", coarse=coarse)


def t3_wrong_rank(x):
    return np.sum(np.transpose(x, (1, 0)))


def t2_repeated(x):
    return np.sum(np.transpose(x, (0, 0)))


def t2_out_of_range(x):
    return np.sum(np.transpose(x, (2, 0)))


def t2_variable_axes(x, k):
    return np.sum(np.transpose(x, (k, 0)))


@pytest.mark.parametrize("fn,args,problem", [
    (t3_wrong_rank, (X3,), r"transpose axes \(1, 0\) do not match a 3-D array"),
    (t2_repeated, (X2,), r"transpose axes \(0, 0\) are not a permutation"),
    (t2_out_of_range, (X2,), r"transpose axes \(2, 0\) are not a permutation"),
    (t2_variable_axes, (X2, 1), "an axis of a transpose must be an integer constant"),
])
def test_transpose_axes_numpy_refuses_are_refused(fn, args, problem):
    with pytest.raises(CoarsenError, match=problem) as err:
        coarsen.differentiate(fn, wrt=0, target="python")(*args)
    assert err.value.filename == __file__ and err.value.lineno is not None
    assert err.value.col_offset is not None and err.value.hint


# ------------------------------------------------------------------ other arguments once dropped
def std_ddof_positional(x):
    return np.std(x, 0, None, None, 1)[0]


def std_ddof_method(x):
    return x.std(0, None, None, 1)[0]


def log_out(x):
    return np.log(x, x)[0, 0]


def eye_columns(x):
    return np.sum(np.eye(3, 4)) * x[0, 0]


def astype_keyword(x):
    return np.sum(x.astype(dtype=np.int64)) * x[0, 0]


def reshape_order(x):
    return np.sum(np.reshape(x, 3, 2)) * x[0, 0]


@pytest.mark.parametrize("fn", [std_ddof_positional, std_ddof_method])
def test_ddof_once_dropped_is_read(fn):
    """std's ddof, once dropped (the population's deviation for the sample's), then refused,
    is read since issue 44: the sample's deviation, by position and in the method."""
    x = X2.copy() + 2.0
    value, (grad,) = coarsen.differentiate(fn, target="python").value_and_grad(x)
    assert value == pytest.approx(np.std(x, 0, ddof=1)[0], rel=1e-14)
    col = x[:, 0] - x[:, 0].mean()
    exp = np.zeros_like(x)
    exp[:, 0] = col / ((x.shape[0] - 1) * np.std(x[:, 0], ddof=1))
    np.testing.assert_allclose(grad, exp, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("fn,name", [
    (log_out, "out"), (eye_columns, "M"), (reshape_order, "order"),
])
def test_arguments_once_dropped_are_refused_by_name(fn, name):
    """Each was dropped, silently: std's ddof (the population's deviation for the sample's),
    np.log's out (taken for math.log's base), np.eye's M (a 3 x 3 identity), np.reshape's
    order (taken for a dimension)."""
    with pytest.raises(CoarsenError, match=f"argument '{name}' is not supported") as err:
        coarsen.differentiate(fn, target="python")(X2.copy() + 2.0)
    assert err.value.filename == __file__ and err.value.lineno is not None and err.value.hint


def test_astype_dtype_by_keyword_is_understood():
    """``x.astype(dtype=np.int64)`` read no keyword: it converted to float64."""
    x = X2 + 2.0
    value, (grad,) = coarsen.differentiate(astype_keyword, target="python").value_and_grad(x)
    assert value == astype_keyword(x)
    assert grad[0, 0] == np.sum(x.astype(np.int64))


# ------------------------------------------------------------------ the registry-wide sweep
# the required arguments of each function (source text over the parameters x, y: 2 x 3 arrays
# in [0.3, 0.7]; s, t: their elements), by spelling; ufuncs and math functions get theirs from
# their arity (``_base``)
BASES = {
    "np.where": ["x > 0.5", "x", "y"], "np.transpose": ["x"], "np.reshape": ["x", "(3, 2)"],
    "np.ravel": ["x"], "np.flip": ["x"], "np.expand_dims": ["x", "0"],
    **{f"np.{r}": ["x"] for r in ("sum", "mean", "prod", "max", "amax", "min", "amin", "std",
                                  "var", "cumsum", "diff", "zeros_like", "ones_like",
                                  "empty_like", "array", "asarray", "copy")},
    "np.dot": ["x", "y.T"], "np.einsum": ["'ij,kj->ik'", "x", "y"],
    "np.zeros": ["(2, 3)"], "np.ones": ["(2, 3)"], "np.empty": ["(2, 3)"],
    "np.full": ["(2, 3)", "0.5"], "np.full_like": ["x", "0.5"], "np.eye": ["3"],
    "np.identity": ["3"], "np.clip": ["x", "0.4", "0.6"], "np.outer": ["x[0]", "y[1]"],
    "np.float64": ["s"], "np.linalg.norm": ["x"], "min": ["s", "t"], "max": ["s", "t"],
    "int": ["s"], "float": ["s"], "bool": ["s"], "math.log": ["s"], "math.hypot": ["s", "t"],
    # issue 44a
    "np.rollaxis": ["x", "1"], "np.squeeze": ["x[None]"], "np.real_if_close": ["x"],
    "np.angle": ["x"], "np.nan_to_num": ["x"], ".squeeze": [],
    ".reshape": ["3", "2"], ".astype": ["np.float64"], ".dot": ["y.T"],
    **{f".{m}": [] for m in ("sum", "mean", "prod", "max", "min", "std", "var", "copy",
                             "flatten", "ravel", "transpose")},
    # joining, splitting and building (issue 44b)
    **{f"np.{j}": ["(x, y)"] for j in ("concatenate", "stack", "vstack", "hstack", "row_stack")},
    "np.append": ["x", "y"], "np.roll": ["x", "1"], "np.rot90": ["x"], "np.repeat": ["x", "2"],
    "np.gradient": ["x[0]"], "np.split": ["x", "[1]"], "np.array_split": ["x", "2"],
    "np.select": ["[x > 0.5]", "[x]"], "np.linspace": ["s", "t"], "sum": ["[s, t]"],
}
BASES.update({      # issue 44a: diagonals, products, sorting, padding
    "np.diagonal": ["x"], "np.diag": ["x[0]"], "np.trace": ["x"], "np.tril": ["x"],
    "np.triu": ["x"], "np.tensordot": ["x", "y.T"], "np.cross": ["x", "y"], "np.sort": ["x"],
    "np.partition": ["x", "1"], "np.pad": ["x", "1"],
})
# a value for each optional parameter, by name
SAMPLES = {
    "axis": "0", "keepdims": "True", "dtype": "np.float64", "out": "y", "ddof": "1",
    "initial": "0.5", "where": "x > 0.4", "order": "'F'", "subok": "True", "copy": "True",
    "casting": "'unsafe'", "signature": "None", "like": "None", "device": "None",
    "ndmin": "2", "ndmax": "3", "M": "4", "k": "1", "base": "2.0", "key": "None",
    "default": "0.0", "mean": "np.mean(x, axis=0, keepdims=True)", "correction": "1",
    "prepend": "0.0", "append": "0.0", "min": "0.4", "max": "0.6", "ord": "1",
    "optimize": "False", "axes": "(1, 0)", "n": "2", "shape": "(3, 2)", "a_min": "0.4",
    "a_max": "0.6", "tol": "1000", "deg": "True", "nan": "0.0", "posinf": "1.0",
    "neginf": "-1.0", "start": "0", "edge_order": "2", "num": "5", "endpoint": "False",
    "retstep": "True",
}
SAMPLES.update({    # issue 44a
    "offset": "1", "axis1": "1", "axis2": "0", "axisa": "-1", "axisb": "-1", "axisc": "-1",
    "kind": "'stable'", "stable": "True", "mode": "'constant'",
})
# what fills a positional parameter before the one swept whose default has no literal
FILLERS = {"dtype": "np.float64", "keepdims": "False", "initial": "0.0", "a_min": "0.4", "a_max": "0.6"}
# the argument the domain of each needs (arccosh: x > 1)
DOMAIN = {"arccosh": "x + 1.0", "acosh": "s + 1.0"}


def spellings():
    out = [f"math.{n}" for n in MATH_FUNCS] + [f"np.{n}" for n in NUMPY_FUNCS]
    out += [f"np.linalg.{n}" for n in LINALG_FUNCS] + list(BUILTIN_FUNCS)
    return out + [f".{m}" for m in METHOD_UNDERSTOOD]


def _base(spelling):
    if spelling in BASES:
        return BASES[spelling]
    obj = spelling_object(spelling)
    name = spelling.rsplit(".", 1)[-1]
    if isinstance(obj, np.ufunc):
        first = DOMAIN.get(name, "x")
        return {1: [first], 2: ["x", "y.T" if name == "matmul" else "y"]}[obj.nin]
    if spelling.startswith("math."):
        n = len([p for p in signature_of(spelling).parameters.values() if p.default is P.empty])
        return [DOMAIN.get(name, "s"), "t"][:n]
    return None


def _literal(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    return None


def _calls(spelling):
    """``(parameter, form, argument source, names passed beyond the base)`` for each optional
    parameter, by position and by keyword."""
    sig = signature_of(spelling)
    params = [p for p in sig.parameters.values() if p.kind not in (P.VAR_POSITIONAL,
                                                                  P.VAR_KEYWORD)]
    optional = [p for p in params if p.default is not P.empty or p.kind == P.KEYWORD_ONLY]
    if not optional:
        return []
    base = _base(spelling)
    assert base is not None, f"add the required arguments of {spelling} to BASES"
    positional = [p for p in params if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
    var = any(p.kind == P.VAR_POSITIONAL for p in sig.parameters.values())
    n_base = 0 if var else len(base)
    out = []
    for p in optional:
        if positional.index(p) < n_base if p in positional else False:
            continue                                     # np.where's x, y: part of the base
        assert p.name in SAMPLES, f"add a sample value of {spelling}'s {p.name!r} to SAMPLES"
        if p in positional and not var:
            k = positional.index(p)
            fill, names = [], []
            for q in positional[n_base:k]:
                lit = _literal(q.default)
                fill.append(lit if lit is not None else FILLERS.get(q.name, SAMPLES[q.name]))
                if fill[-1] != "None":                   # None for a None default: absent
                    names.append(q.name)
            out.append((p.name, "positional", ", ".join(base + fill + [SAMPLES[p.name]]),
                        names + [p.name]))
        if p.kind != P.POSITIONAL_ONLY:
            out.append((p.name, "keyword", ", ".join(base + [f"{p.name}={SAMPLES[p.name]}"]),
                        [p.name]))
    return out


def _call_source(spelling, args):
    if spelling.startswith("."):
        return f"x{spelling}({args})"
    return f"{spelling}({args})"


def _cases():
    cases = []
    for sp in spellings():
        if sp in ("range", "np.shape"):      # a for loop's header; unpacking only
            continue
        for name, form, args, passed in _calls(sp):
            cases.append((sp, name, form, _call_source(sp, args), passed))
    return cases


CASES = _cases()


def _namespace(x, y):
    return {"np": np, "math": math, "x": x, "y": y, "s": float(x[0, 1]), "t": float(y[1, 2])}


def _wrapped(call, result):
    """A float scalar function of the call's result, sensitive to each element's place."""
    if np.ndim(result) == 0:
        return f"({call}) * x[0, 0]"
    if result.dtype == bool:
        return f"np.sum(np.where({call}, x, y))"
    return f"np.sum(np.cumsum(np.ravel({call})) ** 2) * x[0, 0]"


@pytest.fixture(scope="module")
def case_module(tmp_path_factory):
    """One module holding a function per case (coarsen reads functions from their files)."""
    rng = np.random.default_rng(41)
    x = rng.uniform(0.3, 0.7, (2, 3))
    y = rng.uniform(0.3, 0.7, (2, 3))
    lines, refs = ["import math", "import numpy as np", ""], {}
    for k, (sp, name, form, call, passed) in enumerate(CASES):
        ns = _namespace(x.copy(), y.copy())
        try:
            result = np.asarray(eval(call, ns))
            if "empty" in sp and sp != "np.empty_like" or sp == "np.empty_like":
                src = f"({call}).size * x[0, 0]"   # the elements of an empty array are arbitrary
            else:
                src = _wrapped(call, result)
        except Exception as e:                       # NumPy refuses it too
            refs[k] = e
            src = f"np.sum({call}) * x[0, 0]"
        lines += [f"def case_{k}(x, y):", "    s = x[0, 1]", "    t = y[1, 2]",
                  f"    return {src}", ""]
    folder = tmp_path_factory.mktemp("call_signatures")
    (folder / "call_signature_cases.py").write_text("\n".join(lines))
    sys.path.insert(0, str(folder))
    try:
        mod = importlib.import_module("call_signature_cases")
    finally:
        sys.path.remove(str(folder))
    return mod, x, y, refs


def _fd_grad(fn, args, p, h=1e-6):
    base = [a.copy() for a in args]
    g = np.zeros_like(base[p])
    for i in np.ndindex(g.shape):
        up = [a.copy() for a in base]
        dn = [a.copy() for a in base]
        up[p][i] += h
        dn[p][i] -= h
        g[i] = (fn(*up) - fn(*dn)) / (2 * h)
    return g


def _names_an_argument(err, passed):
    return any(re.search(rf"\b{re.escape(n)}\b", err.problem) for n in passed)


def _check(case_module, k, target):
    mod, x, y, refs = case_module
    sp, name, form, call, passed = CASES[k]
    fn = getattr(mod, f"case_{k}")
    try:
        g = coarsen.differentiate(fn, target=target)
        value, grads = g.value_and_grad(x.copy(), y.copy())
    except CoarsenError as err:
        assert _names_an_argument(err, passed), \
            f"{call}: refused without naming {passed}: {err.problem}"
        assert err.filename == mod.__file__ and err.lineno is not None, err
        return "refused"
    except Exception as err:        # a run-time check NumPy makes too (x.squeeze(0) of 2 x 3)
        assert k in refs and type(err) is type(refs[k]), (call, err)
        return "raised as NumPy raises"
    assert k not in refs, f"{call}: NumPy raises {refs[k]!r}, coarsen accepted it"
    ref = fn(x.copy(), y.copy())
    assert np.isclose(value, ref, rtol=1e-12, atol=1e-300), (call, value, ref)
    for p, got in enumerate(grads):
        exp = _fd_grad(fn, (x, y), p)
        scale = max(1.0, float(np.max(np.abs(exp))))
        np.testing.assert_allclose(got, exp, rtol=1e-6, atol=1e-7 * scale,
                                   err_msg=f"{call}: gradient {p}")
    return "understood"


@pytest.mark.parametrize("k", range(len(CASES)),
                         ids=[f"{sp}-{name}-{form}" for sp, name, form, _, _ in CASES])
def test_every_argument_is_understood_or_refused_by_name(case_module, k):
    _check(case_module, k, "python")


CPU_CASES = [("np.sum", "keepdims", "keyword"), ("np.cumsum", "axis", "positional"),
             ("np.diff", "n", "keyword"), ("np.transpose", "axes", "positional"),
             ("np.zeros_like", "dtype", "positional"), ("math.log", "base", "positional")]


@pytest.mark.parametrize("key", CPU_CASES, ids=["-".join(c) for c in CPU_CASES])
def test_understood_arguments_on_the_cpu_target(case_module, key):
    k = next(i for i, c in enumerate(CASES) if c[:3] == key)
    assert _check(case_module, k, "cpu") == "understood"


def test_the_sweep_covers_the_registry():
    """Every spelling of the tables has a signature, and the sweep reaches the functions
    whose arguments were dropped (their optional parameters)."""
    for sp in spellings():
        assert signature_of(sp) is not None, sp
    swept = {c[0] for c in CASES}
    for sp in ("np.transpose", "np.std", "np.log", "np.eye", "np.reshape", ".std", ".astype",
               "np.zeros_like", "np.full_like", "np.clip", "np.square", "np.diff"):
        assert sp in swept, sp
    assert len(CASES) > 300
