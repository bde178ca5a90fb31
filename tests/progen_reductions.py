"""The fuzzer's second family: programs shaped like losses over data (reduction loops).

Requires: ``tests.progen_generate`` (``Gen``'s expressions, conditions and in-range indices,
``rename_adversarially``, ``Program``).
Guarantees: ``generate_reductions(seed, size=None, adversarial=None)`` returns a
:class:`~tests.progen_generate.Program` with the same signature as the first family
(``f(x, y, a, n)``: two floats, a 1-D float64 array of length ``m``, an int), deterministic per
``(seed, size)``, drawn from its own random streams (``"red-<seed>"``), so that the first
family's seeds, which the fixed fuzz tests and the soaks' reports name, are unchanged.

Why a second family: the first family makes programs of scalar control flow, and it makes
few loops that are reductions (about 1 in 15, none nested).  The optimizations that reverse
such loops trip by trip (``coarsen.analysis.reductions``: fused and nested reduction loops,
accumulation chains, private scratch arrays, re-read elements) are then checked only by
hand-written shapes.  Here every program has one or two loops over ``a`` whose trips talk to
each other, mostly, only through accumulators, as a loss over data points, a pair potential or
a double sum does, and sometimes not (the negative cases the analysis must refuse):

* trip locals from ``a[i]``, ``a[(i + 1) % m]``, ``x``, ``y`` (read after, in the same trip);
* accumulations ``s += e``, ``s -= e``, ``s = s + e``, ``s *= 0.95 + 0.05 * tanh(e)``,
  ``s = max(s, e)`` and ``min``, in branches too, into one accumulator (2 programs in 3; the
  analysis takes loops with one, of ``+=``/``-=``) or two or three;
* inner loops: nested reductions into the outer accumulators (``range(m)``,
  ``range(i + 1, m)`` pairs, ``range(i)``, ``range(n)``), nested two deep; a dot product into a
  trip-local sum read after the inner loop (logistic regression's ``z``); a private scratch
  array written whole by one inner loop and read by the next; an accumulator updated before
  and after an inner loop that adds to it (an accumulation chain);
* element writes ``b[i] = e`` / ``b[i] += e`` at the trip's own index, read back in the trip;
* negative cases: ``if c: continue``, an expression that reads an accumulator (the loop is then
  not a reduction), a carried recurrence ``p = 0.5 * p + e``, a write at another trip's index.

Values stay bounded: factors of multiplicative updates lie in (0.9, 1.0); ``check_program``
still discards what overflows.  ``features`` names what each program contains.
"""
from __future__ import annotations



from tests.progen_generate import Gen, Program, finish_program, random_streams

__all__ = ["generate_reductions"]

# outer loops: (range text, every index in [0, m))
_OUTER = [("range(m)", True), ("range(m)", True), ("range(m - 1, -1, -1)", True),
          ("range(1, m)", True), ("range(0, m, 2)", True), ("range(n)", False)]


class ReductionGen(Gen):
    """``Gen`` with reduction loops: see the module docstring."""

    def __init__(self, rng, size, helper):
        super().__init__(rng, size, helper)
        self.nloc = 0
        self.nloop = 0

    def fresh(self, stem):
        self.nloc += 1
        return f"{stem}{self.nloc}"

    def loop_name(self):
        self.nloop += 1
        return f"i{self.nloop}"

    # -------------------------------------------------------------- trip statements
    def acc_expr(self, ctx):
        """An expression of the trip's values (it reads an accumulator only in ``ctx``'s
        negative cases, where one was put into ``floats``)."""
        return self.expr(ctx, self.choice([1, 2, 2]))

    def accumulate(self, ctx, indent, accs):
        s = self.choice(accs)
        e = self.acc_expr(ctx)
        kind = self.r.choices(["add", "sub", "plain", "mul", "max", "min"], [5, 2, 1.5, 0.3, 0.2, 0.2])[0]
        self.features.add("red_" + kind)
        if kind == "add":
            self.emit(indent, f"{s} += {e}")
        elif kind == "sub":
            self.emit(indent, f"{s} -= {e}")
        elif kind == "plain":
            self.emit(indent, f"{s} = {s} + {e}")
        elif kind == "mul":
            self.emit(indent, f"{s} *= 0.95 + 0.05 * math.tanh({e})")
        else:
            self.emit(indent, f"{s} = {kind}({s}, {e})")

    def trip_block(self, ctx, indent, accs, count, level):
        ctx = dict(ctx, floats=list(ctx["floats"]), ints=list(ctx["ints"]))
        start = len(self.lines)
        for _ in range(count):
            self.trip_stmt(ctx, indent, accs, level)
        if len(self.lines) == start:          # ("read_acc" emits nothing)
            self.accumulate(ctx, indent, accs)

    def trip_stmt(self, ctx, indent, accs, level):
        options = [("local", 3), ("acc", 4), ("if", 1.5), ("inner", 2.5 if level < 3 else 0),
                   ("write", 0.6 if ctx["out"] and ctx["direct"] else 0),
                   ("continue", 0.15), ("carried", 0.2), ("read_acc", 0.15),
                   ("write_other", 0.2 if ctx["out"] else 0)]
        kinds, weights = zip(*options)
        kind = self.r.choices(kinds, weights)[0]
        if kind == "local":
            t = self.fresh("t")
            self.emit(indent, f"{t} = {self.acc_expr(ctx)}")
            ctx["floats"].append(t)
        elif kind == "acc":
            self.accumulate(ctx, indent, accs)
        elif kind == "if":
            self.features.add("red_branch")
            self.emit(indent, f"if {self.cond(ctx)}:")
            self.trip_block(ctx, indent + 1, accs, self.r.randint(1, 2), level + 1)
            if self.p(0.6):
                self.emit(indent, "else:")
                self.trip_block(ctx, indent + 1, accs, self.r.randint(1, 2), level + 1)
        elif kind == "inner":
            self.inner_loop(ctx, indent, accs, level)
        elif kind == "write":
            self.features.add("red_write")
            i = ctx["direct"][-1]
            self.emit(indent, f"{ctx['out']}[{i}] {self.choice(['=', '+='])} {self.acc_expr(ctx)}")
            ctx["floats"].append(f"{ctx['out']}[{i}]")
        elif kind == "write_other":
            self.features.add("red_write_other")
            i = ctx["ints"][-1][0]
            self.emit(indent, f"{ctx['out']}[({i} + 1) % m] += {self.acc_expr(ctx)}")
        elif kind == "continue":
            self.features.add("red_continue")
            self.emit(indent, f"if {self.cond(ctx)}:")
            self.emit(indent + 1, "continue")
        elif kind == "carried":
            self.features.add("red_carried")
            p = ctx["carried"]
            self.emit(indent, f"{p} = 0.5 * {p} + {self.acc_expr(ctx)}")
            ctx["floats"].append(p)
        else:
            self.features.add("red_reads_acc")
            ctx["floats"].append(self.choice(accs))

    def inner_loop(self, ctx, indent, accs, level):
        i, i_direct = ctx["ints"][-1]
        j = self.loop_name()
        shape = self.r.choices(["nested", "dot", "scratch", "chain"],
                               [4, 2, 1 if ctx["scratch"] else 0, 1.5])[0]
        ranges = [("range(m)", True), (f"range({i} + 1, m)", True), ("range(n)", False),
                  ("range(m - 1, -1, -1)", True)]
        if i_direct:
            ranges.append((f"range({i})", True))
        text, direct = self.choice(ranges)
        sub = dict(ctx, ints=ctx["ints"] + [(j, direct)], floats=list(ctx["floats"]),
                   direct=ctx["direct"] + ([j] if direct else []), depth=ctx["depth"] + 1)
        if shape == "nested" or shape == "chain":
            self.features.add("red_nested" if level == 1 else "red_nested_deep")
            if shape == "chain":
                self.features.add("red_chain")
                self.accumulate(ctx, indent, accs)
            if self.p(0.7):
                # reads no outer-trip local (what a nested reduction loop may read)
                sub["floats"] = [v for v in sub["floats"] if v in ("x", "y")]
            self.emit(indent, f"for {j} in {text}:")
            self.trip_block(sub, indent + 1, accs, self.r.randint(1, 3), level + 1)
            if shape == "chain":
                self.accumulate(ctx, indent, accs)
        elif shape == "dot":
            self.features.add("red_dot")
            z = self.fresh("z")
            self.emit(indent, f"{z} = {self.leaf(ctx)}")
            self.emit(indent, f"for {j} in range(m):")
            sub = dict(sub, ints=ctx["ints"] + [(j, True)])
            self.emit(indent + 1, f"{z} += a[{j}] * {self.acc_expr(sub)}")
            ctx["floats"].append(f"math.tanh({z})")
        else:
            self.features.add("red_scratch")
            c = ctx["scratch"]
            self.emit(indent, f"for {j} in range(m):")
            sub = dict(sub, ints=ctx["ints"] + [(j, True)])
            self.emit(indent + 1, f"{c}[{j}] = {self.acc_expr(sub)}")
            k = self.loop_name()
            sub = dict(sub, ints=ctx["ints"] + [(k, True)])
            self.emit(indent, f"for {k} in range(m):")
            s = self.choice(accs)
            self.emit(indent + 1, f"{s} += {c}[{k}] * {self.acc_expr(sub)}")

    # -------------------------------------------------------------- the function
    def reduction_loop(self, indent, accs, out, scratch, carried):
        i = self.loop_name()
        text, direct = self.choice(_OUTER)
        ctx = dict(floats=["x", "y"], ints=[(i, direct)], arrays=["a"], depth=1, loop=True,
                   in_f=True, active=[], out=out, scratch=scratch, carried=carried,
                   direct=[i] if direct else [])
        self.emit(indent, f"for {i} in {text}:")
        self.trip_block(ctx, indent + 1, accs, max(2, self.budget), 1)

    def main_fn(self):
        accs = [f"s{k}" for k in range(self.choice([1, 1, 1, 1, 2, 3]))]
        ctx0 = self.begin_f(accs)
        out = "b" if self.p(0.5) else None
        scratch = "c" if self.p(0.4) else None
        for arr in (out, scratch):
            if arr:
                self.emit(1, f"{arr} = np.zeros(m)")
        carried = "p"
        self.emit(1, f"{carried} = {self.leaf(ctx0)}")
        for _ in range(1 if self.p(0.6) else 2):
            self.reduction_loop(1, accs, out, scratch, carried)
        terms = [f"{self.choice(['', '0.5 * ', '1.5 * '])}{s}" for s in accs] + [f"0.1 * {carried}"]
        if out:
            terms.append(self.choice(["np.sum(b)", "b[0]", "np.sum(b * b)"]))
        self.emit(1, f"return {' + '.join(terms)}")


def generate_reductions(seed: int, size: int | None = None,
                        adversarial: bool | None = None) -> Program:
    """The reduction-family program for ``(seed, size)``; ``size`` (statements per trip,
    default drawn in 2..6).  ``adversarial`` as for ``progen_generate.generate``."""
    r, rn, adversarial, size = random_streams(f"red-{seed}", f"red-names-{seed}-{size}",
                                              adversarial, size, 6)
    helper = r.random() < 0.25
    g = ReductionGen(r, size, helper)
    g.features.add("reduction_family")
    g.lines += ["import math", "", "import numpy as np", "", ""]
    if helper:
        g.features.add("helper")
        g.helper_fn()
    g.main_fn()
    return finish_program(g, r, rn, seed, size, adversarial, " (reductions)", 6)
