"""Errors raised by coarsen.lowering.

Requires: nothing (standard library only).
Guarantees: every failure that lowering detects itself is a ``LoweringError`` (or a subclass), so
the client (coarsen's public API) can catch one type and re-raise it as its own user-facing error.
``lowering`` never imports ``coarsen``; the translation to ``CoarsenError`` happens on the client's
side.
"""

from __future__ import annotations

__all__ = ["LoweringError", "CacheSecurityError"]


class LoweringError(Exception):
    """A gast module, a target, a parameter description or a file cannot be lowered as asked."""


class CacheSecurityError(LoweringError):
    """The cache directory is not safe to execute code from (wrong owner, writable by others, or
    not a directory that coarsen created). Code is never loaded from such a directory."""
