#!/usr/bin/env python3
"""`nfacep match --master local[2]` against the local `nfacep match`, side by side in one run.

For each size it writes the marathon race (`reference_memory.race_pieces`: 1,000 runners by
default) as a folder of Parquet part files (4M tuples each), then runs, each in a fresh process
(the Spark one with its own JVM):

- `nfacep match queries/marathon.sql --input F --output local.csv --store pipeline
  --partitions R`;
- the same with `--master local[2] --tasks T` (default 2), which reads and numbers the tuples
  in Spark tasks, matches them in T Spark tasks (the partitioned pass: as many partitions as
  runners, no ticks) and writes the same files.

A thread samples /proc every 0.1 s for each command's processes (`regress_memory.Peaks`): the
peak resident memory (VmHWM) of the command's Python process (the driver, or the local
command), of the Spark Python workers (the largest one, and their sum) and of the JVM. The
two match files must be equal, byte for byte, and the summaries equal but for the `spark`
entry; the script stops if not. The Spark command's phases come from its progress lines
(`read`: read and numbered in tasks, `matched` in the tasks) and give the per-task rate, from
which the table says what n workers would take (everything else as measured).

    python benchmarks/match_master.py                    # 10^7 tuples
    python benchmarks/match_master.py --sizes 100000000  # 10^8 (about 1.4 GB of Parquet)
"""

from __future__ import annotations

import argparse
import filecmp
import json
import pathlib
import re
import subprocess
import sys
import tempfile
import time

import pyarrow.parquet as pq
from reference_memory import QUERY, race_pieces
from regress_memory import Peaks

PHASE = re.compile(r"match: ([\d,]+) (?:of [\d,]+ )?tuples (read from \S+|matched) .*?in (.+?), ")


def seconds(text: str) -> float:
    """``"3 min 5 s"`` → 185."""
    units = {"h": 3600, "min": 60, "s": 1}
    parts = text.split()
    return float(sum(int(v) * units[u] for v, u in zip(parts[::2], parts[1::2], strict=True)))


def write_folder(n: int, runners: int, folder: pathlib.Path) -> pathlib.Path:
    parts = folder / f"race{n}"
    parts.mkdir()
    for i, table in enumerate(race_pieces(n, runners, seed=1)):
        pq.write_table(table, parts / f"part-{i:05d}.parquet")
    return parts


def run(args: list[str]) -> tuple[float, dict, str]:
    """``nfacep ARGS`` in a fresh process: seconds, memory peaks, stderr."""
    code = "import sys; from nfacep.cli import main; sys.exit(main(sys.argv[1:]))"
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", code, *args], stdout=subprocess.DEVNULL, stderr=err
        )
        peaks = Peaks(proc.pid)
        rc = proc.wait()
        took = time.perf_counter() - t0
        mb = peaks.stop()
        err.seek(0)
        text = err.read().decode(errors="replace")
    if rc:
        raise SystemExit(f"nfacep {' '.join(args)} failed ({rc}):\n{text[-3000:]}")
    return took, mb, text


def compare(folder: pathlib.Path) -> None:
    if not filecmp.cmp(folder / "local.csv", folder / "spark.csv", shallow=False):
        raise SystemExit("the match files differ")
    local = json.loads((folder / "local.summary.json").read_text())
    spark = json.loads((folder / "spark.summary.json").read_text())
    note = spark.pop("spark")
    if local != spark:
        raise SystemExit("the summaries differ")
    if note["pass"] != "partitioned":
        raise SystemExit(f"expected the partitioned pass, got {note}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[10_000_000])
    p.add_argument("--runners", type=int, default=1000)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--tasks", type=int, default=2)
    args = p.parse_args()
    engine = ["--store", "pipeline", "--partitions", str(args.runners)]
    print(
        "| tuples | command | seconds | tuples/s | peak MB: command | worker (max) | "
        "workers (sum) | JVM |\n| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
    )
    notes = []
    for n in args.sizes:
        with tempfile.TemporaryDirectory(prefix="match-master-") as tmp:
            folder = pathlib.Path(tmp)
            parts = write_folder(n, args.runners, folder)
            base = ["match", str(QUERY), "--input", str(parts)]
            local = run([*base, "--output", str(folder / "local.csv"), *engine])
            spark = run(
                [
                    *base,
                    "--output",
                    str(folder / "spark.csv"),
                    *engine,
                    "--master",
                    args.master,
                    "--tasks",
                    str(args.tasks),
                ]
            )
            compare(folder)
        for name, (took, mb, _) in (
            ("`nfacep match`", local),
            (f"`match --master {args.master} --tasks {args.tasks}`", spark),
        ):
            print(
                f"| {n:,} | {name} | {took:.1f} | {n / took / 1e6:.2f} M | {mb['driver']:.0f} | "
                f"{mb['worker_max']:.0f} | {mb['workers']:.0f} | {mb['jvm']:.0f} |"
            )
        phases = {m.group(2).split()[0]: seconds(m.group(3)) for m in PHASE.finditer(spark[2])}
        read, matched = phases.get("read"), phases.get("matched")
        if read and matched:
            per_task = n / matched / args.tasks
            rest = spark[0] - matched
            guess = ", ".join(f"{w}: {rest + n / (per_task * w):.0f} s" for w in (4, 16, 64))
            notes.append(
                f"{n:,} tuples: read and numbered in {read:.0f} s ({n / read / 1e6:.2f} M/s), "
                f"tasks matched in {matched:.0f} s ({per_task / 1e6:.2f} M tuples/s per task), "
                f"the rest (the read above, Spark's start, sorting and writing the matches) "
                f"{rest:.0f} s; with n one-core workers at that rate, everything else as "
                f"here: {guess}"
            )
    print()
    for line in notes:
        print(f"- {line}")


if __name__ == "__main__":
    main()
