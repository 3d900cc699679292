"""A recorded trace read and numbered in Spark tasks: each tuple's ``seq`` is its position in
the stream, as ``nfacep match`` orders it, without one serial pass over the trace on the
driver. ``vectors --input`` and ``match --master`` write their tuples folder with it
(:func:`record`).

How:

1. The driver cuts the input into pieces in stream order (:func:`plan`): a Parquet file's row
   groups, those of a folder's part files in the folder's order (names, or ``seq`` ranges,
   read from the files' footers and their ``seq`` columns in tasks), or a CSV file's blocks of
   lines (:data:`CSV_BLOCK` bytes, cut at line starts). How many tuples each holds comes
   from the Parquet footers for free; a CSV block's non-blank lines are counted in tasks.
2. Prefix sums of the counts give each piece's first ``seq``; each task reads, checks and
   converts its pieces (:func:`nfacep.io.convert.from_table`, ORDER BY within the piece) and
   writes them numbered from their offset, one part file a piece, a batch at a time; it
   reports each piece's first and last ORDER BY values, which the driver compares across the
   pieces.
3. Whatever a task does not take as the serial reader would (a bad value, a row count other
   than the one counted, a quoted value holding a line break, a long line, ``seq`` ranges that
   interleave, an order broken between pieces) sends the whole input to the serial reader
   (:func:`serial`, through :func:`nfacep.backend.read_pieces`: the reader and checks
   ``match`` uses, though ``match`` cuts its pieces otherwise): it raises the error ``match``
   raises, at the same file, row and column, or, for an input that
   is valid but not cut into pieces (a folder whose ``seq`` interleaves its files), numbers
   it. So errors and order rules are the local command's by construction, and checking costs
   nothing more unless something fails.
"""

from __future__ import annotations

import functools
import itertools
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from nfacep.errors import DataError

__all__ = [
    "CSV_BLOCK",
    "KEYS",
    "Csv",
    "Piece",
    "owner",
    "plan",
    "read_piece",
    "record",
    "serial",
    "share",
]

#: Bytes of a CSV file a task takes at a time (a piece: the lines that start in it).
CSV_BLOCK = 32 << 20
#: Distinct partition keys a piece reports at most (with more, Spark counts the keys).
KEYS = 1 << 16
#: What a task's reading may raise on input it does not take (then the serial reader decides).
_REFUSED = (DataError, pa.ArrowException, OSError, UnicodeDecodeError, ValueError)


@dataclass(frozen=True)
class Piece:
    """A piece of the stream, in stream order: row group ``group`` of the Parquet file
    ``path``, or (``group`` None) the lines of the CSV file ``path`` that start in bytes
    ``start`` to ``stop``; ``rows`` tuples, the first numbered ``offset``."""

    index: int
    path: str
    group: int | None
    rows: int
    offset: int = 0
    start: int = 0
    stop: int = 0


@dataclass(frozen=True)
class Csv:
    """What a task needs of a CSV file beyond its pieces: the header's columns (the stream's
    fields among them) and where the data rows start."""

    header: tuple[str, ...]
    data_start: int


def record(
    spark, nfa, path: str, folder: str, counter, rows: int, tasks: int, *, wide: bool = False
) -> tuple[int, int | None]:
    """``path`` (a CSV or Parquet file, or a folder of part files) numbered into ``folder``
    (created: vectors' tuples layout, one part file a piece) by Spark tasks; returns how many
    tuples, and how many distinct partition keys (None when not counted: more than
    :data:`KEYS` in a piece, or read serially). An input the tasks do not take goes to
    :func:`serial`, which raises its error or numbers it. ``wide``: UINT(64) fields as
    uint64 columns, every value kept (``match --master``'s scratch tuples; the vectors hold
    integers as int64, a value beyond it an error naming its place)."""
    os.mkdir(folder)
    pieces, csv = plan(spark, path, nfa.program.schema, tasks)
    if pieces:
        task = functools.partial(_number, nfa.program, csv, folder, rows, counter, wide)
        n_tasks = min(tasks, len(pieces))
        chunks = [pieces[i::n_tasks] for i in range(n_tasks)]
        reports = spark.sparkContext.parallelize(chunks, n_tasks).map(task).collect()
        reported = sorted(itertools.chain.from_iterable(reports), key=lambda r: r[0])
        if _agree(pieces, reported, nfa.program.order_fields):
            keys = [r[4] for r in reported]
            counted = None
            if nfa.program.partition_fields and all(k is not None for k in keys):
                counted = len(np.unique(np.concatenate(keys), axis=0))
            return sum(p.rows for p in pieces), counted
    shutil.rmtree(folder)
    os.mkdir(folder)
    return serial(nfa, path, folder, counter, rows, wide=wide), None


def serial(nfa, path: str, folder: str, counter, rows: int, *, wide: bool = False) -> int:
    """The trace read on the driver a piece of ``rows`` tuples at a time, as ``nfacep match``
    reads it (every value and ORDER BY checked, an error naming its file, row and column) and
    written to ``folder``, one part file a piece (``wide``: as :func:`record`); returns the
    number of tuples."""
    from nfacep.backend import read_pieces

    schema = nfa.program.schema
    n = 0
    try:
        for i, piece in enumerate(read_pieces(path, nfa, rows)):
            _write(folder, f"part-{i:05d}.parquet", schema, piece, piece.offset, wide=wide).close()
            n += piece.n
            if counter is not None:
                counter.add(piece.n)
    finally:
        if counter is not None:
            counter.finished()  # (closes its live report's connection)
    return n


def _write(folder: str, name: str, schema, piece, offset: int, writer=None, *, wide=False):
    """A piece of tuples numbered from ``offset``, as a part file ``name`` of ``folder`` (or a
    batch of ``writer``'s, returned); ``wide``: UINT(64) fields as uint64 columns."""
    import pyarrow.parquet as pq

    from nfacep.lang.types import UIntType

    from .generate import to_arrow

    columns = {"seq": np.arange(offset, offset + piece.n, dtype=np.int64)}
    unsigned = {}
    for f in schema.fields:
        if wide and type(f.type) is UIntType and f.type.bits == 64:
            unsigned[f.name] = piece.columns[f.name]
            columns[f.name] = np.zeros(piece.n, np.int64)  # (replaced below)
        else:
            columns[f.name] = int64_column(piece, f)
    batch = to_arrow(schema, columns)
    if unsigned:
        arrays, fields = list(batch.columns), list(batch.schema)
        for name_, values in unsigned.items():
            at = batch.schema.get_field_index(name_)
            arrays[at] = pa.array(values, pa.uint64())
            fields[at] = pa.field(name_, pa.uint64(), nullable=False)
        batch = pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))
    if writer is None:
        writer = pq.ParquetWriter(os.path.join(folder, name), batch.schema)
    writer.write_batch(batch)
    return writer


def int64_column(piece, field) -> np.ndarray:
    """A column of a piece of the trace as the vectors hold it (UINT and INT as int64: a
    UINT(64) value beyond it is an error naming its place)."""
    values = piece.columns[field.name]
    if values.dtype == np.uint64 and piece.n:
        big = np.flatnonzero(values > np.uint64(np.iinfo(np.int64).max))
        if len(big):
            row = int(big[0])
            raise DataError(
                f"{piece.where(row, field.name)}: {int(values[row])} is beyond the vectors' "
                f"64-bit signed integer column ({np.iinfo(np.int64).max} at most)"
            )
        return values.astype(np.int64)
    return values


# --- the plan: pieces in stream order, their counts and offsets ---------------------------------


def plan(spark, path: str, schema, tasks: int) -> tuple[list[Piece], Csv | None]:
    """The pieces of ``path`` in stream order with their offsets, and for a CSV file its
    header; no pieces when the tasks cannot take it (no tuples, a folder whose ``seq``
    interleaves its files, a long CSV line): the serial reader does."""
    from nfacep.io.reader import check_input

    check_input(path)  # (a pipe would be read once, here)
    if os.path.isdir(path):
        pieces = _folder_pieces(spark, path, schema, tasks)
        csv = None
    elif path.lower().endswith((".parquet", ".pq")):
        pieces = _parquet_pieces(path, schema)
        csv = None
    else:
        pieces, csv = _csv_pieces(spark, path, schema, tasks)
    offsets = np.cumsum([0, *(p.rows for p in pieces)])
    pieces = [
        Piece(i, p.path, p.group, p.rows, int(offsets[i]), p.start, p.stop)
        for i, p in enumerate(pieces)
    ]
    if not offsets[-1]:  # no tuples: the serial reader says what it says of that
        return [], None
    return pieces, csv


def _groups(path: str) -> list[Piece]:
    """A Parquet file's row groups, their counts from its footer."""
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(path, pre_buffer=False).metadata
    return [Piece(0, path, g, meta.row_group(g).num_rows) for g in range(meta.num_row_groups)]


def _parquet_pieces(path: str, schema) -> list[Piece]:
    import pyarrow.parquet as pq

    from nfacep.io import parquet

    try:
        parquet.check_columns(path, pq.read_schema(path), schema.names, schema)
        return _groups(path)
    except _REFUSED:
        return []


def _folder_pieces(spark, folder: str, schema, tasks: int) -> list[Piece]:
    """A folder's part files' row groups in the folder's order: by name, or by the ``seq``
    ranges of its files (read in tasks), when they do not overlap."""
    from nfacep.io import folder as folder_mod

    try:
        files, use_seq, _, _ = folder_mod.folder_parts(folder, schema, read_data=False)
        groups = [_groups(p) for p in files]
    except _REFUSED:
        return []
    if use_seq:
        n_tasks = max(1, min(tasks, len(files)))
        ranges = spark.sparkContext.parallelize(files, n_tasks).map(_seq_range_or_none).collect()
        if any(r is False for r in ranges):  # a file whose seq does not rise, or unreadable
            return []
        spans = {i: r for i, r in enumerate(ranges) if isinstance(r, tuple)}
        order = sorted(spans, key=lambda i: spans[i][0])
        if any(spans[a][1] >= spans[b][0] for a, b in itertools.pairwise(order)):
            return []  # ranges that overlap: read whole and sorted, serially
        groups = [groups[i] for i in order]
    return [p for g in groups for p in g]


def _seq_range_or_none(path: str):
    """:func:`nfacep.io.folder.seq_range` in a task; False for a file it cannot read."""
    from nfacep.io import folder as folder_mod

    try:
        return folder_mod.seq_range(path)
    except _REFUSED:
        return False


def _csv_pieces(spark, path: str, schema, tasks: int) -> tuple[list[Piece], Csv | None]:
    """A CSV file's blocks of lines, their non-blank lines counted in tasks."""
    from nfacep.io import csvfile

    try:
        header, data_start, more = csvfile.read_header(path, schema)
        size = os.path.getsize(path)
    except _REFUSED:
        return [], None
    if not more:
        return [], None
    block = max(1, min(CSV_BLOCK, -(-(size - data_start) // max(tasks, 1))))
    cuts = [*range(data_start, size, block), size]
    spans = list(itertools.pairwise(cuts))
    counted = (
        spark.sparkContext.parallelize(spans, max(1, min(tasks, len(spans))))
        .map(functools.partial(_count_lines, path, data_start))
        .collect()
    )
    if any(longest >= csvfile.LONG_LINE for _, _, _, longest in counted):
        return [], None
    pieces = [Piece(0, path, None, n, 0, s, e) for s, e, n, _ in counted if n]
    return pieces, Csv(tuple(header), data_start)


def _count_lines(path: str, data_start: int, span: tuple[int, int]):
    """(first byte, end byte, non-blank lines, the longest line) of the lines of ``path``
    that start in the bytes ``span``."""
    from nfacep.io import csvfile

    size = os.path.getsize(path)
    with open(path, "rb") as f:
        start = csvfile.line_start(f, span[0], data_start, size)
        stop = csvfile.line_start(f, span[1], data_start, size) if span[1] < size else size
        if stop <= start:
            return start, start, 0, 0
        f.seek(start)
        return (start, stop, *csvfile.line_stats(f.read(stop - start)))


# --- the tasks ----------------------------------------------------------------------------------


def _number(
    program, csv: Csv | None, folder: str, rows: int, counter, wide: bool, pieces: list[Piece]
):
    """A task: its pieces read, checked, converted and written numbered from their offsets
    (``wide``: as :func:`record`); for each, (index, whether it was taken, the ORDER BY
    fields' first and last values)."""
    reports = []
    for piece in pieces:
        try:
            taken = _number_piece(program, csv, folder, rows, counter, piece, wide)
            reports.append((piece.index, True, *taken))
        except _REFUSED:
            reports.append((piece.index, False, None, None, None))
    counter.finished()
    return reports


def _number_piece(
    program, csv: Csv | None, folder: str, rows: int, counter, piece: Piece, wide: bool
):
    """One piece numbered into its part file; the ORDER BY fields' first and last values."""
    from nfacep.io.tuples import check_order

    schema = program.schema
    order = program.order_fields
    first: dict[str, object] = {}
    before: dict[str, object] = {}
    width = len(program.partition_fields)
    keys = np.zeros((0, width), np.int64) if width else None
    writer = None
    n = 0
    try:
        for data in read_piece(schema, csv, piece, rows):
            if keys is not None:
                keys = _distinct(keys, [data.columns[k] for k in program.partition_fields])
            for f in order:
                check_order(data, f, before=before.get(f))
                first.setdefault(f, data.columns[f][0].item())
                before[f] = data.columns[f][-1]
            name = f"part-{piece.index:05d}.parquet"
            writer = _write(folder, name, schema, data, piece.offset + n, writer, wide=wide)
            n += data.n
            counter.add(data.n)
    finally:
        if writer is not None:
            writer.close()
    if n != piece.rows:
        raise DataError(f"{piece.path}: {n} tuples where {piece.rows} were counted")
    return first, {f: v.item() for f, v in before.items()}, keys


def _distinct(keys: np.ndarray, columns: list[np.ndarray]) -> np.ndarray | None:
    """The distinct rows of ``keys`` and of the key ``columns`` (as 64-bit integers, by
    pyarrow's hash grouping); None beyond :data:`KEYS`."""
    as_int = [(c.view(np.int32) if c.dtype == np.float32 else c).astype(np.int64) for c in columns]
    both = [np.concatenate([keys[:, i], c]) for i, c in enumerate(as_int)]
    names = [str(i) for i in range(len(both))]
    groups = pa.table(dict(zip(names, both, strict=True))).group_by(names).aggregate([])
    if groups.num_rows > KEYS:
        return None
    return np.stack([groups.column(n).to_numpy() for n in names], axis=1)


def read_piece(schema, csv: Csv | None, piece: Piece, rows: int) -> Iterator:
    """A piece's tuples, converted and checked, in batches of ``rows`` at most."""
    from nfacep.io.convert import from_table
    from nfacep.io.parquet import rebatch

    if csv is None:
        batches = _parquet_batches(schema, piece, rows)
        for table in rebatch(batches, rows):
            yield from_table(table, schema, source=piece.path)
        return
    table = _csv_table(schema, csv, piece)
    for at in range(0, table.num_rows, rows):
        yield from_table(table.slice(at, rows), schema, source=piece.path, text=True)


def _parquet_batches(schema, piece: Piece, rows: int) -> Iterator[pa.RecordBatch]:
    import pyarrow.parquet as pq

    from nfacep.io import parquet
    from nfacep.io.columns import renamed

    f = pq.ParquetFile(piece.path, pre_buffer=False)
    names = list(schema.names)
    cols = parquet.check_columns(piece.path, f.schema_arrow, names, schema)
    for batch in f.iter_batches(
        batch_size=min(rows, 1 << 20), row_groups=[piece.group], columns=cols
    ):
        yield renamed(batch, cols, names)


def _csv_table(schema, csv: Csv, piece: Piece) -> pa.Table:
    """A CSV piece's lines parsed to the stream's columns, typed where pyarrow's conversion
    gives nfacep's values and as text otherwise (:func:`nfacep.io.csvblocks.parse_block`, as
    ``match`` reads a block: a value holding a line break, or a long line, is refused; the
    rows are counted against the piece's lines by the caller)."""
    from nfacep.io import csvblocks

    with open(piece.path, "rb") as f:
        f.seek(piece.start)
        data = f.read(piece.stop - piece.start)
    return csvblocks.parse_block(data, list(csv.header), schema)


def _agree(pieces: list[Piece], reported: list, order: tuple[str, ...]) -> bool:
    """Whether every piece was taken and the ORDER BY fields do not fall between pieces."""
    if [r[0] for r in reported] != [p.index for p in pieces] or not all(r[1] for r in reported):
        return False
    last: dict[str, object] = {}
    for _, _, first, end, _ in reported:
        for f in order:
            if f in first:
                if f in last and first[f] < last[f]:
                    return False
                last[f] = end[f]
    return True


# --- the numbered tuples, read back by the matching tasks ---------------------------------------


def share(folder: str, columns: list[str], key_schema, tasks: int, task: int, rows: int):
    """The numbered tuples of ``folder`` (its part files in the order of the numbers in their
    names, :func:`nfacep.io.folder.natural_order`, are the stream order:
    :func:`record` and :func:`serial` name them so) whose partition key falls to task ``task``
    of ``tasks`` (:func:`owner`; every tuple with ``tasks`` 1), as record batches of the
    ``columns`` of at most ``rows`` tuples, in ``seq`` order. A matching task reads its share
    straight from the files: no shuffle, no sort."""
    import pyarrow.parquet as pq

    from nfacep.io.convert import from_table
    from nfacep.io.folder import natural_order

    # (by the numbers in their names: part-100000 after part-99999)
    for name in sorted(os.listdir(folder), key=natural_order):
        if not name.endswith(".parquet") or name.startswith((".", "_")):
            continue
        f = pq.ParquetFile(os.path.join(folder, name), pre_buffer=False)
        for batch in f.iter_batches(batch_size=rows, columns=columns):
            if tasks > 1:
                keys = from_table(pa.Table.from_batches([batch]), key_schema, source=name)
                mine = owner([keys.columns[k] for k in key_schema.names], tasks) == task
                batch = batch.filter(pa.array(mine))
            if batch.num_rows:
                yield batch


def owner(columns: list[np.ndarray], tasks: int) -> np.ndarray:
    """The task (0 to ``tasks`` - 1) of each tuple, by a hash of its partition key's
    ``columns`` (typed as :class:`nfacep.io.tuples.Tuples` holds them): whole keys to a task,
    spread evenly."""
    h = np.zeros(len(columns[0]) if columns else 0, dtype=np.uint64)
    for c in columns:
        bits = c.view(np.uint32) if c.dtype == np.float32 else c
        h = (h ^ bits.astype(np.uint64)) * np.uint64(0x9E3779B97F4A7C15)
        h ^= h >> np.uint64(31)
    return (h % np.uint64(tasks)).astype(np.int64)
