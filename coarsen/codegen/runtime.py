"""Runtime helpers written into every generated module (they travel with exported code).

Requires: nothing of coarsen (the bottom code-generation layer); the fixed helpers are the
functions of ``coarsen.codegen.helpers`` and ``coarsen.codegen.helpers_nd``.
Guarantees: ``helper_source(names)`` returns the Python source of the requested helpers and
of those they call (fixed helpers by name, their text as written in ``helpers``, and what they
call read from their code; helpers generated per parameters are requested
through ``sum_to``, ``pop_array``, ``reduce_axis``... which return the name and record how to
build it, so no name is parsed back), in a fixed order, so generated modules are deterministic and need only
``math``, NumPy and Numba.  Tapes are typed NumPy buffers (float64 values, int64 control
data) that grow geometrically; ``_grow`` refuses sizes beyond ``MAX_TAPE_BYTES`` with a
``MemoryError`` before allocating.  Matrix products are loops (``_mm*``: any dtype, any
memory layout) and, for float64 operands, ``_bmm*``: the loops below the crossover sizes, BLAS
(Numba's ``np.dot``, through SciPy) at and above them.  ``_cumsum2``/``_rcumsum*`` and
``_diff_adj*`` are the loops of ``np.cumsum``/``np.diff`` along an axis and their adjoints;
``_solve*`` solve by Gaussian elimination with partial pivoting (as LAPACK's ``gesv``; Numba's
``np.linalg`` would need SciPy), raising ``np.linalg.LinAlgError`` at an exactly zero pivot; ``_ein_<a>_<b>__<out>``
(``einsum_loops``) is a loop nest generated per ``np.einsum`` spec (Numba has none).
``_unbound_<name>`` (``unbound_error``) raises Python's ``UnboundLocalError`` for a read of the
source variable ``name`` before any assignment (``coarsen.frontend.unbound``);
``_check_<exc>_<digest>`` (``check_error``) raises ``AssertionError`` or ``ValueError`` with a
constant message where its flag is False (``assert``; NumPy's checks of its arguments).
``_add_scaledN`` (``X += a * Y``, one shape) and ``_red_adj_<op>_N_A`` (the adjoint of
``max``/``min`` along an axis) are loops where the array expressions they replace, with the
same operations and bits, cost Numba seconds of compilation each.
"""
from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass

from .building_loops import along_name, along_source, kron_name, kron_source
from .einsum_loops import einsum_name, einsum_source
from .gather_loops import gather_name, gather_source, scatter_name, scatter_source
from .helpers import HELPERS as BASE_HELPERS
from .helpers_lists import LIST_HELPERS
from .helpers_nd import ND_HELPERS
from .helpers_numpy import NUMPY_HELPERS
from .region_loops import region_name, region_source

HELPERS = {**BASE_HELPERS, **ND_HELPERS, **NUMPY_HELPERS,     # every fixed helper, by name
           **LIST_HELPERS}


def fixed_source(name):
    """The source of the fixed helper ``name`` (``coarsen.codegen.helpers``), as written there."""
    return inspect.getsource(HELPERS[name])


def calls(name):
    """The fixed helpers that the helper ``name`` calls (read from its code, not declared)."""
    return tuple(sorted(n for n in HELPERS[name].__code__.co_names if n in HELPERS and n != name))


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


def _scaled_source(name, nd, update):
    """``name(out, a, x)``: ``out[i...] <update> a * x[i...]`` for two N-D arrays of one shape, as
    a loop (``update``: ``+=``, or ``= 0.0 +``)."""
    idx = ", ".join(f"i{d}" for d in range(nd))
    lines = [f"def {name}(out, a, x):",
             "    if out.shape != x.shape:",
             "        raise ValueError('coarsen: an adjoint accumulator of another shape')"]
    pad = "    "
    for d in range(nd):
        lines.append(f"{pad}for i{d} in range(out.shape[{d}]):")
        pad += "    "
    lines.append(f"{pad}out[{idx}] {update} a * x[{idx}]")
    return "\n".join(lines) + "\n"


def _add_scaled_source(nd):
    """_add_scaledN(out, a, x): ``out += a * x`` for two N-D arrays of one shape, as a loop."""
    return _scaled_source(f"_add_scaled{nd}", nd, "+=")


def _set_scaled_source(nd):
    """_set_scaledN(out, a, x): ``out = 0.0 + a * x`` into an N-D array of ``x``'s shape (the
    value ``np.zeros`` then ``_add_scaledN`` give, bit for bit), as a loop."""
    return _scaled_source(f"_set_scaled{nd}", nd, "= 0.0 +")


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


def _pop_shape_source(nd):
    dims = ", ".join(f"itape[ipos + {d}]" for d in range(nd))
    return f'''
def _pop_shape{nd}(itape, ipos):
    ipos -= {nd}
    return np.empty(({dims},)), ipos
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
        # four lanes (element k in lane k % 4, the lanes combined in order): four chains of
        # comparisons where one chain ran through the fiber.  The extremum is one value, so
        # the bits are the one-chain loop's except for a zero (-0.0 and 0.0 tie: the first in
        # the fiber wins) or a NaN (the last NaN's bits): for those, and below eight elements,
        # the one-chain loop runs
        cmp = ">" if op == "amax" else "<"

        def pick(v, m):
            return f"{m} = {v} if ({v} {cmp} {m}) | ({v} != {v}) else {m}"

        body = [f"n = a.shape[{ax}]", f"acc = {_at(nd, ax, '0')}", "if n >= 8:", "    m0 = acc"]
        body += [f"    m{j} = {_at(nd, ax, str(j))}" for j in (1, 2, 3)]
        body += ["    e = n - n % 4", "    for k in range(4, e, 4):"]
        body += [f"        v{j} = {_at(nd, ax, f'k + {j}' if j else 'k')}" for j in range(4)]
        body += [f"        {pick(f'v{j}', f'm{j}')}" for j in range(4)]
        body += ["    for k in range(e, n):", f"        v0 = {_at(nd, ax, 'k')}",
                 f"        {pick('v0', 'm0')}", "    acc = m0"]
        body += [f"    {pick(f'm{j}', 'acc')}" for j in (1, 2, 3)]
        body += ["if n < 8 or acc == 0.0 or acc != acc:", f"    acc = {_at(nd, ax, '0')}",
                 "    for k in range(1, n):", f"        v = {_at(nd, ax, 'k')}",
                 f"        if v {cmp} acc or v != v:", "            acc = v",
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


def _extremum_lanes(op, nd, ax):
    """Lines that set ``acc`` to the max/min of a fiber of ``n >= 8`` elements in four lanes
    (element k in lane k % 4): four independent chains of ``m = v if v > m else m`` (one
    max/min instruction, no test of NaN on the chain) where one chain of compares and
    branches ran through the fiber; and ``nan`` to whether the fiber holds a NaN, tested
    beside the chains.  Without a NaN, ``acc`` equals (``==``) the one-chain extremum (the
    sign of a zero may differ); with one, ``acc`` is meaningless."""
    cmp = ">" if op == "amax" else "<"
    lines = ["m0 = acc"] + [f"m{j} = {_at(nd, ax, str(j))}" for j in (1, 2, 3)]
    lines += ["nan = (m0 != m0) | (m1 != m1) | (m2 != m2) | (m3 != m3)", "e = n - n % 4",
              "for k in range(4, e, 4):"]
    lines += [f"    v{j} = {_at(nd, ax, f'k + {j}' if j else 'k')}" for j in range(4)]
    lines += [f"    m{j} = v{j} if v{j} {cmp} m{j} else m{j}" for j in range(4)]
    lines += ["    nan |= (v0 != v0) | (v1 != v1) | (v2 != v2) | (v3 != v3)",
              "for k in range(e, n):", f"    v0 = {_at(nd, ax, 'k')}",
              f"    m0 = v0 if v0 {cmp} m0 else m0", "    nan |= v0 != v0", "acc = m0"]
    lines += [f"acc = m{j} if m{j} {cmp} acc else acc" for j in (1, 2, 3)]
    return lines


def _reduce_adjoint_source(op, nd, ax, keep, add=False):
    """_red_adj_<op>_<nd>_<ax>[_k](a, g): the adjoint of max/min along axis ax, ``g`` shared
    evenly by the ties of each fiber (as JAX), with ``g`` shaped like the reduction (``keep``:
    with the axis kept, of length 1).  The operations of ``mask * (g / count)``: the same bits.
    ``add``: _red_adj_add_<op>_<nd>_<ax>[_k](out, a, g) adds that adjoint into ``out`` (``a``'s
    shape) in place, ``out[...] += mask * q``: the bits of ``out += _red_adj_...(a, g)``
    without the temporary array.  A fiber of 8 elements or more finds its extremum in four
    lanes (``_extremum_lanes``), then counts its ties in a pass without branches; a shorter
    one does both in one pass of compares and branches."""
    cmp = ">" if op == "amax" else "<"
    gidx = ", ".join(("0" if keep else None) if d == ax else f"i{d}" for d in range(nd)
                     if d != ax or keep)
    oat = _at(nd, ax, "k").replace("a[", "out[", 1)
    at_k = _at(nd, ax, "k")
    # the count is of the elements equal to the extremum, an integer (no floating-point add
    # chain through the fiber).  The output reads the extremum only through ``==``, where
    # 0.0 == -0.0, so the lanes' extremum gives the one chain's bits.  With a NaN the one
    # chain's extremum is the fiber's last NaN: it equals nothing, count 0 (as ``a == acc``
    # counts), and the fiber's first NaN gives the same bits.
    body = [f"n = a.shape[{ax}]", f"acc = {_at(nd, ax, '0')}", "cnt = 0", "if n >= 8:"]
    body += ["    " + line for line in _extremum_lanes(op, nd, ax)]
    body += ["    if nan:",
             "        for k in range(n):",
             f"            if {at_k} != {at_k}:",
             f"                acc = {at_k}",
             "                break",
             "    else:",
             "        for k in range(n):",
             f"            cnt += 1 if {at_k} == acc else 0"]
    # below 8 elements one pass finds the extremum and counts its ties: a new extremum
    # restarts the count at 1, an equal element adds 1 (the elements equal to the final
    # extremum all come at or after its first occurrence)
    body += ["else:",
             "    cnt = 1",
             "    for k in range(1, n):",
             f"        v = {at_k}",
             f"        if v {cmp} acc or v != v:",
             "            acc = v",
             "            cnt = 1",
             "        elif v == acc:",
             "            cnt += 1",
             "    if acc != acc:",
             "        cnt = 0"]
    body += [f"q = g[{gidx}] / cnt", "for k in range(n):",
             f"    {oat} {'+=' if add else '='} (1.0 if {at_k} == acc else 0.0) * q"]
    name = f"_red_adj_{'add_' if add else ''}{op}_{nd}_{ax}" + ("_k" if keep else "")
    if add:
        lines = [f"def {name}(out, a, g):", "    if out.shape != a.shape:",
                 "        raise ValueError('coarsen: an adjoint accumulator of another shape')"]
    else:
        lines = [f"def {name}(a, g):", "    out = np.empty(a.shape)"]
    lines += [f"    if a.shape[{ax}] == 0:",
              "        raise ValueError('zero-size array to reduction operation which has no identity')"]
    lines += _fiber_loops(nd, ax, body)
    if not add:
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


@dataclass(frozen=True)
class Generated:
    """A runtime helper generated for parameters: its name, and the source builder and
    arguments that produce it (requested through ``sum_to``, ``pop_array``, ``pop_shape``, ``pop_into``,
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


def set_scaled(nd):
    """``_set_scaledN``: ``out = 0.0 + a * x`` for N-D arrays of one shape, one loop nest."""
    return _generated(f"_set_scaled{nd}", _set_scaled_source, (nd,))


def pop_array(nd):
    """``_pop_arrayN``: pop an N-D array (with its shape) off the tapes."""
    return _generated(f"_pop_array{nd}", _pop_array_source, (nd,))


def pop_shape(nd):
    """``_pop_shapeN``: pop an N-D array's shape off the integer tape, as a new array of that
    shape whose elements are never read (``recording.shape_recorded``)."""
    return _generated(f"_pop_shape{nd}", _pop_shape_source, (nd,))


def store_region(op, r, v):
    """``_region_<op><r>_<v>``: ``out[...] = x`` (``op`` ``set``), ``+=`` (``add``) or ``-=``
    (``sub``) of a v-D array into an r-D region, as loops (``region_loops``)."""
    return _generated(region_name(op, r, v), region_source, (op, r, v))


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


def reduce_adjoint_add(op, nd, ax, keep):
    """``_red_adj_add_<op>_N_A[_k]``: ``reduce_adjoint``'s adjoint added into an array in place."""
    return _generated(f"_red_adj_add_{op}_{nd}_{ax}" + ("_k" if keep else ""), _reduce_adjoint_source,
                      (op, nd, ax, keep, True))


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


def einsum(ins, out, shape=False, fixed=""):
    """The loop nest of ``np.einsum(",".join(ins) + "->" + out, ...)`` (``einsum_loops``)."""
    ins = tuple(ins)
    return _generated(einsum_name(ins, out, shape, fixed), einsum_source, (ins, out, shape, fixed))


def gather(plan):
    """``_gather_<tag>``: ``b[x0, x1, ...]`` by 1-D integer arrays and integers
    (``gather_loops.GatherPlan``)."""
    return _generated(gather_name(plan), gather_source, (plan,))


def scatter(plan):
    """``_scatter_<tag>``: the adjoint of ``gather(plan)``, a scatter-add into a new array."""
    return _generated(scatter_name(plan), scatter_source, (plan,))


def _check_source(exc, message):
    raised = f"{exc}()" if message is None else f"{exc}({message!r})"
    return f'''
def {check_error(exc, message)}(ok):
    if not ok:
        raise {raised}
    return True
'''


def check_error(exc, message):
    """``_check_<exc>_<digest>``: raise the builtin exception ``exc`` (``AssertionError``,
    ``ValueError``) with the constant ``message`` (None: none) unless ``ok`` (an ``assert``
    statement; NumPy's own checks of arguments that the frontend writes out)."""
    digest = hashlib.sha1(repr((exc, message)).encode()).hexdigest()[:12]
    return _generated(f"_check_{exc}_{digest}", _check_source, (exc, message))


def _check_assert_source(message):
    stmt = "assert ok" if message is None else f"assert ok, {message!r}"
    return f'''
def {check_assert(message)}(ok):
    {stmt}
    return True
'''


def check_assert(message):
    """``_check_assert_<digest>``: the check of ``check_error`` as an ``assert`` statement
    (``AssertionError``, the constant ``message``), for code in coarsen's input language (a JVP
    that reverse mode reads back, inlining it: a ``raise`` is refused there)."""
    digest = hashlib.sha1(repr(message).encode()).hexdigest()[:12]
    return _generated(f"_check_assert_{digest}", _check_assert_source, (message,))


def along(kind, rank, ax, adj=False):
    """``_<kind>_<rank>_<ax>[_adj]``: ``np.repeat``, one axis of ``np.tile`` or ``np.roll``
    along axis ``ax`` of a ``rank``-D array, or its adjoint (``building_loops``)."""
    return _generated(along_name(kind, rank, ax, adj), along_source, (kind, rank, ax, adj))


def kron(rank, adj=None, dtype="f64"):
    """``_kron<rank>[_adj_a|_adj_b][_i]``: ``np.kron`` of two ``rank``-D arrays, or the adjoint
    of one operand (``building_loops``)."""
    return _generated(kron_name(rank, adj, dtype), kron_source, (rank, adj, dtype))


def helper_source(names):
    """Source of the named helpers plus their dependencies, deterministic order."""
    want = set()

    def add(n):
        if n in want:
            return
        want.add(n)
        for d in (calls(n) if n in HELPERS else ()):
            add(d)

    for n in names:
        add(n)
    out = []
    for n in sorted(want):
        if n in HELPERS:
            out.append(fixed_source(n).strip("\n"))
        else:
            out.append(_GENERATED[n].source().strip("\n"))     # KeyError: never requested
    return "\n\n\n".join(out) + "\n"
