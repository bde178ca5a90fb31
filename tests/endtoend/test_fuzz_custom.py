"""Randomized differential tests of custom derivative rules (``tests/progen_custom.py``).

The fourth fuzz family writes functions with ``coarsen.custom_vjp``/``custom_jvp`` rules, each
generated with its correct derivative from a small algebra and written with arrays, loops over
``v.shape[0]`` and in-place updates, and calls them from array code that scalarizes and updates
in place, with adversarial names (see the module's docstring).

* ``test_custom_family``: fixed seeds (statement budget ``SIZE``) on the ``python`` target,
  coarse and fine, and on ``cpu`` in one mode each (coarse and fine in turn), against the
  oracle (a discarded seed is replaced deterministically, as in ``tests/endtoend/test_fuzz.py``).  Each
  of them gave a wrong gradient or crashed on ``cpu`` before the name supply (``ea6bfff``: a
  backward rule's temporaries ``_t<k>`` took the numbers scalarization later gave its loop
  extents);
* ``test_rules_are_right_in_plain_python``: the generator's rules, run as plain Python,
  against central differences of their kernels (``progen_custom.rule_errors``): a wrong rule
  would otherwise be reported as coarsen's wrong answer;
* ``test_a_wrong_rule_is_caught``: the same check fails on a program whose backward (or jvp)
  rule is made wrong by 10%: the tests above can fail;
* ``test_minimizer_leaves_the_rules_alone``: ``minimize_custom`` shrinks ``f`` only;
* ``test_family_covers_its_features``, ``test_family_is_deterministic_and_runs``: what the
  generator promises is generated, programs run in plain Python and mean the same with plain
  and adversarial names, and few are discarded before compiling.

Larger soaks: ``python tests/fuzz_soak.py --family custom --count N --seed S`` (every 4th
program also on ``cpu``; ``--cpu-every K`` to change that).
"""
import ast
import collections

import numpy as np
import pytest

from tests.progen import FuzzFailure, check_seed_with_oracle, check_source, discard_kind, prescreen
from tests.progen_custom import F_ARRAYS, generate_custom, minimize_custom, rule_errors

SIZE = 3
# each failed on cpu at ea6bfff (before the name supply), in the mode named by its parity
# (even: coarse, odd: fine)
SEEDS = [26, 47, 56, 77, 99, 130, 229, 312]


@pytest.mark.parametrize("seed", SEEDS)
def test_custom_family(seed):
    prog, out, _ = check_seed_with_oracle(
        seed, SIZE, make=generate_custom, targets=("python", "cpu"),
        modes={"python": (True, False), "cpu": (seed % 2 == 0,)})
    assert out.status == "ok" and out.oracle, (seed, out)
    assert prog.seed == seed, "a fixed seed was discarded: pick another"


N_RULES = 400


def test_rules_are_right_in_plain_python():
    bad = []
    for seed in range(N_RULES):
        with np.errstate(all="ignore"):
            errors = rule_errors(generate_custom(seed, adversarial=False), trials=1)
        bad += [(seed, e) for e in errors]
    assert not bad, bad[:5]


def _wrong(source, kernel_kind):
    """``source`` with the first rule of ``kernel_kind`` scaled by 1.1: the first cotangent of
    a backward rule, the tangent of a jvp rule."""
    tree = ast.parse(source)
    suffix = "_bwd" if kernel_kind == "vjp" else "_jvp"
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.endswith(suffix))
    ret = [n for n in ast.walk(fn) if isinstance(n, ast.Return)][-1]
    k = 0 if kernel_kind == "vjp" else 1
    ret.value.elts[k] = ast.BinOp(ast.Constant(1.1), ast.Mult(), ret.value.elts[k])
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def _program_with(kind):
    for seed in range(100):
        prog = generate_custom(seed, SIZE, adversarial=False)
        if f"custom_{kind}" in prog.features and "two_kernels" not in prog.features \
                and prescreen(prog).status == "ok":
            return prog
    raise AssertionError(f"no program with one custom_{kind} kernel")


@pytest.mark.parametrize("kind", ["vjp", "jvp"])
def test_a_wrong_rule_is_caught(kind):
    prog = _program_with(kind)
    src = _wrong(prog.source, kind)
    # the right rules pass, the wrong one fails against the oracle
    check_source(prog.source, prog.make_args, prog.args_text())
    with pytest.raises(FuzzFailure) as e:
        check_source(src, prog.make_args, prog.args_text())
    assert e.value.kind == "oracle", e.value.kind


def _kernels(source):
    tree = ast.parse(source)
    return {n.name: ast.dump(n) for n in tree.body
            if isinstance(n, ast.FunctionDef) and n.name != "f"}


def test_minimizer_leaves_the_rules_alone():
    prog = _program_with("vjp")
    src = _wrong(prog.source, "vjp")
    small, fail = minimize_custom(src, prog.make_args, prog.args_text(), "oracle", max_checks=8)
    assert fail is not None and len(small) < len(src)
    before, after = _kernels(src), _kernels(small)
    assert after and all(before[k] == v for k, v in after.items())


N_FEATURES = 300


def test_family_covers_its_features():
    feats = collections.Counter()
    for seed in range(N_FEATURES):
        feats.update(generate_custom(seed).features)
    want = {"custom_vjp": 0.4, "custom_jvp": 0.3, "kernel_scalar_out": 0.4,
            "kernel_array_out": 0.3, "two_kernels": 0.2, "term_pair": 0.05, "term_decay": 0.05,
            "term_shift": 0.03, "term_prefix": 0.03, "rule_loop": 0.4, "rule_inplace": 0.2,
            "rule_slice_update": 0.05, "rule_reverse_loop": 0.05, "rule_late_g": 0.05,
            "rule_writes_residual": 0.02, "res_precomputed": 0.1, "res_copy": 0.1,
            "res_untupled": 0.02, "fwd_calls_primal": 0.2, "call_is_return": 0.1,
            "call_in_return": 0.2, "call_on_slice": 0.2, "call_on_expression": 0.4,
            "call_in_loop": 0.2, "call_twice": 0.2, "call_keyword": 0.05,
            "arg_written_after_call": 0.2, "array_out_updated": 0.1, "f_inplace_slice": 0.3,
            "f_inplace_whole": 0.3, "f_writes_input": 0.2, "f_copy": 0.2,
            "adversarial_names": 0.6, "name_temp_like": 0.15, "name_placeholder_like": 0.03,
            "kernel_names_adversarial": 0.2}
    low = {k: (feats[k], f">= {int(v * N_FEATURES)}") for k, v in want.items()
           if feats[k] < v * N_FEATURES}
    assert not low, f"features too rare in {N_FEATURES} programs: {low}"


def test_f_makes_no_alias():
    """``f`` never binds a second name to an array (``d = b``): coarsen refuses a view written
    later, as documented, and such a program would check nothing (seed 42000152)."""
    arrays = set(F_ARRAYS) | {"a"}          # f's array names, with plain names
    for seed in range(N_FEATURES):
        tree = ast.parse(generate_custom(seed, adversarial=False).source)
        f = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "f")
        alias = [ast.unparse(n) for n in ast.walk(f)
                 if isinstance(n, ast.Assign) and isinstance(n.value, ast.Name)
                 and n.value.id.rstrip("0123456789") in arrays]
        assert not alias, (seed, alias)


def test_family_is_deterministic_and_runs():
    reasons = collections.Counter()
    for seed in range(0, 120, 3):
        prog = generate_custom(seed)
        assert prog.source == generate_custom(seed).source
        plain = generate_custom(seed, adversarial=False)
        with np.errstate(all="ignore"):
            va, vp = prog.load()(*prog.make_args()), plain.load()(*plain.make_args())
        assert va == vp or (np.isnan(va) and np.isnan(vp)), seed
        out = prescreen(prog)
        assert not (out.why or "").startswith(("primal raised", "primal returned")), (seed, out)
        if out.status != "ok":
            reasons[discard_kind(out.why)] += 1
    assert sum(reasons.values()) <= 2, reasons
