"""Shared fixtures for tests of coarsen.lowering.

Every test runs with ``COARSEN_CACHE_DIR`` pointing at a private temporary directory, so tests
never touch the user's cache; tests that need a cache of their own override it per test.
"""

import os
import subprocess
import sys

import pytest


@pytest.fixture(scope="session", autouse=True)
def _session_cache_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("coarsen_cache")
    old = os.environ.get("COARSEN_CACHE_DIR")
    os.environ["COARSEN_CACHE_DIR"] = str(path)
    yield path
    if old is None:
        os.environ.pop("COARSEN_CACHE_DIR", None)
    else:
        os.environ["COARSEN_CACHE_DIR"] = old


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    """A fresh, empty cache directory for one test."""
    path = tmp_path / "cache"
    monkeypatch.setenv("COARSEN_CACHE_DIR", str(path))
    return path


def _run_python(code: str, *, env_extra=None, cwd=None, timeout=120) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter; raise with its output if it fails."""
    env = dict(os.environ)
    env.update(env_extra or {})
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"subprocess failed ({proc.returncode}):\nSTDOUT:\n{proc.stdout}\nSTDERR:\n{proc.stderr}"
        )
    return proc


@pytest.fixture(scope="session")
def run_python():
    """``run_python(code, env_extra=None, cwd=None)``: run code in a fresh interpreter."""
    return _run_python


PER_SET_SOURCE = '''\
import math
import numpy as np


def push(tape, top, v):
    tape[top] = v
    return top + 1


def f(x, w, s, n):
    tape = np.empty(n)
    top = 0
    acc = 0.0
    for j in range(n):
        t = math.sin(x[j] * w[j])
        top = push(tape, top, t)
        acc += t * s
    x_bar = np.zeros_like(x)
    w_bar = np.zeros_like(w)
    s_bar = 0.0
    for j in range(n - 1, -1, -1):
        top -= 1
        t = tape[top]
        s_bar += t
        c = math.cos(x[j] * w[j]) * s
        x_bar[j] = c * w[j]
        w_bar[j] = c * x[j]
    return acc, (x_bar, w_bar, s_bar)


def f2(A, b):
    v = 0.0
    A_bar = np.empty_like(A)
    b_bar = 0.0
    for i in range(A.shape[0]):
        for j in range(A.shape[1]):
            t = math.tanh(A[i, j])
            v += t * b
            A_bar[i, j] = (1.0 - t * t) * b
            b_bar += t
    return v, (A_bar, b_bar)
'''

F_PARAMS = [("x", "float64[:]"), ("w", "float64[:]"), ("s", "float64"), ("n", "int64")]
F_BATCHED = [True, False, True, False]
F2_PARAMS = [("A", "float64[:, :]"), ("b", "float64")]


@pytest.fixture(scope="session")
def batch_module_source():
    """A module rendered for the CPU from gast (comments included), with batch drivers appended:
    f_batch (cpu), f_batch_py (python), f2_batch (cpu: 2-D batched A, shared scalar b)."""
    import gast

    from coarsen.lowering import batch_source, render

    tree = gast.parse(PER_SET_SOURCE)
    for stmt in gast.walk(tree):
        if isinstance(stmt, gast.For):
            stmt.coarsen_comment = "loop over the entries"
    source = render(tree, target="cpu", header="per-set gradients for the batch tests")
    drivers = [
        batch_source("f", F_PARAMS, F_BATCHED, wrt=["x", "w", "s"], target="cpu"),
        batch_source("f", F_PARAMS, F_BATCHED, wrt=["x", "w", "s"], target="python",
                     driver_name="f_batch_py"),
        batch_source("f2", F2_PARAMS, [True, False], wrt=["A", "b"], target="cpu"),
    ]
    return source + "\n\n" + "\n\n".join(drivers)


@pytest.fixture(scope="session")
def batch_module(batch_module_source):
    from coarsen.lowering import build

    return build(batch_module_source, name="batch_demo", target="cpu")
