"""The fixed runtime helpers of generated modules, as real functions.

Requires: NumPy (``np``) only; each helper calls only NumPy, builtins and the helpers of this
module.  Nothing of coarsen is imported: this module is part of the bottom code-generation
layer (``coarsen.codegen``).
Guarantees: ``HELPERS`` maps each helper's name to the function; ``coarsen.codegen.runtime``
copies a function's source (``inspect.getsource``) into the generated module that calls it,
with the helpers it calls (``calls``), so what runs in generated code is exactly this text and
a linter reads it.  Every helper is written for Numba's nopython mode (no keyword arguments to
NumPy beyond those Numba supports, no Python objects); no helper has a docstring or an inner
comment, because its whole text is copied: notes go above the ``def``.  ``_grow`` refuses a
tape over ``MAX_TAPE_BYTES`` (the literal in its body: the generated text carries the number;
``tests/codegen/test_unit_codegen.py`` checks the two agree).  Copies are loops, not slice
assignments: Numba compiles an array-to-array slice assignment in about 1.5 s the first time
per signature (``fancy_setslice``), a loop in a few milliseconds, and every gradient with a tape
calls these.
"""
from __future__ import annotations

import numpy as np

MAX_TAPE_BYTES = 8 * 1024 ** 3


def _grow(tape, need):
    size = max(tape.shape[0] * 2, need)
    if size * 8 > 8589934592:
        raise MemoryError("coarsen: the tape would exceed 8 GiB; use fewer loop trips")
    out = np.empty(size, tape.dtype)
    for i in range(tape.shape[0]):
        out[i] = tape[i]
    return out


def _reserve(tape, need):
    if need > tape.shape[0]:
        return _grow(tape, need)
    return tape


# a scratch array of the reverse sweep carved from the float tape above ``top``, at the
# next 64-byte boundary (``coarsen.ad.reverse.scratch``): where the tape must grow, to the
# size needed (no doubling, no tape cap: it is an array the code allocated before), its
# entries below ``top`` kept
def _scratch_zeros(tape, top, shape, size):
    tape, start = _scratch_at(tape, top, size)
    flat = tape[start:start + size]
    for i in range(size):
        flat[i] = 0.0
    return tape, flat.reshape(shape), start + size


def _scratch_empty(tape, top, shape, size):
    tape, start = _scratch_at(tape, top, size)
    return tape, tape[start:start + size].reshape(shape), start + size


def _scratch_at(tape, top, size):
    if top + size + 8 > tape.shape[0]:
        grown = np.empty(top + size + 8)
        for i in range(top):
            grown[i] = tape[i]
        tape = grown
    misaligned = (np.int64(tape.ctypes.data) + 8 * top) & 63
    return tape, top + ((64 - misaligned) & 63) // 8


def _push(tape, pos, value):
    if pos >= tape.shape[0]:
        tape = _grow(tape, pos + 1)
    tape[pos] = value
    return tape, pos + 1


def _push_array(tape, pos, a):
    flat = a.ravel()
    n = flat.shape[0]
    if pos + n > tape.shape[0]:
        tape = _grow(tape, pos + n)
    for i in range(n):
        tape[pos + i] = flat[i]
    return tape, pos + n


def _range_len(start, stop, step):
    if step > 0:
        if stop <= start:
            return 0
        return (stop - start + step - 1) // step
    if stop >= start:
        return 0
    return (start - stop - step - 1) // (-step)


# an index check inside a parallel loop (coarsen.ad.reverse.parallel): Numba runs a
# prange loop whose body raises serially, but not one whose body calls a helper that does
def _index_error(message):
    raise IndexError(message)


# binomial (revolve) checkpointing, coarsen.ad.reverse.revolve: beta(s, r) = C(s + r, s)
# steps can be reversed with s snapshots and at most r advances of each step
def _revolve_reps(t, s):
    r = 0
    beta = 1
    while beta < t:
        r += 1
        beta = beta * (s + r) // r
    return r, beta


def _revolve_advances(t, s):
    r, beta = _revolve_reps(t, s)
    return r * t - beta * r // (s + 1)


def _revolve_mid(t, s):
    r, beta = _revolve_reps(t, s)
    left = beta * r // (s + r)
    right = beta * s // (s + r) * r // (s + r - 1)
    return min(t - 1, left, t - right)


def _revolve_units(n, room, c, t):
    best_l = 0
    best_s = 0
    best = -1
    size = 1
    while size <= n and c + size * t <= room:
        u = (n + size - 1) // size
        s = min((room - size * t) // c, u)
        cost = n + size * _revolve_advances(u, s)
        if best < 0 or cost < best:
            best = cost
            best_l = size
            best_s = s
        size *= 2
    return best_l, best_s


# slices and broadcasting as NumPy computes them, for the loop nests of
# coarsen.ir.scalarize (a missing bound is passed as +-2**62, which clips as None does)
def _slice_start(n, lo, step):
    if step > 0:
        if lo < 0:
            return max(lo + n, 0)
        return min(lo, n)
    if step == 0:
        raise ValueError("slice step cannot be zero")
    if lo < 0:
        return max(lo + n, -1)
    return min(lo, n - 1)


def _slice_len(n, lo, hi, step):
    start = _slice_start(n, lo, step)
    if step > 0:
        stop = max(hi + n, 0) if hi < 0 else min(hi, n)
        if stop <= start:
            return 0
        return (stop - start + step - 1) // step
    stop = max(hi + n, -1) if hi < 0 else min(hi, n - 1)
    if stop >= start:
        return 0
    return (start - stop - step - 1) // (-step)


def _bcast_len(a, b):
    if a == 1:
        return b
    if b == 1 or a == b:
        return a
    raise ValueError("operands could not be broadcast together (coarsen: an element-wise array expression)")


def _bcast_stride(e, n):
    if e == n:
        return 1
    if e == 1:
        return 0
    raise ValueError("operands could not be broadcast together (coarsen: an element-wise array expression)")


def _same_len(a, b):
    if a != b:
        raise ValueError("matmul/dot: shapes not aligned (the lengths differ)")
    return a


# a custom rule's result checked against the shape it must have: shapes a and b
# (coarsen.ir.primitives.custom)
def _custom_shape(v, a, b, message):
    if a != b:
        raise ValueError(message)
    return v


# an int divisor of // or %: Python raises where it is 0; Numba's numpy error model
# would give 0 (coarsen.ir.primitives.elementwise)
def _int_divisor(b):
    if b == 0:
        raise ZeroDivisionError("integer division or modulo by zero")
    return b


def _range_cont(i, stop, step):
    if step > 0:
        return i < stop
    return i > stop


def _mm22(a, b):
    n, k = a.shape
    m = b.shape[1]
    if b.shape[0] != k:
        raise ValueError('matmul/dot: shapes not aligned (the inner dimensions differ)')
    out = np.zeros((n, m))
    for i in range(n):
        for p in range(k):
            aip = a[i, p]
            for j in range(m):
                out[i, j] += aip * b[p, j]
    return out


def _mm21(a, x):
    n, k = a.shape
    if x.shape[0] != k:
        raise ValueError('matmul/dot: shapes not aligned (the inner dimensions differ)')
    out = np.zeros(n)
    for i in range(n):
        s = 0.0
        for p in range(k):
            s += a[i, p] * x[p]
        out[i] = s
    return out


def _mm12(x, b):
    k, m = b.shape
    if x.shape[0] != k:
        raise ValueError('matmul/dot: shapes not aligned (the inner dimensions differ)')
    out = np.zeros(m)
    for p in range(k):
        xp = x[p]
        for j in range(m):
            out[j] += xp * b[p, j]
    return out


def _mm11(x, y):
    if y.shape[0] != x.shape[0]:
        raise ValueError('matmul/dot: shapes not aligned (the inner dimensions differ)')
    s = 0.0
    for p in range(x.shape[0]):
        s += x[p] * y[p]
    return s


# Float64 products at and above a size (multiply-adds) run in BLAS (Numba's np.dot, through
# SciPy's BLAS); below it the loops above are faster than the call.  The sizes are the crossovers
# measured on the CI machine by ``python -m apps.bench.blas_crossover`` (2 cores): square
# products at n = 12, matrix-vector products at n = 32, dot products at n = 256.  Either branch
# accepts every memory layout (a transpose is its strides; BLAS reads it transposed).
def _bmm22(a, b):
    n, k = a.shape
    m = b.shape[1]
    if b.shape[0] != k:
        raise ValueError('matmul/dot: shapes not aligned (the inner dimensions differ)')
    if n * k * m < 1728:
        return _mm22(a, b)
    return np.dot(a, b)


def _bmm21(a, x):
    n, k = a.shape
    if x.shape[0] != k:
        raise ValueError('matmul/dot: shapes not aligned (the inner dimensions differ)')
    if n * k < 1024:
        return _mm21(a, x)
    return np.dot(a, x)


def _bmm12(x, b):
    k, m = b.shape
    if x.shape[0] != k:
        raise ValueError('matmul/dot: shapes not aligned (the inner dimensions differ)')
    if k * m < 1024:
        return _mm12(x, b)
    return np.dot(x, b)


def _bmm11(x, y):
    if y.shape[0] != x.shape[0]:
        raise ValueError('matmul/dot: shapes not aligned (the inner dimensions differ)')
    if x.shape[0] < 256:
        return _mm11(x, y)
    return np.dot(x, y)


# The bounds of one slice selecting what ``a[lo1:hi1:st1][lo2:hi2:st2]`` selects along an axis
# of length n (``coarsen.ir.slice_chains``): from the first position, first1 + st1 * first2, by
# st1 * st2, len2 elements.  A negative step's bounds are written below 0 (NumPy adds n and
# clamps at -1), so a slice that reaches index 0, or an empty one, never has the stop -1, which
# would mean the last element.
def _chain_lower(n, lo1, hi1, st1, lo2, hi2, st2):
    first = _slice_start(n, lo1, st1) + st1 * _slice_start(_slice_len(n, lo1, hi1, st1), lo2, st2)
    return first if st1 * st2 > 0 else first - n


def _chain_upper(n, lo1, hi1, st1, lo2, hi2, st2):
    m = _slice_len(n, lo1, hi1, st1)
    first = _slice_start(n, lo1, st1) + st1 * _slice_start(m, lo2, st2)
    stop = first + st1 * st2 * _slice_len(m, lo2, hi2, st2)
    return stop if st1 * st2 > 0 else stop - n


# A dot product's loop (``acc = acc + a[k] * b[k]`` for k < n) as four partial sums, lane k % 4,
# added at the end ``(s0 + s1) + (s2 + s3)`` with ``acc`` first in lane 0: four independent
# chains where the loop had one (Numba may not reorder a float sum; the chain's latency bounds
# the loop).  Below eight terms every term goes to lane 0, the loop's order, and the other lanes
# hold -0.0, which adds to any value exactly: the loop's bits.  ``a`` and ``b`` are views whose
# axis the loop walked from 0 (``coarsen.ad.reverse.dot_loops``); any strides.  (No early
# return for short sums: one kept Numba from inlining the helper, which then cost more than the
# loop it replaced.)
def _dot_acc(acc, a, b, n):
    s0 = acc
    s1 = -0.0
    s2 = -0.0
    s3 = -0.0
    m = n - n % 4 if n >= 8 else 0
    for k in range(0, m, 4):
        s0 = s0 + a[k] * b[k]
        s1 = s1 + a[k + 1] * b[k + 1]
        s2 = s2 + a[k + 2] * b[k + 2]
        s3 = s3 + a[k + 3] * b[k + 3]
    for k in range(m, n):
        s0 = s0 + a[k] * b[k]
    return (s0 + s1) + (s2 + s3)


# ``acc`` plus the terms ``x[:n]`` in the lanes of ``_dot_acc`` (lane ``k % 4``, ``acc`` first in
# lane 0; below eight terms, in order): an adjoint's sum after the loop that stored its terms
# (``coarsen.ad.reverse.lane_sums``).  ``n`` may be negative: no terms.
def _sum_acc(acc, x, n):
    s0 = acc
    s1 = -0.0
    s2 = -0.0
    s3 = -0.0
    m = n - n % 4 if n >= 8 else 0
    for k in range(0, m, 4):
        s0 = s0 + x[k]
        s1 = s1 + x[k + 1]
        s2 = s2 + x[k + 2]
        s3 = s3 + x[k + 3]
    for k in range(m, n):
        s0 = s0 + x[k]
    return (s0 + s1) + (s2 + s3)


# exp(x) in branch-free arithmetic that LLVM vectorizes, where libm's exp is one call per
# element (``coarsen.ad.reverse.vector_exp``): x = k ln 2 + r with |r| <= ln 2 / 2 (Cody-Waite: the
# high part of ln 2 has trailing zero bits, so k times it is exact), e^r by its Taylor polynomial
# to degree 13 (the remainder below 2^-57 of the result), times 2^k as two powers of two made from
# their exponent bits (one would leave the exponent range below 2^-1022).  Within one ulp of the
# exact value (libm's exp within about half an ulp; the two differ in the last bit of about one
# result in ten); inf above 709.78, subnormals down to 0 below -745.13, NaN for NaN (computed
# from 0.0 instead: no NaN reaches the integer conversion).
def _exp(x):
    y = min(max(x, -746.0), 709.9)
    y = 0.0 if np.isnan(y) else y
    k = np.floor(y * 1.4426950408889634 + 0.5)
    r = (y - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10
    q = 1.0 / 6227020800.0
    q = 1.0 / 479001600.0 + r * q
    q = 1.0 / 39916800.0 + r * q
    q = 1.0 / 3628800.0 + r * q
    q = 1.0 / 362880.0 + r * q
    q = 1.0 / 40320.0 + r * q
    q = 1.0 / 5040.0 + r * q
    q = 1.0 / 720.0 + r * q
    q = 1.0 / 120.0 + r * q
    q = 1.0 / 24.0 + r * q
    q = 1.0 / 6.0 + r * q
    q = 0.5 + r * q
    p = 1.0 + (r + r * (r * q))
    n = np.int64(k)
    h = n >> 1
    s1 = np.int64((h + 1023) << 52).view(np.float64)
    s2 = np.int64((n - h + 1023) << 52).view(np.float64)
    v = p * s1 * s2
    return x if np.isnan(x) else v


def _outer(x, y):
    out = np.empty((x.shape[0], y.shape[0]))
    for i in range(x.shape[0]):
        for j in range(y.shape[0]):
            out[i, j] = x[i] * y[j]
    return out


def _outer_add(out, x, y):
    for i in range(x.shape[0]):
        xi = x[i]
        for j in range(y.shape[0]):
            out[i, j] += xi * y[j]


def _outer_add2(out, x, y, u, v):
    if u.shape[0] != x.shape[0] or v.shape[0] != y.shape[0] or out.shape[0] != x.shape[0] \
            or out.shape[1] != y.shape[0]:
        raise ValueError('outer: the adjoint and the outer products differ in shape')
    for i in range(x.shape[0]):
        xi = x[i]
        ui = u[i]
        for j in range(y.shape[0]):
            out[i, j] = (out[i, j] + xi * y[j]) + ui * v[j]


def _outer_first2(shape, x, y, u, v):
    if shape[0] != x.shape[0] or shape[1] != y.shape[0] or u.shape[0] != x.shape[0] \
            or v.shape[0] != y.shape[0]:
        raise ValueError('outer: the adjoint and the outer products differ in shape')
    out = np.empty((x.shape[0], y.shape[0]))
    for i in range(x.shape[0]):
        xi = x[i]
        ui = u[i]
        for j in range(y.shape[0]):
            out[i, j] = (0.0 + xi * y[j]) + ui * v[j]
    return out


def _outer_first(shape, x, y):
    if shape[0] != x.shape[0] or shape[1] != y.shape[0]:
        raise ValueError('outer: the adjoint and the outer product differ in shape')
    out = np.empty((x.shape[0], y.shape[0]))
    for i in range(x.shape[0]):
        xi = x[i]
        for j in range(y.shape[0]):
            out[i, j] = 0.0 + xi * y[j]
    return out


def _prod_grad(a):
    flat = a.ravel()
    n = flat.shape[0]
    left = np.ones(n)
    right = np.ones(n)
    for i in range(1, n):
        left[i] = left[i - 1] * flat[i - 1]
    for i in range(n - 2, -1, -1):
        right[i] = right[i + 1] * flat[i + 1]
    return (left * right).reshape(a.shape)


def _cumsum2(a, axis):
    n, m = a.shape
    out = np.empty((n, m), a.dtype)
    if n == 0 or m == 0:
        return out
    if axis == 0:
        for j in range(m):
            acc = a[0, j]
            out[0, j] = acc
            for i in range(1, n):
                acc = acc + a[i, j]
                out[i, j] = acc
    else:
        for i in range(n):
            acc = a[i, 0]
            out[i, 0] = acc
            for j in range(1, m):
                acc = acc + a[i, j]
                out[i, j] = acc
    return out


def _rcumsum1(g):
    n = g.shape[0]
    out = np.empty(n)
    acc = 0.0
    for i in range(n - 1, -1, -1):
        acc += g[i]
        out[i] = acc
    return out


def _rcumsum2(g, axis):
    n, m = g.shape
    out = np.empty((n, m))
    if axis == 0:
        for j in range(m):
            acc = 0.0
            for i in range(n - 1, -1, -1):
                acc += g[i, j]
                out[i, j] = acc
    else:
        for i in range(n):
            acc = 0.0
            for j in range(m - 1, -1, -1):
                acc += g[i, j]
                out[i, j] = acc
    return out


def _diff_adj1(g, shape):
    n = g.shape[0]
    out = np.zeros(shape[0])
    for i in range(n):
        out[i] -= g[i]
        out[i + 1] += g[i]
    return out


def _diff_adj2(g, axis, shape):
    n, m = g.shape
    out = np.zeros((shape[0], shape[1]))
    if axis == 0:
        for i in range(n):
            for j in range(m):
                out[i, j] -= g[i, j]
                out[i + 1, j] += g[i, j]
    else:
        for i in range(n):
            for j in range(m):
                out[i, j] -= g[i, j]
                out[i, j + 1] += g[i, j]
    return out


def _solve2(a, b):
    n = a.shape[0]
    if a.shape[1] != n:
        raise np.linalg.LinAlgError('solve: the matrix is not square')
    if b.shape[0] != n:
        raise np.linalg.LinAlgError('solve: the system is not dimensionally valid (A and b differ in length)')
    m = b.shape[1]
    lu = np.empty((n, n))
    x = np.empty((n, m))
    for i in range(n):
        for j in range(n):
            lu[i, j] = a[i, j]
        for j in range(m):
            x[i, j] = b[i, j]
    for k in range(n):
        p = k
        big = abs(lu[k, k])
        for i in range(k + 1, n):
            if abs(lu[i, k]) > big:
                big = abs(lu[i, k])
                p = i
        if big == 0.0:
            raise np.linalg.LinAlgError('Singular matrix')
        if p != k:
            for j in range(n):
                t = lu[k, j]
                lu[k, j] = lu[p, j]
                lu[p, j] = t
            for j in range(m):
                t = x[k, j]
                x[k, j] = x[p, j]
                x[p, j] = t
        piv = lu[k, k]
        for i in range(k + 1, n):
            f = lu[i, k] / piv
            for j in range(k + 1, n):
                lu[i, j] -= f * lu[k, j]
            for j in range(m):
                x[i, j] -= f * x[k, j]
    for k in range(n - 1, -1, -1):
        for j in range(m):
            acc = x[k, j]
            for i in range(k + 1, n):
                acc -= lu[k, i] * x[i, j]
            x[k, j] = acc / lu[k, k]
    return x


def _solve1(a, b):
    bb = np.empty((b.shape[0], 1))
    for i in range(b.shape[0]):
        bb[i, 0] = b[i]
    return _solve2(a, bb)[:, 0].copy()


def _solve_adj_b1(a, g):
    return _solve1(a.T, g)


def _solve_adj_b2(a, g):
    return _solve2(a.T, g)


def _solve_adj_a1(a, b, g):
    x = _solve1(a, b)
    gb = _solve1(a.T, g)
    return -_outer(gb, x)


def _solve_adj_a2(a, b, g):
    x = _solve2(a, b)
    gb = _solve2(a.T, g)
    return -_bmm22(gb, x.T)


# np.linspace(start, stop, num, endpoint) of scalars, NumPy's algorithm step by step (the
# same bits); and its partials in stop, k / div (0 where div <= 0, 1 at the endpoint)
def _linspace(start, stop, num, endpoint):
    if num < 0:
        raise ValueError("Number of samples must be non-negative.")
    div = num - 1 if endpoint else num
    delta = float(stop) - float(start)
    y = np.arange(0, num).astype(np.float64)
    if div > 0:
        step = delta / div
        if step == 0:
            y = y / div * delta
        else:
            y = y * step
    else:
        y = y * delta
    y = y + start
    if endpoint and num > 1:
        y[-1] = stop
    return y


def _linspace_w(num, endpoint):
    div = num - 1 if endpoint else num
    w = np.zeros(max(num, 0))
    if div > 0:
        for k in range(num):
            w[k] = k / div
    return w


# np.gradient along the rows of a 2-D array with the scalar spacing h, NumPy's formulas
# (uniform spacing: the same operations, the same bits), and its transpose
def _gradient_rows(f, h, order):
    n = f.shape[0]
    if n < order + 1:
        raise ValueError("Shape of array too small to calculate a numerical gradient, at least "
                         "(edge_order + 1) elements are required.")
    out = np.empty((n, f.shape[1]))
    for i in range(1, n - 1):
        out[i, :] = (f[i + 1, :] - f[i - 1, :]) / (2. * h)
    if order == 1:
        out[0, :] = (f[1, :] - f[0, :]) / h
        out[n - 1, :] = (f[n - 1, :] - f[n - 2, :]) / h
    else:
        out[0, :] = -1.5 / h * f[0, :] + 2. / h * f[1, :] + -0.5 / h * f[2, :]
        out[n - 1, :] = 0.5 / h * f[n - 3, :] + -2. / h * f[n - 2, :] + 1.5 / h * f[n - 1, :]
    return out


def _gradient_rows_adj(g, h, order):
    n = g.shape[0]
    out = np.zeros((n, g.shape[1]))
    for i in range(1, n - 1):
        out[i + 1, :] += g[i, :] / (2. * h)
        out[i - 1, :] -= g[i, :] / (2. * h)
    if order == 1:
        out[1, :] += g[0, :] / h
        out[0, :] -= g[0, :] / h
        out[n - 1, :] += g[n - 1, :] / h
        out[n - 2, :] -= g[n - 1, :] / h
    else:
        out[0, :] += -1.5 / h * g[0, :]
        out[1, :] += 2. / h * g[0, :]
        out[2, :] += -0.5 / h * g[0, :]
        out[n - 3, :] += 0.5 / h * g[n - 1, :]
        out[n - 2, :] += -2. / h * g[n - 1, :]
        out[n - 1, :] += 1.5 / h * g[n - 1, :]
    return out


#: name -> helper, in the order written here
HELPERS = {f.__name__: f for f in (
    _grow, _reserve, _scratch_zeros, _scratch_empty, _scratch_at, _push, _push_array,
    _range_len, _index_error, _revolve_reps, _revolve_advances, _revolve_mid, _revolve_units,
    _slice_start, _slice_len, _bcast_len, _bcast_stride, _same_len, _custom_shape, _int_divisor,
    _range_cont, _mm22, _mm21, _mm12, _mm11, _bmm22, _bmm21, _bmm12, _bmm11, _dot_acc, _sum_acc, _exp, _chain_lower, _chain_upper, _outer, _outer_add, _outer_add2, _outer_first2, _outer_first, _prod_grad, _cumsum2, _rcumsum1, _rcumsum2,
    _diff_adj1, _diff_adj2, _solve2, _solve1, _solve_adj_b1, _solve_adj_b2, _solve_adj_a1,
    _solve_adj_a2, _linspace, _linspace_w, _gradient_rows, _gradient_rows_adj,
)}
