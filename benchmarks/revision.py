"""A revision of this repository for a benchmark to run or name: one definition for every script
that compares the working tree with another commit or records the commit it measured.

:func:`export` lays a commit out as a folder to put first on ``PYTHONPATH`` (or to run from):
its whole tree from ``git archive``, with the packages that ``pyproject.toml``'s
``package-dir`` maps from the repository's top-level folders (``nfacep.hdl`` from ``hdl/``,
``nfacep.sim`` from ``sim/``, …) linked into its ``nfacep/`` as an installation has them, so
that every module of ``nfacep`` a process imports, in the script's process, a subprocess or a
Spark task that inherits the environment, is that commit's and none the editable install's.
:func:`commit_of` names the checkout a script runs in.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import tarfile
import tempfile
import tomllib

__all__ = ["ROOT", "commit_of", "export"]

#: The repository this script is in.
ROOT = pathlib.Path(__file__).resolve().parents[1]


def export(rev: str, folder: str | os.PathLike, *, importable: bool = True) -> str:
    """The tree of ``rev`` extracted into ``folder`` (created if missing; returned as a string,
    for ``PYTHONPATH``); with ``importable`` (the default), laid out as the installed package
    (above). ``importable=False`` leaves the tree as Git has it (to count its files)."""
    where = pathlib.Path(folder)
    where.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True
    ).stdout
    with tempfile.TemporaryFile() as f:
        f.write(archive)
        f.seek(0)
        with tarfile.open(fileobj=f) as tar:
            tar.extractall(where, filter="data")
    if importable:
        pyproject = tomllib.loads((where / "pyproject.toml").read_text())
        dirs = pyproject.get("tool", {}).get("setuptools", {}).get("package-dir", {})
        for name, source in sorted(dirs.items()):
            place = where / name.replace(".", "/")
            if name != "nfacep" and not place.exists():
                place.symlink_to(where / source, target_is_directory=True)
    return str(where)


def commit_of() -> str | None:
    """The commit of the checkout this script is in, abbreviated, with ``+`` when its files
    outside ``benchmarks/`` differ from it (the tree measured is not that commit's); None
    outside a Git checkout."""
    git = ["git", "-C", str(ROOT)]
    try:
        head = subprocess.run(
            [*git, "rev-parse", "--short=7", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        changed = subprocess.run(
            [*git, "status", "--porcelain", "--untracked-files=no", "--", ".", ":!benchmarks"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+" if changed else "")
