"""``Transform``: what every public transform shares (``Gradient``, ``Jvp``, ``Jacobian``,
``Hessian``, ``Hvp``).

Requires: a plain Python function with source (``coarsen.frontend.source``), ``wrt`` as the
transforms take it, and the frontend's lowering (the fence).
Guarantees:

* ``_read(fn, wrt)`` reads the function (``fn``, ``src``, ``params``; ``CoarsenError`` where
  there is no source) and checks ``wrt`` against its parameters; ``_fence(fn)`` lowers it once
  (unsupported syntax refused before any call) and keeps what is fixed from then on: the
  module-level arrays the function reads (entering the generated code as extra read-only
  arguments, checked at each call), the parameters' names in the generated code.
* ``_cached(args, fast, table, build)`` is the artifact cache every transform keeps: one
  build per signature (``table``), found again by the kind of the arguments (``fast``).
* ``_bind(args, kwargs)`` binds a call's arguments as the function binds them (keywords,
  defaults); ``_signature(args)`` is their ``Signature`` (the kind of signature each
  specialization is kept by); ``_error(problem, hint)`` a ``CoarsenError`` at the function's
  definition.
* The surface, the same on every transform: ``source`` (the last call's generated code),
  ``source_for(*args)`` and ``ir(*args)`` (the generated code and the IR of the function for
  example arguments, bound as a call binds them), ``report(*args, file=None)`` (prints and
  returns a ``TransformReport``: of the specialization for ``args``, default the last call's),
  ``export(path, signature=None)`` and ``batch(in_axes, target=None)``; a transform without an
  export or a batch raises a ``CoarsenError`` that says so.  ``returns_single``,
  ``module_arrays`` and ``last_signature`` describe the transform and its last call.
  Subclasses give ``_source_for(args)``, ``_ir_for(args)``, ``_report(args)`` (``args`` bound,
  or None for the last call) and, where they have them, ``export`` and ``batch``.
"""
from __future__ import annotations

import inspect

from ..errors import CoarsenError
from ..frontend.lower import lower
from ..frontend.source import get_source, unwrap
from .arguments import kind_of
from .artifact import Signature, bind_arguments, check_wrt, function_error
from .module_arrays import ModuleArrays
from .report import print_report

__all__ = ["Transform"]


class Transform:
    """The common part of the public transforms (see the module docstring)."""

    #: the transform's name in messages ("gradient", "jvp", ...)
    what = "transform"

    def _read(self, fn, wrt):
        self.fn = unwrap(fn)
        self.src = get_source(self.fn)          # raises CoarsenError when there is no source
        self.params = [a.id for a in self.src.node.args.args]
        self._pysig = inspect.signature(self.fn)    # binds keyword arguments and defaults
        self._single = wrt is not None and not isinstance(wrt, (tuple, list))
        check_wrt(wrt, self.params, self.fn.__name__)

    def _fence(self, fn=None):
        """Lower ``fn`` (default: the function) once, now; returns its IR."""
        fn_ir, _ = lower(self.fn if fn is None else fn)
        self._global_arrays = tuple(fn_ir.global_arrays)
        # checked at every call where there are any (a name rebound since: CoarsenError)
        self._module_arrays = ModuleArrays.of(fn_ir, self.fn.__name__)
        # the parameters' names in the IR and the generated code: the user's, escaped where
        # they look like compiler names or shadow a module the generated code imports
        self.ir_params = list(fn_ir.params[:len(self.params)])
        self._last = None
        return fn_ir

    # ------------------------------------------------------------------ arguments
    def _bind(self, args, kwargs):
        """Positional, keyword and default arguments bound as the function binds them."""
        return bind_arguments(self.fn, self._pysig, self.params, args, kwargs)

    def _signature(self, args):
        return Signature.of(self.params, tuple(args), self._global_arrays, self.fn.__name__)

    def _cached(self, args, fast, table, build):
        """The artifact cache: what ``build(args, sig)`` gives for the arguments' signature,
        kept in ``table`` (by the signature's types) and ``fast`` (by ``kind_of`` of the
        arguments, at most 64 kinds: the path of a call whose kind was seen)."""
        kind = kind_of(args)
        got = fast.get(kind)
        if got is not None:
            return got
        sig = self._signature(args)
        got = table.get(sig.types)
        if got is None:
            got = table[sig.types] = build(args, sig)
        if len(fast) < 64:
            fast[kind] = got
        return got

    def _error(self, problem, hint):
        return function_error(self.src, problem, hint)

    @property
    def returns_single(self):
        """Whether ``wrt`` names a single parameter (a bare result, not a tuple)."""
        return bool(self._single)

    @property
    def module_arrays(self):
        """The module-level arrays the function reads, in the order the generated entry takes
        them (after the parameters), as a tuple: read-only inputs."""
        return tuple(self._global_arrays)

    # ------------------------------------------------------------------ inspection
    def source_for(self, *args, **kwargs):
        """The generated code for example ``args`` (bound as a call binds them)."""
        return self._source_for(self._bind(args, kwargs))

    def ir(self, *args, **kwargs):
        """The IR text of the function specialized for ``args`` (bound as a call binds them)."""
        return self._ir_for(self._bind(args, kwargs))

    def report(self, *args, file=None, **kwargs):
        """Prints and returns the report of the specialization for ``args`` (default: the
        last call's; bound as a call binds them)."""
        return print_report(self._report(self._bind(args, kwargs) if args or kwargs else None),
                            file)

    def _source_for(self, args):
        raise NotImplementedError

    def _ir_for(self, args):
        raise NotImplementedError

    def _report(self, args):
        raise NotImplementedError

    # ------------------------------------------------------------------ export and batches
    def export(self, path, signature=None):
        raise CoarsenError(f"export() of a {self.what} is not supported",
                           hint="export the transforms it is built on (coarsen.jvp, "
                                "coarsen.differentiate)")

    def batch(self, in_axes, *, target=None):
        raise CoarsenError(f"batch() of a {self.what} is not supported",
                           hint="call it once per argument set, or batch coarsen.jvp or "
                                "coarsen.differentiate")
