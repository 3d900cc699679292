"""The native harness: the batch harness compiled by Verilator with a small C++ main, no Python
while it runs (``nfacep sim --mode native``).

The same Verilog harness as the batch mode (:mod:`nfacep.sim.harness`, built with
``NFACEP_EXTERNAL_CLOCK`` so that ``clk`` is an input) is driven by a C++ loop that does what
the cocotb batch testbench (:mod:`nfacep.sim.batch_testbench`) does: reset, then per batch of
at most ``depth`` tuples write the batch file, pulse ``load``, set ``count``, pulse ``go`` and
clock until ``done`` (or the timeout); at the end it writes the harness's statistics. The
main reads the tuples file a batch at a time and the harness writes each record as the engine
emits it, so neither is held whole. With a model to compare with, Python then checks every
record with the same :class:`~nfacep.sim.records.InOrderChecker`; it leaves the same
``records.hex``, ``stats.json`` and ``failure.json`` as the cocotb testbenches, so the runner
reads all modes alike. Gaps and stalls are the harness's, so a native run and a batch run
with the same seed and depth give the same records cycle for cycle.

The model is built once per distinct engine, harness, main and optimisation level, cached
like the others (:func:`nfacep.sim.build.build_cache`). It is compiled with
:data:`NATIVE_OPT` (the model's speed is the point here), overridden by
``NFACEP_VERILATOR_OPT``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from nfacep.wire import RecordFormat

from .build import SimulationError, find_verilator, tail, verilated_executable
from .harness import HARNESS_TOP, counter_ports, drain_cycles, switch_plusargs
from .records import RECORDS_HEX, InOrderChecker, check_hex, read_records
from .template import fill

__all__ = ["NATIVE_OPT", "build_native", "main_cpp", "run_native"]

#: C++ optimisation of native models (the cocotb models use -O0: Python bounds their speed).
NATIVE_OPT = "-O2"
EXECUTABLE = "nfacep_native"
RESET_CYCLES = 4


def _opt() -> str:
    return os.environ.get("NFACEP_VERILATOR_OPT", NATIVE_OPT)


def main_cpp(sidecar: dict) -> str:
    """The C++ main around the Verilated harness of the engine ``sidecar`` describes
    (``templates/native_main.cpp``)."""
    width = sidecar["tuple"]["width"]
    if width > 64:  # a VlWide: 32-bit words, the least significant first
        store = "                mem[k][w] = v;\n"
    else:  # CData … QData
        store = (
            "                if (w == 0) mem[k] = v;\n"
            "                else mem[k] |= (uint64_t)v << 32;\n"
        )
    counter_lines = "".join(
        f'    out << ",\\"{name}\\":" << (unsigned long long)top->{name};\n'
        for name in counter_ports(sidecar)
    )
    return fill(
        "native_main.cpp",
        harness_top=HARNESS_TOP,
        reset_cycles=RESET_CYCLES,
        words=(width + 31) // 32,
        store=store,
        drain=drain_cycles(sidecar),
        counter_lines=counter_lines,
    )


def build_native(engine: Path, sidecar: dict, harness: str, cache: Path, waves: bool) -> Path:
    """Build the native model of ``engine`` (with ``harness``, the batch harness's Verilog)
    once; returns the executable. Later calls with the same inputs reuse it."""
    if find_verilator(cache) is None:
        raise SimulationError("the native mode needs Verilator (--simulator verilator)")
    files = {
        "engine.v": engine.read_bytes(),
        "harness.v": harness.encode("ascii"),
        "main.cpp": main_cpp(sidecar).encode("ascii"),
    }
    flags = ("--trace",) if waves else ()
    return verilated_executable(
        cache,
        f"native{'-waves' if waves else ''}",
        files,
        top=HARNESS_TOP,
        opt=_opt(),
        flags=(*flags, "-DNFACEP_EXTERNAL_CLOCK", "-DNFACEP_DIRECT_LOAD"),
        executable=EXECUTABLE,
        what="the native Verilator model",
    )


def run_native(executable: Path, run_dir: Path, config: dict, *, waves: str | None) -> None:
    """Run the native model on the run folder's inputs (``config`` as the runner writes it)
    and leave ``records.hex``, ``stats.json`` and, if it failed, ``failure.json`` there. With
    a model (``config["expected"]``) every record is checked here, as the batch testbench
    does; otherwise the runner decodes them, a chunk at a time."""
    sidecar = config["sidecar"]
    n = config["n"]
    stats_raw = run_dir / "native_stats.json"
    log = run_dir / "sim.log"
    args = [
        str(executable),
        f"+nfacep_input={run_dir / config['tuples']}",
        f"+nfacep_tuples={run_dir / 'batch.hex'}",
        f"+nfacep_records={run_dir / RECORDS_HEX}",
        f"+nfacep_stats={stats_raw}",
        f"+nfacep_seed={config['seed']}",
        f"+nfacep_traffic={config['traffic']}",
        f"+nfacep_depth={config['depth']}",
        f"+nfacep_timeout={config.get('timeout_cycles') or 0}",
        *switch_plusargs(config, run_dir),
    ]
    if config.get("progress"):
        args.append(f"+nfacep_progress={run_dir / config['progress']}")
    if waves:
        args.append(f"+nfacep_trace={waves}")
    with open(log, "w") as out:
        done = subprocess.run(args, cwd=run_dir, stdout=out, stderr=subprocess.STDOUT, check=False)
    failure = run_dir / config["failure"]
    try:
        raw = json.loads(stats_raw.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        _fail(
            failure,
            "error",
            f"the native model exited with {done.returncode} and wrote no "
            f"statistics; its output ends with:\n{tail(log)}",
        )
        return
    error = raw.get("error") or ""
    checker = None
    if config.get("expected"):  # with a model: every record compared with its records
        checker = InOrderChecker(read_records(run_dir / config["expected"]), n)
        error = error or _check(run_dir, sidecar, checker)
    counters = {
        k: v
        for k, v in raw.items()
        if k not in ("cycle", "first_in", "last_in", "last_out", "sent", "taken", "error")
    }
    sent, taken = raw["sent"], raw["taken"]
    stats = {
        "cycles": max(raw["last_in"], raw["last_out"]),
        "simulated_cycles": raw["cycle"],
        "first_input_cycle": raw["first_in"] if sent else None,
        "last_input_cycle": raw["last_in"] if sent else None,
        "last_output_cycle": raw["last_out"] if taken else None,
        "sent": sent,
        "records": taken,
        "counters": counters,
        "checked": checker is not None,
    }
    (run_dir / config["stats"]).write_text(json.dumps(stats, indent=2), encoding="utf-8")
    if error or done.returncode != 0:
        _fail(failure, "error", error or f"the native model exited with {done.returncode}")
    elif checker is not None and checker.error_count:
        _fail(failure, "mismatch", f"{checker.error_count} record(s) differ:\n{checker.report()}")


def _check(run_dir: Path, sidecar: dict, checker: InOrderChecker) -> str:
    """Check every record of the run against the model's; the error that stopped it, if any
    (a record that is not a value, no records file)."""
    try:
        check_hex(
            run_dir / RECORDS_HEX,
            RecordFormat.from_description(sidecar["record"]["fields"]),
            checker,
        )
    except ValueError as exc:
        return str(exc)
    except OSError as exc:
        return f"no records file ({exc})"
    return ""


def _fail(path: Path, kind: str, message: str) -> None:
    path.write_text(json.dumps({"kind": kind, "message": message}), encoding="utf-8")
