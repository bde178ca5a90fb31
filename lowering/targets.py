"""The code-generation targets that coarsen.lowering knows, in one place.

Requires: nothing (standard library only).
Guarantees: ``check_target(t)`` returns ``t`` when it is a supported target and raises
``LoweringError`` naming the supported ones otherwise; ``function_decorator(t, parallel=False)`` is the decorator
source text (without ``@``) that the printer writes above every top-level function for target
``t`` (with Numba's ``parallel=True`` and ``cache=False`` on the CPU for a function with a parallel
loop: compiled with its caller, whose cached code holds it), or ``None``; ``target_imports(t)`` are the extra ``import`` lines that target needs.

Extension point: a new target (``"cuda"``: device functions under ``numba.cuda.jit(device=True)``
plus one-thread-per-set kernels from ``batch.py``) is added here first, then in the printer's
import handling and in ``batch.py``'s emitter table. Nothing else dispatches on the target string.
"""

from __future__ import annotations

from .errors import LoweringError

__all__ = ["TARGETS", "check_target", "function_decorator", "target_imports"]

#: target name -> (decorator text for top-level functions or None, modules the target imports)
_TARGET_TABLE: dict[str, tuple[str | None, tuple[str, ...]]] = {
    "cpu": ("numba.njit(cache=True, error_model='numpy')", ("numba",)),
    "python": (None, ()),
}

TARGETS: tuple[str, ...] = tuple(_TARGET_TABLE)


def check_target(target: str) -> str:
    if not isinstance(target, str) or target not in _TARGET_TABLE:
        raise LoweringError(
            f"unknown target {target!r}; supported targets: {', '.join(TARGETS)}"
        )
    return target


def function_decorator(target: str, parallel: bool = False) -> str | None:
    """The decorator text; ``parallel=True`` (a function with a parallel loop, see the
    printer) adds Numba's ``parallel=True`` on the CPU."""
    text = _TARGET_TABLE[check_target(target)][0]
    if parallel and target == "cpu":
        # never cached: Numba's cache of a caller compiled in a process where this function
        # came from the cache crashes the process that loads it (a segmentation fault,
        # tests/lowering/test_parallel_cache.py); compiled with its caller, never alone
        text = text.replace("cache=True", "cache=False")[:-1] + ", parallel=True)"
    return text


def target_imports(target: str) -> tuple[str, ...]:
    return _TARGET_TABLE[check_target(target)][1]
