"""Batches of the other transforms: ``jvp``, ``jacobian``, ``hvp`` and ``hessian`` over many
argument sets, like ``jax.vmap`` of them (``Gradient.batch`` is ``coarsen.transforms.batching``).

    bj = coarsen.jvp(f, wrt="x").batch((0, None))      # per parameter: 0 batched, None shared
    values, tangents_out = bj(X, a, tangents=T)        # T (B, *x.shape): x is batched
    hv = coarsen.hvp(f, wrt="x").batch((0, None))(X, a, v=V)   # (B, *x.shape)
    H = coarsen.hessian(f, wrt="x").batch((0, None))(X, a)     # (B, *x.shape, *x.shape)
    J = coarsen.jacobian(g, wrt="x").batch((0, None))(X, a)    # (B, *out.shape, *x.shape)

Requires: a ``Jvp``, ``Jacobian``, ``Hvp`` or ``Hessian``; ``in_axes`` one entry per parameter of the
user's function, each ``0`` (a leading batch axis) or ``None`` (shared by every set), a bare
``0`` batching every parameter, at least one batched; batched arguments arrays (or
sequences) whose first axis runs over the sets, all of the same length ``B >= 1``.  Anything
else raises ``CoarsenError`` before code runs.  A direction (a JVP's tangent, an HVP's ``v``)
follows its ``wrt`` parameter: batched, ``(B, *per-set shape)``, when the parameter is
batched, else shared, the parameter's per-set shape, the same direction for every set.

Guarantees: every result has a leading batch axis ``B``, shared parameters included (JAX's
``vmap``: per-set results, NOT summed, unlike ``Gradient.batch``, which sums the gradients
of shared parameters):

* ``bj(*args, tangents=...)`` returns ``(values, tangents_out)``: ``values`` float64
  ``(B,)`` for a scalar-valued function, ``(B, *out shape)`` for an array-valued one (the
  result's shape must be the same for every set: another shape raises ``ValueError``), and
  ``tangents_out`` the same shape;
* ``bh(*args, v=...)`` (or ``v`` last) returns per ``wrt`` parameter ``H v`` per set,
  ``(B, *per-set shape)``, in ``coarsen.hvp``'s convention (a bare value for one ``wrt``,
  a tuple otherwise; an array parameter's result in its dtype, float64 for a scalar one);
* ``bH(*args)`` returns JAX's ``vmap(hessian)`` layout: ``(B, *p.shape, *p.shape)`` for one
  ``wrt`` parameter (``(B,)`` for a scalar), the nested tuple ``H[p][q]`` of
  ``(B, *p.shape, *q.shape)`` blocks for several.
* ``bJ(*args)`` returns the Jacobian's layout per set with a leading set axis (``(B, *out
  shape, *p.shape)`` per ``wrt`` parameter), each set's from the Jacobian's forward-mode
  sweeps (a Jacobian whose calls choose reverse mode gives the same derivatives, computed
  the other way); the result's shape must be the same for every set.
* Per set, the numbers are those of the unbatched transform on that set's arguments, bit for
  bit on both targets: the driver calls the transform's own compiled function for the
  per-set signature (the JVP entry, the Hessian-vector product's gradient entry, the Hessian
  driver of ``coarsen.transforms.sweeps``), imported from the module the transform built (not
  regenerated, not recompiled where Numba already has that specialization), and only copies
  its results.  The sets are independent (nothing is summed), so the results do not depend
  on the thread count or on scheduling.

Targets (default: the transform's own target; the transform must have been built for it):

* ``"cpu"``: a driver module (``coarsen.lowering.build``, once per per-set signature) with
  ``@numba.njit(parallel=True, cache=True)``: set 0 first (to learn the results' shapes),
  then the other sets in a ``numba.prange`` loop.  Numba drops an exception raised on a
  worker thread, so each set marks itself done and the sets left undone run again serially
  after the loop, where their exception (an ``IndexError``, a result of another shape)
  reaches the caller.  Where the per-set module has parallel code of its own (a gradient
  with ``prange`` loops, ``hessian(..., parallel=True)``: Numba does not nest parallel
  regions) the sets run serially; ``bb.parallel`` says which, for the last call.
* ``"python"``: the same driver in plain Python, sets in order (debugging).
* ``"cuda"`` and ``"dask"`` are refused with a ``CoarsenError``: ``Gradient.batch`` has them.

``bb.source`` is the driver module's text (it names the module it imports the entry from).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ... import lowering
from ..artifact import function_error
from ...errors import CoarsenError
from ..arguments import check_aliasing, convert_argument, converted

__all__ = ["BatchAxes", "BatchedHessian", "BatchedHvp", "BatchedJvp", "DriverPlan",
           "SetSplit", "batch_axes", "driver_source", "split_sets"]

_TARGETS = ("cpu", "python")


@dataclass(frozen=True)
class BatchAxes:
    """``in_axes`` read: the entries (0 or None per parameter) and which are batched."""
    in_axes: tuple
    batched: tuple


def batch_axes(in_axes, params, fname):
    """``BatchAxes`` of ``in_axes`` for a function ``fname`` with ``params``, or a
    ``CoarsenError`` saying what is wrong."""
    n = len(params)
    if isinstance(in_axes, (int, np.integer)) and not isinstance(in_axes, (bool, np.bool_)):
        in_axes = (int(in_axes),) * n
    if not isinstance(in_axes, (tuple, list)):
        raise CoarsenError(f"in_axes must be 0 or a tuple with 0 or None per parameter, got "
                           f"{in_axes!r}", hint=f"e.g. in_axes={(0,) + (None,) * (n - 1)}")
    axes = tuple(in_axes)
    if len(axes) != n:
        raise CoarsenError(f"in_axes has {len(axes)} entries but {fname} has {n} parameters "
                           f"({', '.join(params)})", hint="give one entry, 0 or None, per parameter")
    for p, ax in zip(params, axes):
        if ax is not None and (isinstance(ax, (bool, np.bool_)) or ax != 0):
            raise CoarsenError(f"in_axes for {p!r} is {ax!r}; coarsen batches along a leading "
                               "axis only (0) or shares the argument (None)",
                               hint="move the batch axis first (np.moveaxis) and use 0")
    if all(ax is None for ax in axes):
        raise CoarsenError("in_axes batches no parameter", hint="call the transform directly")
    return BatchAxes(axes, tuple(ax == 0 for ax in axes))


@dataclass(frozen=True)
class SetSplit:
    """A batched call's arguments: as given (sequences made arrays), the batch size, and set
    0's arguments (what the unbatched transform is called with, for the per-set signature)."""
    args: tuple
    size: int
    examples: tuple


def split_sets(axes, params, args, fname):
    """``SetSplit`` of a batched call's positional ``args``; ``CoarsenError`` for a wrong
    count, a batched argument that is no array or a scalar, or unequal batch sizes."""
    if len(args) != len(params):
        raise CoarsenError(f"{fname} takes {len(params)} arguments ({', '.join(params)}), got "
                           f"{len(args)}", hint="pass every argument by position")
    out, size, first = [], None, None
    for p, a, b in zip(params, args, axes.batched):
        if b:
            if isinstance(a, (list, tuple)):
                a = np.asarray(a)
            if not isinstance(a, np.ndarray) or a.ndim == 0:
                raise CoarsenError(f"argument {p!r} is batched (in_axes 0) but is a "
                                   f"{type(a).__name__ if not isinstance(a, np.ndarray) else '0-d array'}",
                                   hint="pass an array whose first axis runs over the sets, "
                                        "or use None in in_axes for a shared argument")
            if size is None:
                size, first = a.shape[0], p
            elif a.shape[0] != size:
                raise CoarsenError(f"batched arguments {first!r} and {p!r} have different batch "
                                   f"sizes ({size} and {a.shape[0]})")
        out.append(a)
    if size == 0:
        raise CoarsenError("the batch is empty (batch size 0)")
    examples = tuple(a[0] if b else a for a, b in zip(out, axes.batched))
    return SetSplit(tuple(out), size, examples)


@dataclass(frozen=True)
class DriverPlan:
    """What a batch driver does: ``name(args...)`` calls ``entry`` once per set with the
    arguments (``batched`` per argument: indexed by the set, or passed whole) and returns one
    float64 array per output, ``(n_sets, *shape)``: ``outputs`` are index paths into the
    entry's result (``(1, 0)`` is ``r[1][0]``, ``()`` the result itself)."""
    name: str
    entry: str
    batched: tuple
    outputs: tuple
    parallel: bool


def driver_source(plan):
    """The source text of ``plan``'s driver (see ``DriverPlan`` and the module docstring)."""
    args = [f"_a{k}" for k in range(len(plan.batched))]

    def call(i):
        return f"{plan.entry}({', '.join(f'{a}[{i}]' if b else a for a, b in zip(args, plan.batched))})"

    def out(r, q):
        return r + "".join(f"[{k}]" for k in plan.outputs[q])

    outs = [f"_o{q}" for q in range(len(plan.outputs))]
    fits = " and ".join(f"np.asarray({out('_s', q)}).shape == {o}.shape[1:]"
                        for q, o in enumerate(outs))
    batched = [a for a, b in zip(args, plan.batched) if b]
    lines = ["@numba.njit(parallel=True, cache=True)"] if plan.parallel else []
    lines += [f"def {plan.name}({', '.join(args)}):",
              f'    """{plan.entry} on every set (batched: {", ".join(batched)}), a leading set '
              'axis on each result."""',
              f"    _n = {batched[0]}.shape[0]"]
    for a in batched[1:]:
        lines += [f"    if {a}.shape[0] != _n:",
                  f"        raise ValueError('{plan.name}: batched arguments of different sizes')"]
    lines.append(f"    _r = {call(0)}")
    for q, o in enumerate(outs):
        lines += [f"    {o} = np.empty((_n,) + np.asarray({out('_r', q)}).shape)",
                  f"    {o}[0] = {out('_r', q)}"]
    loop = "numba.prange" if plan.parallel else "range"
    lines.append("    _done = np.zeros(_n, dtype=np.bool_)")
    # no raise inside the loop (Numba would run it serially): a set whose result has another
    # shape stays undone, and the serial pass below raises for it
    lines += [f"    for _i in {loop}(1, _n):", f"        _s = {call('_i')}",
              f"        if {fits}:"]
    lines += [f"            {o}[_i] = {out('_s', q)}" for q, o in enumerate(outs)]
    lines += ["            _done[_i] = True",
              "    for _j in range(1, _n):", "        if not _done[_j]:",
              f"            _s = {call('_j')}", f"            if not ({fits}):",
              f"                raise ValueError('{plan.name}: set ' + str(_j) + ' gives a result "
              "of another shape than set 0')"]
    lines += [f"            {o}[_j] = {out('_s', q)}" for q, o in enumerate(outs)]
    lines.append(f"    return ({', '.join(outs)},)")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class BatchProgram:
    """One per-set specialization's batch: its module's source and the driver."""
    source: str
    driver: object
    parallel: bool


class _Batched:
    """What the three batches share: ``in_axes``, the target, one program per specialization."""
    kind = "transform"

    def __init__(self, transform, in_axes, target):
        self.transform = transform
        fname = transform.fn.__name__
        self.axes = batch_axes(in_axes, transform.params, fname)
        own = self._own_target()
        target = own if target is None else target
        if target in ("cuda", "dask"):
            raise CoarsenError(f"target={target!r}: batches of coarsen.{self.kind} run on the "
                               "CPU only (Gradient.batch has the CUDA and Dask targets)",
                               hint="use target='cpu' (numba.prange over the sets)")
        if target not in _TARGETS:
            raise CoarsenError(f"unknown batch target {target!r}", hint=f"use one of {_TARGETS}")
        if target != own:
            raise CoarsenError(f"a {target!r} batch needs coarsen.{self.kind}(..., "
                               f"target={target!r}); this one was built with target={own!r}",
                               hint=f"build the transform with target={target!r}, or batch it "
                                    f"with target={own!r}")
        self.target = target
        self._programs = {}                 # id(per-set object) -> (object, BatchProgram)
        self._last = None
        self.__name__ = f"batched_{transform.__name__}"

    def _own_target(self):
        return self.transform.target

    @property
    def in_axes(self):
        return self.axes.in_axes

    @property
    def parallel(self):
        """Whether the last call's sets ran in a ``numba.prange`` loop (None before a call)."""
        return None if self._last is None else self._last.parallel

    def __repr__(self):
        return (f"<coarsen batched {self.kind} of {self.transform.fn.__qualname__}, in_axes="
                f"{self.in_axes}, target={self.target!r}>")

    def _split(self, args):
        return split_sets(self.axes, self.transform.params, args, self.transform.fn.__name__)

    def _program(self, key_obj, module, source, entry, extra_batched, outputs):
        """The ``BatchProgram`` of a per-set specialization (built on first use): ``module``
        the transform's generated module (``source`` its text), ``entry`` the function of it
        called per set, ``extra_batched`` the batched flags of the arguments after the user's,
        ``outputs`` ``DriverPlan.outputs``."""
        hit = self._programs.get(id(key_obj))
        if hit is None:
            parallel = self.target == "cpu" and "parallel=True" not in source
            name = f"_batch_{self.kind}"
            plan = DriverPlan(name, entry, self.axes.batched + tuple(extra_batched),
                              tuple(outputs), parallel)
            # the driver calls the transform's own compiled entry (imported, not rebuilt)
            text = (("import numba\n" if parallel else "") + "import numpy as np\n\n"
                    f"from {module.__name__} import {entry}\n\n\n{driver_source(plan)}")
            try:
                mod = lowering.build(text, name=f"{self.transform.fn.__name__}_{self.kind}_batch",
                                     target=self.target)
            except lowering.LoweringError as exc:
                raise CoarsenError(f"batch: {exc}") from None
            hit = self._programs[id(key_obj)] = (key_obj, BatchProgram(text, getattr(mod, name),
                                                                       parallel))
        self._last = hit[1]
        return hit[1]

    def _vectors(self, wrt, split, vectors, what):
        """The directions (tangents, ``v``) as the driver takes them: per ``wrt`` parameter a
        float64 array ``(B, *shape)`` when it is batched, else its per-set shape (a float for
        a scalar), checked; and their batched flags."""
        t = self.transform
        if t.returns_single:
            items = (vectors,)
        elif not isinstance(vectors, (tuple, list)):
            raise function_error(t.src, f"{what} must be a tuple of {len(wrt)} value(s), one per "
                                 f"wrt parameter ({', '.join(wrt)}), got {type(vectors).__name__}",
                                 f"pass {what}=(...) in the order of wrt")
        else:
            items = tuple(vectors)
        if len(items) != len(wrt):
            raise function_error(t.src, f"{len(items)} {what} given for {len(wrt)} wrt "
                                 f"parameter(s) ({', '.join(wrt)})",
                                 f"pass one {what} entry per wrt parameter, in its order")
        out, flags = [], []
        for name, item in zip(wrt, items):
            k = t.params.index(name)
            batched = self.axes.batched[k]
            shape = ((split.size,) if batched else ()) + np.shape(split.examples[k])
            tv = np.asarray(item)
            if tv.dtype.kind not in "fiu":
                raise function_error(t.src, f"the {what} of {name!r} has dtype {tv.dtype}, not a "
                                     "real number type", f"pass float values shaped {shape}")
            if tv.shape != shape:
                how = "batched: (B, *its per-set shape)" if batched else \
                    "shared (in_axes None): its shape, the same for every set"
                raise function_error(t.src, f"the {what} of {name!r} has shape {tv.shape}; "
                                     f"{name} is {how}, {shape}", f"pass an array of shape {shape}")
            out.append(np.array(tv, dtype=np.float64) if tv.ndim else float(tv))
            flags.append(batched)
        return out, flags

    def source_for(self, *args, **kwargs):
        """The driver module's text for ``args`` (and ``tangents=``, ``v=``): runs the batch
        on them once."""
        self(*args, **kwargs)
        return self._last.source

    @property
    def source(self):
        if self._last is None:
            raise CoarsenError("a batch is specialized on its first call's argument types; "
                               "call it once before reading .source")
        return self._last.source


class BatchedJvp(_Batched):
    """``coarsen.jvp(fn, wrt).batch(in_axes)``: see ``coarsen.transforms.batching.sweeps``."""
    kind = "jvp"

    def _own_target(self):
        return self.transform.options.target

    def __call__(self, *args, tangents=None):
        j = self.transform
        if tangents is None:
            raise function_error(j.src, "a batched coarsen.jvp needs tangents=: one per wrt "
                                 "parameter", "call bj(*args, tangents=...)")
        split = self._split(args)
        art = j.specialize(split.examples)
        if art.written:
            check_aliasing(j.src, j.params, split.args, art.module_arrays, art.written)
        vecs, flags = self._vectors(art.wrt, split, tangents, "tangents")
        prog = self._program(art, art.module, art.source, art.entry_name,
                             (False,) * len(art.module_arrays) + tuple(flags), ((0,), (1,)))
        conv = [convert_argument(a) for a in split.args]
        values, tangent_out = prog.driver(*conv, *converted(art.module_arrays), *vecs)
        return values, tangent_out


class BatchedJacobian(_Batched):
    """``coarsen.jacobian(fn, wrt).batch(in_axes)``: per set, the Jacobian's forward-mode
    sweeps (its driver of ``coarsen.transforms.sweeps``, what ``J(*args)`` runs in forward
    mode), in ``J``'s layout with a leading set axis on every array (a float per set made a
    ``(B,)`` array)."""
    kind = "jacobian"

    def __call__(self, *args):
        jac = self.transform
        split = self._split(args)
        prog, wrt = jac.forward_program(split.examples)
        ins = [np.shape(split.examples[k]) for k in prog.wrt_pos]
        if not sum(math.prod(s) for s in ins):
            raise function_error(jac.src, "a batch of coarsen.jacobian needs wrt parameters "
                                 "with elements", "batch a function of non-empty inputs")
        if prog.written:
            check_aliasing(jac.src, jac.params, split.args, (), prog.written)
        conv = [convert_argument(a) for a in split.args]
        mod = prog.compiled
        # per set, the dense J and (for an array result) the result's shape
        outputs = ((0,), (1,)) if prog.result_rank else ((0,),)
        batch = self._program(prog, mod.module, mod.source, mod.driver.__name__,
                              (False,) * len(prog.module_arrays), outputs)
        res = batch.driver(*conv, *converted(prog.module_arrays))
        dense, out = res[0], (tuple(int(x) for x in res[1][0]) if prog.result_rank else ())
        return _stacked([jac.pack(dense[b], out, ins) for b in range(split.size)])


def _stacked(items):
    """Per-set results (arrays, floats, or tuples of them) as one with a leading set axis."""
    if isinstance(items[0], tuple):
        return tuple(_stacked([it[i] for it in items]) for i in range(len(items[0])))
    return np.asarray(items, dtype=np.float64)


class _BatchedSecondOrder(_Batched):
    def _prepare(self, args):
        h = self.transform
        split = self._split(args)
        prog = h.program(split.examples)
        n = len(h.params)
        written = {k for k in prog.written if k < n}
        if written:
            check_aliasing(h.src, h.params, split.args, (), written)
        return split, prog, [convert_argument(a) for a in split.args]


class BatchedHvp(_BatchedSecondOrder):
    """``coarsen.hvp(fn, wrt).batch(in_axes)``: see ``coarsen.transforms.batching.sweeps``."""
    kind = "hvp"

    def __call__(self, *args, v=None):
        h = self.transform
        if v is None:
            if len(args) != len(h.params) + 1:
                raise function_error(h.src, "a batched coarsen.hvp needs v: bh(*args, v=...)",
                                     "pass v last or as v=")
            args, v = args[:-1], args[-1]
        split, prog, conv = self._prepare(args)
        vecs, flags = self._vectors(prog.wrt, split, v, "v")
        # per set, the entry of the Hessian-vector product's gradient (what h(*args, v) calls)
        mod = prog.compiled
        batch = self._program(prog, mod.module, mod.source, prog.artifact.entry_name,
                              tuple(flags) + (False,) * len(prog.module_arrays),
                              tuple((1, q) for q in range(len(prog.wrt))))
        res = batch.driver(*conv, *vecs, *converted(prog.module_arrays))
        out = []
        for w, r in zip(prog.wrt, res):
            a = split.args[h.params.index(w)]
            out.append(r.astype(a.dtype, copy=False) if isinstance(a, np.ndarray)
                       and np.ndim(split.examples[h.params.index(w)]) else r)
        return out[0] if h.returns_single else tuple(out)


class BatchedHessian(_BatchedSecondOrder):
    """``coarsen.hessian(fn, wrt).batch(in_axes)``: see ``coarsen.transforms.batching.sweeps``."""
    kind = "hessian"

    def __call__(self, *args):
        h = self.transform
        split, prog, conv = self._prepare(args)
        shapes = [np.shape(split.examples[k]) for k in prog.wrt_pos]
        starts = [0]
        for s in shapes:
            starts.append(starts[-1] + math.prod(s))
        if starts[-1]:
            # per set, the Hessian driver of coarsen.transforms.sweeps (what h(*args) calls)
            mod = prog.compiled
            batch = self._program(prog, mod.module, mod.source, mod.driver.__name__,
                                  (False,) * len(prog.module_arrays), ((),))
            (dense,) = batch.driver(*conv, *converted(prog.module_arrays))
        else:
            dense = np.zeros((split.size, 0, 0))

        def block(p, q):
            b = dense[:, starts[p]:starts[p + 1], starts[q]:starts[q + 1]]
            return b.reshape((split.size,) + shapes[p] + shapes[q])

        if h.returns_single:
            return block(0, 0)
        return tuple(tuple(block(p, q) for q in range(len(shapes))) for p in range(len(shapes)))
