"""CSV tuple files: the header checked, the schema's columns read as strings, and the line
of each row found, so that an error names the row, its line and its column."""

from __future__ import annotations

import codecs
import mmap
import os

import numpy as np
import pyarrow as pa

from ..errors import DataError
from ..schema import Schema
from .arrays import strings, to_numpy
from .columns import alike
from .convert import first_invalid, value_bytes
from .tuples import Location, excerpt

__all__ = [
    "HEADER_LIMIT",
    "LONG_LINE",
    "CsvLines",
    "convert_options",
    "has_quote",
    "holds_line_break",
    "line_lengths",
    "line_start",
    "line_stats",
    "parse_block",
    "read_csv",
    "read_header",
]


class CsvLines:
    """The line of each data row of a CSV file whose data start at byte ``data_start``,
    counted on first use (:meth:`line_of` is a :attr:`Location.line_of`)."""

    def __init__(self, path: str, data_start: int):
        self.path = path
        self.data_start = data_start  #: the byte offset of the line after the header
        self._lines: np.ndarray | None = None

    def rows(self) -> np.ndarray:
        """The 1-based line of every data row."""
        if self._lines is None:
            self._lines = _row_lines(self)
        return self._lines

    def line_of(self, row: int) -> int:
        """The 1-based line of the 0-based data row ``row``: the rows are the non-empty lines
        after the header (line 1)."""
        lines = self.rows()
        if 0 <= row < len(lines):
            return int(lines[row])
        return row + 2


def holds_line_break(table: pa.Table, names) -> bool:
    """Whether a value of the columns ``names`` of the CSV text ``table`` holds a line break
    (a quote left open)."""
    for name in names:
        for chunk in table.column(name).chunks:
            if not pa.types.is_string(chunk.type) and not pa.types.is_large_string(chunk.type):
                continue
            _, data = value_bytes(chunk)
            # (a reduction first: most text has no byte below 14, so no array is made)
            if len(data) and int(data.min()) < 14 and bool(((data == 10) | (data == 13)).any()):
                return True
    return False


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


def read_header(path: str, schema: Schema) -> tuple[list[str], int, bool]:
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
    # a column named as an unquoted field but in another case is that field's
    found = {c: n for n, c in alike(f"{path}: line 1: the header", header, schema).items()}
    header = [found.get(h, h) for h in header]
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


def read_csv(path: str, schema: Schema) -> tuple[pa.Table, Location]:
    """The schema's columns of a CSV file as strings, and the path with its row→line map."""
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    header, data_start, more = read_header(path, schema)
    lines = CsvLines(path, data_start)
    source = Location(path, line_of=lines.line_of)
    if not more:  # a header alone, with or without a line end: no tuples
        return pa.table({n: strings([]) for n in schema.names}), source
    try:
        table = pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(column_names=header, skip_rows=1),
            convert_options=convert_options(header, schema),
        )
    except pa.ArrowException as err:
        _scan_csv(lines, header, schema)  # raises, naming the row, line and column
        raise DataError(f"{path}: {excerpt(_arrow_message(err))}") from None
    if has_quote(path, data_start):
        # a quote that is not closed on its line makes pyarrow read on into the next lines
        if len(lines.rows()) != table.num_rows:
            _scan_csv(lines, header, schema)
        for name in schema.names:
            col = table.column(name).combine_chunks()
            broken = pc.or_(pc.match_substring(col, "\n"), pc.match_substring(col, "\r"))
            row = first_invalid(~to_numpy(broken))
            if row is not None:
                raise DataError(
                    f"{source.row(row, name)}: a quoted value is not closed on "
                    "its line (a value cannot hold a line break)"
                )
    return table, source


def convert_options(header: list[str], schema: Schema, include: list[str] | None = None):
    """How a CSV file's columns are read: the stream's fields (or the columns ``include``),
    as strings, none empty."""
    import pyarrow.csv as pacsv

    return pacsv.ConvertOptions(
        column_types={n: pa.string() for n in header},
        include_columns=list(schema.names if include is None else include),
        strings_can_be_null=False,
        quoted_strings_can_be_null=False,
    )


def has_quote(path: str, start: int) -> bool:
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size <= start:
            return False
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return m.find(b'"', start) >= 0


def _row_lines(source: CsvLines) -> np.ndarray:
    """The 1-based line of every row of a CSV file: the lines after the header that are not
    empty (as :func:`_split_lines` splits them), counted with array operations."""
    with open(source.path, "rb") as f:
        f.seek(source.data_start)
        data = np.frombuffer(f.read(), dtype=np.uint8)
    if len(data) == 0:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(line_lengths(data) > 0) + 2


def line_lengths(data: np.ndarray) -> np.ndarray:
    """The length of each line of the bytes ``data`` (as :func:`_split_lines` splits them:
    ended by \\n, \\r or \\r\\n; the last one, after the last line end, may be empty)."""
    lf, cr = data == 10, data == 13
    lf[1:] &= ~cr[:-1]  # the \n of a \r\n belongs to its \r
    ends = np.flatnonzero(lf | cr)
    after = ends + 1
    width = 1 + ((after < len(data)) & (data[np.minimum(after, len(data) - 1)] == 10))
    starts = np.concatenate([[0], ends + width])
    return np.append(ends, len(data)) - starts


#: A line this long or longer is left to the whole file's read (pyarrow refuses a line about
#: as long as its 1 MiB blocks, depending on where it falls; a block would not cut it alike).
LONG_LINE = 256 << 10


def line_start(f, at: int, data_start: int, size: int) -> int:
    """The first line start at or after byte ``at`` of the open file ``f`` of ``size`` bytes,
    whose data rows start at ``data_start``."""
    if at <= data_start:
        return data_start
    f.seek(at - 1)
    pos = at - 1
    while pos < size:
        chunk = f.read(1 << 16)
        if not chunk:
            break
        ends = [i for i in (chunk.find(b"\n"), chunk.find(b"\r")) if i >= 0]
        if ends:
            end = pos + min(ends)
            if chunk[min(ends)] == 13:  # \r: its \n, if it follows, belongs to it
                f.seek(end + 1)
                return end + 2 if f.read(1) == b"\n" else end + 1
            return end + 1
        pos += len(chunk)
    return size


def line_stats(data: bytes) -> tuple[int, int]:
    """(rows, the longest line) of a block of whole lines: rows are the non-empty lines."""
    lengths = line_lengths(np.frombuffer(data, dtype=np.uint8))
    return int((lengths > 0).sum()), int(lengths.max(initial=0))


def parse_block(data: bytes, header, schema: Schema) -> pa.Table:
    """A block of whole lines of a CSV file (no header) as the stream's columns of text, by
    pyarrow's multithreaded reader. A :class:`DataError` (that the file's whole read names)
    for more or fewer rows than non-empty lines, a line of :data:`LONG_LINE` bytes or more,
    or a value holding a line break (a quote left open, in any column)."""
    import pyarrow.csv as pacsv

    rows, longest = line_stats(data)
    if longest >= LONG_LINE:
        raise DataError(f"a line of {longest} bytes")
    names = [str(i) for i in range(len(header))]
    wanted = [names[list(header).index(n)] for n in schema.names]
    if not rows:
        return pa.table({n: pa.array([], pa.string()) for n in schema.names})
    quoted = b'"' in data
    table = pacsv.read_csv(
        pa.py_buffer(data),
        read_options=pacsv.ReadOptions(column_names=names),
        convert_options=convert_options(names, schema, include=names if quoted else wanted),
    )
    if table.num_rows != rows or (quoted and holds_line_break(table, table.column_names)):
        raise DataError("a quoted value spans lines")
    return table.select(wanted).rename_columns(list(schema.names))


def _read_lines(source: CsvLines) -> list[bytes]:
    with open(source.path, "rb") as f:
        f.seek(source.data_start)
        return _split_lines(f.read())


def _scan_csv(source: CsvLines, header: list[str], schema: Schema) -> None:
    """Find the first row that pyarrow could not read, and raise a :class:`DataError` naming
    its row, line and (where it is one column's) column; return when there is none."""
    wanted = set(schema.names)
    row = -1
    for number, raw in enumerate(_read_lines(source), start=2):
        if not raw:
            continue
        row += 1
        where = f"{source.path}: row {row + 1} (line {number})"
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
