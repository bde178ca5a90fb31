"""The bottom code-generation layer: what every other layer builds generated code with.

Requires: nothing of coarsen (only the standard library, gast and NumPy): the primitive
registry (``coarsen.ir.primitives``), the analyses and both AD modes import it, and it imports
none of them, so it can never close an import cycle.
Guarantees:

* ``build``: the gast builders (names, constants, calls, statements) and ``X``, an expression
  with Python operators;
* ``helpers``: the fixed runtime helpers of generated modules, as real, linted functions;
* ``runtime``: ``helper_source(names)``, the text of the requested helpers (the fixed ones'
  source read with ``inspect``, the ones generated per parameters from their templates) and
  of those they call;
* ``gast_queries``: reading generated code (``names_read``) and commenting it with the source
  lines (``comment_pass``), for both AD modes.
"""
