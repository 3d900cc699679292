#!/usr/bin/env python3
"""Reference-matcher throughput on the marathon query (issue: >= 1M tuples/s on one core).

Generates a synthetic race in memory (runners pass the five checkpoints in order, a few skip
one), then times the three stages separately: predicate evaluation, partitioner model and NFA
run, and the whole `reference.run`. Prints a table; `--plot F` draws tuples/s against tuple
count. Wall-clock on a shared machine: run it a few times and read ratios, not single values.

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


def measure(nfa, tuples, partitions: int, repeat: int):
    best = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = reference.run(nfa, tuples, EngineParams(partitions=partitions))
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
    print(f"marathon query, {args.partitions} runners, --partitions {args.partitions}, "
          f"best of {args.repeat}")
    print(f"{'tuples':>12} {'seconds':>9} {'tuples/s':>12} {'matches':>9} {'drops':>6}")
    rows = []
    for n in args.tuples:
        tuples = race(n, args.partitions, args.seed)
        seconds, result = measure(nfa, tuples, args.partitions, args.repeat)
        rate = n / seconds
        rows.append((n, seconds, rate))
        print(f"{n:>12,} {seconds:>9.3f} {rate:>12,.0f} {len(result.seqs):>9,} "
              f"{len(result.drops):>6}")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot([r[0] for r in rows], [r[2] for r in rows], "o-", label="reference matcher")
        ax.axhline(1e6, color="grey", linestyle="--", label="target 1M tuples/s")
        ax.set_xscale("log")
        ax.set_xlabel("tuples")
        ax.set_ylabel("tuples per second (one core)")
        ax.set_title(f"marathon, {args.partitions} partitions")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
