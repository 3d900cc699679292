#!/usr/bin/env python3
"""What WITHIN costs the programmable engine: a capacity (``--capacity SxAxQ``, by default the
engine's: 24 states, 16 atoms, 4 queries) built with the default timed state slots (6, window
bits 16) against the same engine without timed slots (no windows), for the streams of the
bundled windowed queries.

Per engine: the bits of a partition's state (:func:`nfacep.hdl.programmable.entry_widths`)
and of a table entry (with its key tag, valid bit and timer), the configuration bits, the
flip-flops of the elaborated design (Amaranth's RTLIL, as ``nfacep check --board`` counts
them) and, unless ``--no-synth``, the LUT4s and flip-flops Yosys' ``synth_ecp5`` maps it to
(no place and route: no Fmax), with the table store of ``--partitions`` entries. Then the
DP16KD blocks of a table of 65,536 partitions (4 ways) against each ECP5 board's.

    python benchmarks/programmable_windows.py
    python benchmarks/programmable_windows.py --no-synth --streams fire
    python benchmarks/programmable_windows.py --capacity 32x32x4 --streams bruteforce
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from amaranth.back import rtlil, verilog

import nfacep
from boards.registry import BOARDS
from boards.resources import count_flipflops
from boards.toolchain import find_tools
from nfacep.hdl.bram import dp16kd_blocks
from nfacep.hdl.programmable import ProgrammableEngine, entry_widths
from nfacep.hdl.table import TablePartitioner
from nfacep.image import Capacity, EngineShape, config_fields
from nfacep.params import EngineParams

QUERIES = os.path.join(os.path.dirname(__file__), "..", "queries")
DEFAULT = Capacity.of(EngineParams())


def engines(capacity: Capacity) -> dict[str, Capacity]:
    """The capacity with its default timed slots and without any."""
    return {"with windows": capacity, "without": dataclasses.replace(capacity, timed=0)}


def table(shape: EngineShape, partitions: int, ways: int) -> TablePartitioner:
    payload, state = entry_widths(shape)
    key = sum(shape.schema.field(n).type.bits for n in shape.partition_fields)
    store = TablePartitioner(
        key_shape=key,
        payload_shape=payload,
        state_width=state,
        result_shape=shape.capacity.queries,
        update=lambda m, s, p: (s, 0),
        entries=partitions,
        ways=ways,
    )
    store._MustUse__silence = True  # (measured, never elaborated)
    return store


def synth(engine) -> dict:
    """LUT4s and flip-flops after Yosys' synth_ecp5 (no place and route)."""
    yosys = find_tools(("yosys",))["yosys"]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "engine.v")
        with open(path, "w") as f:
            f.write(verilog.convert(engine, name="engine", emit_src=False))
        script = "read_verilog engine.v; synth_ecp5 -top engine; stat"
        t0 = time.monotonic()
        out = subprocess.run(  # (in the directory: YoWASP's Yosys sees only its tree)
            [yosys, "-q", "-p", script, "-l", "log"], capture_output=True, text=True, cwd=tmp
        )
        if out.returncode:
            raise SystemExit(f"yosys failed:\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
        with open(os.path.join(tmp, "log")) as f:
            log = f.read() + out.stdout
    cells = dict(re.findall(r"^\s+(\d+)\s+(LUT4|TRELLIS_FF|CCU2C|DP16KD)\s*$", log, re.M))
    cells = {v: int(k) for k, v in cells.items()} or {
        name: int(n)
        for name, n in re.findall(r"^\s+(LUT4|TRELLIS_FF|CCU2C|DP16KD)\s+(\d+)", log, re.M)
    }
    return {**cells, "seconds": time.monotonic() - t0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", nargs="+", default=["fire", "bruteforce"])
    parser.add_argument("--partitions", type=int, default=1024)
    parser.add_argument("--ways", type=int, default=4)
    parser.add_argument("--no-synth", action="store_true")
    parser.add_argument(
        "--capacity",
        default=f"{DEFAULT.states}x{DEFAULT.atoms}x{DEFAULT.queries}",
        help="SxAxQ: states, atoms, queries (default: the engine's)",
    )
    args = parser.parse_args()
    s, a, q = (int(n) for n in args.capacity.split("x"))
    capacity = Capacity(s, a, q)
    params = EngineParams(partitions=args.partitions, store="table", ways=args.ways)
    print(f"capacity {s}x{a}x{q}, table store, {args.partitions} entries, {args.ways} ways")
    print()
    print(
        "| stream | engine | state bits | entry bits | config bits | flip-flops (RTLIL) "
        "| LUT4 | CCU2C | FF (synth) | synth s |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    big = []
    for name in args.streams:
        program = nfacep.compile_file(os.path.join(QUERIES, f"{name}.sql")).program
        for label, cap in engines(capacity).items():
            shape = EngineShape(program.schema, program.partition_fields, cap)
            state = entry_widths(shape)[1]
            entry = table(shape, args.partitions, args.ways).entry_layout.size
            bits = sum(w for _, w in config_fields(shape))
            engine = ProgrammableEngine(shape, params)
            ffs = count_flipflops(rtlil.convert(engine, name="top", emit_src=False))
            cells = {} if args.no_synth else synth(ProgrammableEngine(shape, params))
            shown = [
                f"{cells[k]:,}" if k in cells else "-" for k in ("LUT4", "CCU2C", "TRELLIS_FF")
            ]
            secs = f"{cells['seconds']:.0f}" if cells else "-"
            print(
                f"| {name} | {label} | {state} | {entry} | {bits:,} | {ffs:,} | "
                f"{' | '.join(shown)} | {secs} |"
            )
            sys.stdout.flush()
            wide = table(shape, 65536, 4)
            blocks = wide.banks * dp16kd_blocks(wide.rows, wide.entry_layout.size)
            big.append((name, label, wide.entry_layout.size, blocks))
    print()
    boards = [b for b in BOARDS.values() if b.family == "ecp5"]
    print("65,536 partitions (4 ways): DP16KD blocks of the table against each ECP5 board's")
    print()
    print("| stream | engine | entry bits | DP16KD | " + " | ".join(b.name for b in boards) + " |")
    print("| --- | --- | ---: | ---: | " + " | ".join("---" for _ in boards) + " |")
    for name, label, entry, blocks in big:
        fits = ["fits" if blocks <= b.brams else f"no ({b.brams})" for b in boards]
        print(f"| {name} | {label} | {entry} | {blocks:,} | " + " | ".join(fits) + " |")


if __name__ == "__main__":
    main()
