#!/usr/bin/env python3
"""Reference-matcher throughput on the marathon query (issue: >= 1M tuples/s on one core).

Generates a synthetic race in memory (runners pass the five checkpoints in order, a few skip
one), then times the whole `reference.run` for each partition store side by side: the
pipeline (`--partitions` = runners), the table indexed directly by the 16-bit runner key
(65536 entries), and the table hashed into buckets (the next power of two above the runners,
4 ways). Prints a table with each store's rate relative to the pipeline's; `--plot F` draws
tuples/s against tuple count. Wall-clock on a shared machine: read ratios, not single values.

    python benchmarks/reference_throughput.py --tuples 10000000 --partitions 1000
"""

from __future__ import annotations

import argparse
import pathlib
import time

import numpy as np

import nfacep
from nfacep import reference
from nfacep.params import EngineParams
from nfacep.tuples import Tuples

ROOT = pathlib.Path(__file__).resolve().parent.parent


def race(n: int, runners: int, seed: int) -> Tuples:
    """n checkpoint readings of `runners` runners, interleaved; ~2% skip a borough."""
    rng = np.random.default_rng(seed)
    runner = rng.integers(0, runners, n).astype(np.uint64)
    # each runner's k-th reading is checkpoint k mod 5, except some skipped ones
    order = np.argsort(runner, kind="stable")
    rank = np.empty(n, dtype=np.int64)
    counts = np.bincount(runner.astype(np.int64), minlength=runners)
    starts = np.cumsum(counts) - counts
    rank[order] = np.arange(n) - np.repeat(starts, counts)
    checkpoint = rank % 5
    skip = rng.random(n) < 0.02
    checkpoint = np.where(skip, (checkpoint + 1) % 5, checkpoint).astype(np.int64)
    cols = {
        "time": np.arange(n, dtype=np.uint64),
        "checkpoint": checkpoint,
        "runner": runner,
        "speed": rng.uniform(2.0, 6.0, n).astype(np.float32),
    }
    return Tuples(cols, n, "<race>")


def stores(runners: int) -> dict[str, EngineParams]:
    entries = 1 << max(runners - 1, 1).bit_length()
    return {
        "pipeline": EngineParams(partitions=runners),
        "table direct": EngineParams(store="table", partitions=65536),
        "table hashed": EngineParams(store="table", partitions=min(entries, 32768), ways=4),
    }


def measure(nfa, tuples, params: EngineParams, repeat: int):
    best = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = reference.run(nfa, tuples, params)
        elapsed = time.perf_counter() - t0
        best = elapsed if best is None else min(best, elapsed)
    return best, result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tuples", type=int, nargs="+", default=[100_000, 1_000_000, 10_000_000])
    ap.add_argument("--partitions", type=int, default=1000, help="runners (and --partitions)")
    ap.add_argument("--repeat", type=int, default=3, help="best of N runs")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--plot", metavar="PNG")
    args = ap.parse_args()

    nfa = nfacep.compile_file(str(ROOT / "queries" / "marathon.sql"))
    engines = stores(args.partitions)
    print(f"marathon query, {args.partitions} runners, best of {args.repeat}")
    for name, params in engines.items():
        print(f"  {name:13} {params.options()}")
    print(f"{'tuples':>12} {'store':>13} {'seconds':>9} {'tuples/s':>12} {'vs pipeline':>11} "
          f"{'matches':>9} {'drops':>6}")
    rows: dict[str, list] = {name: [] for name in engines}
    for n in args.tuples:
        tuples = race(n, args.partitions, args.seed)
        base = None
        for name, params in engines.items():
            seconds, result = measure(nfa, tuples, params, args.repeat)
            rate = n / seconds
            base = base or rate
            rows[name].append((n, seconds, rate))
            print(f"{n:>12,} {name:>13} {seconds:>9.3f} {rate:>12,.0f} {rate / base:>10.2f}x "
                  f"{len(result.seqs):>9,} {len(result.drops):>6}")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        for name, points in rows.items():
            ax.plot([r[0] for r in points], [r[2] for r in points], "o-", label=name)
        ax.axhline(1e6, color="grey", linestyle="--", label="target 1M tuples/s")
        ax.set_xscale("log")
        ax.set_xlabel("tuples")
        ax.set_ylabel("tuples per second (one core)")
        ax.set_title(f"reference matcher, marathon, {args.partitions} runners")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
