"""Accumulations of adjoints known to be zero are dropped (coarsen.ad.reverse.zero_adjoints),
and only those."""
import ast

import gast
import numpy as np
import pytest

from coarsen.ad.reverse.zero_adjoints import drop_zero_accumulations
from tests.oracle import check_against_oracle


def _run(src, made=frozenset({"z", "w", "acc", "s"})):
    body = gast.parse(src).body
    before = gast.dump(gast.Module(body=body, type_ignores=[]))
    out = drop_zero_accumulations(body, set(made))
    assert gast.dump(gast.Module(body=body, type_ignores=[])) == before     # input unchanged
    return ast.unparse(gast.gast_to_ast(gast.Module(body=out, type_ignores=[])))


def test_dropped_in_the_same_block_and_below():
    out = _run("z = 0.0\nacc[k] += z\nfor i in range(n):\n    if c:\n        s += z\n")
    assert "acc[k] += z" not in out and "s += z" not in out


@pytest.mark.parametrize("src", [
    "z = 0.0\nz = y\nacc[k] += z\n",                                  # reassigned
    "z = 0.0\nfor i in range(n):\n    acc[i] += z\n    z = y\n",      # next trip: not zero
    "z = 0.0\nz += y\nacc[k] += z\n",
    "if c:\n    z = 0.0\nacc[k] += z\n",                                # zero on one path only
    "z = 1.0\nacc[k] += z\n",
    "z = 0.0\nacc[k] -= z * y\nacc[k] += z * y\n",                      # not a bare zero
])
def test_kept_where_it_may_not_be_zero(src):
    out = _run(src)
    assert "acc[k] +=" in out or "acc[i] +=" in out or "acc[k] -=" in out


def test_user_names_are_not_touched():
    out = _run("q = 0.0\nacc[k] += q\n", made={"acc"})
    assert "acc[k] += q" in out


def two_reads(icf, x):
    s = 0.0
    for j in range(icf.shape[0]):
        s += icf[j] + np.exp(icf[j]) * x[j]
    return s * s


def test_gradient_exact_where_a_duplicate_read_has_no_partial():
    rng = np.random.default_rng(8)
    args = (rng.standard_normal(5), rng.standard_normal(5))
    g, _, _ = check_against_oracle(two_reads, args, target="cpu")
