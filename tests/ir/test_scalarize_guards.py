"""Tests that pin the preconditions of ``coarsen.ir.scalarize`` (issue 48): each test here kills
a guard mutant of the pass that the other scalarize tests let survive.  Fast tests first (the
mutation tool runs this file first, with ``-x``)."""
