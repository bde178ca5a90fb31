"""The data of the pipeline's ends: ``Options`` and ``Signature`` in, ``Artifact`` out.

``coarsen.transforms.gradient.compile_gradient(fn, signature, options)`` is the one pipeline (lower, infer,
analyze, differentiate, render, cache, build); this module holds what it takes and gives, and
the small pure functions around it that need no compiler stage.

Requires: ``coarsen.ir.nodes`` (IR types, ``walk``) and ``coarsen.ir.typeinfer.VIEW_OPS``.

Guarantees:

* ``Options`` is a frozen, hashable dataclass of every option that shapes the generated code
  (``wrt`` as given to ``differentiate``, a list made a tuple; ``coarsen``; ``target``;
  ``boundscheck``; ``workspace``, the scalar-only CUDA variant; ``budget_seconds``, the time
  budget of the symbolic stage per segment; ``plan``, one of ``PLANS``; ``max_tape_bytes``,
  None or a positive int, the tape budget that checkpoints loops, ``coarsen.ad.reverse.checkpoint``).  An unknown target raises ``CoarsenError``.
  Every field but ``wrt`` (which enters resolved, as names) is a part of the disk cache key.
* ``Signature.of(params, args, module_arrays)`` classifies example arguments as the compiler
  types them (Numba-style: float, int, bool, arrays by dtype and rank); ``types`` are the IR
  types of the parameters then of the module-level arrays, ``texts`` the parameters' Numba
  type texts.  Unsupported values raise ``CoarsenError`` naming the parameter.
* ``check_wrt`` refuses (at ``differentiate()``) a ``wrt`` that names no parameter;
  ``resolve_wrt`` maps it to parameter names once the types are known (default: every float
  parameter), refusing non-float ones.
* ``written_positions(fn_ir)``: positions in ``fn_ir.params`` of the arrays the function may
  write, conservatively (views of written arrays count).  It reads the IR, never modifies it.
* ``KeyParts`` is every part of the disk cache key, typed; ``as_dict()`` is what
  ``coarsen.lowering.cache_key`` hashes (the same dict as before this module existed, plus
  ``budget_seconds``, ``plan`` and the cost model's ``weights``).
* ``Artifact`` is the frozen result of one compilation: the source, the entry's name, the
  built module and its entry, the plan (one JSON-able dict per segment of interest, what
  ``Report`` is built from), the IR text, the resolved ``wrt``, what the function may write, the
  frontend's reads (``reads``, a ``Dependencies``; ``dependencies`` its fingerprint) and the key.
  Calling it runs the entry on converted arguments (float64/int64 arrays, Python scalars),
  module-level arrays appended: ``(value, grads, (tape floats, tape ints))`` (with
  ``max_tape_bytes``: the call's peak counts, then each checkpointed loop's stride).
  Where the code tapes (and not in workspace mode), ``taped_entry`` is the same gradient
  taking the tapes it uses after those arguments (``tapes``: ``"f"`` a float64 buffer, ``"i"``
  an int64 buffer, ``"fi"`` both, in that order; any size, contents ignored) and giving them
  back, grown where they had to grow: ``(value, grads, (tape floats, tape ints), *tapes)``;
  the entry calls it with fresh tapes.  Otherwise ``taped_entry`` is None and ``tapes`` "".
  ``grad_entry`` and ``grad_taped_entry`` are the same with ``0.0`` for the value (built from
  ``grad_only_source(source)`` on the cpu target, compiled on their first call; elsewhere the
  entries themselves): the same gradients and tape counts, without the work only the value
  needed.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..ad.reverse.pipeline import REVERSE
from ..analysis.plans import PLANS
from ..errors import CoarsenArgumentError, CoarsenError
from ..ir.nodes import Array, Assign, Const, Scalar, Store, Var, walk
from ..ir.typeinfer import VIEW_OPS

TARGETS = ("cpu", "python")

__all__ = [
    "TARGETS",
    "Artifact",
    "KeyParts",
    "Options",
    "Signature",
    "arg_type",
    "bind_arguments",
    "check_wrt",
    "function_error",
    "grad_only_source",
    "resolve_wrt",
    "written_positions",
]


@dataclass(frozen=True)
class Options:
    """What ``differentiate`` accepts (and the variants it builds), hashable."""
    wrt: object = None
    coarsen: bool = True
    target: str = "cpu"
    boundscheck: bool = True
    workspace: bool = False
    budget_seconds: float = 10.0
    plan: str = "auto"
    scalarize: bool = True      # element-wise array expressions as loop nests (coarsen.ir.scalarize)
    max_tape_bytes: object = None   # tape budget in bytes: checkpointed loops (coarsen.ad.reverse.checkpoint)
    parallel: bool = False      # every reduction loop in parallel blocks (coarsen.ad.reverse.parallel)
    local_tape: object = None   # workspace only: (floats, ints) local stretch tapes (ad.reverse.local_stretch)
    disable: frozenset = frozenset()    # reverse passes switched off, by name (ad.reverse.pipeline)

    def __post_init__(self):
        if self.target not in TARGETS:
            raise CoarsenError(f"unknown target {self.target!r}", hint=f"use one of {TARGETS}")
        if self.plan not in PLANS:
            raise CoarsenError(f"unknown plan {self.plan!r}", hint=f"use one of {PLANS}")
        if isinstance(self.wrt, list):
            object.__setattr__(self, "wrt", tuple(self.wrt))
        object.__setattr__(self, "coarsen", bool(self.coarsen))
        object.__setattr__(self, "boundscheck", bool(self.boundscheck))
        object.__setattr__(self, "scalarize", bool(self.scalarize))
        object.__setattr__(self, "parallel", bool(self.parallel))
        if self.max_tape_bytes is not None:
            if isinstance(self.max_tape_bytes, bool) or not isinstance(self.max_tape_bytes, (int, np.integer)) \
                    or self.max_tape_bytes < 1:
                raise CoarsenError(f"max_tape_bytes must be a positive integer or None, not {self.max_tape_bytes!r}",
                                   hint="pass the tape budget in bytes, e.g. max_tape_bytes=100_000_000")
            # the code compares tapes with it as an int64 (a budget past 2**63 did not compile on
            # the cpu target); tapes stop at 8 GiB anyway, so 2**62 is no limit either
            object.__setattr__(self, "max_tape_bytes", min(int(self.max_tape_bytes), 2 ** 62))
        object.__setattr__(self, "workspace", bool(self.workspace))
        if self.local_tape is not None:
            sizes = tuple(int(v) for v in self.local_tape)
            if not self.workspace or len(sizes) != 2 or min(sizes) < 1:
                raise CoarsenError(f"internal: local_tape {self.local_tape!r} needs workspace mode "
                                   "and two positive sizes")
            object.__setattr__(self, "local_tape", sizes)
        object.__setattr__(self, "budget_seconds", float(self.budget_seconds))
        object.__setattr__(self, "disable", REVERSE.check(self.disable))

    @property
    def build_target(self):
        """The target the module is built for: the workspace variant is plain Python (CUDA
        compiles it on launch)."""
        return "python" if self.workspace else self.target


def arg_type(name, value):
    """``(IR type, Numba type text)`` of one argument value."""
    if isinstance(value, (bool, np.bool_)):
        return Scalar("bool"), "bool"
    if isinstance(value, (int, np.integer)):
        if not -2 ** 63 <= value < 2 ** 63:
            raise CoarsenError(f"parameter {name!r}: {value} does not fit in a 64-bit int, the "
                               "compiled code's integers",
                               hint="pass an int between -2**63 and 2**63 - 1, or a float")
        return Scalar("i64"), "int64"
    if isinstance(value, (float, np.floating)):
        return Scalar("f64"), "float64" if not isinstance(value, np.float32) else "float32"
    if isinstance(value, np.ndarray):
        if type(value) is not np.ndarray and not isinstance(value, np.memmap):
            # np.matrix (``*`` is a matrix product), masked arrays (masks), and any subclass
            # that may change what operations mean: the gradient computes on plain arrays
            raise CoarsenError(f"parameter {name!r}: {type(value).__module__}."
                               f"{type(value).__qualname__} is a subclass of np.ndarray whose "
                               "operations may differ from plain arrays'",
                               hint=f"pass np.asarray({name}) (a plain array), and write "
                                    "the function for plain arrays (e.g. @ for matrix products)")
        kind = value.dtype.kind
        if kind == "f" and value.dtype.itemsize in (4, 8):
            dt = "f64"
        elif kind in "iu":
            dt = "i64"
        elif kind == "b":
            dt = "bool"
        else:
            raise CoarsenError(f"parameter {name!r}: arrays of dtype {value.dtype} are not supported",
                               hint="pass float64, float32, integer or bool arrays")
        if value.ndim == 0:
            raise CoarsenError(f"parameter {name!r}: 0-d arrays are not supported",
                               hint="pass a Python float instead")
        return Array(dt, value.ndim), f"{value.dtype.name}[{', '.join(':' * value.ndim)}]"
    raise CoarsenError(f"parameter {name!r}: values of type {type(value).__name__} are not supported",
                       hint="pass floats, ints, bools or NumPy arrays")


@dataclass(frozen=True)
class Signature:
    """The types of one call: IR types of the parameters then of the module-level arrays, and
    the parameters' Numba type texts."""
    types: tuple
    texts: tuple

    @classmethod
    def of(cls, params, args, module_arrays=(), fname="the function"):
        if len(args) != len(params):
            raise CoarsenError(f"{fname} takes {len(params)} arguments "
                               f"({', '.join(params)}), got {len(args)}")
        types, texts = [], []
        for name, a in zip(params, args):
            t, text = arg_type(name, a)
            types.append(t)
            texts.append(text)
        for a in module_arrays:
            types.append(arg_type("<module-level array>", a)[0])
        return cls(tuple(types), tuple(texts))


def _is_float(t):
    return (isinstance(t, Scalar) and t.kind == "f64") or (isinstance(t, Array) and t.dtype == "f64")


def _is_position(it):
    return isinstance(it, (int, np.integer)) and not isinstance(it, (bool, np.bool_))


def check_wrt(spec, params, fname):
    """Refuse a ``wrt`` that names no parameter (types come later)."""
    if spec is None:
        return
    items = spec if isinstance(spec, (tuple, list)) else (spec,)
    if not items:
        raise CoarsenError(f"wrt is empty: nothing of {fname} to differentiate",
                           hint="pass wrt=None for every float parameter, or name some")
    for it in items:
        if _is_position(it):
            if not 0 <= it < len(params):
                raise CoarsenError(f"wrt position {it} is out of range: {fname} has "
                                   f"{len(params)} parameters ({', '.join(params)})",
                                   hint=f"use a position from 0 to {len(params) - 1}, or a name")
        elif isinstance(it, str):
            if it not in params:
                raise CoarsenError(f"wrt names {it!r}, which is not a parameter of {fname}",
                                   hint=f"parameters are {', '.join(params)}")
        else:
            raise CoarsenError(f"wrt entries must be parameter names or positions, got {it!r}",
                               hint=f"parameters are {', '.join(params)}")
    named = [params[it] if _is_position(it) else it for it in items]
    twice = sorted({n for n in named if named.count(n) > 1})
    if twice:
        raise CoarsenError(f"wrt names {', '.join(repr(n) for n in twice)} more than once "
                           f"(parameters of {fname}: {', '.join(params)})",
                           hint="name each parameter once")


def resolve_wrt(spec, params, types, fname):
    """The names of the parameters to differentiate for argument ``types``."""
    if spec is None:
        names = [p for p, t in zip(params, types) if _is_float(t)]
        if not names:
            raise CoarsenError(f"{fname} has no float parameters to differentiate")
        return tuple(names)
    items = spec if isinstance(spec, (tuple, list)) else (spec,)
    out = []
    for it in items:
        if isinstance(it, (int, np.integer)) and not isinstance(it, bool):
            if not 0 <= it < len(params):
                raise CoarsenError(f"wrt position {it} is out of range: {fname} has "
                                   f"{len(params)} parameters")
            name = params[it]
        elif isinstance(it, str):
            if it not in params:
                raise CoarsenError(f"wrt names {it!r}, which is not a parameter of {fname}",
                                   hint=f"parameters are {', '.join(params)}")
            name = it
        else:
            raise CoarsenError(f"wrt entries must be parameter names or positions, got {it!r}")
        t = types[params.index(name)]
        if not _is_float(t):
            raise CoarsenError(f"cannot differentiate with respect to {name!r}: it is {t}, not a float",
                               hint="differentiate with respect to float scalars or float arrays")
        out.append(name)
    return tuple(out)


def written_positions(fn_ir, types=None):
    """Positions in ``fn_ir.params`` (the user's parameters, then module-level arrays) of the
    arrays the function may write: targets of ``Store`` and of in-place updates, and arrays
    that a written variable may view (``b = a``, slices, ``.T``, reshapes), conservatively.
    ``types`` (the parameters' IR types, in order) tells element reads from views: ``v =
    a[i, j]`` with one int per axis of a parameter ``a`` is a number, and ``v += ...`` after
    it writes nothing of ``a`` (an RNN's ``a = bh[i]; a += ...``), and a parameter typed as a
    number is never written (``z = b; z += ...`` names a new float)."""
    ndims = {p: t.ndim for p, t in zip(fn_ir.params, types or ()) if isinstance(t, Array)}
    written = set()
    views = []
    for s in walk(fn_ir.body):
        if isinstance(s, Store):
            written.add(s.array)
        elif isinstance(s, Assign):
            if s.attr("inplace"):           # ``a += ...``: on an array, a write into a
                written.add(s.target)
                if s.args and hasattr(s.args[0], "name"):
                    written.add(s.args[0].name)
            if s.op in VIEW_OPS and s.args and hasattr(s.args[0], "name"):
                base = s.args[0].name
                if s.op == "getitem" and len(s.args) == 1 and base in ndims \
                        and len(s.index) == ndims[base] \
                        and all(isinstance(it, (Var, Const)) for it in s.index):
                    continue                # an element: a number, not a view
                views.append((s.target, base))
    changed = True
    while changed:
        changed = False
        for target, base in views:
            if target in written and base not in written:
                written.add(base)
                changed = True
    return frozenset(i for i, p in enumerate(fn_ir.params) if p in written
                     and (types is None or i >= len(types) or isinstance(types[i], Array)))


@dataclass(frozen=True)
class KeyParts:
    """Every part of the disk cache key (``coarsen.lowering.cache``), typed."""
    dependencies: str           # Dependencies.fingerprint() of the lowering the code comes from
    function: str
    module: str
    file: str
    signature: tuple            # the parameters' Numba type texts
    module_arrays: tuple        # the module-level arrays' Numba type texts
    wrt: tuple                  # resolved parameter names
    coarsen: bool
    target: str
    workspace: bool
    boundscheck: bool
    budget_seconds: float
    plan: str                   # Options.plan
    weights: str                # the cost model's weights (Weights.key()), "" in fine mode
    scalarize: bool             # Options.scalarize
    max_tape_bytes: object      # Options.max_tape_bytes (int or None)
    parallel: bool              # Options.parallel
    local_tape: object          # Options.local_tape (None or (floats, ints))
    version: str
    code: str                   # hash of coarsen's own source
    toolchain: tuple            # sorted (name, version) pairs
    disable: tuple = ()         # Options.disable, sorted

    def as_dict(self):
        """The JSON-able parts ``coarsen.lowering.cache_key`` hashes and an entry keeps."""
        return {"dependencies": self.dependencies, "function": self.function,
                "module": self.module, "file": self.file, "signature": list(self.signature),
                "module_arrays": list(self.module_arrays), "wrt": list(self.wrt),
                "coarsen": self.coarsen, "target": self.target, "workspace": self.workspace,
                "boundscheck": self.boundscheck, "budget_seconds": self.budget_seconds,
                "plan": self.plan, "weights": self.weights, "scalarize": self.scalarize, "max_tape_bytes": self.max_tape_bytes, "parallel": self.parallel,
                "local_tape": None if self.local_tape is None else list(self.local_tape), "version": self.version, "code": self.code, "toolchain": dict(self.toolchain),
                "disable": list(self.disable)}


@dataclass(frozen=True, eq=False)
class Artifact:
    """One compiled gradient: what ``compile_gradient`` gives for a signature and options."""
    function: str               # the function's qualified name
    signature: tuple            # the parameters' Numba type texts
    types: tuple                # IR types: parameters, then module-level arrays
    options: Options
    wrt: tuple                  # the differentiated parameters' (source) names
    entry_name: str             # ``value_and_grad_<f>``, defined by ``source``
    source: str
    module: object              # the built module
    entry: object               # ``module.<entry_name>``
    ir_text: str                # the IR after planning (segments)
    plan: tuple                 # one dict per segment of interest (``Report.segments``)
    transform_seconds: float    # lowering to source text (or to the cache hit)
    cached: bool                # the source came from the on-disk cache
    written: frozenset          # positions (parameters, then module arrays) it may write
    module_arrays: tuple        # the module-level arrays the entry takes after the parameters
    reads: object               # the frontend's ``Dependencies`` (the key's first part)
    key: KeyParts
    cache_key: str
    taped_entry: object = None  # ``module.<entry_name>_taped``, or None (nothing taped)
    tapes: str = ""             # the tapes it takes after the entry's arguments: "f", "i", "fi"
    scratch: bool = False       # the reverse sweep's arrays lie on the float tape (ad.reverse.scratch)
    passes: tuple = ()          # the names of the reverse passes that ran (ad.reverse.pipeline)
    # the gradient-only variants (``grad_only_source``: the value's slot 0.0, so that Numba
    # drops the work only the value needed); default: the entries themselves
    grad_entry: object = None
    grad_taped_entry: object = None
    dependencies: str = field(init=False)   # ``reads.fingerprint()``

    def __post_init__(self):
        object.__setattr__(self, "dependencies", self.key.dependencies)
        if self.grad_entry is None:
            object.__setattr__(self, "grad_entry", self.entry)
            object.__setattr__(self, "grad_taped_entry", self.taped_entry)

    def __call__(self, *args):
        """The entry on converted arguments, the module-level arrays appended."""
        return self.entry(*args, *self.module_arrays)

    def __repr__(self):
        return (f"<coarsen Artifact {self.entry_name}({', '.join(self.signature)}), "
                f"wrt {', '.join(self.wrt)}, target {self.options.build_target}"
                f"{', from the disk cache' if self.cached else ''}>")


def grad_only_source(source):
    """The generated module's text with every entry returning ``0.0`` in the value's slot
    (``return (_value, ...)`` becomes ``return (0.0, ...)``): the same gradients and tape
    counts, bit for bit, while the compiler drops what only the value needed (a loss's
    ``log1p`` per sample).  ``_value`` is a compiler name, which no user name can be."""
    return "\n".join("    return (0.0, " + line[len("    return (_value, "):]
                     if line.startswith("    return (_value, ") else line
                     for line in source.split("\n"))


def bind_arguments(fn, pysig, params, args, kwargs):
    """Positional, keyword and default arguments bound as ``fn`` binds them (``pysig``, its
    ``inspect.signature``), in the order of ``params``; a ``CoarsenError`` when they don't bind."""
    try:
        bound = pysig.bind(*args, **kwargs)
    except TypeError as exc:
        raise CoarsenArgumentError(f"{fn.__name__} takes {len(params)} arguments {pysig}, "
                           f"got {len(args) + len(kwargs)}: {exc}",
                           hint="pass each parameter once, by position or by name") from None
    bound.apply_defaults()
    return tuple(bound.arguments[p] for p in params)


def function_error(src, problem, hint):
    """A ``CoarsenError`` located at the definition of the function whose source is ``src``."""
    return CoarsenError(problem, filename=src.filename, lineno=src.node.lineno,
                        col_offset=src.node.col_offset, source_line=src.line(src.node.lineno),
                        hint=hint)
