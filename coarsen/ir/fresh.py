"""One fresh-name supply per generated module.

Requires: nothing (plain strings).
Guarantees: a ``NameSupply`` hands out every name at most once and remembers which generator
took it (``owner``): the frontend (temporaries, helpers' locals, a ``custom_vjp`` rule's body,
which is lowered apart from the function but into the same supply), SSA webs, scalarization,
in-place rewriting, hoisting, both emitters and the custom rules they emit.  A name the supply
has handed out, or was seeded with (every identifier of the source), is never handed out
again, whoever asks: two generators cannot bind one name to two values, whatever order the
passes run in.  Before this supply each generator numbered its own ``_t<k>`` from what it could
see, and a ``custom_vjp`` rule's temporaries (not in the function's body) were numbered again by
scalarization: the rule's ``_t6 = 2.0 * g`` overwrote the loop extent ``_t6 = x.shape[0]``.

``fork()`` gives a copy that hands out the same names as the original would: an emission that
is tried several times (the reverse sweep's tape fixpoint) takes its names from a fork of the
function's supply, so each try spells its names alike and the one kept is deterministic.
``claimed()`` is the record (name -> owner) for the check of generated modules
(``coarsen.ir.fresh_check``).
"""
from __future__ import annotations

import re

#: the segment symbols' names (``coarsen.ad.lift``: ``_s<segment>_...``), made by lifting
#: outside the supply: the supply never hands out a name there (``escape``)
LIFT_NAMES = re.compile(r"_s\d+_\w*")


#: names the drivers bind themselves (``coarsen.ad.reverse.tapes``, ``checkpoint``,
#: ``local_stretch``, ``scratch``; the entry's value and counts): every supply holds them,
#: taken by "driver", so no generator is handed one
DRIVER_NAMES = frozenset({
    "_ftape", "_fpos", "_itape", "_ipos", "_tlf", "_tli", "_tlmark", "_lftape", "_lfpos",
    "_litape", "_lipos", "_peakf", "_peaki", "_wtop", "_value", "_grads", "_tape",
    "_tape_floats", "_tape_ints", "_status", "_disc",
})


def escape(base: str) -> str:
    """``base``, moved out of the segment symbols' names (``_s1_g`` -> ``_us1_g``): a name the
    frontend builds from a user's name (a rule ``s1`` gives ``_s1_g``) never enters them."""
    return "_u" + base[1:] if LIFT_NAMES.fullmatch(base) else base


class NameSupply:
    """The names of one generated module: those taken and who took them."""

    def __init__(self, taken=(), owner="source"):
        self._owner: dict[str, str] = dict.fromkeys(DRIVER_NAMES, "driver")
        for name in taken:
            self._owner.setdefault(name, owner)

    # ------------------------------------------------------------------ queries
    def __contains__(self, name) -> bool:
        return name in self._owner

    def owner(self, name):
        return self._owner.get(name)

    def claimed(self) -> dict:
        """``{name: owner}`` of every name taken (a copy)."""
        return dict(self._owner)

    # ------------------------------------------------------------------ taking names
    def take(self, name: str, owner: str) -> str:
        """Take ``name`` itself for ``owner``; a name another generator took is refused
        (``NameClash``): a generator that must have a given spelling asks whether it is free
        first (``name in supply``)."""
        have = self._owner.get(name)
        if have is not None and have != owner:
            raise NameClash(f"internal: {owner} binds {name!r}, which {have} took")
        self._owner[name] = owner
        return name

    def reserve(self, names, owner="source"):
        """Record names bound by someone outside the supply (user names, hand-built IR);
        names already taken keep their owner."""
        for name in names:
            self._owner.setdefault(name, owner)

    def numbered(self, base: str, owner: str, start: int = 1, sep: str = "") -> str:
        """The first free ``f"{base}{sep}{k}"`` for ``k >= start``, taken for ``owner``."""
        base = escape(base)
        k = start
        while f"{base}{sep}{k}" in self._owner:
            k += 1
        return self.take(f"{base}{sep}{k}", owner)

    def plain(self, base: str, owner: str) -> str:
        """``base`` itself when free, else the first free ``base2``, ``base3``, ..."""
        base = escape(base)
        if base not in self._owner:
            return self.take(base, owner)
        return self.numbered(base, owner, start=2)

    def fork(self) -> "NameSupply":
        """A copy: what it hands out is not taken here (see the module docstring)."""
        out = NameSupply()
        out._owner = dict(self._owner)
        return out

    def adopt(self, other: "NameSupply"):
        """Take every name ``other`` (a fork of this supply) handed out: the kept emission's."""
        for name, owner in other._owner.items():
            self._owner.setdefault(name, owner)

    def __deepcopy__(self, memo):
        # a deep copy of IR that holds the supply (a custom rule's statement) keeps the one
        # supply: copies of IR are copies of code of the same module
        return self

    def __repr__(self):
        return f"NameSupply({len(self._owner)} names)"


class NameClash(AssertionError):
    """Two generators asked for the same name: a compiler bug, never the user's."""
