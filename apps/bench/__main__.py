"""``python -m apps.bench``: see :mod:`apps.bench.cli`.

For benchmarks only: ``OPENBLAS_CORETYPE`` and ``OPENBLAS_L2_SIZE`` slow NumPy's BLAS on some
machines and must be unset before NumPy is loaded, so when either is set this re-executes the
command with both removed from the environment (``COARSEN_BENCH_UNSET`` tells the new process,
and the report, what was unset).  Tests and library use are not affected.
"""
import os
import sys

from apps.bench.cli import main

_BLAS_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def _reexec_without_blas_env():
    found = [k for k in _BLAS_ENV if k in os.environ]
    if not found:
        return
    env = {k: v for k, v in os.environ.items() if k not in _BLAS_ENV}
    env["COARSEN_BENCH_UNSET"] = ";".join(f"{k}={os.environ[k]}" for k in found)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, "-m", "apps.bench", *sys.argv[1:]], env)


if __name__ == "__main__":
    _reexec_without_blas_env()
    sys.exit(main())
