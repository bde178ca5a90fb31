"""The source printer: a gast module of the derivative program -> readable, deterministic Python.

Requires:
    a ``gast.Module`` whose statements are the ones generated code uses (function definitions,
    assignments, augmented assignments, expression statements, ``if``/``elif``/``else``, ``for``,
    ``while``, ``return``, ``break``, ``continue``, ``pass``, imports; any expression). Any
    statement node may carry ``coarsen_comment``: a ``str`` of one or more lines.

Guarantees:
    * ``render(module, target=..., header=...)`` returns source text that parses, with 4-space
      indentation, one trailing newline, and no trailing whitespace.
    * Deterministic: the text depends only on the tree and the arguments (same input, same bytes).
    * ``coarsen_comment`` is written as ``# ...`` lines directly above its statement, at that
      statement's indentation (above the decorators of a function). A comment line that already
      starts with ``#`` is written as is; an empty comment line is written as ``#``.
    * ``header`` (optional) becomes a comment block at the very top, followed by one blank line.
    * Layout of the top level: two blank lines around top-level function definitions (PEP 8),
      none between consecutive simple statements such as imports.
    * Target ``"cpu"``: every top-level ``FunctionDef`` gets ``@numba.njit(cache=True, error_model="numpy")`` (division by zero gives inf or nan as in NumPy, not an exception) above its
      own decorators, and ``import numba`` is added after the leading import block unless the
      module already has it. Target ``"python"``: no decorators are added. Nested functions never
      get target decorators.
    * Parallel loops: a ``gast.For`` over ``range(...)`` marked ``coarsen_parallel = True`` prints
      as ``numba.prange(...)`` on ``"cpu"`` (and as ``range(...)`` on ``"python"``). On
      ``"cpu"`` each outermost one is first outlined into a top-level function of its own
      (``lowering.outline``), and the function that contains one gets ``parallel=True`` in its
      decorator (only that function: its callers and helpers keep the plain decorator).
    * Numbers round-trip exactly: floats print with ``repr``; a negative number or ``-0.0`` prints
      as a unary minus applied to its magnitude (so ``(-2.0) ** 2`` keeps its parentheses, which
      ``ast.unparse`` alone loses); ``inf``/``nan`` print as ``math.inf``/``math.nan`` (Numba
      understands those; ``import math`` is added if the module lacks it).

Design: expressions and simple statements go through ``gast.gast_to_ast`` and ``ast.unparse``
(after the small constant rewrite above); compound statements, comments and layout are handled
by the recursive walker below, so comments can be placed anywhere in nested control flow. No
private ``ast`` class is subclassed.
"""

from __future__ import annotations

import ast
import math

import gast

from .errors import LoweringError
from .targets import check_target, function_decorator, target_imports
from .outline import outline_parallel_loops

__all__ = ["render"]

_INDENT = "    "


def render(module: gast.Module, *, target: str, header: str | None = None) -> str:
    """Print ``module`` as Python source for ``target`` ("cpu" or "python")."""
    check_target(target)
    if not isinstance(module, gast.Module):
        raise LoweringError(f"render expects a gast.Module, got {type(module).__name__}")
    if target == "cpu":
        module = outline_parallel_loops(module)
    printer = _Printer(target)
    blocks: list[tuple[gast.stmt, list[str]]] = [
        (stmt, printer.top_level(stmt)) for stmt in module.body
    ]

    # Imports the target needs (and `math` if a constant needed it), after the leading imports.
    imported = _top_level_imports(module)
    extra = [m for m in target_imports(target) if m not in imported]
    if printer.needs_math and "math" not in imported:
        extra.insert(0, "math")
    insert_at = 0
    for i, stmt in enumerate(module.body):
        if isinstance(stmt, (gast.Import, gast.ImportFrom)):
            insert_at = i + 1
        elif i == 0 and _is_docstring(stmt):
            insert_at = 1
        else:
            break
    for offset, mod in enumerate(extra):
        blocks.insert(insert_at + offset, (gast.Import(names=[]), [f"import {mod}"]))

    blocks = _sort_leading_imports(blocks)
    lines: list[str] = []
    if header is not None:
        lines.extend(_comment_lines(header, ""))
        lines.append("")
    previous: gast.stmt | None = None
    for stmt, text in blocks:
        if previous is not None and (_is_def(previous) or _is_def(stmt)):
            lines.extend(["", ""])
        lines.extend(text)
        previous = stmt
    return "\n".join(lines) + "\n"


def _sort_leading_imports(blocks):
    """The leading plain imports in isort's order: standard library, a blank line, then the
    rest, each group alphabetical (so generated modules pass ruff's import check)."""
    import sys as _sys
    k = 0
    while k < len(blocks) and isinstance(blocks[k][0], gast.Import) and len(blocks[k][1]) == 1 \
            and blocks[k][1][0].startswith("import "):
        k += 1
    if k == 0:
        return blocks
    lines = [text[0] for _, text in blocks[:k]]

    def module(line):
        return line.split()[1].split(".")[0]

    std = sorted((ln for ln in lines if module(ln) in _sys.stdlib_module_names), key=module)
    rest = sorted((ln for ln in lines if module(ln) not in _sys.stdlib_module_names), key=module)
    merged = std + ([""] if std and rest else []) + rest
    return [(gast.Import(names=[]), merged)] + blocks[k:]


def _is_def(stmt: gast.stmt) -> bool:
    return isinstance(stmt, (gast.FunctionDef, gast.AsyncFunctionDef, gast.ClassDef))


def _is_docstring(stmt: gast.stmt) -> bool:
    return (
        isinstance(stmt, gast.Expr)
        and isinstance(stmt.value, gast.Constant)
        and isinstance(stmt.value.value, str)
    )


def _top_level_imports(module: gast.Module) -> set[str]:
    names: set[str] = set()
    for stmt in module.body:
        if isinstance(stmt, gast.Import):
            for alias in stmt.names:
                if alias.asname is None or alias.asname == alias.name:
                    names.add(alias.name)
    return names


def _comment_lines(text: object, indent: str) -> list[str]:
    if not isinstance(text, str):
        raise LoweringError(f"coarsen_comment must be a str, got {type(text).__name__}")
    out = []
    for line in text.splitlines() or [""]:
        line = line.rstrip()
        if not line:
            out.append(indent + "#")
        elif line.lstrip().startswith("#"):
            out.append(indent + line.lstrip())
        else:
            out.append(indent + "# " + line)
    return out


class _Printer:
    def __init__(self, target: str):
        self.target = target
        self.decorator = function_decorator(target)
        self.needs_math = False

    # -- statements -------------------------------------------------------------------------

    def top_level(self, stmt: gast.stmt) -> list[str]:
        out: list[str] = []
        self.stmt(stmt, 0, out, top=True)
        return out

    def block(self, body: list[gast.stmt], depth: int, out: list[str]) -> None:
        if not body:
            out.append(_INDENT * depth + "pass")
            return
        for stmt in body:
            self.stmt(stmt, depth, out, top=False)

    def stmt(self, node: gast.stmt, depth: int, out: list[str], *, top: bool) -> None:
        indent = _INDENT * depth
        comment = getattr(node, "coarsen_comment", None)
        if comment is not None:
            out.extend(_comment_lines(comment, indent))

        if isinstance(node, gast.FunctionDef):
            if top and self.decorator is not None:
                parallel = any(getattr(n, "coarsen_parallel", False) for n in gast.walk(node))
                out.append(f"{indent}@{function_decorator(self.target, parallel)}")
            for dec in node.decorator_list:
                out.append(f"{indent}@{self.expr(dec)}")
            signature = f"def {node.name}({self.expr(node.args)})"
            if node.returns is not None:
                signature += f" -> {self.expr(node.returns)}"
            out.append(f"{indent}{signature}:")
            self.block(node.body, depth + 1, out)
        elif isinstance(node, gast.If):
            out.append(f"{indent}if {self.expr(node.test)}:")
            self.block(node.body, depth + 1, out)
            orelse = node.orelse
            # Collapse `else: if ...` into `elif` unless the inner `if` carries its own comment.
            while (
                len(orelse) == 1
                and isinstance(orelse[0], gast.If)
                and getattr(orelse[0], "coarsen_comment", None) is None
            ):
                inner = orelse[0]
                out.append(f"{indent}elif {self.expr(inner.test)}:")
                self.block(inner.body, depth + 1, out)
                orelse = inner.orelse
            if orelse:
                out.append(f"{indent}else:")
                self.block(orelse, depth + 1, out)
        elif isinstance(node, gast.For):
            header = self.expr(node.iter)
            if getattr(node, "coarsen_parallel", False) and self.target == "cpu":
                if not header.startswith("range("):
                    raise LoweringError("a parallel loop must iterate over range(...)")
                header = "numba.prange(" + header[len("range("):]
            out.append(f"{indent}for {self.expr(node.target)} in {header}:")
            self.block(node.body, depth + 1, out)
            if node.orelse:
                out.append(f"{indent}else:")
                self.block(node.orelse, depth + 1, out)
        elif isinstance(node, gast.While):
            out.append(f"{indent}while {self.expr(node.test)}:")
            self.block(node.body, depth + 1, out)
            if node.orelse:
                out.append(f"{indent}else:")
                self.block(node.orelse, depth + 1, out)
        elif isinstance(node, _SIMPLE_STATEMENTS):
            for line in self.expr(node).splitlines():
                out.append(indent + line)
        else:
            raise LoweringError(
                f"the printer does not handle {type(node).__name__} statements "
                "(generated code uses functions, assignments, if/for/while and simple statements)"
            )

    # -- expressions and simple statements ---------------------------------------------------

    def expr(self, node: gast.AST) -> str:
        tree = gast.gast_to_ast(node)
        rewriter = _ConstantRewriter()
        tree = ast.fix_missing_locations(rewriter.visit(tree))
        self.needs_math = self.needs_math or rewriter.used_math
        return ast.unparse(tree)


_SIMPLE_STATEMENTS = (
    gast.Assign,
    gast.AugAssign,
    gast.AnnAssign,
    gast.Expr,
    gast.Return,
    gast.Break,
    gast.Continue,
    gast.Pass,
    gast.Import,
    gast.ImportFrom,
    gast.Raise,
    gast.Assert,
    gast.Delete,
    gast.Global,
    gast.Nonlocal,
)


class _ConstantRewriter(ast.NodeTransformer):
    """Make every numeric constant print so that it round-trips and keeps its precedence."""

    def __init__(self) -> None:
        self.used_math = False

    def _math(self, name: str) -> ast.expr:
        self.used_math = True
        return ast.Attribute(value=ast.Name(id="math", ctx=ast.Load()), attr=name, ctx=ast.Load())

    def generic_visit(self, node: ast.AST) -> ast.AST:
        if getattr(node, "type_comment", None) is not None:
            node.type_comment = None  # generated code carries no type comments
        return super().generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> ast.expr:
        value = node.value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return node
        if isinstance(value, float):
            if math.isnan(value):
                return self._math("nan")
            if math.isinf(value):
                positive = self._math("inf")
                return positive if value > 0 else ast.UnaryOp(op=ast.USub(), operand=positive)
            if value < 0 or (value == 0.0 and math.copysign(1.0, value) < 0):
                return ast.UnaryOp(op=ast.USub(), operand=ast.Constant(value=-value))
            return node
        if value < 0:
            return ast.UnaryOp(op=ast.USub(), operand=ast.Constant(value=-value))
        return node
