"""Every segment strategy against the oracle: ``coarsen.differentiate(..., plan=...)`` forced.

In coarse mode each lifted block segment is differentiated by one strategy (``plan=``):
``"recompute"``, ``"preaccumulate"`` (one-path segments; a segment with branches falls back
to recompute) or ``"fine"``; ``"auto"`` (the cost model's choice) is what ``tests/endtoend/test_zoo.py``,
``tests/endtoend/test_realistic.py``, ``tests/endtoend/test_fuzz.py`` and ``tests/apps/test_apps.py`` check.
Here every strategy is forced and checked against the same references:

* every zoo case (``tests/zoo``) under ``recompute`` and ``preaccumulate``, and every realistic
  case (``tests/zoo/realistic.py``) under those and ``fine``, on the python target, with the
  harness's checks (``tests/zoo/harness.py``: gradient and ``value_and_grad`` against the
  extended-precision oracle, structure, dtypes, arguments unchanged); three realistic cases
  with several segments also on the cpu target;
* the report proves the plan was applied: every lifted block segment (an entry of kind
  ``"block"`` with cost estimates) has the forced strategy (``recompute`` for a segment with
  several paths under ``preaccumulate``; ``fine`` entries say "forced" in their fallback
  reason), segments that were not lifted are fallbacks that do not claim to be forced, and
  the generated code differs between ``recompute`` and ``preaccumulate`` wherever a one-path
  segment was lifted -- without this, a plan silently ignored would pass the oracle checks;
  and the forced plans reach enough segments (one-path and multi-path) to mean something;
* ``N_FUZZ`` generated programs (``tests/progen.py``, fixed seeds, deterministic
  replacements of discarded ones as in ``tests/endtoend/test_fuzz.py``) under each forced plan, with
  ``progen``'s whole differential check (value, coarse vs fine, oracle) and
  ``coarsen.differentiate`` wrapped to pass the plan (the checked program's report is
  checked as above);
* every application (``apps/``) at size "s" on the python target under ``recompute`` and
  ``preaccumulate``: against Richardson finite differences (``tests/apps/fd_oracle.py``,
  ADBench's measure, 1e-6) and to 1e-8 against coarsen's fine-grained gradient;
* metamorphic: two realistic programs with every variable renamed adversarially
  (``tests/frontend/test_alpha_rename.py``'s ``renamed_copy``) give bit-identical values and gradients
  under ``preaccumulate`` and ``cut``.

Every case runs under every forced plan: no case is skipped or expected to fail (this module
found one bug, a multi-path segment's vector-Jacobian product seeding a boolean output, whose
SymPy "partials" are unevaluated Derivatives; it is fixed).
"""
from __future__ import annotations

import functools
import io
import math
import re

import numpy as np
import pytest

import apps
import coarsen
from tests.apps.fd_oracle import fd_grad as app_fd_grad
from tests.progen import check_seed_with_oracle
from tests.zoo import all_zoo_cases, case_ids, realistic
from tests.zoo.harness import build, check_gradient, check_value_and_grad

ZOO = all_zoo_cases()
ZOO_IDS = case_ids(ZOO)
REAL = list(realistic.CASES)
REAL_IDS = case_ids(REAL)
FORCED = ("recompute", "cut", "preaccumulate")

#: generated programs checked under each forced plan (tests/progen.py seeds 0 .. N_FUZZ-1)
N_FUZZ = 30
#: ADBench's measure against central differences, and against another exact gradient
APP_FD_TOL = 1e-6
APP_EXACT_TOL = 1e-8


# cases whose only lifted one-path segments are linear (constant partials): recompute and
# preaccumulate emit the same step there, so their code may be the same
LINEAR_ONLY = {"loops.overwrite_elems", "arrays.reductions_full", "arrays.constructors"}


def _param(case, case_id, plan, target="python"):
    return pytest.param(case, plan, target, id=f"{case_id}-{plan}-{target}")


# ------------------------------------------------------------------ the report's evidence

def _report(g, args):
    return list(g.report(*args, file=io.StringIO()))


def check_report(g, args, plan, label):
    """Every lifted block segment has the forced strategy (see the module docstring); returns
    the strategies of the lifted block segments, in order."""
    seen = []
    for e in _report(g, args):
        where = f"{label}: segment {e['segment']} (lines {e['lines']})"
        if e["kind"] != "block":
            assert e["kind"] == "loop" and e["strategy"] == "closed form", (where, e)
            continue
        if e["costs"] is None:
            # not lifted (no strategy was planned): a fallback, which does not claim a plan
            assert e["strategy"] == "fine" and e["fallback"], (where, e)
            assert "forced" not in e["fallback"], (where, e["fallback"])
            continue
        multi = e["costs"]["preaccumulate"] is None     # not applicable: several paths
        if plan != "fine":
            # (a segment planned fine shows no formula) the formula names the paths
            paths = e["formula"].endswith("paths through its branches")
            assert paths == multi, (where, e["formula"], e["costs"])
        want = "recompute" if plan == "preaccumulate" and multi else plan
        assert e["strategy"] == want, f"{where}: strategy {e['strategy']!r} under plan={plan!r}"
        assert "forced" in e["costs"]["why"], (where, e["costs"]["why"])
        if plan == "fine":
            assert e["fallback"] and "forced" in e["fallback"], (where, e["fallback"])
        else:
            assert not e["fallback"], (where, e["fallback"])
        seen.append((e["strategy"], multi))
    return seen


# ------------------------------------------------------------------ zoo and realistic cases

def _check_case(case, case_id, plan, target):
    fn, factory, wrt = case
    label = f"{case_id} target={target} plan={plan}"
    check_gradient(fn, factory, wrt, target, True, label, plan=plan)
    check_value_and_grad(fn, factory, wrt, target, True, label, plan=plan)
    check_report(build(fn, wrt, target, True, plan), factory(), plan, label)


@pytest.mark.parametrize("case,plan,target", [_param(c, i, p) for p in FORCED
                                              for c, i in zip(ZOO, ZOO_IDS)])
def test_zoo_forced_plan(case, plan, target):
    _check_case(case, ZOO_IDS[ZOO.index(case)], plan, target)


@pytest.mark.parametrize("case,plan,target", [_param(c, i, p) for p in FORCED + ("fine",)
                                              for c, i in zip(REAL, REAL_IDS)])
def test_realistic_forced_plan(case, plan, target):
    _check_case(case, REAL_IDS[REAL.index(case)], plan, target)


# realistic programs with several lifted segments, on the cpu target (one Numba compile each)
CPU_CASES = [k for k, i in enumerate(REAL_IDS)
             if i in ("realistic.rk4_lotka_volterra", "realistic.logreg_loss",
                      "realistic.heat_loops")]


@pytest.mark.parametrize("case,plan,target", [_param(REAL[k], REAL_IDS[k], p, "cpu")
                                              for k in CPU_CASES for p in FORCED])
def test_realistic_forced_plan_cpu(case, plan, target):
    k = REAL.index(case)
    _check_case(case, REAL_IDS[k], plan, target)
    # the same code as the python target (same plan): the numbers agree closely
    fn, factory, wrt = case
    a = build(fn, wrt, "cpu", True, plan)(*factory())
    b = build(fn, wrt, "python", True, plan)(*factory())
    for x, y in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=0)


def test_cpu_cases_have_several_segments():
    assert len(CPU_CASES) == 3
    for k in CPU_CASES:
        fn, factory, wrt = REAL[k]
        assert len(check_report(build(fn, wrt, "python", True, "recompute"), factory(),
                                "recompute", REAL_IDS[k])) >= 2, REAL_IDS[k]


def _built(cases, ids, plan):
    out = []
    for case, cid in zip(cases, ids):
        fn, factory, wrt = case
        out.append((cid, build(fn, wrt, "python", True, plan), factory))
    return out


def test_forced_plans_reach_many_segments():
    """The forced plans are not checked on nothing: the zoo and realistic cases have many
    lifted block segments, one-path and multi-path, and under ``preaccumulate`` both the
    forced strategy and its fallback to recompute occur."""
    cases, ids = ZOO + REAL, ZOO_IDS + REAL_IDS
    for plan in FORCED + ("fine",):
        seen = []
        for cid, g, factory in _built(cases, ids, plan):
            seen += check_report(g, factory(), plan, f"{cid} plan={plan}")
        assert len(seen) >= 100, (plan, len(seen))
        assert sum(1 for _, multi in seen if multi) >= 3, (plan, seen)
        if plan == "preaccumulate":
            assert sum(1 for s, _ in seen if s == "preaccumulate") >= 100
            assert sum(1 for s, _ in seen if s == "recompute") >= 3


@pytest.mark.parametrize("cases,ids", [(REAL, REAL_IDS), (ZOO, ZOO_IDS)], ids=["real", "zoo"])
def test_forced_plans_generate_different_code(cases, ids):
    """Where a one-path segment was lifted, ``recompute`` and ``preaccumulate`` generate
    different code (the report is not the only thing that changed)."""
    rec = {cid: (g, f) for cid, g, f in _built(cases, ids, "recompute")}
    checked = 0
    for cid, gp, factory in _built(cases, ids, "preaccumulate"):
        if cid not in rec:
            continue
        strategies = check_report(gp, factory(), "preaccumulate", cid)
        if ("preaccumulate", False) in strategies and cid not in LINEAR_ONLY:
            gr = rec[cid][0]
            gr(*factory())
            gp(*factory())
            if "partials preaccumulated in the forward sweep" not in gp.source:
                # every partial a number or an input the reverse sweep reads anyway (an
                # element it re-reads): nothing to evaluate ahead, the same step as recompute
                continue
            assert "partials preaccumulated" not in gr.source, cid
            assert gr.source != gp.source, f"{cid}: same code under recompute and preaccumulate"
            checked += 1
    assert checked >= 10, checked


# ------------------------------------------------------------------ generated programs

def _with_plan(monkeypatch, plan):
    """``coarsen.differentiate`` (as progen calls it) with ``plan`` forced; records the calls."""
    calls = []
    orig = coarsen.differentiate

    @functools.wraps(orig)
    def forced(fn, wrt=None, **kw):
        assert "plan" not in kw
        g = orig(fn, wrt, plan=plan, **kw)
        calls.append(g)
        return g
    monkeypatch.setattr(coarsen, "differentiate", forced)
    return calls


def _fuzz_params():
    out = []
    for seed in range(N_FUZZ):
        for plan in FORCED + ("fine",):
            out.append(pytest.param(seed, plan, id=f"{seed}-{plan}"))
    return out


@pytest.mark.parametrize("seed,plan", _fuzz_params())
def test_fuzz_forced_plan(seed, plan, monkeypatch):
    calls = _with_plan(monkeypatch, plan)
    # coarse only: a plan is a coarse-mode choice, and test_fuzz.py checks these seeds' fine
    # gradients (its seeds include range(N_FUZZ))
    prog, out, _ = check_seed_with_oracle(seed, targets=("python",), modes=(True,))
    assert out.status == "ok" and out.oracle, (seed, out)
    # the program checked was differentiated coarse under the plan (the last gradients built
    # are the checked program's; the report reuses their compiled specialization)
    coarse = [g for g in calls if g.coarsen]
    assert coarse, "no coarse gradient was built through the forced plan"
    check_report(coarse[-1], prog.make_args(), plan, f"seed {prog.seed} plan={plan}")


# ------------------------------------------------------------------ applications

_APP_REF: dict = {}


def _adbench_err(x, y):
    """ADBench's measure: max over entries of |x - y| / max(1, |x| + |y|)."""
    x = np.concatenate([np.asarray(v, dtype=float).reshape(-1) for v in x])
    y = np.concatenate([np.asarray(v, dtype=float).reshape(-1) for v in y])
    assert x.shape == y.shape
    return float(np.max(np.abs(x - y) / np.maximum(1.0, np.abs(x) + np.abs(y))))


def _app_refs(name):
    """(finite differences, coarsen's fine-grained gradient) at size "s"."""
    if name not in _APP_REF:
        mod = apps.load(name)
        args = mod.make_inputs("s", seed=0)
        fine = coarsen.differentiate(mod.objective, mod.WRT, coarsen=False, target="python")
        _APP_REF[name] = (app_fd_grad(mod.objective, args, mod.WRT), fine(*args))
    return _APP_REF[name]


@pytest.mark.parametrize("plan", FORCED)
@pytest.mark.parametrize("name", apps.APP_NAMES)
def test_app_forced_plan(name, plan):
    mod = apps.load(name)
    args = mod.make_inputs("s", seed=0)
    g = coarsen.differentiate(mod.objective, mod.WRT, target="python", plan=plan)
    value, grads = g.value_and_grad(*args)
    assert isinstance(grads, tuple) and len(grads) == len(mod.WRT)
    fd, fine = _app_refs(name)
    err_fd = _adbench_err(grads, fd)
    assert err_fd <= APP_FD_TOL, f"{name} plan={plan}: vs finite differences: {err_fd:.3g}"
    err_fine = _adbench_err(grads, fine)
    assert err_fine <= APP_EXACT_TOL, f"{name} plan={plan}: vs fine-grained: {err_fine:.3g}"
    assert _adbench_err([value], [mod.objective(*args)]) <= 1e-12
    check_report(g, args, plan, f"{name} plan={plan}")


# ------------------------------------------------------------------ renaming

RENAMED = ["realistic.lennard_jones", "realistic.rk4_lotka_volterra#1"]


def _bits(v):
    a = np.asarray(v)
    return type(v).__name__, a.dtype.str, a.shape, a.tobytes()


@pytest.mark.parametrize("plan", ["preaccumulate", "cut"])
@pytest.mark.parametrize("case_id", RENAMED)
def test_renamed_gradient_is_bit_identical(case_id, plan):
    from tests.frontend import test_alpha_rename as alpha
    k = alpha.IDS.index(case_id)
    fn, factory, wrt = alpha.CASES[k]
    new, new_wrt, source, top = alpha.renamed_copy(k)
    assert top and all(a != b for a, b in top.items())
    g0 = build(fn, wrt, "python", True, plan)
    g1 = coarsen.differentiate(new, new_wrt, target="python", plan=plan)
    v0, d0 = g0.value_and_grad(*factory())
    v1, d1 = g1.value_and_grad(*factory())
    s0 = check_report(g0, factory(), plan, case_id)
    s1 = check_report(g1, factory(), plan, f"{case_id} renamed")
    assert s0 == s1 and (plan, False) in s0, (s0, s1)
    assert _bits(v0) == _bits(v1), (v0, v1)
    d0 = d0 if isinstance(d0, tuple) else (d0,)
    d1 = d1 if isinstance(d1, tuple) else (d1,)
    assert len(d0) == len(d1)
    for j, (a, b) in enumerate(zip(d0, d1)):
        assert _bits(a) == _bits(b), f"{case_id}: gradient {j} differs after renaming {top}:\n{a!r}\n{b!r}"


def _exp_chain(x, y):
    s = 0.0
    for i in range(x.shape[0]):
        s += math.exp(x[i] * y) * (x[i] - y)
    return s


def test_preaccumulate_reads_what_the_primal_computed():
    """The partials evaluated after a segment read the temporaries its statements computed
    (``segment_code.held_replacements``): the forward sweep calls ``exp`` once per trip, not twice."""
    args = (np.array([0.3, 0.7, 1.1]), 0.4)
    g = coarsen.differentiate(_exp_chain, target="python", plan="preaccumulate")
    g(*args)
    forward = g.source.split("# reverse sweep")[0]
    code = [ln for ln in forward.splitlines() if not ln.strip().startswith("#")]
    # in the entry (the helper _exp, vector_exp's, where its loop vectorizes: one call either way)
    entry = code[next(i for i, ln in enumerate(code) if ln.startswith("def value_and_grad")):]
    assert sum(len(re.findall(r"(math\.|\b_)exp\(", ln)) for ln in entry) == 1, forward
    check_value_and_grad(_exp_chain, lambda: args, None, "python", True, "exp_chain",
                         plan="preaccumulate")
