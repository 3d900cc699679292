#!/usr/bin/env python3
"""The block-RAM table (--store table) against the swap pipeline (--store pipeline): engine
cycles per tuple and latency in Amaranth's simulator, and, with --build, LUTs, FFs, block RAMs
and Fmax of a real ``nfacep build`` of the marathon engine.

Cycles: marathon's stream with the partition key replaced by same-key bursts (runs of 1 to 8
tuples of one runner, over 60 runners), offered every cycle, output always ready, every tuple
matching (a one-variable query), so the output rate is the engine's rate. The table is given
its clearing sweep before the first tuple. Deterministic: counts cycles, not seconds.

Builds: the harness top (on-chip tuples, LEDs) with nextpnr constrained to --target-mhz, one
at a time (each takes from seconds for a table to minutes for the pipeline).

    python benchmarks/table_store.py                      # cycles only
    python benchmarks/table_store.py --build --board ulx3s-85f
    python benchmarks/table_store.py --build --stores table
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import nfacep
from nfacep import tuples, wire
from nfacep.hdl.engine import Engine
from nfacep.hdl.measure import cycle_profile
from nfacep.params import EngineParams

ROOT = pathlib.Path(__file__).resolve().parent.parent

# (label, parameters): the paper's pipeline at its usual size, a hashed table, a direct one
CONFIGS = [
    ("pipeline 256", EngineParams(store="pipeline", partitions=256)),
    ("table 4096/4w", EngineParams(store="table", partitions=4096, ways=4)),
    ("table 65536", EngineParams(store="table", partitions=65536, ways=4)),
]


def bursts(n: int, keys: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out: list[int] = []
    while len(out) < n:
        out += [int(rng.integers(keys))] * int(rng.integers(1, 9))
    return np.array(out[:n], dtype=np.uint64)


def cycles(params: EngineParams, n: int) -> dict:
    text = (ROOT / "queries" / "marathon.sql").read_text()
    nfa = nfacep.compile_text(text[:text.index("QUERY")] +
                              "QUERY every PARTITION runner PATTERN (A)")
    data = tuples.read(str(ROOT / "queries" / "marathon.csv"), nfa.program.schema)
    idx = np.arange(n) % data.n
    cols = {k: v[idx] for k, v in data.columns.items()}
    cols["runner"] = bursts(n, 60)
    payloads = wire.pack(nfa.program.schema, tuples.Tuples(cols, n))
    engine = Engine(nfa, params)
    warmup = params.partitions // params.ways + 8 if params.store == "table" else 0
    return cycle_profile(engine, payloads, expect_records=n, warmup=warmup)


def build_row(params: EngineParams, board: str, target: float, root: str) -> dict:
    from nfacep.boards import BuildError, build, get_board

    nfa = nfacep.compile_file(str(ROOT / "queries" / "marathon.sql"))
    out = os.path.join(root, f"{params.store}-{params.partitions}")
    start = time.monotonic()
    try:
        report = build(nfa, get_board(board), out, params, target_mhz=target, stem="marathon")
    except BuildError as err:  # timing missed: the numbers are still there
        if err.report is None or not err.report["resources"]:
            raise
        report = err.report
    res = report["resources"]
    return {"luts": res["luts"]["used"], "ffs": res["ffs"]["used"],
            "brams": res["brams"]["used"],
            "fmax": min(report["fmax_mhz"].values()) if report["fmax_mhz"] else float("nan"),
            "build_s": time.monotonic() - start}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tuples", type=int, default=400)
    ap.add_argument("--build", action="store_true", help="also build each engine (slow)")
    ap.add_argument("--board", default="ulx3s-85f")
    ap.add_argument("--target-mhz", type=float, default=150.0)
    ap.add_argument("--stores", nargs="+", default=["pipeline", "table"],
                    help="measure only these stores (the pipeline's build takes minutes)")
    args = ap.parse_args()

    print(f"marathon, {args.tuples} tuples in same-key bursts, back to back"
          + (f"; builds for {args.board} at a {args.target_mhz:g} MHz target"
             if args.build else ""))
    head = f"{'store':<14} {'cycles/tuple':>12} {'latency':>8}"
    if args.build:
        head += f" {'LUTs':>7} {'FFs':>7} {'BRAMs':>6} {'Fmax MHz':>9} {'build s':>8}"
    print(head)
    with tempfile.TemporaryDirectory() as root:
        for label, params in CONFIGS:
            if params.store not in args.stores:
                continue
            prof = cycles(params, args.tuples)
            line = f"{label:<14} {prof['cycles_per_tuple']:>12.3f} {prof['latency']:>8}"
            if args.build:
                b = build_row(params, args.board, args.target_mhz, root)
                line += (f" {b['luts']:>7,} {b['ffs']:>7,} {b['brams']:>6} {b['fmax']:>9.1f}"
                         f" {b['build_s']:>8.0f}")
            print(line, flush=True)


if __name__ == "__main__":
    main()
