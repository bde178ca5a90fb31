"""Tests that pin the preconditions of ``coarsen.ir.scalarize`` (issue 48): each test here kills
guard mutants of the pass that the other scalarize tests let survive
(``python -m tests.mutation coarsen/ir/scalarize.py --guards-only``).  Fast tests first (the
mutation tool runs this file first, with ``-x``).

Most are checks of the IR the pass produces (``tests.helpers_passes.scalarized_ir``: no
compile): which trees stay array code and which become nests.  Several of these programs are
refused later by activity analysis (a written array with a live view of it), so the IR is the
only place their guard shows; a few are hand-built typed IR, shapes the frontend does not write
today that the pass's rules cover.  The programs whose mutants compute wrong values on the cpu
target are also checked against the oracle on both targets: a store between a tree's first
read and its sink; arithmetic on bool arrays (NumPy's ``m + m`` is a logical or, Numba's
scalar ``True + True`` is 2); matrix-vector products, whose scalar factor is taken out of the
sum only where the matrix side is a scalar times a matrix, and is applied once.
"""
import re

import numpy as np
import pytest

from coarsen.ir.nodes import Array, Assign, Const, Function, Loc, Scalar, Slice, Store, Var
from coarsen.ir.printer import format_function
from coarsen.ir.scalarize import scalarize
from tests.helpers_passes import scalarized_ir
from tests.oracle import check_against_oracle

X = np.linspace(0.5, 1.5, 5)
MASK = np.array([True, False, True, True, False])
INTS = np.arange(5)
M = np.arange(9.0).reshape(3, 3) / 10 + 0.5


# ----------------------------------------------------------------------------- programs
def _bump(z):
    z[0] = z[0] + 1.0
    return 2.0


def store_between(x, a):
    """``z * a`` is computed before the helper writes ``z[0]``: the sink comes after the store."""
    z = x.copy()
    y = (z * a) * _bump(z)
    return np.sum(y * x)


def bool_arith(x, m):
    """``m + m`` is NumPy's logical or (True), not 2 as in scalar code."""
    return np.sum(x * (m + m))


def variable_step(x, k):
    return np.sum(x[::k] * 2.0) + np.sum(x[::-2] * 3.0)


def newaxis_store(x):
    y = x.copy()
    y[None] = x * 2.0
    return np.sum(y * x)


def constant_store(x):
    y = x.copy()
    y[:1] = 0.0
    return np.sum(y * x)


def scalar_dot(a, b):
    return np.dot(a, b) + a


def numbered(x, ab12):
    _t9 = x * ab12
    return np.sum(_t9 * x)


def target_a_view(x, a):
    """The stored array is a view of the array the tree reads (reversed)."""
    z = x.copy()
    y = z[::-1]
    y[1:] = z[1:] * a
    return np.sum(z * x)


def leaf_a_view(x, a):
    """The tree reads a view of the stored array, made after the copy that made it new."""
    y = x.copy()
    v = y[::-1]
    y[1:] = v[1:] * a
    return np.sum(y * x)


def view_in_branch(x, a, k):
    """The view is made in a branch between the copy and the store."""
    y = x.copy()
    if k > 0:
        v = y[::-1]
    else:
        v = y[::-1]
    y[1:] = v[1:] * a
    return np.sum(y * x)


def view_stored_exactly(x, a):
    """The one safe overlap (each element read where it is written), but into a view."""
    z = x.copy()
    y = z[1:]
    y[:] = y * a
    return np.sum(z * x)


def heat_between(u0, kappa, nt):
    """``u = v`` at the end of the body makes ``u`` a view of ``v`` in ``fn.views``, yet ``v``
    is new at the store: a statement (not a view) between the copy and the store keeps it so."""
    u = u0.copy()
    for t in range(nt):
        v = u.copy()
        s = np.sum(u)
        v[1:-1] = u[1:-1] + kappa * s * (u[:-2] - u[2:])
        u = v
    return np.sum(u * u)


def safe_overlaps(x, A, a):
    """Each element read where it is written (in place), and another row of the stored array
    (NumPy reads it first: a copy)."""
    y = x.copy()
    y[:] = y * a
    B = A.copy()
    B[1, :] = B[1, :] * a
    B[0, :] = B[1, :] * a
    return np.sum(y * x) + np.sum(B * A)


def starts(x):
    return np.sum(x[2:] * 2.0) + np.sum(x[-3:] * 3.0) + np.sum(x[3::-1] * 4.0)


def variable_bounds(x, k):
    return np.sum(x[:k] * 2.0) + (x[:k] * 2.0) @ x[1:k + 1]


def int_sum(k, x):
    s = np.sum(k * 3)
    return s * 1.5 + np.sum(x * 2.0)


def bool_store_of_ints(k, m):
    mm = m.copy()
    mm[:] = k * 2
    return np.sum(k * mm * 1.0)


def int_store_of_ints(k):
    kk = k.copy()
    kk[1:] = k[:-1] * 3
    return np.sum(kk * 1.5)


def two_returns(x, c):
    """``_ret`` assigned twice (an array result, as forward mode has): never rebound."""
    if c > 0:
        return x * 2.0
    return np.minimum(x, 1.0)


def row_read(A):
    """A read of a user's variable (``row``) is not composed with the read that made it."""
    row = A[1]
    return np.sum(row[1:] * 2.0)


def copy_tree(A, B):
    """A one-operand call on a 2-D array (``copyarr``) is no transpose."""
    return np.sum(A.copy() * B)


def square_tree(x):
    """``np.square``'s operand is a temporary used twice: its own nest."""
    return np.sum(np.square(x - 1.0))


def matvec_factors(A, C, y, beta):
    """A scalar factor of the matrix (``p``: scaled once per sum, loops not interchanged), a
    transposed matrix without a factor (``q``), a scalar added (``r``) and a matrix times a
    matrix (``s``): no factor."""
    p = (beta * A) @ y
    q = (A.T - 1.0) @ y
    r = (A + beta) @ y
    s = (A * C) @ y
    return np.sum(p * q) + np.sum(r * s)


# ----------------------------------------------------------------------------- the IR
def test_a_store_between_tree_and_sink_keeps_array_code():
    """(``valid``: a statement between the tree's first statement and the sink stores)"""
    ir = scalarized_ir(store_between, (X, 0.7))
    assert "y: f64[:] = mul(_t1, _bump_result)" in ir, ir


def test_bool_arithmetic_stays_array_code():
    """(``valid``: a tree value neither float64 nor int64)"""
    ir = scalarized_ir(bool_arith, (X, MASK))
    assert "_t1: bool[:] = add(m, m)" in ir and "_t2: f64[:] = mul(x, _t1)" in ir, ir
    assert "for " not in ir, ir


def test_bool_leaves_and_bool_targets_stay_array_code():
    """(``valid``: a bool leaf; a store into a bool array, whose value becomes a nest of its own)"""
    ir = scalarized_ir(bool_store_of_ints, (INTS, MASK))
    assert "mm[:] = _t1" in ir and "_t2: i64[:] = mul(k, mm)" in ir, ir
    assert "_t1[_i1] = " in ir, ir


def test_an_int_tree_stored_into_an_int_array_is_a_nest():
    """(``valid``: only a float tree stored into a non-float array is refused)"""
    ir = scalarized_ir(int_store_of_ints, (INTS,))
    assert "kk[1:] = " not in ir and re.search(r"kk\[_t\d+\] = _t\d+", ir), ir


def test_a_variable_slice_step_stays_array_code():
    """(``axes``: a slice step that is not a nonzero integer constant; a constant one is read
    element by element)"""
    ir = scalarized_ir(variable_step, (X, 2))
    assert "_t1: f64[:] = getitem(x[::k])" in ir and "x[::-2]" not in ir, ir


def test_a_store_through_a_new_axis_stays_array_code():
    """(``expression``: a stored region with a new axis)"""
    ir = scalarized_ir(newaxis_store, (X,))
    assert "y[newaxis] = _t1" in ir, ir


def test_a_store_of_a_constant_stays_as_it_is():
    """(``expression``: a store of a value that is not an array)"""
    ir = scalarized_ir(constant_store, (X,))
    assert "y[:1] = 0.0" in ir, ir


def test_a_dot_of_scalars_stays_a_call():
    """(``expression``: a dot product of two 1-D arrays only)"""
    ir = scalarized_ir(scalar_dot, (1.5, 2.0))
    assert "_t1: f64 = dot(a, b)" in ir, ir


def test_new_names_follow_the_functions_temporaries():
    """(``_Scalarizer``: the numbering starts after the largest ``_t`` number, whatever other
    names end in digits)"""
    ir = scalarized_ir(numbered, (X, 2.0))
    assert "_t2: i64 = dim(x, 0)" in ir, ir


@pytest.mark.parametrize("fn", [target_a_view, leaf_a_view, view_in_branch, view_stored_exactly],
                         ids=lambda f: f.__name__)
def test_a_store_overlapping_a_view_keeps_array_code(fn):
    """(``valid`` and ``fresh_in_block``: a leaf aliases the stored array through a view and is
    not the region itself, read directly; NumPy evaluates the right-hand side first)"""
    args = (X, 0.7, 1) if fn is view_in_branch else (X, 0.7)
    ir = scalarized_ir(fn, args)
    stored = "y[:] = _t1" if fn is view_stored_exactly else \
        "y[1:] = _t3" if fn is view_in_branch else "y[1:] = _t2"
    assert stored in ir, ir


def test_the_one_safe_overlap_is_a_nest_in_place():
    """(``valid``: a leaf that is the stored region itself, the same integers included)"""
    ir = scalarized_ir(safe_overlaps, (X, M, 0.7))
    assert re.search(r"y\[_i1\] = _t\d+", ir) and re.search(r"B\[1, _i2\] = _t\d+", ir), ir
    assert "B[0, :] = _t5" in ir, ir


def test_a_slices_first_index_is_its_lower_bound_only_where_that_is_exact():
    """(``start``: a nonnegative constant lower bound with a positive step is the first index;
    a negative bound, or a negative step, is clipped at run time by ``slice_start``)"""
    ir = scalarized_ir(starts, (X,))
    assert "add(2, _i1)" in ir and not re.search(r"slice_start\(_t\d+, 2, 1\)", ir), ir
    assert re.search(r"slice_start\(_t\d+, -3, 1\)", ir), ir
    assert re.search(r"slice_start\(_t\d+, 3, -1\)", ir), ir


def test_a_leaf_of_the_nests_own_extent_is_read_without_a_broadcast_stride():
    """(``leaf_plans``: an extent that is the nest's, or known equal to it, needs no stride,
    whether or not its length is known from the shapes)"""
    ir = scalarized_ir(variable_bounds, (X, 3))
    assert "bcast_stride" not in ir and ir.count("same_len(") == 1, ir


def test_an_accumulator_starts_from_a_zero_of_its_type():
    """(``emit``: 0 for an integer sum, 0.0 for a float one)"""
    ir = scalarized_ir(int_sum, (INTS, X))
    assert re.search(r"_t\d+: i64 = copy\(0\)$", ir, re.M), ir
    assert re.search(r"_t\d+: f64 = copy\(0\.0\)$", ir, re.M), ir


def test_a_store_into_an_array_new_in_its_block_is_a_nest():
    """(``fresh_in_block``: a statement between the copy and the store that makes no view)"""
    ir = scalarized_ir(heat_between, (X, 0.1, 2))
    assert "v[1:-1] = " not in ir and re.search(r"v\[_t\d+\] = _t\d+", ir), ir


def test_the_result_is_never_rebound():
    """(``rebindable``: the function's result)"""
    ir = scalarized_ir(two_returns, (X, 1.0))
    assert "_ret: f64[:] = mul(x, 2.0)" in ir and "_ret: f64[:] = minimum(x, 1.0)" in ir, ir


def test_a_read_of_a_users_variable_is_not_composed():
    """(``composable``: the inner read's target a temporary of this block)"""
    ir = scalarized_ir(row_read, (M,))
    assert "row: f64[:] = getitem(A[1])" in ir and "getitem(row[" in ir, ir


def test_only_a_transpose_is_read_transposed():
    """(``grow``: ``transpose`` only)"""
    ir = scalarized_ir(copy_tree, (M, M))
    assert "_t1: f64[:,:] = copyarr(A)" in ir and "getitem(_t1[" in ir, ir


def test_a_temporary_used_twice_is_not_absorbed():
    """(``grow``: a temporary used once)"""
    ir = scalarized_ir(square_tree, (X,))
    assert re.search(r"_t1\[_i1\] = _t\d+", ir) and re.search(r"getitem\(_t1\[_i2\]\)", ir), ir


def test_a_matvec_factor_only_where_the_matrix_side_is_scalar_times_matrix():
    """(``matvec_factor`` and ``sink_statements``: the factor applied once, after the sum)"""
    ir = scalarized_ir(matvec_factors, (M, M + 1.0, X[:3], 0.7))
    assert ir.count("mul(beta, ") == 1 and "add(" in ir and "mul(A" not in ir, ir
    # ``p``'s factor scales each sum once, after the inner loop
    assert re.search(r"^    _t\d+: f64 = mul\(beta, _t\d+\)\n    p\[_i1\] = _t\d+$", ir, re.M), ir
    assert "matmul" not in ir, ir
    # (``nest_extents``: each product checks that its sides have one length; ``emit``: only
    # the interchanged loops, which add into the result, start from zeros)
    assert ir.count("same_len(") == 4, ir
    assert "p: f64[:] = empty(" in ir and "q: f64[:] = zeros(" in ir and "r: f64[:] = empty(" in ir, ir


# hand-built typed IR: shapes the frontend does not write today, that the pass's rules cover
L = Loc("<unit>", 1, 0, "")
V1, V2, F64 = Array("f64", 1), Array("f64", 2), Scalar("f64")
SUM = (("axis", None), ("keepdims", False))


def hand(params, body, result, types):
    return format_function(scalarize(Function("f", params, body, result, "<unit>", types=types)))


def read(target, array, *items, attrs=()):
    return Assign(target, "getitem", (Var(array),), L, index=items, attrs=attrs)


def test_new_names_follow_the_largest_temporary_number():
    """(``_Scalarizer``: numbering starts after the largest ``_t`` number, not at the first
    free one: a gap at ``_t2``)"""
    ir = hand(["x"], [Assign("_t3", "mul", (Var("x"), Const(2.0)), L),
                      Assign("_t1", "sum", (Var("_t3"),), L, attrs=SUM)],
              "_t1", {"x": V1, "_t3": V1, "_t1": F64})
    assert "_t4: i64 = dim(x, 0)" in ir and "_t2" not in ir, ir


def test_a_read_used_twice_is_not_composed():
    """(``composable``: the inner read ``_t1 = A[1]`` used once; here twice)"""
    ir = hand(["A"], [read("_t1", "A", Const(1)),
                      read("_t2", "_t1", Slice(Const(1), None, None)),
                      read("_t3", "_t1", Slice(None, Const(-1), None)),
                      Assign("_t4", "mul", (Var("_t2"), Var("_t3")), L),
                      Assign("_t5", "sum", (Var("_t4"),), L, attrs=SUM)],
              "_t5", {"A": V2, "_t1": V1, "_t2": V1, "_t3": V1, "_t4": V1, "_t5": F64})
    assert "_t1: f64[:] = getitem(A[1])" in ir and "getitem(_t1[" in ir, ir


def test_a_read_with_attributes_is_not_composed():
    """(``composable``: an inner read with attributes, an augmented store's ``aug_read``)"""
    ir = hand(["A"], [read("_t1", "A", Const(1), attrs=(("aug_read", True),)),
                      read("_t2", "_t1", Slice(Const(1), None, None)),
                      Assign("_t3", "mul", (Var("_t2"), Const(2.0)), L),
                      Assign("_t4", "sum", (Var("_t3"),), L, attrs=SUM)],
              "_t4", {"A": V2, "_t1": V1, "_t2": V1, "_t3": V1, "_t4": F64})
    assert "getitem(A[1]" in ir and "getitem(_t1[" in ir, ir


def test_a_float_tree_stored_into_an_int_array_stays_a_store():
    """(``valid``: NumPy's casting on store; type inference refuses it in user code)"""
    ir = hand(["k", "x"], [Assign("_t1", "mul", (Var("x"), Const(2.0)), L),
                           Store("k", (Slice(None, None, None),), Var("_t1"), None, L),
                           Assign("_t2", "sum", (Var("x"),), L, attrs=SUM)],
              "_t2", {"k": Array("i64", 1), "x": V1, "_t1": V1, "_t2": F64})
    assert "k[:] = _t1" in ir, ir


# ----------------------------------------------------------------------------- values
@pytest.mark.parametrize("target", ["python", "cpu"])
def test_values_against_the_oracle(target):
    check_against_oracle(store_between, (X, 0.7), target)
    check_against_oracle(bool_arith, (X, MASK), target, wrt=(0,))
    check_against_oracle(matvec_factors, (M, M + 1.0, X[:3], 0.7), target)


@pytest.mark.parametrize("attrs, why", [
    ((("axis", 0), ("keepdims", False), ("initial", 0.0)), "another parameter"),
    ((("axis", (0,)), ("keepdims", False)), "an axis that is not one integer"),
    ((("axis", 2), ("keepdims", False)), "an axis out of range"),
], ids=["initial", "tuple", "range"])
def test_a_sum_along_an_axis_qualifies_only_as_documented(attrs, why):
    """(``axis_sum_axis``: one integer axis in range and no other parameter; else a call)"""
    ir = hand(["A"], [Assign("_t1", "mul", (Var("A"), Const(2.0)), L),
                      Assign("s", "sum", (Var("_t1"),), L, attrs=attrs),
                      Assign("_t2", "sum", (Var("s"),), L, attrs=SUM)],
              "_t2", {"A": V2, "_t1": V2, "s": V1, "_t2": F64})
    assert "s: f64[:] = sum(_t1, " in ir, (why, ir)
