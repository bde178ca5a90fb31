"""Metamorphic checks of this stop's closed-form changes: the guard flag (``_near*``), merged
powers and the out-of-range guard give the same bits with the variables renamed to the
compiler's own kinds of names (``_near1``, ``_t1``, ``x_bar``, ``_n``) and with the loop split
into a helper, on both targets."""
from __future__ import annotations

import pytest

import coarsen
from tests.ad.test_closed_form_guard_flag import inv_geo
from tests.ad.test_closed_form_powers import geometric_forcing, halving


def inv_geo_renamed(x_bar, _near1, _t1, _n):
    _ftape = 0.0
    p_bar = _t1
    for k in range(_n):
        _ftape += x_bar / p_bar
        p_bar *= _near1
    return _ftape


def _inv_geo_loop(s, p, x, r, n):
    for k in range(n):
        s += x / p
        p *= r
    return s


def inv_geo_split(x, r, c, n):
    return _inv_geo_loop(0.0, c, x, r, n)


def halving_renamed(_near0, n_2):
    _s1_t0 = 1.0
    for _i in range(n_2):
        _s1_t0 = 0.5 * _s1_t0 + _near0 * _i
    return _s1_t0


def geometric_forcing_renamed(x_bar, _t2, _n1):
    u_y = 0.0
    _fpos = 1.0
    for k in range(_n1):
        u_y = 0.5 * u_y + x_bar * _fpos
        _fpos *= _t2
    return u_y


PAIRS = [
    (inv_geo, inv_geo_renamed, (1.5, 10.0, 0.01, 5)),
    (inv_geo, inv_geo_renamed, (1.5, 0.5, 1.0, 60)),
    (inv_geo, inv_geo_renamed, (1.5, 10.0, 1.0, 400)),      # out of range: the loop runs
    (inv_geo, inv_geo_split, (1.5, 10.0, 0.01, 5)),
    (inv_geo, inv_geo_split, (1.5, 1e-200, 1.0, 2)),
    (halving, halving_renamed, (0.7, 1100)),
    (geometric_forcing, geometric_forcing_renamed, (0.7, 0.99, 1500)),
]


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("pair", range(len(PAIRS)))
def test_renamed_and_split_give_the_same_bits(pair, target):
    fn, other, args = PAIRS[pair]
    a = coarsen.differentiate(fn, target=target).value_and_grad(*args)
    b = coarsen.differentiate(other, target=target).value_and_grad(*args)
    assert repr(a) == repr(b)
