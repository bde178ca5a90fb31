"""coarsen: source-to-source automatic differentiation for plain Python/NumPy."""
__version__ = "0.1.0"
