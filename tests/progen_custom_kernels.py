"""The kernels of the custom-rule fuzz family (``tests/progen_custom.py``): element-wise terms,
a kernel made of them, and its primal, its ``custom_vjp`` backward and ``custom_jvp`` rule as
source lines.  Split out of ``progen_custom.py``, which draws the programs that call them.
"""
from __future__ import annotations

import numpy as np  # noqa: F401  (the templates' module, in generated text)

# element-wise maps phi(e, w, c) and their partials (None: zero), as templates: ``{e}`` the
# element (or array) of v, ``{w}`` of w, ``{c}`` the float, ``{M}`` the module (np or math)
TERMS = [
    ("{e} * {e}", "2.0 * {e}", None, None),
    ("{c} * {e} * {e}", "2.0 * {c} * {e}", None, "{e} * {e}"),
    ("{M}.sin({e}) * {w}", "{M}.cos({e}) * {w}", "{M}.sin({e})", None),
    ("{M}.tanh({e})", "1.0 - {M}.tanh({e}) * {M}.tanh({e})", None, None),
    ("{M}.log(1.0 + {e} * {e})", "2.0 * {e} / (1.0 + {e} * {e})", None, None),
    ("{e} * {w}", "{w}", "{e}", None),
    ("{c} * {M}.sqrt(1.0 + {e} * {e})", "{c} * {e} / {M}.sqrt(1.0 + {e} * {e})", None,
     "{M}.sqrt(1.0 + {e} * {e})"),
    ("{e} * {e} * {e}", "3.0 * {e} * {e}", None, None),
    ("{M}.exp({M}.tanh({e}))",
     "{M}.exp({M}.tanh({e})) * (1.0 - {M}.tanh({e}) * {M}.tanh({e}))", None, None),
    ("{M}.cos({c} * {e})", "-{c} * {M}.sin({c} * {e})", None, "-{e} * {M}.sin({c} * {e})"),
    ("{w} * {w} * {e}", "{w} * {w}", "2.0 * {w} * {e}", None),
    ("{M}.sin({e} * {w} + {c})", "{w} * {M}.cos({e} * {w} + {c})",
     "{e} * {M}.cos({e} * {w} + {c})", "{M}.cos({e} * {w} + {c})"),
    ("{e} / (1.0 + {w} * {w})", "1.0 / (1.0 + {w} * {w})",
     "-2.0 * {e} * {w} / ((1.0 + {w} * {w}) * (1.0 + {w} * {w}))", None),
]
_COEFS = ["0.5", "1.5", "-0.7", "2.0", "0.25", "1.0", "-1.0"]
_BETAS = ["0.5", "-0.25", "0.75"]
_DECAY = "0.5"


class Lines:
    def __init__(self):
        self.lines = []

    def emit(self, indent, text):
        self.lines.append("    " * indent + text)


def fresh(expr):
    """``expr`` as a new array: a bare name (an argument) is copied, so that in-place updates
    of the result never write the caller's array."""
    return f"{expr}.copy()" if expr.isidentifier() else expr


def _scaled(coef, expr):
    return expr if coef == "1.0" else f"{coef} * ({expr})"


class Term:
    """One term of a kernel: ``coef * phi`` (shape ``plain``), or a shaped term (``pair``,
    ``decay``: float output; ``shift``, ``prefix``: array output)."""

    def __init__(self, shape, tmpl, coef, module):
        self.shape = shape
        self.tmpl = tmpl            # index into TERMS (unused by pair and shift)
        self.coef = coef
        self.module = module        # "math" or "np", for element expressions in the rules

    @property
    def parts(self):
        return TERMS[self.tmpl]

    def uses(self, var):
        if self.shape in ("pair", "shift"):
            return False
        return any(p is not None and "{" + var + "}" in p for p in self.parts)

    def render(self, which, el, module, v="v", w="w", c="c", i="i"):
        """The term's value (``which`` 0) or partial (1: v, 2: w, 3: c) as an array
        expression (``el`` False) or at element ``i`` (``el`` True); None for a zero."""
        t = self.parts[which]
        if t is None:
            return None
        e, ww = (f"{v}[{i}]", f"{w}[{i}]") if el else (v, w)
        return t.format(e=e, w=ww, c=c, M=module)


class Kernel:
    """A function with custom rules and its rules, generated together (module docstring)."""

    def __init__(self, r, name, kind, out):
        self.r = r
        self.name = name
        self.kind = kind            # "vjp" | "jvp"
        self.out = out              # "scalar" | "array"
        self.features = set()
        shapes = (["plain"] * 5 + ["pair", "decay"]) if out == "scalar" else \
            (["plain"] * 5 + ["shift", "prefix"])
        n = r.choice([1, 1, 2, 2, 2, 3])
        self.terms = []
        for k in range(n):
            shape = r.choice(shapes) if k else r.choice(shapes + ["plain"] * 2)
            coef = r.choice(_BETAS) if shape == "shift" else r.choice(_COEFS)
            self.terms.append(Term(shape, r.randrange(len(TERMS)), coef,
                                   r.choice(["math", "np", "math"])))
            self.features.add(f"term_{shape}")
        self.has_w = any(t.uses("w") for t in self.terms)
        self.has_c = any(t.uses("c") for t in self.terms)
        if not self.has_c and r.random() < 0.15:
            self.has_c = True           # a float argument with a zero derivative
            self.features.add("kernel_unused_float")
        self.params = ["v"] + (["w"] if self.has_w else []) + (["c"] if self.has_c else [])
        self.features |= {f"custom_{kind}", f"kernel_{out}_out"}
        self.lines = Lines()
        self.ntmp = 0

    def p(self, prob):
        return self.r.random() < prob

    def tmp(self, stem):
        self.ntmp += 1
        name = f"{stem}{self.ntmp}"
        return name + "_" if name == self.name else name     # the rules call the kernel

    # ------------------------------------------------------------------ the value
    def value_code(self, L, ind, result, plain_python):
        """Statements at ``ind`` leaving the kernel's value in ``result``.  ``plain_python``:
        the code of ``K`` itself, which the oracle runs in extended precision (``np``
        functions only, arrays from ``zeros_like``/``copy``)."""
        r = self.r
        mod = (lambda t: "np") if plain_python else (lambda t: t.module)
        if self.out == "scalar":
            L.emit(ind, f"{result} = 0.0")
            for t in self.terms:
                if t.shape == "plain":
                    style = r.choice(["whole", "whole", "loop", "inplace"])
                    if style == "whole":
                        L.emit(ind, f"{result} += {_scaled(t.coef, 'np.sum(' + t.render(0, False, 'np') + ')')}")
                    elif style == "loop":
                        self.features.add("rule_loop")
                        L.emit(ind, "for i in range(v.shape[0]):")
                        L.emit(ind + 1, f"{result} += {_scaled(t.coef, t.render(0, True, mod(t)))}")
                    else:
                        self.features.add("rule_inplace")
                        tt = self.tmp("t")
                        L.emit(ind, f"{tt} = {fresh(t.render(0, False, 'np'))}")
                        L.emit(ind, f"{tt} *= {t.coef}")
                        L.emit(ind, f"{result} += np.sum({tt})")
                elif t.shape == "pair":
                    if self.p(0.5):
                        L.emit(ind, f"{result} += {_scaled(t.coef, 'np.sum(v[1:] * v[:-1])')}")
                    else:
                        self.features.add("rule_loop")
                        L.emit(ind, "for i in range(v.shape[0] - 1):")
                        L.emit(ind + 1, f"{result} += {_scaled(t.coef, 'v[i] * v[i + 1]')}")
                else:                   # decay
                    self.features.add("rule_loop")
                    q = self.tmp("q")
                    L.emit(ind, f"{q} = 0.0")
                    L.emit(ind, "for i in range(v.shape[0]):")
                    L.emit(ind + 1, f"{q} = {_DECAY} * {q} + {t.render(0, True, mod(t))}")
                    L.emit(ind, f"{result} += {_scaled(t.coef, q)}")
            return
        # array output
        first = self.terms[0]
        if first.shape == "plain" and self.p(0.5):
            L.emit(ind, f"{result} = {fresh(_scaled(first.coef, first.render(0, False, 'np')))}")
            rest = self.terms[1:]
        else:
            L.emit(ind, f"{result} = " + (r.choice(["np.zeros_like(v)", "v * 0.0"]) if plain_python
                                          else r.choice(["np.zeros(v.shape[0])", "np.zeros_like(v)",
                                                         "v * 0.0"])))
            rest = self.terms
        for t in rest:
            if t.shape == "plain":
                style = r.choice(["whole", "loop", "inplace"])
                if style == "whole":
                    L.emit(ind, f"{result} += {_scaled(t.coef, t.render(0, False, 'np'))}")
                elif style == "loop":
                    self.features.add("rule_loop")
                    L.emit(ind, "for i in range(v.shape[0]):")
                    L.emit(ind + 1, f"{result}[i] += {_scaled(t.coef, t.render(0, True, mod(t)))}")
                else:
                    self.features.add("rule_inplace")
                    tt = self.tmp("t")
                    L.emit(ind, f"{tt} = {fresh(t.render(0, False, 'np'))}")
                    L.emit(ind, f"{tt} *= {t.coef}")
                    L.emit(ind, f"{result} += {tt}")
            elif t.shape == "shift":
                self.features.add("rule_slice_update")
                if self.p(0.6):
                    L.emit(ind, f"{result}[1:] += {t.coef} * v[:-1]")
                else:
                    self.features.add("rule_loop")
                    L.emit(ind, "for i in range(1, v.shape[0]):")
                    L.emit(ind + 1, f"{result}[i] += {t.coef} * v[i - 1]")
            else:                       # prefix
                self.features.add("rule_loop")
                acc = self.tmp("acc")
                L.emit(ind, f"{acc} = 0.0")
                L.emit(ind, "for i in range(v.shape[0]):")
                L.emit(ind + 1, f"{acc} += {_scaled(t.coef, t.render(0, True, mod(t)))}")
                L.emit(ind + 1, f"{result}[i] += {acc}")

    # ------------------------------------------------------------------ the functions
    def primal(self):
        L = self.lines
        L.emit(0, f"@coarsen.custom_{self.kind}")
        L.emit(0, f"def {self.name}({', '.join(self.params)}):")
        t = self.terms[0]
        if len(self.terms) == 1 and t.shape == "plain" and self.p(0.4):
            body = t.render(0, False, "np")
            L.emit(1, "return " + (_scaled(t.coef, f"np.sum({body})") if self.out == "scalar"
                                   else fresh(_scaled(t.coef, body))))
        else:
            self.value_code(L, 1, "out", True)
            L.emit(1, "return out")
        L.lines += ["", ""]

    def fwd(self):
        """``K_fwd``: the output, and the residuals; returns what ``bwd`` unpacks."""
        L = self.lines
        L.emit(0, f"def {self.name}_fwd({', '.join(self.params)}):")
        if self.p(0.3):
            self.features.add("fwd_calls_primal")
            L.emit(1, f"out = {self.name}({', '.join(self.params)})")
        else:
            self.value_code(L, 1, "out", False)
        # residuals: the arguments (one maybe a copy), partials precomputed as arrays
        res = []
        for prm in self.params:
            if prm != "c" and self.p(0.25):
                self.features.add("res_copy")
                L.emit(1, f"{prm}c = {prm}.copy()")
                res.append((prm, f"{prm}c"))
            else:
                res.append((prm, prm))
        self.pre = {}
        for k, t in enumerate(self.terms):
            if t.shape == "plain" and self.p(0.3):
                self.features.add("res_precomputed")
                d = f"d{k}"
                dv = t.render(1, False, "np")
                if self.p(0.5):
                    L.emit(1, f"{d} = {fresh(dv)}")
                else:
                    self.features.add("rule_loop")
                    L.emit(1, f"{d} = " + self.r.choice(["np.empty(v.shape[0])", "np.zeros_like(v)",
                                                         "v.copy()"]))
                    L.emit(1, "for i in range(v.shape[0]):")
                    L.emit(2, f"{d}[i] = {t.render(1, True, t.module)}")
                self.pre[k] = d
                res.append((d, d))
        self.r.shuffle(res)
        self.res = [bwd_name for bwd_name, _ in res]
        if len(res) == 1 and self.p(0.5):
            self.features.add("res_untupled")
            self.res_tupled = False
            L.emit(1, f"return out, {res[0][1]}")
        else:
            self.res_tupled = True
            inner = ", ".join(x for _, x in res) + ("," if len(res) == 1 else "")
            L.emit(1, f"return out, ({inner})")
        L.lines += ["", ""]

    def bwd(self):
        L = self.lines
        r = self.r
        if self.res_tupled:
            L.emit(0, f"def {self.name}_bwd(res, g):")
            L.emit(1, f"{', '.join(self.res)}{',' if len(self.res) == 1 else ''} = res")
        else:
            L.emit(0, f"def {self.name}_bwd({self.res[0]}, g):")
        scalar = self.out == "scalar"
        late = scalar and self.p(0.3)        # accumulate without g, then ``ct *= g``
        if late:
            self.features.add("rule_late_g")
        G = "1.0" if late else "g"

        def gs(expr, el=False):
            """``expr`` times the output's adjoint (``g``, or ``g[i]`` for an element of an
            array output)."""
            if scalar:
                return expr if late else f"g * {_paren(expr)}"
            return f"g[i] * {_paren(expr)}" if el else f"g * {_paren(expr)}"

        cts = {}
        arrays = [p for p in ("v", "w") if p in self.params]
        for prm in arrays:
            ct = f"ct{prm}"
            cts[prm] = ct
            L.emit(1, f"{ct} = " + r.choice(["np.zeros(v.shape[0])", "np.zeros_like(v)",
                                              f"{prm} * 0.0", "np.zeros(v.shape)"]))
        if "c" in self.params:
            cts["c"] = "ctc"
            L.emit(1, "ctc = 0.0")
        for k, t in enumerate(self.terms):
            coef = t.coef
            if t.shape == "plain":
                style = r.choice(["whole", "loop", "inplace"])
                if k in self.pre and style == "inplace":
                    style = "pre_inplace"
                for j, prm in ((1, "v"), (2, "w"), (3, "c")):
                    part = t.render(j, False, "np")
                    if part is None or prm not in cts:
                        continue
                    if k in self.pre and prm == "v":
                        part = self.pre[k]
                    ct = cts[prm]
                    if prm == "c":
                        if style == "loop" or (scalar and self.p(0.3)):
                            self.features.add("rule_loop")
                            el = t.render(j, True, t.module)
                            L.emit(1, "for i in range(v.shape[0]):")
                            L.emit(2, f"ctc += {gs(_scaled(coef, el), True)}")
                        elif scalar:
                            L.emit(1, f"ctc += {gs(_scaled(coef, 'np.sum(' + part + ')'))}")
                        else:
                            L.emit(1, f"ctc += {_scaled(coef, 'np.sum(g * ' + _paren(part) + ')')}")
                        continue
                    if style == "whole":
                        L.emit(1, f"{ct} += {gs(_scaled(coef, part))}")
                    elif style == "loop":
                        self.features.add("rule_loop")
                        el = self.pre[k] + "[i]" if (k in self.pre and prm == "v") \
                            else t.render(j, True, t.module)
                        L.emit(1, "for i in range(v.shape[0]):")
                        L.emit(2, f"{ct}[i] += {gs(_scaled(coef, el), True)}")
                    elif style == "pre_inplace" and prm == "v":
                        self.features.add("rule_writes_residual")
                        L.emit(1, f"{part} *= {coef if scalar and late else gs(coef)}")
                        L.emit(1, f"{ct} += {part}")
                    else:
                        self.features.add("rule_inplace")
                        tt = self.tmp("t")
                        L.emit(1, f"{tt} = {fresh(part)}")
                        L.emit(1, f"{tt} *= {coef if scalar and late else gs(coef)}")
                        L.emit(1, f"{ct} += {tt}")
            elif t.shape == "pair":      # d/dv_i of sum v_j v_{j+1}: v_{i+1} + v_{i-1}
                ct = cts["v"]
                if self.p(0.5):
                    self.features.add("rule_slice_update")
                    L.emit(1, f"{ct}[:-1] += {gs(_scaled(coef, 'v[1:]'))}")
                    L.emit(1, f"{ct}[1:] += {gs(_scaled(coef, 'v[:-1]'))}")
                else:
                    self.features.add("rule_loop")
                    L.emit(1, "for i in range(v.shape[0] - 1):")
                    L.emit(2, f"{ct}[i] += {gs(_scaled(coef, 'v[i + 1]'))}")
                    L.emit(2, f"{ct}[i + 1] += {gs(_scaled(coef, 'v[i]'))}")
            elif t.shape == "decay":     # sum_i DECAY**(m-1-i) phi(v_i): a reverse loop
                self.features.add("rule_reverse_loop")
                q = self.tmp("q")
                L.emit(1, f"{q} = {_scaled(coef, G)}")
                L.emit(1, "for i in range(v.shape[0] - 1, -1, -1):")
                for j, prm in ((1, "v"), (2, "w"), (3, "c")):
                    el = t.render(j, True, t.module)
                    if el is None or prm not in cts:
                        continue
                    L.emit(2, f"{cts[prm]}{'' if prm == 'c' else '[i]'} += {q} * {_paren(el)}")
                L.emit(2, f"{q} *= {_DECAY}")
            elif t.shape == "shift":     # out_i += beta v_{i-1}
                ct = cts["v"]
                if self.p(0.5):
                    self.features.add("rule_slice_update")
                    L.emit(1, f"{ct}[:-1] += {coef} * g[1:]")
                else:
                    self.features.add("rule_loop")
                    L.emit(1, "for i in range(v.shape[0] - 1):")
                    L.emit(2, f"{ct}[i] += {coef} * g[i + 1]")
            else:                       # prefix: out_i += sum_{j<=i} coef phi(v_j)
                self.features.add("rule_reverse_loop")
                q = self.tmp("q")
                L.emit(1, f"{q} = 0.0")
                L.emit(1, "for i in range(v.shape[0] - 1, -1, -1):")
                L.emit(2, f"{q} += g[i]")
                for j, prm in ((1, "v"), (2, "w"), (3, "c")):
                    el = t.render(j, True, t.module)
                    if el is None or prm not in cts:
                        continue
                    L.emit(2, f"{cts[prm]}{'' if prm == 'c' else '[i]'} += "
                              f"{_scaled(coef, q + ' * ' + _paren(el))}")
        if late:
            for prm in self.params:
                if prm == "c":
                    L.emit(1, "ctc = ctc * g" if self.p(0.5) else "ctc *= g")
                else:
                    L.emit(1, f"{cts[prm]} *= g")
        outs = [cts[p] for p in self.params]
        L.emit(1, f"return ({', '.join(outs)}{',' if len(outs) == 1 else ''})")
        L.lines += ["", ""]
        L.emit(0, f"{self.name}.defvjp({self.name}_fwd, {self.name}_bwd)")
        L.lines += ["", ""]

    def jvp(self):
        L = self.lines
        r = self.r
        decorator = self.p(0.5)
        if decorator:
            L.emit(0, f"@{self.name}.defjvp")
        L.emit(0, f"def {self.name}_jvp(primals, tangents):")
        tans = {"v": "dv", "w": "dw", "c": "dc"}
        one = "," if len(self.params) == 1 else ""
        L.emit(1, f"{', '.join(self.params)}{one} = primals")
        L.emit(1, f"{', '.join(tans[p] for p in self.params)}{one} = tangents")
        if self.p(0.3):
            self.features.add("fwd_calls_primal")
            L.emit(1, f"out = {self.name}({', '.join(self.params)})")
        else:
            self.value_code(L, 1, "out", False)
        scalar = self.out == "scalar"
        L.emit(1, "tan = " + ("0.0" if scalar else r.choice(["np.zeros(v.shape[0])",
                                                             "np.zeros_like(v)", "dv * 0.0"])))

        def directional(t, el):
            terms = []
            for j, prm in ((1, "v"), (2, "w"), (3, "c")):
                part = t.render(j, el, t.module if el else "np")
                if part is None or prm not in self.params:
                    continue
                tn = tans[prm] + ("[i]" if el and prm != "c" else "")
                terms.append(f"{_paren(part)} * {tn}")
            return " + ".join(terms) if terms else "0.0"

        for t in self.terms:
            coef = t.coef
            if t.shape == "plain":
                style = r.choice(["whole", "loop", "inplace"])
                if style == "whole":
                    d = directional(t, False)
                    L.emit(1, f"tan += {_scaled(coef, ('np.sum(' + d + ')') if scalar else d)}")
                elif style == "loop":
                    self.features.add("rule_loop")
                    L.emit(1, "for i in range(v.shape[0]):")
                    L.emit(2, f"tan{'' if scalar else '[i]'} += {_scaled(coef, directional(t, True))}")
                else:
                    # dv.copy() scaled in place by the partial in v; the other partials added
                    self.features.add("rule_inplace")
                    tt = self.tmp("t")
                    L.emit(1, f"{tt} = dv.copy()")
                    L.emit(1, f"{tt} *= {_paren(t.render(1, False, 'np'))}")
                    for j, prm in ((2, "w"), (3, "c")):
                        part = t.render(j, False, "np")
                        if part is not None and prm in self.params:
                            L.emit(1, f"{tt} += {_paren(part)} * {tans[prm]}")
                    L.emit(1, f"{tt} *= {coef}")
                    L.emit(1, f"tan += {'np.sum(' + tt + ')' if scalar else tt}")
            elif t.shape == "pair":
                L.emit(1, f"tan += {_scaled(coef, 'np.sum(dv[1:] * v[:-1] + v[1:] * dv[:-1])')}")
            elif t.shape == "decay":
                self.features.add("rule_loop")
                q = self.tmp("q")
                L.emit(1, f"{q} = 0.0")
                L.emit(1, "for i in range(v.shape[0]):")
                L.emit(2, f"{q} = {_DECAY} * {q} + {directional(t, True)}")
                L.emit(1, f"tan += {_scaled(coef, q)}")
            elif t.shape == "shift":
                self.features.add("rule_slice_update")
                L.emit(1, f"tan[1:] += {coef} * dv[:-1]")
            else:
                self.features.add("rule_loop")
                acc = self.tmp("acc")
                L.emit(1, f"{acc} = 0.0")
                L.emit(1, "for i in range(v.shape[0]):")
                L.emit(2, f"{acc} += {_scaled(coef, directional(t, True))}")
                L.emit(2, f"tan[i] += {acc}")
        L.emit(1, "return out, tan")
        L.lines += ["", ""]
        if not decorator:
            L.emit(0, f"{self.name}.defjvp({self.name}_jvp)")
            L.lines += ["", ""]

    def write(self):
        self.primal()
        if self.kind == "vjp":
            self.fwd()
            self.bwd()
        else:
            self.jvp()
        return self.lines.lines


def _paren(expr):
    return expr if expr.replace(".", "").replace("_", "").isalnum() else f"({expr})"
