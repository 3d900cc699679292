"""The import graph of the installed package has no cycle, and a command loads only what it uses.

Every module of every package that ``pyproject.toml`` installs is parsed with :mod:`ast`: every
import statement counts, at the top of a module, inside a function or under ``TYPE_CHECKING``,
with relative imports resolved. ``from p import x`` depends on the module ``p.x`` when there is
one and on ``p`` (its ``__init__``) otherwise; a module's own parent packages are not counted
(Python runs them first whatever the module imports).
"""

from __future__ import annotations

import ast
import importlib.util
import itertools
import pathlib
import subprocess
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _packages() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return config["tool"]["setuptools"]["packages"]


def _modules() -> dict[str, pathlib.Path]:
    """Every module of the installed packages (as the import system finds them) and its file."""
    out = {}
    for package in _packages():
        spec = importlib.util.find_spec(package)
        assert spec is not None and spec.submodule_search_locations, package
        for folder in spec.submodule_search_locations:
            for path in sorted(pathlib.Path(folder).glob("*.py")):
                name = package if path.stem == "__init__" else f"{package}.{path.stem}"
                out[name] = path
    return out


Edge = tuple[str, str, str]  # (importer, imported, "file:line")


def import_edges(modules: dict[str, pathlib.Path]) -> list[Edge]:
    """The imports between ``modules``, each with where it is written."""
    edges = []
    for name, path in modules.items():
        package = name if path.stem == "__init__" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            where = f"{path}:{getattr(node, 'lineno', 0)}"
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    anchor = parts[: len(parts) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                for a in node.names:
                    targets.append(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base)
            edges.extend(
                (name, t, where) for t in dict.fromkeys(targets) if t in modules and t != name
            )
    return edges


def find_cycles(edges: list[Edge]) -> list[list[Edge]]:
    """One cycle (its edges, in order) for each strongly connected set of modules."""
    graph: dict[str, dict[str, str]] = {}
    for a, b, where in edges:
        graph.setdefault(a, {}).setdefault(b, where)
        graph.setdefault(b, {})
    return [_cycle_in(graph, component) for component in _components(graph)]


def _components(graph: dict[str, dict[str, str]]) -> list[set[str]]:
    """The strongly connected sets of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return components


def _cycle_in(graph: dict[str, dict[str, str]], component: set[str]) -> list[Edge]:
    """The shortest way from the component's first module back to it, inside the component."""
    start = min(component)
    came: dict[str, str] = {}  # module -> the module it was reached from
    frontier = [start]
    while start not in came:
        reached = []
        for v in frontier:
            for w in sorted(graph[v]):
                if w in component and w not in came:
                    came[w] = v
                    reached.append(w)
        frontier = reached
    path = [start]
    while True:
        path.insert(0, came[path[0]])
        if path[0] == start:
            break
    return [(a, b, graph[a][b]) for a, b in itertools.pairwise(path)]


def _render(cycle: list[Edge]) -> str:
    return "\n".join(f"  {a} -> {b}  ({where})" for a, b, where in cycle)


def test_the_package_has_no_import_cycle():
    modules = _modules()
    assert "nfacep.lang.syntax" in modules and "nfacep.hdl.engine" in modules
    cycles = find_cycles(import_edges(modules))
    assert not cycles, "import cycles:\n" + "\n\n".join(_render(c) for c in cycles)


def test_a_cycle_is_found_and_named():
    edges = [
        ("p.a", "p.b", "a.py:1"),
        ("p.b", "p.c", "b.py:2"),
        ("p.c", "p.a", "c.py:3"),
        ("p.c", "p.d", "c.py:4"),
        ("p.d", "p.e", "d.py:5"),
    ]
    (cycle,) = find_cycles(edges)
    assert cycle == [
        ("p.a", "p.b", "a.py:1"),
        ("p.b", "p.c", "b.py:2"),
        ("p.c", "p.a", "c.py:3"),
    ]
    assert find_cycles(edges[1:]) == []


def test_relative_and_function_imports_are_edges(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "x.py").write_text("def f():\n    from .. import y\n")
    (pkg / "y.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.sub.x\n"
    )
    modules = {
        "pkg": pkg / "__init__.py",
        "pkg.sub": pkg / "sub" / "__init__.py",
        "pkg.sub.x": pkg / "sub" / "x.py",
        "pkg.y": pkg / "y.py",
    }
    (cycle,) = find_cycles(import_edges(modules))
    assert [(a, b) for a, b, _ in cycle] == [("pkg.sub.x", "pkg.y"), ("pkg.y", "pkg.sub.x")]


def test_the_shared_vocabulary_is_a_leaf():
    """The modules every stage reads import nothing of nfacep (Amaranth's ``hdl/_time.py``)."""
    edges = import_edges(_modules())
    leaves = ("nfacep.limits", "nfacep.errors", "nfacep.lang.types")
    assert [e for e in edges if e[0] in leaves] == []


# --- what a command loads -------------------------------------------------------------------------

#: Heavy packages that `nfacep check` does not use: columns, tuple files, numba loops, gateware,
#: Spark.
NOT_FOR_CHECK = ("numpy", "pyarrow", "numba", "amaranth", "pyspark")
#: Modules of the package that only building or running uses (the toolchain flow).
NOT_FOR_CHECK_MODULES = ("nfacep.boards.bitstream", "nfacep.boards.flow")
#: The packages of the other commands (``verilog``'s images, ``sim``, ``vectors`` and
#: ``regress``): a command builds only its own parser, so it imports none of theirs.
OTHER_COMMANDS = ("nfacep.image", "nfacep.hdl", "nfacep.sim", "nfacep.spark_testbench")


def _loaded(tmp_path, runs: str, top: tuple[str, ...], packages: tuple[str, ...]) -> list[str]:
    """The modules of the top-level packages ``top`` and of the packages ``packages`` (each
    with its submodules) that a new Python has loaded after the statements ``runs``."""
    probe = (
        "import sys\n"
        "from nfacep.cli import main\n"
        f"{runs}"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {top!r}\n"
        f"    or any(m == p or m.startswith(p + '.') for p in {packages!r})))\n"
    )
    run = subprocess.run(
        [sys.executable, "-W", "error", "-c", probe], cwd=tmp_path, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    return ast.literal_eval(run.stdout.splitlines()[-1])


def test_check_loads_no_engine_package(tmp_path):
    """``nfacep check`` (the command line, its parser with ``--board``'s options, and the
    compiler) imports none of :data:`NOT_FOR_CHECK`, :data:`NOT_FOR_CHECK_MODULES` and
    :data:`OTHER_COMMANDS`."""
    runs = f"assert main(['check', {str(ROOT / 'queries' / 'marathon.sql')!r}]) == 0\n"
    assert _loaded(tmp_path, runs, NOT_FOR_CHECK, NOT_FOR_CHECK_MODULES + OTHER_COMMANDS) == []


#: What `nfacep match` on a small CSV file does not use: pyarrow would import pandas on its
#: first list-to-array or array-to-numpy conversion (nfacep.io.arrays does them from buffers);
#: the compiled loops (numba) pay off only on long inputs (nfacep.reference.matcher).
NOT_FOR_MATCH = ("pandas", "amaranth", "pyspark", "numba")
#: Nor the other commands' packages, the boards (``check --board``'s), or the installed
#: packages' metadata (where the other commands are found): ``match`` is the module's own.
#: Nor ``pyarrow.compute``, whose import wraps every kernel of pyarrow's in a Python function
#: (tens of milliseconds of a new process's CPU): the typed path of a CSV file calls its one
#: kernel by name (:func:`nfacep.io.arrays.index_in`), the text path imports it.
NOT_FOR_MATCH_PACKAGES = (
    *OTHER_COMMANDS,
    "nfacep.boards",
    "nfacep.links",
    "importlib.metadata",
    "pyarrow.compute",
)


def test_match_on_a_small_csv_loads_no_pandas(tmp_path):
    """``nfacep match`` on each bundled query's CSV file (integers, enums, booleans, every
    bundled type) imports none of :data:`NOT_FOR_MATCH` and :data:`NOT_FOR_MATCH_PACKAGES`,
    and writes the checked-in matches."""
    runs = (
        f"for name in {('marathon', 'fire', 'vshape', 'bruteforce')!r}:\n"
        f"    base = {str(ROOT / 'queries')!r} + '/' + name\n"
        "    argv = ['match', base + '.sql', '--input', base + '.csv', '--output', name + '.csv']\n"
        "    assert main(argv) == 0\n"
    )
    assert _loaded(tmp_path, runs, NOT_FOR_MATCH, NOT_FOR_MATCH_PACKAGES) == []
    for name in ("marathon", "fire", "vshape", "bruteforce"):
        want = ROOT / "queries" / f"{name}.matches.csv"
        assert (tmp_path / f"{name}.csv").read_text() == want.read_text(), name
