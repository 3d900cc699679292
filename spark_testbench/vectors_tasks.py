"""What runs inside the Spark tasks of ``nfacep vectors``: a block of generated tuples, a
recorded trace's tuples read, and the reference matcher over one task's keys or over the whole
stream, its matches as rows of the expected matches' schema (:mod:`.layout`).
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa

import nfacep
from nfacep.io.convert import from_table
from nfacep.io.parquet import rebatch
from nfacep.params import EngineParams
from nfacep.reference import matcher as reference
from nfacep.result import partition_cells, partition_texts

from .generate import Generator
from .layout import _RESULT, TUPLES, global_starts, with_measures
from .shard import Shard

# --- Spark tasks (run in Python workers; module-level so they pickle by reference) -----------


def _generate_task(gen: Generator, counter, batches):
    for batch in batches:
        for b in batch.column(0).to_pylist():
            block = gen.to_arrow(gen.block(b))
            counter.add(block.num_rows)
            yield block
    counter.finished()


@functools.lru_cache(maxsize=4)
def _compiled(text: str, filename: str):
    return nfacep.compile_text(text, filename)


def _used_fields(nfa) -> tuple[str, ...]:
    """The fields the matcher reads: the partition key, those the predicates compare (PREV
    included), the
    ORDER BY field of a query with a window (WITHIN) and those the measures show."""
    from nfacep.lang import predicates as P

    names = {
        n.name
        for p in nfa.predicates
        for n in P.nodes(p.expr)
        if isinstance(n, P.FieldRef | P.Prev)
    }
    names |= {q.order_field for q in nfa.queries if q.window is not None}
    names |= {m.field for q in nfa.program.queries for m in q.measures if m.field}
    key = nfa.program.partition_fields
    return tuple(f for f in nfa.program.schema.names if f in names or f in key)


def _used_schema(program, names):
    """The stream's schema restricted to the fields among ``names`` (those the task gets)."""
    from nfacep.schema import Schema

    return Schema(program.schema.name, tuple(f for f in program.schema.fields if f.name in names))


def _rows(nfa, data, result, seq: np.ndarray | None, offset: int = 0, cells=None):
    """The match and drop rows of ``result``, a run over the tuples ``data`` (from stream
    position ``offset`` on). ``seq``: the global seq of every tuple of the stream so far, which
    matches and starts are mapped through; None when a position in the stream is the seq (the
    global pass). ``cells``: the matches' measure columns (:meth:`Measurer.cells`)."""
    names = np.array(result.names, dtype=object)
    m = len(result.seqs)
    if seq is None:
        seqs = pa.array(result.seqs, pa.int64())
        starts = (
            pa.nulls(m, pa.int64())
            if result.starts is None
            else pa.array(result.starts, pa.int64(), mask=np.asarray(result.starts) < 0)
        )
    else:
        seqs = pa.array(seq[result.seqs], pa.int64())
        starts = global_starts(seq, result.starts, m)
    if m:
        yield with_measures(
            pa.RecordBatch.from_arrays(
                [
                    seqs,
                    pa.array(names[result.queries], pa.string()),
                    pa.array(partition_cells(result.partitions), pa.string()),
                    pa.array(["match"] * m, pa.string()),
                    starts,
                ],
                schema=_RESULT,
            ),
            nfa,
            cells,
        )
    d = len(result.drops)
    if d:
        local = result.drops - offset  # a drop is always one of the tuples ``data``
        yield with_measures(
            pa.RecordBatch.from_arrays(
                [
                    pa.array(result.drops if seq is None else seq[result.drops], pa.int64()),
                    pa.array([None] * d, pa.string()),
                    pa.array(partition_cells(partition_texts(nfa, data, local)), pa.string()),
                    pa.array(["drop"] * d, pa.string()),
                    pa.nulls(d, pa.int64()),
                ],
                schema=_RESULT,
            ),
            nfa,
            None,
        )


def _keys_row(nfa, keys: int) -> pa.RecordBatch:
    """The row that says how many distinct keys a task saw (in ``seq``)."""
    return with_measures(
        pa.RecordBatch.from_arrays(
            [
                pa.array([keys], pa.int64()),
                pa.nulls(1, pa.string()),
                pa.nulls(1, pa.string()),
                pa.array(["keys"], pa.string()),
                pa.nulls(1, pa.int64()),
            ],
            schema=_RESULT,
        ),
        nfa,
        None,
    )


def _match_task(
    text: str,
    filename: str,
    params: EngineParams,
    values,
    counter,
    piece_tuples: int,
    batches,
):
    """Reference matcher over the tuples of one Spark partition (the partitioned pass: whole
    keys), which Spark sorted by ``seq``, as they come: fed to one
    :class:`nfacep.reference.matcher.Matcher` in pieces of at most ``piece_tuples``, each piece's
    rows     emitted as it is matched (:class:`~.shard.Shard` keeps the ``seq`` column on disk), so
    that the task holds a piece or two, never its partition.

    Emits one row per match and per drop, and a ``keys`` row whose ``seq`` is the number of
    distinct keys seen (keys never span two tasks, so the sum is the stream's). A match's
    ``start`` is where it begins, mapped like its ``seq`` from the position in this task's
    tuples to the global ``seq`` (null for a query without start_seq). Adds the tuples to
    ``counter`` (a :class:`~.progress.Counter`) piece by piece. The match rows carry the
    measure columns too (:func:`with_measures`), the task's tuples the fields they read.
    """
    nfa = _compiled(text, filename)
    program = nfa.program
    matcher = reference.Matcher(nfa, params, values=values)
    measurer = _measurer(program)
    with tempfile.TemporaryDirectory(prefix="vectors-shard-") as folder:
        shard = Shard(
            program,
            Path(folder),
            piece_tuples,
            schema=_used_schema(program, _used_fields(nfa)),
            source=TUPLES,
        )

        def feed(data, last: bool):
            offset = matcher.n
            result = matcher.feed(data, last=last)
            counter.add(data.n)
            # (the seq file mapped afresh for each piece: its pages do not stay resident)
            seq = shard.seq()
            cells = None if measurer is None else measurer.cells(result, data, seq)
            yield from _rows(nfa, data, result, seq, offset, cells)

        for piece, last in _with_last(shard.pieces(b for b in batches if b.num_rows)):
            yield from feed(piece, last)
        if matcher.n:
            yield _keys_row(nfa, len(matcher.keys) if program.partition_fields else 1)
    counter.finished()


def _read_task(folder: str, columns, key_schema, tasks: int, rows: int, inner, ids):
    """A matching task over a recorded trace: ``inner`` (:func:`_match_task` or
    :func:`_global_task`) over this task's share of the numbered tuples, read from ``folder``
    (:func:`.numbering.share`); ``ids`` (Spark's batches of ``range``) name the task."""
    from . import numbering

    for batch in ids:
        for task in batch.column("id").to_pylist():
            share = numbering.share(folder, columns, key_schema, tasks, task, rows)
            yield from inner(share)


def _global_task(
    text: str,
    filename: str,
    params: EngineParams,
    values,
    counter,
    piece_tuples: int,
    batches,
):
    """Reference matcher over the whole stream (the global pass), whose tuples come in
    ``seq`` order (Spark sorts them): fed to one :class:`nfacep.reference.matcher.Matcher` in pieces
    of ``piece_tuples``, each piece's match and drop rows emitted as it is matched, so that
    the task holds a piece or two, never the stream. The generated ``seq`` is the position
    in the stream (0, 1, 2, …), so positions need no mapping (checked piece by piece). Ends
    with the ``keys`` row (as :func:`_match_task`) and adds the tuples to ``counter``.
    """
    nfa = _compiled(text, filename)
    program = nfa.program
    matcher = reference.Matcher(nfa, params, values=values)
    measurer = _measurer(program)
    used = None

    def feed(piece: pa.Table, last: bool):
        nonlocal used
        offset, n = matcher.n, piece.num_rows
        seq = piece.column("seq").to_numpy()
        if not np.array_equal(seq, np.arange(offset, offset + n, dtype=seq.dtype)):
            bad = int(np.flatnonzero(seq != np.arange(offset, offset + n))[0])
            raise ValueError(
                f"{TUPLES}: the global pass takes the tuples in seq order, and "
                f"seq is each one's position in the stream (0, 1, 2, ...), but "
                f"tuple {offset + bad} has seq {int(seq[bad])}"
            )
        if used is None:
            used = _used_schema(program, piece.column_names)
        data = from_table(piece, used, source=TUPLES)
        result = matcher.feed(data, last=last)
        counter.add(n)
        cells = None if measurer is None else measurer.cells(result, data)
        yield from _rows(nfa, data, result, None, offset, cells)

    for piece, last in _with_last(rebatch(batches, piece_tuples)):
        yield from feed(piece, last)
    if matcher.n:
        yield _keys_row(nfa, len(matcher.keys) if program.partition_fields else 1)
    counter.finished()


def _measurer(program):
    """The :class:`~nfacep.measures.Measurer` of a task's matches, if a query has measures."""
    from nfacep.measures import Measurer

    return Measurer(program) if any(q.measures for q in program.queries) else None


def _with_last(pieces):
    """Each of ``pieces`` with whether it is the last (a matcher is told so)."""
    held = None
    for piece in pieces:
        if held is not None:
            yield held, False
        held = piece
    if held is not None:
        yield held, True
