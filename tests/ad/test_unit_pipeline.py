"""The pipeline (``coarsen.transforms.gradient.compile_gradient``) and its data (``coarsen.transforms.artifact``).

``compile_gradient(fn, signature, options)`` gives an ``Artifact`` whose source compiles and
defines its entry, whose callable returns the function's value and the gradient of the
extended-precision oracle, and whose plan is what ``Report`` shows; a second compilation with
the same key parts is served from the disk cache (same source); ``Options`` are hashable and
every field of them but ``wrt`` is a part of the disk key.  ``Gradient`` keeps one artifact per
signature of argument types and options: the same signature reuses it, another makes a new
one.  Target ``"python"`` only (no Numba compile): the targets are covered by the zoo.
"""
import ast
import dataclasses
import math

import numpy as np
import pytest

import coarsen
from coarsen.transforms.gradient import compile_gradient
from coarsen.transforms.artifact import (
    Artifact,
    KeyParts,
    Options,
    Signature,
    check_wrt,
    written_positions,
)
from coarsen.frontend.lower import lower
from tests.oracle import assert_grad_close, fd_grad


def wavy(x, y):
    s = 0.0
    for i in range(3):
        s = s + math.sin(x * y) * x
    return s + y * y


def scaled_sum(a, k):
    a[0] += 1.0
    return k * np.sum(a * a)


ARGS = (0.3, 0.7)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("pipeline_cache")


@pytest.fixture(scope="module")
def artifact(cache):
    mp = pytest.MonkeyPatch()
    mp.setenv("COARSEN_CACHE_DIR", str(cache))
    try:
        yield compile_gradient(wavy, Signature.of(("x", "y"), ARGS), Options(target="python"))
    finally:
        mp.undo()


def test_artifact_source_compiles_and_its_callable_is_right(artifact):
    assert isinstance(artifact, Artifact)
    assert artifact.entry_name == "value_and_grad_wavy"
    compile(artifact.source, "<artifact>", "exec")
    defined = {n.name for n in ast.parse(artifact.source).body if isinstance(n, ast.FunctionDef)}
    assert artifact.entry_name in defined
    assert artifact.entry is getattr(artifact.module, artifact.entry_name)
    value, grads, _ = artifact(*ARGS)
    assert value == wavy(*ARGS)
    assert_grad_close(list(grads), fd_grad(wavy, ARGS, [0, 1]), err_msg="wavy")
    assert artifact.wrt == ("x", "y") and artifact.signature == ("float64", "float64")
    assert not artifact.cached and artifact.module_arrays == ()
    # the plan is the report's: the loop got a closed form, the tail a block segment
    assert [e["kind"] for e in artifact.plan] == ["loop", "block"]
    assert "segment 1 (loop" in artifact.ir_text
    assert artifact.dependencies == artifact.reads.fingerprint() == artifact.key.dependencies
    with pytest.raises(dataclasses.FrozenInstanceError):
        artifact.source = ""


def test_same_key_parts_are_served_from_the_disk_cache(artifact, cache, monkeypatch):
    monkeypatch.setenv("COARSEN_CACHE_DIR", str(cache))
    again = compile_gradient(wavy, Signature.of(("x", "y"), ARGS), Options(target="python"))
    assert again.cached and again.source == artifact.source
    assert again.cache_key == artifact.cache_key and again.plan == artifact.plan
    assert again(*ARGS)[:2] == artifact(*ARGS)[:2]


def test_a_plan_decided_by_the_clock_is_not_cached(tmp_path, monkeypatch):
    """``budget_seconds`` is the symbolic stage's wall-clock safety net: a segment that runs
    past it falls back to fine-grained AD (still right), and that plan, which depends on the
    machine's load, is not stored, so the next compilation lifts again; a plan within the
    budget is stored."""
    monkeypatch.setenv("COARSEN_CACHE_DIR", str(tmp_path))
    sig = Signature.of(("x", "y"), ARGS)
    hurried = Options(target="python", budget_seconds=0.0)
    first = compile_gradient(wavy, sig, hurried)
    fallbacks = [e["fallback"] for e in first.plan if e["kind"] in ("loop", "block")]
    assert fallbacks and all("time" in (f or "") for f in fallbacks), first.plan
    value, grads, _ = first(*ARGS)
    assert value == wavy(*ARGS)
    assert_grad_close(list(grads), fd_grad(wavy, ARGS, [0, 1]), err_msg="wavy, timed out")
    assert not compile_gradient(wavy, sig, hurried).cached
    normal = Options(target="python")
    assert not compile_gradient(wavy, sig, normal).cached
    assert compile_gradient(wavy, sig, normal).cached


def test_options_are_hashable_and_every_option_is_a_key_part(artifact):
    a = Options(wrt=["x"], target="python")
    assert a.wrt == ("x",) and hash(a) == hash(Options(wrt=("x",), target="python"))
    assert len({a, Options(wrt=("x",), target="python"), Options(target="python")}) == 2
    with pytest.raises(coarsen.CoarsenError, match="unknown target"):
        Options(target="gpu")
    key = artifact.key
    assert isinstance(key, KeyParts)
    parts = key.as_dict()
    for name in ("coarsen", "target", "workspace", "boundscheck", "budget_seconds"):
        assert parts[name] == getattr(artifact.options, name), name
    # another value of any option is another key
    for change in ({"coarsen": False}, {"target": "cpu"}, {"workspace": True},
                   {"boundscheck": False}, {"budget_seconds": 1.0}):
        other = dataclasses.replace(key, **change)
        assert coarsen.lowering.cache_key(**other.as_dict()) != artifact.cache_key, change


def test_gradient_keeps_one_artifact_per_signature():
    g = coarsen.differentiate(scaled_sum, target="python")
    a = np.array([0.5, -1.5, 2.0])
    first = g.specialize((a, 3))
    assert g.specialize((a.copy(), 4)) is first                     # same types: reused
    assert g.specialize((a.astype(np.float32), 4)) is first         # float32 runs as float64
    other = g.specialize((np.ones((2, 2)), 3))                      # another rank: new
    assert other is not first and other.signature == ("float64[:, :]", "int64")
    assert g.specialization(*g.signature_of((a, 3)), workspace=False) is first
    # the call goes through the same artifact, and the value and gradient are right
    value, grad = g.value_and_grad(a, 3)
    assert g.last_specialization is first
    assert value == scaled_sum(a.copy(), 3) and a[0] == 0.5        # the caller's array unchanged
    assert_grad_close(list(grad), fd_grad(scaled_sum, (a, 3), [0]), err_msg="scaled_sum")
    assert first.written == frozenset({0}) == written_positions(lower(scaled_sum)[0])


def test_signature_and_wrt_checks():
    assert Signature.of(("a", "k"), (np.ones(2, dtype=np.float32), 2)).texts == ("float32[:]", "int64")
    with pytest.raises(coarsen.CoarsenError, match="takes 2 arguments"):
        Signature.of(("x", "y"), (1.0,), fname="wavy")
    with pytest.raises(coarsen.CoarsenError, match="does not match"):
        compile_gradient(wavy, Signature.of(("x",), (1.0,)), Options(target="python"))
    with pytest.raises(coarsen.CoarsenError, match="not a parameter"):
        check_wrt("z", ["x", "y"], "wavy")
    with pytest.raises(coarsen.CoarsenError, match="not a float"):
        compile_gradient(scaled_sum, Signature.of(("a", "k"), (np.ones(2), 1)),
                         Options(wrt="k", target="python"))
