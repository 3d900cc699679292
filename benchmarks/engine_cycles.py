#!/usr/bin/env python3
"""Engine throughput (tuples accepted per clock cycle) and latency (cycles), against partition
count, measured cycle-accurately in Amaranth's simulator on the marathon query.

The input is offered every cycle and the output is always ready; every tuple is made to match
(a one-variable query on the marathon stream) so every tuple yields a record and the output
rate is the engine's rate. Counts cycles, not seconds: deterministic.

    python benchmarks/engine_cycles.py --partitions 1 2 4 8 16 64 256 --plot cycles.png
"""

from __future__ import annotations

import argparse
import pathlib

import numpy as np

import nfacep
from nfacep import wire
from nfacep.hdl.engine import Engine
from nfacep.hdl.measure import cycle_profile
from nfacep.io import reader, tuples
from nfacep.params import EngineParams

ROOT = pathlib.Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64, 256])
    ap.add_argument("--tuples", type=int, default=400)
    ap.add_argument("--plot", metavar="PNG")
    args = ap.parse_args()

    text = (ROOT / "queries" / "marathon.sql").read_text()
    schema_only = text[: text.index("QUERY")]
    partitioned = nfacep.compile_text(schema_only + "QUERY every PARTITION runner PATTERN (A)")
    single = nfacep.compile_text(schema_only + "QUERY every PATTERN (A)")
    data = reader.read(str(ROOT / "queries" / "marathon.csv"), partitioned.program.schema)
    idx = np.arange(args.tuples) % data.n
    cols = {k: v[idx] for k, v in data.columns.items()}
    sample = tuples.Tuples(cols, args.tuples)
    payloads = wire.pack(partitioned.program.schema, sample)

    print(f"marathon stream, {args.tuples} tuples offered back to back, output always ready")
    print(f"{'partitions':>10} {'tuples/cycle':>13} {'cycles/tuple':>13} {'latency':>8}")
    rows = []
    base = cycle_profile(
        Engine(single, EngineParams(partitions=1)), payloads, expect_records=args.tuples
    )
    print(
        f"{'none':>10} {base['accepted_per_cycle']:>13.3f} {base['cycles_per_tuple']:>13.3f} "
        f"{base['latency']:>8}"
    )
    for p in args.partitions:
        prof = cycle_profile(
            Engine(partitioned, EngineParams(partitions=p)), payloads, expect_records=args.tuples
        )
        rows.append((p, prof))
        print(
            f"{p:>10} {prof['accepted_per_cycle']:>13.3f} {prof['cycles_per_tuple']:>13.3f} "
            f"{prof['latency']:>8}"
        )
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.5))
        xs = [p for p, _ in rows]
        a.plot(xs, [r["accepted_per_cycle"] for _, r in rows], "o-")
        a.set_xscale("log", base=2)
        a.set_ylim(0, 1.1)
        a.set_xlabel("partitions")
        a.set_ylabel("tuples accepted per cycle")
        b.plot(xs, [r["latency"] for _, r in rows], "o-")
        b.set_xscale("log", base=2)
        b.set_yscale("log", base=2)
        b.set_xlabel("partitions")
        b.set_ylabel("latency (cycles)")
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
