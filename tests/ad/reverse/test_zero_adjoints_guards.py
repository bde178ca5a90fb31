"""coarsen.ad.reverse.zero_adjoints: each precondition pinned (issue 48's mutation run).

The pass drops ``target += z`` where the compiler-made ``z`` holds ``0.0``.  Pinned here: the
statements after a dropped one stay, and a compound statement with nothing to drop comes back
as it was (no ``else: pass`` added: later passes, ``dot_loops`` among them, refuse a loop with
an ``else``)."""
import ast

from tests.ad.reverse.test_zero_adjoints import _run


def test_the_statements_after_a_dropped_add_are_kept():
    out = _run("z = 0.0\nacc[k] += z\nacc[k] += y\ns += y\n")
    assert "acc[k] += z" not in out, out
    assert "acc[k] += y" in out and "s += y" in out, out


def test_a_compound_statement_with_nothing_to_drop_is_unchanged():
    src = "for i in range(n):\n    acc[i] += y\nif c:\n    s += y\nwhile c:\n    s += y\n"
    assert _run(src) == ast.unparse(ast.parse(src))
    # and beside one it drops from
    src = "z = 0.0\nfor i in range(n):\n    acc[i] += z\nfor i in range(n):\n    acc[i] += y\n"
    assert _run(src) == ast.unparse(ast.parse(src.replace("    acc[i] += z\n", "    pass\n")))


def test_copied_on_write_only():
    # a compound statement with nothing dropped is the input's own node; one with a drop is a
    # copy (the input is not modified)
    import gast
    from coarsen.ad.reverse.zero_adjoints import drop_zero_accumulations
    body = gast.parse("z = 0.0\nfor i in range(n):\n    if c:\n        s += y\n"
                      "for i in range(n):\n    acc[i] += z\n").body
    out = drop_zero_accumulations(body, {"z", "s", "acc"})
    assert out[0] is body[0] and out[1] is body[1] and out[2] is not body[2]
