"""A random program generator and differential checker for coarsen (randomized testing).

``generate(seed, size)`` returns a :class:`Program`: the source of a module with a function
``f(x, y, a, n)`` (two float scalars, a 1-D float64 array, an int) and, often, a helper ``h(u, v)``
that ``f`` calls, plus the arguments to call it with.  The same ``(seed, size)`` always gives
the same program, byte for byte, so a seed is a complete reproducer:

    python tests/fuzz_soak.py --seed S --size K --show       # print and check one program

What the programs contain (all in coarsen's documented input language, nothing it refuses):
straight-line float blocks, ``if/elif/else`` on float and int comparisons (with ``and``),
conditional expressions, ``for`` loops over ``range`` with start/stop/step including negative
steps and zero trips, nested up to three deep, counter ``while`` loops (bounded), guarded
``break``/``continue``, early ``return`` (at top level and inside loops), element reads, writes
and ``+=`` on the input array and on local ``np.zeros(m)`` arrays with in-range indices
(``i % m``, loop indices of ``range(m)``, ``-1``), calls to the generated helper, loop
recurrences with closed forms (``s += c*i``, ``p *= c``, ``z = c*z + d``), long chains
``v = math.sin(v)*v + math.cos(v)``, and ``abs``/``max``/``min`` kinks.

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
such a program is still checked coarse against fine), and that the caller's arrays are not
modified.  A failure raises :class:`FuzzFailure` whose message holds the program's source, its
arguments, the check that failed and ``g.ir(*args)``; :func:`minimize` shrinks a failing program
statement by statement (Python ``ast``) while the same kind of failure persists.
"""
from __future__ import annotations

import ast
import hashlib
import importlib.util
import math
import os
import random
import sys
import traceback
from dataclasses import dataclass, field

import numpy as np

import coarsen
from coarsen import CoarsenError
from tests.oracle import OracleError, assert_grad_close, fd_grad, float_positions

FUZZ_DIR = os.environ.get("COARSEN_FUZZ_DIR", "/tmp/fuzz")

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


# ======================================================================================
# programs
# ======================================================================================

@dataclass
class Program:
    seed: int
    size: int
    source: str
    x: float
    y: float
    a: np.ndarray
    n: int
    features: set = field(default_factory=set)

    @property
    def name(self):
        return "prog_" + hashlib.sha256(self.source.encode()).hexdigest()[:16]

    def make_args(self):
        """Fresh arguments (a new copy of the array every time)."""
        return (self.x, self.y, self.a.copy(), self.n)

    def args_text(self):
        return (f"x={self.x!r}, y={self.y!r}, a=np.array({self.a.tolist()!r}), n={self.n!r}")

    def load(self):
        """Write the source to ``FUZZ_DIR/prog_<hash>.py`` and import it; returns ``f``."""
        return load_source(self.source)


def load_source(source, fn_name="f"):
    os.makedirs(FUZZ_DIR, exist_ok=True)
    name = "prog_" + hashlib.sha256(source.encode()).hexdigest()[:16]
    mod = sys.modules.get(name)
    if mod is None:
        path = os.path.join(FUZZ_DIR, name + ".py")
        if not os.path.exists(path):
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w") as fh:
                fh.write(source)
            os.replace(tmp, path)
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return getattr(mod, fn_name)


# ======================================================================================
# the generator
# ======================================================================================

_CONSTS = ["0.5", "1.3", "-0.7", "0.25", "2.0", "-1.1", "0.9", "0.1", "1.5", "-0.3"]
_FACTORS = ["0.9", "0.75", "1.05", "0.6", "1.1", "0.95"]


class _Gen:
    """Recursive generator.  Scope rules keep every program valid Python: a float variable
    is read only where it is defined on every path (function-level locals are defined at the
    top; temporaries live in the block that defines them), loop indices are read only inside
    their loop, and every index is in range."""

    def __init__(self, rng: random.Random, size: int, helper: bool):
        self.r = rng
        self.budget = size
        self.helper = helper
        self.features = set()
        self.ntemp = 0
        self.nidx = 0
        self.lines = []

    # -------------------------------------------------------------- helpers
    def p(self, prob):
        return self.r.random() < prob

    def choice(self, seq):
        return self.r.choice(seq)

    def emit(self, indent, text):
        self.lines.append("    " * indent + text)

    # -------------------------------------------------------------- expressions
    def leaf(self, ctx):
        r = self.r.random()
        if r < 0.45:
            return self.choice(ctx["floats"])
        if r < 0.6:
            return self.choice(_CONSTS)
        if r < 0.8 and ctx["arrays"]:
            return self.read(ctx)
        if ctx["ints"] and r < 0.9:
            self.features.add("int_in_float")
            i = self.choice(ctx["ints"])[0]
            return self.choice([f"({i} + 0.5)", f"0.25 * {i}", f"{i} * 1.0"])
        return self.choice(ctx["floats"])

    def index(self, ctx, arr):
        """An in-range index expression for array ``arr`` (length ``m``)."""
        opts = ["0", "m - 1", "-1"]
        for name, direct in ctx["ints"]:
            if direct:
                opts += [name, name, name]
            opts += [f"{name} % m", f"({name} + 1) % m", f"(2 * {name} + 1) % m"]
        if len(ctx["ints"]) >= 2:
            (i1, _), (i2, _) = ctx["ints"][-2:]
            opts.append(f"({i1} + {i2}) % m")
        return self.choice(opts)

    def read(self, ctx):
        arr = self.choice(ctx["arrays"])
        self.features.add("array_read")
        return f"{arr}[{self.index(ctx, arr)}]"

    def expr(self, ctx, depth=2):
        if depth <= 0 or self.p(0.25):
            return self.leaf(ctx)
        r = self.r.random()
        sub = lambda: self.expr(ctx, depth - 1)  # noqa: E731
        if r < 0.35:
            op = self.choice(["+", "-", "*", "*", "+"])
            return f"{sub()} {op} {sub()}"
        if r < 0.45:
            return f"({sub()} + {sub()}) * {sub()}"
        if r < 0.75:
            e = self.leaf(ctx) if self.p(0.5) else sub()
            fn = self.choice(["sin", "cos", "tanh", "exp_tanh", "sqrt1", "log1", "div", "neg"])
            self.features.add("math_" + fn)
            if fn in ("sin", "cos", "tanh"):
                return f"math.{fn}({e})"
            if fn == "exp_tanh":
                return f"math.exp(math.tanh({e}))"
            v = self.leaf(ctx)
            if fn == "sqrt1":
                return f"math.sqrt(1.0 + {v} * {v})"
            if fn == "log1":
                return f"math.log(1.0 + {v} * {v})"
            if fn == "div":
                return f"{e} / (1.0 + {v} * {v})"
            return f"-{self.leaf(ctx)}"
        if r < 0.82 and self.helper and ctx.get("in_f", True):
            self.features.add("helper_call")
            return f"h({sub()}, {sub()})"
        if r < 0.87:
            fn = self.choice(["abs", "max", "min"])
            self.features.add("kink_" + fn)
            if fn == "abs":
                return f"abs({sub()})"
            return f"{fn}({sub()}, {sub()})"
        if r < 0.92:
            self.features.add("ifexp")
            return f"({sub()} if {self.cond(ctx)} else {sub()})"
        return f"{self.choice(_CONSTS)} * {sub()}"

    def cond(self, ctx):
        r = self.r.random()
        if ctx["ints"] and r < 0.3:
            i = self.choice(ctx["ints"])[0]
            self.features.add("int_cond")
            return self.choice([f"{i} % 2 == 0", f"{i} < 2", f"{i} >= 1", f"{i} != 1"])
        c = f"{self.expr(ctx, 1)} {self.choice(['<', '>', '<=', '>='])} {self.expr(ctx, 1)}"
        if self.p(0.1):
            self.features.add("and_cond")
            return f"{c} and {self.leaf(ctx)} > {self.choice(_CONSTS)}"
        return c

    # -------------------------------------------------------------- statements
    def new_temp(self):
        self.ntemp += 1
        return f"t{self.ntemp}"

    def new_index(self):
        self.nidx += 1
        return f"i{self.nidx}"

    def block(self, ctx, indent, count):
        """``count`` statements (at least one) at ``indent``; a copy of ``ctx`` for scoping."""
        ctx = dict(ctx, floats=list(ctx["floats"]), ints=list(ctx["ints"]),
                   arrays=list(ctx["arrays"]))
        start = len(self.lines)
        for _ in range(count):
            if self.budget <= 0 and len(self.lines) > start:
                break
            self.stmt(ctx, indent)
        if len(self.lines) == start:
            self.assign(ctx, indent)

    def assignable(self, ctx):
        return [v for v in ctx["floats"] if v not in ("x", "y")] or ctx["floats"]

    def assign(self, ctx, indent):
        self.budget -= 1
        targets = self.assignable(ctx)
        r = self.r.random()
        if r < 0.25 and ctx["depth"] > 0:
            t = self.new_temp()
            self.emit(indent, f"{t} = {self.expr(ctx)}")
            ctx["floats"].append(t)
            return
        v = self.choice(targets)
        if r < 0.5:
            self.emit(indent, f"{v} = {self.expr(ctx)}")
        elif r < 0.8:
            self.features.add("augassign")
            op = self.choice(["+=", "-=", "+="])
            self.emit(indent, f"{v} {op} {self.expr(ctx)}")
        else:
            self.features.add("mul_update")
            self.emit(indent, f"{v} *= {self.choice(_FACTORS)} + 0.1 * math.sin({self.leaf(ctx)})")

    def stmt(self, ctx, indent):
        depth = ctx["depth"]
        options = [("assign", 6), ("if", 2), ("for", 2.5 if depth < 3 else 0),
                   ("while", 0.8 if depth < 2 else 0), ("arr", 1.5 if ctx["arrays"] else 0),
                   ("rec", 1 if depth < 3 else 0), ("chain", 0.7), ("ret", 0.4),
                   ("brk", 1.0 if ctx["loop"] else 0), ("tuple", 0.4)]
        kinds, weights = zip(*options)
        kind = self.r.choices(kinds, weights)[0]
        getattr(self, "s_" + kind)(ctx, indent)

    def s_assign(self, ctx, indent):
        self.assign(ctx, indent)

    def s_tuple(self, ctx, indent):
        self.budget -= 1
        targets = self.assignable(ctx)
        if len(targets) < 2:
            return self.assign(ctx, indent)
        u, v = self.r.sample(targets, 2)
        self.features.add("tuple_assign")
        self.emit(indent, f"{u}, {v} = {self.expr(ctx, 1)}, {self.expr(ctx, 1)}")

    def s_if(self, ctx, indent):
        self.budget -= 1
        self.features.add("if")
        self.emit(indent, f"if {self.cond(ctx)}:")
        sub = dict(ctx, depth=ctx["depth"] + 1)
        self.block(sub, indent + 1, self.r.randint(1, 3))
        while self.p(0.3):
            self.features.add("elif")
            self.emit(indent, f"elif {self.cond(ctx)}:")
            self.block(sub, indent + 1, self.r.randint(1, 2))
        if self.p(0.6):
            self.features.add("else")
            self.emit(indent, "else:")
            self.block(sub, indent + 1, self.r.randint(1, 2))

    def range_args(self, ctx):
        """(text, direct): ``direct`` when every index of the range is in [0, m)."""
        r = self.r.random()
        if r < 0.3:
            return "range(m)", True
        if r < 0.45:
            return "range(n)", False
        if r < 0.55:
            self.features.add("range_start")
            return self.choice(["range(1, m)", "range(1, n + 1)", "range(2, m)"]), False
        if r < 0.65:
            self.features.add("range_step")
            return self.choice(["range(0, m, 2)", "range(1, n, 2)", "range(0, 7, 3)"]), False
        if r < 0.82:
            self.features.add("range_negative_step")
            return self.choice(["range(m - 1, -1, -1)", "range(n, 0, -1)", "range(m - 1, 0, -2)",
                                "range(n - 1, -1, -2)"]), False
        if ctx["ints"] and r < 0.92:
            self.features.add("range_dependent")
            i = self.choice(ctx["ints"])[0]
            return self.choice([f"range({i} + 1)", f"range({i}, n)", f"range(0, {i})"]), False
        return self.choice(["range(3)", "range(0)", "range(2, 5)"]), False

    def s_for(self, ctx, indent):
        self.budget -= 1
        self.features.add("for")
        if ctx["loop"]:
            self.features.add("nested_for")
        i = self.new_index()
        text, direct = self.range_args(ctx)
        if text == "range(m)" or text.startswith("range(m - 1, -1") or text.startswith("range(1, m)") \
                or text.startswith("range(2, m)") or text.startswith("range(0, m") \
                or text.startswith("range(m - 1, 0"):
            direct = True
        self.emit(indent, f"for {i} in {text}:")
        sub = dict(ctx, depth=ctx["depth"] + 1, loop=True)
        sub["ints"] = list(ctx["ints"]) + [(i, direct)]
        self.block(sub, indent + 1, self.r.randint(1, 3))

    def s_while(self, ctx, indent):
        self.budget -= 1
        self.features.add("while")
        k = self.new_index()
        bound = self.choice(["n", "3", "m", "2"])
        self.emit(indent, f"{k} = 0")
        if self.p(0.3):
            self.features.add("while_data_dependent")
            v = self.choice(ctx["floats"])
            self.emit(indent, f"while {k} < {bound} and {v} < {self.choice(['2.0', '5.0', '0.5'])}:")
        else:
            self.emit(indent, f"while {k} < {bound}:")
        # the counter is incremented first, so a ``continue`` anywhere cannot spin forever
        self.emit(indent + 1, f"{k} += 1")
        sub = dict(ctx, depth=ctx["depth"] + 1, loop=True)
        sub["ints"] = list(ctx["ints"]) + [(k, False)]
        self.block(sub, indent + 1, self.r.randint(1, 3))

    def s_arr(self, ctx, indent):
        self.budget -= 1
        arr = self.choice(ctx["arrays"])
        idx = self.index(ctx, arr)
        op = self.choice(["=", "+=", "+=", "-="])
        self.features.add("array_write" if arr != "a" else "input_write")
        self.emit(indent, f"{arr}[{idx}] {op} {self.expr(ctx)}")

    def s_rec(self, ctx, indent):
        """A loop recurrence whose body reads only loop-invariant values: closed forms."""
        self.budget -= 1
        self.features.add("recurrence")
        i = self.new_index()
        text = self.choice(["range(n)", "range(m)", "range(1, n + 1)", "range(n, 0, -1)",
                            "range(0, n, 2)", "range(7)"])
        inv = self.choice(ctx["floats"])
        v = self.choice(self.assignable(ctx))
        kind = self.choice(["sum_i", "sum_i2", "prod", "affine", "sum_const", "two"])
        self.emit(indent, f"for {i} in {text}:")
        if kind == "sum_i":
            self.emit(indent + 1, f"{v} += {inv} * {i}")
        elif kind == "sum_i2":
            self.emit(indent + 1, f"{v} += math.sin({inv}) * {i} * {i} + 0.5")
        elif kind == "prod":
            self.emit(indent + 1, f"{v} *= {self.choice(_FACTORS)} + 0.05 * math.tanh({inv})")
        elif kind == "affine":
            self.emit(indent + 1, f"{v} = 0.5 * math.tanh({inv}) * {v} + {self.choice(_CONSTS)}")
        elif kind == "sum_const":
            self.emit(indent + 1, f"{v} += {inv} * {inv} / (1.0 + {inv} * {inv})")
        else:
            w = self.choice(self.assignable(ctx))
            self.emit(indent + 1, f"{v} = 0.8 * {v} + 0.1 * {i}")
            if w != v:
                self.emit(indent + 1, f"{w} = {w} + {v} * {inv}")

    def s_chain(self, ctx, indent):
        self.budget -= 1
        self.features.add("chain")
        v = self.choice(self.assignable(ctx))
        for _ in range(self.r.randint(1, 4)):
            self.emit(indent, f"{v} = math.sin({v}) * {v} + math.cos({v})")

    def s_ret(self, ctx, indent):
        self.budget -= 1
        self.features.add("early_return" + ("_in_loop" if ctx["loop"] else ""))
        self.emit(indent, f"if {self.cond(ctx)}:")
        self.emit(indent + 1, f"return {self.expr(ctx)}")

    def s_brk(self, ctx, indent):
        self.budget -= 1
        word = self.choice(["break", "continue"])
        self.features.add(word)
        self.emit(indent, f"if {self.cond(ctx)}:")
        if self.p(0.3):
            self.assign(dict(ctx, depth=ctx["depth"] + 1, floats=list(ctx["floats"])), indent + 1)
        self.emit(indent + 1, word)

    # -------------------------------------------------------------- functions
    def helper_fn(self):
        ctx = dict(floats=["u", "v"], ints=[], arrays=[], depth=0, loop=False, in_f=False)
        self.emit(0, "def h(u, v):")
        self.emit(1, f"w = {self.expr(ctx)}")
        ctx["floats"].append("w")
        for _ in range(self.r.randint(0, 2)):
            self.emit(1, f"w = {self.expr(ctx)}")
        if self.p(0.4):
            self.features.add("helper_if")
            self.emit(1, f"if {self.cond(ctx)}:")
            self.emit(2, f"w = {self.expr(ctx)}")
            if self.p(0.5):
                self.emit(1, "else:")
                self.emit(2, f"w = {self.expr(ctx)}")
        if self.p(0.25):
            self.features.add("helper_loop")
            self.emit(1, "for k in range(3):")
            self.emit(2, "w = math.sin(w) * 0.5 + v * k")
        if self.p(0.2):
            self.features.add("helper_early_return")
            self.emit(1, f"if {self.cond(ctx)}:")
            self.emit(2, f"return {self.expr(ctx)}")
        self.emit(1, f"return {self.expr(ctx)}")
        self.lines.append("")
        self.lines.append("")

    def main_fn(self):
        nloc = self.r.randint(1, 3)
        locs = [f"s{k}" for k in range(nloc)]
        self.emit(0, "def f(x, y, a, n):")
        self.emit(1, "m = a.shape[0]")
        ctx0 = dict(floats=["x", "y"], ints=[], arrays=["a"], depth=0, loop=False, in_f=True)
        for s in locs:
            self.emit(1, f"{s} = {self.expr(ctx0, 1)}")
        arrays = ["a"]
        if self.p(0.5):
            self.features.add("local_array")
            self.emit(1, "b = np.zeros(m)")
            arrays.append("b")
        ctx = dict(floats=["x", "y"] + locs, ints=[], arrays=arrays, depth=0, loop=False,
                   in_f=True)
        while self.budget > 0:
            self.stmt(ctx, 1)
        terms = [f"{self.choice(['', '0.5 * ', '1.5 * '])}{s}" for s in locs]
        if "b" in arrays:
            terms.append(self.choice(["np.sum(b)", "b[0]", "np.sum(b * b)"]))
        if self.p(0.3):
            terms.append("np.sum(a)")
        if self.p(0.3):
            terms.append("x * y")
        self.emit(1, f"return {' + '.join(terms)}")


def generate(seed: int, size: int | None = None) -> Program:
    """The program for ``(seed, size)``; ``size`` (statement budget, default drawn from the
    seed in 2..22) bounds the number of top-level and nested statements."""
    r = random.Random(seed)
    if size is None:
        size = r.randint(2, 22)
    helper = r.random() < 0.45
    g = _Gen(r, size, helper)
    g.lines += ["import math", "", "import numpy as np", "", ""]
    if helper:
        g.features.add("helper")
        g.helper_fn()
    g.main_fn()
    src = "\n".join(g.lines) + "\n"
    src = f"# coarsen fuzz program: seed={seed} size={size}\n" + src
    L = r.randint(1, 5)
    a = np.array([round(r.uniform(-1.2, 1.2), 3) for _ in range(L)])
    x = round(r.uniform(-1.5, 1.5), 3)
    y = round(r.uniform(-1.5, 1.5), 3)
    n = r.randint(0, 4)
    return Program(seed, size, src, x, y, a, n, g.features)


# ======================================================================================
# the differential check
# ======================================================================================

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


def check_source(source, make_args, args_text, *, targets=("python",), modes=(True, False),
                 oracle=True, label=""):
    """Differential check of one program (see the module docstring).  ``modes``: a tuple of
    ``coarsen`` flags for every target, or a dict target -> tuple (e.g. ``{"cpu": (True,)}``
    to compile only the coarse gradient with Numba)."""
    fn = load_source(source)
    try:
        with np.errstate(all="ignore"):
            v0 = fn(*make_args())
    except Exception as e:  # noqa: BLE001 - the generated program itself is invalid here
        return Outcome("discarded", f"primal raised {type(e).__name__}: {e}")
    if isinstance(v0, np.ndarray) or not isinstance(v0, (float, np.floating)):
        return Outcome("discarded", f"primal returned {type(v0).__name__}")
    v0 = float(v0)
    if not math.isfinite(v0) or abs(v0) > MAX_VALUE:
        return Outcome("discarded", f"primal value {v0!r}")

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
            gmax = max((float(np.nanmax(np.abs(np.asarray(gr, dtype=float))))
                        for gr in grads if np.size(gr)), default=0.0)
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

    vouched = False
    ref = None
    if oracle:
        args = make_args()
        try:
            with np.errstate(all="ignore"):
                ref = fd_grad(fn, args, float_positions(args))
            vouched = True
        except (OracleError, ValueError, OverflowError, ZeroDivisionError, FloatingPointError):
            ref = None

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

    return Outcome("ok", oracle=vouched)


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


def check_program(prog: Program, *, targets=("python",), modes=(True, False), oracle=True):
    return check_source(prog.source, prog.make_args, prog.args_text(), targets=targets,
                        modes=modes, oracle=oracle, label=f"seed={prog.seed} size={prog.size}")


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
