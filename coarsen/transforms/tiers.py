"""Tiers of a kind of arguments' entries: what Numba compiles, and when.

A ``Gradient`` calls one of a specialization's compiled entries per call.  Numba compiles an
entry at its first call, and the entries cost differently:

* the plain entry ``value_and_grad_<f>`` calls the taped entry ``value_and_grad_<f>_taped`` on
  fresh tapes, and LLVM optimizes the taped body again inlined into it, which made a first
  call take about 1.3 to 3 times as long;
* the gradient-only entry (the same code with ``0.0`` for the value,
  ``artifact.grad_only_source``) is faster per call, and is a second module to compile.

Requires: an ``Artifact`` (``coarsen.transforms.artifact``) and a direct hit
``(artifact, entry, gradient-only entry, ...)`` as ``coarsen.transforms.gradient.Gradient`` keeps them.
Guarantees: ``fresh_taped(art)`` calls the taped entry on fresh small tapes, which gives the
plain entry's numbers bit for bit (it is what the plain entry does), or is None where there is
no taped entry.  ``Tiers(hit, remember).hit()`` is the hit whose value-and-gradient slot runs
``fresh_taped`` for ``PLAIN_AFTER`` calls and then the plain entry, and whose gradient-only slot
runs what the first slot runs for ``GRAD_ONLY_AFTER`` calls and then the gradient-only entry
(``Tiers(hit, remember, offer=k)``: counted for ``k`` calls more, through a closure, before the
final hit, which is the kind's offer to direct mode, ``coarsen.transforms.direct_call``; with
``settled=True`` only that count, for a kind whose entries are compiled);
each switch passes the new hit to ``remember``, so once both are done the calls reach Numba's
entries with nothing in between.  A kind called a few times (a test, an optimizer's first
steps) compiles the taped entry only; a hot loop gets the fastest entries.  The counters are not
locked: threads that race on one may switch a call late, never change a result.
"""
from __future__ import annotations

import numpy as np

__all__ = ["GRAD_ONLY_AFTER", "PLAIN_AFTER", "Tiers", "fresh_taped"]

#: ``g(*args)`` switches a kind of arguments to the gradient-only entry (compiling it) at its
#: this-many-th call; the calls before run the full entry
GRAD_ONLY_AFTER = 64
#: where the code tapes, the first this-many calls of a kind of arguments run the taped entry
#: on fresh small tapes, and only then the plain entry, which Numba compiles then
PLAIN_AFTER = 64


def fresh_taped(art):
    """The taped entry of ``art`` on fresh small tapes, or None where ``art`` has no taped
    entry (or is not the cpu target's).  Returns what the taped entry returns:
    ``(value, grads, tape counts, *tapes)``."""
    taped = art.taped_entry
    if taped is None or art.options.build_target != "cpu":
        return None
    kinds = art.tapes
    empty = np.empty
    if kinds == "f":
        return lambda *a: taped(*a, empty(64))
    if kinds == "i":
        return lambda *a: taped(*a, empty(64, np.int64))
    return lambda *a: taped(*a, empty(64), empty(64, np.int64))


class Tiers:
    """A direct hit's two slots while they are tiered (see the module docstring)."""

    def __init__(self, hit, remember, offer=0, settled=False):
        self.base, self.remember = hit, remember
        art = hit[0]
        self.fresh = fresh_taped(art)
        # settled: the entries were compiled before (a kind offered direct mode again)
        self.full_left = PLAIN_AFTER if self.fresh is not None and not settled else 0
        self.grad_left = GRAD_ONLY_AFTER if art.grad_entry is not art.entry and not settled else 0
        # then this many gradient-only calls more, counted, before the final hit: the kind's
        # offer to direct mode (``coarsen.transforms.direct_call``), for kinds that may take it
        self.offer_left = offer

    def hit(self):
        """The hit as it stands: its two slots for the calls still left in their tiers."""
        art, entry, grad_entry = self.base[:3]
        full = self._full() if self.full_left > 0 else entry
        grad = self._grad() if self.grad_left > 0 else \
            self._offer() if self.offer_left > 0 else grad_entry
        return (art, full, grad) + self.base[3:]

    def _full(self):
        fresh = self.fresh

        def call(*args):
            self.full_left -= 1
            if self.full_left == 0:
                self.remember(self.hit())
            return fresh(*args)
        return call

    def _grad(self):
        entry = self.base[1]

        def call(*args):
            self.grad_left -= 1
            if self.grad_left == 0:
                self.remember(self.hit())
            return self.fresh(*args) if self.full_left > 0 else entry(*args)
        return call

    def _offer(self):
        entry = self.base[2]
        fresh_first = entry is self.base[1]     # one entry: the taped tier still applies

        def call(*args):
            self.offer_left -= 1
            if self.offer_left == 0:
                self.remember(self.hit())
            return self.fresh(*args) if fresh_first and self.full_left > 0 else entry(*args)
        return call
