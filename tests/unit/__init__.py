"""Unit tests of the compiler's core passes, one file per stage, each on small functions or
hand-built IR (target "python" only: nothing here compiles with Numba)."""
