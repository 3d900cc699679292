#!/usr/bin/env python3
"""Where the programmable engine's LUTs go: the engine alone (``nfacep verilog --engine
programmable``, marathon's stream, the block-RAM table) mapped by Yosys to the ECP5 without
flattening (``synth_ecp5 -noflatten``), its cells per part of the hierarchy: the engine's own
module (the configuration loader and registers, the atoms and the state slots' guards), the
partition store (the table, its hash and, inside it, the NFA step over the configured matrix
and WITHIN's timed slots), the configuration port's CRC, the FIFO.

No place-and-route: LUT4 counts are Yosys's, before nextpnr packs them (a CCU2C is two LUT
slots of the device). Yosys runs with the options ``nfacep build`` gives it for the
programmable engine (``-nowidelut``, :func:`nfacep.boards.bitstream.synth_options`), or with
its default wide LUTs (LUT5 to LUT7 made of LUT4s and the slices' PFUMX and L6MUX21) under
``--widelut``. One synthesis takes minutes (about 5 on a busy 2-core machine at the default
capacity).

    python benchmarks/programmable_luts.py      # the default capacity, 4,096 entries
    python benchmarks/programmable_luts.py --widelut
    python benchmarks/programmable_luts.py --capacity 16x8x1 --partitions 256

(marathon needs 9 states and 7 atoms: a smaller capacity does not take its image.)
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

from fabric import NFACEP

from nfacep.boards import get_board
from nfacep.boards.bitstream import synth_options
from nfacep.boards.toolchain import find_tools
from nfacep.params import EngineParams

QUERY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "queries", "marathon.sql")
#: what ``nfacep build --engine programmable`` is (its capacity does not change the options)
PROGRAMMABLE = EngineParams(engine="programmable")
CELLS = ("LUT4", "CCU2C", "PFUMX", "L6MUX21", "TRELLIS_FF", "DP16KD", "TRELLIS_DPR16X4")


def stat_table(text: str) -> dict[str, dict[str, int]]:
    """Yosys's ``stat`` of a hierarchy: cells by type for each module (``=== name ===``)."""
    parts: dict[str, dict[str, int]] = {}
    current = None
    for line in text.splitlines():
        head = re.match(r"=== (.+) ===", line.strip())
        if head:
            current = parts.setdefault(head.group(1), {})
            continue
        cell = re.match(r"\s*(\d+)\s+(\S+)\s*$", line)
        if current is not None and cell and cell.group(2) in CELLS:
            current[cell.group(2)] = int(cell.group(1))
    return parts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--capacity", default=None, help="SxAxQ (default: the engine's default)")
    ap.add_argument("--partitions", type=int, default=4096)
    ap.add_argument("--ways", type=int, default=4)
    ap.add_argument("--widelut", action="store_true", help="Yosys's default wide LUTs")
    args = ap.parse_args()
    opts = "" if args.widelut else synth_options(get_board("colorlight-5a75b"), PROGRAMMABLE)
    yosys = find_tools(("yosys",))["yosys"]
    with tempfile.TemporaryDirectory() as tmp:
        verilog = os.path.join(tmp, "engine.v")
        argv = [*NFACEP, "verilog", QUERY, "--engine", "programmable", "-o", verilog]
        argv += ["--store", "table", "--partitions", str(args.partitions), "--ways", str(args.ways)]
        if args.capacity:
            s, a, q = args.capacity.split("x")
            argv += ["--states", s, "--atoms", a, "--queries", q]
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode:
            sys.exit(done.stderr.strip())
        # (paths relative to the folder: YoWASP's Yosys sees the working directory)
        script = (
            f"read_verilog engine.v; synth_ecp5 {opts or ''} -noflatten -top nfacep_engine; "
            "tee -o stat.txt stat"
        )
        done = subprocess.run([yosys, "-q", "-p", script], cwd=tmp, capture_output=True, text=True)
        if done.returncode:
            sys.exit(done.stdout.strip() + done.stderr.strip())
        with open(os.path.join(tmp, "stat.txt"), encoding="utf-8") as f:
            parts = stat_table(f.read())
    print(
        f"capacity {args.capacity or 'default'}, {args.partitions:,} entries in {args.ways} ways, "
        f"synth_ecp5 {opts or '(wide LUTs)'}"
    )
    print()
    print("| part | " + " | ".join(CELLS) + " |")
    print("| --- |" + " ---: |" * len(CELLS))
    for name, cells in parts.items():
        label = "total" if name == "design hierarchy" else name
        print(f"| {label} | " + " | ".join(f"{cells.get(c, 0):,}" for c in CELLS) + " |")


if __name__ == "__main__":
    main()
