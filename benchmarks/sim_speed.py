#!/usr/bin/env python3
"""Simulation speed of the emitted Verilog: batch harness vs per-cycle cocotb, Icarus vs
Verilator, marathon query.

The marathon tuple file is repeated to `--tuples` tuples (runner ids kept, so there are 60
partitions) and streamed with valid and ready always high, by the batch harness
(`nfacep.sim.harness`: Python once per batch) and by the per-cycle cocotb testbench. Reported:
wall-clock tuples/s of the simulation run (Verilog emission and the simulator build excluded: a
second, cached run is timed), simulated cycles/s, and each mode's speed relative to per-cycle
on the same simulator. Prints a table; `--plot F` draws a bar chart. Wall-clock on a shared
machine: compare ratios, not absolute values.

    python benchmarks/sim_speed.py --partitions 64 256 --tuples 100000
"""

from __future__ import annotations

import argparse
import pathlib
import tempfile
import time

import numpy as np

import nfacep
from nfacep import sim, tuples
from nfacep.hdl.engine import write_verilog
from nfacep.params import EngineParams

ROOT = pathlib.Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--simulators", nargs="+", default=["icarus", "verilator"])
    ap.add_argument("--tuples", type=int, default=5000)
    ap.add_argument("--modes", nargs="+", default=["cycle", "batch"])
    ap.add_argument("--plot", metavar="PNG")
    args = ap.parse_args()

    query = str(ROOT / "queries" / "marathon.sql")
    nfa = nfacep.compile_file(query)
    data = tuples.read(str(ROOT / "queries" / "marathon.csv"), nfa.program.schema)
    idx = np.arange(args.tuples) % data.n
    cols = {k: v[idx] for k, v in data.columns.items()}
    cols["time"] = np.arange(args.tuples, dtype=np.uint64)  # keep ORDER BY non-decreasing
    sample = tuples.Tuples(cols, args.tuples)

    print(f"marathon, {args.tuples} tuples, full traffic; emission and build excluded")
    print(f"{'simulator':>10} {'partitions':>10} {'mode':>6} {'wall s':>8} {'tuples/s':>9} "
          f"{'cycles/s':>10} {'tuples/cycle':>12} {'vs cycle':>8}")
    rows = []
    with tempfile.TemporaryDirectory() as build:
        engines = {}
        for p in args.partitions:  # emit once: Verilog generation is not simulation
            engines[p] = str(pathlib.Path(build) / f"engine{p}.v")
            write_verilog(nfa, engines[p], EngineParams(partitions=p))
        for simulator in args.simulators:
            for p in args.partitions:
                base = None
                for mode in args.modes:
                    simulation = sim.Simulation(simulator, traffic="full", build_dir=build,
                                                engine=engines[p], mode=mode)
                    params = EngineParams(partitions=p)
                    simulation.run(nfa, sample, params)  # build, warm the cache
                    t0 = time.perf_counter()
                    r = simulation.run(nfa, sample, params)
                    wall = time.perf_counter() - t0
                    rate = args.tuples / wall
                    base = base or rate
                    rows.append((simulator, p, mode, wall, rate, r.cycles / wall))
                    print(f"{simulator:>10} {p:>10} {mode:>6} {wall:>8.1f} {rate:>9.0f} "
                          f"{r.cycles / wall:>10.0f} {r.tuples_per_cycle:>12.3f} "
                          f"{rate / base:>7.1f}x")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(8, 3.5))
        labels = [f"{s} {m}\n{p} partitions" for s, p, m, *_ in rows]
        ax.bar(labels, [r[4] for r in rows])
        ax.set_yscale("log")
        ax.set_ylabel("tuples per second (wall clock)")
        ax.set_title("simulation of the marathon engine: per-cycle cocotb vs batch harness")
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
