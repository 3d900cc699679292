#!/usr/bin/env python3
"""Reference matcher against a Hyperscan pipeline on the marathon query (issue 15).

Generates a synthetic race (runners pass the five checkpoints in order, about 2% skip one) and
runs the same stream through nfacep and through a straightforward Hyperscan pipeline, side by
side, at each runner count (the partition keys) and tuple count:

- from memory: ``reference.run`` on columns already in memory, for each partition store (the
  pipeline with ``--partitions`` = runners; the table indexed directly by the 16-bit runner,
  65,536 entries; the table hashed into buckets of 4, which may drop tuples), against the
  Hyperscan pipeline on the same two columns;
- as whole commands: ``nfacep match`` (its Python entry, ``nfacep.cli.main``, in this process:
  interpreter start-up and imports are not timed, for either) from a Parquet file to the match CSV,
  against the Hyperscan pipeline reading the same Parquet file with pyarrow and writing the
  same CSV (``seq,query,partition``; nfacep also writes its JSON summary).

The Hyperscan pipeline: the seven predicates column-wise with numpy, packed into one byte per
tuple; the pattern as a regular expression whose variables are character classes over those
bytes; a stable argsort by runner (as a 16-bit integer, which numpy sorts by radix; from
memory also as the 64-bit column, a merge sort, as a first version would); one block-mode scan
per runner, collecting every match end. It models no partitioner, so its matches are compared
only with runs that drop nothing. Both must give identical matches (the CSV files byte for
byte); a difference stops the run.

Ratios are over the Hyperscan pipeline's rate (16-bit sort) on the same stream, from memory or
as a command. Each rate is the best of ``--repeat`` runs, in one process: the compiled loops of
the reference matcher are loaded by then (a fresh ``nfacep match`` process spends about 0.4 s
loading them). Wall-clock on a shared machine: read ratios, not single values.

    python benchmarks/reference_throughput.py --tuples 10000000 --runners 1000 65536
"""

from __future__ import annotations

import argparse
import contextlib
import io
import pathlib
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import nfacep
from nfacep import cli
from nfacep.io.tuples import Tuples
from nfacep.params import EngineParams
from nfacep.reference import matcher as reference

ROOT = pathlib.Path(__file__).resolve().parent.parent
QUERY = ROOT / "queries" / "marathon.sql"
LABELS = ("Staten Island", "Brooklyn", "Queens", "Bronx", "Manhattan")


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


def write_parquet(tuples: Tuples, path: pathlib.Path) -> None:
    """The race as a Parquet file: the checkpoint as its labels (dictionary-encoded)."""
    c = tuples.columns
    labels = pa.DictionaryArray.from_arrays(pa.array(c["checkpoint"], pa.int8()), pa.array(LABELS))
    pq.write_table(
        pa.table(
            {
                "time": pa.array(c["time"], pa.uint32()),
                "checkpoint": labels,
                "runner": pa.array(c["runner"], pa.uint16()),
                "speed": pa.array(c["speed"]),
            }
        ),
        path,
    )


# --- the Hyperscan pipeline ---------------------------------------------------------------

#: marathon's DEFINE, on the checkpoint's label index: (variable, predicate) in bit order
PREDICATES = (
    ("A", lambda c: c == 0),
    ("NOTB", lambda c: c != 1),
    ("C", lambda c: c == 2),
    ("NOTC", lambda c: c != 2),
    ("D", lambda c: c == 3),
    ("NOTD", lambda c: c != 3),
    ("E", lambda c: c == 4),
)
PATTERN = "{A}{NOTB}*{C}|{A}{NOTC}*{D}|{A}{NOTD}*{E}"


def hyperscan_database():
    """marathon's PATTERN over the predicate bytes: each variable is the class of the bytes
    that have its predicate's bit."""
    import hyperscan

    classes = {
        name: "[" + "".join(f"\\x{v:02x}" for v in range(128) if v >> bit & 1) + "]"
        for bit, (name, _) in enumerate(PREDICATES)
    }
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=[PATTERN.format(**classes).encode()], ids=[0], elements=1, flags=[0])
    return db


def hyperscan_run(db, checkpoint: np.ndarray, runner: np.ndarray, narrow: bool = True):
    """Every match end, per runner: (seqs ascending, their runners). ``narrow``: sort by the
    runner as a 16-bit integer (a radix sort), else as given (64-bit in memory: a merge
    sort)."""
    byte = np.zeros(len(checkpoint), dtype=np.uint8)
    for bit, (_, predicate) in enumerate(PREDICATES):
        byte |= predicate(checkpoint).astype(np.uint8) << np.uint8(bit)
    order = np.argsort(runner.astype(np.uint16) if narrow else runner, kind="stable")
    data = memoryview(byte[order].tobytes())
    counts = np.bincount(runner, minlength=1 << 16)
    bounds = np.cumsum(counts) - counts
    ends: list[int] = []

    def on_match(_id, _from, to, _flags, base):
        ends.append(base + to - 1)

    for k in np.flatnonzero(counts).tolist():
        start = int(bounds[k])
        db.scan(data[start : start + int(counts[k])], match_event_handler=on_match, context=start)
    seqs = np.sort(order[np.array(ends, dtype=np.int64)])
    return seqs, runner[seqs]


def hyperscan_command(db, parquet: pathlib.Path, output: pathlib.Path) -> None:
    """The Hyperscan pipeline as a command: Parquet in, the match CSV out."""
    table = pq.read_table(parquet, columns=["checkpoint", "runner"], read_dictionary=["checkpoint"])
    labels = table.column("checkpoint").combine_chunks()
    index = np.array([LABELS.index(s) for s in labels.dictionary.to_pylist()], dtype=np.int64)
    checkpoint = index[labels.indices.to_numpy()]
    runner = table.column("runner").to_numpy()
    seqs, keys = hyperscan_run(db, checkpoint, runner)
    with open(output, "w") as f:
        f.write("seq,query,partition\n")
        f.writelines(f"{s},cheat,{k}\n" for s, k in zip(seqs.tolist(), keys.tolist(), strict=True))


def nfacep_command(parquet: pathlib.Path, output: pathlib.Path, params: EngineParams) -> None:
    argv = [
        "match",
        str(QUERY),
        "--input",
        str(parquet),
        "--output",
        str(output),
        "--partitions",
        str(params.partitions),
    ]
    with contextlib.redirect_stdout(io.StringIO()):
        status = cli.main(argv)
    if status:
        raise SystemExit(f"nfacep {' '.join(argv)} exited {status}")


def best(repeat: int, job, *args) -> tuple[float, object]:
    """The shortest of ``repeat`` runs of ``job(*args)`` and its result."""
    seconds, out = None, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = job(*args)
        elapsed = time.perf_counter() - t0
        seconds = elapsed if seconds is None else min(seconds, elapsed)
    return seconds, out


def row(
    n: int,
    runners: int,
    what: str,
    seconds: float,
    base: float | None,
    matches: int,
    drops: int | str = "",
) -> float:
    """Print one line; returns the rate (tuples/s)."""
    rate = n / seconds
    ratio = f"{rate / base:5.2f}x" if base else ""
    print(
        f"{n:>12,} {runners:>7,} {what:>30} {seconds:>8.3f} {rate:>12,.0f} {ratio:>6} "
        f"{matches:>8,} {drops:>6}",
        flush=True,
    )
    return rate


def compare(nfa, db, n: int, runners: int, folder: pathlib.Path, args) -> None:
    """One stream through both, from memory and as commands; stops when they differ."""
    tuples = race(n, runners, args.seed)
    c = tuples.columns
    seconds, (hs_seqs, hs_keys) = best(args.repeat, hyperscan_run, db, c["checkpoint"], c["runner"])
    hs = row(n, runners, "hyperscan (memory)", seconds, None, len(hs_seqs))
    seconds, (seqs, _) = best(args.repeat, hyperscan_run, db, c["checkpoint"], c["runner"], False)
    row(n, runners, "hyperscan 64-bit sort (memory)", seconds, hs, len(seqs))
    if not np.array_equal(seqs, hs_seqs):
        raise SystemExit("the two Hyperscan pipelines differ")
    for name, params in stores(runners).items():
        seconds, r = best(args.repeat, reference.run, nfa, tuples, params)
        row(n, runners, f"nfacep {name} (memory)", seconds, hs, len(r.seqs), len(r.drops))
        if not len(r.drops) and (
            not np.array_equal(r.seqs, hs_seqs)
            or r.partitions != [str(k) for k in hs_keys.tolist()]
        ):
            raise SystemExit(f"nfacep ({name}) and Hyperscan differ")
    parquet = folder / "race.parquet"
    write_parquet(tuples, parquet)
    hs_csv, nf_csv = folder / "hyperscan.csv", folder / "nfacep.csv"
    seconds, _ = best(args.repeat, hyperscan_command, db, parquet, hs_csv)
    hs = row(n, runners, "hyperscan (command)", seconds, None, len(hs_seqs))
    seconds, _ = best(args.repeat, nfacep_command, parquet, nf_csv, stores(runners)["pipeline"])
    row(n, runners, "nfacep match (command)", seconds, hs, len(hs_seqs))
    if nf_csv.read_bytes() != hs_csv.read_bytes():
        raise SystemExit("the match files of nfacep and Hyperscan differ")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tuples", type=int, nargs="+", default=[10_000_000])
    ap.add_argument(
        "--runners",
        type=int,
        nargs="+",
        default=[1000, 65536],
        help="partition keys (and the pipeline's --partitions)",
    )
    ap.add_argument("--repeat", type=int, default=3, help="best of N runs")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    nfa = nfacep.compile_file(str(QUERY))
    db = hyperscan_database()
    print(f"marathon query, best of {args.repeat}; 'vs hs': the rate over Hyperscan's")
    print(
        f"{'tuples':>12} {'runners':>7} {'what':>30} {'seconds':>8} {'tuples/s':>12} "
        f"{'vs hs':>6} {'matches':>8} {'drops':>6}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.tuples:
            for runners in args.runners:
                compare(nfa, db, n, runners, pathlib.Path(tmp), args)


if __name__ == "__main__":
    main()
