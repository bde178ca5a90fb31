"""Regenerate the claims of "Coarsening Optimization for Differentiable Programming" on coarsen."""
