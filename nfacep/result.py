"""What an engine reported, whichever engine it was: one result type, one writer, one report.

Every back-end (the reference matcher, the simulated gateware, a board over its link) returns a
:class:`Result`: the matches (one per tuple and query, sorted by ``seq`` then query name), the
dropped tuples, the engine's own counters where it has them, and what the back-end adds of its
own (:meth:`Result.details` for the summary, :meth:`Result.note` for the report line).
:func:`write` turns any of them into the match file and its JSON summary, whole or not at all;
:func:`report` prints the one-line report and the warnings.

Engines that emit match records (:class:`nfacep.wire.Record`) build their result with
:meth:`Result.from_records`; :meth:`Result.records` goes the other way, for models of an engine
(the expected records of a simulation, the software board).
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from .nfa import Nfa
from .output import atomic_files, summary_path
from .params import EngineParams
from .settings import ParamValues
from .tuples import Tuples, format_value
from .wire import SEQ_BITS, Record, field_text, raw_column, start_queries

__all__ = ["COUNTER_BITS", "Result", "report", "write"]

#: Width of the engine's counters (``tuples``, ``matched``, ``drops``): they wrap around.
COUNTER_BITS = 32


@dataclass
class Result:
    """The matches and drops one engine reported for ``n`` tuples.

    ``queries[i]`` is the index into ``names`` (file order, which is also the query's bit in a
    match record) of the ``i``-th match, ``seqs[i]`` the 0-based position of its tuple and
    ``partitions[i]`` its partition value as a tuple file writes it (None without PARTITION).
    Matches are sorted by ``seq``, then by query name.
    """

    n: int  #: input tuples
    names: tuple[str, ...]  #: query names, in file order
    seqs: np.ndarray  #: int64, the tuple of each match
    queries: np.ndarray  #: int64, the query of each match (index into ``names``)
    partitions: list[str | None]  #: the partition value of each match, as text
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
        return [(int(s), self.names[q], p, None if b < 0 else b)
                for (s, q, p), b in zip(rows, self.starts.tolist(), strict=True)]

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

    def summary(self, *, query_file: str | None, input: str | None) -> dict:
        """The JSON summary written beside the match file."""
        return {
            "query_file": query_file, "input": input, "tuples": self.n,
            "matches": {name: self.count(name) for name in self.names},
            "drops": len(self.drops), "drop_seqs": self.drop_seqs,
            **self.params.as_dict(), "backend": self.backend, **self.details(),
            **({"runtime_parameters": self.values.as_dict()} if self.values else {}),
        }

    def counter_warnings(self) -> list[str]:
        """Where the engine's counters disagree with what it reported."""
        # distinct seqs by sorting: numpy 2's hashing np.unique is ~10x slower on 200k ints
        seqs = np.sort(self.seqs)
        matched = int(np.count_nonzero(seqs[1:] != seqs[:-1])) + (len(seqs) > 0)
        seen = {"tuples": self.n, "matched": matched, "drops": len(self.drops)}
        what = {"tuples": "tuples taken", "matched": "tuples with a match",
                "drops": "dropped tuples"}
        out = []
        for name, value in seen.items():
            counted = self.counters.get(name)
            if counted is not None and counted != value % (1 << COUNTER_BITS):
                out.append(f"warning: the engine counted {counted} {what[name]}, but "
                           f"{value} were reported")
        return out

    # --- records ---------------------------------------------------------------------------

    @classmethod
    def from_records(cls, nfa: Nfa, n: int, received: Iterable[Record],
                     params: EngineParams, **fields) -> Result:
        """The result of an engine that emitted the records ``received`` for ``n`` tuples.

        ``fields`` are the other fields of ``cls``. Raises ValueError for a record that cannot
        be one of this engine's (a tuple past the input, a partition value the key's type does
        not have).
        """
        program = nfa.program
        key = program.partition_field
        ty = program.schema.field(key).type if key else None
        names = tuple(q.name for q in nfa.queries)
        by_name = sorted(range(len(names)), key=names.__getitem__)  # the bits in name order
        slot = {q: k for k, q in enumerate(start_queries(nfa))}  # its start in a record
        rows, drops = [], []
        for r in received:
            if r.seq >= n:
                raise ValueError(f"a record names tuple {r.seq}, but only {n} were sent")
            if r.dropped:
                drops.append(r.seq)
            if r.matches:
                part = None if ty is None else field_text(r.partition, ty)
                for q in by_name:
                    if not r.matches >> q & 1:
                        continue
                    began = r.start(slot[q]) if q in slot else -1
                    if began > r.seq:
                        raise ValueError(f"a record says a match of {names[q]} at tuple "
                                         f"{r.seq} began at tuple {began}, after it")
                    rows.append((r.seq, q, part, began))
        rows.sort(key=lambda row: row[0])  # stable: name order within a tuple
        return cls(n=n, names=names,
                   seqs=np.array([row[0] for row in rows], dtype=np.int64),
                   queries=np.array([row[1] for row in rows], dtype=np.int64),
                   partitions=[row[2] for row in rows],
                   starts=np.array([row[3] for row in rows], dtype=np.int64) if slot else None,
                   drops=np.array(sorted(drops), dtype=np.int64), params=params, **fields)

    def records(self, nfa: Nfa, tuples: Tuples) -> list[Record]:
        """The records an engine emits for this result, in ``seq`` order (``tuples`` are the
        input, for the raw partition keys)."""
        key = nfa.program.partition_field
        keys = raw_column(nfa.program.schema, tuples, key).tolist() if key else None
        masks: dict[int, int] = {}
        starts: dict[int, int] = {}
        slot = {q: k for k, q in enumerate(start_queries(nfa))}
        began = (self.starts.tolist() if self.starts is not None
                 else [-1] * len(self.seqs))
        for s, q, b in zip(self.seqs.tolist(), self.queries.tolist(), began, strict=True):
            masks[s] = masks.get(s, 0) | 1 << q
            if q in slot:
                starts[s] = starts.get(s, 0) | b << (slot[q] * SEQ_BITS)
        drops = set(self.drop_seqs)
        return [Record(s, keys[s] if keys else 0, masks.get(s, 0), int(s in drops),
                       starts.get(s, 0))
                for s in sorted(masks.keys() | drops)]


def partition_texts(nfa: Nfa, tuples: Tuples, seqs: np.ndarray) -> list[str | None]:
    """The partition value of the tuples ``seqs`` as text (None each without PARTITION)."""
    key = nfa.program.partition_field
    if key is None:
        return [None] * len(seqs)
    ty = nfa.program.schema.field(key).type
    return [format_value(v, ty) for v in tuples.columns[key][seqs]]


def write(result: Result, output: str, *, query_file: str | None = None,
          input: str | None = None) -> None:
    """Write the match CSV (``seq,query,partition``, and ``start_seq`` when a query reports
    it) to ``output`` and the summary beside it
    (:func:`nfacep.output.summary_path`): both or neither (a summary that cannot be written
    leaves the match file as it was)."""
    summary = result.summary(query_file=query_file, input=input)
    with atomic_files([output, summary_path(output)], newline="") as (f, g):
        w = csv.writer(f, lineterminator="\n")
        columns = [result.seqs.tolist(), [result.names[q] for q in result.queries.tolist()],
                   ["" if p is None else p for p in result.partitions]]
        if result.starts is None:
            w.writerow(["seq", "query", "partition"])
        else:
            w.writerow(["seq", "query", "partition", "start_seq"])
            columns.append(["" if b < 0 else b for b in result.starts.tolist()])
        w.writerows(zip(*columns, strict=True))
        json.dump(summary, g, indent=2)
        g.write("\n")


def report(result: Result, output: str | None, *, out=None, err=None) -> None:
    """Print what a command prints after a run: the counts on ``out`` (stdout), the warnings
    (the back-end's, the drops, counters that disagree) on ``err`` (stderr)."""
    out = out or sys.stdout
    err = err or sys.stderr
    counts = ", ".join(f"{name}: {result.count(name)}" for name in result.names)
    note = result.note()
    print(f"{result.n} tuples, {len(result.seqs)} matches ({counts}), {len(result.drops)} "
          f"dropped -> {output}{f' [{note}]' if note else ''}", file=out)
    for warning in result.warnings + result.counter_warnings():
        print(warning, file=err)
    drops = result.drop_seqs
    if drops:
        shown = ", ".join(str(s) for s in drops[:10]) + (" …" if len(drops) > 10 else "")
        p = result.params
        full = (f"a bucket full, --store table --partitions {p.partitions} --ways {p.ways}"
                if p.store == "table" else f"partitioner full, --partitions {p.partitions}")
        print(f"warning: {len(drops)} tuples dropped ({full}) at seq {shown}", file=err)
