"""Programs pinned by the coarsening tests (they must live in a file: coarsen reads source)."""
import math

import numpy as np


def arith(a, n):
    s = 0.0
    for i in range(n):
        s += a * i
    return s


def arith_sq(a, b, n):
    s = b
    for i in range(n):
        s += a * i * i
    return s * b


def stepped(a, lo, hi, step):
    s = 1.0
    for i in range(lo, hi, step):
        s += a * i
    return s * a


def affine(a, b, x0, n):
    x = x0
    for i in range(n):
        x = a * x + b
    return x


def power(p0, a, n):
    p = p0
    for i in range(n):
        p *= a
    return p


def logistic_map(r, x0, n):
    x = x0
    for i in range(n):
        x = r * x * (1.0 - x)
    return x


def logistic_loss(z, y):
    p = 1.0 / (1.0 + math.exp(-z))
    return -(y * math.log(p) + (1.0 - y) * math.log(1.0 - p))


def branchy(x, y):
    t = x * y + math.sin(x)
    if t > 0.5:
        u = math.sqrt(t) * y
    else:
        u = t * t - x
    return u * math.exp(-y * u)


def carried_inside(a, x0, n):
    """x is carried from trip to trip but read after the loop only through s."""
    x = x0
    s = 0.0
    for i in range(n):
        k = a * x * (1.0 - x)
        x = x + 0.1 * k
        s = s + x * x
    return s


def poly_blowup(x, c):
    """A degree-2**12 polynomial by repeated squaring: the symbolic stage must give up."""
    for i in range(12):
        x = x * x + c
    return x


def _write_first(a, x):
    a[0] = x * 3.0
    return x


def read_write_read(a, x):
    """a[0] is read, written by the helper, then read again within one statement."""
    y = a[0] * 2.0 + _write_first(a, x) * a[0]
    return y * x


def rnn_like(W, h0, n):
    """An array filled row by row and re-read (the reverse sweep re-reads, not tapes, it)."""
    H = h0.shape[0]
    hs = np.zeros((n + 1, H))
    for i in range(H):
        hs[0, i] = h0[i]
    loss = 0.0
    for t in range(n):
        for i in range(H):
            a = 0.0
            for j in range(H):
                a += W[i, j] * hs[t, j]
            hs[t + 1, i] = math.tanh(a)
        loss += hs[t + 1, 0] * hs[t + 1, 0]
    return loss


def restore_under_continue(x, a):
    """Element writes under a `continue` guard: restoring them in the reverse sweep needs the
    guard's value per trip (found by the fuzzer)."""
    m = a.shape[0]
    s1 = math.cos(a[m - 1]) * x
    s0 = 1.05 + 0.1 * math.sin(s1)
    for i1 in range(m):
        if i1 != 1:
            continue
        a[i1] -= 0.25 * i1
    for i2 in range(1, 3):
        s1 = a[(i2 + 1) % m] * x
    return s0 + s1


def loop_var_reused(w, d):
    """Consecutive loops over the same name stay range loops (no per-trip index tape)."""
    s = 0.0
    for j in range(d):
        s += w[j] * w[j]
    t = 0.0
    for j in range(d):
        t += s * w[j]
    return t


def loop_var_shadowed(w, d):
    """An inner loop rebinding the outer loop's name: after it, j is the inner's last value."""
    s = 0.0
    for j in range(d):
        for j in range(2):
            s += w[j]
        s += w[j] * 2.0
    return s


def loop_var_leaks(w, d):
    s = 0.0
    for j in range(d):
        s += w[j]
    for k in range(d):
        s += w[k] * 0.5
    return s * w[j]
