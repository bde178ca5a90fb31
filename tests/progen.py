"""A random program generator and differential checker for coarsen (randomized testing).

``generate(seed, size)`` returns a :class:`Program`: the source of a module with a function
``f(x, y, a, n)`` (two float scalars, a 1-D float64 array, an int) and, often, a helper ``h(u, v)``
that ``f`` calls, plus the arguments to call it with.  The same ``(seed, size)`` always gives
the same program, byte for byte, so a seed is a complete reproducer:

    python tests/fuzz_soak.py --seed S --size K --show       # print and check one program

What the programs contain (all in coarsen's documented input language, nothing it refuses;
every program is plain Python whose own evaluation is the reference):
straight-line float blocks, ``if/elif/else`` on float and int comparisons (with ``and``),
conditional expressions, ``for`` loops over ``range`` with start/stop/step including negative
steps and zero trips, nested up to three deep, counter ``while`` loops (bounded), guarded
``break``/``continue``, early ``return`` (at top level and inside loops), element reads, writes
and ``+=`` on the input array and on local ``np.zeros(m)`` arrays with in-range indices
(``i % m``, loop indices of ``range(m)``, ``-1``), calls to the generated helper, loop
recurrences with closed forms (``s += c*i``, ``p *= c``, ``z = c*z + d``), long chains
``v = math.sin(v)*v + math.cos(v)``, and ``abs``/``max``/``min`` kinks.  Also:

* adversarial names (3 programs in 4, :func:`rename_adversarially`): parameters and locals of
  every function renamed, consistently, to names coarsen's generated code uses or derives
  (``x_bar`` next to ``x``, ``u_y`` next to ``_y``, ``_t1``, ``_g1``, ``_s1_p1``, ``_ftape``,
  ``_fpos``, ``_ret``, ``_grow``, ``tape``, ``pos``, and ``np``/``math`` in functions that do not
  use those modules); ``generate(seed, adversarial=False)`` is the same program with plain names;
* loop variables reused: a later loop (a sibling, one at another depth, one after a loop that
  left through ``break``/``continue``/``return``, a ``while`` counter) takes the name of a loop
  that has ended; an inner ``for`` sometimes rebinds an enclosing ``for`` loop's name (whose
  reads are then all ``% m``); a loop variable is sometimes read after its loop;
* an in-place helper (often named ``_grow``, ``_reserve``, ``tape``...) that ``f`` passes its
  arrays to: it updates them with ``+=``, ``-=``, ``*=`` on whole arrays, slices (overlapping
  ones, like ``p[1:] += 0.5 * p[:-1]``) and elements, sometimes in a loop, sometimes returns a
  float (used in the same statement that reads the array first), and ``f`` reads the arrays
  after the call.

Only numerically safe operations: ``sin``, ``cos``, ``tanh``, ``exp(tanh(e))``,
``sqrt(1 + e*e)``, ``log(1 + e*e)``, ``e / (1 + e*e)``, sums and products; multiplicative loop
updates have factors in (0.5, 1.1).  Values can still grow (products of growing variables in
nested loops): :func:`check_program` discards a program whose value is not finite or exceeds
1e8 in magnitude, and counts it.

:func:`check_program` compiles a program coarse and fine (``coarsen=True/False``) on the given
targets and checks, for each: the primal value against the original function (rtol 1e-12,
absolute floor 1e-12), coarse against fine (rtol 1e-9, via ``assert_grad_close``), both against
the extended-precision finite-difference oracle (rtol 1e-7, the oracle's 1e-4 scale floor, atol
1e-12) when
the oracle vouches for the point (it refuses points within its step of a branch flip or kink:
such a program is still checked coarse against fine, unless ``require_oracle=True``, which
discards it), and that the caller's arrays are not modified.  :func:`check_seed_with_oracle`
replaces a discarded seed deterministically (bounded), so that a fixed list of seeds is
really checked against the oracle; :func:`prescreen` tells, without compiling, whether a
program would be discarded.  A failure raises :class:`FuzzFailure` whose message holds the program's source, its
arguments, the check that failed and ``g.ir(*args)``; :func:`minimize` shrinks a failing program
statement by statement (Python ``ast``) while the same kind of failure persists.
"""
from __future__ import annotations

import ast
import math
import traceback
from dataclasses import dataclass

import numpy as np

import coarsen
from coarsen import CoarsenError
from tests.oracle import OracleError, assert_grad_close, fd_grad, float_positions

from tests.progen_generate import (FUZZ_DIR, Program, generate, load_source,  # noqa: F401
                                     rename_adversarially)

PRIMAL_RTOL = 1e-12
COARSE_FINE_RTOL = 1e-9
COARSE_FINE_ATOL = 1e-13   # entries that are ~0 in both (the scale floor is 0 when all are)
ORACLE_RTOL = 1e-7
# absolute floor for the oracle comparison: when every gradient entry is ~0 (e.g. 1e-23 after a
# chain of contractions) the oracle's relative scale floor is 0 and finite differences in
# extended precision resolve nothing below ~1e-15 of the function's scale (values are O(1))
ORACLE_ATOL = 1e-12
MAX_VALUE = 1e8
MAX_GRADIENT = 1e10


class FuzzFailure(AssertionError):
    """A program on which coarsen disagrees with the reference (or crashes, or refuses)."""

    def __init__(self, kind, program_source, args_text, detail):
        self.kind = kind
        self.program_source = program_source
        self.args_text = args_text
        self.detail = detail
        super().__init__(f"[{kind}]\n--- program ---\n{program_source}--- args: {args_text}\n"
                         f"{detail}")


@dataclass
class Outcome:
    status: str            # "ok" | "discarded"
    why: str = ""
    oracle: bool = False   # whether the oracle vouched for the point


def _tb(e):
    return "".join(traceback.format_exception(type(e), e, e.__traceback__, chain=False))


def failure_signature(e: "FuzzFailure"):
    """A short key grouping failures that are likely the same bug: the kind, plus for crashes
    and refusals the last line of the error with numbers and names of temporaries removed."""
    import re
    if e.kind in ("crash", "refused"):
        body = e.detail.split("\n--- g.ir(*args) ---")[0]
        lines = [ln for ln in body.splitlines() if "Error" in ln and not ln.startswith(" ")]
        last = lines[-1] if lines else ""
        last = re.sub(r"_t\d+", "_tN", last)
        last = re.sub(r"\d+", "N", last)
        return f"{e.kind}: {last[:120]}"
    if e.kind == "primal" and "value nan" in e.detail:
        return "primal: value nan"
    return e.kind


def _ir_text(g, args):
    try:
        return g.ir(*args)
    except Exception as e:  # noqa: BLE001 - diagnostics only
        return f"<g.ir failed: {type(e).__name__}: {e}>"


def _screen(fn, make_args, oracle=True):
    """The checks that need no compiler: ``(value, oracle gradients or None, outcome)`` where
    ``outcome`` is a ``discarded`` :class:`Outcome` when the program is unusable (its value
    is not a finite float below ``MAX_VALUE``, or running it raised), else None."""
    try:
        with np.errstate(all="ignore"):
            v0 = fn(*make_args())
    except Exception as e:  # noqa: BLE001 - the generated program itself is invalid here
        return None, None, Outcome("discarded", f"primal raised {type(e).__name__}: {e}")
    if isinstance(v0, np.ndarray) or not isinstance(v0, (float, np.floating)):
        return None, None, Outcome("discarded", f"primal returned {type(v0).__name__}")
    v0 = float(v0)
    if not math.isfinite(v0) or abs(v0) > MAX_VALUE:
        return None, None, Outcome("discarded", f"primal value {v0!r}")
    ref = None
    if oracle:
        args = make_args()
        try:
            with np.errstate(all="ignore"):
                ref = fd_grad(fn, args, float_positions(args))
        except (OracleError, ValueError, OverflowError, ZeroDivisionError, FloatingPointError):
            ref = None
    return v0, ref, None


def refusal_reason(fn, make_args):
    """Why the oracle refuses the point (one line), for reports."""
    args = make_args()
    try:
        with np.errstate(all="ignore"):
            fd_grad(fn, args, float_positions(args))
    except Exception as e:  # noqa: BLE001 - diagnostics only
        msg = str(e)
        for key in ("not smooth", "did not converge", "non-finite"):
            if key in msg:
                return f"{type(e).__name__}: {key}"
        return f"{type(e).__name__}: {msg[:80]}"
    return "accepted on a second try"


DISCARD_KINDS = ("primal raised", "primal returned", "primal value", "oracle refused",
                 "ill-conditioned", "overflow inside the program")


def discard_kind(why):
    """The kind of a discard reason (its reason without numbers), for counts."""
    for k in DISCARD_KINDS:
        if why.startswith(k):
            return k
    return why.split(":")[0][:40]


def prescreen(prog: Program) -> Outcome:
    """What :func:`check_program` with ``require_oracle=True`` would discard before compiling
    anything (cheap: plain Python and the oracle only): ``ok`` with ``oracle=True``, or
    ``discarded`` with the reason."""
    fn = prog.load()
    _, ref, early = _screen(fn, prog.make_args, True)
    if early is not None:
        return early
    if ref is None:
        return Outcome("discarded", f"oracle refused: {refusal_reason(fn, prog.make_args)}")
    return Outcome("ok", oracle=True)


def check_source(source, make_args, args_text, *, targets=("python",), modes=(True, False),
                 oracle=True, require_oracle=False, label="", jvp=False):
    """Differential check of one program (see the module docstring).  ``modes``: a tuple of
    ``coarsen`` flags for every target, or a dict target -> tuple (e.g. ``{"cpu": (True,)}``
    to compile only the coarse gradient with Numba).  ``jvp=True`` also checks
    ``coarsen.jvp`` in the same targets and modes: its value against the program's, its
    tangent along a fixed direction against the gradient's dot product with it
    (``check_jvp``).

    Returns an :class:`Outcome`: ``ok`` (with ``oracle`` telling whether the gradients were
    also checked against the oracle) or ``discarded`` with the reason.  The oracle runs first:
    with ``require_oracle=True`` a point it refuses is discarded before anything is compiled
    (so that a caller can insist on programs that were really checked against it)."""
    fn = load_source(source)
    v0, ref, early = _screen(fn, make_args, oracle or require_oracle)
    if early is not None:
        return early
    vouched = ref is not None
    if require_oracle and ref is None:
        return Outcome("discarded", f"oracle refused: {refusal_reason(fn, make_args)}")

    def fail(kind, detail, g=None):
        ir = ""
        if g is not None:
            ir = f"\n--- g.ir(*args) ---\n{_ir_text(g, make_args())}"
            if g.coarsen:
                # the coarse IR text shows the function after its segments were replaced:
                # print the whole function too, and the segment plan
                try:
                    gf = coarsen.differentiate(fn, coarsen=False, target="python")
                    ir += f"\n--- IR before coarsening (fine g.ir) ---\n{_ir_text(gf, make_args())}"
                except Exception as e:  # noqa: BLE001 - diagnostics only
                    ir += f"\n<fine IR failed: {type(e).__name__}: {e}>"
                try:
                    import io
                    buf = io.StringIO()
                    g.report(*make_args(), file=buf)
                    ir += f"\n--- g.report() ---\n{buf.getvalue()}"
                except Exception as e:  # noqa: BLE001
                    ir += f"\n<g.report failed: {type(e).__name__}: {e}>"
        raise FuzzFailure(kind, source, args_text, f"{label} {detail}{ir}")

    results = {}
    for target in targets:
        for coarse in (modes.get(target, (True, False)) if isinstance(modes, dict) else modes):
            tag = f"target={target} coarsen={coarse}"
            try:
                g = coarsen.differentiate(fn, coarsen=coarse, target=target)
            except CoarsenError as e:
                fail("refused", f"{tag}: differentiate raised CoarsenError:\n{e}")
            except Exception as e:  # noqa: BLE001
                fail("crash", f"{tag}: differentiate crashed:\n{_tb(e)}")
            args = make_args()
            before = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
            try:
                with np.errstate(all="ignore"):
                    v, grads = g.value_and_grad(*args)
            except CoarsenError as e:
                fail("refused", f"{tag}: the gradient call raised CoarsenError:\n{e}", g)
            except Exception as e:  # noqa: BLE001
                fail("crash", f"{tag}: the gradient call crashed:\n{_tb(e)}", g)
            for k, (b0, a1) in enumerate(zip(before, args)):
                if isinstance(b0, np.ndarray) and not np.array_equal(b0, a1):
                    fail("mutated_input", f"{tag}: argument {k} modified: {b0!r} -> {a1!r}", g)
            gmax = _largest(grads)
            # A closed form rounds differently from the loop it replaces (relative 1e-16 per
            # operation), and the program amplifies that as it amplifies any input change: the
            # gradient's size is the yardstick (seed 9000000003472: |gradient| 2e4, values
            # apart by 6e-12).  A chaotic program amplifies it to any size (seed 9000000002393:
            # |gradient| 4e25) and is discarded.
            if not (abs(v - v0) <= PRIMAL_RTOL * max(abs(v0), 1.0, gmax if math.isfinite(gmax) else 0.0)):
                if not gmax <= MAX_GRADIENT:
                    return Outcome("discarded", f"ill-conditioned: |gradient| {gmax:.3g}")
                fail("primal", f"{tag}: value {v!r} != original {v0!r} "
                               f"(diff {abs(v - v0):.3g})", g)
            grads = list(grads)
            nonfinite = [k for k, gr in enumerate(grads)
                         if not np.all(np.isfinite(np.asarray(gr, dtype=float)))]
            if nonfinite:
                # A program whose intermediates overflow (repeated squaring) and are then
                # overwritten has a finite value but a NaN gradient in IEEE arithmetic, as in
                # NumPy or JAX (0 * inf): discarded when running the program itself produces an
                # infinite float (seed 9000000001784); otherwise it is a failure.
                if _overflows_inside(fn, make_args):
                    return Outcome("discarded", "overflow inside the program")
                k = nonfinite[0]
                fail("nonfinite", f"{tag}: gradient {k} not finite: {grads[k]!r}", g)
            results[(target, coarse)] = (g, grads)

    def versus_oracle(grads):
        if ref is None:
            return "oracle: refused this point"
        try:
            assert_grad_close(grads, ref, rtol=ORACLE_RTOL, atol=ORACLE_ATOL)
            return "oracle: agrees"
        except AssertionError as e:
            return f"oracle: disagrees: {e}"

    # Ill-conditioned programs: when the oracle cannot vouch for the point and the gradient is
    # astronomically large, float64 itself is meaningless there (seed 8000000000386: chained
    # sin(s)*s + cos(s) after a cubic gives |grad| ~ 3e20 in float64 while the exact derivative,
    # computed with mpmath at 60 digits, is +8.6e19 with the other sign), so coarse and fine
    # cannot be held to 1e-9 of each other; such programs are discarded, not passed.
    if ref is None:
        gmax = 0.0
        for _, grads in results.values():
            for gr in grads:
                arr = np.abs(np.asarray(gr, dtype=float))
                if arr.size:
                    gmax = max(gmax, float(np.nanmax(arr)))
        if gmax > MAX_GRADIENT:
            return Outcome("discarded", f"ill-conditioned: |gradient| {gmax:.3g} and no oracle")

    # the same mode on two targets
    for coarse in (True, False):
        same = [results[(t, coarse)] for t in targets if (t, coarse) in results]
        for other in same[1:]:
            try:
                assert_grad_close(other[1], same[0][1], rtol=COARSE_FINE_RTOL, atol=COARSE_FINE_ATOL,
                                  err_msg=f"{label} coarsen={coarse}: {targets[0]} vs another target")
            except AssertionError as e:
                fail("target_vs_target", str(e), other[0])

    # coarse vs fine, per target
    for target in targets:
        if (target, True) in results and (target, False) in results:
            gc, gf = results[(target, True)], results[(target, False)]
            try:
                assert_grad_close(gc[1], gf[1], rtol=COARSE_FINE_RTOL, atol=COARSE_FINE_ATOL,
                                  err_msg=f"{label} target={target}: coarse vs fine")
            except AssertionError as e:
                fail("coarse_vs_fine", f"{e}\nfine={gf[1]!r}\ncoarse={gc[1]!r}\n"
                     f"oracle={None if ref is None else [np.asarray(r, float) for r in ref]!r}\n"
                     f"fine vs {versus_oracle(gf[1])}\ncoarse vs {versus_oracle(gc[1])}", gc[0])

    if ref is not None:
        for (target, coarse), (g, grads) in results.items():
            try:
                assert_grad_close(grads, ref, rtol=ORACLE_RTOL, atol=ORACLE_ATOL,
                                  err_msg=f"{label} target={target} coarsen={coarse} vs oracle")
            except AssertionError as e:
                fail("oracle", f"{e}\noracle={[np.asarray(r, float) for r in ref]!r}\n"
                               f"got={grads!r}", g)

    if jvp:
        for (target, coarse), (g, grads) in results.items():
            check_jvp(fn, make_args, v0, grads, target, coarse, fail)
    return Outcome("ok", oracle=vouched)


def _largest(grads):
    """The largest magnitude among the gradient's entries (NaN ignored; 0.0 for none)."""
    return max((float(np.nanmax(np.abs(np.asarray(gr, dtype=float)))) for gr in grads
                if np.size(gr)), default=0.0)


def jvp_direction(grads):
    """A fixed tangent per gradient entry, shaped like it, with no zero component."""
    out = []
    for k, gr in enumerate(grads):
        a = np.asarray(gr, dtype=float)
        t = 0.3 + np.cos(np.arange(a.size, dtype=float) * 1.7 + k) * 0.6
        out.append(float(t[0]) if a.ndim == 0 else t.reshape(a.shape))
    return out


def check_jvp(fn, make_args, v0, grads, target, coarse, fail):
    """``coarsen.jvp(fn)`` against the gradient ``grads`` (checked before) on ``target``, in
    mode ``coarse``: the value as the primal's, the tangent along ``jvp_direction`` equal to
    ``sum_i <grad_i, t_i>`` to ``COARSE_FINE_RTOL`` of ``sum_i |grad_i * t_i|`` (forward and
    reverse mode add the same products in different orders)."""
    tag = f"jvp target={target} coarsen={coarse}"
    ts = jvp_direction(grads)
    try:
        j = coarsen.jvp(fn, target=target, coarsen=coarse)
        with np.errstate(all="ignore"):
            v, tan = j(*make_args(), tangents=tuple(ts))
    except Exception as e:  # noqa: BLE001
        fail("jvp_crash", f"{tag}: {_tb(e)}")
    gmax = _largest(grads)
    if not abs(v - v0) <= PRIMAL_RTOL * max(abs(v0), 1.0, gmax):
        fail("jvp_primal", f"{tag}: value {v!r} != original {v0!r}")
    expected = sum(float(np.sum(np.asarray(gr, float) * t)) for gr, t in zip(grads, ts))
    scale = sum(float(np.sum(np.abs(np.asarray(gr, float) * t))) for gr, t in zip(grads, ts))
    if not abs(tan - expected) <= COARSE_FINE_RTOL * scale + COARSE_FINE_ATOL:
        fail("jvp_tangent", f"{tag}: tangent {tan!r} != <gradient, direction> {expected!r} "
                            f"(scale {scale:.3g}, direction {ts!r})")


def _overflows_inside(fn, make_args):
    """Does running the program itself overflow a float somewhere (checked with an
    extended-range tracer: float values replaced by numbers whose magnitude is watched)?"""
    import sys as _sys
    hit = []

    def tracer(frame, event, arg):
        if event == "line" or event == "return":
            for v in list(frame.f_locals.values()):
                if isinstance(v, float) and math.isinf(v):
                    hit.append(v)
        return tracer
    old = _sys.gettrace()
    _sys.settrace(tracer)
    try:
        with np.errstate(all="ignore"):
            fn(*make_args())
    except Exception:  # noqa: BLE001
        pass
    finally:
        _sys.settrace(old)
    return bool(hit)


def check_program(prog: Program, *, targets=("python",), modes=(True, False), oracle=True,
                  require_oracle=False, jvp=False):
    return check_source(prog.source, prog.make_args, prog.args_text(), targets=targets,
                        modes=modes, oracle=oracle, require_oracle=require_oracle,
                        label=f"seed={prog.seed} size={prog.size}", jvp=jvp)


# seeds tried in place of a discarded one: seed + k * REPLACEMENT_STRIDE, k = 1, 2, ...
REPLACEMENT_STRIDE = 10_000_019
MAX_REPLACEMENTS = 4


def check_seed_with_oracle(seed, size=None, *, targets=("python",), modes=(True, False),
                           max_replacements=MAX_REPLACEMENTS, log=None, make=generate, jvp=False):
    """Check the program of ``seed`` against the oracle; when it is discarded (value too large,
    the oracle refuses the point, ill-conditioned) check ``seed + k * REPLACEMENT_STRIDE`` for
    k = 1, 2, ... instead, at most ``max_replacements`` times.  Deterministic.

    Returns ``(program, outcome, discards)`` with ``outcome.oracle`` true, and ``discards`` the
    list of ``(seed, reason)`` tried before it; raises ``AssertionError`` (listing them) when
    every try was discarded, and :class:`FuzzFailure` when a program fails.  ``make``: the
    generator (``generate``, or ``progen_reductions.generate_reductions``)."""
    discards = []
    for k in range(max_replacements + 1):
        s = seed + k * REPLACEMENT_STRIDE
        prog = make(s, size)
        out = check_program(prog, targets=targets, modes=modes, require_oracle=True, jvp=jvp)
        if log is not None:
            log(prog, out)
        if out.status == "ok" and out.oracle:
            return prog, out, discards
        discards.append((s, out.why or "not checked against the oracle"))
    raise AssertionError(f"seed {seed}: no program checkable against the oracle in "
                         f"{max_replacements + 1} tries: {discards}")


# ======================================================================================
# minimization
# ======================================================================================

def _stmt_lists(tree):
    """(parent, field) for every statement list in the module."""
    out = []
    for node in ast.walk(tree):
        for fld in ("body", "orelse"):
            body = getattr(node, fld, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                out.append((node, fld))
    return out


def _candidates(source):
    """Smaller variants of ``source``: one statement removed (or a block replaced by its
    body / emptied to ``pass``), one expression replaced by a constant."""
    tree = ast.parse(source)
    lists = _stmt_lists(tree)
    for li, (node, fld) in enumerate(lists):
        body = getattr(node, fld)
        for k in range(len(body)):
            if isinstance(node, ast.Module) and not (isinstance(body[k], ast.FunctionDef)
                                                     and body[k].name != "f"):
                continue
            if isinstance(body[k], ast.Return) and isinstance(node, ast.FunctionDef) \
                    and k == len(body) - 1:
                continue
            variants = [[]]
            st = body[k]
            if isinstance(st, (ast.If, ast.For, ast.While)):
                variants.append(st.body)
                if getattr(st, "orelse", None):
                    variants.append(st.orelse)
            for repl in variants:
                t2 = ast.parse(source)
                n2, f2 = _stmt_lists(t2)[li]
                b2 = getattr(n2, f2)
                new = b2[:k] + [ast.parse(ast.unparse(s)).body[0] for s in repl] + b2[k + 1:]
                if not new:
                    new = [ast.Pass()]
                setattr(n2, f2, new)
                yield ast.unparse(ast.fix_missing_locations(t2)) + "\n"
    # expressions: replace a call / binop with one of its operands or a constant
    nodes = [n for n in ast.walk(tree) if isinstance(n, (ast.BinOp, ast.Call, ast.IfExp, ast.UnaryOp))]
    for j in range(len(nodes)):
        for mode in ("left", "right", "const"):
            t2 = ast.parse(source)
            target = [n for n in ast.walk(t2) if isinstance(n, (ast.BinOp, ast.Call, ast.IfExp, ast.UnaryOp))][j]
            if mode == "left":
                sub = getattr(target, "left", None) or (target.args[0] if getattr(target, "args", None) else None) \
                    or getattr(target, "body", None) or getattr(target, "operand", None)
            elif mode == "right":
                sub = getattr(target, "right", None) or (target.args[-1] if getattr(target, "args", None) else None) \
                    or getattr(target, "orelse", None)
            else:
                sub = ast.Constant(0.5)
            if sub is None:
                continue
            _replace(t2, target, sub)
            yield ast.unparse(ast.fix_missing_locations(t2)) + "\n"


def _replace(tree, old, new):
    for node in ast.walk(tree):
        for fld, val in ast.iter_fields(node):
            if val is old:
                setattr(node, fld, new)
                return
            if isinstance(val, list):
                for k, item in enumerate(val):
                    if item is old:
                        val[k] = new
                        return


def minimize(source, make_args, args_text, signature, *, targets=("python",), max_checks=200,
             log=None):
    """Shrink ``source`` while ``check_source`` keeps failing with the same ``signature``
    (see :func:`failure_signature`).

    Returns (source, failure).  Greedy: restart from the first smaller variant that still
    fails; stop when none does or after ``max_checks`` checks."""
    best = source
    best_fail = None
    checks = 0
    progress = True
    while progress and checks < max_checks:
        progress = False
        for cand in _candidates(best):
            if len(cand) >= len(best):
                continue
            checks += 1
            try:
                check_source(cand, make_args, args_text, targets=targets)
            except FuzzFailure as e:
                if failure_signature(e) == signature:
                    best, best_fail = cand, e
                    progress = True
                    if log:
                        log(f"  minimize: {len(best)} chars after {checks} checks")
                    break
            except Exception:  # noqa: BLE001 - invalid variant
                pass
            if checks >= max_checks:
                break
    return best, best_fail
