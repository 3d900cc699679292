"""Reading tuple files (CSV, Parquet, a folder of Parquet part files) to typed numpy columns
(:class:`~nfacep.io.tuples.Tuples`), whole (:func:`read`) or in pieces (:func:`read_chunks`),
with row-exact error reporting: an error names the file, the row, its line and the column.

The formats are :mod:`~nfacep.io.csvfile`, :mod:`~nfacep.io.parquet` and
:mod:`~nfacep.io.folder`; :mod:`~nfacep.io.convert` makes the typed columns (UINT → uint64,
INT → int64, BOOL → bool, ENUM → int64 label index, FLOAT32 → float32, the nearest single).

A folder is read as Spark and ``nfacep vectors`` write one (``V/tuples.parquet/``): see
:func:`read` for which files it reads, in what order, and how its errors name a row.
"""

from __future__ import annotations

import itertools
import os
import stat
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import TypeVar, cast

import numpy as np
import pyarrow as pa

from ..errors import DataError
from ..schema import Schema
from . import csvblocks, csvfile, parquet
from . import folder as folder_mod
from .columns import renamed
from .convert import from_table
from .tuples import JoinedColumns, Location, Origin, Tuples, column_dtype, piece_sizes

__all__ = ["check_input", "prefetch", "read", "read_chunks", "read_stream"]

T = TypeVar("T")
B = TypeVar("B")
P = TypeVar("P")


def read(path: str, schema: Schema) -> Tuples:
    """Read tuples from a CSV file (header of field names; extra columns ignored), a Parquet
    file (``.parquet`` or ``.pq``), or a folder of Parquet part files.

    A folder is read as Spark (and so ``nfacep vectors``, whose ``V/tuples.parquet/`` is one)
    writes it: every file below it is a Parquet part file except hidden ones and those whose
    name starts with ``_`` (checksums ``.part-….crc``, ``_SUCCESS``, ``_metadata``), found with
    pyarrow's dataset discovery. Every part file must hold the stream's fields with the same
    types (extra columns are ignored). Stream order:

    - when the part files have a ``seq`` column and the stream has no field of that name (the
      vectors' sequence number), ascending ``seq``; its values must be distinct integers (gaps
      are allowed: the match file's ``seq`` stays the 0-based position in the stream);
    - otherwise the part files in name order, numbers within names compared as numbers
      (``part-2`` before ``part-10``; Spark's zero-padded ``part-00002`` sort alike), each
      file's rows in file order.

    Errors in a folder name the part file and the 1-based row within it (a value, a missing
    or differently typed column, a duplicate ``seq``); an ORDER BY error
    (:func:`~nfacep.io.tuples.check_order`) also gives the stream position. A folder without
    part files, with an unreadable one, or whose part files disagree on a column's type is a
    :class:`DataError`.
    """
    check_input(path)
    if os.path.isdir(path):
        return folder_mod.read_folder(path, schema)
    if path.lower().endswith((".parquet", ".pq")):
        return from_table(parquet.read_parquet(path, schema), schema, source=Location.parquet(path))
    table, source = csvfile.read_csv(path, schema)
    return from_table(table, schema, source=source, text=True)


def check_input(path: str) -> None:
    """A :class:`DataError` unless ``path`` is a tuple file or folder that can be read: it
    exists, and a file is a regular one (a pipe, such as ``/dev/stdin`` fed by ``|``, would be
    read once: its header read, the rest found empty or waited for forever)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        raise DataError(f"{path}: no such file or folder") from None
    if not stat.S_ISDIR(mode) and not stat.S_ISREG(mode):
        raise DataError(
            f"{path}: not a regular file (a pipe, a device or a socket); nfacep reads a tuple "
            "file more than once, so write it to a file and give that"
        )


def read_chunks(
    path: str, schema: Schema, rows: int, *, first: int | None = None
) -> Iterator[Tuples]:
    """:func:`read` in pieces of ``rows`` tuples (the last may be shorter; none for an input
    without tuples), in stream order, each with its ``offset``: concatenated, the pieces are
    what :func:`read` returns, and an error names its row as :func:`read` would. With
    ``first``, the pieces grow from ``first`` tuples to ``rows``
    (:func:`~nfacep.io.tuples.piece_sizes`), so that the first comes early.

    A Parquet file is read a batch at a time, a CSV file a block of whole lines at a time
    (:mod:`~nfacep.io.csvblocks`: parsed with the stream's types where pyarrow reads them as
    nfacep does, several blocks at once in threads, ahead of the pieces), a folder of part
    files a file at a time when that is its order (:func:`_folder_chunks`), so the memory
    needed grows with ``rows``, not with the input. Read whole and then cut (the memory of
    :func:`read`): a folder whose ``seq`` interleaves its files, and any input in which a
    piece meets an error (read whole for the error :func:`read` raises), a quote left open at
    a line end among them (pyarrow's reader goes on into the next lines: a piece with a value
    that holds a line break, in any column)."""
    for piece, _ in _pieces(path, schema, rows, first, ends=False):
        yield piece


def read_stream(
    path: str, schema: Schema, rows: int, *, first: int | None = None
) -> Iterator[tuple[Tuples, bool]]:
    """:func:`read_chunks`' pieces, each with whether it is the stream's last, as a matcher
    fed piece by piece is told (False when the reader cannot say without reading on: the
    last piece may then come with False). A CSV file's pieces may end before their size, at
    the end of a block towards the end of the file: a piece ends with a block once the rows
    left after the block are no more than it holds (estimated from the block's bytes per
    row), so that the pieces shrink with the blocks (:func:`~nfacep.io.csvblocks.spans`) and
    the last is small: it alone is matched after the file is parsed. (Pieces of other
    inputs are of :func:`read_chunks`' sizes; a CSV file read whole after an error goes on
    from where its pieces stopped, to where :func:`read_chunks`' would end.)"""
    yield from _pieces(path, schema, rows, first, ends=True)


def _pieces(
    path: str, schema: Schema, rows: int, first: int | None, ends: bool
) -> Iterator[tuple[Tuples, bool]]:
    """:func:`read_stream`; ``ends=False``: with every piece of its size (:func:`read_chunks`)."""
    if rows < 1 or (first is not None and first < 1):
        raise ValueError(f"rows {rows}, first {first}: a piece needs at least one tuple")
    check_input(path)
    if os.path.isdir(path):
        pieces = _folder_chunks(path, schema, rows, first)
    elif path.lower().endswith((".parquet", ".pq")):
        pieces = _parquet_chunks(path, schema, rows, first)
    else:
        return _csv_chunks(path, schema, rows, first, ends)
    # (a piece shorter than its size is the last: these pieces are all of their size but it)
    sizes = piece_sizes(rows, first)  # (endless)
    return ((piece, piece.n < size) for piece, size in zip(pieces, sizes, strict=False))


def _cut(
    whole: Tuples, rows: int, first: int | None = None, start: int = 0
) -> Iterator[tuple[Tuples, bool]]:
    """A whole read, in pieces of ``rows`` (growing from ``first``: :func:`piece_sizes`), from
    row ``start`` on (the piece that holds it from there), each with whether it is the last."""
    at = 0
    for size in piece_sizes(rows, first):
        if at >= whole.n:
            return
        end = min(whole.n, at + size)
        if end > start:
            yield _rows(whole, max(at, start), end), end == whole.n
        at = end


def _rows(whole: Tuples, at: int, end: int) -> Tuples:
    """The rows ``[at, end)`` of a whole read."""
    origin = None
    if whole.origin is not None:
        o = whole.origin
        origin = Origin(o.files, o.file[at:end], o.row[at:end])
    location = None if origin is not None else (whole.location or Location(whole.source)).at(at)
    columns = {f: c[at:end] for f, c in whole.columns.items()}
    return Tuples(columns, end - at, whole.source, origin, at, location)


def prefetch(items: Iterator[T], name: str = "nfacep-decode") -> Generator[T, None, None]:
    """``items``, the next one made in a thread (named ``name``) while the caller works on
    this one: reading and converting (pyarrow, numpy) and matching (numba's loops) release the
    GIL, so on two cores they overlap. One item ahead at most, so two are held: the caller's
    and the next. An error in making one is raised where the caller asks for it; closing the
    generator (or leaving it) cancels what was asked for."""
    from concurrent.futures import ThreadPoolExecutor

    done = object()
    pool = ThreadPoolExecutor(1, thread_name_prefix=name)
    future = pool.submit(next, items, done)
    try:
        while True:
            item = future.result()
            if item is done:
                return
            future = pool.submit(next, items, done)
            yield cast(T, item)  # not the sentinel: one of items
    finally:
        future.cancel()
        pool.shutdown(wait=False, cancel_futures=True)


def _parquet_chunks(path: str, schema: Schema, rows: int, first: int | None) -> Iterator[Tuples]:
    import pyarrow.parquet as pq

    def batches() -> Iterator[pa.RecordBatch]:
        # without pre_buffer: pyarrow would read ahead into memory what it has not yet
        # been asked for (about the file's size, measured)
        f = pq.ParquetFile(path, pre_buffer=False)
        cols = parquet.check_columns(path, f.schema_arrow, schema.names, schema)
        for batch in f.iter_batches(batch_size=min(rows, 1 << 20), columns=cols):
            yield renamed(batch, cols, schema.names)

    offset = 0
    try:
        for table in prefetch(parquet.rebatch(batches(), rows, first)):
            piece = from_table(table, schema, source=Location.parquet(path, offset))
            yield Tuples(piece.columns, piece.n, piece.source, None, offset, piece.location)
            offset += piece.n
    except (DataError, pa.ArrowException, OSError, UnicodeDecodeError):
        yield from _pieces_of(_as_read(path, schema, rows, offset, first))
        return
    if not offset:  # no tuples: read() still refuses a column whose type cannot hold its field
        yield from _pieces_of(_as_read(path, schema, rows, 0, first))


def _csv_chunks(
    path: str, schema: Schema, rows: int, first: int | None, ends: bool
) -> Iterator[tuple[Tuples, bool]]:
    header, data_start, more = csvfile.read_header(path, schema)
    if not more:
        return
    source = Location(path, line_of=csvfile.CsvLines(path, data_start).line_of)
    offset = 0
    try:
        # blocks parsed (pyarrow) and converted in threads, a block each, ahead of the
        # pieces made of them here (``match`` reads the pieces in a thread of their own)
        parsed = csvblocks.parse_blocks(path, header, data_start, schema)
        blocks = csvblocks.convert_blocks(parsed, schema, source)
        for piece, last in _tuples_pieces(blocks, piece_sizes(rows, first), source, schema, ends):
            yield piece, last
            offset += piece.n
    except (DataError, pa.ArrowException):
        yield from _as_read(path, schema, rows, offset, first)


def _tuples_pieces(
    blocks: Iterator[tuple[Tuples | pa.Table, int | None]],
    sizes: Iterator[int],
    source: Location,
    schema: Schema,
    ends: bool,
) -> Iterator[tuple[Tuples, bool]]:
    """Converted blocks of the rows of one file (``source``; :func:`~nfacep.io.csvblocks.
    convert_blocks`) as pieces of exactly the ``sizes`` (:func:`piece_sizes`; the last may be
    shorter, none empty), or, with ``ends``, ending early with a block once no more rows than
    they hold are left (:func:`read_stream`); each with its ``offset`` and location, and
    whether it is the last. A block of text that did not convert is converted a piece's share
    at a time, so that the pieces before its bad row come first."""

    def size(block: tuple[Tuples | pa.Table, int | None]) -> int:
        data = block[0]
        return data.num_rows if isinstance(data, pa.Table) else data.n

    def part(block: tuple[Tuples | pa.Table, int | None], at: int, take: int, position: int):
        data = block[0]
        if isinstance(data, pa.Table):
            where = source.at(position)
            return from_table(data.slice(at, take), schema, where, text=True)
        return _slice(data, at, at + take)

    def after(block: tuple[Tuples | pa.Table, int | None]) -> int | None:
        left = block[1]
        return left if ends or left == 0 else None

    for held, count, offset, last in _regrouped(blocks, sizes, size, part, after):
        yield joined(held, count, offset, source, schema), last


def _regrouped(
    blocks: Iterable[B],
    sizes: Iterator[int],
    size: Callable[[B], int],
    part: Callable[[B, int, int, int], P],
    after: Callable[[B], int | None] | None = None,
) -> Iterator[tuple[list[P], int, int, bool]]:
    """Blocks of any sizes regrouped into pieces of exactly the ``sizes`` rows in turn (the last
    may be shorter, none empty): per piece its parts, its rows, its first row's position in the
    stream and whether it is known to be the last. ``size`` gives a block's rows;
    ``part(block, at, take, position)`` the ``take`` rows of ``block`` from its row ``at``,
    the stream's row ``position``; ``after(block)``, when given and not None, about how many
    rows come after the block (0: none): a piece ends with the block when that is no more
    than the piece holds (towards the end of the input, so that the last piece is small)."""
    held: list[P] = []
    count = offset = 0
    rows = next(sizes)
    for block in blocks:
        at, n = 0, size(block)
        left = None if after is None else after(block)
        while at < n:
            take = min(rows - count, n - at)
            held.append(part(block, at, take, offset + count))
            at, count = at + take, count + take
            if count == rows or (at == n and left is not None and left <= count):
                yield held, count, offset, at == n and left == 0
                offset += count
                held, count, rows = [], 0, next(sizes)
    if count:
        yield held, count, offset, True


def _slice(t: Tuples, a: int, b: int) -> Tuples:
    if a == 0 and b == t.n:
        return t
    return Tuples({f: c[a:b] for f, c in t.columns.items()}, b - a, t.source)


def joined(held: list[Tuples], n: int, offset: int, source: Location, schema: Schema) -> Tuples:
    """One piece of the parts ``held``, its columns of the stream's numpy types (the parts of a
    typed block are in pyarrow's: cast as they are copied), each copied together when it is
    first read (:class:`~nfacep.io.tuples.JoinedColumns`): a field the queries do not read is
    parsed and checked, not copied (marathon's ``time`` and ``speed``: 12 of the 28 bytes a
    tuple takes)."""
    dtypes = {f.name: column_dtype(f.type) for f in schema.fields}
    parts = {name: [t.columns[name] for t in held] for name in schema.names}
    columns = JoinedColumns(parts, dtypes)
    return Tuples(columns, n, source.path, None, offset, source.at(offset))


def _as_read(
    path: str, schema: Schema, rows: int, offset: int, first: int | None = None
) -> Iterator[tuple[Tuples, bool]]:
    """After the pieces before stream position ``offset`` met an error: the error read()
    raises, which need not be the one met (read converts a column at a time, so with several
    bad values it names the first of the first field that has one, which may come in a later
    piece; pyarrow's message for a damaged Parquet file depends on how it is read). Should
    read() accept the file, its pieces from ``offset`` on (:func:`_cut`), each with whether
    it is the last. Costs the memory of read(), on the error path only."""
    yield from _cut(read(path, schema), rows, first, start=offset)


def _pieces_of(pairs: Iterator[tuple[Tuples, bool]]) -> Iterator[Tuples]:
    for piece, _ in pairs:
        yield piece


def _folder_chunks(
    folder: str, schema: Schema, rows: int, first: int | None = None
) -> Iterator[Tuples]:
    """:func:`read_chunks` of a folder of part files, a file at a time when that is the
    stream's order: without ``seq``, the files in name order; with ``seq``, when each file's
    ``seq`` rises and the files' ranges do not overlap (a first pass reads the ``seq`` column
    alone), the files in the order of their ranges. Otherwise the folder is read whole and
    cut. An error is the one :func:`read` raises (read whole on the error path)."""
    import pyarrow.parquet as pq

    files, use_seq, cols, _ = folder_mod.folder_parts(folder, schema, read_data=False)
    order = list(range(len(files)))
    offset = 0
    try:
        if use_seq:
            ranges = [folder_mod.seq_range(path) for path in files]
            if any(r is False for r in ranges):  # a file whose seq does not rise
                yield from _pieces_of(_cut(folder_mod.read_folder(folder, schema), rows, first))
                return
            spans = {i: r for i, r in enumerate(ranges) if isinstance(r, tuple)}
            order = sorted(spans, key=lambda i: spans[i][0])
            if any(spans[a][1] >= spans[b][0] for a, b in itertools.pairwise(order)):
                # ranges that overlap
                yield from _pieces_of(_cut(folder_mod.read_folder(folder, schema), rows, first))
                return

        def batches() -> Iterator[tuple[pa.RecordBatch, int, int]]:
            for i in order:
                f = pq.ParquetFile(files[i], pre_buffer=False)
                actual = parquet.check_columns(files[i], f.schema_arrow, cols, schema)
                at = 0
                for batch in f.iter_batches(batch_size=min(rows, 1 << 20), columns=actual):
                    batch = renamed(batch, actual, cols)
                    yield batch, i, at
                    at += batch.num_rows

        def size(block: tuple[pa.RecordBatch, int, int]) -> int:
            return block[0].num_rows

        def part(block: tuple[pa.RecordBatch, int, int], at: int, take: int, _: int) -> tuple:
            batch, i, begins = block
            return batch.slice(at, take), i, begins + at

        for held, count, start, _ in _regrouped(
            prefetch(batches()), piece_sizes(rows, first), size, part
        ):
            yield _folder_piece(held, files, schema, folder, start)
            offset = start + count
    except (DataError, pa.ArrowException, OSError, UnicodeDecodeError):
        yield from _pieces_of(_as_read(folder, schema, rows, offset, first))
        return
    if not offset:  # no tuples: read() says what it says of an empty folder
        yield from _pieces_of(_as_read(folder, schema, rows, 0, first))


def _folder_piece(held: list, files: list[str], schema: Schema, folder: str, offset: int) -> Tuples:
    """A piece of a folder's stream from slices of its files' batches: (batch, file index,
    first row within the file)."""
    table = pa.Table.from_batches([b.select(list(schema.names)) for b, _, _ in held])
    piece = from_table(table, schema, source=folder)
    which = np.concatenate([np.full(b.num_rows, i, dtype=np.int64) for b, i, _ in held])
    within = np.concatenate([np.arange(at, at + b.num_rows, dtype=np.int64) for b, _, at in held])
    return Tuples(piece.columns, piece.n, folder, Origin(tuple(files), which, within), offset)
