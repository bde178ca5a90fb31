"""Hygienic names for the IR: the user's names, kept apart from the compiler's.

Requires: nothing (plain strings).
Guarantees: ``Namer`` hands out deterministic names in two spaces that never meet.  Compiler
names (temporaries ``_t<k>``, flags, tapes, segment symbols, runtime helpers) start with ``_``
and adjoints end with ``_bar``; names standing for user variables do neither, are not Python
builtins, not a module the generated code imports (``np``, ``math``, ``numba``) and not a
generated entry point.  A user name that breaks a rule is escaped to a name no identifier of
the function uses; the mapping is memoized, so one source name has one IR name.  The
temporaries it hands out are recorded (``Namer.temps``): passes know them by origin
(``Function.temps``), not by spelling.
"""
from __future__ import annotations

import builtins

import gast

from ..ir.fresh import NameSupply


class Namer:
    """Hygienic, deterministic names for the IR.

    The name spaces never meet: every name the compiler makes (temporaries ``_t1``, flags,
    tapes, segment symbols, runtime helpers) starts with ``_``, and adjoints add ``_bar``;
    every name that stands for a user's variable starts with a letter, does not end with
    ``_bar`` and is not a builtin or a module the generated code imports.  A user name that
    breaks those rules is escaped (``_y`` -> ``u_y``, ``x_bar`` -> ``x_bar_v``, ``np`` ->
    ``np_v``) to a name that no identifier of the function uses (``seed``), so user names never
    clash with compiler names nor with each other, whatever they are."""

    def __init__(self, seed=()):
        # the module's one supply (``coarsen.ir.fresh``), seeded with every identifier of the
        # source function that may stand for itself (never handed out); one that looks like
        # a compiler name is always escaped, never bound as it is, so it takes nothing from
        # the compiler: a user's ``_t3`` leaves the temporaries numbered as they would be
        # without it (renaming a variable gives the same code, the same bits)
        self.supply = NameSupply(n for n in seed if not self.compiler_looking(n))
        self.user_map = {}
        self.count = 0
        self.inlines = {}
        self.globals = {}
        self.temps = set()          # every temporary handed out (the IR's ``Function.temps``)

    @staticmethod
    def compiler_looking(name):
        return (name.startswith("_") or name.endswith("_bar") or name in RESERVED_NAMES
                or "value_and_grad_" in name)      # the generated entry points and drivers

    def _user_space(self, name):
        """``name`` itself when it may stand for a user variable, else a fresh escape of it."""
        if not self.compiler_looking(name):
            return name
        base = ("u" + name) if name.startswith("_") else name
        base = base.replace("value_and_grad_", "value_and_gradv_")
        if base.endswith("_bar") or base in RESERVED_NAMES:
            base += "_v"
        return self.supply.plain(base, "frontend")

    def user(self, name):
        """The IR name of a variable of the differentiated function itself (memoized)."""
        if name not in self.user_map:
            new = self._user_space(name)
            if new not in self.supply:
                self.supply.take(new, "frontend")
            self.user_map[name] = new
        return self.user_map[name]

    def user_fresh(self, base):
        """A new user-space name (inlined helpers' locals, module-level arrays)."""
        if self.compiler_looking(base):
            return self._user_space(base)      # escaped to a name nobody uses, and taken
        return self.fresh(base)

    def temp(self):
        name = self.supply.numbered("_t", "frontend", start=self.count + 1)
        self.count = int(name[2:])
        self.temps.add(name)
        return name

    def fresh(self, base):
        return self.supply.plain(base, "frontend")

    def global_array(self, ga, src):
        """The parameter name under which a module-level array enters the gradient."""
        for name, (obj, _) in self.globals.items():
            if obj is ga.value:
                return name
        name = self.user_fresh("g_" + ga.name.lower().strip("_"))
        self.globals[name] = (ga.value, ga)
        return name

    def inline_count(self, fname):
        self.inlines[fname] = self.inlines.get(fname, 0) + 1
        return "" if self.inlines[fname] == 1 else str(self.inlines[fname])


# Names a user variable must not take in the IR: Python's builtins (the generated code calls
# float, int, range, len, min, max, abs, ...) and the modules the generated code imports.
RESERVED_NAMES = frozenset(dir(builtins)) | {"np", "math", "numba", "cuda", "prange", "njit"}


def identifiers(node):
    """Every identifier a function's source uses: its parameters and every name it reads or
    binds."""
    return {n.id for n in gast.walk(node) if isinstance(n, gast.Name)} | \
        {a.id for a in node.args.args}
