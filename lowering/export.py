"""Export: write a generated module as a standalone, reviewable file.

Requires: ``source`` is complete generated source (e.g. ``printer.render(..., target="cpu")``,
possibly with batch drivers appended); ``header`` is the text the client composed (source
function, signature, coarsen version...), one or more lines.

Guarantees:
    * The file at ``path`` is ``header`` as ``# `` comment lines, a blank line, then ``source``;
      written atomically (temp file beside it + ``os.replace``) with mode 0o644.
    * The exported module imports only ``math``, ``numpy`` and ``numba`` (and their submodules):
      ``source`` is parsed and any other top-level or nested import raises ``LoweringError``
      before anything is written, so the file imports without coarsen installed.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

from .cache import atomic_write_text
from .errors import LoweringError

__all__ = ["export_module", "ALLOWED_IMPORTS"]

ALLOWED_IMPORTS = frozenset({"math", "numpy", "numba"})


def _check_imports(source: str) -> None:
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise LoweringError(f"export: the source does not parse: {exc}") from None
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            modules = ["." if node.level else (node.module or "")]
        else:
            continue
        for module in modules:
            if module.split(".")[0] not in ALLOWED_IMPORTS:
                raise LoweringError(
                    f"export: line {node.lineno} imports {module!r}; an exported module may "
                    f"import only {', '.join(sorted(ALLOWED_IMPORTS))}"
                )


def export_module(source: str, path: os.PathLike | str, *, header: str) -> Path:
    """Write ``header`` + ``source`` to ``path`` atomically; return the path."""
    _check_imports(source)
    lines = []
    for line in header.splitlines():
        line = line.rstrip()
        lines.append(line if line.startswith("#") else ("# " + line if line else "#"))
    text = "\n".join(lines) + ("\n\n" if lines else "") + source
    if not text.endswith("\n"):
        text += "\n"
    path = Path(path)
    if not path.parent.is_dir():
        raise LoweringError(f"export: directory {path.parent} does not exist")
    atomic_write_text(path, text, mode=0o644)
    return path
