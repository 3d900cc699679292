#!/usr/bin/env python3
"""CSV input: ``nfacep match`` and its reader against pyarrow's CSV reader (issue 30).

Writes marathon-like CSV files (the synthetic race of ``reference_throughput.py``: the
readings of ``--runners`` runners interleaved, each passing the boroughs in order, about 2%
skipping one; generated and written 10^7 rows at a time, so 10^8 rows fit in memory) and,
side by side in one process, for each file:

- *pyarrow*: ``pyarrow.csv.read_csv`` (multithreaded, its default) with the stream's column
  types (``time`` uint32, ``checkpoint`` string, ``runner`` uint16, ``speed`` float32): the
  time to have the file in memory as typed columns, with none of nfacep's checks;
- *reader*: nfacep's reader alone (``nfacep.backend.read_stream``, what ``match`` reads
  with: pieces growing from 65,536 tuples to ``--chunk``, shrinking again towards the end of
  the file, every value checked and converted, ORDER BY checked);
- *match*: ``nfacep match queries/marathon.sql --store pipeline --partitions R`` (its
  Python entry, ``nfacep.cli.main``, in this process; start-up and imports are not timed),
  from the CSV file to the match file and its summary.

With ``--master URL`` (e.g. ``local[2]``) a second table: ``nfacep match --master URL
--tasks T`` (in this process, on one Spark session started before anything is timed) on the
CSV file (numbered in Spark tasks a block of lines each, parsed as ``match`` parses them) and
on the same rows as a folder of Parquet part files (10^6 rows each, row groups of 2^18 rows),
against pyarrow's read of the CSV file (as above) and the local ``match`` of it.

Ratios are times over pyarrow's for the same file in the same run (issue 30's goal: match
within 1.5×). Each time is the best of ``--repeat``, the three taking turns (pyarrow, the
reader, match, then pyarrow again: a burst of load on a shared machine falls on all three
alike): wall-clock, and the CPU time of the process (all its threads; on a shared machine
the wall-clock time moves with the load, the CPU time much less). Start-up and imports are
not timed, and the reference's compiled loops are loaded before anything is (a DFA run once
in them): the figures are those of a process that has run a match before.

With ``--exact-pieces`` a table of ``match`` against itself with its pieces as before they
ended with the blocks towards the end of the file (all of their sizes, the last told by being
shorter; the partitioner's helpers in numpy on short pieces), the two and pyarrow's read
taking turns ``--repeat`` times in this process (the two in either order every other turn):
an A/B of that round's change that the load of a shared machine falls on alike (the match
files compared). ``--eager-columns`` makes such a table of ``match`` against itself with
every column of a piece copied as the piece is made, all in one allocation, as before a
column was copied when first read (a field the query does not read, marathon's ``time`` and
``speed``, then copied too); ``--seek-quotes``, with pyarrow's parser looking for quotes in
every block, as before a block without a ``"`` was parsed with the parser told it has none.

A further table (``--fresh``, the default up to 10^7 rows): what a user times, each command
as a new process (its start-up and imports included): ``nfacep match`` (as above) and a
Python script that imports pyarrow and reads the file as *pyarrow* above; the median of
``--repeat`` runs, wall-clock and CPU (user + system of the child). With ``--rev REV`` it
also times the ``match`` of that git revision (its tree exported by ``revision.export`` and
put first on ``PYTHONPATH``, as ``startup.py --rev`` does), in the same turns, and checks that
its match file is the same byte for byte: an A/B of start-up. The files are removed at the end
(``--keep`` keeps them).

    python benchmarks/csv_read.py --rows 1000000 10000000 100000000
    python benchmarks/csv_read.py --rows 1000000 10000000 --master 'local[2]'
    python benchmarks/csv_read.py --rows 10 1000000 --repeat 15 --rev 6beed2a
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import pathlib
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from unittest import mock

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from reference_throughput import LABELS, QUERY, race

from nfacep import cli
from nfacep.backend import read_stream
from nfacep.limits import CHUNK, FIRST_PIECE
from nfacep.output import summary_path
from nfacep.params import EngineParams
from nfacep.reference import matcher
from nfacep.reference.loops import loops

#: rows generated and written at a time
BLOCK = 10_000_000

#: the stream's types, as pyarrow's reader is told them
TYPES = {
    "time": pa.uint32(),
    "checkpoint": pa.string(),
    "runner": pa.uint16(),
    "speed": pa.float32(),
}


#: rows of a Parquet part file (``--master``), and of its row groups
PART, GROUP = 1_000_000, 1 << 18


def write_race(
    path: pathlib.Path,
    rows: int,
    runners: int,
    seed: int,
    quote: bool,
    parts: pathlib.Path | None = None,
) -> None:
    """``rows`` readings as CSV, ``BLOCK`` at a time (each block its own race, its ``time``
    going on from the block before); the same rows in Parquet part files of ``PART`` rows in
    the folder ``parts``, when given."""
    labels = pa.array(LABELS)
    style = "needed" if quote else "none"
    schema = pa.schema(list(TYPES.items()))
    options = pacsv.WriteOptions(quoting_style=style)
    if parts is not None:
        parts.mkdir()
    with pacsv.CSVWriter(str(path), schema, write_options=options) as out:
        for at in range(0, rows, BLOCK):
            n = min(BLOCK, rows - at)
            c = race(n, runners, seed + at // BLOCK).columns
            table = pa.table(
                {
                    "time": pa.array(c["time"] + np.uint64(at), pa.uint32()),
                    "checkpoint": labels.take(pa.array(c["checkpoint"])),
                    "runner": pa.array(c["runner"], pa.uint16()),
                    "speed": pa.array(c["speed"]),
                },
                schema=schema,
            )
            out.write_table(table)
            for i in range(0, n, PART) if parts is not None else ():
                name = parts / f"part-{(at + i) // PART:05d}.parquet"
                pq.write_table(table.slice(i, PART), name, row_group_size=GROUP)


def best(repeat: int, job) -> tuple[float, float]:
    """The wall-clock time of the fastest of ``repeat`` runs of ``job`` and the CPU time of
    the process (every thread) in the run that used least."""
    return best_of(repeat, [job])[0]


def best_of(repeat: int, jobs) -> list[tuple[float, float]]:
    """:func:`best` of each of ``jobs``, run in turn ``repeat`` times (the first job, the
    second, …, then the first again), so that a burst of load on a shared machine falls on
    all of them alike rather than on one job's runs."""
    walls, cpus = turns(repeat, jobs)
    return [(min(w), min(c)) for w, c in zip(walls, cpus, strict=True)]


def turns(repeat: int, jobs, swap: bool = False) -> tuple[list[list[float]], list[list[float]]]:
    """The wall-clock and CPU times of each run of each of ``jobs``, run in turn ``repeat``
    times (:func:`best_of`); ``swap``: every other turn runs the jobs after the first in the
    opposite order (which job follows which changes its time by some milliseconds)."""
    walls: list[list[float]] = [[] for _ in jobs]
    cpus: list[list[float]] = [[] for _ in jobs]
    for turn in range(repeat):
        order = list(zip(jobs, walls, cpus, strict=True))
        if swap and turn % 2:
            order = order[:1] + order[:0:-1]
        for job, wall, cpu in order:
            start, used = time.perf_counter(), time.process_time()
            job()
            wall.append(time.perf_counter() - start)
            cpu.append(time.process_time() - used)
    return walls, cpus


def pyarrow_read(path: pathlib.Path) -> None:
    pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(column_types=TYPES))


def nfacep_read(nfa, path: pathlib.Path, chunk: int) -> None:
    for _ in read_stream(str(path), nfa, chunk, min(chunk, FIRST_PIECE)):
        pass


def nfacep_match(
    path: pathlib.Path, output: pathlib.Path, runners: int, chunk: int, *more: str
) -> None:
    argv = ["match", str(QUERY), "--input", str(path), "--output", str(output)]
    argv += ["--store", "pipeline", "--partitions", str(runners), "--chunk", str(chunk), *more]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        if cli.main(argv) != 0:
            raise SystemExit(f"nfacep match failed on {path}")


def exact_pieces(path: pathlib.Path, output: pathlib.Path, runners: int, chunk: int) -> None:
    """:func:`nfacep_match` with the pieces ``match`` read before they ended with the blocks
    towards the end of a CSV file (``--exact-pieces``): all of their sizes, the last told by
    being shorter (``backend.read_pieces``), and the partitioner's helpers in numpy below
    ``LOOPS_FROM`` elements whether or not their loops have run."""
    from nfacep import backend
    from nfacep.io.tuples import piece_sizes
    from nfacep.reference import loops as loops_mod

    def stream(path, nfa, rows, first=None):
        sizes = piece_sizes(rows, first)
        for piece in backend.read_pieces(path, nfa, rows, first):
            yield piece, piece.n < next(sizes)

    saved = backend.read_stream, loops_mod.ready
    backend.read_stream, loops_mod.ready = stream, lambda name: False
    try:
        nfacep_match(path, output, runners, chunk)
    finally:
        backend.read_stream, loops_mod.ready = saved


def eager_columns(path: pathlib.Path, output: pathlib.Path, runners: int, chunk: int) -> None:
    """:func:`nfacep_match` with every column of a piece copied as the piece is made, all in
    one allocation (widest first), as ``match`` read before a column was copied when first
    read (``--eager-columns``)."""
    from nfacep.io import reader
    from nfacep.io.tuples import Tuples, column_dtype

    def joined(held, n, offset, source, schema):
        dtypes = {f.name: column_dtype(f.type) for f in schema.fields}
        names = sorted(dtypes, key=lambda name: -dtypes[name].itemsize)
        memory = np.empty(n * sum(d.itemsize for d in dtypes.values()), dtype=np.uint8)
        columns, at = {}, 0
        for name in names:
            dtype = dtypes[name]
            column = memory[at : at + n * dtype.itemsize].view(dtype)
            np.concatenate([t.columns[name] for t in held], out=column)
            columns[name] = column
            at += n * dtype.itemsize
        columns = {f: columns[f] for f in schema.names}
        return Tuples(columns, n, source.path, None, offset, source.at(offset))

    with mock.patch.object(reader, "joined", joined):
        nfacep_match(path, output, runners, chunk)


def seek_quotes(path: pathlib.Path, output: pathlib.Path, runners: int, chunk: int) -> None:
    """:func:`nfacep_match` with pyarrow's parser looking for quotes in every block, as
    ``match`` parsed a block without any before it told the parser so (``--seek-quotes``)."""

    def options(*args, **kwargs):
        if kwargs.get("quote_char") is False:  # (told there are none: quotes sought)
            kwargs["quote_char"] = '"'
        return parse_options(*args, **kwargs)

    parse_options = pacsv.ParseOptions
    with mock.patch.object(pacsv, "ParseOptions", options):
        nfacep_match(path, output, runners, chunk)


#: The A/B tables: option, ``match`` as before, and what was before.
BEFORE = {
    "exact_pieces": (exact_pieces, "the pieces as before (`--exact-pieces`)"),
    "eager_columns": (
        eager_columns,
        "every column copied as the piece is made (`--eager-columns`)",
    ),
    "seek_quotes": (
        seek_quotes,
        "pyarrow's parser looking for quotes in every block (`--seek-quotes`)",
    ),
}


def exact_row(args, rows: int, path: pathlib.Path, output: pathlib.Path, option: str) -> str:
    """The row of an A/B table (:data:`BEFORE`: ``--exact-pieces``, ``--eager-columns``,
    ``--seek-quotes``):
    pyarrow's read, ``match`` and ``match`` as before, taking turns ``--repeat`` times in this
    process; best of each, and the median over pyarrow's median in brackets. The two match
    files must be the same."""
    before = BEFORE[option][0]
    exact_output = output.with_name(f"before-{output.name}")
    jobs = [
        lambda: pyarrow_read(path),
        lambda: nfacep_match(path, output, args.runners, args.chunk),
        lambda: before(path, exact_output, args.runners, args.chunk),
    ]
    walls, cpus = turns(args.repeat, jobs, swap=True)
    if output.read_bytes() != exact_output.read_bytes():
        raise SystemExit(f"match as before ({option}) wrote another match file")
    for p in (exact_output, pathlib.Path(summary_path(str(exact_output)))):
        p.unlink(missing_ok=True)
    (ref, ref_cpu), (m, m_cpu), (e, e_cpu) = [
        (min(w), min(c)) for w, c in zip(walls, cpus, strict=True)
    ]
    med = [statistics.median(w) for w in walls]
    cpu_med = [statistics.median(c) for c in cpus]
    return (
        f"| {rows:,} | {ref:.3f} | {m:.3f} | **{m / ref:.2f}×** ({med[1] / med[0]:.2f}×) "
        f"| {e:.3f} | **{e / ref:.2f}×** ({med[2] / med[0]:.2f}×) "
        f"| {ref_cpu:.3f} | {m_cpu:.3f} ({cpu_med[1]:.3f}) | {e_cpu:.3f} ({cpu_med[2]:.3f}) "
        f"| {m_cpu / ref_cpu:.2f}× | {e_cpu / ref_cpu:.2f}× |"
    )


#: A new process reading the file with pyarrow as :func:`pyarrow_read` does.
PYARROW_SCRIPT = (
    "import sys, pyarrow as pa, pyarrow.csv as pacsv\n"
    "types = {'time': pa.uint32(), 'checkpoint': pa.string(), 'runner': pa.uint16(), "
    "'speed': pa.float32()}\n"
    "pacsv.read_csv(sys.argv[1], convert_options=pacsv.ConvertOptions(column_types=types))\n"
)

#: A new process running ``nfacep match`` (the arguments after the script's name).
MATCH_SCRIPT = "import sys; from nfacep.entry import main; sys.exit(main())"


def in_process(
    argv: list[str], cwd: pathlib.Path, env: dict[str, str] | None = None
) -> tuple[float, float]:
    """The wall-clock and CPU time (user + system) of a new Python process running
    ``argv``, started in ``cwd`` (so that ``PYTHONPATH``, this process's or ``env``'s,
    decides which nfacep it imports, not the current folder)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, *argv], cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def fresh(args, rows: int, path: pathlib.Path, output: pathlib.Path) -> str:
    """The row of the fresh-process table for one file: pyarrow's read and ``nfacep
    match`` each in new processes, alternated, medians of ``--repeat``; with ``--rev``,
    that revision's ``match`` too, in the same turns, its match file compared."""

    def match(out: pathlib.Path) -> list[str]:
        argv = ["-c", MATCH_SCRIPT, "match", str(QUERY), "--input", str(path)]
        return [
            *argv,
            "--output",
            str(out),
            "--store",
            "pipeline",
            "--partitions",
            str(args.runners),
        ]

    jobs: dict[str, tuple[list[str], dict[str, str] | None]] = {
        "pyarrow": (["-c", PYARROW_SCRIPT, str(path)], None),
        "match": (match(output), None),
    }
    rev_output = output.with_name(f"rev-{output.name}")
    if args.rev_path is not None:
        jobs["rev"] = (match(rev_output), {**os.environ, "PYTHONPATH": args.rev_path})
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in jobs}
    for _ in range(args.repeat):
        for k, (argv, env) in jobs.items():
            times[k].append(in_process(argv, path.parent, env))
    (ref, ref_cpu), (m, m_cpu), *rev = (
        tuple(statistics.median(t[i] for t in times[k]) for i in (0, 1)) for k in jobs
    )
    row = (
        f"| {rows:,} | {ref:.2f} | {m:.2f} | **{m / ref:.2f}×** "
        f"| {ref_cpu:.2f} | {m_cpu:.2f} | {m_cpu / ref_cpu:.2f}× |"
    )
    if rev:
        if rev_output.read_bytes() != output.read_bytes():
            sys.exit(f"{rows} rows: the match files of {args.rev} and of this tree differ")
        rev_output.unlink()
        pathlib.Path(summary_path(str(rev_output))).unlink(missing_ok=True)
        ((r, r_cpu),) = rev
        row += f" {r:.2f} | {r / ref:.2f}× | {r_cpu:.2f} | {r_cpu / ref_cpu:.2f}× |"
    return row


def warm_loops(nfa) -> None:
    """The reference's compiled loops loaded (a DFA run once in them), as in a process that
    has run a match before; nothing without numba."""
    if loops() is not None:
        matcher.run(nfa, race(1000, 10, 0), EngineParams(partitions=10), compiled=True)


def on_spark(args, rows: int, path: pathlib.Path, parts: pathlib.Path, local: float) -> str:
    """The row of the ``--master`` table for one file: ``match --master`` on the CSV file and
    on its Parquet folder (their match files compared with the local one's), pyarrow's read
    of the CSV file, the local ``match`` of it (``local`` seconds)."""
    ref, _ = best(args.repeat, lambda: pyarrow_read(path))
    more = ["--master", args.master, "--tasks", str(args.tasks)]
    times = []
    for source in (path, parts):
        output = path.parent / f"spark-{source.name}.csv"
        times.append(
            best(
                args.repeat,
                lambda s=source, o=output: nfacep_match(s, o, args.runners, args.chunk, *more),
            )[0]
        )
        local_output = path.parent / f"matches-{rows}.csv"
        if output.read_bytes() != local_output.read_bytes():
            raise SystemExit(f"match --master on {source} differs from the local match")
        for p in (output, pathlib.Path(summary_path(str(output)))):
            p.unlink(missing_ok=True)
    csv, folder = times
    return (
        f"| {rows:,} | {ref:.2f} | {local:.2f} | {local / ref:.2f}× | {csv:.2f} | "
        f"**{csv / ref:.2f}×** | {folder:.2f} | {folder / ref:.2f}× | {csv / folder:.2f}× |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--runners", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3, help="best of N runs")
    ap.add_argument("--chunk", type=int, default=CHUNK, help="match's --chunk")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quote", action="store_true", help="quote the labels (as pyarrow does)")
    ap.add_argument("--dir", default=None, help="where the CSV files go (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the CSV files")
    ap.add_argument("--master", default=None, help="also match --master URL (e.g. local[2])")
    ap.add_argument("--tasks", type=int, default=2, help="with --master: match's --tasks")
    ap.add_argument(
        "--exact-pieces",
        action="store_true",
        help="also match with the pieces as before they ended with the blocks (A/B in turns)",
    )
    ap.add_argument(
        "--eager-columns",
        action="store_true",
        help="also match with every column copied as each piece is made (A/B in turns)",
    )
    ap.add_argument(
        "--seek-quotes",
        action="store_true",
        help="also match with pyarrow looking for quotes in every block, as before (A/B in turns)",
    )
    ap.add_argument(
        "--rev",
        default=None,
        help="the new-process table also times this git revision's match, in turns",
    )
    ap.add_argument(
        "--fresh",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also time new processes (default: for files of up to 10^7 rows)",
    )
    args = ap.parse_args()
    args.rev_path = None
    if args.master is not None:  # one session for every run, started before any is timed
        from nfacep.spark_testbench import session

        session.session(args.master, app_name="csv_read")

    nfa = cli.load_query(str(QUERY))
    warm_loops(nfa)
    with contextlib.ExitStack() as stack:
        if args.rev is not None:
            from revision import export  # (this folder is on sys.path)

            args.rev_path = export(args.rev, stack.enter_context(tempfile.TemporaryDirectory()))
        if args.dir is None:
            folder = pathlib.Path(stack.enter_context(tempfile.TemporaryDirectory()))
        else:
            folder = pathlib.Path(args.dir)
            folder.mkdir(parents=True, exist_ok=True)
        print(
            f"marathon CSV, {args.runners} runners, labels {'quoted' if args.quote else 'bare'}; "
            f"best of {args.repeat}; ratios: time over pyarrow's read of the same file"
        )
        print(
            "| rows | MB | pyarrow s | reader s | × | match s | × | match rows/s "
            "| CPU s: pyarrow | reader | × | match | × |"
        )
        print("| ---: " * 13 + "|")
        spark_rows, fresh_rows = [], []
        exact_rows: dict[str, list[str]] = {o: [] for o in BEFORE if getattr(args, o)}
        for rows in args.rows:
            path = folder / f"marathon-{rows}.csv"
            output = folder / f"matches-{rows}.csv"
            parts = folder / f"marathon-{rows}" if args.master is not None else None
            write_race(path, rows, args.runners, args.seed, args.quote, parts)
            try:
                size = os.path.getsize(path) / 1e6
                repeat = args.repeat if rows <= BLOCK else 1
                (ref, ref_cpu), (rd, rd_cpu), (m, m_cpu) = best_of(
                    repeat,
                    [
                        lambda p=path: pyarrow_read(p),
                        lambda p=path: nfacep_read(nfa, p, args.chunk),
                        lambda p=path, o=output: nfacep_match(p, o, args.runners, args.chunk),
                    ],
                )
                print(
                    f"| {rows:,} | {size:,.0f} | {ref:.3f} | {rd:.3f} | {rd / ref:.2f}× "
                    f"| {m:.3f} | **{m / ref:.2f}×** | {rows / m / 1e6:.2f} M "
                    f"| {ref_cpu:.3f} | {rd_cpu:.3f} | {rd_cpu / ref_cpu:.2f}× "
                    f"| {m_cpu:.3f} | {m_cpu / ref_cpu:.2f}× |",
                    flush=True,
                )
                for option, lines in exact_rows.items():
                    lines.append(exact_row(args, rows, path, output, option))
                if parts is not None:
                    spark_rows.append(on_spark(args, rows, path, parts, m))
                if args.fresh or (args.fresh is None and rows <= BLOCK):
                    fresh_rows.append(fresh(args, rows, path, output))
            finally:
                if not args.keep:
                    for p in (path, output, pathlib.Path(summary_path(str(output)))):
                        p.unlink(missing_ok=True)
                    if parts is not None:
                        shutil.rmtree(parts, ignore_errors=True)
        print_tables(args, exact_rows, fresh_rows, spark_rows)


def print_tables(
    args, exact_rows: dict[str, list[str]], fresh_rows: list[str], spark_rows: list[str]
) -> None:
    """The tables after the first: ``--exact-pieces``, ``--eager-columns``,
    ``--seek-quotes``, new processes, ``--master``."""
    for option, lines in exact_rows.items():
        print(
            f"\n`match` and `match` with {BEFORE[option][1]}, in turns with pyarrow's read, "
            f"{args.repeat} times: best, (median over pyarrow's median); CPU: best (median)"
        )
        print(
            "| rows | pyarrow s | match s | × | as before s | × "
            "| CPU s: pyarrow | match | as before | match × | as before × |"
        )
        print("| ---: " * 11 + "|")
        for line in lines:
            print(line)
    if fresh_rows:
        # nfacep's bytecode: a new process compiles its modules when none is written (a
        # checkout under PYTHONDONTWRITEBYTECODE); an installation has it (startup.py times both)
        bytecode = "none" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "cached"
        print(
            f"\nNew processes (start-up and imports included), median of {args.repeat}: "
            f"a script reading the file with pyarrow, and `nfacep match` (bytecode {bytecode})"
        )
        rev = "" if args.rev is None else f" match at {args.rev} s | × | CPU | × |"
        print(f"| rows | pyarrow s | match s | × | CPU s: pyarrow | match | × |{rev}")
        print("| ---: " * (7 if args.rev is None else 11) + "|")
        for line in fresh_rows:
            print(line)
    if spark_rows:
        print(
            f"\n`match --master {args.master} --tasks {args.tasks}`: on the CSV file and on "
            "its rows as a Parquet folder; ratios over pyarrow's read of the CSV file, the "
            "last the CSV file's time over the folder's"
        )
        print(
            "| rows | pyarrow s | local match s | × | Spark, CSV s | × "
            "| Spark, Parquet folder s | × | CSV / Parquet |"
        )
        print("| ---: " * 9 + "|")
        for line in spark_rows:
            print(line)


if __name__ == "__main__":
    main()
