"""Refusals name the user's variables as the user wrote them: an SSA web of a variable
(``w_2``, the second value assigned to ``w``: ``coarsen.ir.ssa.split_webs``) shows as ``w``
(``coarsen.analysis.activity.shown``)."""
import numpy as np
import pytest

import coarsen


def second_value_is_a_view(x):
    w = x * 2.0
    s = np.sum(w)
    w = x[1:]
    w[0] = 3.0
    return s + np.sum(w * x[1:])


def first_value_is_a_view(x):
    w = x[1:]
    w[0] = 3.0
    w = x * 2.0
    return np.sum(w)


def a_name_like_a_web(x):
    w_2 = x[1:]
    w_2[0] = 3.0
    return np.sum(x)


@pytest.mark.parametrize("fn, name", [(second_value_is_a_view, "w"), (first_value_is_a_view, "w"),
                                      (a_name_like_a_web, "w_2")])
def test_a_refusal_names_the_users_variable(fn, name):
    with pytest.raises(coarsen.CoarsenError) as info:
        coarsen.differentiate(fn).value_and_grad(np.ones(4))
    assert f"writing into '{name}', which is a view of 'x'" in str(info.value)
    assert "_2'" not in str(info.value) or name == "w_2"
