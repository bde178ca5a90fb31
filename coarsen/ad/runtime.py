"""Runtime helpers written into every generated module (they travel with exported code).

Requires: nothing.
Guarantees: ``helper_source(names)`` returns the Python source of the requested helpers and
of those they call (fixed helpers by name; helpers generated per parameters are requested
through ``sum_to``, ``pop_array``, ``reduce_axis``... which return the name and record how to
build it, so no name is parsed back), in a fixed order, so generated modules are deterministic and need only
``math``, NumPy and Numba.  Tapes are typed NumPy buffers (float64 values, int64 control
data) that grow geometrically; ``_grow`` refuses sizes beyond ``MAX_TAPE_BYTES`` with a
``MemoryError`` before allocating.  Matrix products are written as loops: they accept any
memory layout (slices, transposes) and need no BLAS.  ``_cumsum2``/``_rcumsum*`` and
``_diff_adj*`` are the loops of ``np.cumsum``/``np.diff`` along an axis and their adjoints;
``_solve*`` solve by Gaussian elimination with partial pivoting (as LAPACK's ``gesv``; Numba's
``np.linalg`` would need SciPy), raising ``np.linalg.LinAlgError`` at an exactly zero pivot; ``_ein_<a>_<b>__<out>``
(``einsum_helper_name``) is a loop nest generated per ``np.einsum`` spec (Numba has none).
``_unbound_<name>`` (``unbound_error``) raises Python's ``UnboundLocalError`` for a read of the
source variable ``name`` before any assignment (``coarsen.frontend.unbound``).
``_add_scaledN`` (``X += a * Y``, one shape) and ``_red_adj_<op>_N_A`` (the adjoint of
``max``/``min`` along an axis) are loops where the array expressions they replace, with the
same operations and bits, cost Numba seconds of compilation each.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

MAX_TAPE_BYTES = 8 * 1024 ** 3

_SOURCES = {
    "_grow": f'''
def _grow(tape, need):
    size = max(tape.shape[0] * 2, need)
    if size * 8 > {MAX_TAPE_BYTES}:
        raise MemoryError("coarsen: the tape would exceed {MAX_TAPE_BYTES // 1024 ** 3} GiB; use fewer loop trips")
    out = np.empty(size, tape.dtype)
    out[:tape.shape[0]] = tape
    return out
''',
    "_reserve": '''
def _reserve(tape, need):
    if need > tape.shape[0]:
        return _grow(tape, need)
    return tape
''',
    # a scratch array of the reverse sweep carved from the float tape above ``top``, at the
    # next 64-byte boundary (``coarsen.ad.reverse.scratch``): where the tape must grow, to the
    # size needed (no doubling, no tape cap: it is an array the code allocated before), its
    # entries below ``top`` kept
    "_scratch_zeros": '''
def _scratch_zeros(tape, top, shape, size):
    tape, start = _scratch_at(tape, top, size)
    flat = tape[start:start + size]
    flat[:] = 0.0
    return tape, flat.reshape(shape), start + size
''',
    "_scratch_empty": '''
def _scratch_empty(tape, top, shape, size):
    tape, start = _scratch_at(tape, top, size)
    return tape, tape[start:start + size].reshape(shape), start + size
''',
    "_scratch_at": '''
def _scratch_at(tape, top, size):
    if top + size + 8 > tape.shape[0]:
        grown = np.empty(top + size + 8)
        grown[:top] = tape[:top]
        tape = grown
    misaligned = (np.int64(tape.ctypes.data) + 8 * top) & 63
    return tape, top + ((64 - misaligned) & 63) // 8
''',
    "_push": '''
def _push(tape, pos, value):
    if pos >= tape.shape[0]:
        tape = _grow(tape, pos + 1)
    tape[pos] = value
    return tape, pos + 1
''',
    "_push_array": '''
def _push_array(tape, pos, a):
    flat = a.ravel()
    n = flat.shape[0]
    if pos + n > tape.shape[0]:
        tape = _grow(tape, pos + n)
    tape[pos:pos + n] = flat
    return tape, pos + n
''',
    "_range_len": '''
def _range_len(start, stop, step):
    if step > 0:
        if stop <= start:
            return 0
        return (stop - start + step - 1) // step
    if stop >= start:
        return 0
    return (start - stop - step - 1) // (-step)
''',
    # an index check inside a parallel loop (coarsen.ad.reverse.parallel): Numba runs a
    # prange loop whose body raises serially, but not one whose body calls a helper that does
    "_index_error": '''
def _index_error(message):
    raise IndexError(message)
''',
    # binomial (revolve) checkpointing, coarsen.ad.reverse.revolve: beta(s, r) = C(s + r, s)
    # steps can be reversed with s snapshots and at most r advances of each step
    "_revolve_reps": '''
def _revolve_reps(t, s):
    r = 0
    beta = 1
    while beta < t:
        r += 1
        beta = beta * (s + r) // r
    return r, beta
''',
    "_revolve_advances": '''
def _revolve_advances(t, s):
    r, beta = _revolve_reps(t, s)
    return r * t - beta * r // (s + 1)
''',
    "_revolve_mid": '''
def _revolve_mid(t, s):
    r, beta = _revolve_reps(t, s)
    left = beta * r // (s + r)
    right = beta * s // (s + r) * r // (s + r - 1)
    return min(t - 1, left, t - right)
''',
    "_revolve_units": '''
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
''',
    # slices and broadcasting as NumPy computes them, for the loop nests of
    # coarsen.ir.scalarize (a missing bound is passed as +-2**62, which clips as None does)
    "_slice_start": '''
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
''',
    "_slice_len": '''
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
''',
    "_bcast_len": '''
def _bcast_len(a, b):
    if a == 1:
        return b
    if b == 1 or a == b:
        return a
    raise ValueError("operands could not be broadcast together (coarsen: an element-wise array expression)")
''',
    "_bcast_stride": '''
def _bcast_stride(e, n):
    if e == n:
        return 1
    if e == 1:
        return 0
    raise ValueError("operands could not be broadcast together (coarsen: an element-wise array expression)")
''',
    "_same_len": '''
def _same_len(a, b):
    if a != b:
        raise ValueError("matmul/dot: shapes not aligned (the lengths differ)")
    return a
''',
    # a custom rule's result checked against the shape it must have: shapes a and b
    # (coarsen.ir.primitives.custom)
    "_custom_shape": '''
def _custom_shape(v, a, b, message):
    if a != b:
        raise ValueError(message)
    return v
''',
    # an int divisor of // or %: Python raises where it is 0; Numba's numpy error model
    # would give 0 (coarsen.ir.primitives.elementwise)
    "_int_divisor": '''
def _int_divisor(b):
    if b == 0:
        raise ZeroDivisionError("integer division or modulo by zero")
    return b
''',
    "_range_cont": '''
def _range_cont(i, stop, step):
    if step > 0:
        return i < stop
    return i > stop
''',
    "_mm22": '''
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
''',
    "_mm21": '''
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
''',
    "_mm12": '''
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
''',
    "_mm11": '''
def _mm11(x, y):
    if y.shape[0] != x.shape[0]:
        raise ValueError('matmul/dot: shapes not aligned (the inner dimensions differ)')
    s = 0.0
    for p in range(x.shape[0]):
        s += x[p] * y[p]
    return s
''',
    "_outer": '''
def _outer(x, y):
    out = np.empty((x.shape[0], y.shape[0]))
    for i in range(x.shape[0]):
        for j in range(y.shape[0]):
            out[i, j] = x[i] * y[j]
    return out
''',
    "_prod_grad": '''
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
''',
    "_cumsum2": '''
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
''',
    "_rcumsum1": '''
def _rcumsum1(g):
    n = g.shape[0]
    out = np.empty(n)
    acc = 0.0
    for i in range(n - 1, -1, -1):
        acc += g[i]
        out[i] = acc
    return out
''',
    "_rcumsum2": '''
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
''',
    "_diff_adj1": '''
def _diff_adj1(g, shape):
    n = g.shape[0]
    out = np.zeros(shape[0])
    for i in range(n):
        out[i] -= g[i]
        out[i + 1] += g[i]
    return out
''',
    "_diff_adj2": '''
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
''',
    "_solve2": '''
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
''',
    "_solve1": '''
def _solve1(a, b):
    bb = np.empty((b.shape[0], 1))
    for i in range(b.shape[0]):
        bb[i, 0] = b[i]
    return _solve2(a, bb)[:, 0].copy()
''',
    "_solve_adj_b1": '''
def _solve_adj_b1(a, g):
    return _solve1(a.T, g)
''',
    "_solve_adj_b2": '''
def _solve_adj_b2(a, g):
    return _solve2(a.T, g)
''',
    "_solve_adj_a1": '''
def _solve_adj_a1(a, b, g):
    x = _solve1(a, b)
    gb = _solve1(a.T, g)
    return -_outer(gb, x)
''',
    "_solve_adj_a2": '''
def _solve_adj_a2(a, b, g):
    x = _solve2(a, b)
    gb = _solve2(a.T, g)
    return -_mm22(gb, x.T)
''',
}

_DEPS = {"_push": ("_grow",), "_push_array": ("_grow",), "_reserve": ("_grow",),
         "_scratch_zeros": ("_scratch_at",), "_scratch_empty": ("_scratch_at",),
         "_solve1": ("_solve2",), "_solve_adj_b1": ("_solve1",), "_solve_adj_b2": ("_solve2",),
         "_solve_adj_a1": ("_solve1", "_outer"), "_solve_adj_a2": ("_solve2", "_mm22"),
         "_slice_len": ("_slice_start",), "_revolve_advances": ("_revolve_reps",),
         "_revolve_mid": ("_revolve_reps",), "_revolve_units": ("_revolve_advances",)}


def _sum_to_source(gnd, tnd):
    """_sum_to_G_T(g, shape): sum a G-D adjoint over the axes NumPy broadcast to reach a T-D
    operand of the given shape."""
    lines = [f"def _sum_to_{gnd}_{tnd}(g, shape):"]
    cur = "g"
    nd = gnd
    k = 0
    while nd > tnd:
        k += 1
        lines.append(f"    s{k} = np.sum({cur}, axis=0)")
        cur = f"s{k}"
        nd -= 1
    if tnd == 0:
        lines.append(f"    return {cur}")
        return "\n".join(lines) + "\n"
    # a fresh array: the caller may zero the adjoint region it was given
    lines.append(f"    out = {cur}.copy()" if cur == "g" else f"    out = np.ascontiguousarray({cur})")
    for ax in range(tnd):
        keep = ", ".join(f"out.shape[{d}]" if d != ax else "1" for d in range(tnd))
        lines.append(f"    if shape[{ax}] == 1 and out.shape[{ax}] != 1:")
        if tnd == 1:
            lines.append("        out = np.full((1,), np.sum(out))")
        else:
            lines.append(f"        out = np.sum(out, axis={ax}).reshape(({keep},))")
    lines.append("    return out")
    return "\n".join(lines) + "\n"


def _add_scaled_source(nd):
    """_add_scaledN(out, a, x): ``out += a * x`` for two N-D arrays of one shape, as a loop."""
    idx = ", ".join(f"i{d}" for d in range(nd))
    lines = [f"def _add_scaled{nd}(out, a, x):",
             "    if out.shape != x.shape:",
             "        raise ValueError('coarsen: an adjoint accumulator of another shape')"]
    pad = "    "
    for d in range(nd):
        lines.append(f"{pad}for i{d} in range(out.shape[{d}]):")
        pad += "    "
    lines.append(f"{pad}out[{idx}] += a * x[{idx}]")
    return "\n".join(lines) + "\n"


def _pop_array_source(nd):
    dims = ", ".join(f"itape[ipos + {d}]" for d in range(nd))
    return f'''
def _pop_array{nd}(ftape, fpos, itape, ipos):
    ipos -= {nd}
    shape = ({dims},)
    n = 1
    for d in shape:
        n *= d
    fpos -= n
    return ftape[fpos:fpos + n].copy().reshape(shape), fpos, ipos
'''


def _pop_into_source(nd):
    idx = ", ".join(f"i{d}" for d in range(nd))
    loops = []
    for d in range(nd):
        loops.append("    " * (d + 1) + f"for i{d} in range(view.shape[{d}]):")
    body = "    " * (nd + 1) + f"view[{idx}] = tape[pos]\n" + "    " * (nd + 1) + "pos += 1"
    return (f"\ndef _pop_into{nd}(tape, pos, view):\n    pos -= view.size\n    start = pos\n"
            + "\n".join(loops) + "\n" + body + "\n    return start\n")


def _fiber_loops(nd, ax, body, out_idx=True):
    """Loops over every index except ``ax``; ``body`` lines see i0.. and the fiber axis as k."""
    others = [d for d in range(nd) if d != ax]
    lines = []
    for depth, d in enumerate(others):
        lines.append("    " * (depth + 1) + f"for i{d} in range(a.shape[{d}]):")
    pad = "    " * (len(others) + 1)
    for b in body:
        lines.append(pad + b)
    return lines


def _at(nd, ax, k):
    return "a[" + ", ".join(k if d == ax else f"i{d}" for d in range(nd)) + "]"


def _reduce_source(op, nd, ax):
    """_red_<op>_<nd>_<ax>(a): max/min/prod of an nd-array along axis ax (Numba lacks axis=)."""
    out_shape = ", ".join(f"a.shape[{d}]" for d in range(nd) if d != ax)
    oidx = ", ".join(f"i{d}" for d in range(nd) if d != ax)
    if op == "prod":
        body = ["acc = 1.0", f"for k in range(a.shape[{ax}]):", f"    acc *= {_at(nd, ax, 'k')}",
                f"out[{oidx}] = acc"]
    else:
        cmp = ">" if op == "amax" else "<"
        body = [f"acc = {_at(nd, ax, '0')}", f"for k in range(1, a.shape[{ax}]):",
                f"    v = {_at(nd, ax, 'k')}", f"    if v {cmp} acc or v != v:", "        acc = v",
                f"out[{oidx}] = acc"]
    lines = [f"def _red_{op}_{nd}_{ax}(a):", f"    out = np.empty(({out_shape},))"]
    if op != "prod":        # NumPy's error: a fiber's first element would be read past the end
        name = "maximum" if op == "amax" else "minimum"
        lines += [f"    if a.shape[{ax}] == 0:",
                  f"        raise ValueError('zero-size array to reduction operation {name} which "
                  "has no identity')"]
    lines += _fiber_loops(nd, ax, body)
    lines.append("    return out")
    return "\n".join(lines) + "\n"


def _reduce_adjoint_source(op, nd, ax, keep):
    """_red_adj_<op>_<nd>_<ax>[_k](a, g): the adjoint of max/min along axis ax, ``g`` shared
    evenly by the ties of each fiber (as JAX), with ``g`` shaped like the reduction (``keep``:
    with the axis kept, of length 1).  The operations of ``mask * (g / count)``: the same bits."""
    cmp = ">" if op == "amax" else "<"
    gidx = ", ".join(("0" if keep else None) if d == ax else f"i{d}" for d in range(nd)
                     if d != ax or keep)
    oat = _at(nd, ax, "k").replace("a[", "out[", 1)
    body = [f"acc = {_at(nd, ax, '0')}", f"for k in range(1, a.shape[{ax}]):",
            f"    v = {_at(nd, ax, 'k')}", f"    if v {cmp} acc or v != v:", "        acc = v",
            "cnt = 0.0", f"for k in range(a.shape[{ax}]):", f"    if {_at(nd, ax, 'k')} == acc:",
            "        cnt += 1.0", f"q = g[{gidx}] / cnt", f"for k in range(a.shape[{ax}]):",
            f"    {oat} = (1.0 if {_at(nd, ax, 'k')} == acc else 0.0) * q"]
    name = f"_red_adj_{op}_{nd}_{ax}" + ("_k" if keep else "")
    lines = [f"def {name}(a, g):", "    out = np.empty(a.shape)",
             f"    if a.shape[{ax}] == 0:",
             "        raise ValueError('zero-size array to reduction operation which has no identity')"]
    lines += _fiber_loops(nd, ax, body)
    lines.append("    return out")
    return "\n".join(lines) + "\n"


def _prod_grad_axis_source(nd, ax):
    """_prod_grad_<nd>_<ax>(a): d prod(a, axis=ax) / d a, exact with zeros (no division)."""
    body = [f"n = a.shape[{ax}]", "acc = 1.0", "for k in range(n):",
            f"    out[{', '.join('k' if d == ax else f'i{d}' for d in range(nd))}] = acc",
            f"    acc *= {_at(nd, ax, 'k')}", "acc = 1.0", "for k in range(n - 1, -1, -1):",
            f"    out[{', '.join('k' if d == ax else f'i{d}' for d in range(nd))}] *= acc",
            f"    acc *= {_at(nd, ax, 'k')}"]
    lines = [f"def _prod_grad_{nd}_{ax}(a):", "    out = np.empty(a.shape)"]
    lines += _fiber_loops(nd, ax, body)
    lines.append("    return out")
    return "\n".join(lines) + "\n"


def einsum_helper_name(a, b, out):
    """The runtime helper computing ``np.einsum(f"{a},{b}->{out}", x, y)`` (letters only, each
    at most once per operand); it takes a third argument, the output's shape, when ``out``
    has letters that neither operand has (the VJP of an operand summed over its own axes)."""
    return f"_ein_{a}_{b}__{out}"


def _einsum_source(a, b, out):
    """Loops over every letter: ``out[o] += x[a] * y[b]``; checks shared letters' lengths."""
    fname = einsum_helper_name(a, b, out)
    free = [c for c in out if c not in a and c not in b]
    lines = [f"def {fname}(x, y{', shape' if free else ''}):"]
    size = {}
    for opname, spec in (("x", a), ("y", b)):
        for k, c in enumerate(spec):
            dim = f"{opname}.shape[{k}]"
            if c in size:
                lines.append(f"    if {dim} != {size[c]}:")
                lines.append(f"        raise ValueError('einsum: operands disagree on the length "
                             f"of the index {c}')")
            else:
                size[c] = f"n_{c}"
                lines.append(f"    n_{c} = {dim}")
    for k, c in enumerate(out):
        if c in free:
            size[c] = f"n_{c}"
            lines.append(f"    n_{c} = shape[{k}]")
    if out:
        lines.append(f"    out = np.zeros(({''.join(f'n_{c}, ' for c in out)}))")
    else:
        lines.append("    out = 0.0")
    letters = list(dict.fromkeys(out + a + b))
    pad = "    "
    for c in letters:
        lines.append(f"{pad}for {c}_ in range(n_{c}):")
        pad += "    "

    def at(opname, spec):
        return f"{opname}[{', '.join(c + '_' for c in spec)}]" if spec else opname

    target = at("out", out)
    lines.append(f"{pad}{target} += {at('x', a)} * {at('y', b)}")
    lines.append("    return out")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Generated:
    """A runtime helper generated for parameters: its name, and the source builder and
    arguments that produce it (requested through ``sum_to``, ``pop_array``, ``pop_into``,
    ``reduce_axis``, ``prod_grad_axis``, ``einsum``; never parsed back from the name)."""
    name: str
    build: Callable
    args: tuple

    def source(self):
        return self.build(*self.args)


_GENERATED: dict = {}     # name -> Generated (a name always stands for the same arguments)


def _generated(name, build, args):
    g = Generated(name, build, tuple(args))
    known = _GENERATED.setdefault(name, g)
    if known != g:  # pragma: no cover - names are built from all their arguments
        raise ValueError(f"runtime helper {name!r} requested with two meanings")
    return name


def sum_to(gnd, tnd):
    """``_sum_to_G_T``: sum a G-D adjoint over broadcast axes down to a T-D operand."""
    return _generated(f"_sum_to_{gnd}_{tnd}", _sum_to_source, (gnd, tnd))


def add_scaled(nd):
    """``_add_scaledN``: ``out += a * x`` for N-D arrays of one shape, one loop nest."""
    return _generated(f"_add_scaled{nd}", _add_scaled_source, (nd,))


def pop_array(nd):
    """``_pop_arrayN``: pop an N-D array (with its shape) off the tapes."""
    return _generated(f"_pop_array{nd}", _pop_array_source, (nd,))


def pop_into(nd):
    """``_pop_intoN``: pop an N-D region into the array part it was saved from."""
    return _generated(f"_pop_into{nd}", _pop_into_source, (nd,))


def reduce_axis(op, nd, ax):
    """``_red_<op>_N_A``: ``prod``/``amax``/``amin`` of an N-D array along axis A."""
    return _generated(f"_red_{op}_{nd}_{ax}", _reduce_source, (op, nd, ax))


def reduce_adjoint(op, nd, ax, keep):
    """``_red_adj_<op>_N_A[_k]``: the adjoint of ``amax``/``amin`` along axis A of an N-D array."""
    return _generated(f"_red_adj_{op}_{nd}_{ax}" + ("_k" if keep else ""), _reduce_adjoint_source,
                      (op, nd, ax, keep))


def prod_grad_axis(nd, ax):
    """``_prod_grad_N_A``: the gradient of a product along axis A, division-free."""
    return _generated(f"_prod_grad_{nd}_{ax}", _prod_grad_axis_source, (nd, ax))


def _unbound_source(name):
    message = f"cannot access local variable {name!r} where it is not associated with a value"
    return f'''
def {unbound_error(name)}(bound):
    if not bound:
        raise UnboundLocalError({message!r})
    return True
'''


def unbound_error(name):
    """``_unbound_<name>``: raise Python's ``UnboundLocalError`` for the source variable
    ``name`` unless its flag ``bound`` is set (``coarsen.frontend.unbound``)."""
    return _generated(f"_unbound_{name}", _unbound_source, (name,))


def einsum(a, b, out):
    """The loop nest of ``np.einsum(f"{a},{b}->{out}", x, y)`` (see ``einsum_helper_name``)."""
    return _generated(einsum_helper_name(a, b, out), _einsum_source, (a, b, out))


def helper_source(names):
    """Source of the named helpers plus their dependencies, deterministic order."""
    want = set()

    def add(n):
        if n in want:
            return
        want.add(n)
        for d in _DEPS.get(n, ()):
            add(d)

    for n in names:
        add(n)
    out = []
    for n in sorted(want):
        if n in _SOURCES:
            out.append(_SOURCES[n].strip("\n"))
        else:
            out.append(_GENERATED[n].source().strip("\n"))     # KeyError: never requested
    return "\n\n\n".join(out) + "\n"
