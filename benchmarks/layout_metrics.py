#!/usr/bin/env python3
"""The layout's figures of issue 25's "Measure", for a revision or the working tree.

- *lines of non-test code*: the lines of the ``.py`` files outside ``tests/``: the installed
  packages' (``pyproject.toml``'s ``packages``), and ``tools/`` and ``benchmarks/`` apart;
- *functions over 80 lines*: of the packages and ``tools/`` (what ``tests/core/test_packaging.py``
  holds to 80; tests and benchmarks are not), each named;
- *import cycles*: among the packages' modules, imports inside functions and under
  ``TYPE_CHECKING`` included (``tests/core/test_imports.py``'s graph), each cycle named;
- *duplicate pairs outside tests*: the pairs the ``duplicates`` tool lists in the tree
  without ``tests/`` (six or more shared lines, its default);
- *files over 600 lines*: the packages' modules over 600 lines (``tests/core/test_packaging.py``'s
  limit), and ``tools/`` and ``benchmarks/`` files apart;
- *start-up*: ``nfacep check`` and ``nfacep match`` on a small file
  (``benchmarks/startup.py``: CPU and wall medians of 5 runs, bytecode cached), for the
  working tree only (a revision's would need it installed).

``--rev REV`` measures a revision (exported with ``git archive``) instead of the working tree.

    python benchmarks/layout_metrics.py
    python benchmarks/layout_metrics.py --rev 56f5b68^
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import pathlib
import shutil
import subprocess
import sys
import tempfile
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 600


def _import_graph():
    """``tests/core/test_imports.py`` (its graph and cycle finder), from this checkout."""
    spec = importlib.util.spec_from_file_location(
        "_imports", ROOT / "tests" / "core" / "test_imports.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def packages(tree: pathlib.Path) -> dict[str, pathlib.Path]:
    """Each installed package of ``tree``'s ``pyproject.toml`` and its folder."""
    config = tomllib.loads((tree / "pyproject.toml").read_text(encoding="utf-8"))
    setup = config["tool"]["setuptools"]
    folders = setup.get("package-dir", {})
    return {p: tree / folders.get(p, p.replace(".", "/")) for p in setup["packages"]}


def modules(tree: pathlib.Path) -> dict[str, pathlib.Path]:
    """Every module of the packages by its import name."""
    out = {}
    for package, folder in packages(tree).items():
        for path in sorted(folder.glob("*.py")):
            out[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    return out


def line_count(path: pathlib.Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def long_functions(paths, tree: pathlib.Path) -> list[str]:
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    where = path.relative_to(tree)
                    found.append(f"{where}:{node.lineno} {node.name} ({lines})")
    return found


def tracked(tree: pathlib.Path) -> list[pathlib.Path]:
    """The files of ``tree``: those git tracks or would (a checkout), else all of them."""
    if (tree / ".git").exists():
        listed = subprocess.run(
            ["git", "-C", str(tree), "ls-files", "-co", "--exclude-standard"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
        return [tree / name for name in listed if (tree / name).is_file()]
    return [p for p in tree.rglob("*") if p.is_file()]


def duplicate_pairs(tree: pathlib.Path, seconds: int) -> str:
    """The ``duplicates`` tool's first line (its count of pairs) for ``tree``'s files outside
    ``tests/``."""
    with tempfile.TemporaryDirectory() as copy:
        for path in tracked(tree):
            rel = path.relative_to(tree)
            if rel.parts[0] != "tests":
                (pathlib.Path(copy) / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, pathlib.Path(copy) / rel)
        run = subprocess.run(
            ["duplicates", "--repo", copy, "--seconds", str(seconds)],
            capture_output=True,
            text=True,
        )
    lines = run.stdout.splitlines()
    extra = [ln for ln in lines if ln.startswith(("incomplete:", "left out:"))]
    return "; ".join([lines[0] if lines else run.stderr.strip(), *extra])


def startup() -> dict[str, tuple[float, float]]:
    """CPU and wall medians of check and match (``benchmarks/startup.py``), bytecode cached."""
    import statistics

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import startup as s

    out = {}
    with tempfile.TemporaryDirectory() as folder, tempfile.TemporaryDirectory() as pycache:
        env = dict(s.environments(pycache))["cached"]
        for name, args, _goal in s.COMMANDS[:2]:
            argv = s._nfacep() + [a.format(out=folder) for a in args]
            s.timed(argv, env)
            runs = [s.timed(argv, env) for _ in range(5)]
            out[name] = (
                statistics.median(r[0] for r in runs),
                statistics.median(r[1] for r in runs),
            )
    return out


def measure(tree: pathlib.Path, seconds: int, with_startup: bool) -> None:
    mods = modules(tree)
    package_files = sorted(set(mods.values()))
    tools = sorted((tree / "tools").rglob("*.py"))
    benchmarks = sorted((tree / "benchmarks").glob("*.py"))
    code = sum(map(line_count, package_files))
    print(f"lines of non-test code: {code + sum(map(line_count, tools + benchmarks)):,}")
    print(
        f"  packages {code:,} in {len(package_files)} modules; tools/ "
        f"{sum(map(line_count, tools)):,}; benchmarks/ {sum(map(line_count, benchmarks)):,}"
    )
    longs = long_functions(package_files + tools, tree)
    print(f"functions over {MAX_FUNCTION_LINES} lines (packages, tools/): {len(longs)}")
    for f in longs:
        print(f"  {f}")
    graph = _import_graph()
    cycles = graph.find_cycles(graph.import_edges(mods))
    print(f"import cycles: {len(cycles)}")
    for cycle in cycles:
        print("  " + " -> ".join([cycle[0][0], *(b for _, b, _ in cycle)]))
    print(f"duplicates outside tests/: {duplicate_pairs(tree, seconds)}")
    over = {p: line_count(p) for p in package_files if line_count(p) > MAX_MODULE_LINES}
    others = {p: line_count(p) for p in tools + benchmarks if line_count(p) > MAX_MODULE_LINES}
    print(
        f"files over {MAX_MODULE_LINES} lines: {len(over)} of the packages, "
        f"{len(others)} in tools/ and benchmarks/"
    )
    for p, n in sorted({**over, **others}.items(), key=lambda kv: -kv[1]):
        print(f"  {p.relative_to(tree)} ({n:,})")
    if with_startup:
        for name, (cpu, wall) in startup().items():
            print(f"start-up, {name}: CPU {cpu:.3f} s, wall {wall:.3f} s (medians of 5)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", help="a git revision (default: the working tree)")
    ap.add_argument("--seconds", type=int, default=120, help="for the duplicates tool")
    ap.add_argument("--no-startup", action="store_true", help="leave the start-up out")
    args = ap.parse_args()
    if args.rev is None:
        print("working tree")
        measure(ROOT, args.seconds, not args.no_startup)
        return
    from revision import export  # (this folder is on sys.path)

    with tempfile.TemporaryDirectory() as folder:
        export(args.rev, folder, importable=False)
        print(f"revision {args.rev}")
        measure(pathlib.Path(folder), args.seconds, False)


if __name__ == "__main__":
    main()
