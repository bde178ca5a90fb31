"""The primitive registry: everything coarsen knows about one operation, in one entry.

Requires: nothing but ``coarsen.ir.nodes`` and ``coarsen.errors`` (rules are registered by the
family modules of this package: ``elementwise``, ``logic``, ``casts``, ``reductions``,
``linalg``, ``shapes``, ``constructors``, ``cumulative``, ``arrays``).
Guarantees: ``primitive(name)`` returns the ``Primitive`` of an IR op name; ``spelled(module,
attr)`` maps a source spelling (``math.asin``, ``np.arcsin``, ``np.multiply``, and
``np.linalg.solve`` under the module ``"linalg"``) to the op name.
Each entry holds:

- ``type_rule(checker, stmt, operand_types) -> Type``: the result type (or ``CoarsenError``);
- ``emit(emitter, stmt, values) -> gast expr``: the primal expression in generated code;
- the derivative, in one of four shapes, chosen by the registration helper:
  ``defvjp`` (element-wise partials, one per operand, ``None`` for zero: the reverse sweep
  multiplies by the output's adjoint and undoes broadcasting in one place), ``defstructural``
  (a VJP function writing adjoint updates itself: indexing, reductions, products, reshapes),
  ``zero`` (no derivative anywhere: comparisons, ``floor``, integer ops) or ``undifferentiable``
  (evaluated, but refused where a differentiated value flows in);
- the forward-mode rule (``coarsen.ad.forward``), in one of three shapes: the element-wise
  ``defvjp`` partials are the JVP too (``tangent = sum_i partial_i * tangent_i``, nothing to
  register); ``deflinear(name, positions)`` (the op is linear in each of those operands
  separately: the tangent is the same op with one operand replaced by its tangent, summed over
  the operands that have one: ``getitem``, reshapes, ``sum``, products); ``defjvp(name, rule)``
  (``rule(emitter, stmt, dots, out) -> expr``: ``dots`` holds, per operand, its tangent
  variable or None for a zero tangent, ``out`` the primal result); ``refuse_jvp(name, why)``
  marks a differentiable primitive that forward mode refuses; ``forward_rule(prim)`` says which;
- ``sympy``: its SymPy counterpart when segments may lift it (coarse mode), else ``None``;
- flags other passes ask: ``view`` (the result may alias operand 0), ``passenger`` (integer or
  boolean bookkeeping a segment may carry along), ``boolean``, ``transparent`` (the value of
  operand 0, unchanged), ``shape_like`` (a new array with operand 0's shape), ``broadcasting``
  (element-wise over broadcast operands), ``elementwise`` (on arrays, the same op element by
  element: ``coarsen.ir.scalarize`` may apply it to scalars in a loop nest instead), ``reduction``, ``accumulates`` (``t = t + e``/``t = t - e``
  passes ``t``'s adjoint through unchanged; the sign of operand 1 in index arithmetic),
  ``np_only``, ``keeps_booleans``, ``indexing``, ``plain_copy``, ``dimension``,
  ``shape_operands``, and how formulas show it (``infix``, ``prefix``);
- its cost (``cost``, required: ``register`` refuses an entry without one): the operations one
  evaluation costs, as ``CostClass`` members (the weight classes of
  ``coarsen.analysis.costmodel.Weights``; ``FREE`` for no arithmetic, ``CALL`` for a call
  the scalar model does not price); ``partial_cost``: what fine-grained reverse mode
  pays to evaluate its local partial where it is a call in a SymPy expression (the strategy
  planner's estimate; None where it has none); ``aliases``: the other names the cost model meets
  it by (its SymPy function's, ``atan``, ``Abs``, ``Max``, ``ceiling``; the builtin printed code
  calls, ``max``).  The cost model, the strategy planner and the hoisting pass read these.

Adding a NumPy function is one entry in a family module plus its tests (see ARCHITECTURE.md).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Callable

from ...errors import at_stmt
from ..nodes import Array, Scalar


class CostClass(enum.Enum):
    """One operation of a weight class of the cost model (``coarsen.analysis.costmodel``): the
    value is the name of its ``Weights`` field, except ``FREE`` (no arithmetic: a copy, a cast,
    a view, shape bookkeeping; weight 0) and ``CALL`` (a call whose cost grows with its operands
    or is not known: a NumPy array routine, a runtime helper, a user's rule; the scalar model
    never prices it, and raises if asked to)."""
    FREE = "free"
    ADD = "add"       # add, subtract, negate, compare, abs, min/max, sign, floor, select
    MUL = "mul"
    DIV = "div"
    SQRT = "sqrt"
    EXP = "exp"       # exp, log and their relatives (expm1, log1p, log2, log10)
    TRIG = "trig"     # trigonometric and hyperbolic functions, their inverses, erf
    POW = "pow"       # x**y, and the dearest calls (lgamma, gamma, a float %)
    CALL = "call"


def _costs(value, what, name):
    """``value`` (a ``CostClass``, a tuple of them or None) as a tuple (None stays None)."""
    if value is None:
        return None
    if isinstance(value, CostClass):
        return (value,)
    value = tuple(value)
    if not all(isinstance(c, CostClass) for c in value):
        raise TypeError(f"primitive {name!r}: {what} must be CostClass members, got {value!r}")
    return value


@dataclass
class Primitive:
    name: str
    type_rule: Callable
    emit: Callable
    arity: int | None = None
    math: tuple = ()            # spellings under ``math``
    numpy: tuple = ()           # spellings under ``np``
    operators: tuple = ()       # Python operators spelling it (gast class names: "Add", "USub")
    linalg: tuple = ()          # spellings under ``np.linalg``
    partials: tuple | None = None
    result_partial: Callable | None = None   # a unary op's partial from its result (defvjp_result)
    vjp: Callable | None = None
    structural: tuple = ()      # operand positions a structural VJP differentiates (mod nargs)
    zero: bool = False
    undifferentiable: bool = False
    sympy: Callable | None = None
    math_name: str | None = None   # name of the function in generated scalar code (math.<>)
    np_name: str | None = None     # ... and in array code (np.<>)
    float_result: bool = False
    view: bool = False
    passenger: bool = False
    boolean: bool = False
    transparent: bool = False
    shape_like: bool = False
    broadcasting: bool = False
    elementwise: bool = False      # element by element on arrays, the same op on scalars
    reduction: bool = False
    accumulates: int = 0           # +1: t = t + e; -1: t = t - e
    np_only: bool = False          # generated as np.<f> on scalars too (math has none)
    keeps_booleans: bool = False   # lifting passes boolean operands as they are (not 0/1)
    partials_see_constants: bool = False   # partials get ``consts=`` (operands' constant values)
    indexing: bool = False         # reads the part of operand 0 that ``stmt.index`` selects
    plain_copy: bool = False       # ``b = a``: the value itself (an alias for arrays)
    dimension: bool = False        # the length of operand 0 along the constant axis operand 1
    shape_operands: bool = False   # a new array whose shape is the first ``ndim`` operands
    infix: tuple | None = None     # (symbol, precedence, associative) for display
    jvp: Callable | None = None    # forward rule ``jvp(emitter, stmt, dots, out)`` (defjvp)
    linear: tuple = ()             # operand positions it is linear in, separately (deflinear)
    jvp_refused: str | None = None  # why forward mode refuses it (refuse_jvp)
    prefix: str | None = None      # unary operator symbol for display
    cost: tuple | None = None      # CostClass members: one evaluation (required by register)
    partial_cost: tuple | None = None   # CostClass members: its local partial, as a call (fine)
    aliases: tuple = ()            # other names the cost model meets it by (SymPy's, builtins)

    def __post_init__(self):
        self.cost = _costs(self.cost, "cost", self.name)
        self.partial_cost = _costs(self.partial_cost, "partial_cost", self.name)

    def diff_positions(self, nargs):
        """Operand positions through which derivatives flow."""
        if self.zero:
            return ()
        if self.undifferentiable:
            return tuple(range(nargs))
        if self.partials is not None:
            return tuple(i for i, p in enumerate(self.partials) if p is not None)
        if self.vjp is not None:
            return tuple(dict.fromkeys(p % nargs for p in self.structural))   # each once
        raise KeyError(self.name)


REGISTRY: dict[str, Primitive] = {}
_SPELLINGS: dict[tuple[str, str], str] = {}


def register(prim: Primitive) -> Primitive:
    if prim.name in REGISTRY:
        raise ValueError(f"primitive {prim.name!r} registered twice")
    if not prim.cost:
        raise ValueError(f"primitive {prim.name!r} registered without a cost (CostClass)")
    REGISTRY[prim.name] = prim
    for module, names in (("math", prim.math), ("numpy", prim.numpy), ("linalg", prim.linalg),
                          ("operator", prim.operators)):
        for n in names:
            key = (module, n)
            if key in _SPELLINGS:
                raise ValueError(f"{module}.{n} spelled twice ({_SPELLINGS[key]}, {prim.name})")
            _SPELLINGS[key] = prim.name
    return prim


def primitive(name: str) -> Primitive:
    """The registry entry of the IR op ``name`` (KeyError when there is none)."""
    return REGISTRY[name]


def spelled(module: str, attr: str):
    """The op a source spelling names (``("math", "asin") -> "arcsin"``), or None."""
    return _SPELLINGS.get((module, attr))


def spellings(module: str) -> dict:
    """attr -> op for every registered spelling under ``module`` ("math", "numpy" or
    "linalg", the last for ``np.linalg.<attr>``)."""
    return {a: op for (m, a), op in _SPELLINGS.items() if m == module}


def ops_where(pred) -> frozenset:
    """The names of the primitives whose entry satisfies ``pred``."""
    return frozenset(n for n, p in REGISTRY.items() if pred(p))


def defvjp(name, *partials):
    """Element-wise local partials of ``name``, one per operand (``None``: zero there)."""
    REGISTRY[name].partials = partials


def defvjp_result(name, rule):
    """The partial of the unary ``name`` written with its result ``y`` (``exp``: ``y``;
    ``tanh``: ``1 - y*y``), equal to its ``defvjp`` partial's value bit for bit.  The reverse
    sweep uses it where the result is a scalar variable of its own: it then reads the value
    the forward sweep computed rather than evaluating the function again."""
    REGISTRY[name].result_partial = rule


def defstructural(name, vjp, positions):
    """A structural VJP ``vjp(emitter, stmt, p, g, pre_fwd, pre_rev, out)`` for operand ``p``."""
    prim = REGISTRY[name]
    prim.vjp = vjp
    prim.structural = tuple(positions)


def defjvp(name, rule):
    """A forward rule ``rule(emitter, stmt, dots, out) -> expr`` for ``name`` (structural
    primitives: ``prod``, ``amax``, ``std``, ``solve``...).  ``dots[p]`` is operand ``p``'s tangent
    variable (an ``ir.Var``) or None where it is zero (at least one is not None); ``out`` is the
    primal result's expression (an ``ad.build.X``); the rule returns the result's tangent,
    shaped like the result."""
    REGISTRY[name].jvp = rule


def deflinear(name, positions=(0,)):
    """``name`` is linear in each operand of ``positions`` separately (mod the operand count):
    the tangent is ``sum_p op(..., dot_p, ...)`` over the positions with a tangent, by the
    primitive's own emitter (``getitem``, ``transpose``, ``sum``; ``matmul`` bilinear)."""
    REGISTRY[name].linear = tuple(positions)


def refuse_jvp(name, reason):
    """Forward mode refuses ``name`` where a tangent flows in (a ``CoarsenError`` saying
    ``reason`` at the statement, before code is generated; a callable ``reason`` gives the
    whole problem for the statement, naming what the user wrote)."""
    REGISTRY[name].jvp_refused = reason


def forward_rule(prim):
    """How forward mode differentiates ``prim``: ``"jvp"``, ``"linear"``, ``"partials"``,
    ``"refused"``, ``"zero"`` (no derivative) or None (a derivative but no forward rule)."""
    if prim.zero:
        return "zero"
    if prim.jvp_refused is not None:
        return "refused"
    if prim.jvp is not None:
        return "jvp"
    if prim.linear:
        return "linear"
    if prim.partials is not None:
        return "partials"
    return None


# ------------------------------------------------------------------ type helpers
err = at_stmt     # a CoarsenError at an IR statement (coarsen.errors)


def dtype_join(a, b):
    if "f64" in (a, b):
        return "f64"
    if "i64" in (a, b):
        return "i64"
    return "bool" if a == b == "bool" else "i64"


def dt(t):
    return t.kind if isinstance(t, Scalar) else t.dtype


def nd(t):
    return t.ndim if isinstance(t, Array) else 0


def make(dtype, ndim):
    if ndim == 0:
        return Scalar(dtype)
    return Array(dtype, ndim)
