#!/usr/bin/env python3
"""``nfacep match`` on long streams: peak memory and rate, in pieces and in one (issue 15).

Writes the synthetic race of ``reference_throughput.py`` (marathon query, runners passing the
five checkpoints in order, about 2% skipping one) to a Parquet file, and with ``--csv`` also
to a CSV file, piece by piece so that the generator itself stays small; then runs ``nfacep
match`` on it as a separate process, once per ``--chunk`` value, and reads the process's peak
resident memory from the kernel (``wait4``'s ``ru_maxrss``). The anchor is the same command in
one piece (``--chunk`` at least the tuples), run where it fits (``--whole-up-to``): its peak
grows with the input, the pieces' should not. Every run at one size must write the same match
file as the first (compared byte for byte), or the script stops.

    python benchmarks/reference_memory.py --tuples 1000000 10000000 100000000

Wall-clock on a shared machine: the rates are for orientation, the memory is the point.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

ROOT = pathlib.Path(__file__).resolve().parent.parent
QUERY = ROOT / "queries" / "marathon.sql"
LABELS = ("Staten Island", "Brooklyn", "Queens", "Bronx", "Manhattan")
PIECE = 1 << 22  # tuples generated at a time


def race_pieces(n: int, runners: int, seed: int):
    """The race as Arrow tables of up to PIECE tuples, in stream order: each runner's k-th
    reading is checkpoint k mod 5 (counted across the pieces), except ~2% skipped ones."""
    rng = np.random.default_rng(seed)
    passed = np.zeros(runners, dtype=np.int64)  # readings of each runner so far
    for start in range(0, n, PIECE):
        m = min(PIECE, n - start)
        runner = rng.integers(0, runners, m)
        order = np.argsort(runner, kind="stable")
        counts = np.bincount(runner, minlength=runners)
        heads = np.cumsum(counts) - counts
        rank = np.empty(m, dtype=np.int64)
        rank[order] = np.arange(m) - np.repeat(heads, counts)
        checkpoint = (passed[runner] + rank) % 5
        passed += counts
        skip = rng.random(m) < 0.02
        checkpoint = np.where(skip, (checkpoint + 1) % 5, checkpoint)
        yield pa.table(
            {
                "time": pa.array(np.arange(start, start + m, dtype=np.uint32)),
                "checkpoint": pa.DictionaryArray.from_arrays(
                    pa.array(checkpoint, pa.int8()), pa.array(LABELS)
                ),
                "runner": pa.array(runner.astype(np.uint16)),
                "speed": pa.array(rng.uniform(2.0, 6.0, m).astype(np.float32)),
            }
        )


def write_race(n: int, runners: int, seed: int, folder: pathlib.Path, csv: bool):
    """The race as a Parquet file (and a CSV file); their paths."""
    parquet = folder / f"race{n}.parquet"
    text = folder / f"race{n}.csv" if csv else None
    writer = None
    out = None
    try:
        for table in race_pieces(n, runners, seed):
            if writer is None:
                writer = pq.ParquetWriter(parquet, table.schema)
            writer.write_table(table, row_group_size=1 << 20)
            if text is not None:
                plain = table.set_column(
                    1, "checkpoint", table.column("checkpoint").cast(pa.string())
                )
                if out is None:
                    out = pacsv.CSVWriter(text, plain.schema)
                out.write_table(plain)
    finally:
        if writer is not None:
            writer.close()
        if out is not None:
            out.close()
    return parquet, text


def nfacep_match(data: pathlib.Path, output: pathlib.Path, chunk: int, partitions: int):
    """``nfacep match`` as its own process: (seconds, peak resident MB, its stdout line)."""
    argv = [
        sys.executable,
        "-c",
        "from nfacep.entry import main; main()",
        "match",
        str(QUERY),
        "--input",
        str(data),
        "--output",
        str(output),
        "--partitions",
        str(partitions),
        "--chunk",
        str(chunk),
    ]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)  # reaped here, with its own peak
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode:
            raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {err.read().strip()}")
        return seconds, usage.ru_maxrss / 1024, out.read().strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tuples", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--runners", type=int, default=1000)
    ap.add_argument(
        "--chunk",
        type=int,
        nargs="+",
        default=[1 << 20, 1 << 22],
        help="--chunk values to run (besides the anchor in one piece)",
    )
    ap.add_argument(
        "--whole-up-to",
        type=int,
        default=30_000_000,
        help="run the anchor in one piece up to this many tuples",
    )
    ap.add_argument("--csv", action="store_true", help="also from a CSV file")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    print(
        f"marathon query, {args.runners} runners (--partitions {args.runners}); peak: the "
        "process's resident memory"
    )
    print(
        f"{'tuples':>12} {'input':>8} {'chunk':>12} {'seconds':>8} {'tuples/s':>12} "
        f"{'peak MB':>8} {'MB / 1M tuples':>14}  report"
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp)
        for n in args.tuples:
            parquet, text = write_race(n, args.runners, args.seed, folder, args.csv)
            for data in filter(None, (parquet, text)):
                first = None
                chunks = [c for c in args.chunk if c < n]
                if n <= args.whole_up_to:
                    chunks.append(n)
                for chunk in chunks:
                    output = folder / f"m{n}_{chunk}.csv"
                    seconds, peak, line = nfacep_match(data, output, chunk, args.runners)
                    what = "one piece" if chunk >= n else f"{chunk:,}"
                    print(
                        f"{n:>12,} {data.suffix[1:]:>8} {what:>12} {seconds:>8.2f} "
                        f"{n / seconds:>12,.0f} {peak:>8,.0f} {peak / (n / 1e6):>14.1f}  "
                        f"{line.split(' -> ')[0]}",
                        flush=True,
                    )
                    if first is None:
                        first = output
                    elif not filecmp.cmp(first, output, shallow=False):
                        raise SystemExit(f"{output} differs from {first}")
                    else:
                        output.unlink()
            for data in filter(None, (parquet, text)):
                data.unlink()


if __name__ == "__main__":
    main()
