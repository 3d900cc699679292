"""What an engine reported, whichever engine it was: one result type, one writer, one report.

Every back-end (the reference matcher, the simulated gateware, a board over its link) returns a
:class:`Result`: the matches (one per tuple and query, sorted by ``seq`` then query name), the
dropped tuples, the engine's own counters where it has them, and what the back-end adds of its
own (:meth:`Result.details` for the summary, :meth:`Result.note` for the report line).
:func:`write` turns any of them into the match file and its JSON summary, whole or not at all;
:func:`report` prints the one-line report and the warnings.

Engines that emit match records (:class:`nfacep.wire.Record`) build their result with
:meth:`Result.from_records` (records decoded column-wise, a chunk at a time:
:meth:`Result.from_columns`, its one definition); :meth:`Result.records` goes the other way,
for models of an engine (the expected records of a simulation, the software board).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TextIO

import numpy as np

from .io.tuples import Tuples, format_value
from .measures import Measurer
from .nfa import Nfa
from .output import _umask, atomic_files, summary_path
from .params import EngineParams
from .schema import PartitionText, Program, partition_columns
from .settings import ParamValues
from .switched import switched_cells
from .wire import SEQ_BITS, Record, RecordColumns, key_raw, key_text, start_queries

__all__ = [
    "COUNTER_BITS",
    "MatchParts",
    "MatchRows",
    "Result",
    "Totals",
    "match_file",
    "match_folder",
    "partition_cells",
    "partition_columns",
    "report",
    "write",
]

#: Width of the engine's counters (``tuples``, ``matched``, ``drops``): they wrap around.
COUNTER_BITS = 32


@dataclass
class Result:
    """The matches and drops one engine reported for ``n`` tuples.

    ``queries[i]`` is the index into ``names`` (file order, which is also the query's bit in a
    match record) of the ``i``-th match, ``seqs[i]`` the 0-based position of its tuple and
    ``partitions[i]`` its partition value as a tuple file writes it (None without PARTITION;
    one text per field for a key of several, :data:`nfacep.schema.PartitionText`).
    Matches are sorted by ``seq``, then by query name.
    """

    n: int  #: input tuples
    names: tuple[str, ...]  #: query names, in file order
    seqs: np.ndarray  #: int64, the tuple of each match
    queries: np.ndarray  #: int64, the query of each match (index into ``names``)
    partitions: list[PartitionText]  #: the partition value of each match, as text
    drops: np.ndarray  #: int64, sorted: the dropped tuples
    params: EngineParams  #: the engine's parameters
    #: the engine's own counters at the end, where the back-end reads them (``tuples``,
    #: ``matched``: tuples with a match, ``drops``), each modulo ``2**COUNTER_BITS``
    counters: dict[str, int | None] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  #: the back-end's warnings, rendered
    #: set when the back-end completed but what it reported is wrong (e.g. a simulation that
    #: differs from the reference): :func:`nfacep.backend.run_files` raises it after writing
    failure: Exception | None = field(default=None, repr=False)
    #: the runtime parameters' values over the stream (None: the queries have none)
    values: ParamValues | None = None
    #: int64, where each match begins (the latest start of the runs that end at its tuple),
    #: -1 for a query that does not report start_seq; None when none does
    starts: np.ndarray | None = None
    #: for a piece of a longer stream, where the runs still in progress after it began
    #: (stream positions, of the queries that report starts): the tuples a later match's
    #: measures may read (:mod:`nfacep.measures`); None when no piece follows
    live: np.ndarray | None = None
    #: after a switch of queries on a programmable board (``nfacep load`` while a run
    #: streams): ``(first seq, Program)`` of each query file in force over these matches, in
    #: order (the matches from that seq on are that file's queries, its measures theirs);
    #: empty: the one file the match file was opened for (:func:`.switched.joined`)
    files: tuple[tuple[int, Program], ...] = ()

    #: the back-end's name, as the summary's ``backend`` says
    backend = "engine"

    @property
    def matches(self) -> list[tuple]:
        """``(seq, query name, partition text)`` of every match, in order; when a query
        reports start_seq, ``(seq, query name, partition text, start)`` (start None for the
        queries that do not)."""
        rows = zip(self.seqs.tolist(), self.queries.tolist(), self.partitions, strict=True)
        if self.starts is None:
            return [(int(s), self.names[q], p) for s, q, p in rows]
        return [
            (int(s), self.names[q], p, None if b < 0 else b)
            for (s, q, p), b in zip(rows, self.starts.tolist(), strict=True)
        ]

    @property
    def drop_seqs(self) -> list[int]:
        return self.drops.tolist()

    def count(self, name: str) -> int:
        """Matches of the query ``name``."""
        return int(np.count_nonzero(self.queries == self.names.index(name)))

    def details(self) -> dict:
        """What the back-end adds to the summary (JSON values)."""
        return {}

    def note(self) -> str:
        """What the back-end adds to the report line, inside brackets (empty: nothing)."""
        return ""

    def totals(self) -> Totals:
        """What the report line and the summary say of this result."""
        totals = Totals(self.names, self.params, self.values, self.backend)
        totals.add(self)
        return totals

    def summary(self, *, query_file: str | None, input: str | None) -> dict:
        """The JSON summary written beside the match file."""
        return self.totals().summary(query_file=query_file, input=input)

    def counter_warnings(self) -> list[str]:
        """Where the engine's counters disagree with what it reported."""
        return self.totals().counter_warnings()

    # --- records ---------------------------------------------------------------------------

    @classmethod
    def from_records(
        cls, nfa: Nfa, n: int, received: Iterable[Record], params: EngineParams, **fields
    ) -> Result:
        """The result of an engine that emitted the records ``received`` for ``n`` tuples.

        ``fields`` are the other fields of ``cls``. Raises ValueError for a record that cannot
        be one of this engine's (a tuple past the input, a partition value the key's type does
        not have); :meth:`from_columns` says more.
        """
        return cls.from_columns(
            nfa, n, RecordColumns.from_records(list(received)), params, **fields
        )

    @classmethod
    def from_columns(
        cls, nfa: Nfa, n: int, received: RecordColumns, params: EngineParams, **fields
    ) -> Result:
        """:meth:`from_records` of records held as columns (:class:`~nfacep.wire.RecordColumns`),
        converted column-wise. The records may be a part of a longer run's (a chunk of them,
        in order): their ``seq`` are positions in the whole stream, ``n`` its length, and
        the result holds the matches and drops of those records.

        Raises ValueError for the first record (in arrival order) that cannot be one of this
        engine's: a tuple past the input, a partition value the key's type does not have, a
        match that begins after its tuple.
        """
        key = nfa.program.key
        names = tuple(q.name for q in nfa.queries)
        by_name = sorted(range(len(names)), key=names.__getitem__)  # the bits in name order
        slot = {q: k for k, q in enumerate(start_queries(nfa))}  # its start in a record
        seq = received.seq.astype(np.int64) if len(received) else np.zeros(0, np.int64)
        # bit[i, j]: record i reports a match of query by_name[j]
        bit = np.zeros((len(received), len(names)), dtype=bool)
        for col, q in enumerate(by_name):
            bit[:, col] = _slice(received.matches, q, 1) != 0
        problems = []  # (record, order within it, message): the first one is raised
        past = np.flatnonzero(received.seq >= n)
        if len(past):
            k = int(past[0])
            problems.append((k, -1, f"a record names tuple {seq[k]}, but only {n} were sent"))
        record, j = np.nonzero(bit)  # by record, then in name order
        partitions: list[PartitionText] = [None] * len(record)
        if key.names and len(record):
            values, inverse = np.unique(received.partition[record], return_inverse=True)
            texts = np.empty(len(values), dtype=object)
            for v, raw in enumerate(values.tolist()):
                try:
                    texts[v] = key_text(key, raw)
                except ValueError as err:
                    k = int(record[np.flatnonzero(inverse == v)[0]])
                    problems.append((k, len(names), str(err)))
            partitions = texts[inverse].tolist()
        began = np.full(bit.shape, -1, dtype=np.int64)
        for q, s in slot.items():
            jq = by_name.index(q)
            began[:, jq] = _slice(received.starts, s * SEQ_BITS, SEQ_BITS).astype(np.int64)
            late = np.flatnonzero(bit[:, jq] & (began[:, jq] > seq))
            if len(late):
                k = int(late[0])
                problems.append(
                    (
                        k,
                        len(names) + 1 + jq,
                        f"a record says a match of {names[q]} at tuple {seq[k]} "
                        f"began at tuple {began[k, jq]}, after it",
                    )
                )
        if problems:
            raise ValueError(min(problems)[2])
        seqs = seq[record]
        queries = np.array(by_name, dtype=np.int64)[j]
        starts = began[record, j] if slot else None
        if len(seqs) > 1 and bool((seqs[1:] < seqs[:-1]).any()):
            order = np.argsort(seqs, kind="stable")  # name order within a tuple kept
            seqs, queries = seqs[order], queries[order]
            partitions = [partitions[i] for i in order.tolist()]
            starts = None if starts is None else starts[order]
        return cls(
            n=n,
            names=names,
            seqs=seqs,
            queries=queries,
            partitions=partitions,
            starts=starts,
            drops=np.sort(seq[received.dropped != 0]),
            params=params,
            **fields,
        )

    def records(self, nfa: Nfa, tuples: Tuples) -> list[Record]:
        """The records an engine emits for this result, in ``seq`` order (``tuples`` are the
        input, for the raw partition keys: the whole stream's, or the piece's whose first
        tuple is at ``tuples.offset``)."""
        key = nfa.program.key
        keys = key_raw(key, tuples).tolist() if key.names else None
        masks: dict[int, int] = {}
        starts: dict[int, int] = {}
        slot = {q: k for k, q in enumerate(start_queries(nfa))}
        began = self.starts.tolist() if self.starts is not None else [-1] * len(self.seqs)
        for s, q, b in zip(self.seqs.tolist(), self.queries.tolist(), began, strict=True):
            masks[s] = masks.get(s, 0) | 1 << q
            if q in slot:
                starts[s] = starts.get(s, 0) | b << (slot[q] * SEQ_BITS)
        drops = set(self.drop_seqs)
        return [
            Record(
                s,
                keys[s - tuples.offset] if keys else 0,
                masks.get(s, 0),
                int(s in drops),
                starts.get(s, 0),
            )
            for s in sorted(masks.keys() | drops)
        ]


def _slice(column: np.ndarray, at: int, width: int) -> np.ndarray:
    """Bits ``[at, at + width)`` of each value of a record column (uint64 or Python ints)."""
    if column.dtype != object and at + width > 64:
        column = column.astype(object)  # (numpy shifts no uint64 by 64 or more)
    return (column >> at) & ((1 << width) - 1)


@dataclass
class Totals:
    """What a run reported, counted rather than listed: all that the report line and the
    summary need. A stream matched in pieces adds each piece's :class:`Result` (:meth:`add`)
    and keeps these, not the matches, which went to the match file."""

    names: tuple[str, ...]  #: query names, in file order
    params: EngineParams
    values: ParamValues | None = None
    backend: str = "engine"
    n: int = 0  #: input tuples
    matches: int = 0  #: matches (one per tuple and query)
    matched: int = 0  #: tuples with a match
    counts: dict[str, int] = field(default_factory=dict)  #: matches of each query
    drops: list[np.ndarray] = field(default_factory=list)  #: the dropped tuples, piece by piece
    counters: dict[str, int | None] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    details: dict = field(default_factory=dict)
    note: str = ""

    def add(self, result: Result) -> None:
        """Count in ``result``: the next piece of the stream (or the whole of it). The
        back-end's counters, details and note are the latest piece's, and so are the engine's
        parameters (a board reports the ones it was built with)."""
        self.n += result.n
        self.matches += len(result.seqs)
        # distinct seqs by sorting: numpy 2's hashing np.unique is ~10x slower on 200k ints
        seqs = np.sort(result.seqs)
        self.matched += int(np.count_nonzero(seqs[1:] != seqs[:-1])) + (len(seqs) > 0)
        per_query = np.bincount(result.queries, minlength=len(result.names))
        for i, name in enumerate(result.names):  # (a switch of queries brings others: last)
            self.counts[name] = self.counts.get(name, 0) + int(per_query[i])
        self.names += tuple(name for name in result.names if name not in self.names)
        self.drops.append(result.drops)
        self.counters = result.counters
        self.warnings += result.warnings
        self.details, self.note = result.details(), result.note()
        self.backend, self.params = result.backend, result.params

    def count(self, name: str) -> int:
        """Matches of the query ``name``."""
        return self.counts.get(name, 0)

    @property
    def drop_seqs(self) -> list[int]:
        return [s for part in self.drops for s in part.tolist()]

    def summary(self, *, query_file: str | None, input: str | None) -> dict:
        """The JSON summary written beside the match file."""
        drops = self.drop_seqs
        return {
            "query_file": query_file,
            "input": input,
            "tuples": self.n,
            "matches": {name: self.count(name) for name in self.names},
            "drops": len(drops),
            "drop_seqs": drops,
            **self.params.as_dict(),
            "backend": self.backend,
            **self.details,
            **({"runtime_parameters": self.values.as_dict()} if self.values else {}),
        }

    def counter_warnings(self) -> list[str]:
        """Where the engine's counters disagree with what it reported."""
        seen = {
            "tuples": self.n,
            "matched": self.matched,
            "drops": sum(len(part) for part in self.drops),
        }
        what = {
            "tuples": "tuples taken",
            "matched": "tuples with a match",
            "drops": "dropped tuples",
        }
        out = []
        for name, value in seen.items():
            counted = self.counters.get(name)
            if counted is not None and counted != value % (1 << COUNTER_BITS):
                out.append(
                    f"warning: the engine counted {counted} {what[name]}, but {value} were reported"
                )
        return out


def partition_texts(nfa: Nfa, tuples: Tuples, seqs: np.ndarray) -> list[PartitionText]:
    """The partition value of the tuples ``seqs`` as text (None each without PARTITION)."""
    key = nfa.program.key
    if not key.names:
        return [None] * len(seqs)
    if len(key.names) == 1:
        ty = key.types[0]
        return [format_value(v, ty) for v in tuples.columns[key.names[0]][seqs]]
    chosen = Tuples({name: tuples.columns[name][seqs] for name in key.names}, len(seqs))
    return [key_text(key, raw) for raw in key_raw(key, chosen).tolist()]


def partition_cells(texts: list[PartitionText]) -> list[str | None]:
    """Partition texts each in one cell (the ``partition`` column of the Spark testbench's
    Parquet files): a key of several fields as its fields' texts joined as a CSV row
    (``3,x``; quoted where a text needs it), so that equal keys, and only they, have equal
    cells."""
    out: list[str | None] = []
    for t in texts:
        if isinstance(t, tuple):
            line = io.StringIO()
            csv.writer(line, lineterminator="").writerow(t)
            out.append(line.getvalue())
        else:
            out.append(t)
    return out


def write(
    result: Result,
    output: str,
    *,
    query_file: str | None = None,
    input: str | None = None,
    program: Program | None = None,
    tuples: Tuples | None = None,
) -> None:
    """Write the match CSV (``seq,query``, the partition columns of ``program``'s key
    (:func:`partition_columns`), then a column per measure of its queries, read from the input
    ``tuples``) to ``output`` and the summary beside it (:func:`nfacep.output.summary_path`):
    both or neither (a summary that cannot be written leaves the match file as it was)."""
    with match_file(output, program) as rows:
        rows.write(result, tuples)
        rows.finish(result.summary(query_file=query_file, input=input))


class MatchRows:
    """The rows of a match CSV as the matches come: :meth:`write` each result (a stream's
    pieces in order, each with its tuples), then :meth:`finish` with the summary
    (:func:`match_file`). The queries of ``program`` that have MEASURES add their columns
    (:func:`nfacep.measures.columns`), computed by one :class:`~nfacep.measures.Measurer`."""

    def __init__(self, f: TextIO, program: Program | None = None):
        self.measurer = None
        if program is not None and any(q.measures for q in program.queries):
            self.measurer = Measurer(program)
        key = program.partition_fields if program is not None else ()
        self.summary: dict | None = None
        self._f = f
        self.fed = 0  #: the tuples of the stream written so far
        #: the measurers of the files loaded during a run, by the seq they took over at
        self.measurers: dict[int, Measurer] = {}
        self._fields = len(key)  # a key of several fields: a column each
        self._csv = csv.writer(f, lineterminator="\n")
        names = [m.name for m in self.measurer.columns] if self.measurer else []
        #: the columns after ``seq``
        self._names = ["query", *partition_columns(key), *names]
        self._csv.writerow(["seq", *self._names])

    def write(
        self,
        result: Result,
        tuples: Tuples | None = None,
        cells: list[list[str]] | None = None,
    ) -> None:
        """The rows of ``result``'s matches, the matches of the next ``tuples`` of the stream
        (needed when the file has measures). ``cells``: the measure columns' texts, when they
        were computed already (by a :class:`~nfacep.measures.Measurer` where the matching ran:
        ``nfacep match --master``'s Spark tasks); ``tuples`` is then not needed."""
        columns = [
            [result.names[q] for q in result.queries.tolist()],
            *_key_columns(result.partitions, self._fields),
        ]
        if self.measurer is not None:
            if cells is None:
                assert tuples is not None, "measures are read from the input"
                if result.files:  # (a switch of queries cut it)
                    cells = switched_cells(self, result, tuples)
                else:
                    cells = self.measurer.cells(result, tuples)
            columns += cells
        self.fed += 0 if tuples is None else tuples.n
        self._write(result.seqs, columns)

    def _write(self, seqs, text: list[list[str]]) -> None:
        """The rows of ``seqs`` and the columns after ``seq`` (:attr:`_names`) as ``text``."""
        columns = [list(map(str, seqs.tolist())), *text]
        rows = len(columns[0])
        # joined as they are when no field needs quoting (the csv module's rule: a comma, a
        # quote or a line end in it), which the count of commas and line ends shows; else
        # through the csv module
        lines = "\n".join(map(",".join, zip(*columns, strict=True)))
        if (
            lines.count(",") == rows * (len(columns) - 1)
            and lines.count("\n") == rows - 1
            and '"' not in lines
            and "\r" not in lines
        ):
            if rows:
                self._f.write(lines)
                self._f.write("\n")
        else:
            self._csv.writerows(zip(*columns, strict=True))

    def finish(self, summary: dict) -> None:
        """The summary, written beside the rows when the block ends."""
        self.summary = summary


def _key_columns(partitions: list[PartitionText], fields: int) -> list[list[str]]:
    """The partition columns of the match rows: one, or one per field of a key of several."""
    if fields <= 1:
        return [["" if p is None else p for p in partitions]]  # type: ignore[misc]
    return [["" if p is None else p[i] for p in partitions] for i in range(fields)]


@contextlib.contextmanager
def match_file(output: str, program: Program | None = None) -> Iterator[MatchRows]:
    """The match CSV at ``output`` (the partition columns of ``program``'s key,
    :func:`partition_columns`, and its measure columns) and its summary,
    written as a :class:`MatchRows`: both appear when the block ends after
    :meth:`MatchRows.finish`, or neither does (an error or an interrupt in the block leaves
    the files as they were)."""
    with atomic_files([output, summary_path(output)], newline="") as (f, g):
        rows = MatchRows(f, program)
        yield rows
        if rows.summary is None:
            raise RuntimeError("a match file was left without its summary")
        json.dump(rows.summary, g, indent=2)
        g.write("\n")


class MatchParts(MatchRows):
    """The matches as a folder of Parquet part files, for results too big for one CSV
    (:func:`match_folder`): one part file per :meth:`write` (``part-00000.parquet``, … in
    ``seq`` order), its columns the match CSV's (docs/formats.md): ``seq`` (int64), ``query``,
    the partition columns and the measure columns, all text as the CSV writes them, null where
    the CSV has an empty cell."""

    def __init__(self, folder: str, program: Program | None = None):
        super().__init__(io.StringIO(), program)
        self.folder = folder
        self.parts = 0

    def _write(self, seqs, text: list[list[str]]) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        arrays = [pa.array(seqs, pa.int64())]
        arrays += [_nulls(pa.array(column, pa.string())) for column in text]
        table = pa.Table.from_arrays(arrays, names=["seq", *self._names])
        if table.num_rows or not self.parts:
            pq.write_table(table, os.path.join(self.folder, f"part-{self.parts:05d}.parquet"))
            self.parts += 1


def _nulls(text):
    """A text column with its empty cells null."""
    import pyarrow.compute as pc

    return pc.if_else(pc.equal(text, ""), None, text)


@contextlib.contextmanager
def match_folder(output: str, program: Program | None = None) -> Iterator[MatchParts]:
    """The matches as a Parquet folder at ``output`` (:class:`MatchParts`; new, or an empty
    folder) and the summary beside it (``output.summary.json``, as beside a match CSV): both
    appear when the block ends after :meth:`MatchParts.finish`, or neither does. A link to an
    empty folder stays: the folder it names is written."""
    import shutil
    import tempfile

    named = os.path.abspath(output)
    output = os.path.realpath(named)  # (a link is not a folder to remove and rename over)
    tmp = tempfile.mkdtemp(
        prefix=f".{os.path.basename(output)}.", suffix=".tmp", dir=os.path.dirname(output)
    )
    try:
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it private; publish it like any folder
        parts = MatchParts(tmp, program)
        yield parts
        if parts.summary is None:
            raise RuntimeError("a match folder was left without its summary")
        if os.path.isdir(output) and not os.listdir(output):
            os.rmdir(output)
        os.rename(tmp, output)
        try:
            with atomic_files([summary_path(named)]) as (g,):
                json.dump(parts.summary, g, indent=2)
                g.write("\n")
        except BaseException:
            shutil.rmtree(output, ignore_errors=True)
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def report(
    result: Result | Totals,
    output: str | None,
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> None:
    """Print what a command prints after a run: the counts on ``out`` (stdout), the warnings
    (the back-end's, the drops, counters that disagree) on ``err`` (stderr)."""
    out = out or sys.stdout
    err = err or sys.stderr
    result = result.totals() if isinstance(result, Result) else result
    counts = ", ".join(f"{name}: {result.count(name)}" for name in result.names)
    note = result.note
    drops = result.drop_seqs
    print(
        f"{result.n} tuples, {result.matches} matches ({counts}), {len(drops)} "
        f"dropped -> {output}{f' [{note}]' if note else ''}",
        file=out,
    )
    for warning in result.warnings + result.counter_warnings():
        print(warning, file=err)
    if drops:
        shown = ", ".join(str(s) for s in drops[:10]) + (" …" if len(drops) > 10 else "")
        p = result.params
        full = (
            f"a bucket full, --store {p.store} --partitions {p.partitions} --ways {p.ways}"
            if p.tabled
            else f"partitioner full, --partitions {p.partitions}"
        )
        print(f"warning: {len(drops)} tuples dropped ({full}) at seq {shown}", file=err)
