"""The fuzzer's custom-rule family: programs that call functions with ``coarsen.custom_vjp`` /
``coarsen.custom_jvp`` rules written with arrays, loops and in-place updates.

Requires: ``tests.progen_generate`` (``Program``, ``random_streams``, the adversarial name
pools) and ``tests.progen`` (``minimize``'s candidates, for :func:`minimize_custom`).
Guarantees: ``generate_custom(seed, size=None, adversarial=None)`` returns a
:class:`~tests.progen_generate.Program` with the other families' signature (``f(x, y, a, n)``:
two floats, a 1-D float64 array of length ``m``, an int), deterministic per ``(seed, size)``,
drawn from its own random streams (``"custom-<seed>"``), so the same seeds, checks
(``progen.check_program``) and soak report (``tests/fuzz_soak.py --family custom``) apply.
``size`` is the number of statements of ``f`` (2 to 9).

Why: a custom rule's body is lowered apart from the function that calls it (the backward rule
of a ``custom_vjp`` runs in the reverse sweep, a ``custom_jvp`` rule is inlined), and the calling
code around it is rewritten by passes that make names of their own (scalarization of array
expressions into loop nests and in-place updates into stores on the cpu target): the names the
rule's body took must not meet the names those passes make later.  Hand-written tests
(``tests/ad/test_custom_rules.py``) cover few such shapes.

Each program has one or two *kernels*: a function ``K(v[, w][, c])`` of a 1-D array ``v``, maybe
an array ``w`` of ``v``'s length and a float ``c``, decorated with ``coarsen.custom_vjp`` (with
``K_fwd``/``K_bwd``) or ``coarsen.custom_jvp`` (with ``K_jvp``), returning a float or an array of
``v``'s length.  The function and its rules are generated together from a small algebra, so the
rules are CORRECT derivatives and the oracle (finite differences of the plain program, in which
``K`` runs as itself) checks them:

* a kernel is a sum of 1 to 3 *terms*, each ``coef * T``: ``T`` an element-wise map
  ``phi(v_i, w_i, c)`` from ``TERMS`` (``v*v``, ``c*v*v``, ``sin(v)*w``, ``tanh(v)``,
  ``log(1+v*v)``, ``v*w``, ``cos(c*v)``, ``sin(v*w + c)``, ...; each with its partials in
  ``v``, ``w`` and ``c``) summed (float output) or kept (array output); or a *shaped* term:
  neighbour products ``sum v_i v_{i+1}`` and a decaying recurrence ``q = 0.5*q + phi(v_i)``
  (float output), a shift ``out[1:] += beta * v[:-1]`` and a running sum
  ``out_i += sum_{j<=i} phi(v_j)`` (array output);
* every function of a kernel is written in styles drawn per term: whole-array expressions
  (``np.sum(phi(v))``), loops over ``v.shape[0]`` accumulating (``s += ...``, ``out[i] += ...``),
  in-place updates (``t = phi(v); t *= 2.0; out += t``; ``out[1:] += ...``), ``x.copy()``;
  ``K_fwd`` computes its output itself or by calling ``K``, saves residuals as a tuple (in any
  order, one of them maybe a ``.copy()``, partials precomputed as arrays) or as one value;
  ``K_bwd`` starts its cotangents from ``np.zeros``, ``np.zeros_like``, ``v * 0.0`` or the first
  term, adds the terms with ``+=`` on whole arrays, slices and elements (reverse loops for the
  shaped terms), sometimes without ``g`` and then ``ct *= g`` at the end, sometimes scales a
  precomputed residual in place (``d1 *= g``); ``K_jvp`` computes the output and the tangent
  the same ways.  ``K`` itself (what the oracle runs, in extended precision: NumPy keeps
  ``longdouble`` where ``math`` and ``np.zeros(n)`` would round to float64) uses only ``np``
  functions, ``np.zeros_like`` and ``.copy()``.

``f`` scalarizes and updates in place around the calls: whole-array expressions
(``np.sin(a * x) * y + 1.0``), copies updated in place (``b = a.copy(); b *= 2.0``,
``b[1:] += 0.5 * a[:-1]``, ``b[:-1] -= 0.25 * b[1:]``, ``b[::2] *= 0.9``, element updates, loops
over ``m`` writing elements, the input ``a`` written too), kernel calls on names, on array
expressions (``K(np.sin(a * a) * x + 0.5, b, y)``), on slices (``K(b[1:], a[:-1], x)``), in loops
over ``range(n)``, under a branch, twice, with a keyword argument; arrays passed to a kernel are
written after the call; array outputs are updated in place and read.  Adversarial names
(3 programs in 4, :func:`rename_custom`): each function's variables, the rules' included, renamed
to names the compiler makes (``_t1``, ``_t6``, ``_i1``, ``_pa1``, ``_fpos``, ``x_bar``, a rule's
placeholder names ``_K_bwd_res0``, ``_K_bwd_g``...) or to names another function of the program
uses (``f``'s locals named like the rule's); kernels themselves get names like ``t1`` or ``h``.

:func:`minimize_custom` shrinks a failing program without touching the kernels' rules (which
would make them wrong): it edits ``f`` only, then drops kernels ``f`` no longer calls.
``features`` names what each program contains.
"""
from __future__ import annotations

import ast
import builtins
import keyword

import numpy as np

from tests.progen_custom_kernels import TERMS, Kernel, Lines, fresh
from tests.progen_generate import ADVERSARIAL_NAMES, Program, derived_names, random_streams

__all__ = ["generate_custom", "minimize_custom", "rename_custom", "TERMS"]

# names the compiler makes or derives (on top of progen_generate.ADVERSARIAL_NAMES): the
# temporaries of scalarization and in-place rewriting (``_t<k>``, ``_i<k>``), the hoisting
# pass's, forward mode's and checkpointing's, and the custom-call placeholders
EXTRA_NAMES = ["_t4", "_t5", "_t6", "_t7", "_t8", "_t9", "_t10", "_t12", "_t15", "_i1", "_i2",
               "_i3", "_h1", "_tab1", "_pa1", "_pa2", "_cut1", "_fpos", "_dot1", "_seed",
               "_stop", "t_bar", "g_bar", "res", "g", "ct", "primals", "tangents"]
# kernel names: plain, and adversarial (their rules' placeholders are ``_<rule>_res0``,
# ``_<rule>_g``: a kernel ``t1`` has a rule ``t1_bwd``)
PLAIN_KERNELS = ["energy", "wsum", "smooth", "penalty", "mapk", "blend"]
ADV_KERNELS = ["t1", "h", "_t2", "g", "i1", "res", "q1", "_i1", "pa1", "fpos"]
# f's locals: plain names, many of them the rules' own
F_FLOATS = ["s", "q", "acc", "tan", "out", "r", "z"]
F_ARRAYS = ["b", "d", "ct", "t", "u", "p", "e"]



class CallerGen:
    """``f(x, y, a, n)``: array code that scalarizes and updates in place around kernel calls."""

    def __init__(self, r, size, kernels):
        self.r = r
        self.size = size
        self.kernels = kernels
        self.features = set()
        self.lines = Lines()
        self.floats = ["x", "y"]
        self.arrays = ["a"]
        self.scalars = []           # f's float locals (returned)
        self.called = set()
        self.fnames = list(F_FLOATS)
        self.anames = list(F_ARRAYS)
        r.shuffle(self.fnames)
        r.shuffle(self.anames)
        self.nf = 0
        self.na = 0
        self.kw = set()             # kernels called with a keyword argument
        self.outputs = set()        # arrays a kernel's output reaches (always returned)

    def p(self, prob):
        return self.r.random() < prob

    def emit(self, ind, text):
        self.lines.emit(ind, text)

    def new_float(self):
        self.nf += 1
        base = self.fnames[(self.nf - 1) % len(self.fnames)]
        return base if self.nf <= len(self.fnames) else f"{base}{self.nf}"

    def new_array(self):
        self.na += 1
        base = self.anames[(self.na - 1) % len(self.anames)]
        return base if self.na <= len(self.anames) else f"{base}{self.na}"

    # ------------------------------------------------------------------ expressions
    def scalar(self, depth=1):
        r = self.r.random()
        if depth <= 0 or r < 0.45:
            return self.r.choice(self.floats + ["0.5", "1.3", "-0.7"])
        if r < 0.6:
            return f"math.sin({self.scalar(depth - 1)})"
        if r < 0.75:
            arr = self.r.choice(self.arrays)
            return self.r.choice([f"np.sum({arr})", f"{arr}[0]", f"{arr}[-1]",
                                  f"np.sum({arr} * {arr})"])
        return f"{self.scalar(depth - 1)} * {self.scalar(depth - 1)}"

    def bounded(self):
        """A float that stays in a modest range (a kernel's ``c``)."""
        return self.r.choice(["x", "y", "0.5", "1.3", "math.sin(x * y)", "0.5 * x + y",
                              f"math.tanh({self.scalar()})"])

    def arr_expr(self, depth=2, sl=""):
        """An array expression of length m (``sl`` slices every array read: its length)."""
        A = lambda: self.r.choice(self.arrays) + sl  # noqa: E731
        if depth <= 0 or self.p(0.2):
            return A()
        sub = lambda: self.arr_expr(depth - 1, sl)  # noqa: E731
        k = self.r.randrange(9)
        self.features.add("f_array_expr")
        if k == 0:
            return f"np.sin({sub()} * {self.r.choice(self.floats)}) * {self.r.choice(self.floats)} + 1.0"
        if k == 1:
            return f"{sub()} * {sub()} + {self.r.choice(self.floats)}"
        if k == 2:
            return f"np.tanh({sub()}) * {A()}"
        if k == 3:
            return f"np.cos({sub()}) * {self.r.choice(self.floats)} - 0.5"
        if k == 4:
            return f"np.exp(np.tanh({sub()}))"
        if k == 5:
            e = sub()
            return f"np.sqrt(1.0 + ({e}) * ({e}))"
        if k == 6:
            return f"({sub()} + {sub()}) * 0.5"
        if k == 7:
            return f"np.sin({A()} * {A()})"
        return f"{self.r.choice(['0.5', '-0.3', '1.5'])} * {sub()}"

    def call(self, K, sl=""):
        """A call of kernel ``K`` on arrays of length ``m`` (or ``len(a[sl])``)."""
        args = []
        for prm in K.params:
            if prm == "c":
                args.append(self.bounded())
                continue
            if self.p(0.4):
                self.features.add("call_on_expression")
                args.append(self.arr_expr(2, sl))
            else:
                args.append(self.r.choice(self.arrays) + sl)
        if sl:
            self.features.add("call_on_slice")
        if K.name in self.called:
            self.features.add("call_twice")
        self.called.add(K.name)
        if "c" in K.params and self.p(0.15):
            self.features.add("call_keyword")
            self.kw.add(K.name)
            return f"{K.name}({', '.join(args[:-1] + ['c=' + args[-1]])})"
        return f"{K.name}({', '.join(args)})"

    def slice_pair(self):
        return self.r.choice(["", "", "", "[1:]", "[:-1]", "[::2]"])

    # ------------------------------------------------------------------ statements
    def local_arrays(self):
        return [x for x in self.arrays if x != "a"]

    def inplace(self, ind, arr=None):
        if arr is None:
            locs = self.local_arrays()
            arr = self.r.choice(locs) if locs and self.p(0.85) else "a"
        if arr == "a":
            self.features.add("f_writes_input")
        other = self.r.choice(self.arrays)
        ops = [f"{arr} *= {self.r.choice(['2.0', '0.5', '-0.75', 'y'])}",
               f"{arr} += {self.r.choice(['0.5', 'x'])} * {self.arr_expr(1)}",
               f"{arr} -= 0.25 * np.sin({arr})",
               f"{arr}[1:] += 0.5 * {other}[:-1]",
               f"{arr}[:-1] -= 0.25 * {arr}[1:]",
               f"{arr}[::2] *= 0.9",
               f"{arr}[0] += {self.scalar()}",
               f"{arr}[-1] = {self.r.choice(self.floats)} * {arr}[0]"]
        op = self.r.choice(ops)
        self.features.add("f_inplace_slice" if ":" in op.split("=")[0] else
                          "f_inplace_element" if "[" in op.split("=")[0] else "f_inplace_whole")
        self.emit(ind, op)

    def stmt(self, ind):
        kinds = [("new_array", 2.0), ("copy_update", 1.5), ("inplace", 2.0), ("call_scalar", 3.0),
                 ("call_array", 2.0), ("loop_call", 1.2), ("elem_loop", 1.0),
                 ("branch_call", 0.5), ("scalar", 0.8)]
        kinds = [(k, w) for k, w in kinds
                 if not (k == "call_scalar" and not self.sk) and not (k == "call_array" and not self.ak)
                 and not (k == "inplace" and not self.local_arrays() and not self.p(0.3))]
        names, weights = zip(*kinds)
        getattr(self, "s_" + self.r.choices(names, weights)[0])(ind)

    def s_new_array(self, ind):
        b = self.new_array()
        self.emit(ind, f"{b} = {fresh(self.arr_expr())}")     # never an alias (a view written later is refused)
        self.arrays.append(b)

    def s_copy_update(self, ind):
        b = self.new_array()
        self.features.add("f_copy")
        self.emit(ind, f"{b} = {self.r.choice(self.arrays)}.copy()")
        self.arrays.append(b)
        for _ in range(self.r.randint(1, 2)):
            self.inplace(ind, b)

    def s_inplace(self, ind):
        self.inplace(ind)

    def s_scalar(self, ind):
        s = self.new_float()
        self.emit(ind, f"{s} = {self.scalar(2)}")
        self.floats.append(s)
        self.scalars.append(s)

    def s_call_scalar(self, ind, K=None):
        K = K or self.r.choice(self.sk)
        c = self.call(K, self.slice_pair())
        mine = [s for s in self.scalars]
        if mine and self.p(0.5):
            s = self.r.choice(mine)
            self.emit(ind, self.r.choice([f"{s} += {c}", f"{s} = 0.5 * {s} + {c}",
                                          f"{s} -= {self.r.choice(self.floats)} * {c}"]))
        else:
            s = self.new_float()
            self.emit(ind, f"{s} = {c}")
            self.floats.append(s)
            self.scalars.append(s)
        self.after_call(ind, c)

    def after_call(self, ind, c):
        """Sometimes write an array the call read (the rules saw it as it was)."""
        if self.p(0.35):
            args = [x for x in self.local_arrays() + ["a"] if f"({x}" in c or f" {x}" in c]
            if args:
                self.features.add("arg_written_after_call")
                self.inplace(ind, self.r.choice(args))

    def s_call_array(self, ind, K=None):
        K = K or self.r.choice(self.ak)
        locs = self.local_arrays()
        r = self.r.random()
        if locs and r < 0.25:
            b = self.r.choice(locs)
            sl = self.slice_pair()
            self.features.add("array_out_added_in_place")
            c = self.call(K, sl)
            self.emit(ind, f"{b}{sl} += {c}")
            self.outputs.add(b)
        else:
            b = self.new_array()
            c = self.call(K)
            self.emit(ind, f"{b} = {c}")
            self.arrays.append(b)
            self.outputs.add(b)
            if self.p(0.5):
                self.features.add("array_out_updated")
                self.inplace(ind, b)
        self.after_call(ind, c)

    def s_loop_call(self, ind):
        k = self.r.choice(["k", "i", "j"])
        if self.sk and (not self.ak or self.p(0.6)):
            K = self.r.choice(self.sk)
            s = self.new_float()
            self.emit(ind, f"{s} = 0.0")
            self.floats.append(s)
            self.scalars.append(s)
            self.emit(ind, f"for {k} in range(n):")
            self.features.add("call_in_loop")
            saved = self.floats
            self.floats = self.floats + [f"({k} + 0.5)"]
            c = self.call(K, self.slice_pair())
            self.floats = saved
            self.emit(ind + 1, f"{s} += {c}")
        else:
            K = self.r.choice(self.ak)
            locs = self.local_arrays()
            if not locs:
                return self.s_copy_update(ind)
            b = self.r.choice(locs)
            self.features.add("call_in_loop")
            self.emit(ind, f"for {k} in range(n):")
            c = self.call(K)
            self.emit(ind + 1, f"{b} = 0.5 * {b} + 0.25 * {c}")
            self.outputs.add(b)

    def s_elem_loop(self, ind):
        locs = self.local_arrays()
        k = self.r.choice(["i", "k", "j"])
        self.features.add("f_element_loop")
        if locs and self.p(0.6):
            b = self.r.choice(locs)
            o = self.r.choice(self.arrays)
            self.emit(ind, f"for {k} in range(m):")
            self.emit(ind + 1, self.r.choice([f"{b}[{k}] = {self.r.choice(self.floats)} * {b}[{k}] + math.sin({o}[{k}])",
                                              f"{b}[{k}] += 0.5 * {o}[{k}] * {o}[{k}]",
                                              f"{b}[{k}] *= 0.9"]))
        else:
            s = self.new_float()
            o = self.r.choice(self.arrays)
            self.emit(ind, f"{s} = 0.0")
            self.emit(ind, f"for {k} in range(m):")
            self.emit(ind + 1, f"{s} += {o}[{k}] * {self.r.choice(self.arrays)}[{k}]")
            self.floats.append(s)
            self.scalars.append(s)

    def s_branch_call(self, ind):
        if not self.sk:
            return self.s_call_array(ind)
        K = self.r.choice(self.sk)
        s = self.new_float()
        self.features.add("call_in_branch")
        self.emit(ind, f"{s} = 0.0")
        self.emit(ind, f"if {self.r.choice(self.floats)} > {self.r.choice(['0.2', '-0.4', '0.0'])}:")
        self.emit(ind + 1, f"{s} = {self.call(K)}")
        self.emit(ind, "else:")
        self.emit(ind + 1, f"{s} = {self.scalar()}")
        self.floats.append(s)
        self.scalars.append(s)

    def write(self):
        self.sk = [K for K in self.kernels if K.out == "scalar"]
        self.ak = [K for K in self.kernels if K.out == "array"]
        self.emit(0, "def f(x, y, a, n):")
        self.emit(1, "m = a.shape[0]")
        for _ in range(self.size):
            self.stmt(1)
        # a call in the return statement: nothing of f after the rule (its temporaries are
        # then the function's last)
        sv = [K for K in self.kernels if K.out == "scalar" and K.kind == "vjp"]
        alone = bool(sv) and self.p(0.45)
        last = self.r.choice(sv) if alone else self.r.choice(self.kernels) if self.p(0.35) else None
        for K in self.kernels:                 # every kernel is called at least once
            if K.name not in self.called and K is not last:
                (self.s_call_scalar if K.out == "scalar" else self.s_call_array)(1, K)
        if alone:
            # ``return K(...)``: the backward rule's temporaries are the last the function
            # makes (what scalarization's new names on cpu must not meet); f's other values
            # reach the call through an array it reads
            self.features.add("call_is_return")
            if self.scalars:
                X = self.r.choice(self.local_arrays() or ["a"])
                self.features.add("f_inplace_element")
                self.emit(1, f"{X}[0] += {' + '.join(self.scalars)}")
            sl = self.slice_pair()
            c = self.call(last, sl)
            self.emit(1, f"return {c}")
            return self.lines.lines
        terms = [f"{self.r.choice(['', '0.5 * ', '1.5 * '])}{s}" for s in self.scalars]
        if last is not None:
            self.features.add("call_in_return")
            c = self.call(last, self.slice_pair() if last.out == "scalar" else "")
            if last.out == "array":
                c = self.r.choice([f"np.sum({c})", f"np.sum({c} * {self.r.choice(self.arrays)})",
                                   f"{c}[0]"])
            terms.insert(0 if self.p(0.7) else len(terms), c)
        for b in self.local_arrays():
            if self.p(0.6) or b in self.outputs:
                terms.append(self.r.choice([f"np.sum({b} * {b})", f"np.sum({b})", f"{b}[0]",
                                            f"0.5 * np.sum({b} * a)"]))
        if "f_writes_input" in self.features or self.p(0.2):
            terms.append("0.1 * np.sum(a)")
        if not terms:
            terms.append("x * y")
        self.emit(1, f"return {' + '.join(terms)}")
        return self.lines.lines


# ======================================================================================
# the rules checked in plain Python (the generator's own test)
# ======================================================================================

def rule_errors(prog, trials=2, seed=0):
    """The kernels of ``prog`` (generated with plain names: the float parameter is ``c``)
    checked without coarsen: each rule run as plain Python on random
    arguments against central differences of the kernel itself (``K_fwd``'s and ``K_jvp``'s
    output against ``K``'s; ``K_bwd``'s cotangents against the derivative of ``<gbar, K>``,
    ``K_jvp``'s tangent against the directional derivative).  Returns a list of messages (empty
    when every rule is right to 1e-6)."""
    import importlib
    import inspect

    import coarsen
    prog.load()
    mod = importlib.import_module(prog.name)
    rng = np.random.default_rng(seed)
    errors = []
    for obj in vars(mod).values():
        if not isinstance(obj, (coarsen.custom_vjp, coarsen.custom_jvp)):
            continue
        params = list(inspect.signature(obj.fun).parameters)
        for _ in range(trials):
            m = int(rng.integers(1, 6))
            args = [rng.uniform(-1.0, 1.0, m) for _ in params]
            if params[-1] == "c":
                args[-1] = float(rng.uniform(-1.0, 1.0))
            out = obj.fun(*[_cp(a) for a in args])
            gbar = rng.uniform(-1.0, 1.0, np.shape(out)) if np.ndim(out) else float(rng.uniform(-1, 1))

            def loss(xs):
                return float(np.sum(np.asarray(obj.fun(*xs)) * gbar))
            fd = []
            for k, a in enumerate(args):
                if isinstance(a, float):
                    fd.append(_central(lambda t, k=k: loss(args[:k] + [t] + args[k + 1:]), a))
                else:
                    fd.append(np.array([_central(lambda t, k=k, j=j: loss(
                        args[:k] + [_with(args[k], j, t)] + args[k + 1:]), a[j])
                        for j in range(a.size)]))
            if isinstance(obj, coarsen.custom_vjp):
                o2, res = obj.fwd(*[_cp(a) for a in args])
                got = obj.bwd(res, _cp(gbar))
                pairs = list(zip(params, got, fd))
            else:
                direction = [_cp(a) * 0.0 + rng.uniform(-1.0, 1.0, np.shape(a)) if np.ndim(a)
                             else float(rng.uniform(-1.0, 1.0)) for a in args]
                o2, tan = obj.jvp(tuple(_cp(a) for a in args), tuple(_cp(d) for d in direction))
                exp = sum(float(np.sum(f * d)) for f, d in zip(fd, direction))
                pairs = [("tangent", float(np.sum(np.asarray(tan) * gbar)), exp)]
            if not np.allclose(np.asarray(o2), np.asarray(out), rtol=1e-12, atol=1e-12):
                errors.append(f"{obj.__name__}: the rule's output {o2!r} is not K's {out!r}")
            for name, g_, e_ in pairs:
                if np.shape(g_) != np.shape(e_) or not np.allclose(g_, e_, rtol=1e-6, atol=1e-7):
                    errors.append(f"{obj.__name__} ({type(obj).__name__}): {name}: rule {g_!r}, "
                                  f"finite differences {e_!r} at {args!r}")
    return errors


def _cp(a):
    return a.copy() if isinstance(a, np.ndarray) else a


def _with(a, j, t):
    b = a.copy()
    b[j] = t
    return b


def _central(fun, x, h=1e-5):
    return (fun(x + h) - fun(x - h)) / (2 * h)


# ======================================================================================
# adversarial names
# ======================================================================================

def rename_custom(source, rng, features=None, prob=0.6, frozen=None):
    """``source`` with each function's parameters and locals renamed, consistently, each with
    probability ``prob``: as ``progen_generate.rename_adversarially``, with the compiler's
    names of this family's passes (``EXTRA_NAMES``, the custom calls' placeholders of the
    program's rules) and, often, a name another function of the program uses (``f``'s locals
    named like a rule's).  ``frozen``: function name -> names not to rename (a kernel called
    with keyword arguments keeps its parameters).  The program means the same."""
    tree = ast.parse(source)
    fns = [fn for fn in tree.body if isinstance(fn, ast.FunctionDef)]
    builtin_names = set(dir(builtins)) | set(keyword.kwlist) | {"__debug__"}
    placeholders = []
    for fn in fns:
        if fn.name.endswith("_bwd"):
            base = "_" + fn.name.strip("_")
            placeholders += [f"{base}_res0", f"{base}_res1", f"{base}_g"]
    pool0 = ADVERSARIAL_NAMES + EXTRA_NAMES + placeholders
    others = set()                  # names any function of the program uses (so far)
    for fn in fns:
        for node in ast.walk(fn):
            if isinstance(node, ast.Name):
                others.add(node.id)
            elif isinstance(node, ast.arg):
                others.add(node.arg)
    for fn in fns:
        params = [a.arg for a in fn.args.args]
        order, loaded = list(params), set()
        for node in ast.walk(fn):
            if isinstance(node, ast.Name):
                if isinstance(node.ctx, ast.Store) and node.id not in order:
                    order.append(node.id)
                elif isinstance(node.ctx, ast.Load):
                    loaded.add(node.id)
        free = {n for n in loaded if n not in order}
        forbidden = free | builtin_names | {fn.name}
        keep = set((frozen or {}).get(fn.name, ()))
        renamed = [v for v in order if v not in keep and rng.random() < prob]
        kept = [v for v in order if v not in renamed]
        taken = forbidden | set(kept)
        mapping = {}
        for v in renamed:
            near = [d for u in kept + list(mapping.values()) for d in derived_names(u)]
            modules = [c for c in ("np", "math") if c not in taken]
            roll = rng.random()
            if modules and roll < 0.15:
                pool = modules
            elif roll < 0.4:
                pool = sorted(c for c in others if c not in taken and c.isidentifier())
            elif near and roll < 0.6:
                pool = [c for c in near if c not in taken]
            else:
                pool = [c for c in pool0 if c not in taken]
            if not pool:
                pool = [c for c in pool0 if c not in taken]
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
            for mod in ("np", "math"):
                if mod in news:
                    features.add(f"name_{mod}_local")
            if any(n.startswith("_") for n in mapping.values()):
                features.add("name_compiler_like")
            if any(n.startswith("_t") and n[2:].isdigit() for n in mapping.values()):
                features.add("name_temp_like")
            if any(n in placeholders for n in mapping.values()):
                features.add("name_placeholder_like")
        for node in ast.walk(fn):
            if isinstance(node, ast.Name) and node.id in mapping:
                node.id = mapping[node.id]
            elif isinstance(node, ast.arg) and node.arg in mapping:
                node.arg = mapping[node.arg]
    return ast.unparse(tree) + "\n"


# ======================================================================================
# the program
# ======================================================================================

def generate_custom(seed: int, size: int | None = None,
                    adversarial: bool | None = None) -> Program:
    """The custom-rule family's program for ``(seed, size)`` (module docstring); ``size``:
    statements of ``f`` (default drawn in 2..9).  ``adversarial`` as for
    ``progen_generate.generate``: the renaming (and the kernels' names) draw from their own
    stream, so ``adversarial=False`` gives the same program with plain names."""
    r, rn, adversarial, size = random_streams(f"custom-{seed}", f"custom-names-{seed}-{size}",
                                              adversarial, size, 9)
    nk = r.choice([1, 1, 2])
    plain_names = r.sample(PLAIN_KERNELS, nk)
    adv_names = rn.sample(ADV_KERNELS, nk)
    names = adv_names if adversarial and rn.random() < 0.5 else plain_names
    kernels = []
    for k in range(nk):
        kind = "vjp" if r.random() < 0.6 else "jvp"
        out = "scalar" if r.random() < 0.6 else "array"
        kernels.append(Kernel(r, names[k], kind, out))
    lines = ["import math", "", "import numpy as np", "", "import coarsen", "", ""]
    features = {"custom_family"}
    for K in kernels:
        lines += K.write()
        features |= K.features
    caller = CallerGen(r, size, kernels)
    lines += caller.write()
    features |= caller.features
    if nk == 2:
        features.add("two_kernels")
    if names is adv_names:
        features.add("kernel_names_adversarial")
    src = "\n".join(lines) + "\n"
    if adversarial:
        frozen = {K.name: set(K.params) for K in kernels if K.name in caller.kw}
        src = rename_custom(src, rn, features, frozen=frozen)
    src = f"# coarsen fuzz program (custom rules): seed={seed} size={size}\n" + src
    L = r.choices([1, 2, 3, 4, 5, 6], [1, 2, 3, 3, 2, 2])[0]
    a = np.array([round(r.uniform(-1.2, 1.2), 3) for _ in range(L)])
    x = round(r.uniform(-1.2, 1.2), 3)
    y = round(r.uniform(-1.2, 1.2), 3)
    n = r.randint(0, 3)
    return Program(seed, size, src, x, y, a, n, features)


# ======================================================================================
# minimization that keeps the rules right
# ======================================================================================

def _split(source):
    """(``f``'s source, the module without ``f``) of a program."""
    tree = ast.parse(source)
    f = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "f"]
    if not f:
        return None, source
    rest = ast.Module(body=[n for n in tree.body if n is not f[0]], type_ignores=[])
    return ast.unparse(f[0]) + "\n", ast.unparse(rest) + "\n"


def _drop_unused_kernels(source):
    """``source`` without the kernels (their functions and ``defvjp``/``defjvp`` lines) that
    ``f`` no longer calls."""
    tree = ast.parse(source)
    f = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "f"]
    if not f:
        return source
    called = {n.id for n in ast.walk(f[0]) if isinstance(n, ast.Name)}
    kernels = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)
               and any("custom_" in ast.unparse(d) for d in n.decorator_list)}
    dead = kernels - called
    if not dead:
        return source

    def owner(node):
        text = ast.unparse(node)
        return any(text.startswith(k + ".") or (isinstance(node, ast.FunctionDef) and
                                                 (node.name == k or node.name.startswith(k + "_")))
                   for k in dead)
    tree.body = [n for n in tree.body if not owner(n)]
    return ast.unparse(tree) + "\n"


def minimize_custom(source, make_args, args_text, signature, *, targets=("python",),
                    max_checks=200, log=None):
    """``progen.minimize`` restricted to ``f``: the kernels and their rules are left as they
    are (a statement removed from a rule would make it wrong, and the oracle would then
    report the rule, not coarsen), and kernels ``f`` no longer calls are dropped.  Returns
    (source, failure) as ``progen.minimize`` does."""
    from tests.progen import FuzzFailure, _candidates, check_source, failure_signature
    best, best_fail, checks = source, None, 0
    progress = True
    while progress and checks < max_checks:
        progress = False
        f_src, rest = _split(best)
        if f_src is None:
            break
        for cand_f in _candidates(f_src):
            cand = _drop_unused_kernels(rest + "\n\n" + cand_f)
            if len(cand) >= len(best):
                continue
            checks += 1
            try:
                check_source(cand, make_args, args_text, targets=targets)
            except FuzzFailure as e:
                if failure_signature(e) == signature:
                    best, best_fail, progress = cand, e, True
                    if log:
                        log(f"  minimize: {len(best)} chars after {checks} checks")
                    break
            except Exception:  # noqa: BLE001 - an invalid variant
                pass
            if checks >= max_checks:
                break
    return best, best_fail
