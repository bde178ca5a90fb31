"""Array zoo: ufuncs with broadcasting, reductions with axis/keepdims, dot/@/outer, views,
constructors, slices (negative, open, stepped), slice writes, whole-array augmented
assignment, 3-D arrays and float32 inputs."""
import numpy as np


def _rng(seed):
    return np.random.default_rng(seed)


def ufunc_broadcast(x, a, B):
    col = np.sum(B, axis=1).reshape(B.shape[0], 1)
    C = x * B + a + col * 0.5 - B / (1.0 + a * a)
    return np.sum(C * C) + np.sum(2.0 - x * a)


def row_plus_column(r, c):
    M = r.reshape(1, r.shape[0]) + c.reshape(c.shape[0], 1)
    return np.sum(np.sin(M) * M)


def np_unary(a):
    t = np.sqrt(a) + np.exp(-a) + np.log(a) * np.sin(a) - np.cos(a) * np.tanh(a)
    return np.sum(t + np.abs(a - 1.0))


def np_binary_ufuncs(a, b):
    return np.sum(np.arctan2(a, b) * np.power(a, 2) + np.log1p(a * a) * np.expm1(0.3 * b))


def np_minmax_clip_where(a, b):
    m = np.minimum(a, b) + np.maximum(a, 0.5 * b)
    c = np.clip(a * b, -0.3, 0.4)
    w = np.where(a > b, a * a, b - a)
    return np.sum(m * c + w)


def reductions_axis(A):
    s0 = np.sum(A, axis=0)
    s1 = np.mean(A, axis=1, keepdims=True)
    p = np.prod(A, axis=1)
    mx = np.max(A, axis=0)
    mn = np.min(A, axis=1, keepdims=True)
    sd = np.std(A, axis=0)
    vr = np.var(A, axis=1, keepdims=True)
    return np.sum(s0 * mx) + np.sum(s1 * mn) + np.sum(p) + np.sum(sd) + np.sum(vr * A)


def reductions_full(a):
    return np.sum(a) * np.mean(a) + np.prod(a) + np.max(a) - 2.0 * np.min(a) + np.std(a) \
        + np.var(a)


def reductions_3d(T):
    a = np.sum(T, axis=2)
    b = np.mean(T, axis=0, keepdims=True)
    c = np.max(T, axis=1)
    d = np.sum(T, axis=-1, keepdims=True)
    return np.sum(a * a) + np.sum(T * b) + np.sum(np.exp(c)) + np.sum(d * T)


def method_reductions(A):
    # method forms that real code reaches for: .sum(), .mean(axis=...), .max(), .T, .copy()
    B = A.copy()
    return B.sum() * A.mean() + A.T.sum() + (A * A).sum(axis=1).max() + A.mean(axis=0).min()


def dot_matmul(A, B, x):
    y = A @ x
    C = A @ B
    z = A[:, 1:] @ x[1:]
    w = np.dot(x, x) + np.dot(A, x)
    v = y @ A
    return np.sum(y * z) + np.sum(C * C) + np.sum(w) + np.dot(y, w) + np.sum(v * x)


def outer_flip_T_reshape(a, b):
    O = np.outer(a, b)
    F = np.flip(b)
    R = O.T.reshape(2, 6)
    S = O.reshape(12)
    return np.sum(R * R * R) + np.dot(F, b * b) + np.sum(S * np.flip(S)) + np.sum(O.T @ a)


def constructors(a, n):
    z = np.zeros(n)
    o = np.ones((n, n))
    e = np.empty(n)
    f = np.full(n, 2.5)
    I = np.eye(n)
    zl = np.zeros_like(a)
    ol = np.ones_like(a)
    el = np.empty_like(a)
    fl = np.full_like(a, 0.5)
    for i in range(n):
        e[i] = a[i] * i
        el[i] = a[i] ** 2
        z[i] = a[(i + 1) % n]
    zl += a * 3.0
    M = I * a + o * 0.1
    return np.sum(M @ a) + np.sum(z * e) + np.sum(f * el) + np.sum((zl + ol) * fl * a) \
        + a.shape[0] + len(a)


def shape_len_copy(A):
    m, n = A.shape
    B = A.copy()
    B[0, 0] = 2.0 * B[0, 0]
    s = 0.0
    for i in range(m):
        for j in range(n):
            s += B[i, j] * A[i, j] / (len(A) + j)
    return s


def slices_neg_open(A, y):
    a = A[1:-1, :-2]
    b = y[:, -1]
    c = A[-2, 1:]
    s = np.sum(a * a) + np.dot(b, A[1:5, 0]) + np.sum(c * A[0, :-1])
    for i in range(3):
        s += np.sum(A[i, :i + 1]) * A[i + 1, i]
    return s + np.sum(y[-1, :] * y[0, :])


def stepped_slices(a, M):
    e = a[::2]
    o = a[1::2]
    r = a[::-1]
    return np.sum(e * o) + np.sum(r * a) + np.sum(M[::2, 1] * M[1:3, 0])


def slice_assign(u, r):
    v = u.copy()
    v[1:-1] += r * (u[2:] - 2.0 * u[1:-1] + u[:-2])
    v[0] = v[-1]
    v[2:4] = u[:2] * 3.0
    w = np.zeros(u.shape[0])
    w[:] = v * v
    w[1:] -= 0.5 * w[:-1]
    return np.sum(w)


def slice_assign_2d(A, x):
    M = np.zeros((A.shape[0], A.shape[1] + 1))
    M[:, 0] = x
    M[:, 1:] = A
    M[1, :] *= 2.0
    M[:, -1] += x * x
    M[0, 1:3] = M[2, 0:2]
    return np.sum(M * M) + np.sum(M[:, 1:] * A)


def array_augassign(a, b):
    c = a.copy()
    c += b
    c -= 0.5 * a
    c *= b
    c /= 1.0 + a * a
    return np.sum(c * c)


def mutate_input_slices(u, c):
    # in-place slice updates of the caller's array: gradient w.r.t. the entry values of u
    u[1:] = u[1:] * c + u[:-1]
    u *= u
    u[:2] -= 1.0
    return np.sum(np.sin(u))


def float32_fn(a, x):
    # a is float32: its gradient must be float32 (tolerance rtol 2e-5, see tests/oracle.py)
    return np.sum(np.sin(a) * a) * x + np.sum(a * a)


def float32_loop(A, w):
    s = 0.0
    for i in range(A.shape[0]):
        t = 0.0
        for j in range(A.shape[1]):
            t += A[i, j] * w[j]
        s += t * t
    return s


def three_d_elementwise(T, v):
    U = T * v + np.tanh(T)
    s = 0.0
    for i in range(T.shape[0]):
        s += np.sum(U[i] * U[i]) * (i + 1)
    return s + np.sum(U[:, 1, :] * T[:, 0, :])


CASES = [
    (ufunc_broadcast, lambda: (0.7, _rng(31).normal(size=4), _rng(32).normal(size=(3, 4))),
     None),
    (row_plus_column, lambda: (_rng(33).normal(size=4), _rng(34).normal(size=3)), None),
    (np_unary, lambda: (np.array([0.3, 0.7, 1.4, 2.2, 0.5]),), None),
    (np_minmax_clip_where,
     lambda: (np.array([0.6, -0.5, 0.9, 0.2, -0.7]), np.array([0.3, 0.4, 1.5, -0.8, -0.2])),
     None),
    (np_binary_ufuncs, lambda: (_rng(61).normal(size=5), _rng(62).normal(size=5)), None),
    (reductions_axis, lambda: (_rng(35).uniform(0.5, 1.5, size=(3, 4)),), None),
    (reductions_full, lambda: (_rng(36).uniform(0.5, 1.5, size=6),), None),
    (reductions_3d, lambda: (_rng(37).normal(size=(2, 3, 4)),), None),
    (method_reductions, lambda: (_rng(38).normal(size=(3, 4)),), None),
    (dot_matmul, lambda: (_rng(39).normal(size=(3, 4)), _rng(40).normal(size=(4, 2)),
                          _rng(41).normal(size=4)), None),
    (outer_flip_T_reshape, lambda: (_rng(42).normal(size=3), _rng(43).normal(size=4)), None),
    (constructors, lambda: (_rng(44).normal(size=4), 4), None),
    (shape_len_copy, lambda: (_rng(45).normal(size=(3, 4)),), None),
    (slices_neg_open, lambda: (_rng(46).normal(size=(5, 6)), _rng(47).normal(size=(4, 5))),
     None),
    (stepped_slices, lambda: (_rng(48).normal(size=6), _rng(49).normal(size=(4, 3))), None),
    (slice_assign, lambda: (_rng(50).normal(size=7), 0.3), None),
    (slice_assign_2d, lambda: (_rng(51).normal(size=(3, 4)), _rng(52).normal(size=3)), None),
    (array_augassign, lambda: (_rng(53).normal(size=5), _rng(54).normal(size=5)), None),
    (mutate_input_slices, lambda: (_rng(55).normal(size=5), 0.8), None),
    (float32_fn, lambda: (_rng(56).normal(size=5).astype(np.float32), 1.3), None),
    (float32_loop, lambda: (_rng(57).normal(size=(3, 4)).astype(np.float32),
                            _rng(58).normal(size=4).astype(np.float32)), None),
    (three_d_elementwise, lambda: (_rng(59).normal(size=(2, 3, 4)), _rng(60).normal(size=4)),
     None),
]
