"""The arrays suite (apps/arrays, apps/bench/arrays.py): for every kernel at size s, coarsen's
gradient (default target) equals JAX's and a Richardson-extrapolated central difference of a
random direction (the formula of fd_oracle); and the runner runs end to end in quick mode.

A kernel coarsen refuses or gets wrong fails here: it is a compiler bug to fix, never a kernel to
rewrite (floyd-warshall's, tests/ad/reverse/test_taped_shapes.py)."""
from __future__ import annotations

import inspect
import json

import numpy as np
import pytest

import apps.arrays as karr
from apps.bench import arrays as suite

pytest.importorskip("jax")

def _params(kernel):
    return pytest.param(kernel, id=kernel)


def _wrt_positions(mod):
    names = list(inspect.signature(mod.objective).parameters)
    return [names.index(w) for w in mod.WRT]


def fd_direction(fn, args, positions, direction, h=1e-3):
    """``d/dt fn(args + t v)`` at 0 by central differences with one Richardson step (the
    extrapolation of tests/apps/fd_oracle.py), in float64, with the plain Python objective."""
    def at(t):
        a = list(args)
        for p, v in zip(positions, direction):
            a[p] = np.asarray(args[p], dtype=np.float64) + t * v
            if np.ndim(args[p]) == 0:
                a[p] = float(a[p])
        return fn(*a)

    def central(s):
        return (at(s) - at(-s)) / (2.0 * s)

    return (4.0 * central(h / 2.0) - central(h)) / 3.0


def _jax_grad(mod, args):
    import jax

    jax.config.update("jax_enable_x64", True)
    pos = _wrt_positions(mod)
    jargs = [np.asarray(a, dtype=np.float64) if i in pos else a for i, a in enumerate(args)]
    return tuple(np.asarray(g) for g in jax.grad(mod.jax_objective, argnums=tuple(pos))(*jargs))


@pytest.mark.parametrize("kernel", [_params(k) for k in karr.KERNEL_NAMES])
def test_gradient_matches_jax_and_finite_differences(kernel):
    import coarsen

    mod = karr.load(kernel)
    args = mod.make_inputs("s", seed=0)
    value, grads = coarsen.differentiate(mod.objective, wrt=tuple(mod.WRT)).value_and_grad(*args)
    grads = grads if isinstance(grads, tuple) else (grads,)
    assert value == pytest.approx(mod.objective(*args), rel=1e-12, abs=1e-12)
    # JAX
    ref = _jax_grad(mod, args)
    assert len(grads) == len(ref) == len(mod.WRT)
    for name, g, r in zip(mod.WRT, grads, ref):
        assert np.shape(g) == np.shape(r), name
    assert suite.grad_err(grads, ref) <= 1e-10, (kernel, suite.grad_err(grads, ref))
    # a central difference of a random direction
    rng = np.random.default_rng(1)
    pos = _wrt_positions(mod)
    direction = [rng.standard_normal(np.shape(args[p])) for p in pos]
    fd = fd_direction(mod.objective, args, pos, direction)
    ad = sum(float(np.sum(np.asarray(g) * v)) for g, v in zip(grads, direction))
    assert abs(ad - fd) <= 1e-6 * max(1.0, abs(ad) + abs(fd)), (kernel, ad, fd)


def test_registry():
    assert len(karr.KERNEL_NAMES) >= 18 and len(set(karr.KERNEL_NAMES)) == len(karr.KERNELS)
    assert {g for _, g in karr.KERNELS} == set(karr.GROUPS)
    assert karr.canonical("jacobi_1d") == "jacobi-1d"
    with pytest.raises(KeyError):
        karr.canonical("nope")
    for k in karr.KERNEL_NAMES:
        mod = karr.load(k)
        assert mod.__doc__ and set(karr.SIZES) <= set(mod.SIZES), k
        names = list(inspect.signature(mod.objective).parameters)
        assert list(inspect.signature(mod.jax_objective).parameters) == names, k
        args = mod.make_inputs("s")
        for w in mod.WRT:
            a = args[names.index(w)]
            assert isinstance(a, float) or (isinstance(a, np.ndarray) and a.dtype == np.float64), (k, w)


def test_runner_end_to_end_quick(tmp_path, capsys):
    from apps.bench.cli import main

    out = tmp_path / "arrays"
    assert main(["--suite", "arrays", "--quick", "--kernels", "gemm,svm", "--sizes", "s",
                 "--out", str(out), "--no-progress", "--min-time", "0.001", "--samples", "2"]) == 0
    data = json.loads((out / "results.json").read_text())
    assert data["meta"]["complete"] is True
    assert [(c["kernel"], c["size"]) for c in data["cases"]] == [("gemm", "s"), ("svm", "s")]
    gemm, svm = data["cases"]
    assert set(gemm["tools"]) == {"coarsen", "jax", "numba_primal", "numpy_primal"}
    assert set(svm["tools"]) == set(suite.TOOLS)         # coarsen_fine for the loops group
    for c in data["cases"]:
        for t, r in c["tools"].items():
            assert r["status"] == "ok" and r["median_s"] > 0, (c["kernel"], t, r)
        assert c["tools"]["coarsen"]["err"] <= suite.TOL
        assert c["tools"]["coarsen"]["first_gradient_s"] > 0
    md = (out / "results.md").read_text()
    assert "### arrays:" in md and "### loops:" in md and "| gemm | s (4x5x3) |" in md
    assert "**geomean**" in md and "JAX / coarsen" in md and "BLAS" in md
    assert "| gemm |" in capsys.readouterr().out


def test_failures_are_cells_with_footnotes():
    case = {"kernel": "gemm", "group": "arrays", "size": "s", "dims": [4, 5, 3], "tools": {
        "coarsen": {"status": "refused", "message": "CoarsenError: np.frob is not supported"},
        "jax": {"status": "ok", "median_s": 2e-5},
        "numba_primal": {"status": "ok", "median_s": 1e-6},
        "numpy_primal": {"status": "mismatch", "message": "value differs"}}}
    text = "\n".join(suite.render_tables({"cases": [case]}))
    assert "REFUSED [^1]" in text and "[^1]: coarsen: CoarsenError: np.frob is not supported" in text
    assert "MISMATCH [^2]" in text


def test_blas_info_degrades_without_threadpoolctl(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "threadpoolctl", None)
    assert suite.blas_info() is None
    assert "threadpoolctl is not installed" in suite.render_env({"blas": None})[0]


def test_main_reexecs_without_the_blas_variables(monkeypatch):
    import os

    from apps.bench import __main__ as entry

    calls = []
    monkeypatch.setattr(os, "execve", lambda exe, argv, env: calls.append((argv, env)))
    monkeypatch.delenv("OPENBLAS_CORETYPE", raising=False)
    monkeypatch.delenv("OPENBLAS_L2_SIZE", raising=False)
    monkeypatch.setenv("OPENBLAS_THREAD_TIMEOUT", "4")
    entry._reexec_without_blas_env()
    assert calls == []
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    entry._reexec_without_blas_env()
    (argv, env), = calls
    assert argv[1:3] == ["-m", "apps.bench"] and "OPENBLAS_CORETYPE" not in env
    assert env[suite.UNSET_ENV] == "OPENBLAS_CORETYPE=Haswell"
    assert env["OPENBLAS_THREAD_TIMEOUT"] == "4" and "COARSEN_BENCH_SET" not in env


def test_main_sets_a_short_openblas_thread_timeout(monkeypatch):
    # two OpenBLAS libraries in one process: the idle one's spinning threads slowed the other's
    # calls 2-3x when the harness alternated tools; a timeout set by the user is kept
    import os

    from apps.bench import __main__ as entry

    calls = []
    monkeypatch.setattr(os, "execve", lambda exe, argv, env: calls.append((argv, env)))
    monkeypatch.delenv("OPENBLAS_CORETYPE", raising=False)
    monkeypatch.delenv("OPENBLAS_L2_SIZE", raising=False)
    monkeypatch.delenv("OPENBLAS_THREAD_TIMEOUT", raising=False)
    entry._reexec_without_blas_env()
    (argv, env), = calls
    assert env["OPENBLAS_THREAD_TIMEOUT"] == "4" and env["COARSEN_BENCH_SET"] == "OPENBLAS_THREAD_TIMEOUT=4"
    assert suite.UNSET_ENV not in env
    monkeypatch.setenv("COARSEN_BENCH_SET", "OPENBLAS_THREAD_TIMEOUT=4")
    assert "`OPENBLAS_THREAD_TIMEOUT=4`" in "\n".join(suite.render_env(suite.env_info()))


def test_the_main_run_has_an_arrays_step_that_can_be_skipped():
    from apps.bench.cli import parse_config
    from apps.bench.report import render_markdown

    assert parse_config(["--quick"]).arrays is None
    assert parse_config(["--quick", "--no-arrays"]).arrays is False
    cfg = parse_config(["--suite", "arrays", "--quick"])
    assert isinstance(cfg, suite.ArraysConfig) and cfg.sizes == ["m"]
    assert cfg.kernels == list(karr.KERNEL_NAMES)
    arrays = {"meta": {"env": {"blas": []}, "samples": 3, "min_time_s": 0.05, "tolerance": 1e-8},
              "cases": [{"kernel": "svm", "group": "loops", "size": "m", "dims": [5000, 20],
                         "tools": {"coarsen": {"status": "ok", "median_s": 1e-4}}}]}
    result = {"meta": {"date": "d", "python": "3", "machine": "x", "cpus": 2, "versions": {},
                       "tolerance": 1e-8, "min_time_s": 0.05, "samples": 3, "slow_limit_s": 1,
                       "memory_method": "m", "tools": ["primal"], "skipped_peers": []},
              "cases": [], "arrays": arrays}
    text = render_markdown(result)
    assert "## Arrays suite" in text and "| svm | m (5000x20) |" in text


def test_a_numba_objective_is_the_objective_for_numba():
    # softmax's np.max(X, axis=1) does not compile in Numba: its Numba primal is
    # ``numba_objective``, the same values (rows with ties and a row of one element too)
    from apps.arrays import softmax

    assert [k for k in karr.KERNEL_NAMES if hasattr(karr.load(k), "numba_objective")] == ["softmax"]
    primal = karr.numba_primal(softmax)
    rng = np.random.default_rng(2)
    for shape in ((4, 5), (3, 1), (6, 33)):
        X, W = rng.integers(-3, 3, shape).astype(float), rng.standard_normal(shape)
        assert primal(X, W) == pytest.approx(softmax.objective(X, W), rel=1e-13, abs=1e-13)
    assert list(inspect.signature(softmax.numba_objective).parameters) == ["X", "W"]
