"""Golden files pin the generated source of a few zoo functions, byte for byte.

The generated code is deterministic: the same function and signature give the same bytes in
every process (checked under two hash seeds).  After an intended change to the generated
code, regenerate with ``COARSEN_UPDATE_GOLDEN=1 python -m pytest tests/core/test_golden.py``
and review the diff like any other change."""
import os
import subprocess
import sys

import pytest

import coarsen
from tests.core import programs as P
from tests.zoo import scalar

GOLDEN = os.path.join(os.path.dirname(os.path.dirname(__file__)), "golden")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))

CASES = [
    ("scalar_branches3", scalar.branches3, (1.7, 0.6)),      # if/elif/else
    ("logistic_map", P.logistic_map, (3.1, 0.3, 20)),
    ("arith_closed_form", P.arith, (1.3, 7)),
    ("logistic_loss", P.logistic_loss, (0.3, 1.0)),
    ("branchy", P.branchy, (0.9, 0.8)),
]


def test_every_case_is_live():
    """No case is silently dropped: each has a function and arguments, and a golden file for
    both modes (a missing file fails its golden test rather than skipping it)."""
    assert len(CASES) == 5
    for name, fn, args in CASES:
        assert callable(fn) and isinstance(args, tuple), name
        for mode in ("coarse", "fine"):
            assert os.path.exists(os.path.join(GOLDEN, f"{name}_{mode}.py")), (name, mode)


def _source(fn, args, coarse, plan="recompute"):
    # the coarse goldens pin the recompute step (plan="auto" follows the machine's calibrated
    # cost weights; the preaccumulated step has its own golden below)
    g = coarsen.differentiate(fn, coarsen=coarse, target="python", plan=plan)
    return g.source_for(*args)


def _check_golden(src, fname):
    path = os.path.join(GOLDEN, fname)
    if os.environ.get("COARSEN_UPDATE_GOLDEN"):
        with open(path, "w") as fh:
            fh.write(src)
    with open(path) as fh:
        expected = fh.read()
    assert src == expected, f"generated source changed: diff {path} (see this module's docstring)"


@pytest.mark.parametrize("coarse", [True, False], ids=["coarse", "fine"])
@pytest.mark.parametrize("name,fn,args", CASES, ids=[c[0] for c in CASES])
def test_golden_source(name, fn, args, coarse):
    _check_golden(_source(fn, args, coarse), f"{name}_{'coarse' if coarse else 'fine'}.py")


def test_golden_preaccumulated_step():
    """The preaccumulated step of the logistic map: two partials evaluated and taped in the
    forward sweep, the reverse step two multiply-adds."""
    src = _source(P.logistic_map, (3.1, 0.3, 20), True, plan="preaccumulate")
    _check_golden(src, "logistic_map_preaccumulate.py")
    assert "r_bar += x_bar * _pa2" in src and "x_bar = x_bar * _pa3" in src


def test_same_bytes_under_other_hash_seeds():
    code = ("import sys; sys.path.insert(0, %r); import coarsen; from tests.core import programs as P; "
            "print(coarsen.differentiate(P.branchy, target='python').source_for(0.9, 0.8))" % ROOT)
    outs = []
    for seed in ("1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        outs.append(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                                   text=True, check=True).stdout)
    assert outs[0] == outs[1] and "value_and_grad_branchy" in outs[0]


def test_generated_code_passes_ruff(tmp_path):
    """Generated modules are clean Python: ruff's default rules (pyflakes, pycodestyle errors)."""
    # ruff is a test dependency (pip install -e '.[test]'): run it through this interpreter,
    # so the test runs (and fails when ruff is missing) whatever is on PATH
    paths = []
    for name, fn, args in CASES:
        for coarse in (True, False):
            for target in ("python", "cpu"):
                src = coarsen.differentiate(fn, coarsen=coarse, target=target).source_for(*args)
                p = tmp_path / f"{name}_{coarse}_{target}.py"
                p.write_text(src)
                paths.append(str(p))
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--isolated", *paths],
                         capture_output=True, text=True)
    assert "No module named ruff" not in out.stderr, "ruff is not installed: pip install -e '.[test]'"
    assert out.returncode == 0, out.stdout + out.stderr
    assert len(paths) == 4 * len(CASES)
