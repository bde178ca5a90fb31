"""Cache keys cover everything that shapes the generated code (issue 9, soundness).

Child processes share one temporary ``COARSEN_CACHE_DIR``; their functions live in modules
written into a temporary folder on ``PYTHONPATH`` (bytecode caching off, so an edit is always
seen).  Each dependency kind is edited in turn: a helper in another module, a helper's default
argument, an ``@njit`` helper, module-level numbers read from the environment at import (by
name and as a module attribute), and a helper captured by a closure.  The next process must
give the new answer; going back must serve the old entry from the cache (a hit, and no new
entry).  Entries written by another coarsen or toolchain version are not served.  In one
process, closures from one factory with different captured helpers get different gradients.
"""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import coarsen
from coarsen.frontend.lower import lower
from coarsen.frontend.source import FunctionRead, NameRead

X = 1.5

HELPERS = '''\
from numba import njit


def square(x):
    return {square}


def scaled(x, c={default}):
    return c * x


@njit
def jitted(x):
    return {jitted}


def captured(x):
    return {captured} * x
'''

OLD = dict(square="x * x", default="2.0", jitted="x * x", captured="2.0")
NEW = dict(square="x * x * x", default="3.0", jitted="4.0 * x", captured="5.0")

CFG = '''\
import os

SCALE = float(os.environ.get("COARSEN_TEST_SCALE", "2.0"))
'''

MAIN = '''\
import os

import deps_cfg
from deps_helpers import captured, jitted, scaled, square

OFFSET = float(os.environ.get("COARSEN_TEST_OFFSET", "1.0"))


def uses_helper(x):
    return square(x) + 1.0


def uses_default(x):
    return scaled(x)


def uses_jit(x):
    return jitted(x)


def uses_global(x):
    return OFFSET * x * x


def uses_attribute(x):
    return deps_cfg.SCALE * x * x


def mk(k):
    def closure(x):
        return k(x) + 1.0
    return closure


uses_closure = mk(captured)
'''

# d/dx at X of each function, before and after its dependency is edited
EXPECTED_OLD = {"uses_helper": 2 * X, "uses_default": 2.0, "uses_jit": 2 * X,
                "uses_global": 2 * X, "uses_attribute": 2 * 2.0 * X, "uses_closure": 2.0}
EXPECTED_NEW = {"uses_helper": 3 * X * X, "uses_default": 3.0, "uses_jit": 4.0,
                "uses_global": 3.0 * 2 * X, "uses_attribute": 0.5 * 2 * X, "uses_closure": 5.0}
NEW_ENV = {"COARSEN_TEST_OFFSET": "3.0", "COARSEN_TEST_SCALE": "0.5"}

CHILD = textwrap.dedent('''
    import json, os, sys
    import coarsen, coarsen.transforms.gradient
    job = json.loads(sys.argv[1])
    for stmt in job.get("patch", []):
        exec(stmt)
    import deps_main
    out = {}
    for name in job["functions"]:
        g = coarsen.differentiate(getattr(deps_main, name), target="python")
        grad = g(%r)
        spec = g.specialize((%r,))
        out[name] = {"grad": grad[0], "cached": spec.cached}
    entries = os.path.join(os.environ["COARSEN_CACHE_DIR"], "entries")
    print(json.dumps({"results": out, "entries": len(os.listdir(entries))}))
''' % (X, X))


@pytest.fixture
def work(tmp_path):
    cache = tmp_path / "cache"
    folder = tmp_path / "work"
    folder.mkdir()
    env = dict(os.environ, COARSEN_CACHE_DIR=str(cache), PYTHONDONTWRITEBYTECODE="1")
    env["PYTHONPATH"] = str(folder) + os.pathsep + env.get("PYTHONPATH", "")
    for key in NEW_ENV:
        env.pop(key, None)
    (folder / "deps_cfg.py").write_text(CFG)
    (folder / "deps_main.py").write_text(MAIN)
    write_helpers(folder, OLD)
    return folder, cache, env


def write_helpers(folder, parts):
    (folder / "deps_helpers.py").write_text(HELPERS.format(**parts))


def child(folder, env, functions, patch=()):
    job = json.dumps({"functions": list(functions), "patch": list(patch)})
    proc = subprocess.run([sys.executable, "-c", CHILD, job], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_each_dependency_kind_invalidates_and_going_back_hits(work):
    folder, cache, env = work
    names = sorted(EXPECTED_OLD)
    first = child(folder, env, names)
    for name in names:
        r = first["results"][name]
        assert not r["cached"], name
        assert r["grad"] == pytest.approx(EXPECTED_OLD[name], rel=1e-12), name
    assert first["entries"] == len(names)

    # every dependency edited at once: each function depends on exactly one of them, so each
    # function's own key must see its own dependency
    write_helpers(folder, NEW)
    edited = child(folder, dict(env, **NEW_ENV), names)
    for name in names:
        r = edited["results"][name]
        assert not r["cached"], f"{name}: a stale entry was served after its dependency changed"
        assert r["grad"] == pytest.approx(EXPECTED_NEW[name], rel=1e-12), name
    assert edited["entries"] == 2 * len(names)

    # back to the old code and environment: the old entries are served, none is added
    write_helpers(folder, OLD)
    back = child(folder, env, names)
    for name in names:
        r = back["results"][name]
        assert r["cached"], f"{name}: the old entry was not reused"
        assert r["grad"] == pytest.approx(EXPECTED_OLD[name], rel=1e-12), name
    assert back["entries"] == 2 * len(names)


def test_entries_of_another_version_are_not_served(work):
    folder, cache, env = work
    fn = ["uses_helper"]
    base = child(folder, env, fn)
    assert not base["results"]["uses_helper"]["cached"] and base["entries"] == 1
    # another coarsen version: its own entry
    other = child(folder, env, fn, patch=['coarsen.transforms.gradient.__version__ = "0.0.0+other"'])
    assert not other["results"]["uses_helper"]["cached"] and other["entries"] == 2
    # another NumPy (any toolchain part): its own entry
    tool = child(folder, env, fn, patch=[
        "_real = coarsen.transforms.gradient.toolchain_versions",
        'coarsen.transforms.gradient.toolchain_versions = lambda: dict(_real(), numpy="0.0.0")'])
    assert not tool["results"]["uses_helper"]["cached"] and tool["entries"] == 3
    again = child(folder, env, fn)
    assert again["results"]["uses_helper"]["cached"] and again["entries"] == 3
    # an entry whose recorded key parts name another version (written by other software under
    # the same file name) is a miss; the gradient is recomputed, still right
    for path in (cache / "entries").iterdir():
        entry = json.loads(path.read_text())
        assert entry["parts"]["version"] == coarsen.__version__ or entry["parts"]["version"] == "0.0.0+other"
        entry["parts"]["version"] = "0.0.0+other"
        path.write_text(json.dumps(entry))
    tampered = child(folder, env, fn)
    r = tampered["results"]["uses_helper"]
    assert not r["cached"] and r["grad"] == pytest.approx(2 * X, rel=1e-12)


# ------------------------------------------------------------------ in one process


@pytest.fixture
def modules(tmp_path, monkeypatch):
    """Write modules under unique names into a folder on sys.path; returns an importer."""
    import importlib
    monkeypatch.setenv("COARSEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.syspath_prepend(str(tmp_path))
    made = []

    def make(name, text):
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(text))
        importlib.invalidate_caches()
        made.append(name)
        return importlib.import_module(name)

    yield make
    for name in made:
        sys.modules.pop(name, None)


def test_closures_from_one_factory_get_their_own_gradients(modules):
    m = modules("cdeps_factory", '''
        def h1(x):
            return 2.0 * x


        def h2(x):
            return 7.0 * x


        def mk(k):
            def f(w, x):
                return k(w) * x
            return f
    ''')
    f1, f2 = m.mk(m.h1), m.mk(m.h2)
    assert f1.__code__ is f2.__code__          # one source, one qualified name
    for target in ("python", "cpu"):
        g1 = coarsen.differentiate(f1, wrt="w", target=target)
        g2 = coarsen.differentiate(f2, wrt="w", target=target)
        assert g1(1.0, 3.0) == pytest.approx(6.0)
        assert g2(1.0, 3.0) == pytest.approx(21.0)   # not the first closure's cached code
        assert g1.specialize((1.0, 3.0)).dependencies != g2.specialize((1.0, 3.0)).dependencies


def test_reads_are_recorded_where_the_frontend_makes_them(modules):
    helper = modules("cdeps_helper", '''
        import numpy as np
        from numba import njit

        C = 0.5


        def inner(x, p=3.0):
            return x ** p


        @njit
        def jit_inner(x):
            return 2.0 * x
    ''')
    main = modules("cdeps_main", '''
        import numpy as np

        import cdeps_helper
        from cdeps_helper import inner, jit_inner

        K = 2.0
        TABLE = np.arange(3.0)


        def f(x):
            return inner(x) * K + cdeps_helper.C + jit_inner(x) + TABLE[1]
    ''')
    deps = lower(main.f)[0].dependencies
    funcs = [(r.module, r.qualname) for r in deps.functions]
    assert funcs == [("cdeps_main", "f"), ("cdeps_helper", "inner"), ("cdeps_helper", "jit_inner")]
    three = ("float", (3.0).hex(), "float")
    assert [r.defaults for r in deps.functions if r.qualname == "inner"] == [(three,)]
    names = {(r.scope, r.name): r.value for r in deps.reads if isinstance(r, NameRead)}
    assert names[("global", "K")] == ("float", (2.0).hex(), "float")
    assert names[("attribute", "cdeps_helper.C")] == ("float", (0.5).hex(), "float")
    assert names[("global", "TABLE")] == ("array", "<f8", 1)
    assert names[("global", "jit_inner")][0] == "jit function"
    assert all(isinstance(r, (FunctionRead, NameRead)) for r in deps.reads)
    before = deps.fingerprint()
    assert lower(main.f)[0].dependencies.fingerprint() == before        # deterministic
    main.K = 2.5
    assert lower(main.f)[0].dependencies.fingerprint() != before        # a baked-in number
    main.K = 2.0
    helper.C = 0.25
    assert lower(main.f)[0].dependencies.fingerprint() != before        # a module attribute
    helper.C = 0.5
    helper.inner.__defaults__ = (4.0,)
    assert lower(main.f)[0].dependencies.fingerprint() != before        # a helper's default
    helper.inner.__defaults__ = (3.0,)
    main.TABLE = np.arange(3.0) + 1                                     # same dtype and rank:
    assert lower(main.f)[0].dependencies.fingerprint() == before        # passed in, not baked


def test_the_sequence_of_reads_not_the_set_identifies_the_code(modules):
    """Three calls of one closure-made helper: (2, 3, 2) and (2, 3, 3) read the same set of
    values but generate different code."""
    m = modules("cdeps_seq", '''
        def make(c):
            def h(x):
                return c * x
            return h


        k1 = make(2.0)
        k2 = make(3.0)
        k3 = make(2.0)


        def f(x):
            return k1(x) + k2(x) * x + k3(x) * x * x
    ''')
    g = coarsen.differentiate(m.f, target="python")
    assert g(1.0)[0] == pytest.approx(2.0 + 6.0 + 6.0)
    before = lower(m.f)[0].dependencies.fingerprint()
    m.k3 = m.make(3.0)
    assert lower(m.f)[0].dependencies.fingerprint() != before
    g2 = coarsen.differentiate(m.f, target="python")
    assert g2(1.0)[0] == pytest.approx(2.0 + 6.0 + 9.0)
    # the first Gradient keeps its specialization (README: fixed at the first call)
    assert g(1.0)[0] == pytest.approx(2.0 + 6.0 + 6.0)


def test_rebinding_a_module_level_array_after_differentiate_is_refused(modules):
    m = modules("cdeps_arr", '''
        import numpy as np

        W = np.ones(3)


        def f(x):
            return x * W[0]
    ''')
    g = coarsen.differentiate(m.f, target="python")
    m.W = np.full(3, 2.0)
    with pytest.raises(coarsen.CoarsenError, match="rebound"):
        g(1.0)
    assert coarsen.differentiate(m.f, target="python")(1.0)[0] == pytest.approx(2.0)
    assert np.all(m.W == 2.0)


def test_a_file_edited_after_its_import_is_refused(tmp_path, monkeypatch):
    """coarsen reads the file; Python runs what it imported.  Edited in between (an editor
    beside a notebook), the gradient was the new text's (f(2) = 8 with gradient 5 from
    `10 * x`), or, where lines moved, another function's."""
    import importlib
    monkeypatch.syspath_prepend(str(tmp_path))
    path = tmp_path / "edited_mod.py"
    helper = tmp_path / "edited_helper.py"
    helper.write_text("def helper(t):\n    return t * t * t\n")
    path.write_text("from edited_helper import helper\n\n\ndef f(x):\n    return helper(x) + x\n\n\n"
                    "def h(x):\n    return 5.0 * x\n\n\ndef k(x):\n    return 3.0 * x\n")
    mod = importlib.import_module("edited_mod")
    assert coarsen.differentiate(mod.h, target="python")(2.0) == (5.0,)
    helper.write_text("def helper(t):\n    return 10.0 * t\n")
    with pytest.raises(coarsen.CoarsenError, match="helper in edited_helper.py is not the code"):
        coarsen.differentiate(mod.f, target="python")(2.0)
    # lines moved: k's first line now holds h (read before the edit, h is as it was)
    path.write_text("from edited_helper import helper\n\n\ndef f(x):\n    return helper(x) + x\n\n\n\n\n\n"
                    "def h(x):\n    return 5.0 * x\n\n\ndef k(x):\n    return 3.0 * x\n")
    with pytest.raises(coarsen.CoarsenError, match="k in edited_mod.py is not the code") as e:
        coarsen.differentiate(mod.k, target="python")
    assert "importlib.reload" in e.value.hint
    importlib.reload(sys.modules["edited_helper"])
    mod = importlib.reload(mod)
    assert coarsen.differentiate(mod.f, target="python").value_and_grad(2.0) == (22.0, (11.0,))
