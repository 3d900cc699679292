#!/usr/bin/env python3
"""Spark testbench throughput: tuples generated *with* their expected matches per second.

Runs `nfacep vectors` (generation, Parquet writing, expected matches with the reference
matcher, manifest) once per Spark master, each in a fresh process so every run starts its own
JVM, and prints a table: seconds per stage and tuples/s, JVM start-up excluded (it is shown
apart). Local mode on this machine; wall-clock on a shared machine, so read ratios, and the
load column: a local[2] run only scales when the second core is actually free.

    python benchmarks/spark_vectors.py                      # marathon, 10M tuples, local[1] and [2]
    python benchmarks/spark_vectors.py --tuples 1000000 --masters 'local[2]'

Default set-up: the marathon query (issue target: 10M tuples in under 5 minutes), 1,000
runners Zipf-skewed, `--partitions 1000` so the partitioner never fills and the expected
matches are computed per key in parallel (`--expected global` measures the exact single-task
pass instead).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


def child(args) -> None:
    sys.path.insert(0, str(ROOT))
    from nfacep.params import EngineParams
    from nfacep.spark_testbench import session, vectors, vectors_plan
    from nfacep.spark_testbench.generate import Options

    t0 = time.perf_counter()
    job = vectors_plan.prepare(
        args.query,
        Options(tuples=args.tuples, seed=args.seed, keys=args.keys),
        args.out,
        params=EngineParams(partitions=args.partitions),
        expected=args.expected,
    )
    prepare = time.perf_counter() - t0
    load = os.getloadavg()[0]
    t1 = time.perf_counter()
    spark, _ = session.session(args.child)
    startup = time.perf_counter() - t1
    try:
        m = vectors.run(spark, job)
    finally:
        spark.stop()
    load = (load + os.getloadavg()[0]) / 2
    print(
        json.dumps(
            {
                "master": args.child,
                "prepare": prepare,
                "startup": startup,
                "load": load,
                "tasks": m["run"]["tasks"],
                "mode": m["expected"]["mode"],
                "matches": m["counts"]["matches_total"],
                **m["run"]["seconds"],
            }
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--query", default=str(ROOT / "queries" / "marathon.sql"))
    ap.add_argument("--tuples", type=int, default=10_000_000)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=1000, help="partitioner capacity")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--expected", default="auto", choices=("auto", "partitioned", "global"))
    ap.add_argument("--masters", nargs="+", default=["local[1]", "local[2]"])
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--child", metavar="MASTER", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    rows = []
    for master in args.masters:
        work = tempfile.mkdtemp(prefix="nfacep-bench-")
        try:
            cmd = [
                sys.executable,
                __file__,
                "--child",
                master,
                "--out",
                f"{work}/v",
                "--query",
                args.query,
                "--tuples",
                str(args.tuples),
                "--keys",
                str(args.keys),
                "--partitions",
                str(args.partitions),
                "--seed",
                str(args.seed),
                "--expected",
                args.expected,
            ]
            proc = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True)
            rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    print(
        f"\n{pathlib.Path(args.query).name}: {args.tuples:,} tuples, {args.keys} keys, "
        f"--partitions {args.partitions}"
    )
    print(
        "| master | tasks | pass | JVM start s | generate s | match s | write s | total s | "
        "tuples/s | matches | speed-up | load |"
    )
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        rate = args.tuples / r["total"]
        speedup = rows[0]["total"] / r["total"]
        print(
            f"| {r['master']} | {r['tasks']} | {r['mode']} | {r['startup']:.1f} | "
            f"{r['generate']:.1f} | {r['match']:.1f} | {r['expected'] - r['match']:.1f} | "
            f"{r['total']:.1f} | "
            f"{rate / 1e6:.2f} M | {r['matches']:,} | {speedup:.2f} | {r['load']:.1f} |"
        )
    print(
        "load: the machine's 1-minute load average around the run (other processes "
        f"included); {os.cpu_count()} cores"
    )


if __name__ == "__main__":
    main()
