"""The fuzzer's program generator (``tests/progen.py`` checks what it generates).

``generate(seed)`` builds a random program in coarsen's input language (a ``Program``: its
source and arguments), ``rename_adversarially`` renames its variables with names like the
compiler's own, and ``load_source`` imports a source from ``FUZZ_DIR``.  Deterministic per seed.
"""
from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
import random
import sys
from dataclasses import dataclass, field

import numpy as np

FUZZ_DIR = os.environ.get("COARSEN_FUZZ_DIR", "/tmp/fuzz")

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


class Gen:
    """Recursive generator.  Scope rules keep every program valid Python: a float variable
    is read only where it is defined on every path (function-level locals are defined at the
    top; temporaries live in the block that defines them), loop indices are read only inside
    their loop, and every index is in range."""

    def __init__(self, rng: random.Random, size: int, helper: bool, upd=None):
        self.r = rng
        self.budget = size
        self.helper = helper
        # the in-place helper: None, or (name, two_arrays, returns) -- see upd_fn
        self.upd = upd
        self.features = set()
        self.ntemp = 0
        self.nidx = 0
        self.lines = []
        # loop variables: every name used so far (in order), the depth it was last used at,
        # and whether a loop over it left early (break/continue/return inside it)
        self.loop_names = []
        self.loop_depth = {}
        self.loop_exit = {}

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

    def new_index(self, ctx, kind="for"):
        """A loop variable for a new loop at ``ctx``: often the name of an earlier loop that
        has ended (a sibling, one at another depth, one that left early), sometimes (``for``
        only) the name of an enclosing ``for`` loop marked shadowable, else a fresh name.
        Returns ``(name, shadows)``."""
        active = {nm for nm, _, _ in ctx["active"]}
        retired = [nm for nm in self.loop_names if nm not in active]
        shadowable = [nm for nm, k, sh in ctx["active"] if k == "for" and sh]
        if retired and self.p(0.45):
            name = self.choice(retired)
            self.features.add("loop_var_reuse")
            if self.loop_depth.get(name) != ctx["depth"]:
                self.features.add("loop_var_reuse_other_depth")
            if self.loop_exit.get(name):
                self.features.add("loop_var_reuse_after_early_exit")
            shadows = False
        elif kind == "for" and shadowable and self.p(0.4):
            name = self.choice(shadowable)
            self.features.add("loop_var_shadow")
            shadows = True
        else:
            self.nidx += 1
            name = f"i{self.nidx}"
            shadows = False
        if name not in self.loop_names:
            self.loop_names.append(name)
        self.loop_depth[name] = ctx["depth"]
        return name, shadows

    def mark_exit(self, ctx, all_loops=False):
        """A break/continue (innermost loop) or return (every enclosing loop) at ``ctx``."""
        for nm, _, _ in (ctx["active"] if all_loops else ctx["active"][-1:]):
            self.loop_exit[nm] = True

    def block(self, ctx, indent, count):
        """``count`` statements (at least one) at ``indent``; a copy of ``ctx`` for scoping."""
        ctx = dict(ctx, floats=list(ctx["floats"]), ints=list(ctx["ints"]),
                   arrays=list(ctx["arrays"]), active=list(ctx["active"]))
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
                   ("brk", 1.0 if ctx["loop"] else 0), ("tuple", 0.4),
                   ("upd", 1.0 if self.upd and ctx["arrays"] and ctx.get("in_f", True) else 0)]
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
        i, shadows = self.new_index(ctx, "for")
        text, direct = self.range_args(ctx)
        if text == "range(m)" or text.startswith("range(m - 1, -1") or text.startswith("range(1, m)") \
                or text.startswith("range(2, m)") or text.startswith("range(0, m") \
                or text.startswith("range(m - 1, 0"):
            direct = True
        # a shadowable loop's variable may be rebound by an inner loop over the same name
        # (after which it holds the inner loop's last value): its reads are all ``% m``
        shadowable = not shadows and self.p(0.25)
        if shadowable:
            direct = False
        self.emit(indent, f"for {i} in {text}:")
        sub = dict(ctx, depth=ctx["depth"] + 1, loop=True)
        sub["ints"] = [t for t in ctx["ints"] if t[0] != i] + [(i, direct)]
        sub["active"] = list(ctx["active"]) + [(i, "for", shadowable)]
        self.block(sub, indent + 1, self.r.randint(1, 3))
        if shadows:
            return
        # the loop variable leaks out of a loop with at least one trip (m >= 1): read after it
        # in the rest of this block (``% m``: a later loop over the same name may rebind it)
        if text in ("range(m)", "range(m - 1, -1, -1)", "range(0, m, 2)") and self.p(0.3) \
                and all(t[0] != i for t in ctx["ints"]):
            self.features.add("loop_var_read_after_loop")
            ctx["ints"].append((i, False))

    def s_while(self, ctx, indent):
        self.budget -= 1
        self.features.add("while")
        k, _ = self.new_index(ctx, "while")
        bound = self.choice(["n", "3", "m", "2"])
        self.emit(indent, f"{k} = 0")
        if self.p(0.3):
            self.features.add("while_data_dependent")
            v = self.choice(ctx["floats"])
            self.emit(indent, f"while {k} < {bound} and {v} < {self.choice(['2.0', '5.0', '0.5'])}:")
        else:
            self.emit(indent, f"while {k} < {bound}:")
        # the counter is incremented first, so a ``continue`` anywhere cannot spin forever
        # (no inner loop ever rebinds it: a while counter is never shadowable)
        self.emit(indent + 1, f"{k} += 1")
        sub = dict(ctx, depth=ctx["depth"] + 1, loop=True)
        sub["ints"] = [t for t in ctx["ints"] if t[0] != k] + [(k, False)]
        sub["active"] = list(ctx["active"]) + [(k, "while", False)]
        self.block(sub, indent + 1, self.r.randint(1, 3))
        # the counter is rebound here: drop a stale leaked-read entry of this name (it is
        # still an int, so reads stay valid, but keep the bookkeeping honest)

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
        i, _ = self.new_index(dict(ctx, depth=ctx["depth"] + 1), "rec")
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
        self.mark_exit(ctx, all_loops=True)
        self.emit(indent, f"if {self.cond(ctx)}:")
        self.emit(indent + 1, f"return {self.expr(ctx)}")

    def s_brk(self, ctx, indent):
        self.budget -= 1
        word = self.choice(["break", "continue"])
        self.features.add(word)
        self.mark_exit(ctx)
        self.emit(indent, f"if {self.cond(ctx)}:")
        if self.p(0.3):
            self.assign(dict(ctx, depth=ctx["depth"] + 1, floats=list(ctx["floats"])), indent + 1)
        self.emit(indent + 1, word)

    # -------------------------------------------------------------- functions
    def helper_fn(self):
        ctx = dict(floats=["u", "v"], ints=[], arrays=[], depth=0, loop=False, in_f=False,
                   active=[])
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

    def upd_fn(self):
        """The in-place helper: updates its array argument(s) with ``+=``, ``-=``, ``*=`` on
        whole arrays, slices (overlapping ones too: NumPy reads a copy) and elements, sometimes
        in a loop, and sometimes returns a float.  ``f`` calls it and reads the arrays after."""
        name, two, returns = self.upd
        um = self.p(0.5)                      # uses math (else its locals may be named math)
        sc = ["c", "d"] if not two else ["c"]
        bounded = (lambda v: f"math.tanh({v})") if um else (lambda v: v)
        self.emit(0, f"def {name}(p, q, c):" if two else f"def {name}(p, c, d):")
        ops = ["p += {k} * {S}", "p *= {F}", "p[1:] += 0.5 * p[:-1]", "p[:-1] -= 0.25 * p[1:]",
               "p[::2] *= {F}", "p[0] += {k} * {S}", "p[-1] -= 0.5 * {S} * p[0]", "loop"]
        if two:
            ops += ["p += 0.5 * q", "p[1:] -= 0.25 * q[:-1]", "q *= {F}", "q[0] += 0.5 * p[-1]"]
        if um:
            ops += ["p += 0.1 * math.sin({v})"]
        for _ in range(self.r.randint(1, 3)):
            op = self.choice(ops)
            S = bounded(self.choice(sc))
            if op == "loop":
                self.features.add("upd_loop")
                self.emit(1, "for k in range(p.shape[0]):")
                self.emit(2, f"p[k] += 0.1 * {S} * k")
                continue
            self.features.add("upd_slice" if ":" in op else "upd_element" if "[" in op
                              else "upd_whole")
            self.emit(1, op.format(k=self.choice(["0.5", "0.25", "-0.3"]), S=S,
                                   F=self.choice(_FACTORS), v=self.choice(sc)))
        if returns:
            self.emit(1, f"return 0.5 * p[0] + {bounded(self.choice(sc))}")
        self.lines.append("")
        self.lines.append("")

    def s_upd(self, ctx, indent):
        """A call of the in-place helper on a (or b), then (often) a read of what it wrote."""
        self.budget -= 1
        name, two, returns = self.upd
        self.features.add("upd_call")
        arr = self.choice(ctx["arrays"])
        if two:
            other = [x for x in ctx["arrays"] if x != arr][0]
            call = f"{name}({arr}, {other}, {self.expr(ctx, 1)})"
        else:
            call = f"{name}({arr}, {self.expr(ctx, 1)}, {self.expr(ctx, 1)})"
        if arr == "a" or (two and other == "a"):
            self.features.add("upd_input_array")
        v = self.choice(self.assignable(ctx))
        r = self.r.random()
        if returns and r < 0.4:
            self.features.add("upd_returns")
            self.emit(indent, f"{v} += {call}")
        elif returns and r < 0.55:
            # read, then the call writes the same array, within one statement
            self.features.add("upd_read_write_same_stmt")
            self.emit(indent, f"{v} = {arr}[{self.index(ctx, arr)}] * {call}")
        else:
            self.emit(indent, call)
        if self.p(0.7):
            self.features.add("upd_read_after")
            w = self.choice(self.assignable(ctx))
            if self.p(0.5):
                self.emit(indent, f"{w} += {arr}[{self.index(ctx, arr)}]")
            else:
                self.emit(indent, f"{w} = 0.5 * {w} + 0.25 * np.sum({arr})")

    def begin_f(self, locs):
        """``def f(x, y, a, n):``, ``m`` and the float locals ``locs``, each set from ``x``,
        ``y`` and ``a``; returns the context they were drawn in (both families)."""
        self.emit(0, "def f(x, y, a, n):")
        self.emit(1, "m = a.shape[0]")
        ctx0 = dict(floats=["x", "y"], ints=[], arrays=["a"], depth=0, loop=False, in_f=True,
                    active=[])
        for s in locs:
            self.emit(1, f"{s} = {self.expr(ctx0, 1)}")
        return ctx0

    def main_fn(self, local_array):
        nloc = self.r.randint(1, 3)
        locs = [f"s{k}" for k in range(nloc)]
        self.begin_f(locs)
        arrays = ["a"]
        if local_array:
            self.features.add("local_array")
            self.emit(1, "b = np.zeros(m)")
            arrays.append("b")
        ctx = dict(floats=["x", "y"] + locs, ints=[], arrays=arrays, depth=0, loop=False,
                   in_f=True, active=[])
        while self.budget > 0:
            self.stmt(ctx, 1)
        if self.upd and "upd_call" not in self.features:
            self.s_upd(ctx, 1)            # the in-place helper is always called at least once
        terms = [f"{self.choice(['', '0.5 * ', '1.5 * '])}{s}" for s in locs]
        if "b" in arrays:
            terms.append(self.choice(["np.sum(b)", "b[0]", "np.sum(b * b)"]))
        if self.p(0.3) or (self.upd and self.p(0.5)):
            terms.append("np.sum(a)")
        if self.p(0.3):
            terms.append("x * y")
        self.emit(1, f"return {' + '.join(terms)}")


# Names that coarsen's generated code uses (temporaries, adjoints, tapes, segment values,
# helpers of the generated module) and names next to which its renaming of user names lands
# (``x_bar`` -> ``x_bar_v``, ``_y`` -> ``u_y``): user variables drawn from here must not clash.
ADVERSARIAL_NAMES = [
    "x", "y", "x_bar", "x_bar_v", "y_bar", "_y", "u_y", "_t1", "_t2", "_t3", "_t1_bar", "_g1",
    "_g2", "_s1_p1", "_s1_t0", "_s1_u1", "_s2_ret1", "_ftape", "_fpos", "_itape", "_ipos",
    "_ret", "_ret_bar", "_value", "_grow", "_reserve", "tape", "tapes", "pos", "need", "out",
    "size", "np", "math", "_tape_floats", "_tape_ints", "_n1", "_closed1", "_k", "_idx",
    "_trip", "_trips", "_brk", "_cont", "_next", "_shape", "_mm1", "_red_1", "_sum_to_1",
    "_pop_array1", "g_a", "value_and_grad_f", "i", "j", "k", "m", "f", "h", "u_t1", "u_ret",
    "_push_array", "_pop_array", "_push", "_at", "_outer", "_range_len", "_returned", "_status",
    "_mm11",
]


def derived_names(name):
    out = [name + "_bar", name + "_bar_v"]
    if name.startswith("_"):
        out.append("u" + name)
    elif name.startswith("u_"):
        out.append(name[1:])
    else:
        out.append("_" + name)
    return out


def rename_adversarially(source, rng, features=None, prob=0.6):
    """``source`` with each function's parameters and locals renamed, consistently, each with
    probability ``prob``, to names that coarsen's own generated names could clash with
    (``ADVERSARIAL_NAMES``, and names next to the function's other names: ``x_bar`` next to
    ``x``, ``u_y`` next to ``_y``).  A name is never one the function reads as a global or a
    builtin (so ``np``/``math`` become locals only in functions that do not use the module),
    nor a keyword, and two variables never get the same name: the program means the same."""
    import builtins
    import keyword
    tree = ast.parse(source)
    builtin_names = set(dir(builtins)) | set(keyword.kwlist) | {"__debug__"}
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        params = [a.arg for a in fn.args.args]
        order, loaded = list(params), set()
        for node in ast.walk(fn):
            if isinstance(node, ast.Name):
                if isinstance(node.ctx, ast.Store) and node.id not in order:
                    order.append(node.id)
                elif isinstance(node.ctx, ast.Load):
                    loaded.add(node.id)
        free = {n for n in loaded if n not in order}
        forbidden = free | builtin_names
        renamed = [v for v in order if rng.random() < prob]
        kept = [v for v in order if v not in renamed]
        taken = forbidden | set(kept)
        mapping = {}
        for v in renamed:
            near = [d for u in kept + list(mapping.values()) for d in derived_names(u)]
            # a function that does not use numpy or math often gets a local named after it
            modules = [c for c in ("np", "math") if c not in taken]
            if modules and rng.random() < 0.3:
                pool = modules
            elif near and rng.random() < 0.5:
                pool = [c for c in near if c not in taken]
            else:
                pool = [c for c in ADVERSARIAL_NAMES if c not in taken]
            if not pool:
                pool = [c for c in ADVERSARIAL_NAMES if c not in taken]
            new = rng.choice(pool) if pool else v
            while new in taken:
                new += "_"
            mapping[v] = new
            taken.add(new)
        if features is not None and mapping:
            features.add("adversarial_names")
            news = set(mapping.values()) | set(kept)
            if any(n + "_bar" in news for n in news):
                features.add("name_bar_pair")
            if any(n.startswith("_") and "u" + n in news for n in news):
                features.add("name_u_pair")
            for mod in ("np", "math"):
                if mod in news:
                    features.add(f"name_{mod}_local")
            if any(n.startswith("_") for n in mapping.values()):
                features.add("name_compiler_like")
        for node in ast.walk(fn):
            if isinstance(node, ast.Name) and node.id in mapping:
                node.id = mapping[node.id]
            elif isinstance(node, ast.arg) and node.arg in mapping:
                node.arg = mapping[node.arg]
    return ast.unparse(tree) + "\n"


UPD_NAMES = ["upd", "_grow", "_reserve", "_pop_array1", "tape", "h_bar"]


def generate(seed: int, size: int | None = None, adversarial: bool | None = None) -> Program:
    """The program for ``(seed, size)``; ``size`` (statement budget, default drawn from the
    seed in 2..22) bounds the number of top-level and nested statements.

    ``adversarial``: rename parameters and locals with :func:`rename_adversarially` (default:
    drawn from the seed, 3 programs in 4).  The renaming draws from its own generator, so
    ``generate(seed, size, adversarial=False)`` is the same program with plain names (and the
    same arguments): a seed that fails only with adversarial names is a naming bug."""
    r, rn, adversarial, size = random_streams(seed, f"names-{seed}-{size}", adversarial, size, 22)
    helper = r.random() < 0.45
    local_array = r.random() < 0.5
    upd = None
    if r.random() < 0.35:
        upd = (r.choice(UPD_NAMES), local_array and r.random() < 0.6, r.random() < 0.5)
    g = Gen(r, size, helper, upd)
    g.lines += ["import math", "", "import numpy as np", "", ""]
    if helper:
        g.features.add("helper")
        g.helper_fn()
    if upd:
        g.features.add("upd_helper")
        g.upd_fn()
    g.main_fn(local_array)
    return finish_program(g, r, rn, seed, size, adversarial, "", 5)


def random_streams(key, names_key, adversarial, size, max_size):
    """A family's two random streams (the program's, ``key``; the renaming's, ``names_key``),
    ``adversarial`` drawn from the second where None (3 in 4), ``size`` from the first where
    None (2 to ``max_size``), in that order (both families)."""
    r, rn = random.Random(key), random.Random(names_key)
    if adversarial is None:
        adversarial = rn.random() < 0.75
    if size is None:
        size = r.randint(2, max_size)
    return r, rn, adversarial, size


#: the arrays' lengths ``(lo, hi)`` where a soak asks for others than the family's 1 to
#: ``max_len`` (``fuzz_soak.py --lengths``; the custom family draws its own): from 8 values on,
#: the sums that ``lane_sums`` and ``dot_loops`` add in lanes take another order than the
#: loop's.  None: the family's (a program's arguments are then as they always were)
LENGTHS = None


def finish_program(g, r, rn, seed, size, adversarial, family, max_len):
    """The ``Program`` of a generator ``g`` done writing: its lines joined, renamed with
    ``rn`` when ``adversarial``, headed by the seed, and arguments drawn from ``r`` (an array
    of 1 to ``max_len`` values).  Shared by both families (``tests/progen_reductions.py``)."""
    src = "\n".join(g.lines) + "\n"
    if adversarial:
        src = rename_adversarially(src, rn, g.features)
    src = f"# coarsen fuzz program{family}: seed={seed} size={size}\n" + src
    L = r.randint(1, max_len)
    if LENGTHS is not None:
        L = r.randint(*LENGTHS)
    a = np.array([round(r.uniform(-1.2, 1.2), 3) for _ in range(L)])
    x = round(r.uniform(-1.5, 1.5), 3)
    y = round(r.uniform(-1.5, 1.5), 3)
    n = r.randint(0, 4)
    return Program(seed, size, src, x, y, a, n, g.features)


# ======================================================================================
# the differential check
# ======================================================================================
