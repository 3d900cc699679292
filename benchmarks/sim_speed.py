#!/usr/bin/env python3
"""Simulation speed of the emitted Verilog: per-cycle cocotb vs batch harness vs native
(Verilator and C++), Icarus vs Verilator, marathon query, both partition stores.

The marathon tuple file is repeated (runner ids kept, so there are 60 partitions) and streamed
with valid and ready always high: by the per-cycle cocotb testbench, by the batch harness
(`nfacep.sim.harness`: Python once per batch) and by the native harness (`nfacep.sim.native`:
the batch harness under a C++ main, no Python while it runs; Verilator only). Reported:
wall-clock tuples/s of a simulation run (a second, cached run of the same input is timed, so
Verilog emission and the build are excluded), simulated cycles/s, each mode's speed relative to
per-cycle on the same simulator and store, and the build time (the first run's time minus the
second's). The fast modes get more tuples (`--fast-tuples`) so that their fixed costs (process
start, files) do not dominate. Prints a table; `--plot F` draws a bar chart. Wall-clock on a
shared machine: compare ratios, not absolute values.

    python benchmarks/sim_speed.py --partitions 64 256 --tuples 5000 --fast-tuples 200000
"""

from __future__ import annotations

import argparse
import pathlib
import tempfile
import time

import numpy as np

import nfacep
from nfacep import sim
from nfacep.hdl.engine import write_verilog
from nfacep.io import reader, tuples
from nfacep.params import EngineParams

ROOT = pathlib.Path(__file__).resolve().parent.parent


def sample_of(data, n: int):
    idx = np.arange(n) % data.n
    cols = {k: v[idx] for k, v in data.columns.items()}
    cols["time"] = np.arange(n, dtype=np.uint64)  # keep ORDER BY non-decreasing
    return tuples.Tuples(cols, n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, nargs="+", default=[64, 256], help="pipeline sizes")
    ap.add_argument("--stores", nargs="+", default=["pipeline", "table"])
    ap.add_argument(
        "--table-entries",
        type=int,
        nargs="+",
        default=[256, 65536],
        help="table sizes (direct index by the 16-bit runner)",
    )
    ap.add_argument("--simulators", nargs="+", default=["icarus", "verilator"])
    ap.add_argument("--tuples", type=int, default=5000, help="tuples for the per-cycle mode")
    ap.add_argument(
        "--fast-tuples", type=int, default=200000, help="tuples for the batch and native modes"
    )
    ap.add_argument("--modes", nargs="+", default=["cycle", "batch", "native"])
    ap.add_argument("--plot", metavar="PNG")
    args = ap.parse_args()

    query = str(ROOT / "queries" / "marathon.sql")
    nfa = nfacep.compile_file(query)
    data = reader.read(str(ROOT / "queries" / "marathon.csv"), nfa.program.schema)
    samples = {n: sample_of(data, n) for n in {args.tuples, args.fast_tuples}}
    configs = [
        (f"pipeline {p}", EngineParams(partitions=p))
        for p in args.partitions
        if "pipeline" in args.stores
    ]
    if "table" in args.stores:
        configs += [
            (f"table {e}", EngineParams(store="table", partitions=e)) for e in args.table_entries
        ]

    print("marathon, full traffic; wall time of a cached run; build = first run - second run")
    print(
        f"{'simulator':>10} {'engine':>14} {'mode':>6} {'tuples':>8} {'wall s':>7} "
        f"{'tuples/s':>9} {'cycles/s':>10} {'tuples/cycle':>12} {'vs cycle':>8} "
        f"{'build s':>8}"
    )
    rows = []
    with tempfile.TemporaryDirectory() as build:
        engines = {}
        for label, params in configs:  # emit once: Verilog generation is not simulation
            engines[label] = str(pathlib.Path(build) / f"{label.replace(' ', '_')}.v")
            write_verilog(nfa, engines[label], params)
        for simulator in args.simulators:
            for label, params in configs:
                base = None
                for mode in args.modes:
                    if mode == "native" and simulator != "verilator":
                        continue
                    n = args.tuples if mode == "cycle" else args.fast_tuples
                    simulation = sim.Simulation(
                        sim.SimOptions(
                            simulator=simulator,
                            traffic="full",
                            build_dir=build,
                            engine=engines[label],
                            mode=mode,
                        )
                    )
                    t0 = time.perf_counter()
                    simulation.run(nfa, samples[n], params)  # build, warm the cache
                    first = time.perf_counter() - t0
                    t0 = time.perf_counter()
                    r = simulation.run(nfa, samples[n], params)
                    wall = time.perf_counter() - t0
                    rate = n / wall
                    base = base or rate
                    rows.append((simulator, label, mode, wall, rate, r.cycles / wall))
                    print(
                        f"{simulator:>10} {label:>14} {mode:>6} {n:>8} {wall:>7.1f} "
                        f"{rate:>9.0f} {r.cycles / wall:>10.0f} {r.tuples_per_cycle:>12.3f} "
                        f"{rate / base:>7.1f}x {max(0.0, first - wall):>8.0f}",
                        flush=True,
                    )
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(max(8, len(rows) * 0.9), 4))
        labels = [f"{s} {m}\n{p}" for s, p, m, *_ in rows]
        ax.bar(labels, [r[4] for r in rows])
        ax.set_yscale("log")
        ax.set_ylabel("tuples per second (wall clock)")
        ax.set_title(
            "simulation of the marathon engine:\nper-cycle cocotb, batch harness, "
            "native (Verilator + C++)",
            fontsize=10,
        )
        ax.tick_params(axis="x", labelsize=7)
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
