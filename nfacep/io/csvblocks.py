"""A CSV file read in blocks of whole lines, several at once, each parsed in a thread of its
own by pyarrow's reader with the stream's types where its conversion gives exactly nfacep's
values (the typed path), and as text converted by :mod:`~nfacep.io.convert` otherwise (the
text path).

The typed path parses UINT and INT fields as pyarrow's integer of their width, FLOAT32 as
float32 (the nearest single to the decimal text, as nfacep reads it) and BOOL with pyarrow's
own spellings (``true``, ``True``, ``TRUE``, ``1`` and the false ones); ENUM, IPV4 and
TIMESTAMP fields are parsed as text (an ENUM's labels coded here by ``index_in``, the others
converted by :mod:`~nfacep.io.convert`). pyarrow accepts a little that nfacep does not, so a
block goes the text path instead when it holds ``0x`` or ``0X`` and the stream has an
integer field (pyarrow reads hex integers), and when a FLOAT32 value came out as NaN or an
infinity (pyarrow reads ``nan(…)`` and rounds ``1e39`` to infinity); it goes the text path,
too, whenever pyarrow refuses a value (a ``+`` sign, an empty value, any error). The text
path gives the same values or raises the :class:`~nfacep.errors.DataError` that
:func:`nfacep.io.reader.read_chunks` answers by reading the file whole for
:func:`~nfacep.io.reader.read`'s error, with its row, line and column. Nothing is checked
twice when nothing fails.

Blocks are cut at line starts (:func:`~nfacep.io.csvfile.line_start`), the first ones smaller
(:data:`RAMP`: the first rows are converted, and matched, while the rest is parsed) and the
last ones too (so that the blocks parsed at once end about together: :func:`spans`; and so
that ``match``'s pieces, which then end with the blocks, leave little to match once the
last is parsed: :func:`nfacep.io.reader.read_stream`). As many
are parsed at once as pyarrow has threads (:data:`WORKERS`), each by one thread, which also
codes its labels and makes its chunks numpy columns; the threads are made once for the
process. Blocks are read into memory (not mapped: a file cut short while it is read would
crash the process); a block with a line of :data:`~nfacep.io.csvfile.LONG_LINE` bytes or
more, or with a value holding a line break (a quote left open), is a :class:`DataError` as
well (the whole read decides).
``benchmarks/csv_read.py`` measures it against pyarrow's own reader.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import pyarrow as pa

from ..errors import DataError
from ..lang.types import BoolType, EnumType, Float32Type, IntType, Ipv4Type, TimestampType, UIntType
from ..schema import Schema
from . import csvfile
from .arrays import index_in, to_numpy
from .convert import from_table
from .tuples import Location, Tuples

__all__ = [
    "BLOCK",
    "WORKERS",
    "Parsed",
    "arrow_types",
    "convert_blocks",
    "parse_block",
    "parse_blocks",
    "parse_typed",
    "spans",
]

#: The most bytes of a block (about: it ends at a line start), each parsed in one thread.
BLOCK = 4 << 20

#: The first block is ``BLOCK >> RAMP`` bytes and each next twice the one before, up to
#: :data:`BLOCK`: the first rows are ready soon (matching starts while the rest is parsed).
#: Blocks are as small again towards the end of the file (:func:`spans`).
RAMP = 2

#: How many blocks are parsed at once (each in a thread of its own); 0: pyarrow's count of
#: cores (``pyarrow.cpu_count()``, the threads its own reader would use).
WORKERS = 0


def arrow_types(schema: Schema) -> dict[str, pa.DataType]:
    """The type each field is parsed as on the typed path (text for those it does not take)."""
    out = {}
    for f in schema.fields:
        ty = f.type
        if isinstance(ty, Ipv4Type | TimestampType):  # (integer types, written otherwise)
            out[f.name] = pa.string()
        elif isinstance(ty, UIntType | IntType):
            width = next(w for w in (8, 16, 32, 64) if ty.bits <= w)
            out[f.name] = _INTS[(isinstance(ty, IntType), width)]
        elif isinstance(ty, Float32Type):
            out[f.name] = pa.float32()
        elif isinstance(ty, BoolType):
            out[f.name] = pa.bool_()
        else:
            out[f.name] = pa.string()
    return out


_INTS = {
    (False, 8): pa.uint8(),
    (False, 16): pa.uint16(),
    (False, 32): pa.uint32(),
    (False, 64): pa.uint64(),
    (True, 8): pa.int8(),
    (True, 16): pa.int16(),
    (True, 32): pa.int32(),
    (True, 64): pa.int64(),
}


def spans(f, data_start: int, size: int, block: int | None = None) -> Iterator[tuple[int, int]]:
    """The byte ranges ``[start, stop)`` of the blocks of whole lines of the open file ``f``
    of ``size`` bytes whose data rows start at ``data_start``, at most ``block`` bytes each
    (:data:`BLOCK`, about: a block ends at a line start): the first two ``block >> RAMP``
    (:data:`RAMP`; parsed at once, the first piece's rows) and each next twice the one
    before, and none more than a quarter of what is left (but ``block >> RAMP``), so that
    the blocks parsed at once end about together."""
    block = BLOCK if block is None else block
    least = step = max(block >> RAMP, 1)
    start, first = data_start, True
    while start < size:
        stop = csvfile.line_start(f, start + step, data_start, size)
        yield start, stop
        grow = step if first else 2 * step
        start, step, first = stop, max(least, min(grow, block, (size - stop) // 4)), False


def _long_line(data: bytes) -> bool:
    """Whether the block ``data`` may hold a line of :data:`~nfacep.io.csvfile.LONG_LINE`
    bytes or more: such a line holds a whole window of half that length without a line end
    (a window is looked at until its first line end)."""
    half = csvfile.LONG_LINE // 2
    for at in range(0, len(data) - half + 1, half):
        if data.find(b"\n", at, at + half) < 0 and data.find(b"\r", at, at + half) < 0:
            return True
    return False


def _has_hex(data: bytes) -> bool:
    """Whether ``0x`` or ``0X`` occurs in the block ``data``: the pairs of bytes at even and
    at odd offsets compared as 16-bit words, for each letter the block holds."""
    values = np.frombuffer(data, np.uint8)
    even = values[: len(values) & ~1].view("<u2")
    odd = values[1 : 1 + ((len(values) - 1) & ~1)].view("<u2")
    for letter in (b"x", b"X"):
        if letter in data:
            word = np.uint16(ord("0") | letter[0] << 8)
            if (even == word).any() or (odd == word).any():
                return True
    return False


def _typed(table: pa.Table, typed: dict[str, pa.DataType]) -> bool:
    """Whether the typed path's columns of a parsed block hold what nfacep reads alike: no
    empty value (pyarrow's null) and FLOAT32 values all finite."""
    for name, ty in typed.items():
        col = table.column(name)
        if col.null_count:
            return False
        if ty == pa.float32():
            for chunk in col.chunks:
                values = np.frombuffer(chunk.buffers()[1], np.float32)[
                    chunk.offset : chunk.offset + len(chunk)
                ]
                # (a reduction: the sum of finite singles, as doubles, is finite; inf and
                # -inf sum to NaN, which numpy would warn of on stderr)
                with np.errstate(invalid="ignore"):
                    total = values.sum(dtype=np.float64) if len(values) else 0.0
                if not np.isfinite(total):
                    return False
    return True


def parse_typed(
    data: pa.Buffer,
    header: list[str],
    schema: Schema,
    quoted: bool,
    hex_: bool,
    threads: bool = True,
    utf8: bool = True,
) -> pa.Table | None:
    """A block of whole lines (no header) parsed with the stream's types (:func:`arrow_types`;
    integers as text when ``hex_``), its columns named as the stream's fields; None when
    pyarrow refuses a value or the typed columns do not hold what nfacep reads (the text path
    then reads the block). ``quoted``: the block holds a ``"``, so that every column is read
    and a value holding a line break (a quote left open) is a :class:`DataError` (without
    one, pyarrow's parser is told there are no quotes, which it then need not look for);
    ``threads``: pyarrow parses the block's 1 MiB parts on every core (else in this thread);
    ``utf8=False``: pyarrow does not check that text is UTF-8 when the only text it reads is
    labels (a value equal to a label is UTF-8; the caller checks a block with a value that
    is none, ``Table.validate(full=True)``)."""
    import pyarrow.csv as pacsv

    names = [str(i) for i in range(len(header))]
    wanted = [names[header.index(n)] for n in schema.names]
    types = arrow_types(schema)
    if hex_:
        types = {n: pa.string() if pa.types.is_integer(t) else t for n, t in types.items()}
    column_types = {n: pa.string() for n in names}
    column_types.update({w: types[n] for w, n in zip(wanted, schema.names, strict=True)})
    labels_only = not quoted and all(
        isinstance(f.type, EnumType) for f in schema.fields if types[f.name] == pa.string()
    )
    try:
        table = pacsv.read_csv(
            data,
            read_options=pacsv.ReadOptions(column_names=names, use_threads=threads),
            # (a block without a quote: the same values, split a little faster)
            parse_options=pacsv.ParseOptions(quote_char='"' if quoted else False),
            convert_options=pacsv.ConvertOptions(
                column_types=column_types,
                include_columns=names if quoted else wanted,
                null_values=[],
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
                check_utf8=utf8 or not labels_only,
            ),
        )
    except pa.ArrowInvalid:
        return None
    texts = [n for n in table.column_names if column_types[n] == pa.string()]
    if quoted and csvfile.holds_line_break(table, texts):
        raise DataError("a quoted value spans lines")  # (read() names where)
    table = table.select(wanted).rename_columns(list(schema.names))
    typed = {n: t for n, t in types.items() if t != pa.string()}
    return table if _typed(table, typed) else None


def parse_block(
    data: bytes, header: list[str], schema: Schema, threads: bool = True, utf8: bool = True
) -> pa.Table:
    """A block of whole lines of a CSV file (no header) as the stream's columns: typed where
    the typed path takes it (:func:`parse_typed`; ``threads``: on every core, else in this
    thread; ``utf8``: as there), else as text by :func:`nfacep.io.csvfile.parse_block`, whose
    :class:`DataError` it raises as well (a line too long, a quote left open: the whole read
    names the error)."""
    if _long_line(data):
        raise DataError(f"a line of {csvfile.LONG_LINE} bytes or more")
    has_ints = any(isinstance(f.type, UIntType | IntType) for f in schema.fields)
    hex_ = has_ints and _has_hex(data)
    table = parse_typed(pa.py_buffer(data), header, schema, b'"' in data, hex_, threads, utf8)
    return csvfile.parse_block(data, header, schema) if table is None else table


#: A parsed block: its table and, when every column is typed as nfacep reads it, the numpy
#: columns of each of its chunks (:func:`_typed_chunks`).
Parsed = tuple[pa.Table, list[tuple[dict, int]] | None]


def _parse_at(path: str, start: int, stop: int, header: list[str], schema: Schema) -> Parsed:
    """The block of bytes ``[start, stop)`` of the file ``path`` parsed in this thread
    (:func:`parse_block`; labels not checked for UTF-8 but where one is not a label), and
    its typed chunks."""
    with open(path, "rb") as f:
        data = os.pread(f.fileno(), stop - start, start)
    table = parse_block(data, header, schema, threads=False, utf8=False)
    chunks = _typed_chunks(table, schema)
    if chunks is None:  # (its text is converted: pyarrow's error if it is not UTF-8)
        table.validate(full=True)
    return table, chunks


_pool: tuple[ThreadPoolExecutor, int] | None = None  # (the threads, their count)
_pool_lock = threading.Lock()


def _workers() -> tuple[ThreadPoolExecutor, int]:
    """The threads that parse blocks (:data:`WORKERS`), made once for the process (a
    command that reads again, a test suite, does not start them anew) and again in a child
    made by ``fork``, which has none of its parent's threads; and their count."""
    global _pool
    workers = WORKERS or max(1, pa.cpu_count())
    with _pool_lock:
        if _pool is None or _pool[1] != workers:  # (a read under way keeps the threads it has)
            _pool = ThreadPoolExecutor(workers, thread_name_prefix="nfacep-block"), workers
        return _pool


def _forget_workers() -> None:
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_workers)


def parse_blocks(
    path: str, header: list[str], data_start: int, schema: Schema
) -> Iterator[tuple[Parsed, int, int]]:
    """The blocks of data rows of the CSV file ``path`` (its ``header``, its rows from byte
    ``data_start``) in file order, each parsed by :func:`parse_block` and its typed chunks
    made (:func:`_typed_chunks`) in a thread of its own: :data:`WORKERS` blocks at once, up
    to twice as many parsed ahead of the caller; each with its bytes and the bytes of the
    file after it. A :class:`DataError` for a block with a line too long or a quote left
    open: the whole read decides. (Each block is read into memory, not mapped: a file cut
    short while it is read must not crash the process.)"""
    size = os.path.getsize(path)
    pool, workers = _workers()
    pending: deque[tuple[Future[Parsed], int, int]] = deque()

    def done(item: tuple[Future[Parsed], int, int]) -> tuple[Parsed, int, int]:
        future, start, stop = item
        return future.result(), stop - start, size - stop

    try:
        with open(path, "rb") as f:
            for start, stop in spans(f, data_start, size):
                future = pool.submit(_parse_at, path, start, stop, header, schema)
                pending.append((future, start, stop))
                if len(pending) > 2 * workers:
                    yield done(pending.popleft())
        while pending:
            yield done(pending.popleft())
    finally:  # the blocks not needed any more are not parsed
        for future, _, _ in pending:
            future.cancel()


def convert_blocks(
    blocks: Iterator[tuple[Parsed, int, int]], schema: Schema, source: Location
) -> Iterator[tuple[Tuples | pa.Table, int | None]]:
    """The blocks of :func:`parse_blocks` converted, each located at its rows in ``source``:
    a typed block as the :class:`Tuples` of each of its chunks, in pyarrow's types (no copy;
    :func:`nfacep.io.reader.read_chunks` makes the pieces' columns of them); any other as its
    :class:`Tuples` by :func:`~nfacep.io.convert.from_table`. A block whose text the exact
    conversion refuses comes as its table of text, unconverted (its pieces are converted one by
    one, so that those before the bad row are yielded first). Each comes with None but the
    last of its block (one of no rows for a block without any), which comes with about how
    many rows the file holds after the block, at its rows' bytes each: 0 exactly when none
    (the last block). A :class:`DataError` (or pyarrow's error) for a block the text path
    cannot parse: the whole read names it."""
    rows = 0
    for (table, chunks), size, left in blocks:
        n = table.num_rows
        after = 0 if not left else max(1, -(-left * n // size) if n else left)
        if chunks is not None:
            for i, (columns, k) in enumerate(chunks):
                piece = Tuples(columns, k, source.path, location=source.at(rows))
                yield piece, after if i == len(chunks) - 1 else None
                rows += k
            if not chunks:
                yield Tuples({}, 0, source.path, location=source.at(rows)), after
            continue
        try:
            text: Tuples | pa.Table = from_table(table, schema, source=source.at(rows), text=True)
        except DataError:
            text = table
        rows += n
        yield text, after


def _typed_chunks(table: pa.Table, schema: Schema) -> list[tuple[dict, int]] | None:
    """The columns of each chunk of a typed block (:func:`parse_typed`) as numpy views of
    pyarrow's (integers of their width, labels' indices as int32), when every field is an
    integer within its range, a FLOAT32, a BOOL or a label; None otherwise (the block then
    goes :func:`~nfacep.io.convert.from_table`, which converts it or names the error)."""
    parts: dict[str, list[np.ndarray]] = {}
    for f in schema.fields:
        ty, col = f.type, table.column(f.name)
        if col.null_count:
            return None
        out = parts[f.name] = []
        for chunk in col.chunks:
            if isinstance(ty, EnumType) and pa.types.is_string(chunk.type):
                index = index_in(chunk, ty.labels)
                if index.null_count:
                    return None
                out.append(to_numpy(index))
            elif isinstance(ty, UIntType | IntType) and pa.types.is_integer(chunk.type):
                values = to_numpy(chunk)
                lo, hi = ty.range
                info = np.iinfo(values.dtype)
                fits = lo <= info.min and info.max <= hi  # (every value of pyarrow's type)
                if not fits and len(values) and (values.min() < lo or values.max() > hi):
                    return None
                out.append(values)
            elif (isinstance(ty, Float32Type) and chunk.type == pa.float32()) or (
                isinstance(ty, BoolType) and chunk.type == pa.bool_()
            ):
                out.append(to_numpy(chunk))
            else:
                return None
    lengths = [len(p) for p in parts[schema.names[0]]]
    if any([len(p) for p in ps] != lengths for ps in parts.values()):
        return None
    return [({n: ps[i] for n, ps in parts.items()}, k) for i, k in enumerate(lengths) if k]
