"""Minimal reproducers of the coarsen bugs met while reproducing the paper.

``python -m paper_repro`` re-checks every one of them (coarse and fine gradients against
central differences, generated code probed for crashes in a child process) and reports
whether each still fails, so REPORT.md never describes a bug that has since been fixed as
current.  Each entry of :data:`CASES` is ``(name, function, args, wrt positions, what)``.
"""
from __future__ import annotations

import math

import numpy as np


def loop_reassign_read(xs):
    """An element read into ``x``, then ``x`` overwritten by a scalar segment, in a loop."""
    s = 0.0
    for k in range(xs.shape[0]):
        x = xs[k]
        x = x * x
        s += x
    return s


def two_carried(th, om, n):
    """Two loop-carried scalars updated one after the other (symplectic Euler shape)."""
    for i in range(n):
        om = om - th
        th = th + om
    return th


def nested_tape(a, q, n, K, d):
    """The loop nest of ADBench's GMM objective, reduced: tape reservations across nested
    loops (an int tape overflow: IndexError on target="python", a segfault under Numba)."""
    s = 0.0
    for i in range(n):
        for k in range(K):
            for j in range(d):
                q[j] = math.exp(a[k, j]) * i
            idx = d
            for j in range(d):
                for l in range(j + 1, d):
                    q[l] += a[k, idx]
                    idx += 1
            sq = 0.0
            for j in range(d):
                sq += q[j] * q[j]
            s += sq
    return s


CASES = [
    ("loop_reassign_read", loop_reassign_read, (np.array([0.3, -0.5, 0.9]),), (0,),
     "coarse gradient 2*x^3 instead of 2*x: the segment's partial is evaluated at the "
     "overwritten x (the tape restores x after the preaccumulated step)"),
    ("two_carried", two_carried, (0.3, 0.1, 2), (0, 1),
     "coarse d/dth = 0 instead of -1: the segment dropped the loop-carried output om"),
    ("nested_tape", nested_tape,
     (np.linspace(0.1, 0.5, 30).reshape(3, 10), np.zeros(4), 2, 3, 4), (0,),
     "int tape overflow in both modes (IndexError on target='python', SIGSEGV under Numba)"),
]
