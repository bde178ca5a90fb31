"""``python -m apps.bench``: see :mod:`apps.bench.cli`.

For benchmarks only: ``OPENBLAS_CORETYPE`` and ``OPENBLAS_L2_SIZE`` slow NumPy's BLAS on some
machines and must be unset before NumPy is loaded, so when either is set this re-executes the
command with both removed from the environment (``COARSEN_BENCH_UNSET`` tells the new process,
and the report, what was unset).  It also sets ``OPENBLAS_THREAD_TIMEOUT`` (``THREAD_TIMEOUT``)
where it is not set: the process holds two OpenBLAS libraries (NumPy's, and SciPy's that Numba's
``np.dot`` calls), each with a thread per core, and an idle pool's threads spin for a tenth of a
second or more after each call, so when the harness alternates tools the other library's calls
ran 2-3x slower (gemm's gradient 7.1 ms against 2.9 ms alone, NumPy's primal 2.0 against 1.1
ms; with the timeout 3.1 and 1.1 ms).  ``COARSEN_BENCH_SET`` tells the report.  Tests and
library use are not affected.
"""
import os
import sys

from apps.bench.cli import main

_BLAS_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
#: OpenBLAS's spin before an idle thread sleeps: 2**4 cycles (its default is 2**28)
THREAD_TIMEOUT = ("OPENBLAS_THREAD_TIMEOUT", "4")


def _reexec_without_blas_env():
    found = [k for k in _BLAS_ENV if k in os.environ]
    if not found and THREAD_TIMEOUT[0] in os.environ:
        return
    env = {k: v for k, v in os.environ.items() if k not in _BLAS_ENV}
    if found:
        env["COARSEN_BENCH_UNSET"] = ";".join(f"{k}={os.environ[k]}" for k in found)
    if THREAD_TIMEOUT[0] not in os.environ:
        env[THREAD_TIMEOUT[0]] = THREAD_TIMEOUT[1]
        env["COARSEN_BENCH_SET"] = "=".join(THREAD_TIMEOUT)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, "-m", "apps.bench", *sys.argv[1:]], env)


if __name__ == "__main__":
    _reexec_without_blas_env()
    sys.exit(main())
