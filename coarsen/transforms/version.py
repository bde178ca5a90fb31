"""The library's version, in one place.

Requires: nothing.
Guarantees: ``__version__`` is the version of coarsen (as in ``pyproject.toml``); the cache keys
and the headers of exported modules read it here, and ``coarsen.__version__`` re-exports it, so
that no module of the transforms layer imports the ``coarsen`` package itself.
"""
__version__ = "0.1.0"
