"""The gradient's direct mode: ``g(*args)`` of its hot kind of arguments straight into Numba.

A ``Gradient``'s fast path (``coarsen.transforms.fast_path``) is a Python ``__call__``: the arguments'
types looked up, the compiled entry called, the last call's artifact and tape counts kept.
That costs about 0.35 us a call, more than a small gradient itself (a closed-form loop: 0.1
us).  Once a kind of arguments has taken its tiers (``coarsen.transforms.tiers``: its gradient-only entry
compiled) and ``DIRECT_AFTER`` calls, direct mode gives that one ``Gradient`` a class of its own whose ``__call__`` is a Numba dispatcher (``Bare``) of a two-line function: it calls the
kind's gradient-only entry and returns the gradient, and writes the tape counts into a buffer
the ``Gradient`` owns.  Numba's own type dispatch, in C, replaces the Python one; no Python
frame runs per call.

Requires: Numba's CPU dispatcher as of 0.6x (``CPUDispatcher``: the C dispatcher binds keywords
and defaults by the function's parameters, then calls ``_compile_for_args`` for arguments
whose Numba types match no compiled specialization, and calls what it returns with the
arguments); ``check()`` verifies that once per process and disables direct mode where it does
not hold.  ``DirectMode`` takes the gradient (``coarsen.transforms.gradient.Gradient``, whose ``_last`` and
``_tape`` it serves as properties while in direct mode, as ``coarsen.transforms.fast_path`` reads them),
the kind's keys, the kind's final direct hit ``(artifact, entry, gradient-only entry, module
arrays, single, limit, scratch_limit)``, the parameters' names and a ``rearm`` callback.

Guarantees:

* only kinds of scalars take it (floats, ints, bools: ``Signature`` types all ``Scalar``).
  Numba types an ndarray subclass as the plain array (``np.matrix``, whose ``*`` is a matrix
  product, would be served as a plain array, where the general path refuses it), so kinds with
  arrays stay on the general path, whose key is the argument's Python type;
* the dispatcher holds one specialization, compiled when the mode is made for the kind's exact
  Numba types (float64, int64, boolean); a call that Numba types as them runs the kind's
  gradient-only entry, as the general path does: the same numbers, bit for bit.  Numba merges Python types the kind tells apart but
  the artifacts do not (``float`` and ``np.float64``, ``int`` and ``np.int64``, ``bool`` and
  ``np.bool_``: one ``Signature`` each, and the general path converts the NumPy scalars to what
  the entry then sees);
* the dispatcher's function has the user's parameters, so keyword arguments bind as they bind
  for the function; any other call (another kind; an omitted default; an int past int64
  raises Numba's ``OverflowError``) leaves direct mode and goes to the general ``__call__``,
  which binds and refuses arguments as before; the kind left is offered direct mode again
  after as many calls of it as the first time (its dispatcher kept).  Arguments that do not
  bind (too many, too few, unknown keywords) raise Numba's ``TypeError`` in direct mode, whose
  message may differ from the general path's ``CoarsenArgumentError`` (a ``TypeError`` too);
* ``_last`` and ``_tape`` (``report``, ``source``, ``tape_bytes``) stay the last call's: the
  class's properties read the buffer while a direct call ran last; what the general path sets
  clears that;
* direct mode runs on fresh tapes: a kind whose tapes grow past ``KEEP_TAPES_ABOVE`` entries
  after it entered keeps allocating them per call (the switch to kept tapes needs the Python
  path: ``value_and_grad`` of that kind, or ``leave``, makes it).

The buffer's address is compiled into the dispatcher's code, so the dispatcher is never cached
on disk; it lives and dies with its ``Gradient`` (one compile of a small function per hot kind,
at its first direct call).
"""
from __future__ import annotations

import weakref

import numpy as np

from ..ir.nodes import Scalar
from .tiers import GRAD_ONLY_AFTER

__all__ = ["DIRECT_AFTER", "DIRECT_MAX_LINES", "ENABLED", "DirectMode", "check", "enter", "leave",
           "offer"]

#: direct mode at all (tests compare it with the general path by turning it off)
ENABLED = True
#: a kind of arguments is offered direct mode at its this-many-th ``g(*args)`` call: a hot
#: loop's.  Entering costs a compile of the small dispatcher (Numba links the gradient-only
#: entry into it and optimizes the whole again: 0.15 to 1 s on this 2-core machine for the
#: apps' gradients, never cached, as its code holds an address), which 0.35 us a call repays
#: only over many calls
DIRECT_AFTER = 1024
#: nor is it offered to gradients whose generated code has more lines than this (their compile
#: grows with them, and their calls are long enough that 0.35 us matters less)
DIRECT_MAX_LINES = 400
#: slots of the buffer: [0] 1 while a direct call ran last, [1] the counts' length, then counts
_CAPACITY = 34

_STATE = {"checked": None}


def _make_bare_class():
    import numba
    from numba.core import types
    from numba.core.extending import intrinsic
    from numba.core.registry import CPUDispatcher

    @intrinsic
    def int64_pointer(typingctx, address):
        """The int ``address`` as a pointer to int64 (the buffer's data)."""
        if not isinstance(address, types.Integer):
            return None
        sig = types.CPointer(types.int64)(address)

        def codegen(context, builder, signature, args):
            return builder.inttoptr(args[0], context.get_value_type(signature.return_type))
        return sig, codegen

    class Bare(CPUDispatcher):
        """A dispatcher whose specializations are compiled explicitly (``compile``): a call
        that matches none goes to ``fallback`` (what ``_compile_for_args`` returns, Numba then
        calls with the arguments).  Numba binds keywords and defaults by the function's
        parameters first (an omitted default is an ``OmittedArg``, typed apart)."""
        fallback = None

        def _compile_for_args(self, *args, **kws):
            return self.fallback

    _NUMBA_SCALARS.update({"f64": types.float64, "i64": types.int64, "bool": types.boolean})
    return Bare, int64_pointer, numba.carray, numba.literal_unroll


def _bare_parts():
    parts = _STATE.get("parts")
    if parts is None:
        parts = _STATE["parts"] = _make_bare_class()
    return parts


#: the Numba type of a scalar kind's argument (``Scalar.kind``)
_NUMBA_SCALARS = {}


def check():
    """Whether direct mode works with the installed Numba (tried once per process on a
    one-line function: a kind's call served, another kind's call routed)."""
    if _STATE["checked"] is None:
        try:
            from numba.core import types
            Bare = _bare_parts()[0]
            scope = {}
            exec("def probe(a0, a1=2.0):\n    return a0 + a1\n", scope)
            d = Bare(scope["probe"], targetoptions={"nopython": True})
            d.fallback = lambda *a, **k: ("routed",) + a
            d.compile((types.float64, types.float64))
            ok = d(1.0, 2.5) == 3.5 and d(a1=2.5, a0=1.0) == 3.5 and \
                d(1, 2.5) == ("routed", 1, 2.5) and d(1.0)[0] == "routed" and \
                len(d.overloads) == 1
        except Exception:       # noqa: BLE001 (any failure: the general path serves)
            ok = False
        _STATE["checked"] = bool(ok)
    return _STATE["checked"]


class DirectMode:
    """One ``Gradient``'s direct mode for one kind of arguments (see the module docstring):
    the dispatcher and its buffer, made once; ``rearm()`` offers the kind direct mode again
    after it left."""

    def __init__(self, gradient, keys, hit, params, rearm):
        art, _, grad_entry, _, single, _, _ = hit
        self.art, self.keys = art, keys
        self.rearm = rearm
        self.cls = None             # the gradient's class in this mode (``enter``)
        self.ref = weakref.ref(gradient)
        self.buffer = np.zeros(_CAPACITY, np.int64)
        Bare, int64_pointer, carray, literal_unroll = _bare_parts()
        # the dispatcher's function has the user's parameters (Numba binds keywords and
        # defaults by them) and refers to its helpers under names none of them shadows
        taken = set(params)

        def fresh(base):
            while base in taken:
                base += "_"
            taken.add(base)
            return base
        entry, ca, ptr, unroll, address, r, c, k, v = (fresh(n) for n in (
            "entry", "carray", "int64_pointer", "literal_unroll", "ADDRESS", "r", "c", "k", "v"))
        plist = ", ".join(params)
        text = (f"def direct({plist}):\n"
                f"    {r} = {entry}({plist})\n"
                f"    {c} = {ca}({ptr}({address}), {_CAPACITY})\n"
                f"    {k} = 0\n"
                f"    for {v} in {unroll}({r}[2]):\n"
                f"        if {k} < {_CAPACITY - 2}:\n"
                f"            {c}[2 + {k}] = {v}\n"
                f"        {k} += 1\n"
                f"    {c}[1] = {k} if {k} < {_CAPACITY - 2} else {_CAPACITY - 2}\n"
                f"    {c}[0] = 1\n"
                f"    return {r}[1]{'[0]' if single else ''}\n")
        fn = gradient.fn
        scope = {entry: grad_entry, ca: carray, ptr: int64_pointer, unroll: literal_unroll,
                 address: int(self.buffer.ctypes.data),
                 "__coarsen_buffer__": self.buffer}     # the address's array lives as long
        exec(compile(text, f"<coarsen direct call of {fn.__qualname__}>", "exec"), scope)
        direct = scope["direct"]
        direct.__defaults__ = fn.__defaults__
        direct.__name__, direct.__qualname__ = fn.__name__, fn.__qualname__
        self.dispatcher = Bare(direct, targetoptions={"nopython": True})
        self.dispatcher.fallback = self.fallback
        # its one specialization, compiled now for the kind's exact Numba types: a call
        # Numba types otherwise (an int past int64 is uint64; an omitted default) falls back
        self.dispatcher.compile(tuple(_NUMBA_SCALARS[t.kind] for t in art.types))

    def fallback(self, *args, **kwargs):
        """Another kind's call: leave direct mode, then the general path (defaults that
        Numba bound are its ``OmittedArg`` markers: their values)."""
        gradient = self.ref()
        leave(gradient)
        args = tuple(getattr(a, "value", a) if type(a).__name__ == "OmittedArg" else a
                     for a in args)
        return gradient(*args, **kwargs)

    def ran_last(self):
        return self.buffer[0] == 1

    def tape(self):
        b = self.buffer
        return tuple(int(v) for v in b[2:2 + int(b[1])])


def _last_get(self):
    mode = type(self)._direct_mode
    return mode.art if mode.ran_last() else self.__dict__.get("_last")


def _settle(self):
    """The last call's ``_last`` and ``_tape`` as plain attributes, where a direct call ran
    last (before the general path sets either, so the other stays the last call's)."""
    mode = type(self)._direct_mode
    if mode.ran_last():
        self.__dict__["_last"], self.__dict__["_tape"] = mode.art, mode.tape()
        mode.buffer[0] = 0


def _last_set(self, value):
    _settle(self)
    self.__dict__["_last"] = value


def _tape_get(self):
    mode = type(self)._direct_mode
    return mode.tape() if mode.ran_last() else self.__dict__.get("_tape")


def _tape_set(self, value):
    _settle(self)
    self.__dict__["_tape"] = value


def offer(hit):
    """How many gradient-only calls of the kind of the direct hit ``hit`` run, after its
    gradient-only tier, before it is offered direct mode (``tiers.Tiers``'s ``offer``); 0
    where it never is (``ENABLED`` off, another target than the cpu, module-level arrays passed,
    generated code longer than ``DIRECT_MAX_LINES``)."""
    art = hit[0]
    if not ENABLED or hit[3] or art.options.build_target != "cpu" or \
            art.source.count("\n") > DIRECT_MAX_LINES or \
            not all(isinstance(t, Scalar) for t in art.types):
        return 0
    return max(1, DIRECT_AFTER - (GRAD_ONLY_AFTER if art.grad_entry is not art.entry else 0))


def enter(gradient, mode):
    """Give ``gradient`` direct mode ``mode`` (nothing where it is in direct mode already, or
    where ``check()`` fails).  Calls of other kinds take the class's own ``__call__``, the
    general path."""
    if getattr(type(gradient), "_direct_mode", None) is not None or not check():
        return False
    base = type(gradient)
    if mode.cls is None or mode.cls._general is not base:
        mode.cls = type(base.__name__, (base,), {
            "__call__": staticmethod(mode.dispatcher), "_direct_mode": mode, "_general": base,
            "_last": property(_last_get, _last_set), "_tape": property(_tape_get, _tape_set),
            "__module__": base.__module__, "__qualname__": base.__qualname__,
            "__doc__": base.__doc__})
    d = gradient.__dict__
    # the properties read these where the general path ran last
    d.setdefault("_last", None)
    d.setdefault("_tape", None)
    mode.buffer[0] = 0
    gradient.__class__ = mode.cls
    return True


def leave(gradient, keys=None, rearm=True):
    """Take ``gradient`` out of direct mode (only where it serves ``keys``, when given):
    ``_last`` and ``_tape`` become plain attributes again, holding the last call's; with
    ``rearm``, the kind is offered direct mode again after ``offer``'s count of calls."""
    if gradient is None:
        return
    cls = type(gradient)
    mode = getattr(cls, "_direct_mode", None)
    if mode is None or (keys is not None and keys != mode.keys):
        return
    last, tape = gradient._last, gradient._tape
    gradient.__class__ = cls._general
    gradient.__dict__["_last"], gradient.__dict__["_tape"] = last, tape
    if rearm:
        mode.rearm()
