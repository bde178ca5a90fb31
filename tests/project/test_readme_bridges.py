"""The README's "## PyTorch, JAX and SciPy" runs as written: its three python blocks, taken
from README.md itself, are written into one file in a temporary folder and run in a fresh
interpreter (a private, empty coarsen cache), followed by checks of what they compute (the
gradient against the closed form of the Euler recurrence, the vmap against single calls, the
optimizer's minimum), so the examples cannot go stale silently."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
README = os.path.join(ROOT, "README.md")

CHECKS = '''
# ---- appended by tests/project/test_readme_bridges.py
n = 0
t = 0.0
while t < 1.0:
    t, n = t + 0.01, n + 1
value = (1.0 - 0.01 * 0.5) ** n                    # decay(0.5, 1.0, 1.0) in closed form
want = 2.0 * (value - 0.5) * n * (1.0 - 0.01 * 0.5) ** (n - 1) * -0.01
assert abs(k.grad.item() - want) <= 1e-12 * abs(want), (k.grad.item(), want)
assert abs(float(dk) - want) <= 1e-12 * abs(want), (float(dk), want)
single = [float(G(q, 1.0, 1.0)) for q in np.linspace(0.1, 1.0, 4)]
assert np.allclose(np.asarray(ys), single, rtol=1e-15, atol=0), (ys, single)
assert r.success and np.allclose(r.x, np.ones(4), atol=1e-4), r.x
print("@@ bridges ok")
'''


def section_blocks(text):
    section = text.split("\n## PyTorch, JAX and SciPy\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```python\n(.*?)^```$", section, re.MULTILINE | re.DOTALL)


def test_readme_bridge_examples_run(tmp_path):
    with open(README, encoding="utf-8") as fh:
        blocks = section_blocks(fh.read())
    assert len(blocks) == 3, "README's bridges section should have three python blocks"
    assert "coarsen.torch.function" in blocks[0] and "coarsen.jax.function" in blocks[1]
    assert "coarsen.scipy.objective" in blocks[2]
    script = tmp_path / "bridges_example.py"
    script.write_text("".join(blocks) + CHECKS)
    env = dict(os.environ, COARSEN_CACHE_DIR=str(tmp_path / "cache"))
    r = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "@@ bridges ok" in r.stdout
