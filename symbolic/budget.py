"""Size guard and time budget for every symbolic step.

Requires: nothing beyond SymPy expressions (or plain integers) to check.

Guarantees: ``Budget.check`` costs at most O(max_ops) work whatever the expression's size,
because it counts operations with an early exit (``ops.count_ops(expr, limit=...)``); a SymPy
expression held as a shared DAG whose *tree* is exponentially large (the typical result of
inlining a chain of reused values) is rejected after visiting about ``max_ops`` nodes, never
walked in full.  It raises :class:`BudgetExceeded` with a ``reason`` ("size" or "time" plus
details) when the operation count exceeds ``max_ops`` or when the wall time since
:meth:`Budget.start` exceeds ``seconds``.

A budget's clock starts at :meth:`Budget.start`; every public function of ``coarsen.symbolic``
calls ``budget.ensure_started()``, which starts the clock on first use only, so one budget can
cover several calls (one SOI) and ``start()`` resets it.  SymPy calls cannot be interrupted, so
the time limit is checked between steps; callers only ever hand bounded-size expressions to
SymPy routines, so the overshoot past ``seconds`` is small.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from .ops import count_ops

__all__ = ["Budget", "BudgetExceeded"]


class BudgetExceeded(Exception):
    """A symbolic step exceeded its size guard or its time budget.

    ``reason`` is a short human-readable string, starting with "size" or "time".
    """

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass
class Budget:
    """Limits for one symbolic job: ``max_ops`` operations per expression, ``seconds`` wall time."""

    max_ops: int = 4000
    seconds: float = 10.0
    #: the clock ``seconds`` is measured on; tests hand in a deterministic one (a counter), so
    #: that what they check never depends on the machine's speed or load
    clock: Callable[[], float] = field(default=time.perf_counter, repr=False, compare=False)
    _t0: float | None = field(default=None, repr=False, compare=False)
    #: whether the clock ever ran out (``check_time`` raised): what was decided then depends
    #: on the machine's load, even where a caller caught the exception and went on
    timed_out: bool = field(default=False, repr=False, compare=False)

    def start(self) -> "Budget":
        """(Re)start the clock; returns self."""
        self._t0 = self.clock()
        return self

    def ensure_started(self) -> "Budget":
        """Start the clock unless it is already running; returns self."""
        if self._t0 is None:
            self._t0 = self.clock()
        return self

    def elapsed(self) -> float:
        """Seconds since start (0 if not started)."""
        return 0.0 if self._t0 is None else self.clock() - self._t0

    def check_time(self) -> None:
        """Raise BudgetExceeded("time ...") when the clock ran past ``seconds``."""
        if self._t0 is None:
            return
        spent = self.elapsed()
        if spent > self.seconds:
            self.timed_out = True
            raise BudgetExceeded(f"time: {spent:.2f} s > {self.seconds} s")

    def check(self, expr_or_count=None) -> int:
        """Check the time and the size of an expression (or list of them, or an op count).

        Returns the operation count (exact when within the limit).  Raises BudgetExceeded.
        """
        self.check_time()
        if expr_or_count is None:
            return 0
        if isinstance(expr_or_count, int) and not isinstance(expr_or_count, bool):
            n = expr_or_count
        else:
            n = count_ops(expr_or_count, limit=self.max_ops, budget=self)
        if n > self.max_ops:
            raise BudgetExceeded(f"size: more than {self.max_ops} operations")
        return n
