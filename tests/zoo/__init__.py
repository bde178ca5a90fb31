"""A zoo of plain-Python/NumPy functions in coarsen's input language, with fixed inputs.

Every module defines ``CASES``, a list of ``(fn, args_factory, wrt)``:

* ``fn`` is a top-level function (or a ``numba.njit`` dispatcher) returning a float scalar;
* ``args_factory()`` builds fresh arguments deterministically (seeded RNGs, small sizes), so a
  test can call it again to check that the caller's arrays were not modified;
* ``wrt`` is what is passed to ``coarsen.differentiate(fn, wrt)``: ``None`` (all float
  parameters, a tuple comes back), a name or a position (a single value comes back), or a
  tuple/list of names or positions (a tuple comes back).

Inputs are chosen well away from branch thresholds, kinks and trip-count changes: the oracle
(``tests/oracle.py``) refuses points where it cannot converge, and the tests check that too.

``all_zoo_cases()`` gathers the zoo (scalar, loops, arrays, hard, reach modules); ``realistic.CASES`` holds the
realistic programs and ``unsupported.FENCE`` the constructs outside the language.
"""


def case_ids(cases):
    """Readable, unique pytest ids: ``module.function`` plus ``#k`` for repeated functions."""
    ids, seen = [], {}
    for fn, _, _ in cases:
        f = getattr(fn, "py_func", fn)
        base = f"{f.__module__.rsplit('.', 1)[-1]}.{f.__name__}"
        k = seen.get(base, 0)
        seen[base] = k + 1
        ids.append(base if k == 0 else f"{base}#{k}")
    return ids


def all_zoo_cases():
    from tests.zoo import arrays, hard, loops, reach, scalar
    return (list(scalar.CASES) + list(loops.CASES) + list(arrays.CASES) + list(hard.CASES)
            + list(reach.CASES))
