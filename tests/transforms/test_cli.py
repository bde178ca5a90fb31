"""The command line (python -m coarsen), run in subprocesses."""
import importlib.util
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import coarsen

MODULE = '''\
import math


def orbit(x, w, n):
    """A small loop: x is advanced n times by a damped rotation."""
    acc = 0.0
    for k in range(n):
        x = x * math.cos(w) + 0.1 * math.sin(w * x)
        acc += x * x
    return acc
'''


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    cache = tmp_path_factory.mktemp("coarsen_cache_cli")
    return dict(os.environ, COARSEN_CACHE_DIR=str(cache))


def run(args, env, cwd):
    return subprocess.run([sys.executable, "-m", "coarsen", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=240)


def test_cli_export_matches_differentiate(tmp_path, env, monkeypatch):
    (tmp_path / "mymod.py").write_text(MODULE)
    proc = run(["export", "mymod:orbit", "--wrt", "x,w", "--target", "python", "--fine",
                "--signature", "float64, float64, int64", "-o", "orbit_grad.py"], env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "wrote" in proc.stdout and "orbit_grad.py" in proc.stdout
    text = (tmp_path / "orbit_grad.py").read_text()
    assert "fine-grained AD; target python" in text and "signature: (float64, float64, int64)" in text
    # the same gradient in this process, from the same file
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("COARSEN_CACHE_DIR", env["COARSEN_CACHE_DIR"])
    spec = importlib.util.spec_from_file_location("mymod", tmp_path / "mymod.py")
    mymod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mymod)
    g = coarsen.differentiate(mymod.orbit, wrt=("x", "w"), coarsen=False, target="python")
    spec = importlib.util.spec_from_file_location("orbit_grad", tmp_path / "orbit_grad.py")
    out = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(out)
    v, (gx, gw) = out.value_and_grad_orbit(0.4, 1.3, 6)
    rv, (rx, rw) = g.value_and_grad(0.4, 1.3, 6)
    assert (v, gx, gw) == (rv, rx, rw)
    # a path to a file works too, and a single --wrt name gives a single gradient out
    proc = run(["export", str(tmp_path / "mymod.py") + ":orbit", "--wrt", "w", "--signature",
                "float64, float64, int64", "-o", str(tmp_path / "orbit_w.py")], env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "_SINGLE = True" in (tmp_path / "orbit_w.py").read_text()


def test_cli_errors(tmp_path, env):
    (tmp_path / "mymod.py").write_text(MODULE)
    proc = run(["export", "mymod:orbit", "--signature", "float64, float64", "-o", "x.py"], env, tmp_path)
    assert proc.returncode == 1 and "has 2 types but the function has 3" in proc.stderr
    assert not (tmp_path / "x.py").exists()
    proc = run(["export", "mymod:nothing", "--signature", "float64", "-o", "x.py"], env, tmp_path)
    assert proc.returncode != 0 and "has no 'nothing'" in proc.stderr
    proc = run(["export", "mymod:orbit", "-o", "x.py"], env, tmp_path)
    assert proc.returncode == 2 and "--signature" in proc.stderr


def test_cli_demo(tmp_path, env):
    proc = run(["demo"], env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    rows = re.findall(r"^\s+(theta0|omega0|damping|dt)\s+(\S+)\s+(\S+)\s+(\S+)$", out, re.M)
    assert [r[0] for r in rows] == ["theta0", "omega0", "damping", "dt"]
    for _, ad, fd, rel in rows:
        assert float(rel) < 1e-6
        np.testing.assert_allclose(float(ad), float(fd), rtol=1e-6)
    assert "def value_and_grad_damped_pendulum(" in out and "# reverse sweep" in out
