"""coarsen.lowering: from a gast module to running code."""
