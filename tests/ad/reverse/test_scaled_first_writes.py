"""First writes of scaled adjoint passes (``coarsen.ad.reverse.scaled_adds._scaled_first_writes``):
``X = np.zeros(S)`` (or the scratch ``_scratch_zeros``) whose next mention is
``_add_scaledN(X, s, A)`` becomes ``np.empty`` (``_scratch_empty``) and ``_set_scaledN(X, s, A)``.

A reduction loop reversed trip by trip leaves, per array it reads, an ``_acc`` and this pair
(``np.sum(C * C)``'s ``C_bar``): zeroing then adding was two passes over the array for what one
assignment writes.  The snippets run as written and as rewritten and every variable is compared
bit for bit (signs of zero included); near misses are left alone; end to end, a gemm-shaped
program against the extended-precision oracle on both targets, the rewrite in the cpu source.
"""
import ast
import copy
import textwrap

import gast
import numpy as np
import pytest

import coarsen
from coarsen.ad.reverse.scaled_adds import SCALED_MARK, scaled_add_calls
from coarsen.codegen.helpers import HELPERS
from coarsen.codegen.runtime import helper_source
from tests.oracle import check_against_oracle


def _body(src):
    body = gast.parse(textwrap.dedent(src)).body
    for st in body:
        if isinstance(st, gast.AugAssign) and isinstance(st.value, gast.BinOp):
            setattr(st, SCALED_MARK, 2)       # what ``fused`` marks
    return body


def _text(body):
    return ast.unparse(ast.fix_missing_locations(
        gast.gast_to_ast(gast.Module(body=copy.deepcopy(body), type_ignores=[]))))


def _run(body, env, helpers):
    code = compile(ast.fix_missing_locations(gast.gast_to_ast(
        gast.Module(body=copy.deepcopy(body), type_ignores=[]))), "<snippet>", "exec")
    scope = dict(HELPERS)
    scope["np"] = np
    exec(helper_source(sorted(set(helpers) | {"_add_scaled2"} - set(HELPERS))), scope)
    scope.update({k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in env.items()})
    exec(code, scope)
    return scope


def _env():
    r = np.random.default_rng(8)
    A = r.standard_normal((3, 4))
    A[0, 1] = -0.0
    A[2, 2] = 0.0
    return {"A": A, "s": -0.5, "z": -0.0, "_ftape": np.zeros(5), "_wtop": 2}


def _same(src, env):
    body = _body(src)
    new, helpers = scaled_add_calls(body)
    before, after = _run(body, env, helpers), _run(new, env, helpers)
    for k in ("X", "A", "y"):
        if k in before:
            a, b = np.asarray(before[k]), np.asarray(after[k])
            assert a.shape == b.shape and np.array_equal(a, b) and \
                np.array_equal(np.signbit(a), np.signbit(b)), k
    return _text(new)


@pytest.mark.parametrize("scale", ["s", "z"])
def test_zeros_then_a_scaled_pass_is_one_write(scale):
    text = _same(f"""
        X = np.zeros(A.shape)
        t = 1.0
        X += {scale} * A
        y = X * 2.0
    """, _env())
    assert "X = np.empty(A.shape)" in text and f"_set_scaled2(X, {scale}, A)" in text
    assert "_add_scaled2" not in text and "np.zeros" not in text


def test_a_scratch_array_is_written_once():
    text = _same("""
        _ftape, X, _wtop = _scratch_zeros(_ftape, _wtop, A.shape, A.size)
        X += s * A
    """, _env())
    assert "_scratch_empty(_ftape, _wtop, A.shape, A.size)" in text and "_set_scaled2(X, s, A)" in text


@pytest.mark.parametrize("src", [
    # X read between the allocation and the pass: its zeros are seen
    """
    X = np.zeros(A.shape)
    y = X[0, 0] + 1.0
    X += s * A
    """,
    # the pass reads X itself
    """
    X = np.zeros(A.shape)
    X += s * X
    """,
    # the allocation is chosen at run time
    """
    _ftape, X, _wtop = _scratch_empty(_ftape, _wtop, A.shape, A.size) if s > 0 else _scratch_zeros(_ftape, _wtop, A.shape, A.size)
    X += s * A
    """,
])
def test_near_misses_keep_the_zeros(src):
    text = _same(src, _env())
    assert "_set_scaled" not in text and "_add_scaled2(X" in text


def gemm_like(alpha, C, A, B):
    D = alpha * (A @ B) + 0.5 * C
    return 0.5 * np.sum(D * D)


def _args():
    r = np.random.default_rng(3)
    return 0.7, r.standard_normal((3, 4)), r.standard_normal((3, 2)), r.standard_normal((2, 4))


@pytest.mark.parametrize("target", ["cpu", "python"])
def test_oracle(target):
    check_against_oracle(gemm_like, _args(), target=target, wrt=(0, 1, 2, 3))


def test_the_cpu_source_writes_the_adjoint_once():
    # scaled_reads off: it computes the elements where the next loop reads them
    src = coarsen.differentiate(gemm_like, wrt=(0, 1, 2, 3), target="cpu",
                                disable={"scaled_reads"}).source_for(*_args())
    assert "_set_scaled2(" in src and "_add_scaled2(" not in src


def _scaled_product(alpha, A, B):
    return alpha * (A @ B)


def gemm_like_renamed(C_bar, _t1, A, B):
    # names that look like the compiler's
    _acc1 = C_bar * (A @ B) + 0.5 * _t1
    return 0.5 * np.sum(_acc1 * _acc1)


def gemm_like_split(alpha, C, A, B):
    D = _scaled_product(alpha, A, B) + 0.5 * C
    return 0.5 * np.sum(D * D)


def test_renamed_and_split_variants():
    """Renamed: the same bits.  Split into a helper: the inlined helper's temporaries sum
    ``alpha``'s adjoint in another order (1 ulp apart, measured), so the same answer to 1e-14."""
    args = _args()
    want = coarsen.differentiate(gemm_like, wrt=(0, 1, 2, 3), target="cpu").value_and_grad(*args)
    for fn in (gemm_like_renamed, gemm_like_split):
        g = coarsen.differentiate(fn, wrt=(0, 1, 2, 3), target="cpu")
        got = g.value_and_grad(*args)
        off = coarsen.differentiate(fn, wrt=(0, 1, 2, 3), target="cpu", disable={"scaled_reads"})
        assert "_set_scaled2(" in off.source_for(*args)
        assert got[0] == want[0]
        for a, b in zip(got[1], want[1]):
            if fn is gemm_like_renamed:
                assert np.array_equal(a, b)
            else:
                np.testing.assert_allclose(a, b, rtol=1e-14, atol=0.0)
