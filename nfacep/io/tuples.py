"""Tuple files (CSV, Parquet, a folder of Parquet part files) to typed numpy columns, with
row-exact error reporting.

Values are converted column-wise with pyarrow; only when a column fails is it scanned value
by value, to name the first offending row. Columns come out as: UINT → uint64, INT → int64,
BOOL → bool, ENUM → int64 label index, FLOAT32 → float32 (the nearest single).

A folder is read as Spark and ``nfacep vectors`` write one (``V/tuples.parquet/``): see
:func:`read` for which files it reads, in what order, and how its errors name a row.
"""

from __future__ import annotations

import codecs
import itertools
import mmap
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import DataError
from ..lang.types import BoolType, EnumType, FieldType, Float32Type, IntType, UIntType
from ..lang.values import fix_float32_rounding
from ..schema import Schema

__all__ = [
    "Origin",
    "Tuples",
    "check_order",
    "format_value",
    "from_table",
    "prefetch",
    "read",
    "read_chunks",
    "rebatch",
]


@dataclass(frozen=True)
class Origin:
    """Where each tuple of a folder of part files came from (for error messages)."""

    files: tuple[str, ...]  #: the part files read, in name order
    file: np.ndarray  #: per tuple, in stream order: the index of its file in ``files``
    row: np.ndarray  #: per tuple, in stream order: its 0-based row within that file


@dataclass
class Tuples:
    """A batch of tuples: one numpy column per field, in stream order."""

    columns: dict[str, np.ndarray]
    n: int
    source: str = "<tuples>"
    origin: Origin | None = None  #: set when the tuples were read from a folder
    offset: int = 0  #: the stream position of the first tuple (a piece of a longer stream)

    def where(self, row: int, column: str) -> str:
        """Where the tuple ``row`` (0-based, of these tuples) is, for an error message: its
        file, row (and line) and ``column``; for a folder, its part file and the row within
        it, then its stream position."""
        if self.origin is None:
            return _where(self.source, row, column)
        o = self.origin
        return (
            f"{_where(o.files[int(o.file[row])], int(o.row[row]), column)} "
            f"(stream position {self.offset + row})"
        )


def _where(source: str, row: int, column: str | None = None) -> str:
    # row is 0-based among data rows; the header is line 1 of a CSV file, and a CSV file
    # read by :func:`read` knows the line of each row (blank lines are skipped); a piece of a
    # file (:class:`_Piece`) counts its rows from where it starts
    row += getattr(source, "rows_before", 0)
    source = getattr(source, "base", source)
    line_of = getattr(source, "line_of", None)
    line = line_of(row) if line_of is not None else row + 2
    where = f"{source}: row {row + 1} (line {line})"
    return where if column is None else f"{where}, column '{column}'"


#: How much of a bad value an error message shows (escaped, as Python writes a string).
EXCERPT = 40


def excerpt(value) -> str:
    """A short, safe rendering of a value from a file for an error message: quoted, every
    control, format or undecodable character escaped, cut after :data:`EXCERPT` characters."""
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:  # shown as bytes: b'\xff…'
            if len(value) <= EXCERPT:
                return repr(value)
            return repr(value[:EXCERPT]) + f"… ({len(value)} bytes)"
    value = str(value)
    if len(value) <= EXCERPT:
        return repr(value)
    return repr(value[:EXCERPT]) + f"… ({len(value)} characters)"


class _CsvPath(str):
    """A CSV file's path that also knows the line of each data row (for :func:`_where`)."""

    data_start: int  #: the byte offset of the line after the header
    _lines: np.ndarray | None

    def __new__(cls, path: str, data_start: int):
        self = super().__new__(cls, path)
        self.data_start = data_start
        self._lines = None
        return self

    def line_of(self, row: int) -> int:
        """The 1-based line of the 0-based data row ``row``: the rows are the non-empty lines
        after the header (line 1)."""
        if self._lines is None:
            self._lines = _row_lines(self)
        if 0 <= row < len(self._lines):
            return int(self._lines[row])
        return row + 2


class _Piece(str):
    """The path of a file read in pieces, for the piece whose first row is ``rows_before``
    (0-based) in the file: :func:`_where` names a row of the piece by its row in the file."""

    base: str
    rows_before: int

    def __new__(cls, base: str, rows_before: int):
        self = super().__new__(cls, base)
        self.base, self.rows_before = base, rows_before
        return self


#: A folder's ordering column, when the stream has no field of that name.
SEQ = "seq"


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
    (:func:`check_order`) also gives the stream position. A folder without part files, with
    an unreadable one, or whose part files disagree on a column's type is a :class:`DataError`.
    """
    if not os.path.exists(path):
        raise DataError(f"{path}: no such file or folder")
    if os.path.isdir(path):
        return _read_folder(path, schema)
    if path.lower().endswith((".parquet", ".pq")):
        return from_table(_read_parquet(path, schema), schema, source=path)
    table, source = _read_csv(path, schema)
    return from_table(table, schema, source=source)


def read_chunks(path: str, schema: Schema, rows: int) -> Iterator[Tuples]:
    """:func:`read` in pieces of ``rows`` tuples (the last may be shorter; none for an input
    without tuples), in stream order, each with its ``offset``: concatenated, the pieces are
    what :func:`read` returns, and an error names its row as :func:`read` would.

    A Parquet file is read a batch at a time, a CSV file a block at a time, a folder of part
    files a file at a time when that is its order (:func:`_folder_chunks`), so the memory
    needed grows with ``rows``, not with the input. Read whole and then cut (the memory of
    :func:`read`): a folder whose ``seq`` interleaves its files, and any input in which a
    piece meets an error (read whole for the error :func:`read` raises), a quote left open at
    a line end among them (pyarrow's reader goes on into the next lines: a piece with a value
    that holds a line break)."""
    if rows < 1:
        raise ValueError(f"rows {rows}: a piece needs at least one tuple")
    if not os.path.exists(path):
        raise DataError(f"{path}: no such file or folder")
    if os.path.isdir(path):
        yield from _folder_chunks(path, schema, rows)
    elif path.lower().endswith((".parquet", ".pq")):
        yield from _parquet_chunks(path, schema, rows)
    else:
        yield from _csv_chunks(path, schema, rows)


def _cut(whole: Tuples, rows: int) -> Iterator[Tuples]:
    """A whole read, in pieces of ``rows``."""
    for at in range(0, whole.n, rows):
        end = min(whole.n, at + rows)
        origin = None
        if whole.origin is not None:
            o = whole.origin
            origin = Origin(o.files, o.file[at:end], o.row[at:end])
        source = whole.source if origin is not None else _Piece(whole.source, at)
        yield Tuples({f: c[at:end] for f, c in whole.columns.items()}, end - at, source, origin, at)


def prefetch(items: Iterator, name: str = "nfacep-decode") -> Iterator:
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
            yield item
    finally:
        future.cancel()
        pool.shutdown(wait=False, cancel_futures=True)


def rebatch(batches: Iterator[pa.RecordBatch], rows: int) -> Iterator[pa.Table]:
    """Record batches as tables of exactly ``rows`` rows (the last may be shorter, none
    empty), in order; holds at most one table and a batch."""
    held: list[pa.RecordBatch] = []
    count = 0
    for batch in batches:
        while batch.num_rows:
            take = min(rows - count, batch.num_rows)
            held.append(batch.slice(0, take))
            batch = batch.slice(take)
            count += take
            if count == rows:
                yield pa.Table.from_batches(held)
                held, count = [], 0
    if count:
        yield pa.Table.from_batches(held)


def _parquet_chunks(path: str, schema: Schema, rows: int) -> Iterator[Tuples]:
    import pyarrow.parquet as pq

    def batches() -> Iterator[pa.RecordBatch]:
        # without pre_buffer: pyarrow would read ahead into memory what it has not yet
        # been asked for (about the file's size, measured)
        f = pq.ParquetFile(path, pre_buffer=False)
        _check_columns(path, f.schema_arrow, schema.names, schema)
        yield from f.iter_batches(batch_size=min(rows, 1 << 20), columns=list(schema.names))

    offset = 0
    try:
        for table in prefetch(rebatch(batches(), rows)):
            piece = from_table(table, schema, source=_Piece(path, offset))
            yield Tuples(piece.columns, piece.n, piece.source, None, offset)
            offset += piece.n
    except (DataError, pa.ArrowException, OSError, UnicodeDecodeError):
        yield from _as_read(path, schema, rows, offset)
        return
    if not offset:  # no tuples: read() still refuses a column whose type cannot hold its field
        yield from _as_read(path, schema, rows, 0)


def _csv_chunks(path: str, schema: Schema, rows: int) -> Iterator[Tuples]:
    import pyarrow.csv as pacsv

    header, data_start, more = _read_header(path, schema)
    if not more:
        return
    # a quote not closed on its line makes pyarrow read on into the next lines: read() checks
    # that no value holds a line break; here each piece is checked before it is yielded
    quoted = _has_quote(path, data_start)
    source = _CsvPath(path, data_start)

    def batches() -> Iterator[pa.RecordBatch]:
        # blocks of the size read() parses (pyarrow's default, 1 MiB): a line is cut into
        # blocks alike, so that one too long for them (about two blocks) is refused as read()
        # refuses it, not accepted; and the blocks pyarrow reads ahead are small (smaller
        # pieces with smaller blocks would refuse lines that read() accepts)
        reader = pacsv.open_csv(
            path,
            read_options=pacsv.ReadOptions(column_names=header, skip_rows=1),
            convert_options=_csv_convert_options(header, schema),
        )
        while True:
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                return
            yield batch

    offset = 0
    try:
        for table in rebatch(batches(), rows):
            if quoted and _holds_line_break(table, schema):
                raise DataError("a quoted value spans lines")  # (read() names where)
            piece = from_table(table, schema, source=_Piece(source, offset))
            yield Tuples(piece.columns, piece.n, piece.source, None, offset)
            offset += piece.n
    except (DataError, pa.ArrowException):
        yield from _as_read(path, schema, rows, offset)


def _holds_line_break(table: pa.Table, schema: Schema) -> bool:
    """Whether a value of the CSV text ``table`` holds a line break (a quote left open)."""
    for name in schema.names:
        col = table.column(name)
        if pc.any(pc.or_(pc.match_substring(col, "\n"), pc.match_substring(col, "\r"))).as_py():
            return True
    return False


def _as_read(path: str, schema: Schema, rows: int, offset: int) -> Iterator[Tuples]:
    """After the pieces before stream position ``offset`` met an error: the error read()
    raises, which need not be the one met (read converts a column at a time, so with several
    bad values it names the first of the first field that has one, which may come in a later
    piece; pyarrow's message for a damaged Parquet file depends on how it is read). Should
    read() accept the file, its pieces from ``offset`` on. Costs the memory of read(), on the
    error path only."""
    for piece in _cut(read(path, schema), rows):
        if piece.offset >= offset:
            yield piece


def _folder_chunks(folder: str, schema: Schema, rows: int) -> Iterator[Tuples]:
    """:func:`read_chunks` of a folder of part files, a file at a time when that is the
    stream's order: without ``seq``, the files in name order; with ``seq``, when each file's
    ``seq`` rises and the files' ranges do not overlap (a first pass reads the ``seq`` column
    alone), the files in the order of their ranges. Otherwise the folder is read whole and
    cut. An error is the one :func:`read` raises (read whole on the error path)."""
    import pyarrow.parquet as pq

    files, use_seq, cols, _ = _folder_parts(folder, schema, read_data=False)
    order = list(range(len(files)))
    offset = 0
    try:
        if use_seq:
            ranges = [_seq_range(path) for path in files]
            if any(r is False for r in ranges):  # a file whose seq does not rise
                yield from _cut(_read_folder(folder, schema), rows)
                return
            order = sorted(
                (i for i, r in enumerate(ranges) if r is not None), key=lambda i: ranges[i][0]
            )
            if any(ranges[a][1] >= ranges[b][0] for a, b in itertools.pairwise(order)):
                yield from _cut(_read_folder(folder, schema), rows)  # ranges that overlap
                return

        def batches() -> Iterator[tuple[pa.RecordBatch, int, int]]:
            for i in order:
                f = pq.ParquetFile(files[i], pre_buffer=False)
                at = 0
                for batch in f.iter_batches(batch_size=min(rows, 1 << 20), columns=cols):
                    yield batch, i, at
                    at += batch.num_rows

        held: list[tuple[pa.RecordBatch, int, int]] = []
        count = 0
        for batch, i, at in prefetch(batches()):
            while batch.num_rows:
                take = min(batch.num_rows, rows - count)
                held.append((batch.slice(0, take), i, at))
                batch, at, count = batch.slice(take), at + take, count + take
                if count == rows:
                    yield _folder_piece(held, files, schema, folder, offset)
                    offset += count
                    held, count = [], 0
        if count:
            yield _folder_piece(held, files, schema, folder, offset)
            offset += count
    except (DataError, pa.ArrowException, OSError, UnicodeDecodeError):
        yield from _as_read(folder, schema, rows, offset)
        return
    if not offset:  # no tuples: read() says what it says of an empty folder
        yield from _as_read(folder, schema, rows, 0)


def _folder_piece(held: list, files: list[str], schema: Schema, folder: str, offset: int) -> Tuples:
    """A piece of a folder's stream from slices of its files' batches: (batch, file index,
    first row within the file)."""
    table = pa.Table.from_batches([b.select(list(schema.names)) for b, _, _ in held])
    piece = from_table(table, schema, source=folder)
    which = np.concatenate([np.full(b.num_rows, i, dtype=np.int64) for b, i, _ in held])
    within = np.concatenate([np.arange(at, at + b.num_rows, dtype=np.int64) for b, _, at in held])
    return Tuples(piece.columns, piece.n, folder, Origin(tuple(files), which, within), offset)


def _seq_range(path: str) -> tuple[int, int] | bool | None:
    """The ``seq`` column of a part file, read alone: (first, last) when it rises strictly,
    None for a file without rows, False when it does not rise."""
    import pyarrow.parquet as pq

    first = last = None
    for batch in pq.ParquetFile(path, pre_buffer=False).iter_batches(columns=[SEQ]):
        seq = _seq_column(pa.Table.from_batches([batch]), path)
        if not len(seq):
            continue
        if (last is not None and seq[0] <= last) or bool((seq[1:] <= seq[:-1]).any()):
            return False
        first = int(seq[0]) if first is None else first
        last = int(seq[-1])
    return None if first is None else (first, last)


def _natural(name: str) -> tuple:
    """Sort key: digit runs compare as numbers (``part-2`` < ``part-10``), ties by the name."""
    parts = re.split(r"(\d+)", name)
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts)), name


def _plain(t: pa.DataType) -> pa.DataType:
    return t.value_type if pa.types.is_dictionary(t) else t


def _folder_parts(
    folder: str, schema: Schema, *, read_data: bool = True
) -> tuple[list[str], bool, list[str], list[pa.Table]]:
    """A folder's part files in name order, checked: their columns and types; whether
    ``seq`` orders them; the columns to read; and, with ``read_data``, each file's table."""
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    try:
        # discovery only (an explicit schema keeps it from opening any file): it skips names
        # starting with "." or "_", as Spark does, and lists lexically; sorted by number below
        found = ds.dataset(folder, format="parquet", schema=pa.schema([]))
    except (pa.ArrowInvalid, OSError) as err:
        raise DataError(f"{folder}: cannot list the folder: {err}") from None
    files = sorted(found.files, key=lambda f: _natural(os.path.relpath(f, folder)))
    if not files:
        raise DataError(
            f"{folder}: the folder holds no Parquet file (a folder of tuples is "
            "read as Parquet part files, like `nfacep vectors`' tuples.parquet/)"
        )
    names = list(schema.names)
    use_seq = False
    cols: list[str] = names
    types: dict[str, pa.DataType] = {}  # the first part file's, which every other must have
    tables = []
    for index, path in enumerate(files):
        try:
            have = pq.read_schema(path)
        except (pa.ArrowException, OSError, UnicodeDecodeError) as err:
            raise DataError(f"{path}: not a readable Parquet file: {_brief(err)}") from None
        _check_columns(path, have, names, schema)
        if index == 0:  # the first part file decides whether seq orders the folder
            use_seq = SEQ not in names and SEQ in have.names
            cols = [*names, SEQ] if use_seq else names
            if use_seq:
                _check_columns(path, have, [SEQ], schema)
            types = {n: _plain(have.field(n).type) for n in cols}
            if use_seq and not pa.types.is_integer(types[SEQ]):
                raise DataError(
                    f"{path}: column '{SEQ}' is {types[SEQ]}, not integers; the "
                    f"{SEQ} column of a folder orders its tuples"
                )
        elif SEQ not in names and (SEQ in have.names) != use_seq:
            how = "has a" if SEQ in have.names else "lacks the"
            other = "lacks" if SEQ in have.names else "has"
            raise DataError(
                f"{path}: {how} column '{SEQ}' (it orders a folder's tuples), which "
                f"{files[0]} {other}; every part file of {folder} needs the same "
                "columns"
            )
        else:
            if use_seq:
                _check_columns(path, have, [SEQ], schema)
            for n in cols:
                t = _plain(have.field(n).type)
                if t != types[n]:
                    raise DataError(
                        f"{path}: column '{n}' is {t}, but {files[0]} has it as "
                        f"{types[n]}; every part file of {folder} needs the same "
                        "columns and types"
                    )
        if read_data:
            try:
                tables.append(pq.read_table(path, columns=cols))
            except (pa.ArrowException, OSError, UnicodeDecodeError) as err:
                raise DataError(f"{path}: not a readable Parquet file: {_brief(err)}") from None
    return files, use_seq, cols, tables


def _read_folder(folder: str, schema: Schema) -> Tuples:
    files, use_seq, _, tables = _folder_parts(folder, schema)
    names = list(schema.names)
    # convert file by file, so that a bad value is named by its file and row
    parts = [from_table(t, schema, source=p) for t, p in zip(tables, files, strict=True)]
    counts = [t.num_rows for t in tables]
    which = np.repeat(np.arange(len(files), dtype=np.int64), counts)
    within = np.concatenate([np.arange(c, dtype=np.int64) for c in counts])
    columns = {f: np.concatenate([p.columns[f] for p in parts]) for f in names}
    if use_seq:
        seq = np.concatenate([_seq_column(t, p) for t, p in zip(tables, files, strict=True)])
        order = np.argsort(seq, kind="stable")
        ordered = seq[order]
        same = np.flatnonzero(ordered[1:] == ordered[:-1])
        if len(same):
            a, b = int(order[same[0]]), int(order[same[0] + 1])
            raise DataError(
                f"{_where(files[which[b]], int(within[b]), SEQ)}: seq "
                f"{int(seq[b])} again (also at {files[which[a]]}: row "
                f"{int(within[a]) + 1}); the {SEQ} column of a folder orders its "
                "tuples, so its values must be distinct"
            )
        if len(order) > 1 and bool((order[1:] < order[:-1]).any()):
            columns = {f: c[order] for f, c in columns.items()}
            which, within = which[order], within[order]
    return Tuples(columns, sum(counts), folder, Origin(tuple(files), which, within))


def _seq_column(table: pa.Table, path: str) -> np.ndarray:
    col = table.column(SEQ).combine_chunks()
    if col.null_count:
        row = _first_invalid(~col.is_null().to_numpy(zero_copy_only=False))
        raise DataError(f"{_where(path, row, SEQ)}: empty value")
    try:
        return col.cast(pa.int64()).to_numpy()
    except pa.ArrowInvalid:
        raise DataError(
            f"{path}: column '{SEQ}' holds values beyond 64-bit signed integers"
        ) from None


#: The longest header line read (pyarrow's block size).
HEADER_LIMIT = 1 << 20


def _split_lines(data: bytes) -> list[bytes]:
    """The lines of ``data`` as pyarrow's CSV reader sees them: ended by \\n, \\r or \\r\\n."""
    return data.splitlines()


def _csv_fields(line: str) -> list[str] | None:
    """The fields of one CSV line as pyarrow parses them (``"`` quotes a field, ``""`` inside
    it is a quote, text after the closing quote is kept); None when a quote is not closed."""
    fields: list[str] = []
    i, n = 0, len(line)
    while True:
        buf: list[str] = []
        if i < n and line[i] == '"':
            i += 1
            while True:
                j = line.find('"', i)
                if j < 0:
                    return None
                buf.append(line[i:j])
                if line.startswith('"', j + 1):
                    buf.append('"')
                    i = j + 2
                else:
                    i = j + 1
                    break
        k = line.find(",", i)
        buf.append(line[i:] if k < 0 else line[i:k])
        fields.append("".join(buf))
        if k < 0:
            return fields
        i = k + 1


def _read_header(path: str, schema: Schema) -> tuple[list[str], int, bool]:
    """The header's column names, the byte offset where the data rows start, and whether
    there are any bytes after the header. Accepts a UTF-8 byte-order mark."""
    try:
        with open(path, "rb") as f:
            head = f.read(HEADER_LIMIT + 1)
    except OSError as err:
        raise DataError(f"{path}: cannot read the file: {err.strerror or err}") from None
    start = len(codecs.BOM_UTF8) if head.startswith(codecs.BOM_UTF8) else 0
    ends = [i for i in (head.find(b"\n", start), head.find(b"\r", start)) if i >= 0]
    if ends:
        end = min(ends)
        data_start = end + (2 if head[end : end + 2] == b"\r\n" else 1)
    elif len(head) > HEADER_LIMIT:
        raise DataError(
            f"{path}: line 1: the header is longer than {HEADER_LIMIT} bytes; is this a CSV file?"
        )
    else:  # the header is the whole file (no line end after it)
        end = data_start = len(head)
    raw = head[start:end]
    if not raw.strip():
        what = "the file is empty" if not head[start:].strip() else "line 1 is blank"
        raise DataError(
            f"{path}: {what}; it needs a header line naming the fields ({', '.join(schema.names)})"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DataError(
            f"{path}: line 1: the header is not UTF-8 text at byte {err.start + 1}: "
            f"{excerpt(raw[max(err.start - 10, 0) : err.start + 10])}"
        ) from None
    fields = _csv_fields(text)
    if fields is None:
        raise DataError(
            f"{path}: line 1: a quoted name is not closed on the header line: {excerpt(text)}"
        )
    header = [h.strip() for h in fields]
    missing = [n for n in schema.names if n not in header]
    if missing:
        raise DataError(
            f"{path}: line 1: the header lacks the field(s) {', '.join(missing)} "
            f"of stream '{schema.name}'"
        )
    for name in schema.names:
        at = [i + 1 for i, h in enumerate(header) if h == name]
        if len(at) > 1:
            raise DataError(
                f"{path}: line 1: the header names the field '{name}' more than "
                f"once (columns {', '.join(map(str, at))}); which one holds it?"
            )
    more = len(head) > data_start or os.path.getsize(path) > data_start
    return header, data_start, more


def _read_csv(path: str, schema: Schema) -> tuple[pa.Table, _CsvPath]:
    """The schema's columns of a CSV file as strings, and the path with its row→line map."""
    import pyarrow.csv as pacsv

    header, data_start, more = _read_header(path, schema)
    source = _CsvPath(path, data_start)
    if not more:  # a header alone, with or without a line end: no tuples
        return pa.table({n: pa.array([], pa.string()) for n in schema.names}), source
    try:
        table = pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(column_names=header, skip_rows=1),
            convert_options=_csv_convert_options(header, schema),
        )
    except pa.ArrowException as err:
        _scan_csv(source, header, schema)  # raises, naming the row, line and column
        raise DataError(f"{path}: {excerpt(_arrow_message(err))}") from None
    if _has_quote(path, data_start):
        # a quote that is not closed on its line makes pyarrow read on into the next lines
        if len(_row_lines(source)) != table.num_rows:
            _scan_csv(source, header, schema)
        for name in schema.names:
            col = table.column(name).combine_chunks()
            broken = pc.or_(pc.match_substring(col, "\n"), pc.match_substring(col, "\r"))
            row = _first_invalid(~broken.to_numpy(zero_copy_only=False))
            if row is not None:
                raise DataError(
                    f"{_where(source, row, name)}: a quoted value is not closed on "
                    "its line (a value cannot hold a line break)"
                )
    return table, source


def _csv_convert_options(header: list[str], schema: Schema):
    """How a CSV file's columns are read: the stream's fields, as strings, none empty."""
    import pyarrow.csv as pacsv

    return pacsv.ConvertOptions(
        column_types={n: pa.string() for n in header},
        include_columns=list(schema.names),
        strings_can_be_null=False,
        quoted_strings_can_be_null=False,
    )


def _has_quote(path: str, start: int) -> bool:
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size <= start:
            return False
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return m.find(b'"', start) >= 0


def _row_lines(source: _CsvPath) -> np.ndarray:
    """The 1-based line of every row of a CSV file: the lines after the header that are not
    empty (as :func:`_split_lines` splits them), counted with array operations."""
    with open(str(source), "rb") as f:
        f.seek(source.data_start)
        data = np.frombuffer(f.read(), dtype=np.uint8)
    if len(data) == 0:
        return np.zeros(0, dtype=np.int64)
    lf, cr = data == 10, data == 13
    lf[1:] &= ~cr[:-1]  # the \n of a \r\n belongs to its \r
    ends = np.flatnonzero(lf | cr)
    after = ends + 1
    width = 1 + ((after < len(data)) & (data[np.minimum(after, len(data) - 1)] == 10))
    starts = np.concatenate([[0], ends + width])
    lengths = np.append(ends, len(data)) - starts
    return np.flatnonzero(lengths > 0) + 2


def _read_lines(source: _CsvPath) -> list[bytes]:
    with open(str(source), "rb") as f:
        f.seek(source.data_start)
        return _split_lines(f.read())


def _scan_csv(source: _CsvPath, header: list[str], schema: Schema) -> None:
    """Find the first row that pyarrow could not read, and raise a :class:`DataError` naming
    its row, line and (where it is one column's) column; return when there is none."""
    wanted = set(schema.names)
    row = -1
    for number, raw in enumerate(_read_lines(source), start=2):
        if not raw:
            continue
        row += 1
        where = f"{source}: row {row + 1} (line {number})"
        text = raw.decode("utf-8", "surrogateescape")
        fields = _csv_fields(text)
        if fields is None:
            raise DataError(
                f"{where}: a quoted value is not closed on its line (a value cannot "
                f"hold a line break): {excerpt(raw)}"
            )
        if len(fields) != len(header):
            raise DataError(
                f"{where}: Expected {len(header)} columns, got {len(fields)}: {excerpt(raw)}"
            )
        for name, value in zip(header, fields, strict=True):
            if name in wanted:
                try:
                    value.encode("utf-8")
                except UnicodeEncodeError:
                    bad = value.encode("utf-8", "surrogateescape")
                    raise DataError(
                        f"{where}, column '{name}': not UTF-8 text: {excerpt(bad)}"
                    ) from None


def _arrow_message(err: Exception) -> str:
    text = str(err).strip()
    return text.replace("CSV parse error: ", "")


def _read_parquet(path: str, schema: Schema) -> pa.Table:
    import pyarrow.parquet as pq

    try:
        have = pq.read_schema(path)
        _check_columns(path, have, schema.names, schema)
        return pq.read_table(path, columns=list(schema.names))
    except (pa.ArrowException, OSError, UnicodeDecodeError) as err:
        raise DataError(f"{path}: not a readable Parquet file: {_brief(err)}") from None


def _check_columns(path: str, have: pa.Schema, names, schema: Schema) -> None:
    """Each of ``names`` is exactly one column of the Parquet file ``path``."""
    missing = [n for n in names if n not in have.names]
    if missing:
        raise DataError(
            f"{path}: lacks the column(s) {', '.join(missing)} of stream '{schema.name}'"
        )
    for n in names:
        at = have.get_all_field_indices(n)
        if len(at) > 1:
            raise DataError(
                f"{path}: has {len(at)} columns named '{n}' (columns "
                f"{', '.join(str(i + 1) for i in at)}); which one holds it?"
            )


def _brief(err: Exception) -> str:
    """pyarrow's message, first line only, escaped and cut short."""
    lines = str(err).strip().splitlines() or [type(err).__name__]
    text = lines[0]
    return text if len(text) <= 200 and text.isprintable() else excerpt(text)


def from_table(table: pa.Table, schema: Schema, source: str = "<tuples>") -> Tuples:
    """Convert an Arrow table (string columns from CSV, or typed columns) to :class:`Tuples`."""
    columns = {}
    for f in schema.fields:
        col = table.column(f.name).combine_chunks()
        columns[f.name] = _convert(col, f.type, f.name, source)
    return Tuples(columns, table.num_rows, source)


def _first_invalid(mask: np.ndarray) -> int | None:
    bad = np.flatnonzero(~mask)
    return int(bad[0]) if len(bad) else None


def _convert(col: pa.Array, ty: FieldType, name: str, source: str) -> np.ndarray:
    if col.null_count:
        row = _first_invalid(~col.is_null().to_numpy(zero_copy_only=False))
        raise DataError(f"{_where(source, row, name)}: empty value")
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        _check_utf8(col, name, source)
        return _from_strings(col, ty, name, source)
    return _from_typed(col, ty, name, source)


def _check_utf8(col: pa.Array, name: str, source: str) -> None:
    """A string column of a Parquet file may hold bytes that are not UTF-8 (Parquet does
    not check): name the first such row."""
    try:
        col.validate(full=True)
    except pa.ArrowInvalid:
        for row, value in enumerate(col.cast(pa.large_binary()).to_pylist()):
            try:
                value.decode("utf-8")
            except UnicodeDecodeError:
                raise DataError(
                    f"{_where(source, row, name)}: not UTF-8 text: {excerpt(value)}"
                ) from None
        raise DataError(f"{source}: column '{name}' is not valid text") from None


_INT_RE = r"^\s*[+-]?[0-9]+\s*$"
#: A FLOAT32 value as written in a tuple file (the syntax of a literal in a query, plus NaN
#: and infinities); ASCII digits only, as pyarrow reads them.
_FLOAT_RE = (
    r"^\s*[+-]?(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|(?i:nan|inf|infinity))"
    r"\s*$"
)
_INF_RE = r"^[+-]?(?i:inf|infinity)$"


def _number(text: str) -> str:
    """An integer's text for a message: whole when short, else its start and its length."""
    return text if len(text) <= EXCERPT else f"{text[:EXCERPT]}… ({len(text)} digits)"


def _from_strings(col: pa.Array, ty: FieldType, name: str, source: str) -> np.ndarray:
    if isinstance(ty, UIntType | IntType):
        ok = pc.match_substring_regex(col, _INT_RE).to_numpy(zero_copy_only=False)
        row = _first_invalid(ok)
        if row is not None:
            raise DataError(
                f"{_where(source, row, name)}: {excerpt(col[row].as_py())} is not an integer ({ty})"
            )
        plain = pc.utf8_trim_whitespace(col)
        target = pa.uint64() if isinstance(ty, UIntType) else pa.int64()
        try:
            values = pc.cast(plain, target).to_numpy()
        except (pa.ArrowInvalid, OverflowError):
            # pyarrow reads neither a '+' sign nor '-0' as an unsigned integer: drop both
            plain = pc.replace_substring_regex(plain, r"^\+", "")
            plain = pc.replace_substring_regex(plain, r"^-(0+)$", r"\1")
            try:
                values = pc.cast(plain, target).to_numpy()
            except (pa.ArrowInvalid, OverflowError):
                values = None
        if values is None or not _in_range(values, ty).all():
            texts = plain.to_pylist()
            row = _first_out_of_range(texts, ty)
            if row is None:  # in range, but not as pyarrow reads it: read it as Python does
                return np.array([int(t) for t in texts], dtype=target.to_pandas_dtype())
            lo, hi = ty.range
            raise DataError(
                f"{_where(source, row, name)}: {_number(col[row].as_py().strip())} "
                f"does not fit {ty} ({lo}..{hi})"
            )
        return values
    if isinstance(ty, BoolType):
        lowered = pc.utf8_lower(pc.utf8_trim_whitespace(col))
        truthy = pc.is_in(lowered, value_set=pa.array(["true", "1"])).to_numpy(zero_copy_only=False)
        falsy = pc.is_in(lowered, value_set=pa.array(["false", "0"])).to_numpy(zero_copy_only=False)
        row = _first_invalid(truthy | falsy)
        if row is not None:
            raise DataError(
                f"{_where(source, row, name)}: {excerpt(col[row].as_py())} is not a "
                "BOOL (true, false, 1 or 0)"
            )
        return truthy
    if isinstance(ty, EnumType):
        idx = pc.index_in(col, value_set=pa.array(list(ty.labels)))
        if idx.null_count:
            row = _first_invalid(~idx.is_null().to_numpy(zero_copy_only=False))
            raise DataError(
                f"{_where(source, row, name)}: {excerpt(col[row].as_py())} is not a label of {ty}"
            )
        return idx.to_numpy().astype(np.int64)
    assert isinstance(ty, Float32Type)
    stripped = pc.utf8_trim_whitespace(col)
    texts = stripped.to_numpy(zero_copy_only=False)
    try:
        doubles = pc.cast(stripped, pa.float64()).to_numpy()
    except pa.ArrowInvalid:
        ok = pc.match_substring_regex(col, _FLOAT_RE).to_numpy(zero_copy_only=False)
        row = _first_invalid(ok)
        if row is not None:
            raise DataError(
                f"{_where(source, row, name)}: {excerpt(col[row].as_py())} is not "
                "a number (FLOAT32)"
            ) from None
        # decimal text that pyarrow cannot read (none known): Python reads it alike
        doubles = np.array([float(t) for t in texts], dtype=np.float64)
    singles = fix_float32_rounding(texts, doubles)
    inf = np.isinf(singles)
    if inf.any():
        written = pc.match_substring_regex(stripped, _INF_RE).to_numpy(zero_copy_only=False)
        row = _first_invalid(~inf | written)
        if row is not None:
            _out_of_float32(source, row, name, excerpt(texts[row]))
    return singles


#: The largest finite FLOAT32.
FLOAT32_MAX = float(np.finfo(np.float32).max)


def _out_of_float32(source: str, row: int, name: str, value: str):
    raise DataError(
        f"{_where(source, row, name)}: {value} is beyond the range of FLOAT32 "
        f"(±{FLOAT32_MAX:.8g}); write inf for an infinity"
    )


def _in_range(values: np.ndarray, ty) -> np.ndarray:
    lo, hi = ty.range
    if values.dtype == np.uint64:
        return values <= np.uint64(hi)
    return (values >= lo) & (values <= hi)


def _first_out_of_range(texts: list[str], ty) -> int | None:
    lo, hi = ty.range
    for row, text in enumerate(texts):
        # more digits than any 64-bit value has is out of range (and beyond int()'s limit)
        if len(text.lstrip("-").lstrip("0")) > 24 or not lo <= int(text) <= hi:
            return row
    return None


def _from_typed(col: pa.Array, ty: FieldType, name: str, source: str) -> np.ndarray:
    t = col.type
    if isinstance(ty, UIntType | IntType) and pa.types.is_integer(t):
        values = col.to_numpy()
        info = np.iinfo(values.dtype)
        lo, hi = ty.range
        if not lo <= info.min <= info.max <= hi:  # (else every value of the column's type fits)
            ok = (
                _in_range(values.astype(object), ty)
                if values.dtype == np.uint64 and isinstance(ty, IntType)
                else _in_range(values, ty)
            )
            ok = np.asarray(ok, dtype=bool)
            if not ok.all():
                row = _first_invalid(ok)
                raise DataError(
                    f"{_where(source, row, name)}: {values[row]} does not fit {ty} ({lo}..{hi})"
                )
        return values.astype(np.uint64 if isinstance(ty, UIntType) else np.int64)
    if isinstance(ty, BoolType) and pa.types.is_boolean(t):
        return col.to_numpy(zero_copy_only=False).astype(bool)
    if isinstance(ty, Float32Type) and pa.types.is_floating(t):
        values = col.to_numpy()
        with np.errstate(over="ignore"):
            singles = values.astype(np.float32)
        row = _first_invalid(np.isfinite(singles) | ~np.isfinite(values))
        if row is not None:
            _out_of_float32(source, row, name, str(values[row]))
        return singles
    if isinstance(ty, Float32Type | BoolType | UIntType | IntType) and pa.types.is_integer(t):
        if isinstance(ty, Float32Type):
            return col.to_numpy().astype(np.float32)
        if isinstance(ty, BoolType):
            values = col.to_numpy()
            row = _first_invalid((values == 0) | (values == 1))
            if row is not None:
                raise DataError(f"{_where(source, row, name)}: {values[row]} is not a BOOL")
            return values.astype(bool)
    if pa.types.is_dictionary(t):
        # each distinct value once (the conversion is value by value); when one fails, which
        # may be a value no row uses, the decoded column says whether and where
        try:
            values = _convert(col.dictionary, ty, name, source)
        except DataError:
            return _convert(col.dictionary_decode(), ty, name, source)
        return values[col.indices.to_numpy()]
    raise DataError(f"{source}: column '{name}' has type {t}, which cannot hold a {ty} field")


def check_order(tuples: Tuples, field: str, before=None) -> None:
    """ORDER BY: the field must be non-decreasing in file order. ``before``: the value of the
    tuple just before these (the previous piece's last), None for none."""
    values = tuples.columns[field]
    if values.dtype == np.float32 and np.isnan(values).any():
        row = int(np.flatnonzero(np.isnan(values))[0])
        raise DataError(f"{tuples.where(row, field)}: NaN in the ORDER BY field")
    if before is not None and len(values) and values[0] < before:
        raise DataError(
            f"{tuples.where(0, field)}: {values[0]} is less than {before} on the "
            f"row before; ORDER BY {field} needs the file in non-decreasing order"
        )
    if len(values) < 2:
        return
    drops = np.flatnonzero(values[1:] < values[:-1])
    if len(drops):
        row = int(drops[0]) + 1
        raise DataError(
            f"{tuples.where(row, field)}: {values[row]} is less than "
            f"{values[row - 1]} on the row before; ORDER BY {field} needs the file "
            "in non-decreasing order"
        )


def format_value(value, ty: FieldType) -> str:
    """A field value as written in a tuple file."""
    if isinstance(ty, EnumType):
        return ty.labels[int(value)]
    if isinstance(ty, BoolType):
        return "true" if value else "false"
    if isinstance(ty, Float32Type):
        return str(np.float32(value))
    return str(int(value))
