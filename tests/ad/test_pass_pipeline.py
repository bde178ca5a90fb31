"""The pass pipelines (``coarsen.ad.passes``, ``coarsen.ad.reverse.pipeline``,
``coarsen.ad.forward.pipeline``): passes run in the order of their list, a pass is switched
off by ``disable`` (an option, validated, part of the cache key), the names of the passes that
ran reach the artifact and the report, and the manager checks what each pass requires."""
import io
import math
import re

import gast
import numpy as np
import pytest

import coarsen
from apps.logreg import objective as logreg
from coarsen import lowering
from coarsen.ad.forward import jvp_ir
from coarsen.ad.forward.jam import MARK
from coarsen.ad.forward.pipeline import FORWARD
from coarsen.ad.passes import Fact, Pass, Pipeline
from coarsen.ad.reverse import differentiate_ir
from coarsen.ad.reverse.pipeline import REVERSE
from coarsen.analysis.activity import analyze
from coarsen.errors import CoarsenError
from coarsen.frontend.lower import lower
from coarsen.ir.nodes import F64, I64, Array
from coarsen.ir.typeinfer import infer
from coarsen.transforms.artifact import Options
from coarsen.transforms.jvp import JvpOptions


def dense(W0, u, v, x, y):
    """A dense layer whose weights are updated by a rank-one term first: its adjoint is
    rematerialized (``tests/ad/reverse/test_rematerialize.py``)."""
    W = W0 + np.outer(u, v)
    h = 0.5 * W @ x
    r = h - y
    return 0.5 * np.sum(r * r)


def scalar_loop(a, n):
    x = a
    for k in range(n):
        x = x * 0.5 + a
    return x


def _args():
    r = np.random.default_rng(0)
    return (r.standard_normal((5, 4)), r.standard_normal(5), r.standard_normal(4),
            r.standard_normal(4), r.standard_normal(5))


def _rematerialized(source):
    return re.search(r"(?<![A-Za-z0-9_])_rm\d+ = ", source) is not None


def test_the_pipeline_lists_every_pass_once_in_order():
    assert REVERSE.names == ("zero_adds", "dead_adjoint_code", "dead_resets", "stored_rereads",
                             "first_writes", "loop_order", "invariant_sums", "fuse_loops",
                             "rematerialize", "adjoint_rows", "guarded_first_writes",
                             "distribute_scatters", "scratch_arrays", "invariant_reads",
                             "scaled_adds", "region_stores", "dot_loops", "lane_sums",
                             "stride_versions", "vector_exp", "tape_cursors",
                             "scaled_reads")
    assert len(set(REVERSE.names)) == len(REVERSE.names)
    for p in REVERSE.passes + FORWARD.passes:
        assert p.requires and p.guarantees and p.doc, p.name
    assert FORWARD.names == ("jam",)


@pytest.mark.parametrize("bad", [{"nope"}, ("rematerialize", "fuse"), "rematerialise"])
def test_an_unknown_pass_name_is_refused(bad):
    with pytest.raises(CoarsenError, match="unknown reverse pass"):
        coarsen.differentiate(dense, wrt=(0, 1, 2, 3), disable=bad)
    with pytest.raises(CoarsenError, match="unknown reverse pass"):
        Options(disable=bad)
    with pytest.raises(CoarsenError, match="unknown forward pass"):
        JvpOptions(disable=bad)


def test_disable_is_a_frozenset_of_names_and_one_name_may_be_given_bare():
    assert Options(disable=["rematerialize", "fuse_loops"]).disable == \
        frozenset({"rematerialize", "fuse_loops"})
    assert Options(disable="rematerialize").disable == frozenset({"rematerialize"})
    assert hash(Options(disable={"fuse_loops"})) == hash(Options(disable=("fuse_loops",)))


def test_a_disabled_pass_changes_the_cache_key_the_code_and_the_passes_that_ran():
    args = _args()
    on = coarsen.differentiate(dense, wrt=(0, 1, 2, 3))
    off = coarsen.differentiate(dense, wrt=(0, 1, 2, 3), disable={"rematerialize"})
    a, b = on.specialize(args), off.specialize(args)
    assert a.cache_key != b.cache_key and b.key.disable == ("rematerialize",)
    assert "rematerialize" in a.passes and "rematerialize" not in b.passes
    assert [n for n in a.passes if n != "rematerialize"] == list(b.passes)
    assert _rematerialized(a.source) and not _rematerialized(b.source)
    # the same numbers, bit for bit (the pass keeps every value)
    va, ga = on.value_and_grad(*args)
    vb, gb = off.value_and_grad(*args)
    assert va == vb and all(x.tobytes() == y.tobytes() for x, y in zip(ga, gb))
    # from the cache, the same names
    again = coarsen.differentiate(dense, wrt=(0, 1, 2, 3), disable={"rematerialize"}).specialize(args)
    assert again.cached and again.passes == b.passes


def test_the_report_lists_the_passes_that_ran():
    g = coarsen.differentiate(dense, wrt=(0, 1, 2, 3), disable={"fuse_loops"}, target="python")
    rep = g.report(*_args(), file=io.StringIO())
    line = [s for s in rep.format().splitlines() if s.startswith("  passes that ran: ")]
    assert len(line) == 1
    names = line[0].split(": ", 1)[1].split(", ")
    # in the pipeline's order; distribute_scatters, scaled_adds, region_stores, dot_loops,
    # lane_sums, stride_versions, tape_cursors and scaled_reads are for the cpu target only
    # (stored_rereads and vector_exp run on the python target too)
    assert names == [n for n in REVERSE.all_names if n not in (
        "fuse_loops", "distribute_scatters", "scaled_adds", "region_stores", "dot_loops",
        "lane_sums", "stride_versions", "tape_cursors", "scaled_reads")]


def _ir(fn, types, wrt):
    f, _ = lower(fn)
    infer(f, types)
    return f, analyze(f, wrt)


def test_the_workspace_mode_runs_no_scratch_pass_and_every_pass_may_be_off():
    f, facts = _ir(scalar_loop, [F64, I64], ("a",))
    _, em = differentiate_ir(f, ("a",), facts, "entry", Options(workspace=True, target="cpu"))
    assert "scratch_arrays" not in em.passes_run and "scaled_adds" not in em.passes_run
    assert "lane_sums" not in em.passes_run
    assert "region_stores" not in em.passes_run
    assert "zero_adds" in em.passes_run
    f, facts = _ir(scalar_loop, [F64, I64], ("a",))
    _, em = differentiate_ir(f, ("a",), facts, "entry",
                             Options(target="python", disable=REVERSE.all_names))
    assert em.passes_run == ()


def test_the_manager_checks_requirements_when_built_and_when_run():
    def same(code, ctx):
        return code
    first = Pass("first", same, frozenset({Fact.ENTRY}), frozenset({Fact.FUSED_LOOPS}))
    second = Pass("second", same, frozenset({Fact.FUSED_LOOPS}), frozenset({Fact.REMATERIALIZED}))
    with pytest.raises(CoarsenError, match="requires FUSED_LOOPS"):
        Pipeline("toy", (second, first), frozenset({Fact.ENTRY}))
    with pytest.raises(CoarsenError, match="twice"):
        Pipeline("toy", (first, first), frozenset({Fact.ENTRY}))
    toy = Pipeline("toy", (first, second), frozenset({Fact.ENTRY}))
    assert toy.run("code", None) == ("code", ("first", "second"))
    with pytest.raises(CoarsenError, match="switched off"):
        toy.run("code", None, frozenset({"first"}))


def test_the_reverse_passes_do_not_modify_their_input():
    f, facts = _ir(dense, [Array("f64", 2)] + [Array("f64", 1)] * 4, ("W0", "u", "v", "x"))
    seen = []

    def spy(p):
        def run(code, ctx):
            before = [gast.dump(s) for s in code.body]
            out = p.run(code, ctx)
            assert [gast.dump(s) for s in code.body] == before, p.name
            seen.append(p.name)
            return out
        return Pass(p.name, run, p.requires, p.guarantees, p.applies, p.doc)
    from coarsen.ad.reverse import driver
    spied = Pipeline("reverse", tuple(spy(p) for p in REVERSE.passes), REVERSE.start,
                     REVERSE.then)
    real = driver.REVERSE
    driver.REVERSE = spied
    try:
        _, em = differentiate_ir(f, ("W0", "u", "v", "x"), facts, "entry", Options())
    finally:
        driver.REVERSE = real
    assert tuple(seen) == REVERSE.names and em.passes_run == REVERSE.all_names


def test_the_forward_jam_pass_is_an_option():
    """The SIMD form of a vector JVP (logistic regression's sample loop jams) with and without
    ``jam``: the same numbers, bit for bit."""
    types = [Array("f64", 1), F64, Array("f64", 2), Array("f64", 1), F64]
    r = np.random.default_rng(1)
    args = (r.standard_normal(3), 0.2, r.standard_normal((7, 3)), (r.random(7) < 0.5) * 1.0, 0.1)
    dots = r.standard_normal((8, 3))
    out = []
    for disable in (frozenset(), frozenset({"jam"})):
        f, facts = _ir(logreg, types, ("w",))
        module, em = jvp_ir(f, ("w",), facts, "entry",
                            JvpOptions(directions=8, simd=True, coarsen=False, disable=disable))
        source = lowering.render(module, target="cpu")
        entry = lowering.build(source, name=f"jam_{len(disable)}", target="cpu").entry
        out.append((source, em, entry(*args, dots)))
    (jammed, em_on, got), (plain, em_off, ref) = out
    assert em_on.passes_run == ("jam", "tidy") and em_off.passes_run == ("tidy",)
    assert em_on.jammed and not em_off.jammed
    assert MARK in jammed and MARK not in plain
    assert got[0] == ref[0] and got[1].tobytes() == ref[1].tobytes()
    f, facts = _ir(logreg, types, ("w",))
    _, em = jvp_ir(f, ("w",), facts, "entry", JvpOptions(directions=8))
    assert em.passes_run == ("tidy",)


def springs(x, k):
    e = 0.0
    for i in range(x.shape[0] - 1):
        d = x[i + 1] - x[i] - 1.0
        e += 0.5 * k * d * d * math.exp(-d * d)
    return e


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_forward_tidy_keeps_every_bit_and_jvp_and_jacobian_take_disable(target):
    """Forward mode's module stage runs ``tidy`` (``adjoints=False``); switched off by
    ``coarsen.jvp(..., disable={"tidy"})``, the JVP gives the same bits from longer code, and
    ``coarsen.jacobian`` hands each name to the mode it belongs to."""
    x, k = np.array([0.0, 1.1, 2.3, 2.9, 4.4]), 2.0
    tx = np.array([0.3, -1.0, 0.5, 0.25, 2.0])
    on = coarsen.jvp(springs, target=target)
    off = coarsen.jvp(springs, target=target, disable={"tidy"})
    v_on, t_on = on(x, k, tangents=(tx, 0.7))
    v_off, t_off = off(x, k, tangents=(tx, 0.7))
    assert v_on == v_off and t_on == t_off
    s_on, s_off = on.specialize((x, k)), off.specialize((x, k))
    assert "tidy" in s_on.stats["passes"] and "tidy" not in s_off.stats["passes"]
    assert len(s_on.source.splitlines()) < len(s_off.source.splitlines())
    with pytest.raises(CoarsenError, match="unknown forward pass 'fuse_loops'"):
        coarsen.jvp(springs, disable={"fuse_loops"})
    # the Jacobian: forward columns, reverse rows; an unknown name names both lists
    J = coarsen.jacobian(springs, mode="forward", target=target, disable={"tidy", "jam"})
    assert (J.disable_forward, J.disable_reverse) == (frozenset({"tidy", "jam"}),
                                                      frozenset({"tidy"}))
    ref = coarsen.jacobian(springs, mode="forward", target=target)
    for a, b in zip(J(x, k), ref(x, k)):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()
    R = coarsen.jacobian(springs, mode="reverse", target=target, disable={"fuse_loops"})
    assert R.disable_reverse == frozenset({"fuse_loops"}) and not R.disable_forward
    for a, b in zip(R(x, k), ref(x, k)):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)
    with pytest.raises(CoarsenError, match="unknown pass 'nope'"):
        coarsen.jacobian(springs, disable={"nope"})
