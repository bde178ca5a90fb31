"""The IR: structured three-address code with explicit types.

Requires: nothing (plain dataclasses).
Guarantees: a function is a tree of regions that mirrors the source (block, ``If``, ``For``,
``While``), so structured code can be emitted again without recovering it from a flat CFG.
Every operation is one ``Assign`` of one primitive (``op``) to one variable, with operands
that are variables or constants (A-normal form); array element and slice writes are ``Store``
effects, ordered within their block.  ``break``/``continue``/early ``return`` are gone:
the frontend turns them into flags and guards.

Variables keep the user's names, made hygienic by the frontend's ``Namer`` (a user name that
looks like a compiler name is escaped), and each name is one SSA web (``coarsen.ir.ssa``): a
source name with unrelated live ranges becomes several variables (``c``, ``c_2``), each with
its own type.  A variable assigned at one place outside every loop is a
single-assignment value; a variable assigned in a loop body and live on entry is a
loop-carried value (a mu-phi in SSA terms); one assigned in both arms of an ``If`` merges
through a gamma-phi.  The printer (``coarsen.ir.printer``) shows those phis; the passes read
them off the structure (``coarsen.analysis``), which keeps the emitted code close to the
user's.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Tuple, Union

from .fresh import NameSupply


# ----------------------------------------------------------------------------------- types
@dataclass(frozen=True)
class Scalar:
    kind: str  # 'f64', 'i64', 'bool'

    def __str__(self):
        return self.kind


@dataclass(frozen=True)
class Array:
    dtype: str  # 'f64', 'i64', 'bool'
    ndim: int

    def __str__(self):
        return f"{self.dtype}[{','.join(':' * self.ndim)}]" if self.ndim else f"{self.dtype}[]"


F64 = Scalar("f64")
I64 = Scalar("i64")
BOOL = Scalar("bool")
Type = Union[Scalar, Array]


def is_float(t) -> bool:
    return (isinstance(t, Scalar) and t.kind == "f64") or (isinstance(t, Array) and t.dtype == "f64")


# -------------------------------------------------------------------------------- operands
@dataclass(frozen=True)
class Var:
    name: str

    def __str__(self):
        return self.name


@dataclass(frozen=True)
class Const:
    value: object  # int, float, bool or None

    def __str__(self):
        return repr(self.value)


Operand = Union[Var, Const]


@dataclass(frozen=True)
class Slice:
    lower: Optional[Operand]
    upper: Optional[Operand]
    step: Optional[Operand]

    def __str__(self):
        s = f"{self.lower or ''}:{self.upper or ''}"
        return s + (f":{self.step}" if self.step is not None else "")


NEWAXIS = "newaxis"
ELLIPSIS = "ellipsis"     # ``...`` in a subscript, spelled out as slices once types are known
IndexItem = Union[Var, Const, Slice, str]


@dataclass(frozen=True)
class Loc:
    filename: str
    lineno: int
    col: int
    text: str  # the original source line, stripped

    def __str__(self):
        return f"{self.filename}:{self.lineno}"


# ------------------------------------------------------------------------------ statements
#: the ``attrs`` of a result's value before any ``return`` of a function with early returns:
#: ``copy(0.0)`` until inference gives it the returns' type (``typeinfer.settle_result_starts``)
RESULT_START = (("result_start", True),)


@dataclass
class Assign:
    """``target = op(*args)``; ``index`` is the subscript of ``getitem``; ``attrs`` holds
    static parameters (axis, keepdims, ...) as a sorted tuple of pairs."""
    target: str
    op: str
    args: Tuple[Operand, ...]
    loc: Loc
    index: Tuple[IndexItem, ...] = ()
    attrs: Tuple[Tuple[str, object], ...] = ()

    def attr(self, key, default=None):
        for k, v in self.attrs:
            if k == key:
                return v
        return default


@dataclass
class Store:
    """``array[index] = value`` (``aug`` None) or ``array[index] op= value`` (aug 'add'/'sub')."""
    array: str
    index: Tuple[IndexItem, ...]
    value: Operand
    aug: Optional[str]
    loc: Loc


@dataclass
class If:
    cond: Operand
    body: list
    orelse: list
    loc: Loc


@dataclass
class For:
    """``for var in range(start, stop, step)``; ``var`` is not assigned in the body and not read
    after the loop (the frontend turns such loops into ``While``).  ``parallel``: the source
    wrote ``numba.prange`` (same meaning as ``range``; the reverse pass runs it in parallel
    where it is a reduction loop, ``coarsen.ad.reverse.fused``, and serially otherwise)."""
    var: str
    start: Operand
    stop: Operand
    step: Operand
    body: list
    loc: Loc
    parallel: bool = False


@dataclass
class While:
    """``while True: test_body; if not test: break; body`` (test_body computes ``test``)."""
    test_body: list
    test: Operand
    body: list
    loc: Loc


@dataclass
class Function:
    name: str
    params: list          # parameter names, in order
    body: list
    result: str           # the variable holding the returned value
    filename: str
    types: dict = field(default_factory=dict)   # variable -> Type, after inference
    views: dict = field(default_factory=dict)   # view variable -> base variable
    # the compiler's temporaries, known by where they come from (the frontend's
    # ``Namer.temp``, in-place rewriting), not by how they are spelled
    temps: frozenset | None = None
    # (array, axis, index variable) triples in range by construction: the loop nests of
    # ``coarsen.ir.scalarize`` index only the regions they were given (no bounds check)
    in_range: frozenset = frozenset()
    # variables read after the body besides ``result`` (a custom_vjp backward rule's
    # cotangents): passes that rename or drop assignments keep these, as they keep ``result``
    live_out: frozenset = frozenset()
    # the module's one fresh-name supply (``coarsen.ir.fresh``): every pass that makes a name
    # takes it here; ``dataclasses.replace`` keeps it, so a pass's output shares its input's
    names: NameSupply | None = None

    def __post_init__(self):
        if self.names is None:
            # IR built by hand (tests): every name it mentions is taken
            self.names = NameSupply(names_in(self))
        if self.temps is None:
            # IR built by hand (tests) that does not say: the assignments to names spelled
            # like the frontend's temporaries (``_t<k>``); the frontend always says
            self.temps = frozenset(s.target for s in walk(self.body) if isinstance(s, Assign)
                                   and s.target[:2] == "_t" and s.target[2:].isdigit())


@dataclass
class Segment:
    """A segment of interest: statements differentiated as one unit (symbolically).

    ``stmts`` run in order in the forward sweep (``passengers`` first: inactive or element-read
    statements whose results the segment takes as inputs); the reverse sweep takes one
    preaccumulated step with the local Jacobian of its lifting.  ``plan`` is its typed plan
    (``coarsen.analysis.plans.SegmentPlan``: source lines, then the lifting result)."""
    stmts: list
    loc: Loc
    index: int
    passengers: list = field(default_factory=list)
    inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    plan: object = None


Stmt = Union[Assign, Store, If, For, While, Segment]


def keep_records(new, old):
    """``new`` (a ``Function`` a pass made with ``dataclasses.replace``) with the frontend's
    records of ``old`` that are not dataclass fields (``global_arrays``, ``dependencies``...)."""
    for k, v in vars(old).items():
        if not hasattr(new, k):
            setattr(new, k, v)
    return new


# ------------------------------------------------------------------------------- walking
def index_operands(index):
    for item in index:
        if isinstance(item, (Var, Const)):
            yield item
        elif isinstance(item, Slice):
            for part in (item.lower, item.upper, item.step):
                if part is not None:
                    yield part


def uses(stmt):
    """Operands a statement reads directly (not those of nested blocks)."""
    if isinstance(stmt, Assign):
        return list(stmt.args) + list(index_operands(stmt.index))
    if isinstance(stmt, Store):
        return [Var(stmt.array), stmt.value] + list(index_operands(stmt.index))
    if isinstance(stmt, If):
        return [stmt.cond]
    if isinstance(stmt, For):
        return [stmt.start, stmt.stop, stmt.step]
    if isinstance(stmt, While):
        return [stmt.test]
    if isinstance(stmt, Segment):
        return []
    raise TypeError(stmt)


def used_vars(stmt):
    return [u.name for u in uses(stmt) if isinstance(u, Var)]


def walk(block):
    """Every statement of a block, nested ones included, in program order."""
    for s in block:
        yield s
        if isinstance(s, If):
            yield from walk(s.body)
            yield from walk(s.orelse)
        elif isinstance(s, For):
            yield from walk(s.body)
        elif isinstance(s, While):
            yield from walk(s.test_body)
            yield from walk(s.body)
        elif isinstance(s, Segment):
            yield from walk(s.stmts)


def walk_with_depth(block, depth=0):
    """(statement, loop depth) pairs."""
    for s in block:
        yield s, depth
        if isinstance(s, If):
            yield from walk_with_depth(s.body, depth)
            yield from walk_with_depth(s.orelse, depth)
        elif isinstance(s, For):
            yield from walk_with_depth(s.body, depth + 1)
        elif isinstance(s, While):
            yield from walk_with_depth(s.test_body, depth + 1)
            yield from walk_with_depth(s.body, depth + 1)
        elif isinstance(s, Segment):
            yield from walk_with_depth(s.stmts, depth)


def assigned(block):
    """The variables a block assigns (nested blocks and loop variables included)."""
    out = set()
    for st in walk(block):
        if isinstance(st, Assign):
            out.add(st.target)
        elif isinstance(st, For):
            out.add(st.var)
    return out


def blocks(block):
    """Every block (statement list) of a body, nested ones included."""
    yield block
    for s in block:
        if isinstance(s, If):
            yield from blocks(s.body)
            yield from blocks(s.orelse)
        elif isinstance(s, For):
            yield from blocks(s.body)
        elif isinstance(s, While):
            yield from blocks(s.test_body)
            yield from blocks(s.body)
        elif isinstance(s, Segment):
            yield from blocks(s.stmts)


def names_in(fn):
    """Every variable name ``fn`` mentions: parameters, targets, loop variables, stores and
    reads."""
    out = set(fn.params) | {fn.result} | set(fn.types)
    for st in walk(fn.body):
        if isinstance(st, Assign):
            out.add(st.target)
        elif isinstance(st, Store):
            out.add(st.array)
        elif isinstance(st, For):
            out.add(st.var)
        if not isinstance(st, Segment):
            out.update(used_vars(st))
    return out
