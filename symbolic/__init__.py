"""coarsen.symbolic: the phi-calculus in SymPy."""
