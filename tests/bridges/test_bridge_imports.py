"""The bridges are imported on use: ``import coarsen`` imports neither PyTorch nor JAX (checked
in a fresh interpreter), ``coarsen.torch``/``jax``/``scipy`` are reachable after a plain
``import coarsen``, and a framework that cannot be imported gives a ``CoarsenError`` naming the
extra to install (in a fresh interpreter where importing it fails)."""
import os
import subprocess
import sys
import textwrap

import pytest

import coarsen
from coarsen.bridge import load

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(tmp_path, code):
    (tmp_path / "model.py").write_text("def f(x):\n    return x * x\n")
    env = dict(os.environ, COARSEN_CACHE_DIR=str(tmp_path / "cache"))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)


def test_import_coarsen_imports_no_framework(tmp_path):
    r = _run(tmp_path, """
        import sys
        import coarsen
        import coarsen.transforms.batching
        heavy = sorted(m for m in ("torch", "jax", "jaxlib") if m in sys.modules)
        print("HEAVY", heavy)
        assert coarsen.scipy.objective and "torch" not in sys.modules
        print("BRIDGES", [m for m in ("coarsen.torch", "coarsen.jax") if m in sys.modules])
    """)
    assert r.returncode == 0, r.stderr
    assert "HEAVY []" in r.stdout and "BRIDGES []" in r.stdout


@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_a_missing_framework_names_its_extra(tmp_path, framework):
    r = _run(tmp_path, f"""
        import sys
        sys.modules[{framework!r}] = None          # importing it now raises ImportError
        import coarsen
        from model import f
        try:
            coarsen.{framework}.function(f)
        except coarsen.CoarsenError as e:
            print("PROBLEM", e.problem)
            print("HINT", e.hint)
    """)
    assert r.returncode == 0, r.stderr
    assert f"PROBLEM coarsen.{framework} needs {framework}, which is not installed" in r.stdout
    assert f'HINT pip install "coarsen[{framework}]"' in r.stdout


def test_bridges_are_attributes_of_the_package():
    assert coarsen.torch.function and coarsen.jax.function and coarsen.scipy.objective
    with pytest.raises(AttributeError, match="no attribute 'tensorflow'"):
        coarsen.tensorflow
    with pytest.raises(coarsen.CoarsenError, match="not installed") as e:
        load("no_such_framework_exists", "torch")
    assert e.value.hint == 'pip install "coarsen[torch]"'
