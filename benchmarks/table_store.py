#!/usr/bin/env python3
"""The block-RAM table (--store table) against the swap pipeline (--store pipeline): engine
cycles per tuple and latency in Amaranth's simulator, and, with --build, LUTs, FFs, block RAMs
and Fmax of a real ``nfacep build`` of the marathon engine.

Cycles: marathon's stream with the partition key replaced by same-key bursts (runs of 1 to 8
tuples of one runner, over 60 runners), offered every cycle, output always ready, every tuple
matching (a one-variable query), so the output rate is the engine's rate. The table is given
its clearing sweep before the first tuple. Deterministic: counts cycles, not seconds.

Builds: the harness top (on-chip tuples, LEDs) with nextpnr constrained to --target-mhz, one
at a time (each takes from seconds for a table to minutes for the pipeline). The sweep from 1k
to 64k partitions on two devices (the paper's Figure 9) is ``figure9_table.py``, through
:func:`build_point`.

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
from nfacep import wire
from nfacep.hdl.engine import Engine
from nfacep.hdl.measure import cycle_profile
from nfacep.io import reader, tuples
from nfacep.params import EngineParams

ROOT = pathlib.Path(__file__).resolve().parent.parent

# (label, parameters): the paper's pipeline at its usual size, a hashed table, a direct one
CONFIGS = [
    ("pipeline 256", EngineParams(store="pipeline", partitions=256)),
    ("table 4096/4w", EngineParams(store="table", partitions=4096, ways=4)),
    ("table 65536", EngineParams(store="table", partitions=65536, ways=4)),
    # timers: an aging step enters whenever the input pauses, and is forced after 1,024 tuples
    # without a pause (the input here never pauses)
    ("table 65536 +t", EngineParams(store="table", partitions=65536, ways=4, tick_tuples=100)),
]


def bursts(n: int, keys: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out: list[int] = []
    while len(out) < n:
        out += [int(rng.integers(keys))] * int(rng.integers(1, 9))
    return np.array(out[:n], dtype=np.uint64)


def cycles(params: EngineParams, n: int) -> dict:
    text = (ROOT / "queries" / "marathon.sql").read_text()
    nfa = nfacep.compile_text(
        text[: text.index("QUERY")] + "QUERY every PARTITION runner PATTERN (A)"
    )
    data = reader.read(str(ROOT / "queries" / "marathon.csv"), nfa.program.schema)
    idx = np.arange(n) % data.n
    cols = {k: v[idx] for k, v in data.columns.items()}
    cols["runner"] = bursts(n, 60)
    payloads = wire.pack(nfa.program.schema, tuples.Tuples(cols, n))
    engine = Engine(nfa, params)
    warmup = params.partitions // params.ways + 8 if params.store == "table" else 0
    return cycle_profile(engine, payloads, expect_records=n, warmup=warmup)


def build_point(nfa, params: EngineParams, board: str, target: float, out: str, stem: str) -> dict:
    """One ``nfacep build`` of ``nfa``'s engine (the harness top) for ``board`` into ``out``, as
    a row: ``status`` is the report's (``ok``, ``timing not met``: the numbers are still there,
    ``does not fit``, ``place-and-route failed``, ...) with the tool's ``message``;
    a build that stops is a result, not an exception. Resources are nextpnr's after
    place-and-route, or Yosys's when the flow stopped before it."""
    from nfacep.boards import BuildError, build, get_board
    from nfacep.boards.flow import DoesNotFitError

    start = time.monotonic()
    row: dict = {
        "status": "ok",
        "message": "",
        "luts": None,
        "ffs": None,
        "brams": None,
        "fmax_mhz": None,
        "timing_met": None,
    }
    try:
        report = build(nfa, get_board(board), out, params, target_mhz=target, stem=stem)
    except BuildError as err:
        report = err.report
        row["message"] = str(err).strip().replace("\n", " ")
        if report is None:
            row["status"] = (
                "does not fit" if isinstance(err, DoesNotFitError) else "synthesis failed"
            )
    if report is not None:
        if report.get("status") not in (None, "ok"):
            row["status"] = report["status"]
        res = report.get("resources") or {}
        for key in ("luts", "ffs", "brams"):
            row[key] = (res.get(key) or {}).get("used")
        fmax = report.get("fmax_mhz") or {}
        row["fmax_mhz"] = round(min(fmax.values()), 2) if fmax else None
        row["timing_met"] = report.get("timing_met")
    row["build_s"] = round(time.monotonic() - start, 1)
    return row


def build_row(params: EngineParams, board: str, target: float, root: str) -> dict:
    nfa = nfacep.compile_file(str(ROOT / "queries" / "marathon.sql"))
    row = build_point(
        nfa,
        params,
        board,
        target,
        os.path.join(root, f"{params.store}-{params.partitions}"),
        "marathon",
    )
    if row["luts"] is None:
        raise SystemExit(f"{params.store} {params.partitions}: {row['status']}: {row['message']}")
    return {
        "luts": row["luts"],
        "ffs": row["ffs"],
        "brams": row["brams"],
        "fmax": float("nan") if row["fmax_mhz"] is None else row["fmax_mhz"],
        "build_s": row["build_s"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tuples", type=int, default=3000)
    ap.add_argument("--build", action="store_true", help="also build each engine (slow)")
    ap.add_argument("--board", default="ulx3s-85f")
    ap.add_argument("--target-mhz", type=float, default=150.0)
    ap.add_argument(
        "--stores",
        nargs="+",
        default=["pipeline", "table"],
        help="measure only these stores (the pipeline's build takes minutes)",
    )
    args = ap.parse_args()

    print(
        f"marathon, {args.tuples} tuples in same-key bursts, back to back"
        + (f"; builds for {args.board} at a {args.target_mhz:g} MHz target" if args.build else "")
    )
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
                line += (
                    f" {b['luts']:>7,} {b['ffs']:>7,} {b['brams']:>6} {b['fmax']:>9.1f}"
                    f" {b['build_s']:>8.0f}"
                )
            print(line, flush=True)


if __name__ == "__main__":
    main()
