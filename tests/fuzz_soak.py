"""Soak mode for the randomized differential tests: many generated programs, one report.

Usage (from the repository root)::

    python tests/fuzz_soak.py --count 5000 --seed 1          # programs seed*1_000_000 + k
    python tests/fuzz_soak.py --count 200 --seed 7 --cpu 20  # also the first 20 on target cpu
    python tests/fuzz_soak.py --one 1000123 --show           # print and check one program
    python tests/fuzz_soak.py --one 1000123 --size 9         # the same seed at another size

Every program is written to ``/tmp/fuzz/prog_<hash>.py`` (``$COARSEN_FUZZ_DIR``) and checked by
``tests.progen.check_program``: coarse and fine gradients on the ``python`` target (and on
``cpu`` for the first ``--cpu`` programs), against each other, against the extended-precision
oracle where it vouches for the point, and the primal value against the original function.
The first failure of each signature (kind plus, for crashes, the error line with numbers
removed: ``progen.failure_signature``) is minimized (``--no-minimize`` to skip); all are written, with their arguments and
``g.ir``, to ``/tmp/fuzz/failures/<kind>_<seed>.txt``; the summary at the end gives counts per
outcome and per failure kind, and the seeds of every failure.  Set ``COARSEN_CACHE_DIR`` to keep
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

from tests.progen import (FUZZ_DIR, FuzzFailure, check_program, failure_signature,  # noqa: E402
                          generate, minimize)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0, help="base seed: programs seed*1_000_000 + k")
    ap.add_argument("--cpu", type=int, default=0, help="also check the first N programs on target cpu")
    ap.add_argument("--one", type=int, default=None, help="check only this program seed")
    ap.add_argument("--size", type=int, default=None, help="statement budget (default: from the seed)")
    ap.add_argument("--show", action="store_true", help="print each program")
    ap.add_argument("--no-minimize", action="store_true")
    ap.add_argument("--quiet", action="store_true")
    opts = ap.parse_args(argv)

    seeds = [opts.one] if opts.one is not None else [opts.seed * 1_000_000 + k for k in range(opts.count)]
    outdir = os.path.join(FUZZ_DIR, "failures")
    os.makedirs(outdir, exist_ok=True)
    counts = collections.Counter()
    kinds = collections.defaultdict(list)
    discards = collections.Counter()
    features = collections.Counter()
    t0 = time.time()
    for k, s in enumerate(seeds):
        prog = generate(s, opts.size)
        features.update(prog.features)
        if opts.show:
            print(prog.source)
            print("args:", prog.args_text())
        targets = ("python", "cpu") if k < opts.cpu else ("python",)
        try:
            out = check_program(prog, targets=targets)
        except FuzzFailure as e:
            counts["failed"] += 1
            sig = failure_signature(e)
            first = sig not in kinds
            kinds[sig].append(s)
            text = str(e)
            if not opts.no_minimize and (first or opts.one is not None):
                small, small_fail = minimize(prog.source, prog.make_args, prog.args_text(), sig,
                                             targets=("python",))
                if small_fail is not None:
                    text += "\n\n======== minimized ========\n" + str(small_fail)
            path = os.path.join(outdir, f"{e.kind}_{s}.txt")
            text = f"signature: {sig}\n" + text
            with open(path, "w") as fh:
                fh.write(text)
            print(f"FAIL seed={s} kind={e.kind} -> {path}", flush=True)
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
            discards[out.why.split(":")[0][:40]] += 1
        if not opts.quiet and (k + 1) % 100 == 0:
            print(f"{k + 1}/{len(seeds)} programs, {time.time() - t0:.0f} s, {dict(counts)}", flush=True)
    dt = time.time() - t0
    print(f"\n{len(seeds)} programs (base seed {opts.seed}) in {dt:.0f} s: {dict(counts)}")
    print("discarded:", dict(discards))
    print("features:", dict(sorted(features.items())))
    for sig, ss in sorted(kinds.items()):
        print(f"failures [{sig}]: {len(ss)}: seeds {ss[:40]}")
    return 1 if kinds else 0


if __name__ == "__main__":
    sys.exit(main())
