"""Alpha-renaming: a function's gradient does not depend on what its variables are called.

Every zoo case (``tests/zoo``, as ``tests/endtoend/test_zoo.py`` enumerates them) and every realistic
program (``tests/zoo/realistic.py``) is rewritten with adversarial names: each parameter and
local of the function, and of the same-module helpers it calls (transitively), is renamed
consistently to names that coarsen's own generated code uses or derives -- ``x_bar`` next to
``x``, ``u_y`` next to ``_y``, ``_t1``, ``_g1``, ``_s1_p1``, ``_ftape``, ``_fpos``, ``_ret``,
``_grow``, ``tape``, ``pos``, and ``np``/``math`` in a function that does not use the module.
A new name is never a global or builtin the function reads, nor a keyword, and two variables
of one function never share a name, so the copy means exactly what the original means.

The copy is written to a real file (``inspect.getsource`` and coarsen read it from there) and
executed in a module whose namespace starts as a copy of the original module's globals, so
module constants, cross-module helpers and imports resolve to the same objects; the renamed
helpers replace their originals in that namespace only.  Keyword arguments of calls to a
renamed helper are renamed with its parameters, and a ``wrt`` given by name follows the
renaming.

The check: ``g.value_and_grad(*args)`` of the copy is **bit-identical** (value and every
gradient: same type, dtype, shape and bytes) to the original's, coarse and fine.  The python
target runs every case, coarse and fine; the cpu target (one Numba compile per gradient) runs
every twelfth case (by the zoo's index: cases whose cpu gradients ``tests/endtoend/test_zoo.py`` also
builds), one mode each, alternating coarse and fine; ``COARSEN_FULL_MATRIX=1`` runs all.  The originals' gradient objects come from the harness cache shared
with ``tests/endtoend/test_zoo.py`` and ``tests/endtoend/test_realistic.py``.
"""
from __future__ import annotations

import ast
import atexit
import builtins
import importlib.util
import inspect
import keyword
import os
import shutil
import sys
import tempfile
import textwrap
import types

import numpy as np
import pytest

import coarsen
from tests.zoo import all_zoo_cases, case_ids, realistic
from tests.zoo.harness import build

FULL = os.environ.get("COARSEN_FULL_MATRIX") == "1"
# CI budget: a Numba compile costs ~2 s, so the cpu target checks every CPU_EVERY-th case
# (renaming changes the generated source, which the python target runs for every case),
# one mode each, alternating coarse and fine (a multiple of 3: test_zoo.py builds both cpu
# gradients of those originals, shared through the harness cache)
CPU_EVERY = 12

ZOO = all_zoo_cases()
REAL = list(realistic.CASES)
CASES = ZOO + REAL
IDS = case_ids(ZOO) + case_ids(REAL)
assert len(set(IDS)) == len(IDS)


# -------------------------------------------------------------------------- renaming

# Groups of names that clash with coarsen's generated names, or sit next to each other the
# way its renaming of user names goes (``x_bar`` -> ``x_bar_v``, ``_y`` -> ``u_y``).  A
# function takes names from consecutive groups, starting at a group that rotates with the
# case, so that pairs land in the same function.
NAME_GROUPS = [
    ["x", "x_bar", "x_bar_v"], ["_t1", "u_t1", "_g1"], ["_s1_p1", "u_s1_p1", "_ftape"],
    ["_fpos", "_ret", "u_ret"], ["tape", "pos"], ["np", "math"], ["_y", "u_y"],
    ["_grow", "_reserve"], ["y", "y_bar", "y_bar_v"], ["_t2", "_t2_bar", "u_t2"],
    ["_ret_bar", "_value"], ["_itape", "_ipos"], ["_s1_t0", "_g2"],
    ["_tape_floats", "_tape_ints"], ["need", "out", "size"], ["_t3", "_s2_p1", "_s1_u1"],
    ["_push_array", "_pop_array", "_push"], ["_n1", "u_n1"], ["_k", "_idx"],
    ["_closed1", "_trip", "_trips"], ["tapes", "_shape"], ["_brk", "_cont", "_next"],
    ["_at", "_outer", "_range_len"], ["_returned", "_status", "_mm11"],
    ["_acc1", "_acc2", "u_acc1"],
]
_RESERVED = set(dir(builtins)) | set(keyword.kwlist) | {"__debug__"}


def _pool(rotation):
    k = rotation % len(NAME_GROUPS)
    groups = NAME_GROUPS[k:] + NAME_GROUPS[:k]
    names = [n for g in groups for n in g]
    # more than the groups hold: more compiler-like names
    names += [f"_t{j}" for j in range(4, 60)] + [f"_t{j}_bar" for j in range(4, 60)]
    return names


def _params(fdef):
    a = fdef.args
    out = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    for v in (a.vararg, a.kwarg):
        if v is not None:
            out.append(v.arg)
    return out


def _locals_and_free(fdef):
    params = _params(fdef)
    order, loaded = list(params), set()
    for node in ast.walk(fdef):
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, (ast.Store, ast.Del)):
                if node.id not in order:
                    order.append(node.id)
            else:
                loaded.add(node.id)
    return params, order, {n for n in loaded if n not in order}


def rename_function(fdef, rotation):
    """Rename every parameter and local of ``fdef`` (in place); returns the mapping."""
    _, local, free = _locals_and_free(fdef)
    forbidden = free | _RESERVED
    taken = set(forbidden)
    mapping = {}
    pool = [n for n in _pool(rotation) if n not in forbidden]
    it = iter(pool)
    for v in local:
        new = next(n for n in it if n not in taken and n != v)
        mapping[v] = new
        taken.add(new)
    for node in ast.walk(fdef):
        if isinstance(node, ast.Name) and node.id in mapping:
            node.id = mapping[node.id]
        elif isinstance(node, ast.arg) and node.arg in mapping:
            node.arg = mapping[node.arg]
    return mapping


def _same_module_helpers(py, module):
    """Plain functions of ``module`` that ``py`` calls by name, transitively (in order)."""
    out, todo = [], [py]
    while todo:
        f = todo.pop(0)
        tree = ast.parse(textwrap.dedent(inspect.getsource(f)))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                h = module.__dict__.get(node.func.id)
                if (isinstance(h, types.FunctionType) and h.__module__ == module.__name__
                        and h is not py and h not in out):
                    out.append(h)
                    todo.append(h)
    return out


_TMP = None
_COPIES: dict = {}


def _tmpdir():
    global _TMP
    if _TMP is None:
        _TMP = tempfile.mkdtemp(prefix="coarsen_alpha_")
        atexit.register(shutil.rmtree, _TMP, ignore_errors=True)
    return _TMP


def renamed_copy(k):
    """(renamed function, renamed wrt, source, mapping of the top-level function) for case k;
    built once per case."""
    if k in _COPIES:
        return _COPIES[k]
    fn, _, wrt = CASES[k]
    py = getattr(fn, "py_func", fn)
    module = sys.modules[py.__module__]
    funcs = [py] + _same_module_helpers(py, module)
    trees, maps = [], {}
    for j, f in enumerate(funcs):
        fdef = ast.parse(textwrap.dedent(inspect.getsource(f))).body[0]
        fdef.decorator_list = []          # numba.njit: the copy is the plain function
        maps[f.__name__] = rename_function(fdef, 3 * k + 5 * j)
        trees.append(fdef)
    # keyword arguments of calls to a renamed helper follow its parameters
    for fdef in trees:
        for node in ast.walk(fdef):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id in maps and node.func.id != py.__name__:
                for kw in node.keywords:
                    if kw.arg is not None:
                        kw.arg = maps[node.func.id].get(kw.arg, kw.arg)
    mod_ast = ast.Module(body=trees, type_ignores=[])
    source = (f"# {IDS[k]} with adversarial names (tests/frontend/test_alpha_rename.py)\n"
              + ast.unparse(ast.fix_missing_locations(mod_ast)) + "\n")
    name = f"alpha_{k}_{py.__module__.replace('.', '_')}_{py.__name__}"
    path = os.path.join(_tmpdir(), name + ".py")
    with open(path, "w") as fh:
        fh.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    for key, val in module.__dict__.items():
        if not (key.startswith("__") and key.endswith("__")):
            mod.__dict__[key] = val
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    new = getattr(mod, py.__name__)
    top = maps[py.__name__]
    if isinstance(wrt, str):
        new_wrt = top.get(wrt, wrt)
    elif isinstance(wrt, (tuple, list)):
        new_wrt = type(wrt)(top.get(w, w) if isinstance(w, str) else w for w in wrt)
    else:
        new_wrt = wrt
    _COPIES[k] = (new, new_wrt, source, top)
    return _COPIES[k]


# -------------------------------------------------------------------------- the checks

def _bits(v):
    a = np.asarray(v)
    return type(v).__name__, a.dtype.str, a.shape, a.tobytes()


def _describe(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        return f"shape {a.shape} vs {b.shape}"
    d = np.abs(a - b)
    scale = np.maximum(np.abs(b), 1e-300)
    with np.errstate(all="ignore"):
        rel = float(np.nanmax(d / scale)) if d.size else 0.0
    return f"max abs diff {float(np.nanmax(d)) if d.size else 0.0:.3g}, max rel diff {rel:.3g}"


def _combos():
    out = []
    nzoo = len(ZOO)
    for k in range(len(CASES)):
        # the zoo's own index for zoo cases (test_zoo.py builds both cpu modes there)
        idx = k if k < nzoo else k - nzoo
        for target in ("python", "cpu"):
            if target == "cpu" and not FULL and idx % CPU_EVERY:
                continue
            for coarse in (True, False):
                # cpu: one mode per selected case, alternating (coarse, fine, coarse, ...)
                if target == "cpu" and not FULL and coarse != ((idx // CPU_EVERY) % 2 == 0):
                    continue
                out.append(pytest.param(k, target, coarse,
                                        id=f"{IDS[k]}-{target}-{'coarse' if coarse else 'fine'}"))
    return out


def test_renamed_copies_mean_the_same():
    """Independent of coarsen: every copy runs in plain Python and returns exactly the
    original's value, every variable got a new name, and the copies contain the adversarial
    names this file promises (so a renaming that silently did nothing fails here)."""
    seen = set()
    for k, (fn, factory, _) in enumerate(CASES):
        new, _, source, top = renamed_copy(k)
        py = getattr(fn, "py_func", fn)
        assert all(a != b for a, b in top.items()), (IDS[k], top)
        assert set(top.values()).isdisjoint(_locals_and_free(
            ast.parse(textwrap.dedent(inspect.getsource(py))).body[0])[2]), IDS[k]
        assert inspect.getsource(new).lstrip().startswith("def "), IDS[k]
        v0, v1 = py(*factory()), new(*factory())
        assert _bits(v0) == _bits(v1), (IDS[k], v0, v1)
        seen |= set(top.values())
    for name in ("x", "x_bar", "_t1", "_g1", "_s1_p1", "_ftape", "_fpos", "_ret", "_grow",
                 "tape", "pos", "np", "math", "_y", "u_y"):
        assert name in seen, name


@pytest.mark.parametrize("k,target,coarse", _combos())
def test_alpha_renamed_gradient_is_bit_identical(k, target, coarse):
    fn, factory, wrt = CASES[k]
    new, new_wrt, source, top = renamed_copy(k)
    label = f"{IDS[k]} target={target} coarsen={coarse}"
    try:
        g0 = build(fn, wrt, target, coarse)
        v0, d0 = g0.value_and_grad(*factory())
    except Exception as e:
        raise AssertionError(f"{label}: the ORIGINAL function's gradient failed (not a renaming "
                             f"problem; see tests/endtoend/test_zoo.py, tests/endtoend/test_realistic.py): "
                             f"{type(e).__name__}: {e}") from e
    try:
        g1 = coarsen.differentiate(new, new_wrt, coarsen=coarse, target=target)
        v1, d1 = g1.value_and_grad(*factory())
    except Exception as e:
        raise AssertionError(f"{label}: the renamed copy failed: {type(e).__name__}: {e}\n"
                             f"renaming {top}\n--- copy ---\n{source}") from e
    problems = []
    if _bits(v0) != _bits(v1):
        problems.append(f"value {v1!r} != original {v0!r} ({_describe(v1, v0)})")
    single = not isinstance(d0, tuple)
    g0s, g1s = ([d0], [d1]) if single else (list(d0), list(d1) if isinstance(d1, tuple) else [d1])
    if len(g0s) != len(g1s) or isinstance(d1, tuple) == single:
        problems.append(f"gradient structure {type(d1).__name__}/{len(g1s)} != "
                        f"{type(d0).__name__}/{len(g0s)}")
    else:
        for j, (a, b) in enumerate(zip(g0s, g1s)):
            if _bits(a) != _bits(b):
                problems.append(f"gradient {j}: {_describe(b, a)}\n  original {a!r}\n  renamed  {b!r}")
    assert not problems, (f"{label}: renamed copy differs from the original\n"
                          + "\n".join(problems) + f"\nrenaming {top}\n--- copy ---\n{source}")


def dunder_prefixed(x, __scale=2.0):
    __y = 0.0
    for __i in range(3):
        __y = __y * 0.5 + x * __scale
    return __y


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_double_underscore_names_are_escaped_like_single_ones(target):
    """README: "Names: any"; a leading __ was refused as reserved (it is mangled only in classes)."""
    value, grads = coarsen.differentiate(dunder_prefixed, target=target).value_and_grad(0.7)
    assert value == dunder_prefixed(0.7) and grads == (3.5, 0.7 * 1.75)
