"""The library's structure: no import cycle, the layer order kept, no file over 800 lines, no
function over 150 lines, every package installed.

Every module of the three source folders is read with ``ast`` (nothing is imported), under
the name it is installed as (``pyproject.toml``'s ``package-dir``: ``symbolic/`` is
``coarsen.symbolic``, ``lowering/`` is ``coarsen.lowering``).  An import anywhere in a module
counts, inside a function too: a function-local import still runs, and only hides a cycle
from the reader.  ``from P import N`` is an edge to the module ``P.N`` where that is one, else
to ``P`` (relative imports resolved against the importing module's package); an import of a
module outside the three folders is no edge.  A strongly connected component of two or more
modules is a cycle, reported as one path through it with the file and line of each import.

The checks are tested on small synthetic inputs first (a graph with and without a cycle,
relative and function-local imports, an over-long function), so that a check that can
never fail is caught.
"""
from __future__ import annotations

import ast
import pathlib
import textwrap
from dataclasses import dataclass

try:
    import tomllib
except ModuleNotFoundError:       # Python 3.10: pytest's own dependency
    import tomli as tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 150

#: the layers of the library, bottom first (ARCHITECTURE.md, "Dependencies between the
#: folders"): a module imports only modules of its own folder or of lower layers, and the
#: folders of one layer do not import each other
LAYERS = (
    ("coarsen.errors", "coarsen.examples"),
    ("coarsen.codegen",),
    ("coarsen.ir",),
    ("coarsen.frontend", "coarsen.symbolic", "coarsen.lowering"),
    ("coarsen.analysis",),
    ("coarsen.ad",),
    ("coarsen.transforms",),
    ("coarsen.bridge",),                # what the framework bridges share
    ("coarsen.torch", "coarsen.jax", "coarsen.scipy"),     # the bridges (imported on use)
    ("coarsen",),                       # the package: the public API
    ("coarsen.__main__",),
)


@dataclass(frozen=True)
class Module:
    name: str                   # the installed dotted name
    path: pathlib.Path
    is_package: bool            # an __init__.py


@dataclass(frozen=True)
class Edge:
    target: str
    lineno: int


def package_dirs(root=ROOT):
    """{installed package name: its folder} from pyproject.toml's ``package-dir``."""
    with open(root / "pyproject.toml", "rb") as fh:
        setup = tomllib.load(fh)["tool"]["setuptools"]
    return {name: root / folder for name, folder in setup["package-dir"].items()}


def modules(dirs):
    """Every ``.py`` file under the folders of ``dirs`` as a ``Module``, by installed name; a
    folder that is itself another entry of ``dirs`` (nested) is read under that entry only."""
    out = {}
    owned = {folder.resolve() for folder in dirs.values()}
    for name, folder in dirs.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if any(folder.joinpath(*parts[:k]).resolve() in owned for k in range(1, len(parts))):
                continue
            is_package = parts[-1] == "__init__"
            dotted = ".".join((name,) + (parts[:-1] if is_package else parts))
            out[dotted] = Module(dotted, path, is_package)
    return out


def imports(tree, module, known):
    """The ``Edge``s of every import in ``tree`` (at any depth) to a module of ``known``."""
    package = module.name if module.is_package else module.name.rpartition(".")[0]
    edges = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module
            subs = [f"{prefix}.{a.name}" for a in node.names if f"{prefix}.{a.name}" in known]
            targets = subs + ([prefix] if len(subs) < len(node.names) else [])
        else:
            continue
        edges += [Edge(t, node.lineno) for t in targets if t in known and t != module.name]
    return edges


def import_graph(mods):
    """{module: [Edge]} for the modules ``mods`` (from ``modules``)."""
    return {name: imports(ast.parse(m.path.read_text(encoding="utf-8")), m, mods)
            for name, m in mods.items()}


def strongly_connected(graph):
    """The strongly connected components of two or more nodes of ``{node: [Edge]}``
    (Tarjan's algorithm, iterative), each sorted, in a deterministic order."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted({e.target for e in graph.get(start, ())})))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, succ = work[-1]
            advanced = False
            for nxt in succ:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted({e.target for e in graph.get(nxt, ())}))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out)


def cycle_path(graph, component):
    """One cycle through the component: ``[(module, Edge)]``, each edge to the next module,
    the last back to the first (a shortest one from the component's first module)."""
    members = set(component)
    first = component[0]
    came = {first: None}
    queue = [first]
    while queue:
        node = queue.pop(0)
        for edge in sorted(graph[node], key=lambda e: (e.target, e.lineno)):
            if edge.target == first:
                path = [(node, edge)]
                while came[path[0][0]] is not None:
                    path.insert(0, came[path[0][0]])
                return path
            if edge.target in members and edge.target not in came:
                came[edge.target] = (node, edge)
                queue.append(edge.target)
    raise AssertionError(f"no cycle through {component}")  # pragma: no cover


def describe_cycles(graph, mods, root=ROOT):
    """A readable report of every cycle, or "" where there is none (paths relative to
    ``root``)."""
    lines = []
    for comp in strongly_connected(graph):
        lines.append(f"import cycle among {len(comp)} modules: {', '.join(comp)}")
        for node, edge in cycle_path(graph, comp):
            where = mods[node].path.relative_to(root)
            lines.append(f"    {node} -> {edge.target}   ({where}:{edge.lineno})")
    return "\n".join(lines)


def layer_of(module, layers=LAYERS):
    """``(rank, folder)``: the layer of ``module``, by the longest folder (or module) of
    ``layers`` that contains it."""
    best = None
    for rank, folders in enumerate(layers):
        for folder in folders:
            if module == folder or module.startswith(folder + "."):
                if best is None or len(folder) > len(best[1]):
                    best = (rank, folder)
    if best is None:
        raise KeyError(f"{module} is in no layer of LAYERS")
    return best


def layer_violations(graph, layers=LAYERS):
    """``[(module, Edge)]``: imports of a higher layer, or of another folder of the same
    layer."""
    out = []
    for module in sorted(graph):
        rank, folder = layer_of(module, layers)
        for edge in graph[module]:
            t_rank, t_folder = layer_of(edge.target, layers)
            if t_rank > rank or (t_rank == rank and t_folder != folder):
                out.append((module, edge))
    return out


def long_functions(tree, limit=MAX_FUNCTION_LINES):
    """``[(name, first line, lines)]`` of the functions and methods (at any depth) longer than
    ``limit`` lines, from the ``def`` line to the last line of the body."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            n = node.end_lineno - node.lineno + 1
            if n > limit:
                out.append((node.name, node.lineno, n))
    return sorted(out, key=lambda t: t[1])


# -- the checks, on synthetic inputs ------------------------------------------------------------

def _fake_tree(tmp_path, files):
    """A pyproject.toml with package-dir ``pkg`` -> ``src``, ``pkg.low`` -> ``low``, and the
    given ``{relative path: source}`` files."""
    (tmp_path / "pyproject.toml").write_text(
        '[tool.setuptools]\npackage-dir = {"pkg" = "src", "pkg.low" = "low"}\n')
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    mods = modules(package_dirs(tmp_path))
    return mods, import_graph(mods)


def test_finder_on_a_graph_without_a_cycle(tmp_path):
    mods, graph = _fake_tree(tmp_path, {
        "src/__init__.py": "",
        "src/a.py": "from . import b\nfrom .sub import c\n",
        "src/b.py": "import os\nfrom pkg.low import d\n",
        "src/sub/__init__.py": "",
        "src/sub/c.py": "from ..b import name_in_b\n",
        "low/__init__.py": "",
        "low/d.py": "import numpy\n",
    })
    assert sorted(mods) == ["pkg", "pkg.a", "pkg.b", "pkg.low", "pkg.low.d", "pkg.sub",
                            "pkg.sub.c"]
    assert {e.target for e in graph["pkg.a"]} == {"pkg.b", "pkg.sub.c"}
    assert {e.target for e in graph["pkg.sub.c"]} == {"pkg.b"}       # relative, two levels
    assert {e.target for e in graph["pkg.b"]} == {"pkg.low.d"}        # os: outside, no edge
    assert strongly_connected(graph) == []
    assert describe_cycles(graph, mods) == ""


def test_finder_reports_a_cycle_through_a_function_local_import(tmp_path):
    mods, graph = _fake_tree(tmp_path, {
        "src/__init__.py": "",
        "src/a.py": "from . import b\n",
        "src/b.py": "from .c import f\n",
        "src/c.py": "def f():\n    from .a import g\n    return g\n",
        "src/d.py": "from . import a\n",            # reaches the cycle, is not in it
        "low/__init__.py": "",
        "low/e.py": "from . import f\n",
        "low/f.py": "import pkg.low.e\n",           # a second cycle, absolute imports
    })
    assert strongly_connected(graph) == [["pkg.a", "pkg.b", "pkg.c"], ["pkg.low.e", "pkg.low.f"]]
    path = cycle_path(graph, ["pkg.a", "pkg.b", "pkg.c"])
    assert [(n, e.target, e.lineno) for n, e in path] == [
        ("pkg.a", "pkg.b", 1), ("pkg.b", "pkg.c", 1), ("pkg.c", "pkg.a", 2)]
    report = describe_cycles(graph, mods, tmp_path).splitlines()
    assert report[0] == "import cycle among 3 modules: pkg.a, pkg.b, pkg.c"
    assert report[3] == "    pkg.c -> pkg.a   (src/c.py:2)"
    assert not any("pkg.d" in line for line in report)


def test_finder_on_a_self_import_and_a_long_chain():
    # a module importing itself is no cycle; a long chain closed at its end is one component
    graph = {"m": [Edge("m", 1)]}
    n = 2000                                    # deeper than Python's recursion limit
    for k in range(n):
        graph[f"c{k}"] = [Edge(f"c{k + 1}", 1)]
    graph[f"c{n}"] = [Edge("c0", 1)]
    (comp,) = strongly_connected(graph)
    assert len(comp) == n + 1
    assert len(cycle_path(graph, comp)) == n + 1


def test_layer_check_on_a_graph():
    layers = (("p.low",), ("p.mid", "p.side"), ("p",))
    graph = {"p.low.a": [Edge("p.low.b", 1)],               # within a folder: allowed
             "p.mid.a": [Edge("p.low.a", 2), Edge("p.side.b", 3)],   # a peer: refused
             "p.side.b": [Edge("p.low.b", 4)],
             "p.api": [Edge("p.mid.a", 5)],
             "p.low.b": [Edge("p.mid.a", 6)]}                   # upward: refused
    assert [(m, e.target, e.lineno) for m, e in layer_violations(graph, layers)] == [
        ("p.low.b", "p.mid.a", 6), ("p.mid.a", "p.side.b", 3)]
    assert layer_of("p.api", layers) == (2, "p")
    with pytest.raises(KeyError):
        layer_of("q.x", layers)


def test_long_function_check_counts_nested_functions_and_methods():
    body = [f"x{k} = {k}" for k in range(150)]          # with the def line: 151 lines
    source = "\n".join(["def short():", "    return 1", "def long():"]
                       + ["    " + line for line in body]
                       + ["class C:", "    def method(self):"]
                       + ["        " + line for line in body])
    tree = ast.parse(source)
    assert [(name, n) for name, _, n in long_functions(tree)] == [("long", 151), ("method", 151)]
    assert long_functions(tree, limit=151) == []


# -- the checks, on the library -----------------------------------------------------------------

@pytest.fixture(scope="module")
def library():
    mods = modules(package_dirs())
    return mods, import_graph(mods)


def test_the_library_is_read_whole(library):
    mods, graph = library
    for name in ("coarsen", "coarsen.codegen.build", "coarsen.ir.primitives.core",
                 "coarsen.symbolic", "coarsen.lowering.cache", "coarsen.ad.reverse.driver"):
        assert name in mods
    # function-local imports are edges (a cycle hidden in a function is still a cycle)
    assert sum(len(edges) for edges in graph.values()) > 500


def test_no_import_cycle(library):
    mods, graph = library
    report = describe_cycles(graph, mods)
    assert not report, "\n" + report


def test_layers_are_strict(library):
    mods, graph = library
    bad = [f"{m} -> {e.target}   ({mods[m].path.relative_to(ROOT)}:{e.lineno})"
           for m, e in layer_violations(graph)]
    assert not bad, "imports against the layer order:\n" + "\n".join(bad)


def test_every_package_is_installed(library):
    """Every folder with an ``__init__.py`` is in pyproject.toml's ``packages`` (else a
    non-editable install leaves it out)."""
    mods, _ = library
    with open(ROOT / "pyproject.toml", "rb") as fh:
        listed = set(tomllib.load(fh)["tool"]["setuptools"]["packages"])
    missing = sorted(name for name, m in mods.items() if m.is_package and name not in listed)
    assert not missing, f"packages missing from pyproject.toml: {missing}"


def test_no_file_over_800_lines(library):
    mods, _ = library
    over = sorted((len(m.path.read_text(encoding="utf-8").splitlines()), str(m.path.relative_to(ROOT)))
                  for m in mods.values())
    over = [(path, n) for n, path in over if n > MAX_FILE_LINES]
    assert not over, f"files over {MAX_FILE_LINES} lines: {over}"


def test_no_function_over_150_lines(library):
    mods, _ = library
    over = []
    for m in mods.values():
        for name, line, n in long_functions(ast.parse(m.path.read_text(encoding="utf-8"))):
            over.append(f"{m.path.relative_to(ROOT)}:{line} {name} ({n} lines)")
    assert not over, f"functions over {MAX_FUNCTION_LINES} lines: {sorted(over)}"
