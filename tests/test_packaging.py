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

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUTER = ("hdl", "sim", "boards", "spark_testbench")


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
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--quiet", "-w", str(out), str(src)],
        capture_output=True, text=True)
    assert build.returncode == 0, build.stdout + build.stderr
    wheels = list(out.glob("nfacep-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_wheel_installs_one_top_level_package(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if ".dist-info/" not in n}
    assert top == {"nfacep"}
    for module in ("nfacep/cli.py", "nfacep/grammar.lark", "nfacep/hdl/engine.py",
                   "nfacep/sim/testbench.py", "nfacep/boards/link/protocol.py",
                   "nfacep/spark_testbench/regress.py"):
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
        "for name in ('hdl', 'sim', 'boards', 'spark_testbench'):\n"
        "    assert importlib.util.find_spec(name) is None, name\n"
        "from nfacep.cli import main\n"
        "sys.exit(main(['--help']))\n")
    env = {**os.environ, "PYTHONPATH": str(site)}
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    for command in ("check", "explain", "match", "verilog", "sim", "vectors", "regress",
                    "build", "run"):
        assert f"    {command} " in run.stdout, f"{command} missing from --help"
