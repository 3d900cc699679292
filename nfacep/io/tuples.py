"""Tuples in memory: one typed numpy column per field (:class:`Tuples`), where each row was
read (:class:`Location`, :class:`Origin`), the ORDER BY check and how a value is written.

Columns are: UINT → uint64, INT → int64, BOOL → bool, ENUM → int64 label index, FLOAT32 →
float32, IPV4 → uint64 (the 32-bit address), TIMESTAMP → int64 (the count of its unit). The
readers that make them from files are in :mod:`nfacep.io.reader`. This module
does not import pyarrow.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from ..errors import DataError
from ..lang.types import (
    BoolType,
    EnumType,
    FieldType,
    Float32Type,
    Ipv4Type,
    TimestampType,
    UIntType,
)
from ..lang.values import format_ipv4, format_timestamp

__all__ = [
    "EXCERPT",
    "JoinedColumns",
    "Location",
    "Origin",
    "Tuples",
    "check_order",
    "column_dtype",
    "excerpt",
    "format_value",
    "format_values",
    "piece_sizes",
    "where_row",
]


@dataclass(frozen=True)
class Location:
    """Where rows were read, for error messages: the file, how many of its data rows come
    before the first of these (a piece of a file read in pieces), and for a CSV file the line
    of each data row (rows are the non-blank lines after the header, line 1)."""

    path: str
    rows_before: int = 0
    #: the 1-based line of a 0-based data row of the file; None: row + 2 (a header, no blanks)
    line_of: Callable[[int], int] | None = None
    #: whether the rows are lines of text; a Parquet file's rows are not (no line is named)
    lines: bool = True

    @classmethod
    def parquet(cls, path: str, rows_before: int = 0) -> Location:
        """The rows of the Parquet file ``path``: named by row alone."""
        return cls(path, rows_before, lines=False)

    def __str__(self) -> str:
        return self.path

    def at(self, rows_before: int) -> Location:
        """The rows of the same file from data row ``rows_before`` on (a piece of it)."""
        return dataclasses.replace(self, rows_before=rows_before)

    def row(self, row: int, column: str | None = None) -> str:
        """The file, row (and line) of the 0-based row ``row`` of these rows, and ``column``."""
        row += self.rows_before
        where = f"{self.path}: row {row + 1}"
        if self.lines:
            line = self.line_of(row) if self.line_of is not None else row + 2
            where += f" (line {line})"
        return where if column is None else f"{where}, column '{column}'"


@dataclass(frozen=True)
class Origin:
    """Where each tuple of a folder of part files came from (for error messages)."""

    files: tuple[str, ...]  #: the part files read, in name order
    file: np.ndarray  #: per tuple, in stream order: the index of its file in ``files``
    row: np.ndarray  #: per tuple, in stream order: its 0-based row within that file


@dataclass
class Tuples:
    """A batch of tuples: one numpy column per field, in stream order."""

    columns: Mapping[str, np.ndarray]
    n: int
    source: str = "<tuples>"
    origin: Origin | None = None  #: set when the tuples were read from a folder
    offset: int = 0  #: the stream position of the first tuple (a piece of a longer stream)
    #: where the rows are in their file (a CSV file's lines, a piece's first row), when read
    location: Location | None = None

    def where(self, row: int, column: str) -> str:
        """Where the tuple ``row`` (0-based, of these tuples) is, for an error message: its
        file, row (and line) and ``column``; for a folder, its part file and the row within
        it, then its stream position."""
        if self.origin is None:
            return where_row(self.location or self.source, row, column)
        o = self.origin
        return (
            f"{where_row(Location.parquet(o.files[int(o.file[row])]), int(o.row[row]), column)} "
            f"(stream position {self.offset + row})"
        )


class JoinedColumns(Mapping[str, np.ndarray]):
    """The columns of a piece put together from parts (a CSV file's blocks, their columns
    maybe narrower than the stream's numpy types: pyarrow's integers), each made when it is
    first read: its parts copied into one array of the column's type (``dtypes``), then kept.
    A column nothing reads is not copied (a field the queries do not use: its values were
    checked when they were parsed)."""

    def __init__(self, parts: dict[str, list[np.ndarray]], dtypes: Mapping[str, np.dtype]):
        self._parts = parts
        self._dtypes = dtypes
        self._made: dict[str, np.ndarray] = {}

    def __getitem__(self, name: str) -> np.ndarray:
        column = self._made.get(name)
        if column is None:
            parts = self._parts[name]
            dtype = self._dtypes[name]
            column = np.concatenate(parts, dtype=dtype) if parts else np.empty(0, dtype)
            self._made[name] = column
            self._parts[name] = []  # (the parts' memory is freed with the last of them)
        return column

    def __iter__(self) -> Iterator[str]:
        return iter(self._parts)

    def __len__(self) -> int:
        return len(self._parts)


def piece_sizes(rows: int, first: int | None = None) -> Iterator[int]:
    """The tuples of each piece of a stream read in pieces of ``rows``: all ``rows``, or, with
    ``first``, the first ``first`` (at most ``rows``) and each next twice the one before, up to
    ``rows`` (so that matching starts while the rest is read). Endless; the stream's last piece
    may be shorter than its size."""
    size = rows if first is None else max(1, min(first, rows))
    while True:
        yield size
        size = min(rows, 2 * size)


def column_dtype(ty: FieldType) -> np.dtype:
    """The numpy type of a column of ``ty`` (this module's docstring)."""
    if isinstance(ty, Float32Type):
        return np.dtype(np.float32)
    if isinstance(ty, BoolType):
        return np.dtype(np.bool_)
    if isinstance(ty, UIntType | Ipv4Type):
        return np.dtype(np.uint64)
    return np.dtype(np.int64)  # INT, ENUM (the label's index), TIMESTAMP


def where_row(source: str | Location, row: int, column: str | None = None) -> str:
    """Row ``row`` of ``source`` (a path, or a :class:`Location`) as an error message names it."""
    return (source if isinstance(source, Location) else Location(source)).row(row, column)


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


def check_order(tuples: Tuples, field: str, before=None, ty: FieldType | None = None) -> None:
    """ORDER BY: the field must be non-decreasing in file order. ``before``: the value of the
    tuple just before these (the previous piece's last), None for none; ``ty``: the field's
    type, to write values in messages as files do (TIMESTAMP as ISO 8601)."""
    values = tuples.columns[field]

    def shown(value) -> str:
        return str(value) if ty is None else format_value(value, ty)

    if values.dtype == np.float32 and np.isnan(values).any():
        row = int(np.flatnonzero(np.isnan(values))[0])
        raise DataError(f"{tuples.where(row, field)}: NaN in the ORDER BY field")
    if before is not None and len(values) and values[0] < before:
        raise DataError(
            f"{tuples.where(0, field)}: {shown(values[0])} is less than {shown(before)} on the "
            f"row before; ORDER BY {field} needs the file in non-decreasing order"
        )
    if len(values) < 2:
        return
    drops = np.flatnonzero(values[1:] < values[:-1])
    if len(drops):
        row = int(drops[0]) + 1
        raise DataError(
            f"{tuples.where(row, field)}: {shown(values[row])} is less than "
            f"{shown(values[row - 1])} on the row before; ORDER BY {field} needs the file "
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
    if isinstance(ty, Ipv4Type):
        return format_ipv4(int(value))
    if isinstance(ty, TimestampType):
        return format_timestamp(int(value), ty.unit)
    return str(int(value))


def format_values(column: np.ndarray, ty: FieldType) -> list[str]:
    """:func:`format_value` of each value of a column, integers and labels column-wise."""
    if isinstance(ty, EnumType):
        return np.array(ty.labels, dtype=object)[column.astype(np.int64)].tolist()
    written = Float32Type | BoolType | Ipv4Type | TimestampType
    if isinstance(ty, written) or column.dtype.kind not in "iu":
        return [format_value(v, ty) for v in column.tolist()]
    return column.astype(str).tolist()
