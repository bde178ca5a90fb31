"""The README's table of supported NumPy functions is the one ``coarsen.docs`` generates from the
registry and the frontend's sugar: a function added, removed or given new arguments makes this
test fail until ``python -m coarsen.docs numpy-table`` is run."""
import pathlib

from coarsen import docs
from coarsen.frontend.source import NUMPY_FUNCS

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def test_readme_table_is_current():
    text = README.read_text()
    assert docs.with_table(text) == text, \
        "README.md's table of NumPy functions is stale: run python -m coarsen.docs numpy-table"


def test_table_lists_every_numpy_spelling():
    table = docs.numpy_table()
    for name in NUMPY_FUNCS:
        if docs.understood_parameters(NUMPY_FUNCS[name], "np." + name) is not None:
            assert f"`np.{name}`" in table, name


def test_with_table_replaces_only_between_markers():
    text = f"before\n{docs.BEGIN}\nold\n{docs.END}\nafter\n"
    new = docs.with_table(text)
    assert new.startswith(f"before\n{docs.BEGIN}\n| family |")
    assert new.endswith(f"{docs.END}\nafter\n")
    assert "old" not in new
