#!/usr/bin/env bash
# Prepared GPU check for coarsen's CUDA batches (correctness + throughput), < 5 minutes on a GPU.
#   scripts/gpu_check.sh                      # real GPU
#   NUMBA_ENABLE_CUDASIM=1 scripts/gpu_check.sh --quick   # Numba's CUDA simulator, tiny sizes
# Uses a private, temporary coarsen cache so that it measures cold compiles and leaves no files.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -z "${COARSEN_CACHE_DIR:-}" ]]; then
    COARSEN_CACHE_DIR="$(mktemp -d)/coarsen-cache"
    export COARSEN_CACHE_DIR
    trap 'rm -rf "$(dirname "$COARSEN_CACHE_DIR")"' EXIT
fi
exec_status=0
timeout 300 python scripts/gpu_check.py "$@" || exec_status=$?
exit $exec_status
