"""Mutation testing of the rewrite passes with cosmic-ray: does the suite notice a broken guard?

Not part of the test suite (no ``test_`` names: pytest does not collect it) and not run by CI,
which has no time for it.  A maintainer runs it on the passes a change touched::

    pip install -e '.[mutation]'          # cosmic-ray
    python -m tests.mutation coarsen/ad/reverse/rematerialize.py [more modules] [options]

For each module it

* copies the sources and the tests to a scratch folder (``symbolic/`` and ``lowering/`` as the
  installed package lays them out, under ``coarsen/``) and runs everything there: the working
  tree never holds a mutant, even when a run is interrupted;
* has cosmic-ray (``cosmic-ray init``) list every mutant of the module, and keeps
  - every *guard* mutant: a mutant of a condition (an ``if``/``elif``/``while`` test, a
    conditional expression's test, a comprehension's ``if``, an ``assert``, a ``return`` of a
    boolean expression, ``any``/``all``) by one of the operators that change what a condition
    says (``GUARD_OPERATORS``: comparisons swapped, ``not`` added or dropped, ``and``/``or``
    swapped, ``True``/``False`` swapped).  These are the preconditions that make a pass refuse
    a rewrite or return ``None``/``False``;
  - a random sample (``--sample``, seeded by ``--seed``) of the other mutants;
  the rest are marked skipped in the session;
* runs them (``cosmic-ray exec``, the local distributor: one mutant at a time), each against
  the module's own test files (``TESTS``) with ``-x -n 0 -p no:cacheprovider``, a fresh
  ``COARSEN_CACHE_DIR`` (the cache's key is the lowered IR, not the compiler's code: a shared
  cache would hand a mutant the modules the real pass generated) and ``--timeout`` seconds (a
  mutant that runs past it counts as killed);
* prints the score, guard mutants and sampled ones apart, and each survivor: its line, its
  operator and cosmic-ray's diff.

A survivor gets a test that kills it (best: a small program the mutated pass gets wrong,
judged by ``tests.oracle.check_against_oracle`` on both targets) or a written argument that its
guard cannot be reached, after which the guard becomes an assertion saying so.

Before the mutants it runs the same tests on the unmutated copy and stops if they fail (a
failing baseline would count every mutant killed); ``--skip-baseline`` skips that run.

Options: ``--sample N`` (default 10), ``--seed S``, ``--timeout S`` (default 600),
``--guards-only``, ``--sampled-only`` (the sample of the others only, no guard mutant: the
same seed and sample size draw the same sample as a full run), ``--lines A-B[,C-D]`` (only
mutants on those lines), ``--list`` (list the mutants that would run, run nothing), ``--keep``
(keep the scratch folder: its ``session.sqlite`` for ``cr-report``), ``--skip-baseline``.
"""
from __future__ import annotations

import argparse
import ast
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: each module's own test files, run against each of its mutants (most decisive first: ``-x``
#: stops at the first failure)
TESTS = {
    "coarsen/ad/reverse/rematerialize.py": ["tests/ad/reverse/test_rematerialize_guards.py",
                                            "tests/ad/reverse/test_rematerialize.py"],
    "coarsen/ad/reverse/loop_order.py": ["tests/ad/reverse/test_loop_order_guards.py",
                                         "tests/ad/reverse/test_loop_order.py"],
    "coarsen/ad/forward/jam.py": ["tests/ad/forward/test_jam_guards.py", "tests/ad/forward/test_jam.py"],
    "coarsen/ad/reverse/scratch.py": ["tests/ad/reverse/test_scratch_guards.py", "tests/ad/reverse/test_scratch.py",
                                      "tests/ad/reverse/test_scratch_saves.py"],
    "coarsen/ad/reverse/fuse_loops.py": ["tests/ad/reverse/test_fuse_loops.py",
                                         "tests/ad/reverse/test_fuse_loops_guards.py"],
    "coarsen/ad/reverse/first_writes.py": ["tests/ad/reverse/test_first_writes.py",
                                           "tests/ad/reverse/test_first_writes_guards.py"],
    "coarsen/ad/reverse/invariant_reads.py": ["tests/ad/reverse/test_invariant_reads.py",
                                              "tests/ad/reverse/test_invariant_reads_guards.py",
                                              "tests/ad/reverse/test_invariant_parts.py"],
    "coarsen/ad/reverse/invariant_sums.py": ["tests/ad/reverse/test_invariant_sums_guards.py",
                                             "tests/ad/reverse/test_invariant_sums.py"],
    "coarsen/ad/reverse/adjoint_rows.py": ["tests/ad/reverse/test_adjoint_rows_guards.py",
                                           "tests/ad/reverse/test_adjoint_rows.py", "tests/analysis/test_history_rows.py"],
    "coarsen/ad/reverse/dead_resets.py": ["tests/ad/reverse/test_dead_resets_guards.py",
                                          "tests/ad/reverse/test_dead_resets.py"],
    "coarsen/ad/reverse/zero_adjoints.py": ["tests/ad/reverse/test_zero_adjoints_guards.py",
                                            "tests/ad/reverse/test_zero_adjoints.py"],
    "coarsen/ad/reverse/checkpoint.py": ["tests/ad/reverse/test_checkpoint_guards.py", "tests/ad/reverse/test_checkpoint.py",
                                         "tests/ad/reverse/test_revolve.py"],
    "coarsen/ir/scalarize.py": ["tests/ir/test_scalarize_guards.py", "tests/ir/test_scalarize_sampled.py", "tests/ir/test_read_trees_guards.py", "tests/ir/test_scalarize_unstored.py", "tests/ir/test_scalarize_rebind.py", "tests/ir/test_scalarize_axis_sums.py",
                                "tests/ir/test_scalarize.py", "tests/ir/test_scalarize_shapes.py"],
    "coarsen/ir/inplace.py": ["tests/ir/test_inplace_guards.py", "tests/ir/test_inplace.py"],
    "coarsen/ir/hoist.py": ["tests/ir/test_hoist_guards.py", "tests/ir/test_hoist.py"],
    "coarsen/analysis/bounds.py": ["tests/analysis/test_bounds_guards.py", "tests/analysis/test_bounds.py",
                                   "tests/analysis/test_bounds_induction.py"],
    "coarsen/ad/reverse/dot_loops.py": ["tests/ad/reverse/test_dot_loops_guards.py",
                                        "tests/ad/reverse/test_dot_loops.py",
                                        "tests/ad/reverse/test_dot_loops_sums.py"],
    "coarsen/ir/slice_chains.py": ["tests/ir/test_slice_chains_guards.py", "tests/ir/test_slice_chains.py"],
    "coarsen/ad/reverse/region_stores.py": ["tests/ad/reverse/test_region_stores.py"],
    "coarsen/ad/reverse/scatter_loops.py": ["tests/ad/reverse/test_scatter_loops.py"],
    "coarsen/ad/reverse/lane_sums.py": ["tests/ad/reverse/test_lane_sums.py"],
    "coarsen/ad/reverse/stored_rereads.py": ["tests/ad/reverse/test_stored_rereads.py"],
    "coarsen/ad/reverse/vector_exp.py": ["tests/ad/reverse/test_vector_exp.py"],
    "coarsen/ad/reverse/scaled_adds.py": ["tests/ad/reverse/test_scaled_first_writes.py",
                                          "tests/ad/reverse/test_scaled_adds_outer.py"],
    "coarsen/analysis/recording.py": ["tests/analysis/test_recording_guards.py", "tests/ad/reverse/test_shape_recorded.py",
                                      "tests/ir/test_scalarize_rebind.py", "tests/analysis/test_cheap_recompute.py",
                                      "tests/analysis/test_reductions.py", "tests/ad/reverse/test_scratch_saves.py"],
    "coarsen/analysis/activity.py": ["tests/analysis/test_activity_guards.py", "tests/analysis/test_unit_analysis.py",
                                     "tests/analysis/test_view_temporaries.py"],
    "coarsen/ad/segment_code.py": ["tests/ad/reverse/test_held_calls.py"],
    **{f"coarsen/ad/tidy/{name}.py": ["tests/ad/test_unit_tidy.py",
                                      "tests/ad/test_unit_tidy_guards.py"]
       for name in ("__init__", "copies", "dead_stores", "floats", "flow", "held", "helpers",
                    "nodes", "seeds")},
}

#: the cosmic-ray operators that negate (part of) a condition: a comparison replaced by its
#: negation, ``not`` added or dropped, ``and``/``or`` swapped, ``True``/``False`` swapped (the
#: other comparison swaps, ``<`` for ``<=`` and the like, are among the sampled others)
GUARD_OPERATORS = re.compile(
    r"core/(ReplaceComparisonOperator_(Eq_NotEq|NotEq_Eq|Lt_GtE|LtE_Gt|Gt_LtE|GtE_Lt|Is_IsNot"
    r"|IsNot_Is)|AddNot|ReplaceUnaryOperator_Delete_Not|ReplaceAndWithOr|ReplaceOrWithAnd"
    r"|ReplaceTrueWithFalse|ReplaceFalseWithTrue)$")

#: what the scratch copy holds (as the installed package lays it out)
_COPIED = {"coarsen": "coarsen", "symbolic": "coarsen/symbolic", "lowering": "coarsen/lowering",
           "tests": "tests", "apps": "apps"}


def guard_lines(source):
    """The lines of ``source`` that belong to a condition (module docstring)."""
    lines = set()

    def span(node):
        lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.If, ast.While, ast.IfExp, ast.Assert)):
            span(node.test)
        elif isinstance(node, ast.comprehension):
            for cond in node.ifs:
                span(cond)
        elif isinstance(node, ast.Return) and node.value is not None and (
                isinstance(node.value, (ast.BoolOp, ast.Compare))
                or (isinstance(node.value, ast.UnaryOp) and isinstance(node.value.op, ast.Not))
                or (isinstance(node.value, ast.Constant) and isinstance(node.value.value, bool))):
            span(node.value)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in ("any", "all"):
            span(node)
    return lines


def _copy_tree(dest):
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
    for src, dst in _COPIED.items():
        shutil.copytree(os.path.join(ROOT, src), os.path.join(dest, dst), ignore=ignore)
    shutil.copy(os.path.join(ROOT, "pyproject.toml"), dest)


def _copied_path(module):
    top, _, rest = module.partition("/")
    return f"coarsen/{top}/{rest}" if top in ("symbolic", "lowering") else module


def _parse_lines(spec):
    out = set()
    for part in filter(None, (spec or "").split(",")):
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out


def _select(session, module, source, args):
    """Mark every mutant but the chosen ones skipped; ``{job_id: kind}`` of the chosen."""
    from cosmic_ray.work_db import use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    guards, only = guard_lines(source), _parse_lines(args.lines)
    chosen, others, skipped, key = {}, [], [], {}
    with use_db(session) as db:
        for item in db.pending_work_items:
            (m,) = item.mutations
            line = m.start_pos[0]
            if only and line not in only:
                skipped.append(item.job_id)
            elif line in guards and GUARD_OPERATORS.match(m.operator_name):
                if args.sampled_only:
                    skipped.append(item.job_id)
                else:
                    chosen[item.job_id] = "guard"
            else:
                others.append(item.job_id)
                # job ids are random: the sample is drawn from the mutants in a stable order
                key[item.job_id] = (m.start_pos, m.end_pos, m.operator_name, m.occurrence)
        sample = [] if args.guards_only else \
            random.Random(args.seed).sample(sorted(others, key=key.get), min(args.sample, len(others)))
        chosen.update((j, "other") for j in sample)
        skipped += [j for j in others if j not in chosen]
        if skipped:
            db.set_multiple_results(skipped, WorkResult(output="not selected",
                                                        worker_outcome=WorkerOutcome.SKIPPED))
    return chosen, len(others)


def _report(session, module, source, chosen, n_others):
    from cosmic_ray.work_db import use_db
    from cosmic_ray.work_item import WorkerOutcome

    text = source.splitlines()
    score = {"guard": [0, 0], "other": [0, 0]}
    survivors = []
    with use_db(session) as db:
        for item, result in db.completed_work_items:
            kind = chosen.get(item.job_id)
            if kind is None or result.worker_outcome == WorkerOutcome.SKIPPED:
                continue
            score[kind][1] += 1
            if result.is_killed:
                score[kind][0] += 1
            else:
                survivors.append((kind, item.mutations[0], result))
    print(f"\n== {module}")
    for kind, label in (("guard", "guard mutants"), ("other", f"sampled others (of {n_others})")):
        k, n = score[kind]
        print(f"   {label}: {k}/{n} killed" + (f" ({100 * k / n:.0f}%)" if n else ""))
    for kind, m, result in sorted(survivors, key=lambda s: s[1].start_pos):
        line = m.start_pos[0]
        print(f"-- survived ({kind}) line {line}: {m.operator_name} #{m.occurrence}\n"
              f"   {text[line - 1].strip()}")
        if result.diff:
            print("   " + "\n   ".join(result.diff.splitlines()[2:]))
    return score, survivors


def run_module(module, args):
    if module not in TESTS:
        sys.exit(f"{module}: no test files listed for it in tests/mutation.py TESTS")
    source = open(os.path.join(ROOT, module)).read()
    work = tempfile.mkdtemp(prefix="coarsen-mutation-")
    try:
        _copy_tree(work)
        target = _copied_path(module)
        config = os.path.join(work, "mutation.toml")
        with open(config, "w") as f:
            f.write(f'[cosmic-ray]\nmodule-path = "{target}"\ntimeout = {float(args.timeout)}\n'
                    f'excluded-modules = []\n'
                    f'test-command = "{sys.executable} -m tests.mutation --run-tests {module}"\n'
                    f'\n[cosmic-ray.distributor]\nname = "local"\n')
        env = dict(os.environ, PYTHONPATH=work)
        # the copy, not the installed package, is what the tests import
        where = subprocess.run([sys.executable, "-c", "import coarsen; print(coarsen.__file__)"],
                               cwd=work, env=env, capture_output=True, text=True, check=True)
        assert where.stdout.strip().startswith(work), where.stdout
        session = os.path.join(work, "session.sqlite")
        subprocess.run(["cosmic-ray", "init", config, session], cwd=work, env=env, check=True)
        chosen, n_others = _select(session, module, source, args)
        kinds = sorted(chosen.values())
        print(f"{module}: {kinds.count('guard')} guard mutants, {kinds.count('other')} sampled "
              f"of {n_others} others; tests {' '.join(TESTS[module])}", flush=True)
        if not args.list and not args.skip_baseline:
            # the unmutated copy must pass: a failing baseline would count every mutant killed
            base = subprocess.run([sys.executable, "-m", "tests.mutation", "--run-tests", module],
                                  cwd=work, env=env, capture_output=True, text=True)
            if base.returncode != 0:
                sys.exit(f"{module}: the tests fail on the unmutated code (baseline):\n"
                         + base.stdout[-3000:] + base.stderr[-2000:])
            print("baseline: the tests pass on the unmutated code", flush=True)
        if args.list:
            from cosmic_ray.work_db import use_db
            with use_db(session) as db:
                for item in db.pending_work_items:
                    (m,) = item.mutations
                    print(f"   {chosen[item.job_id]:5} line {m.start_pos[0]:4} {m.operator_name}")
            return None
        subprocess.run(["cosmic-ray", "exec", config, session], cwd=work, env=env, check=True)
        with open(os.path.join(work, target)) as f:
            assert f.read() == source, "cosmic-ray left a mutant in the scratch copy"
        return _report(session, module, source, chosen, n_others)
    finally:
        if args.keep:
            print(f"scratch folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def run_tests(module):
    """The test command of one mutant: the module's test files, a fresh generated-code cache."""
    cache = tempfile.mkdtemp(prefix="coarsen-mutation-cache-")
    try:
        env = dict(os.environ, COARSEN_CACHE_DIR=cache)
        cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-n", "0", "-p", "no:cacheprovider",
               *TESTS[module]]
        return subprocess.run(cmd, env=env).returncode
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("modules", nargs="*")
    parser.add_argument("--run-tests", metavar="MODULE")
    parser.add_argument("--sample", type=int, default=10)
    parser.add_argument("--seed", type=int, default=48)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--guards-only", action="store_true")
    parser.add_argument("--sampled-only", action="store_true")
    parser.add_argument("--lines")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--skip-baseline", action="store_true")
    args = parser.parse_args(argv)
    if args.guards_only and args.sampled_only:
        parser.error("--guards-only and --sampled-only exclude each other")
    if args.run_tests:
        return run_tests(args.run_tests)
    if not args.modules:
        parser.error("name the modules to mutate: " + ", ".join(sorted(TESTS)))
    survived = 0
    for module in args.modules:
        got = run_module(module, args)
        survived += len(got[1]) if got else 0
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
