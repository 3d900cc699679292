#!/usr/bin/env python3
"""The engine with its partitions in SDRAM (``--store sdram``) against the number of distinct
keys, beside the block-RAM table (``--store table``) and Gigabit Ethernet's line: sustained
tuples per clock and tuples/s, simulated by the project's own path (``nfacep sim --mode
native``: the engine Verilated with the SDRAM chip's gateware model beside it, every timing
rule checked, no Python per clock).

The engine: a two-variable query partitioned by a 20-bit key (``QUERY`` below), so that
``--store sdram --partitions 1048576`` indexes the chip directly (an entry of one word, a
million partitions, none dropped); the table is the most the engine puts in block RAM, 65,536
entries in buckets of 4 ways, which drops the tuples of new keys whose bucket is full. Keys:
``K`` distinct keys scattered at random over the 2^20, drawn uniformly or with Zipf rank
frequencies (s = 1); tuples offered every clock and records always taken (``traffic="full"``).
The rate is the simulator's: the tuples over the clocks from the first tuple taken to the
last (the SDRAM store's clearing after reset, a million clocks, comes before the first),
less the clocks of the first ``--warmup`` tuples alone: 40,000 by default, so that the SDRAM
store's cache (4,096 lines) is full, as a running engine's is (uniform keys over a million
leave about 4,096 e^-10, none, of its lines empty; an empty line costs no write-back);
every run is checked against the reference matcher (``check``), and a broken timing rule of
the chip fails it.

Tuples/s are tuples/clock at ``--mhz``, the clock the store's SDRAM controller is built for
(the chip's timing in its clocks; 100 by default, which the store meets on the LFE5U-25F,
``sdram_store.py --build``). ``--stores sdram-programmable`` is the programmable engine of the
default capacity (24 states, 16 atoms, 4 queries) with 65,536 partitions in the chip, its
entries of 6 words, indexed by a 16-bit key (points of more distinct keys are left out); at
``--mhz 25`` the clock the programmable engine runs at on the Colorlight's UDP top. The line:
a TUPLES packet of ``p`` tuples is a frame of :func:`~nfacep.links.udp.protocol.tuples_frame_bytes`,
carried at :func:`~nfacep.links.udp.protocol.line_limit` frames a second; the most tuples/s
the line carries is :func:`~nfacep.links.udp.protocol.line_tuples_limit`. The worst case of
the store (uniform keys over a million) is set against the line at every packet size, for
this query's tuples and for 16-byte ones (the paper's).

    python benchmarks/sdram_throughput.py                      # 20,000 tuples a point
    python benchmarks/sdram_throughput.py --tuples 100000 --plot benchmarks/sdram_throughput.png
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import os
import random
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from fabric import write_csv

import nfacep
from nfacep import sim
from nfacep.io import tuples
from nfacep.links.udp.protocol import (
    HEADER_BYTES,
    MAX_PAYLOAD,
    line_limit,
    line_tuples_limit,
    tuples_frame_bytes,
)
from nfacep.params import EngineParams
from nfacep.wire import tuple_bytes

KEY_BITS = 20


def query(key_bits: int = KEY_BITS) -> str:
    """The benchmark's query, partitioned by a key of ``key_bits``."""
    return f"""
CREATE STREAM s (ts UINT(32), k UINT({key_bits}), a UINT(4));
QUERY q FROM s PARTITION k PATTERN (A B) DEFINE A AS (a = 1) B AS (a = 2);
"""


QUERY = query()
#: each store's engine and the bits of its query's key
STORES = {
    "sdram": (EngineParams(store="sdram", partitions=1 << KEY_BITS, ways=4), KEY_BITS),
    "table": (EngineParams(store="table", partitions=1 << 16, ways=4), KEY_BITS),
    # the programmable engine of the default capacity (24 states, 16 atoms, 4 queries: an
    # entry of 6 words) with the 65,536 partitions of issue 28 in the chip, indexed directly
    # by a 16-bit key (so at most 65,536 distinct keys, none dropped)
    "sdram-programmable": (
        EngineParams(engine="programmable", store="sdram", partitions=1 << 16, ways=4),
        16,
    ),
}


def keys_for(kind: str, distinct: int, n: int, seed: int, bits: int = KEY_BITS) -> np.ndarray:
    """``n`` keys among ``distinct`` scattered over the 2^``bits``: uniform, or Zipf
    (s = 1)."""
    rng = random.Random(seed)
    pool = rng.sample(range(1 << bits), distinct)
    if kind == "uniform":
        keys = [rng.choice(pool) for _ in range(n)]
    else:
        cdf = list(itertools.accumulate(1 / (k + 1) for k in range(distinct)))
        keys = [
            pool[min(bisect.bisect_left(cdf, rng.random() * cdf[-1]), distinct - 1)]
            for _ in range(n)
        ]
    return np.array(keys, dtype=np.uint64)


def stream(keys: np.ndarray, seed: int) -> tuples.Tuples:
    rng = np.random.default_rng(seed)
    n = len(keys)
    columns = {
        "ts": np.arange(n, dtype=np.uint64),
        "k": keys,
        "a": rng.integers(0, 16, n).astype(np.uint64),
    }
    return tuples.Tuples(columns, n)


def emit(nfa, params: EngineParams, mhz: float, folder: str) -> str:
    """The engine of ``params`` for ``nfa`` as Verilog in ``folder``, its SDRAM controller
    built for ``mhz`` (the chip's timing in clocks of it), as ``sim --engine`` takes it."""
    if params.engine == "programmable":
        from nfacep.hdl.programmable import write_verilog
    else:
        from nfacep.hdl.engine import write_verilog
    path = os.path.join(folder, f"{params.engine}-{params.store}-{mhz:g}.v")
    write_verilog(nfa, path, params, sdram_mhz=mhz)
    return path


def measure(args, build: str) -> list[dict]:
    rows = []
    depth = 1 << max(4, (args.warmup + args.tuples - 1).bit_length())
    for store in args.stores:
        params, bits = STORES[store]
        nfa = nfacep.compile_text(query(bits))
        simulation = sim.Simulation(
            sim.SimOptions(
                simulator="verilator",
                mode="native",
                traffic="full",
                build_dir=build,
                check=True,
                batch_depth=depth,
                engine=emit(nfa, params, args.mhz, build),
            )
        )
        for distinct in args.keys:
            if distinct > 1 << bits:
                continue
            for kind in ("uniform", "zipf"):
                n, w = args.warmup + args.tuples, args.warmup
                data = stream(keys_for(kind, distinct, n, distinct, bits), distinct)
                start = time.time()
                # the clocks from the first tuple taken to the last: of the whole stream, and
                # of its first ``w`` tuples alone (the same clocks of the same run: the tuples
                # after them change nothing before), so the rate counts neither the clearing
                # after reset (the store takes a tuple or two first) nor the warm-up
                clocks = []
                first = tuples.Tuples({k: v[:w] for k, v in data.columns.items()}, w)
                for part in (data, first):
                    result = simulation.run(nfa, part, params)
                    if result.failure:
                        raise SystemExit(f"{store}, {distinct} {kind} keys: {result.failure}")
                    clocks.append(part.n / result.tuples_per_cycle)
                    if part is data:
                        counters = result.counters
                per_clock = (n - w) / (clocks[0] - clocks[1])
                rows.append(
                    {
                        "store": store,
                        "keys": distinct,
                        "kind": kind,
                        "drawn": len(np.unique(data.columns["k"])),
                        "tuples": args.tuples,
                        "per_clock": per_clock,
                        "per_s": per_clock * args.mhz * 1e6,
                        "drops": counters.get("drops", 0),
                        "errors": counters.get("sdram_errors", 0),
                    }
                )
                r = rows[-1]
                print(
                    f"{store:>6} {distinct:>9,} {kind:>8} {r['drawn']:>9,} {per_clock:>10.3f} "
                    f"{r['per_s'] / 1e6:>10.2f} {r['drops']:>7,}   ({time.time() - start:.0f} s)",
                    flush=True,
                )
    return rows


def line_rows(sizes: list[int]) -> list[tuple[int, int, int, float]]:
    """(tuple bytes, tuples a packet, frame bytes, tuples/s the line carries) for every
    packet size from one tuple to the most a 1,500-byte MTU holds."""
    out = []
    for tb in sizes:
        for per in range(1, (MAX_PAYLOAD - HEADER_BYTES) // tb + 1):
            frame = tuples_frame_bytes(tb, per)
            out.append((tb, per, frame, per * line_limit(frame)))
    return out


def report_line(worst: float, sizes: list[int], case: str) -> list[tuple]:
    rows = line_rows(sizes)
    print(f"\nGbE against the worst case ({case}): {worst / 1e6:.2f} M tuples/s")
    print(f"{'tuple B':>7} {'per pkt':>7} {'frame B':>7} {'line tuples/s':>13} {'store/line':>10}")
    for tb in sizes:
        mine = [r for r in rows if r[0] == tb]
        shown = {1, 2, 4, 8, 16, 32, 64, mine[-1][1]}
        for _, per, frame, limit in mine:
            if per in shown:
                print(f"{tb:>7} {per:>7} {frame:>7} {limit:>13,.0f} {worst / limit:>10.0%}")
        most, per = line_tuples_limit(tb)
        short = [r for r in mine if r[3] > worst]
        verdict = (
            "keeps up at every packet size"
            if not short
            else f"short of the line from {short[0][1]} tuples a packet up "
            f"(needs {most / worst:.2f}x, {most / 1e6:.2f} M/s at {per} a packet)"
        )
        print(f"  {tb}-byte tuples: the line carries at most {most:,.0f}/s; the store {verdict}")
    return rows


def plot(path: str, rows: list[dict], line: list[tuple], worst: float, mhz: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for store in dict.fromkeys(r["store"] for r in rows):
        for kind, style in (("uniform", "-o"), ("zipf", "--s")):
            pts = [r for r in rows if r["store"] == store and r["kind"] == kind]
            left.plot(
                [r["keys"] for r in pts],
                [r["per_s"] / 1e6 for r in pts],
                style,
                label=f"{store}, {kind}",
            )
    for tb in dict.fromkeys(r[0] for r in line):
        left.axhline(line_tuples_limit(tb)[0] / 1e6, linestyle=":", color="grey")
        left.annotate(f"GbE, {tb}-byte tuples", (1e3, line_tuples_limit(tb)[0] / 1e6), fontsize=8)
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel("distinct keys")
    left.set_ylabel(f"M tuples/s at {mhz:g} MHz")
    left.set_title("sustained rate (Verilator, SDRAM chip model)")
    left.legend(fontsize=8)
    for tb in dict.fromkeys(r[0] for r in line):
        pts = [r for r in line if r[0] == tb]
        right.plot([r[1] for r in pts], [r[3] / 1e6 for r in pts], label=f"GbE, {tb}-byte tuples")
    right.axhline(worst / 1e6, color="C3", label="SDRAM store, uniform over 10^6 keys")
    right.set_xscale("log")
    right.set_xlabel("tuples a packet")
    right.set_ylabel("M tuples/s")
    right.set_title("the worst case against the line")
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tuples", type=int, default=20000, help="tuples a point, after the warm-up")
    ap.add_argument(
        "--warmup",
        type=int,
        default=40000,
        help="tuples first, not counted (enough to fill the SDRAM store's 4,096 cache lines)",
    )
    ap.add_argument(
        "--keys",
        type=lambda s: [int(k) for k in s.split(",")],
        default=[1000, 10000, 100000, 1000000],
        help="distinct keys of each point, comma-separated",
    )
    ap.add_argument("--stores", nargs="+", default=list(STORES), choices=list(STORES))
    ap.add_argument(
        "--mhz",
        type=float,
        default=100.0,
        help="the engine's clock: the SDRAM store's controller is built for it",
    )
    ap.add_argument("--plot", metavar="PNG")
    ap.add_argument("--csv", metavar="CSV", help="write the points")
    args = ap.parse_args()

    nfa = nfacep.compile_text(QUERY)
    print(
        f"{args.tuples:,} tuples a point, full traffic, checked against the reference; "
        f"{args.mhz:g} MHz"
    )
    print(
        f"{'store':>6} {'keys':>9} {'kind':>8} {'drawn':>9} {'tuples/clk':>10} "
        f"{'M tuples/s':>10} {'drops':>7}"
    )
    with tempfile.TemporaryDirectory() as build:
        rows = measure(args, build)
    if args.csv:
        write_csv(args.csv, rows)
    sizes = sorted({tuple_bytes(nfa.program.schema), 11, 16})
    plotted = False
    for store in (s for s in args.stores if s.startswith("sdram")):
        worst = [r for r in rows if r["store"] == store and r["kind"] == "uniform"]
        if not worst:
            continue
        most = max(r["keys"] for r in worst)
        worst_rate = min(r["per_s"] for r in worst if r["keys"] == most)
        line = report_line(worst_rate, sizes, f"{store}, uniform over {most:,} keys")
        if args.plot and not plotted:
            plot(args.plot, rows, line, worst_rate, args.mhz)
            plotted = True


if __name__ == "__main__":
    main()
