"""What installing nfacep puts into a user's environment, and how its packages depend on each
other.

The repository keeps the folders of the design (``nfacep/``, ``hdl/``, ``sim/``, ``boards/``,
``spark_testbench/``); a wheel maps them under the one import name ``nfacep`` (``pyproject.toml``'s
``package-dir``), so that installing nfacep adds no generic top-level names such as ``sim``.
"""

from __future__ import annotations

import ast
import os
import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest

# under pytest-xdist (--dist loadgroup): the wheel is built once, by one worker
pytestmark = pytest.mark.xdist_group("wheel")

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUTER = ("hdl", "sim", "boards", "links", "spark_testbench")


def _tracked(root: pathlib.Path) -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True)
    if out.returncode != 0:
        pytest.fail(f"git ls-files failed: {out.stderr}")
    return out.stdout.split()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> pathlib.Path:
    """A wheel built from a copy of the tracked files (the build leaves nothing in the tree)."""
    src = tmp_path_factory.mktemp("src")
    for name in _tracked(ROOT):
        if (ROOT / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    out = tmp_path_factory.mktemp("wheel")
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            "-w",
            str(out),
            str(src),
        ],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    wheels = list(out.glob("nfacep-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_wheel_installs_one_top_level_package(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if ".dist-info/" not in n}
    assert top == {"nfacep"}
    for module in (
        "nfacep/cli.py",
        "nfacep/lang/grammar.lark",
        "nfacep/hdl/engine.py",
        "nfacep/sim/testbench.py",
        "nfacep/sim/templates/harness.v",
        "nfacep/sim/templates/native_main.cpp",
        "nfacep/links/uart/protocol.py",
        "nfacep/spark_testbench/regress.py",
    ):
        assert module in names, f"{module} is not in the wheel"
    assert not any(n.startswith(("nfacep/tests/", "nfacep/benchmarks/")) for n in names)


def test_wheel_runs_without_the_repository(wheel, tmp_path):
    """Unpacked on its own (outside the repository), the wheel's ``nfacep`` finds every
    subcommand and its gateware, and the name ``sim`` stays free."""
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    code = (
        "import importlib.util, sys\n"
        "import nfacep, nfacep.hdl.engine, nfacep.sim.runner\n"
        f"assert nfacep.__file__.startswith({str(site)!r}), nfacep.__file__\n"
        f"assert nfacep.hdl.engine.__file__.startswith({str(site)!r})\n"
        "from nfacep.sim.template import TEMPLATES\n"
        f"assert str(TEMPLATES).startswith({str(site)!r}), TEMPLATES\n"
        "assert (TEMPLATES / 'harness.v').is_file() and (TEMPLATES / 'native_main.cpp').is_file()\n"
        "for name in ('hdl', 'sim', 'boards', 'links', 'spark_testbench'):\n"
        "    assert importlib.util.find_spec(name) is None, name\n"
        "from nfacep.cli import main\n"
        "sys.exit(main(['--help']))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout + run.stderr
    for command in (
        "check",
        "explain",
        "match",
        "verilog",
        "sim",
        "vectors",
        "regress",
        "build",
        "run",
        "serve",
        "load",
    ):
        assert f"    {command} " in run.stdout, f"{command} missing from --help"


def test_installed_wheel_keeps_the_grammar_tables(wheel, tmp_path):
    """From the installed wheel (outside the repository), the first ``nfacep check`` builds the
    grammar's tables and keeps them beside the installed package's bytecode; the next one
    loads them instead of building them again (the start-up of issue 25)."""
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    code = (
        "import sys\n"
        "from nfacep.cli import main\n"
        f"assert main(['check', {str(ROOT / 'queries' / 'marathon.sql')!r}]) == 0\n"
        "from nfacep.lang import syntax\n"
        "print(syntax.__file__, syntax._parser.source_path)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTHONPYCACHEPREFIX", None)
    runs = [
        subprocess.run(
            [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
        )
        for _ in range(2)
    ]
    assert all(r.returncode == 0 for r in runs), [r.stderr for r in runs]
    (first, built), (second, loaded) = (r.stdout.splitlines()[-1].split() for r in runs)
    assert first == second and first.startswith(str(site))
    assert built != "<deserialized>" and loaded == "<deserialized>"
    assert len(list((site / "nfacep" / "lang" / "__pycache__").glob("grammar.lalr.*"))) == 1


# --- how the packages depend on each other ------------------------------------------------------

#: The repository folder of each subpackage of nfacep (pyproject.toml's package-dir).
FOLDERS = {
    "nfacep": "nfacep",
    "nfacep.hdl": "hdl",
    "nfacep.sim": "sim",
    "nfacep.boards": "boards",
    "nfacep.links": "links",
    "nfacep.spark_testbench": "spark_testbench",
}


def _module_name(path: pathlib.Path) -> str | None:
    rel = path.relative_to(ROOT).with_suffix("")
    for package, folder in sorted(FOLDERS.items(), key=lambda kv: -len(kv[1])):
        parts = pathlib.PurePosixPath(folder).parts
        if rel.parts[: len(parts)] == parts:
            rest = rel.parts[len(parts) :]
            name = ".".join((package, *rest))
            return name.removesuffix(".__init__")
    return None


def _imports(path: pathlib.Path) -> list[tuple[str, list[str], int]]:
    """``(module, names, line)`` of every import statement in the file, anywhere in it, with
    relative imports resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    module = _module_name(path) or ""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((a.name, [], node.lineno) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            out.append((base, [a.name for a in node.names], node.lineno))
    return out


def _python_files(*folders: str) -> list[pathlib.Path]:
    return sorted(p for f in folders for p in (ROOT / f).rglob("*.py"))


def test_the_core_imports_no_outer_package():
    """nfacep/ (language, NFA, reference, command line) is the lowest layer: no import of the
    gateware, the simulation, the boards or the Spark testbench, not even inside a function.
    The command line finds their subcommands through entry points."""
    outer = tuple(f"nfacep.{p}" for p in OUTER) + OUTER
    found = []
    for path in _python_files("nfacep"):
        for module, names, line in _imports(path):
            targets = [module] + [f"{module}.{n}" for n in names]
            if any(t == o or t.startswith(o + ".") for t in targets for o in outer):
                found.append(f"{path.relative_to(ROOT)}:{line}: {module} {names}")
    assert found == []


def _private_uses(path: pathlib.Path) -> list[tuple[str, str, int]]:
    """``(module, name, line)`` of every private name (``_x``, not ``__x__``) of an nfacep
    module that the file imports or reads as ``module._x``."""

    def private(name: str) -> bool:
        return name.startswith("_") and not name.endswith("__")

    bound: dict[str, str] = {}  # local name -> the nfacep module it is
    out = []
    for module, names, line in _imports(path):
        if module.split(".")[0] != "nfacep":
            continue
        out.extend((module, n, line) for n in names if private(n))
        out.extend((module, part, line) for part in module.split(".") if private(part))
        for n in names:
            bound[n] = f"{module}.{n}"
        if not names:
            bound["nfacep"] = "nfacep"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and private(node.attr):
            chain, value = [], node.value
            while isinstance(value, ast.Attribute):
                chain.insert(0, value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in bound:
                out.append((".".join([bound[value.id], *chain]), node.attr, node.lineno))
    return out


@pytest.mark.slow
def test_no_private_names_across_packages():
    """A test, a benchmark or a package uses only the public names of another package: none
    imports, or reads as ``module._name``, a private name of a module outside its package."""
    found = []
    for path in _python_files("nfacep", *OUTER, "tests", "benchmarks", "tools"):
        own = _module_name(path) or "tests"
        own_package = own.rpartition(".")[0]
        for module, name, line in _private_uses(path):
            if own_package and (module == own_package or module.startswith(own_package + ".")):
                continue
            found.append(f"{path.relative_to(ROOT)}:{line}: {module}.{name}")
    assert found == []


# --- how long a function is ---------------------------------------------------------------------

#: The most lines a function or method of the packages and tools may take, from its ``def`` to its
#: last line (decorators not counted; a nested function counts on its own too): a longer one is
#: split into named helpers. Tests and benchmarks are not held to it.
MAX_FUNCTION_LINES = 80


def long_functions(paths: list[pathlib.Path], limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """``file:line: name is n lines`` of every function in ``paths`` over ``limit`` lines."""
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
                    found.append(f"{where}:{node.lineno}: {node.name} is {lines} lines")
    return found


def test_no_function_is_over_80_lines():
    found = long_functions(_python_files("nfacep", *OUTER, "tools"))
    assert found == [], f"over {MAX_FUNCTION_LINES} lines (split into named helpers)"


def test_a_long_function_is_found_and_named(tmp_path):
    def function(head: str, lines: int, indent: str = "") -> str:
        body = "".join(f"{indent}    x{i} = {i}\n" for i in range(lines - 1))
        return f"{indent}{head}\n{body}"

    path = tmp_path / "m.py"
    path.write_text(
        function("def fits():", 80)  # lines 1-80
        + "\n\nclass C:\n    @staticmethod\n"  # the decorator on line 84 is not counted
        + function("async def over():", 81, "    ")  # lines 85-165
    )
    assert long_functions([path]) == [f"{path}:85: over is 81 lines"]


# --- how long a module is -----------------------------------------------------------------------

#: The most lines a module of the packages may hold: a longer one is split by job into modules of
#: its package (as ``nfacep/lang/syntax.py``, ``check.py`` and ``nfacep/reference/matcher.py``
#: were). Tests, benchmarks and tools are not held to it.
MAX_MODULE_LINES = 600

#: The modules over :data:`MAX_MODULE_LINES` when the limit came, each to be split by its job: the
#: list only shrinks (a module split below the limit must leave it, and no other may join). Every
#: one has been split, so it is empty: a module that grows past the limit is split, not listed.
LONG_MODULES: set[str] = set()


def long_modules(paths: list[pathlib.Path], limit: int = MAX_MODULE_LINES) -> dict[str, int]:
    """The lines of every module in ``paths`` over ``limit`` lines, by its path (relative to
    the repository when inside it)."""
    found = {}
    for path in paths:
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > limit:
            where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
            found[where.as_posix()] = lines
    return found


def test_no_module_is_over_600_lines():
    found = long_modules(_python_files("nfacep", *OUTER))
    new = {path: n for path, n in found.items() if path not in LONG_MODULES}
    assert new == {}, f"over {MAX_MODULE_LINES} lines (split the module by job)"
    shrunk = sorted(LONG_MODULES - set(found))
    assert shrunk == [], f"no longer over {MAX_MODULE_LINES} lines: remove from LONG_MODULES"


def test_a_long_module_is_found_and_named(tmp_path):
    (tmp_path / "fits.py").write_text("x = 1\n" * 600)
    (tmp_path / "over.py").write_text("x = 1\n" * 601)
    paths = sorted(tmp_path.glob("*.py"))
    assert long_modules(paths) == {(tmp_path / "over.py").as_posix(): 601}
