import numpy as np, sys
from harness import check
import mr
T=tuple(sys.argv[1:]) or ("python",)
a = np.array([0.3, -1.5, 2.5])
check(mr.r_ifexp_array, (a, 1.7), T)
check(mr.r_ifexp_array, (a, 0.7), T)
check(mr.r_ifexp_array_scal, (a, 1.7), T)
check(mr.r_ifexp_array_scal, (a, 0.7), T)
check(mr.r_minmax_int_float, (1.7, 3), T)
check(mr.r_minmax_int_float, (4.7, 1), T)
check(mr.r_abs_neg_zero, (1.7,), T)
check(mr.r_nested_cond_chain, (0.5, 1.0), T)
check(mr.r_nested_cond_chain, (1.5, 1.0), T)
check(mr.r_nested_cond_chain, (3.5, 1.0), T)
check(mr.r_while_continue, (1.1, 7), T)
check(mr.r_for_range_step, (1.1,), T)
