"""Lowering a gast function to the IR, with the fence built in.

Requires: a ``FunctionSource`` (``coarsen.frontend.source``).
Guarantees: an ``ir.Function`` in A-normal form whose control flow is structured: early
``return``, ``break`` and ``continue`` become boolean flags and guards; ``for`` loops that
break, return or leak their variable become ``While`` loops with an explicit counter;
``and``/``or``/conditional expressions keep Python's short-circuit order; calls to other
user functions are inlined (recursion is refused); NumPy conveniences (``mean``, ``var``,
``std``, ``outer``, ``clip``, ``keepdims``, ``dot``) are desugared into primitives; a read
that may find its variable unbound is checked, raising Python's ``UnboundLocalError``
(``coarsen.frontend.unbound``).  Every construct outside the language raises
``CoarsenError`` with file, line, column and a hint, before any code is generated (this is
the fence).
"""
from __future__ import annotations

import gast

from ..ir.nodes import (ELLIPSIS, RESULT_START, Assign, Const, Function, If, Loc, NEWAXIS, Slice, Store,
                        Var)
from ..ir.ssa import split_webs
from .calls import CallMixin
from .expressions import OPERATORS, ExpressionMixin
from .helpers_inline import TupleValue, inline_call
from .loops import LoopMixin, contains_or_is
from .names import Namer, identifiers
from .source import (FunctionSource, GlobalArray, Known, Module, UserFunction, get_source)
from .array_literals import index_list_literals, lower_list_literal
from .growable import (growable_lists, is_append, is_list_start, list_literals, lower_append,
                       lower_list_start)
from .static_attrs import einsum_spec_strings
from .joins import list_argument_literals, nested_displays
from .numpy_forms import static_literals
from .nested_defs import define_nested, local_store_names, walk_outside_defs
from .unbound import guard_unbound_reads

_UNSUPPORTED_STMTS = {
    gast.Try: ("try/except", "handle errors outside the differentiated function"),
    gast.With: ("with blocks", "move the context manager outside the differentiated function"),
    gast.Raise: ("raise", "validate inputs before calling the gradient"),
    gast.Global: ("global declarations", "module-level numbers and arrays are read without "
                  "one: remove the `global` statement; to change one, pass the value as a "
                  "parameter and return results"),
    gast.Nonlocal: ("nonlocal declarations", "pass the value as a parameter"),
    gast.Delete: ("del", "let the variable go out of scope instead"),
    gast.ClassDef: ("class definitions", "define classes outside the function"),
    gast.AsyncFunctionDef: ("async functions", "write a plain function"),
    gast.Import: ("import statements", "import at module level"),
    gast.ImportFrom: ("import statements", "import at module level"),
    gast.AsyncFor: ("async for", "use a plain for loop over range(...)"),
    gast.AsyncWith: ("async with", "remove it from the differentiated function"),
}
def _verb(what):
    """"are" for a plural ("lambda expressions", "comprehensions"), "is" for the rest
    ("string formatting", "a raise statement")."""
    head = what.split(" (")[0].split(",")[0].rstrip()
    return "are" if head.endswith("s") and not head.endswith(("ss", "formatting")) else "is"


_UNSUPPORTED_EXPRS = {
    gast.Lambda: ("lambda expressions", "define a module-level function and call it"),
    gast.GeneratorExp: ("generator expressions", "write an explicit for loop"),
    gast.ListComp: ("list comprehensions", "write an explicit for loop over a preallocated array"),
    gast.SetComp: ("set comprehensions", "write an explicit loop"),
    gast.DictComp: ("dict comprehensions", "write an explicit loop"),
    gast.Dict: ("dicts", "use arrays or separate variables"),
    gast.Set: ("sets", "use arrays"),
    gast.List: ("lists", "use NumPy arrays (np.zeros(n) and element writes)"),
    gast.Yield: ("yield (generators)", "return one value"),
    gast.YieldFrom: ("yield from (generators)", "return one value"),
    gast.Await: ("await", "write a plain function"),
    gast.NamedExpr: ("assignment expressions (:=)", "assign in a separate statement"),
    gast.JoinedStr: ("string formatting", "remove string handling from the differentiated function"),
    gast.Starred: ("star-arguments", "pass arguments one by one"),
}



class _Flags:
    def __init__(self):
        self.ret = None     # name of the "returned" flag, when early returns exist


class Lowerer(ExpressionMixin, CallMixin, LoopMixin):
    """Lowers one function (and, by inlining, the user functions it calls)."""

    def __init__(self, src: FunctionSource, namer, prefix="", stack=()):
        self.src = src
        self.namer = namer
        self.prefix = prefix           # renaming prefix of inlined helpers' locals
        self.stack = stack + (src.fn,)
        self.rename = {}               # source name -> IR name
        self.out = None
        self.loops = []
        self.flags = _Flags()
        self.tuple_results = None      # result names of a helper that returns a tuple
        self.tuples = {}               # source name -> TupleValue (``t = helper()``, bound once)
        self.source_names = {}         # IR name -> source name (shared with inlined helpers)
        node = src.node
        self.params = [a.id for a in node.args.args]
        # the names it binds; a nested def's own locals are not (coarsen.frontend.nested_defs)
        self.local_names = local_store_names(node)
        self.nested = {}               # source name -> NestedDef, as its def is lowered
        self.active_defs = ()          # the nested defs being inlined (recursion is refused)
        self._check_signature(node)

    # ------------------------------------------------------------------ helpers
    def err(self, node, problem, hint=None):
        return self.src.error(node, problem, hint)

    def loc(self, node):
        ln = getattr(node, "lineno", None) or self.src.node.lineno
        text = self.src.line(ln) or ""
        return Loc(self.src.filename, ln, getattr(node, "col_offset", 0) or 0, text.strip())

    def tmp(self):
        return self.namer.temp()

    def emit(self, stmt):
        self.out.append(stmt)

    def name(self, src_name):
        """IR name of a source variable (renamed inside inlined helpers)."""
        if src_name in self.rename:
            return self.rename[src_name]
        if self.prefix:
            new = self.namer.user_fresh(self.prefix + src_name)
        else:
            new = self.namer.user(src_name)
        self.rename[src_name] = new
        self.source_names.setdefault(new, src_name)
        return new

    def _check_signature(self, node):
        a = node.args
        if a.vararg is not None or a.kwarg is not None:
            bad = a.vararg or a.kwarg
            raise self.err(bad, "*args and **kwargs parameters are not supported",
                           "list the parameters explicitly")
        if a.kwonlyargs:
            raise self.err(a.kwonlyargs[0], "keyword-only parameters are not supported",
                           "make it an ordinary parameter (remove the '*' before it)")
        if getattr(a, "posonlyargs", None):
            raise self.err(a.posonlyargs[0], "positional-only parameters are not supported",
                           "make it an ordinary parameter (remove the '/' after it)")
        if node.decorator_list:
            for d in node.decorator_list:
                # numba.njit-style decorators are fine (we read .py_func); anything else is not
                text = gast.dump(d)
                if not any(w in text for w in ("jit", "vectorize", "custom_vjp", "custom_jvp", "defjvp")):
                    raise self.err(d, "decorated functions are not supported",
                                   "differentiate the undecorated function")

    # ------------------------------------------------------------------ entry
    def lower_function(self):
        node = self.src.node
        body = list(node.body)
        if body and isinstance(body[0], gast.Expr) and isinstance(body[0].value, gast.Constant) \
                and isinstance(body[0].value.value, str):
            body = body[1:]
        self.growable = growable_lists(self, body)     # xs = []; xs.append(v) (frontend.growable)
        self._fence(body)
        self.result = self.namer.fresh("_" + self.prefix + "result" if self.prefix else "_ret")
        returns = [s for s in walk_outside_defs(gast.Module(body=body, type_ignores=[]))
                   if isinstance(s, gast.Return)]
        if not returns and not self.prefix:
            raise self.err(node, "the function has no return statement",
                           "return a float scalar")
        self.has_return = bool(returns)
        tail_only = (len(returns) == 1 and body and body[-1] is returns[0]) or not returns
        self.out = []
        if not tail_only:
            self.flags.ret = self.namer.fresh("_" + self.prefix + "returned" if self.prefix else "_returned")
            self.emit(Assign(self.flags.ret, "copy", (Const(False),), self.loc(node)))
            # the result before any return: typed as the returns are (coarsen.ir.typeinfer)
            self.emit(Assign(self.result, "copy", (Const(0.0),), self.loc(node), attrs=RESULT_START))
        self.lower_block(body, self.out)
        if self.tuple_results is not None and not tail_only:
            # a tuple helper with early returns: each element starts untyped, as _ret does
            self.out[1:2] = [Assign(r, "copy", (Const(0.0),), self.loc(node), attrs=RESULT_START)
                             for r in self.tuple_results]
        return self.out

    def _array_literal_lists(self, stmt):
        """ids of the list displays that are (nested in) the argument of np.array/np.asarray."""
        out = set()
        for sub in gast.walk(stmt):
            if isinstance(sub, gast.Call) and sub.args and isinstance(sub.args[0], gast.List):
                k = self.resolve_value(sub.func, quiet=True)
                if isinstance(k, Known) and k.op in ("array", "asarray"):
                    out |= nested_displays(sub.args[0])
        return out

    def _fence(self, body):
        for stmt in body:
            literals = self._array_literal_lists(stmt) | einsum_spec_strings(self, stmt) \
                | list_literals(self, [stmt]) \
                | index_list_literals(stmt) \
                | list_argument_literals(self, stmt) | static_literals(self, stmt) | {
                    id(a.msg) for a in gast.walk(stmt) if isinstance(a, gast.Assert)}
            for sub in gast.walk(stmt):
                if id(sub) in literals:
                    continue
                info = _UNSUPPORTED_STMTS.get(type(sub)) or _UNSUPPORTED_EXPRS.get(type(sub))
                if info is not None:
                    what, hint = info
                    raise self.err(sub, f"{what} {_verb(what)} not supported in differentiated code", hint)
                if isinstance(sub, gast.Attribute) and isinstance(sub.ctx, gast.Store):
                    raise self.err(sub, "attribute assignment is not supported",
                                   "use local variables or array element writes")
                if isinstance(sub, gast.Constant) and isinstance(sub.value, (str, bytes)) \
                        and not (isinstance(stmt, gast.Expr) and stmt.value is sub):
                    self.check_string_argument(stmt, sub)   # an argument: named if refused
                    hint = "remove string handling from the differentiated function"
                    if sub.value in ("inf", "-inf", "nan", "infinity", "-infinity"):
                        hint = "write math.inf, -math.inf or math.nan instead of float('...')"
                    raise self.err(sub, "strings are not supported in differentiated code", hint)
                if isinstance(sub, gast.Constant) and isinstance(sub.value, complex):
                    raise self.err(sub, "complex numbers are not supported", "split into real and imaginary parts")
                if isinstance(sub, gast.Name) and sub.id.startswith("__") and sub.id.endswith("__"):
                    # Python's own (__name__, __debug__); a local __y is escaped as _y is
                    raise self.err(sub, "names starting and ending with '__' are Python's",
                                   "rename the variable")

    # ------------------------------------------------------------------ blocks
    def lower_block(self, stmts, out):
        saved = self.out
        self.out = out
        try:
            for k, s in enumerate(stmts):
                exits = self.lower_stmt(s)
                if isinstance(s, (gast.Return, gast.Break, gast.Continue)):
                    return  # the rest of the block is dead code
                if exits and k + 1 < len(stmts):
                    guard = self.not_any(exits, s)
                    rest = []
                    self.emit(If(guard, rest, [], self.loc(stmts[k + 1])))
                    self.lower_block(stmts[k + 1:], rest)
                    return
        finally:
            self.out = saved

    def not_any(self, flags, node):
        flags = sorted(flags)
        loc = self.loc(node)
        acc = Var(flags[0])
        for f in flags[1:]:
            t = self.tmp()
            self.emit(Assign(t, "or", (acc, Var(f)), loc))
            acc = Var(t)
        t = self.tmp()
        self.emit(Assign(t, "not", (acc,), loc))
        return Var(t)

    def exits_of(self, node):
        """Flags a statement may set that the rest of its block must respect."""
        flags = set()
        if self.flags.ret and contains_or_is(node, gast.Return):
            flags.add(self.flags.ret)
        if self.loops and not isinstance(node, (gast.For, gast.While)):
            if contains_or_is(node, gast.Break, stop_at_loops=True):
                flags.add(self.loops[-1].brk)
            if contains_or_is(node, gast.Continue, stop_at_loops=True):
                flags.add(self.loops[-1].cont)
        return flags

    # ------------------------------------------------------------------ statements
    def lower_stmt(self, s):
        method = getattr(self, "stmt_" + type(s).__name__, None)
        if method is None:
            raise self.err(s, f"{type(s).__name__} statements are not supported")
        method(s)
        return self.exits_of(s)

    def stmt_FunctionDef(self, s):
        """A nested ``def``: recorded, inlined where it is called (``nested_defs``)."""
        define_nested(self, s)

    def stmt_Assert(self, s):
        """``assert test, msg``: the test evaluated where it stands and checked (``check``:
        Python's ``AssertionError`` with the constant message), no derivative."""
        msg = s.msg
        if msg is not None and not (isinstance(msg, gast.Constant) and isinstance(msg.value, str)):
            raise self.err(msg, "an assert's message must be a string constant",
                           "assert x > 0, 'x must be positive'")
        flag = self.op(s, None, "truth", [self.lower_expr(s.test)])
        self.op(s, None, "check", [flag], attrs=(
            ("exc", "AssertionError"), ("message", None if msg is None else msg.value)))

    def stmt_Pass(self, s):
        pass

    def stmt_Expr(self, s):
        if isinstance(s.value, gast.Constant):
            return  # docstrings and bare constants
        if is_append(s.value, self.growable):
            lower_append(self, s.value)
            return
        if isinstance(s.value, gast.Call) and isinstance(self.resolve_value(s.value.func, quiet=True), UserFunction):
            self.inline(s.value, self.resolve_value(s.value.func).fn, None, discard=True)
            return
        raise self.err(s, "expression statements (calls for their side effects) are not supported",
                       "assign the result, or remove the call (print and other I/O cannot be differentiated)")

    def stmt_Return(self, s):
        if s.value is None:
            raise self.err(s, "the function must return a float scalar", "return a value")
        if not self.prefix:
            if isinstance(s.value, gast.Tuple):
                raise self.err(s.value, "returning a tuple is not supported",
                               "return one float scalar (the objective)")
            val = self.lower_expr(s.value, target=self.result, allow_tuple=True)
            if isinstance(val, TupleValue):
                raise self.err(s.value, f"returning a tuple is not supported ({val.what} is a "
                               f"tuple of {len(val)} values)",
                               "return one float scalar (the objective), e.g. one element of it")
        else:
            self.return_from_helper(s)
        if self.flags.ret:
            self.emit(Assign(self.flags.ret, "copy", (Const(True),), self.loc(s)))
            for loop in self.loops:
                pass  # enclosing loops test the returned flag themselves

    def return_from_helper(self, s):
        """``return e`` in an inlined helper: one value into the result variable, or a tuple
        (a literal, a tuple helper's call, a name bound to one) element by element into one
        result variable each; every ``return`` of a helper must agree on the kind and length."""
        v = s.value
        if isinstance(v, gast.Tuple):
            for e in v.elts:
                if isinstance(e, (gast.Tuple, gast.Starred)):
                    raise self.err(e, "nested tuples in a return are not supported",
                                   "return a flat tuple (a, b, c)")
            names = self.result_tuple(s, len(v.elts))
            vals = [self.lower_expr(e) for e in v.elts]
            for r, val in zip(names, vals):
                self.emit(Assign(r, "copy", (val,), self.loc(s)))
            return
        if self.tuple_results is not None and not isinstance(v, (gast.Call, gast.Name)):
            self.result_tuple(s, None)
        val = self.lower_expr(v, target=self.result if self.tuple_results is None else None,
                              allow_tuple=True)
        if isinstance(val, TupleValue):
            names = self.result_tuple(s, len(val))
            for r, item in zip(names, val.items):
                self.emit(Assign(r, "copy", (item,), self.loc(s)))
            return
        if self.tuple_results is not None:
            self.result_tuple(s, None)
        self.single_result = True

    single_result = False

    def result_tuple(self, s, n):
        """The result variables of a helper whose ``return`` at ``s`` gives a tuple of ``n``
        values (``None``: one value), created at its first tuple return."""
        helper = self.src.fn.__name__
        if n is None or self.single_result:
            raise self.err(s, f"{helper}() returns a tuple on one path and a single value on another",
                           "return the same kind of value (a tuple of the same length) everywhere")
        if self.tuple_results is None:
            base = "_" + self.prefix + "result_"
            self.tuple_results = [self.namer.fresh(f"{base}{k}") for k in range(n)]
        elif len(self.tuple_results) != n:
            raise self.err(s, f"{helper}() returns tuples of different lengths "
                           f"({len(self.tuple_results)} and {n})",
                           "return tuples of one length on every path")
        return self.tuple_results

    def stmt_Break(self, s):
        if not self.loops:
            raise self.err(s, "break outside a loop")
        self.emit(Assign(self.loops[-1].brk, "copy", (Const(True),), self.loc(s)))

    def stmt_Continue(self, s):
        if not self.loops:
            raise self.err(s, "continue outside a loop")
        self.emit(Assign(self.loops[-1].cont, "copy", (Const(True),), self.loc(s)))

    def stmt_AnnAssign(self, s):
        if s.value is None:
            return
        self.assign_to(s.target, s.value, s)

    def stmt_Assign(self, s):
        if len(s.targets) == 1:
            self.assign_to(s.targets[0], s.value, s)
            return
        # chained assignment a = b = e: evaluate e once
        val = self.lower_expr(s.value)
        for t in s.targets:
            self.assign_operand(t, val, s)

    def assign_to(self, target, value, s):
        if isinstance(target, gast.Name) and target.id in self.growable:
            if not is_list_start(value):
                raise self.err(target, f"{target.id!r} is a list: it can only be assigned []",
                               "use another name for the new value")
            lower_list_start(self, target, s)
            return
        if isinstance(target, gast.Name):
            self.check_target_name(target)
            if isinstance(value, (gast.Call, gast.Name)):
                val = self.lower_expr(value, target=self.name(target.id), allow_tuple=True)
                if isinstance(val, TupleValue):
                    self.bind_tuple(target, val)
                return
            self.lower_expr(value, target=self.name(target.id))
        elif isinstance(target, gast.Tuple):
            self.assign_tuple(target, value, s)
        elif isinstance(target, gast.Subscript):
            val = self.lower_expr(value)
            self.store(target, val, None, s)
        else:
            raise self.err(target, f"cannot assign to {type(target).__name__}",
                           "assign to names, tuples of names, or array elements")

    def check_target_name(self, target):
        for loop in self._for_vars:
            if loop == target.id:
                raise self.err(target, f"assigning to the loop variable {target.id!r} inside its loop",
                               "use another variable")

    _for_vars = ()
    growable: dict = {}       # source name -> GrowableList, set by lower_function

    def assign_operand(self, target, val, s):
        if isinstance(target, gast.Name):
            self.check_target_name(target)
            self.emit(Assign(self.name(target.id), "copy", (val,), self.loc(s)))
        elif isinstance(target, gast.Subscript):
            self.store(target, val, None, s)
        elif isinstance(target, gast.Tuple):
            raise self.err(target, "tuple targets in chained assignment are not supported")
        else:
            raise self.err(target, f"cannot assign to {type(target).__name__}")

    def bind_tuple(self, target, val):
        """``t = f(...)`` with ``f`` returning a tuple: ``t`` names its elements (read as
        ``t[0]`` or unpacked), which needs ``t`` assigned by this one statement only."""
        stores = sum(1 for n in gast.walk(self.src.node)
                     if isinstance(n, gast.Name) and n.id == target.id
                     and isinstance(n.ctx, gast.Store))
        if stores != 1 or target.id in self.params:
            raise self.err(target, f"{target.id!r} holds the tuple {val.what} but is also "
                           "assigned elsewhere", f"unpack the tuple instead: a, b = {val.what[:-2]}(...)")
        self.tuples[target.id] = TupleValue(val.items, repr(target.id))

    def assign_tuple(self, target, value, s):
        elts = target.elts
        for t in elts:
            if isinstance(t, gast.Tuple):
                raise self.err(t, "nested tuple unpacking is not supported",
                               "unpack one level at a time")
        if isinstance(value, gast.Tuple):
            if len(value.elts) != len(elts):
                raise self.err(s, "tuple unpacking with mismatched lengths")
            vals = []
            for v in value.elts:
                before = self.namer.count
                op = self.lower_expr(v)
                # a variable the targets may rebind before it is read (a, b = b, a) is copied
                # first; a temporary made for this element is read by nothing else (copying
                # it made the targets aliases of a compiler temporary, and a later write into
                # one of them was refused as a write through a view of that temporary)
                fresh = isinstance(op, Var) and op.name in self.namer.temps and \
                    int(op.name[2:]) > before
                if isinstance(op, Var) and not fresh:
                    t = self.tmp()
                    self.emit(Assign(t, "copy", (op,), self.loc(v)))
                    op = Var(t)
                vals.append(op)
            for t, v in zip(elts, vals):
                self.assign_operand(t, v, s)
            return
        if isinstance(value, gast.Attribute) and value.attr == "shape":
            arr = self.lower_expr(value.value)
            for k, t in enumerate(elts):
                tmp = self.tmp()
                self.emit(Assign(tmp, "dim", (arr, Const(k)), self.loc(value)))
                self.assign_operand(t, Var(tmp), s)
            return
        if isinstance(value, gast.Call) and self._is_shape_call(value):
            shape_args = self.bind(value, "np.shape", frozenset({"a"}))
            arr = self.lower_expr(shape_args["a"])
            for k, t in enumerate(elts):
                tmp = self.tmp()
                self.emit(Assign(tmp, "dim", (arr, Const(k)), self.loc(value)))
                self.assign_operand(t, Var(tmp), s)
            return
        if isinstance(value, (gast.Call, gast.Name)):
            val = self.lower_expr(value, allow_tuple=True)
            if isinstance(val, TupleValue):
                if len(val) != len(elts):
                    raise self.err(s, f"cannot unpack {val.what}, a tuple of {len(val)} values, "
                                   f"into {len(elts)} names", "unpack into one name per element")
                for t, v in zip(elts, val.items):
                    self.assign_operand(t, v, s)
                return
        raise self.err(value, "tuple unpacking is supported from tuples, from .shape and from "
                       "helpers that return tuples only",
                       "assign the values one by one (arrays are not unpacked by rows)")

    def _is_shape_call(self, call):
        f = call.func
        return isinstance(f, gast.Attribute) and f.attr == "shape" and \
            isinstance(self.resolve_value(f.value, quiet=True), Module)

    def stmt_AugAssign(self, s):
        op = OPERATORS.get(type(s.op))
        if op is None or op == "matmul":
            raise self.err(s, f"augmented assignment {type(s.op).__name__} is not supported")
        t = s.target
        if isinstance(t, gast.Name):
            self.check_target_name(t)
            name = self.name(t.id)
            val = self.lower_expr(s.value)
            # ``inplace``: NumPy updates an array in place (every alias sees it); a scalar is
            # rebound.  Only the types tell which: ``typeinfer`` turns the array case into a
            # whole-array slice store and drops the mark on scalars.
            self.emit(Assign(name, op, (Var(name), val), self.loc(s), attrs=(("inplace", True),)))
        elif isinstance(t, gast.Subscript):
            if self._aug_reads_first(t, s.value):
                # Python reads ``a[i]`` before it evaluates e, and a helper called in e may
                # update ``a``: an element keeps the value read first.  A view (``A[i]`` of a
                # 2-D array) sees the update instead: the in-place pass (``coarsen.ir.inplace``)
                # moves its read after e once the types tell.
                arr, index = self.lower_subscript_parts(t)
                old = self.tmp()
                self.emit(Assign(old, "getitem", (arr,), self.loc(s), index=index,
                                 attrs=(("aug_read", True),)))
                val = self.lower_expr(s.value)
                new = self.tmp()
                self.emit(Assign(new, op, (Var(old), val), self.loc(s)))
                self.emit(Store(arr.name, index, Var(new), None, self.loc(s)))
                return
            val = self.lower_expr(s.value)
            if op in ("add", "sub"):
                self.store(t, val, op, s)
            else:
                arr, index = self.lower_subscript_parts(t)
                old = self.tmp()
                self.emit(Assign(old, "getitem", (arr,), self.loc(s), index=index))
                new = self.tmp()
                self.emit(Assign(new, op, (Var(old), val), self.loc(s)))
                self.emit(Store(arr.name, index, Var(new), None, self.loc(s)))
        else:
            raise self.err(t, "cannot assign to this target")

    def _aug_reads_first(self, target, value):
        """``a[i] op= e`` whose subscript has no slice (it may be an element) and whose e calls
        a user function (which may update ``a``)."""
        items = target.slice.elts if isinstance(target.slice, gast.Tuple) else [target.slice]
        if any(isinstance(it, gast.Slice) or (isinstance(it, gast.Constant) and it.value in (None, Ellipsis))
               or (isinstance(it, gast.Attribute) and it.attr == "newaxis") for it in items):
            return False
        return any(isinstance(n, gast.Call)
                   and isinstance(self.resolve_value(n.func, quiet=True), UserFunction)
                   for n in gast.walk(value))

    def store(self, target, val, aug, s):
        arr, index = self.lower_subscript_parts(target)
        self.emit(Store(arr.name, index, val, aug, self.loc(s)))

    def lower_subscript_parts(self, node):
        base = node.value
        if isinstance(base, gast.Attribute) and isinstance(self.resolve_value(base, quiet=True), GlobalArray):
            raise self.err(base, f"writing into the module-level array {gast.unparse(base).strip()!r} is not supported",
                           "pass the array as a parameter, or copy it into a local array first")
        if not isinstance(base, gast.Name):
            raise self.err(base, "only subscripts of named arrays can be assigned",
                           "assign to a named array, e.g. a[i, j] = ...")
        if base.id not in self.local_names and base.id in self.src.globals:
            raise self.err(base, f"writing into the module-level array {base.id!r} is not supported",
                           "pass the array as a parameter, or copy it into a local array first")
        if base.id not in self.local_names:
            raise self.err(base, f"{base.id!r} is not a local array or parameter")
        if base.id in self.tuples:
            raise self.err(base, f"{base.id!r} is a tuple, and tuples cannot be modified",
                           "unpack it into variables and assign those")
        arr = Var(self.name(base.id))
        return arr, self.lower_index(node.slice)

    def lower_index(self, sl):
        items = sl.elts if isinstance(sl, gast.Tuple) else [sl]
        out = []
        for it in items:
            if isinstance(it, gast.Slice):
                parts = []
                for p in (it.lower, it.upper, it.step):
                    parts.append(None if p is None else self.lower_expr(p))
                out.append(Slice(*parts))
            elif isinstance(it, gast.Constant) and it.value is None:
                out.append(NEWAXIS)
            elif isinstance(it, gast.Attribute) and it.attr == "newaxis":
                out.append(NEWAXIS)
            elif isinstance(it, gast.List):     # v[[0, 2]]: an integer array (advanced indexing)
                out.append(lower_list_literal(self, it))
            elif isinstance(it, gast.Constant) and it.value is Ellipsis:
                out.append(ELLIPSIS)      # spelled out as slices by type inference
            else:
                out.append(self.lower_expr(it))
        return tuple(out)

    def stmt_If(self, s):
        cond = self.lower_cond(s.test)
        body, orelse = [], []
        self.emit(If(cond, body, orelse, self.loc(s)))
        self.lower_block(s.body, body)
        self.lower_block(s.orelse, orelse)

    def lower_cond(self, test, target=None):
        """A branch's or loop's test: ``and``/``or`` in it (through ``not`` and nested
        connectives) are truth tests, whatever their operands' types."""
        marked = getattr(self, "condition_nodes", None)
        if marked is None:
            marked = self.condition_nodes = set()
        stack = [test]
        while stack:
            node = stack.pop()
            if isinstance(node, gast.BoolOp):
                marked.add(id(node))
                stack.extend(node.values)
            elif isinstance(node, gast.UnaryOp) and isinstance(node.op, gast.Not):
                stack.append(node.operand)
        return self.lower_expr(test, target=target)

    def inline(self, node, fn, target, discard=False):
        """Inline a call of the user function ``fn`` (``coarsen.frontend.helpers_inline``)."""
        return inline_call(self, node, fn, target, discard)


def lower(fn) -> tuple[Function, list]:
    """``(fn_ir, source parameter names)``: the function lowered, fenced and split into SSA
    webs."""
    src = get_source(fn)
    namer = Namer(seed=identifiers(src.node))
    lw = Lowerer(src, namer)
    params = [namer.user(p) for p in lw.params]
    for p, q in zip(lw.params, params):
        lw.rename[p] = q
    body = lw.lower_function()
    # reads of variables that may be unbound raise UnboundLocalError, as Python's do
    body = guard_unbound_reads(body, params, lw.result, lw.source_names, namer.fresh)
    fn_ir = Function(src.fn.__name__, params + list(namer.globals), body, lw.result, src.filename,
                     names=namer.supply)
    fn_ir.global_arrays = [obj for obj, _ in namer.globals.values()]
    # where each was read (``GlobalArray.where``), for the check that it is not rebound
    fn_ir.global_array_origins = [(ga.name, ga.where) for _, ga in namer.globals.values()]
    fn_ir.temps = frozenset(namer.temps)
    fn_ir = split_webs(fn_ir)
    fn_ir.dependencies = src.deps       # every read this lowering made (source.Dependencies)
    return fn_ir, lw.params
