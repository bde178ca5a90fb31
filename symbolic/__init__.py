"""coarsen.symbolic: the phi-calculus in SymPy.

Requires: plain SymPy objects from the caller (the compiler core lifts each segment of interest
into SymPy itself); this package never imports ``coarsen``.

Guarantees: every entry point takes a :class:`Budget` and either returns within it (plus the
small overshoot of one bounded SymPy step) or raises :class:`BudgetExceeded`; results are exact
(closed forms hold on the whole domain, derivatives are exact identities), deterministic (same
input, same output, byte for byte), and printable as Python ``math`` code by :func:`to_python`.

Modules:

* ``budget``: :class:`Budget`, :class:`BudgetExceeded` (size guard and time budget);
* ``ops``: :func:`count_ops`, the one operation count;
* ``phi``: :class:`gamma`, the branch phi-function;
* ``derivatives``: :func:`derivatives` (reverse accumulation over the SSA DAG, CSE, stable
  rewrites) returning :class:`LocalJacobian`; :func:`naive_derivative_ops`;
  :func:`local_step_jacobian`, :func:`stored_per_trip` for loops without a closed form;
* ``loops``: :func:`closed_form_loop` returning :class:`ClosedForm` (mu-phi recurrences);
* ``rewrite``: :func:`stable_rewrite` (expm1/log1p/logaddexp), :func:`tidy`;
* ``guarded_cse``: :func:`guarded_cse`, CSE that never hoists a guarded division;
* ``float_of``: :class:`float_of` (an integer value in floating point), :func:`in_floats`;
* ``printing``: :func:`to_python`, :func:`assignments_to_python`.
"""
from .budget import Budget, BudgetExceeded
from .ops import count_ops
from .phi import gamma, is_branch_phi
from .derivatives import (LocalJacobian, derivatives, naive_derivative_ops, local_step_jacobian,
                          stored_per_trip)
from .loops import ClosedForm, closed_form_loop, trip_count
from .rewrite import stable_rewrite, tidy
from .guarded_cse import guarded_cse
from .float_of import float_of, in_floats, integer_valued
from .printing import to_python, assignments_to_python, CoarsenPythonPrinter, PowerOutOfRange
from .printing import PowerOverflows, PowerUnderflows, UnderflowCosts, OrElse

__all__ = [
    "PowerOutOfRange", "PowerOverflows", "PowerUnderflows", "UnderflowCosts", "OrElse", "float_of", "in_floats", "integer_valued",
    "Budget", "BudgetExceeded", "count_ops", "gamma", "is_branch_phi",
    "LocalJacobian", "derivatives", "naive_derivative_ops", "local_step_jacobian",
    "stored_per_trip", "ClosedForm", "closed_form_loop", "trip_count",
    "stable_rewrite", "tidy", "guarded_cse", "to_python", "assignments_to_python", "CoarsenPythonPrinter",
]
