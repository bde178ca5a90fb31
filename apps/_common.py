"""Helpers shared by the applications and the harness: error measure, flattening, data paths."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

#: The repository root (the folder above ``apps/``).
REPO_ROOT = Path(__file__).resolve().parent.parent


def adbench_dir() -> Path | None:
    """Where ADBench's input files live, or ``None`` when they are absent.

    ``$COARSEN_ADBENCH`` wins; otherwise ``../shared/adbench`` relative to the repository root.
    The files are never part of the project; code that needs them must cope with ``None``.
    """
    env = os.environ.get("COARSEN_ADBENCH")
    cands = [Path(env)] if env else []
    cands.append(REPO_ROOT.parent / "shared" / "adbench")
    for c in cands:
        if c.is_dir():
            return c
    return None


def flat(grads) -> np.ndarray:
    """Concatenate a gradient (a scalar, an array, or a tuple of them) into one float64 vector."""
    if isinstance(grads, (tuple, list)):
        parts = [flat(g) for g in grads]
        return np.concatenate(parts) if parts else np.zeros(0)
    if hasattr(grads, "detach"):  # torch tensor
        grads = grads.detach().cpu().numpy()
    return np.asarray(grads, dtype=np.float64).reshape(-1)


def adbench_err(x, y) -> float:
    """ADBench's correctness measure: max over entries of |x - y| / max(1, |x| + |y|).

    Returns ``inf`` on a shape mismatch and when either side has a NaN.
    """
    x = flat(x)
    y = flat(y)
    if x.shape != y.shape:
        return float("inf")
    if x.size == 0:
        return 0.0
    d = np.abs(x - y) / np.maximum(1.0, np.abs(x) + np.abs(y))
    if np.isnan(d).any():
        return float("inf")
    return float(d.max())


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def check_size(size: str, sizes: dict):
    if size not in sizes:
        raise ValueError(f"size must be one of {sorted(sizes)}, got {size!r}")
    return sizes[size]
