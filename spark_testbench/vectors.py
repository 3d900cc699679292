"""Regression vectors: generated (or recorded) tuples and their expected matches, computed with
Spark.

:func:`prepare` checks everything a user can get wrong (query file, parameters, output folder,
master URL) and builds the :class:`~nfacep.spark_testbench.generate.Generator`, all before Spark
starts; :func:`run` then does the work on a session and publishes the folder atomically::

    DIR/tuples.parquet/    seq (int64), then the stream's fields in declaration order:
                           UINT/INT as int64, BOOL as boolean, ENUM as its label, FLOAT32 as float
    DIR/expected.parquet/  seq, query, partition (the key as text, null without PARTITION),
                           one row per reported match, sorted by seq then query (like `match`);
                           and start_seq (int64, null for the queries without it) when a query
                           reports it (MEASURES FIRST(seq) AS start_seq): the global seq where
                           the match begins; then, when a query has MEASURES, measure_NAME
                           (string) per measure column of the match file, its text there
    DIR/drops.parquet/     seq, partition of every tuple the partitioner drops
    DIR/manifest.json      query file hash, seed, generator settings, engine parameters, counts,
                           how the expected matches were computed (below)

With ``input`` (``nfacep vectors --input FILE|FOLDER``) the tuples are a recorded trace instead:
a CSV or Parquet file or a folder of Parquet part files, read as ``nfacep match`` reads its
input (the same order, checks and errors, ORDER BY included) in Spark tasks
(:mod:`.numbering`), and written to ``DIR/tuples.parquet/`` in the layout above, ``seq`` the
position in the trace. A bad value anywhere stops the run with its
file, row and column, and nothing is published. The manifest then names the ``input`` and
has no generator settings (``seed`` and the like are null).

Expected matches come from :func:`nfacep.reference.matcher.run` inside Spark tasks, in one of two
ways, named in the manifest (``expected.mode``):

``partitioned``
    When neither capacity nor timers can matter: no ticks (``--tick-tuples 0``: elements never
    expire) and at most ``--partitions`` distinct keys present (so none is ever dropped). Each
    sub-stream then evolves alone, so tuples are hash-partitioned by key, sorted by ``seq``
    within each Spark partition (by Spark, spilling to disk), and every task streams its keys
    through one :class:`nfacep.reference.matcher.Matcher` in pieces of ``PIECE_TUPLES``, the ``seq``
    column on disk (:class:`~nfacep.spark_testbench.shard.Shard`): its memory is bounded by a
    piece and its keys, not by its share of the stream.
``global``
    Otherwise (or without a PARTITION clause): one task runs the reference matcher over the
    whole stream in ``seq`` order, modelling capacity, timers and drops exactly. Spark sorts
    the stream by ``seq`` into that task (its external sorter spills to disk), which streams
    it through one :class:`nfacep.reference.matcher.Matcher` in pieces of ``PIECE_TUPLES`` tuples
    and emits each piece's matches and drops as it goes: its memory is bounded by a piece and
    the keys, whatever the stream's length.

A recorded trace skips Spark's shuffle and sorts: its numbered part files are in ``seq`` order
(:mod:`.numbering` names them so), so each matching task reads them itself, keeping the tuples
whose key hashes to it (:func:`.numbering.share`; all of them in the global pass), already in
``seq`` order.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

import nfacep
from nfacep.errors import NfacepError, UsageError
from nfacep.io.convert import from_table
from nfacep.io.parquet import rebatch
from nfacep.lang.types import EnumType
from nfacep.output import probe_folder
from nfacep.params import EngineParams
from nfacep.reference import matcher as reference
from nfacep.result import partition_cells, partition_texts
from nfacep.settings import ParamValues

from .generate import BLOCK_TUPLES, Generator, Options, arrow_schema
from .progress import Progress
from .rows import TASK_ROWS as _RESULT
from .shard import Shard

__all__ = [
    "BLOCK_TUPLES",
    "FORCED_GLOBAL",
    "FORMAT",
    "PIECE_TUPLES",
    "Job",
    "Options",
    "auto_mode",
    "manifest_params",
    "prepare",
    "run",
]

FORMAT = "nfacep-vectors/1"
TUPLES, EXPECTED, DROPS, MANIFEST = (
    "tuples.parquet",
    "expected.parquet",
    "drops.parquet",
    "manifest.json",
)


#: The column of expected.parquet that says where a match begins (only when a query reports it)
START_SEQ = "start_seq"
#: expected.parquet's column of a measure is named this followed by the measure's name
MEASURE = "measure_"
#: How many tuples the global pass matches at a time (:func:`run` takes another number)
PIECE_TUPLES = 1 << 20


def measure_columns(nfa) -> list[str]:
    """expected.parquet's measure columns (:data:`MEASURE` and each column of the match file's
    measures, :func:`nfacep.measures.columns`, in order): the text the match file writes."""
    from nfacep.measures import columns

    return [MEASURE + m.name for m in columns(nfa.program)]


def result_schema(nfa) -> pa.Schema:
    """The rows the matching and simulation tasks emit: a kind, seq, query, partition, start,
    then a text column per measure (null but for matches)."""
    return pa.schema([*_RESULT, *((name, pa.string()) for name in measure_columns(nfa))])


def with_measures(batch: pa.RecordBatch, nfa, cells: list[list[str]] | None) -> pa.RecordBatch:
    """``batch`` (rows of :data:`_RESULT`) with the measure columns of :func:`result_schema`:
    ``cells`` (a list per column, as :meth:`nfacep.measures.Measurer.cells` gives them), or
    nulls."""
    names = measure_columns(nfa)
    if not names:
        return batch
    n = batch.num_rows
    if cells is None:
        extra = [pa.nulls(n, pa.string()) for _ in names]
    else:
        extra = [pa.array(c, pa.string()) for c in cells]
    return pa.RecordBatch.from_arrays([*batch.columns, *extra], schema=result_schema(nfa))


def reports_start(nfa) -> bool:
    """Whether a query of ``nfa`` reports start_seq, so that expected.parquet has the column."""
    return any(q.start_seq for q in nfa.queries)


def global_starts(seq: np.ndarray, starts: np.ndarray | None, m: int) -> pa.Array:
    """The starts of ``m`` matches of a run over the tuples ``seq`` (global seqs, in the order
    they were taken: a start is a position in them) as global seqs; null where a query does not
    report start_seq (start -1, or no starts at all)."""
    if starts is None:
        return pa.nulls(m, pa.int64())
    starts = np.asarray(starts, dtype=np.int64)
    have = starts >= 0
    return pa.array(np.where(have, seq[np.where(have, starts, 0)], 0), pa.int64(), mask=~have)


@dataclass
class Job:
    """A checked request, ready to run on a Spark session."""

    query_path: str
    query_text: str
    query_sha256: str
    nfa: nfacep.Nfa
    generator: Generator | None  #: None: the tuples are the recorded trace ``input``
    params: EngineParams
    out: str
    expected: str  #: "auto", "partitioned" or "global"
    overwrite: bool
    values: ParamValues | None = None  #: the runtime parameters' (starting) values
    input: str | None = None  #: the recorded trace (a tuple file or folder), if not generated


def prepare(
    query: str,
    options: Options | None,
    out: str,
    *,
    params: EngineParams = EngineParams(),
    expected: str = "auto",
    overwrite: bool = False,
    master: str | None = None,
    param_texts: list[str] | None = None,
    input: str | None = None,
) -> Job:
    """Check the request and build the generator; raises :class:`NfacepError` subclasses.
    ``param_texts``: the ``--param name=value`` of the runtime parameters (starting values
    only: the expected matches are the engine's after a reset). ``input``: a recorded trace
    (tuple file or folder) to take the tuples from, instead of generating them; ``options``
    is then None (its values are read when the job runs).

    Nothing here starts Spark. ``master``, when given, is checked too (see
    :func:`nfacep.spark_testbench.session.check_master`).
    """
    from .session import check_master

    if master is not None:
        check_master(master, connect=False)  # syntax first; reachability last
    if (options is None) == (input is None):
        raise ValueError("vectors.prepare: give the generator's options or an input, not both")
    if options is not None:
        _check_options(options)
    if expected not in ("auto", "partitioned", "global"):
        raise UsageError(f"--expected {expected!r}: use auto, partitioned or global")
    if input is not None and not os.path.exists(input):
        raise UsageError(f"--input {input}: no such file or folder")
    raw = read_query(query)
    nfa = nfacep.compile_file(query)
    program = nfa.program
    values = (
        ParamValues.parse(program.parameters, param_texts, switches=False, command="vectors")
        if program.parameters or param_texts
        else None
    )
    _check_stream(query, program, options)
    if expected == "partitioned":
        _check_partitioned(options, params)
    _check_out(out, overwrite)
    if master is not None:
        check_master(master)
    generator = None if options is None else Generator(nfa, options, values or None)
    return Job(
        query,
        raw.decode("utf-8"),
        hashlib.sha256(raw).hexdigest(),
        nfa,
        generator,
        params,
        out,
        expected,
        overwrite,
        values or None,
        input,
    )


def _check_options(options: Options) -> None:
    """The generator's options, each on its own."""
    if options.tuples < 1:
        raise UsageError("--tuples must be at least 1")
    if options.seed < 0:
        raise UsageError("--seed must be 0 or more")
    if options.keys < 1:
        raise UsageError("--keys must be at least 1")
    if not options.zipf >= 0:
        raise UsageError("--zipf must be 0 (uniform keys) or more")
    if not 0 <= options.plant_rate <= 0.5:
        raise UsageError("--plant-rate must be between 0 and 0.5")
    if options.block_tuples < 1:
        raise UsageError("--block-tuples must be at least 1")


def read_query(query: str) -> bytes:
    """The bytes of the query file (hashed into the manifest); an error names it."""
    try:
        with open(query, "rb") as f:
            return f.read()
    except OSError as err:
        raise NfacepError(f"{query}: cannot read the query file: {err.strerror or err}") from None


def _check_stream(query: str, program, options: Options | None) -> None:
    """The options against the query's stream: its fields, ENUM weights and partitioning."""
    if "seq" in program.schema.names:
        raise UsageError(
            f"{query}: stream '{program.schema.name}' has a field named 'seq', "
            "which the vectors' sequence-number column would shadow"
        )
    if options is None:  # a recorded trace: nothing generated
        return
    _check_weights(options, program.schema)
    if not program.partition_fields and options.keys != 1:
        raise UsageError(
            f"--keys {options.keys}: the queries of {query} have no PARTITION "
            "clause, so there is one stream and no keys to generate"
        )


def _check_partitioned(options: Options | None, params: EngineParams) -> None:
    """``--expected partitioned`` holds only where no partition is expired or dropped."""
    if params.tick_tuples:
        raise UsageError(
            "--expected partitioned: with --tick-tuples the timers expire "
            "partitions, which only a global pass models"
        )
    if options is not None and options.keys > params.partitions:
        raise UsageError(
            f"--expected partitioned: --keys {options.keys} is more than the "
            f"partitioner stores (--partitions {params.partitions}), so it may "
            "drop tuples, which only a global pass models"
        )


def _check_weights(options: Options, schema) -> None:
    for name, pairs in options.enum_weights:
        f = schema.field(name) if name in schema.names else None
        if f is None or not isinstance(f.type, EnumType):
            raise UsageError(
                f"--enum-weights: '{name}' is not an ENUM field of stream '{schema.name}'"
            )
        for label, w in pairs:
            if label not in f.type.labels:
                raise UsageError(f"--enum-weights: '{label}' is not a label of {name} {f.type}")
            if not w >= 0:
                raise UsageError(f"--enum-weights: weight {w} of '{label}' is negative")
        if not sum(w for _, w in pairs) > 0:
            raise UsageError(f"--enum-weights: the weights of {name} add up to 0")


def _check_out(out: str, overwrite: bool) -> None:
    path = os.path.abspath(out)
    parent = os.path.dirname(path)
    # tried, not asked (os.access): root passes any permission check, and a read-only or
    # pseudo file system is found only by writing; before Spark starts
    probe_folder(parent, f"--out {out}")
    if os.path.lexists(path):
        if not os.path.isdir(path):
            raise UsageError(f"--out {out}: exists and is not a folder")
        if os.listdir(path):
            if not overwrite:
                raise UsageError(
                    f"--out {out}: exists and is not empty (add --overwrite to "
                    "replace earlier vectors)"
                )
            if not os.path.isfile(os.path.join(path, MANIFEST)):
                raise UsageError(
                    f"--out {out}: --overwrite only replaces a vectors folder "
                    f"(one with a {MANIFEST}); this one has none"
                )


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


def _spark_schema(schema: pa.Schema):
    from pyspark.sql import types as T

    conv = {
        pa.int64(): T.LongType(),
        pa.string(): T.StringType(),
        pa.bool_(): T.BooleanType(),
        pa.float32(): T.FloatType(),
    }
    return T.StructType([T.StructField(f.name, conv[f.type], True) for f in schema])


# --- the run ----------------------------------------------------------------------------------


def _mode(job: Job, keys_present: int | None) -> tuple[str, str]:
    """Pick the pass; ``keys_present`` is only needed when more keys were generated than the
    partitioner stores (None: not counted)."""
    keys = job.generator.keys if job.generator is not None else keys_present
    switches = job.values is not None and bool(job.values.switches)
    auto = auto_mode(job.params, job.nfa, keys, keys_present, switches=switches)
    if job.expected == "auto" or job.expected == auto[0]:
        return auto
    if job.expected == "global":
        return "global", FORCED_GLOBAL
    raise UsageError(f"--expected partitioned: {auto[1]}")


#: The reason a manifest gives when ``--expected global`` forced the global pass.
FORCED_GLOBAL = "forced with --expected global"


def auto_mode(
    e: EngineParams,
    nfa: nfacep.Nfa,
    keys: int | None,
    keys_present: int | None,
    *,
    switches: bool = False,
) -> tuple[str, str]:
    """``("partitioned", why)`` when neither capacity nor timers can matter for the engine
    ``e`` on a stream of ``keys`` generated keys (``keys_present`` present, counted when more
    were generated than it stores), nor runtime parameters switching at stream positions
    (``switches``, ``match --master``'s ``--param NAME=VALUE@SEQ``), so that each key's
    sub-stream evolves alone; else ``("global", why)``. ``vectors`` and ``match --master`` pick
    their pass by it, ``regress`` its split."""
    key = nfa.program.key
    if not key.names:
        auto = ("global", "the queries have no PARTITION clause: the stream is one sub-stream")
    elif switches:
        auto = (
            "global",
            "the runtime parameters switch at positions in the whole stream (--param "
            "NAME=VALUE@SEQ), which a key's sub-stream does not know",
        )
    elif e.tick_tuples:
        auto = (
            "global",
            f"timers matter: a tick every {e.tick_tuples} tuples expires idle "
            "partitions, which depends on the position in the whole stream",
        )
    elif e.tabled:
        auto = _table_mode(e, key.width, keys)
    elif keys > e.partitions and keys_present > e.partitions:
        auto = (
            "global",
            f"capacity matters: {keys_present} keys present and the partitioner "
            f"stores {e.partitions}, so it fills and drops tuples",
        )
    else:
        n = keys if keys <= e.partitions else keys_present
        auto = (
            "partitioned",
            f"at most {n} keys, no more than --partitions {e.partitions}, "
            "and no ticks: no partition is ever dropped or expired, so each "
            "key's sub-stream is matched on its own",
        )
    return auto


def _table_mode(e: EngineParams, bits: int, keys: int) -> tuple[str, str]:
    if bits <= e.index_bits:
        return (
            "partitioned",
            f"--store table with {e.partitions} entries indexes every "
            f"{bits}-bit key directly: no tuple is ever dropped, so each key's "
            "sub-stream is matched on its own",
        )
    if keys <= e.ways:
        return (
            "partitioned",
            f"at most {keys} keys, no more than --ways {e.ways}: no bucket of "
            "the table fills, so each key's sub-stream is matched on its own",
        )
    return (
        "global",
        f"capacity matters: a bucket of the table holds {e.ways} keys and "
        f"{keys} are generated, so a bucket may fill and drop tuples",
    )


def run(
    spark,
    job: Job,
    *,
    tasks: int | None = None,
    progress=None,
    progress_every: float | None = None,
    piece_tuples: int = PIECE_TUPLES,
) -> dict:
    """Generate, match and publish ``job.out``; returns the manifest.

    ``progress``, if given, is called with a line of text every ``progress_every`` seconds
    while Spark works and at the end of each phase (:class:`~.progress.Progress`: tuples
    generated and matched, the rate, the time left). ``piece_tuples``: how many tuples the
    global pass matches at a time (the expected matches do not depend on it).
    """
    tasks = tasks or spark.sparkContext.defaultParallelism
    if tasks < 1:
        raise UsageError("--tasks must be at least 1")
    if piece_tuples < 1:
        raise ValueError(f"piece_tuples {piece_tuples}: must be at least 1")
    out = os.path.abspath(job.out)
    tmp = tempfile.mkdtemp(
        prefix=f".{os.path.basename(out)}.", suffix=".tmp", dir=os.path.dirname(out)
    )
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)  # mkdtemp makes it private; publish it like any folder
    seconds: dict[str, float] = {}
    try:
        with Progress(spark, "vectors", progress, progress_every) as watch:
            manifest = _run(spark, job, tasks, tmp, watch, seconds, piece_tuples)
        _publish(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest


def _run(
    spark,
    job: Job,
    tasks: int,
    tmp: str,
    watch: Progress,
    seconds: dict,
    piece_tuples: int = PIECE_TUPLES,
) -> dict:
    t0 = time.perf_counter()
    keys = None
    if job.generator is not None:
        _generate(spark, job, tasks, tmp, watch)
        tuples = job.generator.options.tuples
        seconds["generate"] = time.perf_counter() - t0
    else:
        tuples, keys = _record(spark, job, tmp, watch, piece_tuples, tasks)
        seconds["read"] = time.perf_counter() - t0

    t1 = time.perf_counter()
    result, mode, reason = _match(spark, job, tasks, tmp, watch, piece_tuples, tuples, keys)
    seconds["match"] = time.perf_counter() - t1
    watch.phase("writing the expected matches and drops", count=False)
    _write_expected(job, result, tmp)
    counts, keys_present = _count(result)
    result.unpersist()
    watch.end()
    seconds["expected"] = time.perf_counter() - t1
    seconds["total"] = time.perf_counter() - t0
    manifest = _manifest(
        job, mode, reason, keys_present, counts, tasks, seconds, spark.sparkContext.master, tuples
    )
    with open(os.path.join(tmp, MANIFEST), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    return manifest


def _generate(spark, job: Job, tasks: int, tmp: str, watch: Progress) -> None:
    """The generation stage: blocks of tuples written to ``tmp``'s tuples folder."""
    gen = job.generator
    n_gen = min(tasks, gen.n_blocks)
    counter = watch.phase("generated", total=gen.options.tuples, tasks=n_gen)
    blocks = spark.range(0, gen.n_blocks, 1, numPartitions=n_gen)
    generated = blocks.mapInArrow(
        functools.partial(_generate_task, gen, counter), _spark_schema(gen.arrow_schema())
    )
    generated.write.parquet(os.path.join(tmp, TUPLES))
    watch.end()


def _record(
    spark,
    job: Job,
    tmp: str,
    watch: Progress,
    piece_tuples: int,
    tasks: int,
    *,
    empty_ok: bool = False,
) -> tuple[int, int | None]:
    """The recorded trace ``job.input`` read and numbered in Spark tasks (as ``nfacep match``
    reads it: every value and ORDER BY checked, an error naming its file, row and column:
    :func:`.numbering.record`) into ``tmp``'s tuples folder in the vectors' layout, ``seq``
    the position in the trace; returns the number of tuples (none is an error unless
    ``empty_ok``) and of distinct keys (None: not counted)."""
    from nfacep.errors import DataError

    from . import numbering

    assert job.input is not None
    folder = os.path.join(tmp, TUPLES)
    counter = watch.phase(f"read from {job.input}", tasks=tasks, task_word="readers")
    n, keys = numbering.record(spark, job.nfa, job.input, folder, counter, piece_tuples, tasks)
    watch.end()
    if not n and not empty_ok:
        raise DataError(f"{job.input}: holds no tuples; vectors need at least one")
    return n, keys


def _match(
    spark,
    job: Job,
    tasks: int,
    tmp: str,
    watch: Progress,
    piece_tuples: int,
    n_tuples: int,
    keys: int | None = None,
):
    """The matching stage: the written tuples through the reference matcher, partitioned or
    in one global pass; returns the checkpointed result rows (with the measure columns of
    :func:`result_schema`), the mode and its reason. ``keys``: how many distinct keys the
    tuples hold, when the reading stage counted them (otherwise Spark counts them when the
    pass depends on it)."""
    from pyspark.sql import functions as F

    gen = job.generator
    key = job.nfa.program.partition_fields
    counted = keys if key else None
    if (
        key
        and counted is None
        and (
            gen is None  # a recorded trace: how many keys it holds is known only by counting
            or (
                job.params.tick_tuples == 0
                and job.params.store == "pipeline"
                and gen.keys > job.params.partitions
            )
        )
    ):
        watch.phase("counting the keys present", count=False)
        tuples = spark.read.parquet(os.path.join(tmp, TUPLES))
        counted = tuples.select(*key).distinct().count()  # are they all there?
    mode, reason = _mode(job, counted)
    counter = watch.phase("matched", total=n_tuples, tasks=tasks if mode == "partitioned" else 1)
    args = (job.query_text, job.query_path, job.params, job.values, counter)
    if gen is None:
        # a recorded trace's numbered part files are in seq order (numbering): each task reads
        # its keys' tuples (whole keys; all of them in the global pass) straight from them
        n = tasks if mode == "partitioned" else 1
        inner = _match_task if mode == "partitioned" else _global_task
        program = job.nfa.program
        task = functools.partial(
            _read_task,
            os.path.join(tmp, TUPLES),
            ["seq", *_used_fields(job.nfa)],
            _used_schema(program, key),
            n,
            piece_tuples,
            functools.partial(inner, *args, piece_tuples),
        )
        source = spark.range(0, n, 1, numPartitions=n)
    elif mode == "partitioned":
        source = spark.read.parquet(os.path.join(tmp, TUPLES)).select("seq", *_used_fields(job.nfa))
        # whole keys to a task, each task's rows sorted by Spark (it spills to disk): a task
        # streams them through its matcher, so none holds its partition
        source = source.repartition(tasks, *map(F.col, key)).sortWithinPartitions("seq")
        task = functools.partial(_match_task, *args, piece_tuples)
    else:
        source = spark.read.parquet(os.path.join(tmp, TUPLES)).select("seq", *_used_fields(job.nfa))
        # one partition, sorted by Spark's external sorter (it spills to disk, so the stream
        # need not fit in memory); mapInArrow reads that partition's rows in the sorted order
        source = source.coalesce(1).sortWithinPartitions("seq")
        task = functools.partial(_global_task, *args, piece_tuples)
    result = source.mapInArrow(task, _spark_schema(result_schema(job.nfa))).localCheckpoint()
    watch.end()
    return result, mode, reason


def _write_expected(job: Job, result, tmp: str) -> None:
    """The expected matches and drops of the result rows, as Parquet in ``tmp``."""
    from pyspark.sql import functions as F

    columns = ["seq", "query", "partition"]
    if reports_start(job.nfa):  # otherwise the schema stays as it was before start_seq
        columns.append(F.col("start").alias(START_SEQ))
    columns += measure_columns(job.nfa)
    (
        result.filter(F.col("kind") == "match")
        .select(*columns)
        .orderBy("seq", "query")
        .write.parquet(os.path.join(tmp, EXPECTED))
    )
    (
        result.filter(F.col("kind") == "drop")
        .select("seq", "partition")
        .orderBy("seq")
        .write.parquet(os.path.join(tmp, DROPS))
    )


def _count(result) -> tuple[Counter, int]:
    """(rows per (kind, query), the number of keys present) of the result rows."""
    from pyspark.sql import functions as F

    counts = Counter()
    keys_present = 0
    for r in (
        result.groupBy("kind", "query")
        .agg(F.count("*").alias("n"), F.sum("seq").alias("total"))
        .collect()
    ):
        if r["kind"] == "keys":
            keys_present = r["total"]
        else:
            counts[r["kind"], r["query"]] = r["n"]
    return counts, keys_present


def _publish(tmp: str, out: str) -> None:
    old = None
    if os.path.isdir(out):
        if os.listdir(out):
            old = tempfile.mkdtemp(
                prefix=f".{os.path.basename(out)}.", suffix=".old", dir=os.path.dirname(out)
            )
            os.rename(out, os.path.join(old, "vectors"))
        else:
            os.rmdir(out)
    os.rename(tmp, out)
    if old:
        shutil.rmtree(old, ignore_errors=True)


def _source(job: Job, tuples: int, keys_present: int) -> dict:
    """The manifest's account of where the tuples came from: the generator's settings, or
    the recorded trace (``input``; the generator's settings null)."""
    gen = job.generator
    names = [q.name for q in job.nfa.queries]
    if gen is None:
        return {
            "input": job.input,
            "seed": None,
            "tuples": tuples,
            "keys": keys_present if job.nfa.program.partition_fields else 1,
            "zipf": None,
            "plant_rate": None,
            "block_tuples": None,
            "enum_weights": {},
            "planted": {n: {} for n in names},
            "unplanted": {},
            "generators": None,
            "predicate_rates": None,
            "columns": {f.name: str(f.type) for f in arrow_schema(job.nfa.program.schema)},
        }
    o = gen.options
    planted: dict[str, dict[str, int]] = {n: {} for n in names}
    for b in range(gen.n_blocks):
        for p in gen.planted(b):
            planted[p.query][p.kind] = planted[p.query].get(p.kind, 0) + 1
    return {
        "input": None,
        "seed": o.seed,
        "tuples": o.tuples,
        "keys": gen.keys,
        "zipf": o.zipf,
        "plant_rate": o.plant_rate,
        "block_tuples": o.block_tuples,
        "enum_weights": {f: dict(pairs) for f, pairs in o.enum_weights},
        "planted": planted,
        "unplanted": dict(gen.unplanted),
        "generators": gen.describe(),
        "predicate_rates": gen.sample_rates(job.nfa),
        "columns": {f.name: str(f.type) for f in gen.arrow_schema()},
    }


def _manifest(
    job: Job, mode, reason, keys_present, counts, tasks, seconds, master, tuples: int
) -> dict:
    import pyspark

    program = job.nfa.program
    names = [q.name for q in program.queries]
    matches = {n: counts.get(("match", n), 0) for n in names}
    source = _source(job, tuples, keys_present)
    return {
        "format": FORMAT,
        "query_file": job.query_path,
        "query_sha256": job.query_sha256,
        "stream": program.schema.name,
        "partition_fields": list(program.partition_fields),
        "order_fields": list(program.order_fields),
        "queries": [
            {"name": q.name, "skip_past_last_row": q.skip_past_last_row, "start_seq": q.start_seq}
            for q in job.nfa.queries
        ],
        "input": source["input"],
        "seed": source["seed"],
        "tuples": tuples,
        "keys": source["keys"],
        "keys_present": keys_present,
        "zipf": source["zipf"],
        "plant_rate": source["plant_rate"],
        "block_tuples": source["block_tuples"],
        "enum_weights": source["enum_weights"],
        "engine": job.params.as_dict(),
        "runtime_parameters": job.values.as_dict()["initial"] if job.values else None,
        "expected": {"mode": mode, "reason": reason},
        "counts": {
            "tuples": tuples,
            "matches": matches,
            "matches_total": sum(matches.values()),
            "drops": counts.get(("drop", None), 0),
        },
        "planted": source["planted"],
        "unplanted": source["unplanted"],
        "generators": source["generators"],
        "predicate_rates": source["predicate_rates"],
        "files": {"tuples": TUPLES, "expected": EXPECTED, "drops": DROPS},
        "columns": source["columns"],
        "versions": {
            "nfacep": _version("nfacep"),
            "numpy": np.__version__,
            "pyarrow": pa.__version__,
            "pyspark": pyspark.__version__,
        },
        # how this run went; the only part that depends on the Spark set-up
        "run": {
            "master": master,
            "tasks": tasks,
            "seconds": {k: round(v, 3) for k, v in seconds.items()},
        },
    }


def _version(dist: str) -> str | None:
    from importlib import metadata

    with contextlib.suppress(metadata.PackageNotFoundError):
        return metadata.version(dist)
    return None


def manifest_values(manifest: dict, nfa, path: str) -> ParamValues | None:
    """The runtime parameters' values a vectors manifest (at ``path``) was made with."""
    types = nfa.program.parameters
    if not types:
        return None
    given = manifest.get("runtime_parameters")
    if not isinstance(given, dict):
        raise UsageError(
            f"{path}: no runtime_parameters for the queries' parameters "
            f"({', '.join(':' + n for n in types)}); make the vectors again"
        )
    return ParamValues.from_initial(types, given, source=path)


def manifest_params(manifest: dict, path: str) -> EngineParams:
    """The engine parameters a vectors manifest (at ``path``) was made with."""
    return EngineParams.from_dict(manifest.get("engine"), source=path)
