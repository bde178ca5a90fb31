"""The one exception users see: ``CoarsenError``.

Every construct coarsen cannot differentiate correctly is refused with a ``CoarsenError``
before any code is generated.  The message carries the file, line and column, the source
line with a caret under the construct, and what to do instead, in the style of a
``SyntaxError``.
"""
from __future__ import annotations

import linecache


class CoarsenError(Exception):
    """An input coarsen refuses, or a call it cannot serve, with a location when known.

    Attributes: ``filename``, ``lineno`` (1-based), ``col_offset`` (0-based), ``source_line``,
    ``problem`` (what is wrong) and ``hint`` (what to do instead).
    """

    def __init__(self, problem: str, *, filename: str | None = None, lineno: int | None = None,
                 col_offset: int | None = None, source_line: str | None = None,
                 hint: str | None = None):
        self.problem = problem
        self.filename = filename
        self.lineno = lineno
        self.col_offset = col_offset
        self.source_line = source_line
        self.hint = hint
        super().__init__(self._format())

    def __reduce__(self):
        # pickled with its parts (a Dask worker's error reaches the client as it was raised),
        # not with the formatted text, which would be taken for the problem and formatted again
        return (_rebuild, (type(self), self.problem,
                           {"filename": self.filename, "lineno": self.lineno,
                            "col_offset": self.col_offset, "source_line": self.source_line,
                            "hint": self.hint}))

    def _format(self) -> str:
        parts = []
        if self.filename is not None or self.lineno is not None:
            where = f'File "{self.filename or "<unknown>"}"'
            if self.lineno is not None:
                where += f", line {self.lineno}"
            if self.col_offset is not None:
                where += f", column {self.col_offset + 1}"
            parts.append(where)
        if self.source_line is not None:
            text = self.source_line.rstrip("\n")
            stripped = text.lstrip()
            parts.append("    " + stripped)
            if self.col_offset is not None:
                caret = max(0, self.col_offset - (len(text) - len(stripped)))
                parts.append("    " + " " * caret + "^")
        parts.append("CoarsenError: " + self.problem)
        if self.hint:
            parts.append("hint: " + self.hint)
        return "\n".join(parts)


class CoarsenArgumentError(CoarsenError, TypeError):
    """Arguments that do not bind to the function's parameters (missing, extra, unknown or
    repeated): a ``TypeError`` too, as Python raises for the function itself, so that
    ``except TypeError`` catches it."""


def _rebuild(cls, problem, parts):
    return cls(problem, **parts)


def at_stmt(stmt, problem, hint=None):
    """A ``CoarsenError`` at an IR statement's source location (``stmt.loc``)."""
    loc = stmt.loc
    line = loc.text
    if loc.filename and loc.lineno and line is not None:
        # the IR keeps the statement's text without its indentation, which the caret's
        # column counts: the file's own line where it is that text
        full = linecache.getline(loc.filename, loc.lineno).rstrip("\n")
        if full.strip() == line.strip():
            line = full
    return CoarsenError(problem, filename=loc.filename, lineno=loc.lineno, col_offset=loc.col,
                        source_line=line, hint=hint)
