"""Custom derivative rules: ``@coarsen.custom_vjp`` (``defvjp``) and ``@coarsen.custom_jvp``
(``defjvp``), with JAX's signatures (issue 13).

The programs are one template (``PROGRAM``) written to a real file and imported: once with
plain names, once with adversarial ones (names coarsen's generated code uses) for the renaming
check.  They wrap a bisection solver of ``x**3 + a*x = b`` (whose own derivative is zero
almost everywhere: only a rule gives the right gradient) with an implicit-function-theorem
rule, as a ``custom_vjp`` and as a ``custom_jvp``, and array rules (a weighted dot product
with an int argument, called in a loop; array results: a cumulative sum, and a linear solve
checked against coarsen's own derivative of ``np.linalg.solve``; an element-wise softplus;
arrays written after the calls; a backward rule that fills its cotangent element by element,
which crashed while typing the rule).  Gradients are checked
against the extended-precision oracle (``tests/oracle.py``) on both targets, coarse and fine;
the JVP of ``coarsen.jvp`` against the gradient.  Wrong rules are refused with a
``CoarsenError`` naming the rule and the call site, before code is generated; a cotangent or
tangent of the wrong length raises ``ValueError`` naming the rule when it runs.
"""
from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np
import pytest

import coarsen
from coarsen.frontend.lower import lower
from coarsen.frontend.source import FunctionRead
from tests.oracle import assert_grad_close, check_against_oracle, fd_grad

PROGRAM = '''\
import math

import numpy as np
from numba import prange

import coarsen


def bisect(a, b):
    """The root of x**3 + a*x - b (a > 0) by bisection: its derivative is zero almost everywhere."""
    lo = -10.0
    hi = 10.0
    for k in range(200):
        mid = 0.5 * (lo + hi)
        if mid * mid * mid + a * mid - b > 0.0:
            hi = mid
        else:
            lo = mid
    return 0.5 * (lo + hi)


@coarsen.custom_vjp
def root(a, b):
    return bisect(a, b)


def root_fwd(a, b):
    {x} = root(a, b)
    return {x}, ({x}, a)


def root_bwd({res}, {g}):
    {x}, a = {res}
    {den} = 3.0 * {x} * {x} + a
    return (-{g} * {x} / {den}, {g} / {den})


root.defvjp(root_fwd, root_bwd)


@coarsen.custom_jvp
def root_j(a, b):
    return bisect(a, b)


@root_j.defjvp
def root_j_jvp({primals}, {tangents}):
    a, b = {primals}
    {da}, {db} = {tangents}
    {x} = bisect(a, b)
    return {x}, ({db} - {x} * {da}) / (3.0 * {x} * {x} + a)


@coarsen.custom_vjp
def croot(b):
    return bisect(1.0, b)


def croot_fwd(b):
    {x} = bisect(1.0, b)
    return {x}, {x}


def croot_bwd({x}, {g}):
    return ({g} / (3.0 * {x} * {x} + 1.0),)


croot.defvjp(croot_fwd, croot_bwd)


@coarsen.custom_vjp
def pair(a, b):
    return a * b


def pair_fwd(a, b):
    return a * b, a


pair.defvjp(pair_fwd, croot_bwd)


def bad_count_loss(q):
    return pair(q, q)


def chain_loss(qs, s=1.5):
    t = 0.0
    {x} = 0.1
    for i in range(qs.shape[0]):
        {x} = root(b=qs[i] * s + croot({x}), a=2.0)
        t += {x} * {x}
    return t


def int_arg_loss(q, n):
    # one rule, one cotangent per argument: the int argument's is dropped at the int call sites
    return root(2, q) + root(n, q * q) + root(2.0, q)


def par_loss(qs, a):
    t = 0.0
    for i in prange(qs.shape[0]):
        t += root(a, qs[i]) ** 2
    return t


def solve_loss(p, q):
    {x} = root(p * p + 1.0, q)
    {y} = root_j(p * p + 1.0, q * {x})
    return {x} * {y} + math.sin(p)


@coarsen.custom_vjp
def wdot(w, v, n):
    s = 0.0
    for i in range(n):
        s += w[i] * v[i]
    return s


def wdot_fwd(w, v, n):
    return wdot(w, v, n), (w, v)


def wdot_bwd({res}, {g}):
    w, v = {res}
    return ({g} * v, {g} * w)


wdot.defvjp(wdot_fwd, wdot_bwd)


@coarsen.custom_jvp
def softplus(z):
    return np.log1p(np.exp(z))


@softplus.defjvp
def softplus_jvp({primals}, {tangents}):
    z, = {primals}
    {dz}, = {tangents}
    return np.log1p(np.exp(z)), {dz} / (1.0 + np.exp(-z))


def jvp_loss(p, q, v):
    {y} = root_j(p * p + 1.0, q)
    z = softplus({y} * v)
    return np.sum(z * z) + {y}


@coarsen.custom_vjp
def lin_solve(A, b):
    return np.linalg.solve(A, b)


def lin_solve_fwd(A, b):
    {x} = np.linalg.solve(A, b)
    return {x}, (A, {x})


def lin_solve_bwd({res}, {g}):
    A, {x} = {res}
    {db} = np.linalg.solve(A.T, {g})
    return (-np.outer({db}, {x}), {db})


lin_solve.defvjp(lin_solve_fwd, lin_solve_bwd)


def lin_loss(w, v):
    {x} = lin_solve(3.0 * np.eye(4) + np.outer(w, w), v)
    return np.sum({x} * {x}) + {x}[0]


def lin_loss_plain(w, v):
    {x} = np.linalg.solve(3.0 * np.eye(4) + np.outer(w, w), v)
    return np.sum({x} * {x}) + {x}[0]


@coarsen.custom_vjp
def cum(v):
    return np.cumsum(v)


def cum_fwd(v):
    return np.cumsum(v), ()


def cum_bwd({res}, {g}):
    return (np.flip(np.cumsum(np.flip({g}))),)


cum.defvjp(cum_fwd, cum_bwd)


@coarsen.custom_vjp
def cube_sum(x):
    return np.sum(x * x * x)


def cube_sum_fwd(x):
    return np.sum(x * x * x), x.copy()


def cube_sum_bwd({res}, {g}):
    {den} = np.zeros({res}.shape[0])      # a cotangent written in place, element by element
    for i in range({res}.shape[0]):
        {den}[i] = 3.0 * {g} * {res}[i] * {res}[i]
    return ({den},)


cube_sum.defvjp(cube_sum_fwd, cube_sum_bwd)


def array_loss(w, v, c):
    t = wdot(w, v, w.shape[0]) + np.sum(cum(c * w) * v) + cube_sum(w * v)
    for k in range(3):
        t += wdot(w * (k + c), v, w.shape[0]) ** 2
    {y} = softplus(c * v)
    z = softplus(v)
    w[0] = c * v[1]             # the rules saw w and v as they were at the calls
    v[1] = 0.5
    return t + np.sum({y} * w) + np.sum(z * v)
'''

PLAIN = dict(x="x", y="y", res="res", g="g", den="den", primals="primals",
             tangents="tangents", da="da", db="db", dz="dz")
# names coarsen's generated code uses or derives (tests/frontend/test_alpha_rename.py)
ADVERSARIAL = dict(x="x_bar", y="_t1", res="_ftape", g="_g1", den="_ret", primals="_s1_p1",
                   tangents="tape", da="da_bar", db="_pa1", dz="_cut1")


def _load(tmp, name, names):
    path = os.path.join(tmp, name + ".py")
    with open(path, "w") as fh:
        fh.write(PROGRAM.format(**names))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def progs(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("custom_rules"))
    yield _load(tmp, "custom_rules_plain", PLAIN), _load(tmp, "custom_rules_renamed", ADVERSARIAL)
    for name in ("custom_rules_plain", "custom_rules_renamed"):
        sys.modules.pop(name, None)


MODES = [("python", True), ("python", False), ("cpu", True), ("cpu", False)]


def test_decorated_functions_run_as_plain_python(progs):
    m, _ = progs
    assert m.root(2.0, 3.0) == m.bisect(2.0, 3.0) == m.root_j(2.0, 3.0)
    x = m.root(2.0, 3.0)
    assert abs(x ** 3 + 2.0 * x - 3.0) < 1e-12
    assert m.root.__name__ == "root" and m.softplus_jvp.__name__ == "softplus_jvp"  # defjvp returns the rule


@pytest.mark.parametrize("target, coarse", MODES)
def test_bisection_with_implicit_function_rules_matches_the_oracle(progs, target, coarse):
    m, _ = progs
    check_against_oracle(m.solve_loss, [0.7, 1.3], target=target, coarse=coarse)
    # in a loop (residuals and cotangents taped per trip), keyword and constant arguments, a
    # residual that is one value
    check_against_oracle(m.chain_loss, [np.linspace(0.3, 1.5, 5), 1.5], target=target,
                         coarse=coarse)
    # without the rules the solver's derivative is zero: the rules are what make it right
    g = coarsen.differentiate(m.bisect, target="python")
    assert g(2.0, 3.0) == (0.0, 0.0)


def test_one_rule_serves_int_and_float_arguments(progs):
    """root_bwd returns two cotangents: the call root(2, q) has one float argument, and was
    refused ("returns 2 cotangent(s), but root has 1 float argument(s) here")."""
    m, _ = progs
    for coarse in (True, False):
        check_against_oracle(m.int_arg_loss, [0.7, 3], target="python", coarse=coarse)
    with pytest.raises(coarsen.CoarsenError, match="croot_bwd returns 1 cotangent") as e:
        coarsen.differentiate(m.bad_count_loss, target="python")(0.7)
    assert "one cotangent per argument" in e.value.hint


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_a_custom_call_in_a_parallel_reduction_loop(progs, target):
    m, _ = progs
    g, _, _ = check_against_oracle(m.par_loss, [np.linspace(0.3, 1.5, 7), 2.0], target=target)
    assert "differentiated in parallel" in g.report(np.linspace(0.3, 1.5, 7), 2.0).format()


# one cpu build of the array programs (a Numba compile of each costs seconds): the cpu target
# is covered coarse and fine by the scalar programs above
@pytest.mark.parametrize("target, coarse", MODES[:3])
def test_array_rules_match_the_oracle(progs, target, coarse):
    m, _ = progs
    rng = np.random.default_rng(5)
    args = [rng.normal(size=4), rng.normal(size=4), 0.6]
    check_against_oracle(m.array_loss, args, target=target, coarse=coarse)


@pytest.mark.parametrize("target, coarse", MODES[:2])
def test_a_wrapped_linear_solve_matches_the_derivative_of_the_solve(progs, target, coarse):
    m, _ = progs
    rng = np.random.default_rng(9)
    w, v = rng.normal(size=4), rng.normal(size=4)
    got = coarsen.differentiate(m.lin_loss, target=target, coarsen=coarse)(w, v)
    ref = coarsen.differentiate(m.lin_loss_plain, target=target, coarsen=coarse)(w, v)
    assert_grad_close(list(got), list(ref), rtol=1e-12)


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_custom_jvp_under_forward_mode(progs, target):
    m, _ = progs
    rng = np.random.default_rng(6)
    w, v = rng.normal(size=4), rng.normal(size=4)
    dv = rng.normal(size=4)
    j = coarsen.jvp(m.jvp_loss, target=target)
    value, tangent = j(0.7, 1.3, v, tangents=(1.0, -0.5, dv))
    exp = fd_grad(m.jvp_loss, [0.7, 1.3, v], [0, 1, 2])
    assert value == m.jvp_loss(0.7, 1.3, v)
    assert_grad_close(tangent, exp[0] - 0.5 * exp[1] + np.dot(exp[2], dv))
    # a custom_vjp function has no forward rule: refused at its call, before code is generated
    with pytest.raises(coarsen.CoarsenError, match="custom_vjp") as e:
        coarsen.jvp(m.array_loss, wrt="w", target=target)(w, v, 0.6, tangents=np.ones(4))
    assert e.value.lineno is not None and e.value.hint
    # named by the function called, not by the IR's primitive
    assert "cannot differentiate wdot()" in str(e.value) and "custom_vjp_out" not in str(e.value)
    # nor is a custom_jvp rule differentiated twice: Hessians through one are refused
    with pytest.raises(coarsen.CoarsenError, match="root_j, which has a custom_jvp rule") as e:
        coarsen.hessian(m.jvp_loss, target=target)(0.7, 1.3, v)
    assert e.value.lineno is not None and e.value.hint
    # nor a custom_vjp rule, by either method: forward mode over the gradient would
    # differentiate the rule's residuals through the primal's own code (a probe's bisection
    # solver gave -0.5 for -0.875)
    for method in ("auto", "forward-over-reverse", "reverse-over-forward"):
        with pytest.raises(coarsen.CoarsenError, match="which has a custom_vjp rule") as e:
            coarsen.hessian(m.solve_loss, target=target, method=method)(0.7, 1.3)
        assert e.value.lineno is not None and e.value.hint


def _copies(args):
    return [x.copy() if isinstance(x, np.ndarray) else x for x in args]


def test_renamed_rules_give_the_same_bits(progs):
    m, r = progs
    rng = np.random.default_rng(7)
    w, v = rng.normal(size=4), rng.normal(size=4)
    cases = (("solve_loss", (0.7, 1.3)), ("array_loss", (w, v, 0.6)), ("chain_loss", (v * v, 1.5)))
    # the python target, coarse and fine, for every program; one cpu build (a Numba compile
    # costs seconds)
    for target, coarse, programs in [("python", True, cases), ("python", False, cases),
                                     ("cpu", True, cases[:1])]:
        for name, args in programs:
            a = coarsen.differentiate(getattr(m, name), target=target, coarsen=coarse)
            b = coarsen.differentiate(getattr(r, name), target=target, coarsen=coarse)
            va, ga = a.value_and_grad(*_copies(args))
            vb, gb = b.value_and_grad(*_copies(args))
            assert np.asarray(va).tobytes() == np.asarray(vb).tobytes()
            for x, y in zip(ga, gb):
                assert type(x) is type(y) and np.asarray(x).tobytes() == np.asarray(y).tobytes()


def test_the_rules_sources_are_in_the_cache_key(progs, tmp_path):
    m, _ = progs
    fn_ir, _ = lower(m.solve_loss)
    read = {r.qualname for r in fn_ir.dependencies.functions if isinstance(r, FunctionRead)}
    assert {"root_fwd", "root_bwd", "root_j_jvp", "bisect", "solve_loss"} <= read
    # editing a rule's source changes the fingerprint; going back restores it
    prints = []
    path = tmp_path / "custom_rules_edit.py"
    for bwd in ("g * x / den", "2.0 * g * x / den", "g * x / den"):
        path.write_text(PROGRAM.format(**PLAIN).replace("-g * x / den", "-" + bwd))
        spec = importlib.util.spec_from_file_location("custom_rules_edit", str(path))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        fn_ir, _ = lower(mod.solve_loss)
        prints.append(fn_ir.dependencies.fingerprint())
    assert prints[0] != prints[1] and prints[0] == prints[2]


BAD = '''\
import numpy as np

import coarsen


@coarsen.custom_vjp
def dot(w, v):
    return np.sum(w * v)


def dot_fwd(w, v):
    return np.sum(w * v), (w, v)


def scalar_ct(res, g):
    w, v = res
    return (g, g * w)


def one_ct(res, g):
    w, v = res
    return (g * v,)


def bare_ct(res, g):
    w, v = res
    return g * v


def int_ct(res, g):
    w, v = res
    return (g * v, np.zeros(w.shape[0], dtype=np.int64))


def short_ct(res, g):
    w, v = res
    return (g * v[:3], g * w)


def not_a_pair(w, v):
    return np.sum(w * v)


def tuple_out(w, v):
    return (np.sum(w * v), np.sum(w)), (w, v)


def tuple_tangent(primals, tangents):
    z, = primals
    dz, = tangents
    return (z * z, z), (2.0 * z * dz, dz)


@coarsen.custom_jvp
def sq(z):
    return z * z


def array_tangent(primals, tangents):
    z, = primals
    dz, = tangents
    return np.sum(z * z), 2.0 * z * dz


def short_tangent(primals, tangents):
    z, = primals
    dz, = tangents
    return z * z, (2.0 * z * dz)[1:]


@coarsen.custom_vjp
def twice(v):
    return 2.0 * v


def twice_fwd(v):
    return 2.0 * v, ()


def twice_bwd(res, g):
    return (2.0 * g,)


twice.defvjp(twice_fwd, twice_bwd)


@coarsen.custom_vjp
def norules(w, v):
    return np.sum(w * v)


def uses_dot(w, v):
    return dot(w, v) + 1.0  # call: dot


def uses_sq(z):
    return np.sum(sq(z))  # call: sq


def uses_twice(v):
    return np.sum(twice(v))  # call: twice


def uses_norules(w, v):
    return norules(w, v)  # call: norules
'''


@pytest.fixture(scope="module")
def bad(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("custom_rules_bad"))
    path = os.path.join(tmp, "custom_rules_bad.py")
    with open(path, "w") as fh:
        fh.write(BAD)
    spec = importlib.util.spec_from_file_location("custom_rules_bad", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    lines = {ln.split("# call: ")[1]: k + 1 for k, ln in enumerate(BAD.splitlines()) if "# call: " in ln}
    return mod, lines


ARGS = (np.arange(1.0, 5.0), np.linspace(0.5, 2.0, 4))


def _refusal(fn, args, target="python"):
    """The ``CoarsenError`` of differentiating ``fn`` (the fence, for what the rule's source
    shows) or of its first call (type inference, for what the argument types show)."""
    with pytest.raises(coarsen.CoarsenError) as e:
        coarsen.differentiate(fn, target=target)(*args)
    return e.value


@pytest.mark.parametrize("bwd, problem", [
    ("scalar_ct", "returns a cotangent for 'w' that is a float, but 'w' is a 1-D f64 array"),
    ("one_ct", "returns 1 cotangent(s), but dot has 2 float argument(s) here (w, v)"),
    ("bare_ct", "returns one value, not a tuple"),
    ("int_ct", "returns a cotangent for 'v' that is a 1-D i64 array, but 'v' is a 1-D f64 array"),
])
def test_a_wrong_vjp_rule_is_refused_naming_it(bad, bwd, problem):
    m, lines = bad
    m.dot.defvjp(m.dot_fwd, getattr(m, bwd))
    e = _refusal(m.uses_dot, ARGS)
    assert bwd in e.problem and problem in e.problem, e.problem
    assert (os.path.basename(e.filename), e.lineno) == ("custom_rules_bad.py", lines["dot"]), str(e)
    assert e.col_offset is not None and e.hint


def test_other_wrong_rules_are_refused_naming_them(bad):
    m, lines = bad
    m.dot.defvjp(m.not_a_pair, m.one_ct)
    e = _refusal(m.uses_dot, ARGS)
    assert "not_a_pair must return (out, residuals)" in e.problem and e.hint
    # several outputs (JAX allows a tuple): the message says what the rule must return (the
    # hint of the lowering, "return a flat tuple", could not be followed)
    m.dot.defvjp(m.tuple_out, m.one_ct)
    e = _refusal(m.uses_dot, ARGS)
    assert "tuple_out returns a tuple as the function's output" in e.problem and "one array" in e.hint
    m.sq.defjvp(m.tuple_tangent)
    e = _refusal(m.uses_sq, ARGS[:1])
    assert "tuple_tangent returns a tuple as the function's output" in e.problem
    m.sq.defjvp(m.array_tangent)
    e = _refusal(m.uses_sq, ARGS[:1])
    assert "array_tangent returns a tangent that is a 1-D f64 array, but its primal output is a float" \
        in e.problem and e.lineno == lines["sq"]
    # an array result, no residuals: fine (the backward rule runs in the reverse sweep)
    assert np.array_equal(coarsen.differentiate(m.uses_twice, target="python")(ARGS[0])[0],
                          np.full(4, 2.0))
    e = _refusal(m.uses_norules, ARGS)
    assert "norules is a custom_vjp function without rules" in e.problem and "defvjp" in e.hint
    with pytest.raises(coarsen.CoarsenError, match="dot is a custom_vjp function"):
        coarsen.differentiate(m.dot)
    with pytest.raises(coarsen.CoarsenError, match="must be a plain Python function"):
        m.dot.defvjp(m.dot_fwd, lambda res, g: (g, g))


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_a_rule_result_of_the_wrong_length_raises_when_it_runs(bad, target):
    m, _ = bad
    m.dot.defvjp(m.dot_fwd, m.short_ct)
    with pytest.raises(ValueError, match=r"the custom_vjp rule short_ct \(called at "
                       r"custom_rules_bad.py:\d+:\d+\) returned a cotangent for 'w' whose shape"):
        coarsen.differentiate(m.uses_dot, target=target)(*ARGS)
    m.sq.defjvp(m.short_tangent)
    with pytest.raises(ValueError, match=r"the custom_jvp rule short_tangent .* returned a tangent "
                       "whose shape is not the primal output's"):
        coarsen.differentiate(m.uses_sq, target=target)(ARGS[0])


def test_exported_gradient_with_rules_needs_no_coarsen(progs, tmp_path):
    m, _ = progs
    rng = np.random.default_rng(8)
    args = [rng.normal(size=4), rng.normal(size=4), 0.6]
    g = coarsen.differentiate(m.array_loss, target="python")
    value, grads = g.value_and_grad(*_copies(args))
    path = str(tmp_path / "array_loss_grad.py")
    g.export(path)
    text = open(path).read()
    assert "import coarsen" not in text and "def _custom_shape" in text
    spec = importlib.util.spec_from_file_location("array_loss_grad", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    v2, g2 = mod.value_and_grad_array_loss(*_copies(args))
    assert v2 == value and all(np.array_equal(a, b) for a, b in zip(g2, grads))
