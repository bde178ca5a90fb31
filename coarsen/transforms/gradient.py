"""The public API: ``differentiate``, the ``Gradient`` it returns, and ``compile_gradient``,
the one pipeline behind it.

Requires: the frontend, IR, analyses and reverse mode of this package, ``coarsen.transforms.artifact``
(``Options``, ``Signature``, ``Artifact``), and ``coarsen.lowering`` for printing, building and
caching.
Guarantees: ``compile_gradient(fn, signature, options)`` runs the whole pipeline once (one
lowering, then types, analyses, reverse mode, printing; or a disk-cache hit after the
lowering) and returns a frozen ``Artifact``; it keeps nothing in memory.  The disk key
(``artifact.KeyParts``) covers everything that shapes the generated code: the fingerprint
of every read the frontend made while lowering (the source of the function and of every
inlined helper from any module, ``@njit`` helpers and closure-captured ones included, their
default values, and the value of every module-level or closure name they read; see
``coarsen.frontend.source``), the signature (module-level arrays' types included), the
options, and the versions of coarsen (with the hash of its code), Python, NumPy, Numba and
SymPy; an entry is served only to the exact key parts it was stored with.
``differentiate(fn)`` reads and fences the source at once; ``Gradient`` is a facade: each new
signature of argument types (Numba-style: float, int, bool, arrays by dtype and rank) gets its
artifact from ``compile_gradient`` on first call, once, kept per ``Gradient`` (never
re-validated: the frontend's reads happen when a signature is first specialized in a process).
``g(*args, **kwargs)`` binds its arguments like the function (keywords, defaults) and returns
the gradient, ``g.value_and_grad(...)`` the value and the gradient, ``g.source`` the generated
code.  ``wrt`` is checked by ``differentiate`` itself.  Array arguments that overlap in memory
are refused (``CoarsenError`` naming both) when the function writes either of them.
The caller's arrays are never modified.  float32 arrays are computed in float64 and their
gradients returned as float32.
Tapes: a call whose tapes hold more than ``KEEP_TAPES_ABOVE`` entries makes later calls of
the same kind of arguments run the artifact's taped entry on tapes kept per thread
(``threading.local``; a call's results never depend on them), so big tapes are not
allocated, page-faulted and grown again on every call; so does a first call whose float tape,
which also holds the reverse sweep's own arrays (``coarsen.ad.reverse.scratch``), grew past
``KEEP_SCRATCH_ABOVE`` entries.  ``g.tape_bytes`` is the bytes the
last call's tapes held (not the capacity kept), ``g.kept_tape_bytes`` this thread's kept
capacity, and ``g.release_tapes()`` drops every thread's kept tapes.  Calls repeating a kind
of arguments take a fast path that skips binding (when positional), signatures and
conversions that are not needed.
For ``coarsen.transforms.export`` and ``coarsen.transforms.batching``: ``g.specialize(args)``, and
``g.signature_of(args)`` with ``g.specialization(types, signature, workspace=...)``, give an
``Artifact``, ``g.last_specialization`` the last call's, ``g.module_arrays`` the module-level
arrays the entry takes after the parameters, ``g.returns_single`` whether the gradient is one
value, ``g.options`` the ``Options``.
"""
from __future__ import annotations

import inspect
import threading
import time
from dataclasses import replace

import numpy as np

from .. import lowering
from .version import __version__
from .arguments import alias_error, convert_arguments, overlap
from ..ad.reverse import differentiate_ir
from ..ad.reverse.checkpoint import budget_error
from ..ad.reverse.driver import taped_name
from ..ad.reverse.scratch import SCRATCH_HELPERS
from ..analysis.costmodel import machine_weights
from ..analysis.activity import analyze
from .artifact import (
    grad_only_source,
    Artifact,
    KeyParts,
    Options,
    Signature,
)
from ..errors import CoarsenError
from . import direct_call
from .fast_path import arity_class, array_key, type_key
from .base import Transform
from .report import Report, plan_entry, print_report
from ..frontend.source import display_path, unwrap
from .prepare import code_fingerprint, lower_for, typed_ir
from ..lowering.cache import toolchain_versions
from .tiers import GRAD_ONLY_AFTER, PLAIN_AFTER, Tiers, fresh_taped

__all__ = ["KEEP_SCRATCH_ABOVE", "KEEP_TAPES_ABOVE", "Gradient", "compile_gradient", "differentiate",
           "ir_text", "new_gradient"]


# compile_gradient lives beside Gradient, not in a module of its own: it reads
# ``differentiate_ir``, ``__version__`` and ``toolchain_versions`` as this module's names, which
# tests/lowering/test_cache_process.py and tests/lowering/test_cache_deps.py replace in child processes.
def compile_gradient(fn, signature, options, *, module_arrays=None):
    """The one pipeline: the ``Artifact`` of ``fn`` for ``signature`` (a ``Signature``) and
    ``options`` (an ``Options``), from the disk cache when an entry has exactly its key parts.

    ``signature.types`` may leave out the module-level arrays' types (they are then taken
    from the lowering); given, they must match.  ``module_arrays``, when given, are the arrays
    the caller saw (``Gradient``: at ``differentiate()``); the lowering must find the same
    objects, else ``CoarsenError`` (they were rebound).  Nothing is cached in memory here."""
    if options.max_tape_bytes is not None and not options.workspace:
        # the code without a budget meets every budget where it tapes nothing (a history
        # array's rows: 0 bytes, where the checkpointed code tapes the rows it overwrites)
        plain = compile_gradient(fn, signature, replace(options, max_tape_bytes=None),
                                 module_arrays=module_arrays)
        if plain.taped_entry is None:
            return plain
    t0 = time.perf_counter()
    low = lower_for(fn, signature, options.wrt, module_arrays=module_arrays)
    fn, src, params, wrt, fn_ir = low.fn, low.src, low.params, low.wrt, low.fn_ir
    arrays, types, written = low.arrays, low.types, low.written
    # the cost model's weights (calibrated once per machine) choose each segment's strategy
    weights = machine_weights() if options.coarsen else None
    key = KeyParts(dependencies=fn_ir.dependencies.fingerprint(), function=fn.__qualname__,
                   module=str(fn.__module__), file=src.filename, signature=tuple(signature.texts),
                   module_arrays=low.array_texts, wrt=wrt,
                   coarsen=options.coarsen, target=options.target, workspace=options.workspace,
                   boundscheck=options.boundscheck, budget_seconds=options.budget_seconds,
                   plan=options.plan, weights=weights.key() if weights is not None else "",
                   scalarize=options.scalarize, max_tape_bytes=options.max_tape_bytes,
                   parallel=options.parallel, local_tape=options.local_tape,
                   disable=tuple(sorted(options.disable)), version=__version__, code=code_fingerprint(),
                   toolchain=tuple(sorted(toolchain_versions().items())))
    parts = key.as_dict()
    cache_key = lowering.cache_key(**parts)
    try:
        cached = lowering.load(cache_key, parts=parts)
    except lowering.LoweringError:
        cached = None
    entry_name = f"value_and_grad_{fn.__name__}"
    if cached is not None:
        source, meta = cached
        ir_text_ = meta.get("ir", "")
        plan = meta.get("plan", [])
        passes = tuple(meta.get("passes", ()))
    else:
        # types, then element-wise array code as loop nests on the cpu target
        fn_ir = typed_ir(fn_ir, types, src, options)
        # the IR names of the parameters (user names are escaped where they look like
        # compiler names: coarsen.frontend.names.Namer)
        wrt_ir = tuple(fn_ir.params[params.index(w)] for w in wrt)
        facts = analyze(fn_ir, wrt_ir)
        # differentiate_ir gets the same IR (no copy): today it plans segments in it and
        # replaces closed-form loops in place; the planned IR it emitted from is em.fn, which
        # the IR text shows (the same object today, its own copy once it stops mutating).
        module, em = differentiate_ir(fn_ir, wrt_ir, facts, entry_name, options, weights=weights)
        passes = em.passes_run
        plan = [plan_entry(seg) for seg in em.segments] + [
            {"kind": "loop run", "lines": [line, line], "how": how} for line, how in em.parallel_notes] + [
            {"kind": "loop checkpoint", "lines": [line, line], "how": how}
            for line, how in em.checkpoint_notes]
        header = (f"Generated by coarsen {__version__} from {fn.__module__}.{fn.__qualname__} "
                  f"({display_path(fn)}:{src.node.lineno})\n"
                  f"signature: ({', '.join(signature.texts)}); wrt: {', '.join(wrt)}; "
                  f"{'coarse' if options.coarsen else 'fine-grained'} AD")
        source = lowering.render(module, target=options.build_target, header=header)
        from ..ir.printer import format_function
        ir_text_ = format_function(em.fn)
        try:
            # a plan the symbolic stage's wall-clock safety net decided depends on the
            # machine's load: it is used, never stored (the next process tries again)
            if not em.timed_out:
                lowering.store_source(cache_key, source, {"ir": ir_text_, "wrt": list(wrt),
                                                          "plan": plan, "passes": list(passes)},
                                      parts=parts)
        except lowering.LoweringError:
            pass
    transform = time.perf_counter() - t0
    mod = lowering.build(source, name=fn.__name__, target=options.build_target)
    # the taped entry, where the code tapes: its last parameters are the tapes it takes
    taped = getattr(mod, taped_name(entry_name), None)
    grad_entry = grad_taped = None
    if options.build_target == "cpu" and not options.workspace:
        # the gradient-only variants (g(*args)): Numba compiles them on their first call
        grad_mod = lowering.build(grad_only_source(source), name=f"{fn.__name__}_grad",
                                  target=options.build_target)
        grad_entry = getattr(grad_mod, entry_name)
        grad_taped = getattr(grad_mod, taped_name(entry_name), None)
    tapes, scratch = "", False
    if taped is not None:
        code = getattr(taped, "py_func", taped).__code__
        names = code.co_varnames[:code.co_argcount]
        tapes = "".join(k for k, tape in (("f", "_ftape"), ("i", "_itape")) if tape in names)
        scratch = any(f"def {h}(" in source for h in SCRATCH_HELPERS)
    return Artifact(function=fn.__qualname__, signature=tuple(signature.texts), types=types,
                    options=options, wrt=wrt, entry_name=entry_name, source=source, module=mod,
                    entry=getattr(mod, entry_name), ir_text=ir_text_, plan=tuple(plan),
                    transform_seconds=transform, cached=cached is not None, written=written,
                    module_arrays=arrays, reads=fn_ir.dependencies, key=key, cache_key=cache_key,
                    taped_entry=taped, tapes=tapes, grad_entry=grad_entry,
                    grad_taped_entry=grad_taped, scratch=scratch, passes=passes)


# the former name of an Artifact
Specialization = Artifact

# A call of a taped entry passes this thread's kept tapes in and gets them back; Numba boxes
# each array it returns (a few tenths of a microsecond), which costs more than fresh small
# tapes.  A kind of arguments keeps its tapes once a call's tapes held more entries (floats
# and ints) than this: from there on, allocating, page-faulting and growing fresh tapes per
# call costs far more.
KEEP_TAPES_ABOVE = 2048
#: a first call whose tape capacity (its float tape holds the reverse sweep's own arrays,
#: ``coarsen.ad.reverse.scratch``) exceeds this many entries (1 MiB) keeps its tapes too: for
#: arrays that large a fresh allocation per call may cost a page fault per 4 KiB, where the
#: kept path costs about a microsecond a call more than the direct one
KEEP_SCRATCH_ABOVE = 2 ** 17


def _scratch_limit(art, counts):
    """``KEEP_SCRATCH_ABOVE`` where ``art``'s tape counts end with the float tape's capacity
    (the reverse sweep's arrays lie on it: ``coarsen.ad.reverse.driver``), else ``NEVER``: a
    call whose float tape grew past it, the first of its kind or any later one, switches the
    kind to kept tapes.  An int either way: the fast path compares it with an int count on
    every call, and an int against a float costs that call 30 to 60 ns more."""
    if art.scratch and art.options.max_tape_bytes is None and counts is not None \
            and len(counts) == 3 and "f" in art.tapes:
        return KEEP_SCRATCH_ABOVE
    return NEVER


#: a count no tape reaches (the scratch limit of entries whose counts end with no capacity)
NEVER = 1 << 62


class _Tapes(threading.local):
    """The tapes kept for the taped entries (``Artifact.taped_entry``), per thread: one
    float64 and one int64 buffer, shared by a ``Gradient``'s artifacts (their contents do not
    outlive a call), replaced by what each call gives back (grown, possibly)."""

    def __init__(self):
        self.f = np.empty(64)
        self.i = np.empty(64, np.int64)


class Gradient(Transform):
    """The gradient of a function; see ``coarsen.differentiate``.  A facade over
    ``compile_gradient``: it binds arguments, computes their ``Signature``, keeps one
    ``Artifact`` per signature and options, checks aliasing and calls the artifact.
    ``differentiate`` makes it with ``new_gradient``, of the subclass with the fast path for
    the function's arity (``fast_path.arity_class``)."""

    what = "gradient"

    def __init__(self, fn, wrt, coarsen, target, boundscheck=True, plan="auto", scalarize=True,
                 max_tape_bytes=None, parallel=False, disable=frozenset()):
        self.options = Options(wrt=wrt, coarsen=coarsen, target=target, boundscheck=boundscheck,
                               plan=plan, scalarize=scalarize, max_tape_bytes=max_tape_bytes,
                               parallel=parallel, disable=disable)
        self._read(fn, self.options.wrt)
        self._nparams = len(self.params)
        self._artifacts = {}
        # the fast path (see _run): argument types -> direct hit, runner or _by_arrays;
        # never rebound (_lookup holds its get)
        self._fast = {}
        self._types, self._lookup = type_key(self._nparams, self._fast)
        self._fast_arrays = {}      # array_key(args) -> direct hit or runner
        self._tapes = _Tapes()      # the tapes kept per thread (release_tapes drops them)
        self._tape = None           # the last call's (tape floats, tape ints)
        self._last = None
        self._unbudgeted = None     # the gradient without a tape budget (_over_budget)
        self._direct_modes = {}     # keys -> direct_call.DirectMode (made once per kind)
        self.__name__ = f"grad_{self.fn.__name__}"
        self.__doc__ = f"Gradient of {self.fn.__qualname__}, generated by coarsen."
        # the fence runs now: unsupported syntax is refused before any call.  This lowering
        # is not the one code is generated from (compile_gradient lowers per signature, when
        # the signature is first specialized); it gives what is fixed at differentiate():
        # module-level arrays the function reads enter as extra read-only arguments
        fn_ir = self._fence()
        # what the fence read (functions' sources, defaults, module-level and closure values),
        # for inspection; each artifact keys its code by the reads of its own lowering
        self.dependencies = fn_ir.dependencies
        # (after the fence: a refused function never gets here)
        if getattr(type(self), "_arity", None) != self._nparams:
            self.__class__ = arity_class(Gradient, self._nparams)

    @property
    def coarsen(self):
        return self.options.coarsen

    @property
    def target(self):
        return self.options.target

    @property
    def boundscheck(self):
        return self.options.boundscheck

    # ------------------------------------------------------------------ artifacts
    def _artifact(self, signature, workspace=False, local_tape=None):
        """The artifact for ``signature`` (compiled on first use, then kept).  ``workspace=True``
        is the scalar-only variant whose tapes are passed in (CUDA); ``local_tape``, with it,
        the sizes of its local stretch tapes (``coarsen.ad.reverse.local_stretch``)."""
        options = replace(self.options, workspace=True, local_tape=local_tape) if workspace \
            else self.options
        key = (signature.types, options)
        art = self._artifacts.get(key)
        if art is None:
            art = compile_gradient(self.fn, signature, options, module_arrays=self._global_arrays)
            self._artifacts[key] = art
        return art

    def _prepare(self, args):
        art = self._artifact(self._signature(args))
        self._last = art
        return art, self._convert(args)

    def _convert(self, args):
        """The arguments, module-level arrays appended, as the entry takes them: float64 and
        int64 arrays, Python scalars."""
        return convert_arguments(args, self._global_arrays)

    # The fast path.  A kind of arguments (their types; arrays' dtypes and ranks too) seen
    # before maps, in ``_fast`` (``_fast_arrays`` for kinds with arrays, which ``_fast`` sends
    # to ``_by_arrays``), to what the call needs once its artifact is known: the direct hit
    # ``(artifact, entry, gradient-only entry, module arrays, single, limit, scratch_limit)``
    # where the arguments and results need no conversion, the function writes no array and
    # the tapes are fresh per call (a tape of more than ``limit`` entries, or a float tape
    # whose capacity, the counts' last entry where the reverse sweep's arrays lie on it, is
    # over ``scratch_limit``, switches the kind to the kept tapes), else a runner
    # (``_runner``).  ``__call__`` inlines ``_run`` for speed.
    def _run(self, args):
        """``(value, gradient)`` of one call on bound arguments."""
        hit = self._lookup(args)
        if type(hit) is tuple:
            return self._direct(hit, args)
        return (hit or self._first_run)(args)

    def _direct(self, hit, args, value=True):
        art, entry, grad_entry, arrays, single, limit, scratch_limit = hit
        if not value:
            entry = grad_entry
        r = entry(*args, *arrays) if arrays else entry(*args)
        self._last, self._tape = art, r[2]
        if r[2][0] + r[2][1] > limit or r[2][-1] > scratch_limit:
            self._keep_tapes(args, art)
        return r[0], (r[1][0] if single else r[1])

    def _by_arrays(self, args, value=True):
        """The fast path of calls with arrays: their dtypes and ranks pick the hit."""
        hit = self._fast_arrays.get(array_key(args))
        if type(hit) is tuple:
            return self._direct(hit, args, value)
        return (hit or self._first_run)(args, value)

    def _keys(self, args):
        """The keys of ``_fast`` and ``_fast_arrays`` (None without arrays) of ``args``."""
        key = self._types(args)
        return key, (array_key(args) if any(issubclass(t, np.ndarray) for t in key) else None)

    def _remember(self, args, hit, keys=None):
        """``hit`` (a direct hit or a runner) for later calls with arguments of this kind."""
        key, akey = keys or self._keys(args)
        if akey is not None:
            if len(self._fast_arrays) < 64:
                self._fast[key] = self._by_arrays
                self._fast_arrays[akey] = hit
        elif len(self._fast) < 64:
            self._fast[key] = hit

    def _tiering(self, keys, hit, settled=False):
        """A direct hit whose entries Numba compiles when they are needed (``tiers.Tiers``);
        each switch of a tier remembers the hit anew for these keys, and the hit whose
        gradient-only slot is final is offered to direct mode (``coarsen.transforms.direct_call``).
        ``settled``: the entries are compiled (a kind offered direct mode again)."""
        offer = direct_call.offer(hit)

        def remember(h):
            self._remember(None, h, keys)
            if offer and h[2] is h[0].grad_entry:
                mode = self._direct_modes.get(keys)
                if mode is None:
                    # left direct mode: offered again after as many calls of the kind
                    rearm = lambda: self._remember(None, self._tiering(keys, h, True), keys)  # noqa: E731
                    try:
                        mode = direct_call.DirectMode(self, keys, h, self.params, rearm)
                    except Exception:       # noqa: BLE001 (its compile failed: the general
                        mode = False        # path, which served the kind so far, goes on)
                    self._direct_modes[keys] = mode
                if mode:
                    direct_call.enter(self, mode)
        return Tiers(hit, remember, offer, settled).hit()

    def _keep_tapes(self, args, art):
        """A direct hit's tapes grew big: later calls of its kind run on kept tapes (out of
        direct mode, which runs on fresh ones)."""
        keys = self._keys(args)
        direct_call.leave(self, keys, rearm=False)
        self._remember(args, self._runner(art, True, True, (), True), keys)

    def _first_run(self, args, value=True):
        """The first call of a kind of arguments: its signature, artifact and conversions,
        then what later calls of the same kind take (``_remember``).  It runs the full entry
        (``value`` is for the signature of the fast path's callables)."""
        if self._module_arrays:
            self._module_arrays.check()
        art, conv = self._prepare(args)
        if art.written:
            self._check_aliasing(args, art.written)
        first = fresh_taped(art) or art.entry
        try:
            r = first(*conv)
        except MemoryError as exc:
            return self._over_budget(exc, art, args)
        value, grads, tape = r[:3]
        self._tape = tape
        out = []
        plain = all(c is a for c, a in zip(conv, args + self._global_arrays))
        casts = []
        for name, gr in zip(art.wrt, grads):
            a = args[self.params.index(name)]
            if isinstance(a, np.ndarray):
                if a.dtype != np.float64:
                    plain = False
                gr = np.asarray(gr).astype(a.dtype, copy=False)
                casts.append(a.dtype)
            else:
                gr = float(gr)
                casts.append(None)
            out.append(gr)
        # Numba's results have the types it compiled for: Python floats for scalars (no
        # conversion needed on later calls); plain Python may give NumPy scalars
        raw = plain and art.options.build_target == "cpu" and type(value) is float and \
            all(c is not None or type(g) is float for g, c in zip(grads, casts))
        # the reverse sweep's arrays live on the float tape (``ad.reverse.scratch``): where
        # they made it large, keep it, so that later calls reuse that memory
        keep = art.taped_entry is not None and (
            int(tape[0]) + int(tape[1]) > KEEP_TAPES_ABOVE
            or (art.scratch and any(t.shape[0] > KEEP_SCRATCH_ABOVE for t in r[3:])))
        if keep and len(r) == 3 + len(art.tapes):
            # the first call's tapes, grown to this kind's size, are the ones kept
            for kind, t in zip(art.tapes, r[3:]):
                setattr(self._tapes, kind, t)
        if raw and not art.written and not keep and art.options.max_tape_bytes is None \
                and not self._module_arrays:
            limit = KEEP_TAPES_ABOVE if art.taped_entry is not None else NEVER
            hit = (art, art.entry, art.grad_entry, self._global_arrays, self._single, limit,
                   _scratch_limit(art, tape))
            if art.grad_entry is not art.entry or art.taped_entry is not None or \
                    direct_call.offer(hit):
                hit = self._tiering(self._keys(args), hit)
            self._remember(args, hit)
        else:
            self._remember(args, self._runner(art, plain, raw, tuple(casts), keep))
        res = out[0] if self._single else tuple(out)
        return float(value), res

    def _over_budget(self, exc, art, args):
        """``(value, gradient)`` of a call whose checkpointed tapes went over
        ``max_tape_bytes``, from the gradient without checkpoints where its tapes keep within
        the budget (the checkpoints hold the loops' state, which that tape does not: a budget
        between the two peaks was refused though the plain gradient met it; the numbers are
        the same bits); else the budget's ``CoarsenError``."""
        err = _budget_error(exc, art)
        if not isinstance(err, CoarsenError):
            raise err from None
        if self._unbudgeted is None:
            o = self.options
            self._unbudgeted = Gradient(self.fn, o.wrt, o.coarsen, o.target, o.boundscheck,
                                        o.plan, o.scalarize, None, o.parallel, o.disable)
        plain = self._unbudgeted
        result = plain.value_and_grad(*args)
        if plain.tape_bytes > self.options.max_tape_bytes:
            raise err from None
        self._tape = plain._tape
        return result

    def _runner(self, art, plain, raw, casts, keep):
        """The fast path of one kind of arguments that needs more than a direct hit: a
        function of the arguments giving ``(value, gradient)``.

        ``plain``: the arguments need no conversion; ``raw``: nor do the results; ``casts``:
        per gradient, the argument's dtype (an array) or None (a float).  ``keep``: call the
        taped entry on this thread's kept tapes and keep what it gives back; a call of the
        plain entry whose tapes held more than ``KEEP_TAPES_ABOVE`` entries switches this
        runner to that."""
        gradient = self
        arrays, single, written = self._global_arrays, self._single, art.written
        scratch_limit = _scratch_limit(art, self._tape)
        entries = {True: (art.entry, art.taped_entry), False: (art.grad_entry, art.grad_taped_entry)}
        taped = art.taped_entry
        kinds = art.tapes if keep else ""
        # the gradient-only entries from the GRAD_ONLY_AFTER-th gradient-only call on (_tiering)
        tier = GRAD_ONLY_AFTER if art.grad_entry is not art.entry else 0
        # the plain entries from the PLAIN_AFTER-th call on (``tiers.fresh_taped``); a
        # countdown of its own: ``plain`` says whether the arguments need converting (reusing
        # its name skipped the conversion of float32 and big-endian arrays on calls 2 to 64)
        fresh = fresh_taped(art)
        countdown = PLAIN_AFTER if fresh is not None else 0

        module_arrays = self._module_arrays

        def run(args, value=True):
            nonlocal kinds, tier, countdown
            if module_arrays:
                module_arrays.check()
            gradient._last = art
            if written:
                gradient._check_aliasing(args, written)
            call = args + arrays if plain else gradient._convert(args)
            if not value and tier > 0:
                tier -= 1
                entry, taped_entry = entries[True]
            else:
                entry, taped_entry = entries[value]
            if not kinds and countdown > 0:
                countdown -= 1
                entry = fresh
            try:
                r = kept(call, taped_entry) if kinds else entry(*call)
            except MemoryError as exc:
                return gradient._over_budget(exc, art, args)
            if not kinds:
                if taped is not None and (r[2][0] + r[2][1] > KEEP_TAPES_ABOVE
                                          or r[2][-1] > scratch_limit):
                    kinds = art.tapes       # big tapes from now on: keep them
            gradient._tape = r[2]
            if raw:
                return r[0], (r[1][0] if single else r[1])
            res = tuple(float(g) if c is None else np.asarray(g).astype(c, copy=False)
                        for g, c in zip(r[1], casts))
            return float(r[0]), (res[0] if single else res)

        def kept(call, taped):
            """The taped entry on this thread's kept tapes, which it replaces."""
            tapes = gradient._tapes
            if kinds == "f":
                r = taped(*call, tapes.f)
                tapes.f = r[3]
            elif kinds == "i":
                r = taped(*call, tapes.i)
                tapes.i = r[3]
            else:
                r = taped(*call, tapes.f, tapes.i)
                tapes.f, tapes.i = r[3], r[4]
            return r
        return run

    @property
    def tape_bytes(self):
        """The bytes the last call's tapes held (floats and ints, 8 bytes each), or None
        before any call; not the capacity kept for later calls."""
        t = self._tape
        return None if t is None else 8 * (int(t[0]) + int(t[1]))

    @property
    def kept_tape_bytes(self):
        """The bytes of the tapes this thread keeps for its later calls (their capacity; a few
        hundred bytes until a call's tapes grow past ``KEEP_TAPES_ABOVE`` entries)."""
        tapes = self._tapes
        return tapes.f.nbytes + tapes.i.nbytes

    def release_tapes(self):
        """Drop the tapes kept for later calls (every thread's, once no call is running on
        them); the next call of each thread starts from small ones again."""
        self._tapes = _Tapes()

    def _check_aliasing(self, args, written):
        """Refuse array arguments (module-level arrays included) that overlap in memory when the
        function writes either (``coarsen.transforms.arguments``)."""
        pair = overlap(args, self._global_arrays, written)
        if pair is not None:
            raise alias_error(self.fn.__name__, self.params, *pair, written)

    def __call__(self, *args, **kwargs):
        if kwargs or len(args) != self._nparams:
            args = self._bind(args, kwargs)
        # self._run(args)[1], with _direct inlined (a direct hit is the common case: see _run)
        hit = self._lookup(args)
        if type(hit) is not tuple:
            return (hit or self._first_run)(args, False)[1]
        art, _, entry, arrays, single, limit, scratch_limit = hit
        r = entry(*args, *arrays) if arrays else entry(*args)
        self._last, self._tape = art, r[2]
        if r[2][0] + r[2][1] > limit or r[2][-1] > scratch_limit:
            self._keep_tapes(args, art)
        return r[1][0] if single else r[1]

    def value_and_grad(self, *args, **kwargs):
        if kwargs or len(args) != self._nparams:
            args = self._bind(args, kwargs)
        return self._run(args)

    # ------------------------------------------------------------------ inspection
    @property
    def source(self):
        if self._last is None:
            raise CoarsenError("the gradient is specialized on its first call's argument types; "
                               "call it once (or use g.source_for(*args)) before reading g.source")
        return self._last.source

    def _source_for(self, args):
        return self._artifact(self._signature(args)).source

    def _ir_for(self, args):
        return self._artifact(self._signature(args)).ir_text

    def report(self, *args, file=None, tape_lines=False, **kwargs):
        """The segment plan of the specialization for ``args`` (default: the last call's;
        positional, keyword and default arguments bound as ``g`` binds them): prints it and
        returns a ``Report`` (a list of one dict per segment of interest).
        ``tape_lines=True`` (``args`` needed) also runs an instrumented build once on ``args``
        and reports the tape bytes per source line (``coarsen.transforms.tape_lines``)."""
        if tape_lines and not (args or kwargs):
            raise CoarsenError("report(*args, tape_lines=True) runs the gradient on args: pass them")
        if args or kwargs:
            args = self._bind(args, kwargs)
            art = self._artifact(self._signature(args))
            self._last = art
        elif self._last is not None:
            art = self._last
        else:
            raise CoarsenError("call the gradient once (or pass example arguments to report) first")
        # per checkpointed loop, the last call's stride and revolve snapshots (0: two-level)
        loops = tuple(self._tape[2:]) if self._tape is not None and self._last is art else ()
        rep = Report(self.fn.__qualname__, art.signature, self.coarsen, list(art.plan),
                     art.transform_seconds, self.tape_bytes, loops[0::2], snapshots=loops[1::2],
                     passes=art.passes)
        if tape_lines:
            from .tape_lines import tape_lines as count_lines
            rep.tape_lines = count_lines(self.fn, art, self._convert(args))
        return print_report(rep, file)

    # ------------------------------------------------------------------ export and batches
    def export(self, path, signature=None):
        """Write the gradient as a standalone module (math, NumPy and Numba only); see
        ``coarsen.transforms.export``.  ``signature`` in Numba notation, e.g. "float64[:], int64";
        default: the signature of the last call."""
        from .export import export_gradient
        return export_gradient(self, path, signature=signature)

    def batch(self, in_axes, *, target=None, **options):
        """A batched gradient over argument sets, like ``jax.vmap``: see ``coarsen.transforms.batching``
        (``target="dask"`` takes ``client=``, ``chunks=``, ``nchunks=``: ``coarsen.transforms.batching.dask``)."""
        from .batching import batched_gradient
        return batched_gradient(self, in_axes, target=target, **options)

    def specialize(self, args_or_types):
        """The ``Artifact`` for example arguments (a tuple of values)."""
        return self._artifact(self._signature(args_or_types))

    def signature_of(self, args):
        """``(types, signature)`` of example ``args`` (one per parameter): ``types`` are the IR
        types (module-level arrays' appended), ``signature`` the parameters' Numba type texts."""
        sig = self._signature(args)
        return sig.types, sig.texts

    def specialization(self, types, signature, *, workspace=False, local_tape=None):
        """The ``Artifact`` for ``signature_of``'s ``(types, signature)``;
        ``workspace=True`` is the scalar-only variant whose tapes are passed in (CUDA), and
        ``local_tape=(floats, ints)`` its variant taking local stretch tapes of those sizes."""
        return self._artifact(Signature(tuple(types), tuple(signature)), workspace, local_tape)

    @property
    def last_signature(self):
        """The last call's parameter types in Numba notation (a tuple of texts), or None."""
        return self._last.signature if self._last is not None else None

    @property
    def last_specialization(self):
        """The ``Artifact`` of the last call (or ``report``), or ``None`` before any."""
        return self._last

    def __repr__(self):
        return f"<coarsen gradient of {self.fn.__qualname__}>"



def new_gradient(fn, *args):
    """``Gradient(fn, *args)`` of the subclass with the fast path for ``fn``'s arity
    (``fast_path.arity_class``), chosen before ``__init__`` sets the attributes: assigning
    ``__class__`` afterwards (which ``__init__`` still does where the arity was not known here)
    leaves the attributes in a dictionary that each call reads and writes about 0.15 us
    slower."""
    try:
        n = sum(1 for p in inspect.signature(unwrap(fn)).parameters.values()
                if p.kind is p.POSITIONAL_OR_KEYWORD)
    except (TypeError, ValueError):
        n = None
    return (Gradient if n is None else arity_class(Gradient, n))(fn, *args)


def _budget_error(exc, art):
    """A tape budget that cannot be met as a ``CoarsenError`` (``checkpoint.budget_error``);
    any other ``MemoryError`` as it was."""
    return budget_error(exc, art.options.max_tape_bytes) or exc


def ir_text(fn, *args):
    """The IR of ``fn`` specialized for example ``args``, as text (in the spirit of a jaxpr):
    one primitive per line with its type, loops and branches as nested regions, the gamma and
    mu phis of merged and loop-carried variables.  For the plan after coarsening, see
    ``differentiate(fn).ir(*args)`` and ``.report(*args)``."""
    return new_gradient(fn, None, False, "python").ir(*args)


def differentiate(fn, wrt=None, *, coarsen=True, target="cpu", boundscheck=True, plan="auto",
                  scalarize=True, max_tape_bytes=None, parallel=False, disable=()):
    """The gradient of ``fn``, a plain Python function returning a float scalar.

    ``wrt``: None (every float parameter, a tuple out), a name or position (a single value out),
    or a tuple/list of names or positions (a tuple out, in that order).
    ``coarsen``: True differentiates segments symbolically; False uses fine-grained
    algorithmic AD only (the paper's baseline).  ``target``: "cpu" (Numba) or "python".
    ``boundscheck``: True raises ``IndexError`` naming the source line for an index out of
    range (before the access); False leaves indices unchecked (out of range is then undefined).
    ``plan`` (coarse mode): how each lifted segment is differentiated: ``"auto"`` (the cost
    model's choice, ``coarsen.analysis.strategy``), or forced on every segment:
    ``"recompute"`` (tape the inputs, re-evaluate in the reverse step), ``"preaccumulate"``
    (partials in the forward sweep, taped; one-path segments) or ``"fine"``.  The report
    shows each segment's strategy and the estimated cost of each alternative.
    ``scalarize``: True computes element-wise array expressions (slices, broadcasting, full
    sums) in loop nests, element by element, in both sweeps (``coarsen.ir.scalarize``); False
    keeps them as NumPy array operations.
    ``max_tape_bytes``: None, or a budget in bytes for the tapes (checkpoints included): each
    ``range`` loop outside every other loop that the reverse sweep reverses is checkpointed
    (``coarsen.ad.reverse.checkpoint``: two-level, stride chosen at each call; the gradient is
    the same, bit for bit); ``g.tape_bytes`` is then the call's peak, and a call that cannot
    stay within the budget raises ``CoarsenError`` naming the loop and the bytes it needs.
    ``parallel``: False differentiates ``numba.prange`` reduction loops in parallel and
    ``range`` loops serially; True runs every reduction loop (``range`` or ``prange``) in
    parallel blocks, combined in a fixed order (``coarsen.ad.reverse.parallel``).
    ``disable``: names of reverse-mode passes to switch off (``coarsen.ad.reverse.pipeline``;
    an unknown name raises ``CoarsenError``); the report lists the passes that ran.
    """
    return new_gradient(fn, wrt, coarsen, target, boundscheck, plan, scalarize,
                        max_tape_bytes, parallel, disable)
