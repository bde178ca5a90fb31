"""Soak mode for the randomized differential tests: many generated programs, one report.

Usage (from the repository root)::

    python tests/fuzz_soak.py --count 5000 --seed 1          # programs seed*1_000_000 + k
    python tests/fuzz_soak.py --count 200 --seed 7 --cpu 20  # also the first 20 on target cpu
    python tests/fuzz_soak.py --one 1000123 --show           # print and check one program
    python tests/fuzz_soak.py --one 1000123 --size 9         # the same seed at another size
    python tests/fuzz_soak.py --count 50 --names plain       # plain names (default: drawn)
    python tests/fuzz_soak.py --count 300 --family reductions # loss-shaped reduction loops
    python tests/fuzz_soak.py --count 300 --family recurrences # filters, integrators
    python tests/fuzz_soak.py --count 300 --family custom      # custom_vjp/custom_jvp rules
    python tests/fuzz_soak.py --count 300 --cpu-every 4        # also every 4th program on cpu
    python tests/fuzz_soak.py --count 300 --cpu-every 1 --lengths 8 20  # longer arrays: lanes reorder

Programs have adversarial variable names (3 in 4 by default; ``--names adversarial|plain``
forces them on or off), reuse loop variables across loops and pass arrays to a helper that
updates them in place (see ``tests/progen.py``).  Each failure with adversarial names is
checked again with plain names (``generate(seed, adversarial=False)``, the same program):
the report marks failures that happen only with adversarial names (a naming bug) as
``names-only``.  ``--family reductions`` draws from the second family
(``tests/progen_reductions.py``: reduction loops, nested, with scratch arrays and chains) with
the same seeds, checks and report; ``--family recurrences`` from the third
(``tests/progen_recurrences.py``: loops carrying state in few inputs, as filters do);
``--family custom`` from the fourth (``tests/progen_custom.py``: functions with
``custom_vjp``/``custom_jvp`` rules written with arrays, loops and in-place updates, called from
array code that scalarizes and updates in place).  ``--cpu-every K`` also checks programs
``k = 0, K, 2K, ...`` on the ``cpu`` target, in one mode each (coarse and fine in turn;
``--cpu-modes both`` for both); the custom family does so by default (``CPU_EVERY``: its rules'
names meet the names scalarization makes on ``cpu`` only).  ``--python-modes turn`` checks the
other programs in one mode on ``python`` (coarse, fine in turn), to soak more programs per hour.

Every program is written to ``/tmp/fuzz/prog_<hash>.py`` (``$COARSEN_FUZZ_DIR``) and checked by
``tests.progen.check_program``: coarse and fine gradients on the ``python`` target (and on
``cpu`` for the first ``--cpu`` programs), against each other, against the extended-precision
oracle where it vouches for the point, and the primal value against the original function.
The first failure of each signature (kind plus, for crashes, the error line with numbers
removed: ``progen.failure_signature``) is minimized (``--no-minimize`` to skip); all are written, with their arguments and
``g.ir``, to ``/tmp/fuzz/failures/<kind>_<seed>.txt``; the summary at the end gives counts per
outcome (``ok_with_oracle``: checked against the oracle; ``ok_oracle_refused``: checked coarse
against fine only), the discards by reason, per failure kind, and the seeds of every failure.  Set ``COARSEN_CACHE_DIR`` to keep
the soak's compiled-gradient cache out of your user cache (the script defaults it to
``/tmp/fuzz/cache``).  The exit status is 1 when any program failed.
"""
import argparse
import collections
import os
import sys
import time

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

os.environ.setdefault("COARSEN_CACHE_DIR", os.path.join(os.environ.get("COARSEN_FUZZ_DIR", "/tmp/fuzz"), "cache"))

from tests.progen import (FUZZ_DIR, FuzzFailure, check_program, discard_kind,  # noqa: E402
                          failure_signature, generate, minimize)
from tests.progen_custom import generate_custom, minimize_custom  # noqa: E402
from tests.progen_recurrences import generate_recurrences  # noqa: E402
from tests.progen_reductions import generate_reductions  # noqa: E402
from tests import progen_generate  # noqa: E402

FAMILIES = {"mixed": generate, "reductions": generate_reductions,
            "recurrences": generate_recurrences, "custom": generate_custom}
# a family's default --cpu-every (programs k = 0, K, 2K, ... also checked on cpu)
CPU_EVERY = {"custom": 4}
# a family's minimizer, where progen.minimize's edits could break the program's meaning (a
# statement removed from a custom rule makes the rule wrong)
MINIMIZERS = {"custom": minimize_custom}


def _on_cpu(e):
    """Did the failure ``e`` happen on the cpu target (then minimize it there)?"""
    head = e.detail.split("\n--- g.ir(*args) ---")[0]
    return "target=cpu" in head or e.kind == "target_vs_target"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--start", type=int, default=0,
                    help="resume at program k = START (of seed*1_000_000 + k, k < count; the cpu "
                         "sample and the modes in turn as in an uninterrupted run)")
    ap.add_argument("--seed", type=int, default=0, help="base seed: programs seed*1_000_000 + k")
    ap.add_argument("--cpu", type=int, default=0, help="also check the first N programs on target cpu")
    ap.add_argument("--cpu-every", type=int, default=None,
                    help="also check programs k = 0, K, 2K, ... on target cpu, in one mode each "
                         "(coarse, fine in turn); default: the family's (CPU_EVERY), else 0")
    ap.add_argument("--cpu-modes", choices=("turn", "both"), default="turn",
                    help="the modes of the --cpu-every programs on cpu: one in turn, or both")
    ap.add_argument("--python-modes", choices=("both", "turn"), default="both",
                    help="the modes on target python: both (default), or one in turn (coarse on "
                         "even k, fine on odd) except for programs also checked on cpu, which "
                         "get both")
    ap.add_argument("--one", type=int, default=None, help="check only this program seed")
    ap.add_argument("--size", type=int, default=None, help="statement budget (default: from the seed)")
    ap.add_argument("--show", action="store_true", help="print each program")
    ap.add_argument("--no-minimize", action="store_true")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--names", choices=("drawn", "adversarial", "plain"), default="drawn",
                    help="variable names: drawn from the seed (3 in 4 adversarial), or forced")
    ap.add_argument("--family", choices=tuple(FAMILIES), default="mixed",
                    help="the generator: mixed scalar control flow (default), or reduction loops")
    ap.add_argument("--lengths", type=int, nargs=2, metavar=("LO", "HI"), default=None,
                    help="arrays of LO to HI values (default: the family's, 1 to 5 or 6): from 8 "
                         "on, the sums added in lanes (lane_sums, dot_loops) reorder")
    ap.add_argument("--jvp", action="store_true",
                    help="also check coarsen.jvp against the gradient (progen.check_jvp)")
    opts = ap.parse_args(argv)
    if opts.lengths is not None:
        progen_generate.LENGTHS = tuple(opts.lengths)
    generate = FAMILIES[opts.family]
    minimizer = MINIMIZERS.get(opts.family, minimize)
    every = CPU_EVERY.get(opts.family, 0) if opts.cpu_every is None else opts.cpu_every

    ks = [0] if opts.one is not None else list(range(opts.start, opts.count))
    seeds = [opts.one] if opts.one is not None else [opts.seed * 1_000_000 + k for k in ks]
    outdir = os.path.join(FUZZ_DIR, "failures")
    os.makedirs(outdir, exist_ok=True)
    counts = collections.Counter()
    kinds = collections.defaultdict(list)
    discards = collections.Counter()
    discard_seeds = collections.defaultdict(list)
    features = collections.Counter()
    t0 = time.time()
    adv = {"drawn": None, "adversarial": True, "plain": False}[opts.names]
    names_only = []
    for k, s in zip(ks, seeds):
        prog = generate(s, opts.size, adversarial=adv)
        features.update(prog.features)
        if opts.show:
            print(prog.source)
            print("args:", prog.args_text())
        targets = ("python", "cpu") if k < opts.cpu else ("python",)
        modes = (True, False)
        if opts.python_modes == "turn":
            modes = {"python": (k % 2 == 0,)}
        if k >= opts.cpu and every and k % every == 0:
            targets = ("python", "cpu")
            if opts.cpu_modes == "turn":
                modes = {"python": (True, False), "cpu": ((k // every) % 2 == 0,)}
        if "cpu" in targets:
            counts["checked_on_cpu"] += 1
            if isinstance(modes, dict):
                modes = dict(modes, python=(True, False))
        try:
            out = check_program(prog, targets=targets, modes=modes, jvp=opts.jvp)
        except FuzzFailure as e:
            counts["failed"] += 1
            sig = failure_signature(e)
            first = sig not in kinds
            kinds[sig].append(s)
            text = str(e)
            sig_note = "plain names"
            if "adversarial_names" in prog.features:
                plain = generate(s, opts.size, adversarial=False)
                try:
                    check_program(plain, targets=targets, modes=modes, jvp=opts.jvp)
                    names_only.append(s)
                    sig_note = "names-only (passes with plain names)"
                except FuzzFailure as e2:
                    sig_note = f"also with plain names: {failure_signature(e2)}"
                except Exception as e2:  # noqa: BLE001
                    sig_note = f"plain names: harness error {type(e2).__name__}"
                text = f"{sig_note}\n{text}"
            if not opts.no_minimize and (first or opts.one is not None):
                mt = targets if _on_cpu(e) else ("python",)
                small, small_fail = minimizer(prog.source, prog.make_args, prog.args_text(), sig,
                                              targets=mt, max_checks=60 if "cpu" in mt else 200)
                if small_fail is not None:
                    text += "\n\n======== minimized ========\n" + str(small_fail)
            path = os.path.join(outdir, f"{e.kind}_{s}.txt")
            text = f"signature: {sig}\n" + text
            with open(path, "w") as fh:
                fh.write(text)
            print(f"FAIL seed={s} [{sig}] {sig_note} -> {path}", flush=True)
            if opts.one is not None:
                print(text)
            continue
        except Exception as e:  # noqa: BLE001 - the harness itself failed: report and go on
            counts["harness_error"] += 1
            kinds["harness_error"].append(s)
            print(f"HARNESS ERROR seed={s}: {type(e).__name__}: {e}", flush=True)
            continue
        if out.status == "ok":
            counts["ok"] += 1
            counts["ok_with_oracle" if out.oracle else "ok_oracle_refused"] += 1
        else:
            counts["discarded"] += 1
            discards[discard_kind(out.why)] += 1
            discard_seeds[discard_kind(out.why)].append(s)
        if not opts.quiet and (k + 1) % 100 == 0:
            print(f"{k + 1}/{opts.count} programs, {time.time() - t0:.0f} s, {dict(counts)}", flush=True)
    dt = time.time() - t0
    n = max(len(seeds), 1)
    print(f"\n{len(seeds)} programs (family {opts.family}, base seed {opts.seed}, k from {ks[0]}, names {opts.names}, "
          f"cpu: first {opts.cpu} and every {every or '-'}th"
          f"{'' if opts.lengths is None else ', arrays of %d to %d values' % tuple(opts.lengths)}) in {dt:.0f} s: "
          f"{dict(counts)}")
    print(f"checked against the oracle: {counts['ok_with_oracle']} ({counts['ok_with_oracle'] / n:.0%}); "
          f"coarse vs fine only (oracle refused): {counts['ok_oracle_refused']}; "
          f"discarded: {counts['discarded']} ({counts['discarded'] / n:.0%}); "
          f"failed: {counts['failed']}")
    print("discarded by reason:", {k: f"{v}: seeds {discard_seeds[k][:20]}" for k, v in discards.items()})
    print("features:", dict(sorted(features.items())))
    for sig, ss in sorted(kinds.items()):
        print(f"failures [{sig}]: {len(ss)}: seeds {ss[:40]}")
    if names_only:
        print(f"failures only with adversarial names: {len(names_only)}: seeds {names_only[:40]}")
    return 1 if kinds else 0


if __name__ == "__main__":
    sys.exit(main())
