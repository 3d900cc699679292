"""Tuple files (CSV and Parquet) to typed numpy columns, with row-exact error reporting.

Values are converted column-wise with pyarrow; only when a column fails is it scanned value
by value, to name the first offending row. Columns come out as: UINT → uint64, INT → int64,
BOOL → bool, ENUM → int64 label index, FLOAT32 → float32 (the nearest single).
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .check import Schema
from .errors import DataError
from .types import BoolType, EnumType, FieldType, Float32Type, IntType, UIntType
from .values import fix_float32_rounding

__all__ = ["Tuples", "check_order", "format_value", "from_table", "read"]


@dataclass
class Tuples:
    """A batch of tuples: one numpy column per field, in stream order."""

    columns: dict[str, np.ndarray]
    n: int
    source: str = "<tuples>"


def _where(source: str, row: int, column: str) -> str:
    # row is 0-based among data rows; the header is line 1 of a CSV file
    return f"{source}: row {row + 1} (line {row + 2}), column '{column}'"


def read(path: str, schema: Schema) -> Tuples:
    """Read a CSV (header of field names; extra columns ignored) or Parquet tuple file."""
    if not os.path.exists(path):
        raise DataError(f"{path}: no such file")
    if path.lower().endswith((".parquet", ".pq")):
        table = _read_parquet(path, schema)
    else:
        table = _read_csv(path, schema)
    return from_table(table, schema, source=path)


def _read_csv(path: str, schema: Schema) -> pa.Table:
    import pyarrow.csv as pacsv

    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        header = next(csv.reader(f), None)
    if not header:
        raise DataError(f"{path}: the file is empty; it needs a header line naming the fields "
                        f"({', '.join(schema.names)})")
    header = [h.strip() for h in header]
    missing = [n for n in schema.names if n not in header]
    if missing:
        raise DataError(f"{path}: line 1: the header lacks the field(s) {', '.join(missing)} "
                        f"of stream '{schema.name}'")
    try:
        return pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(column_names=header, skip_rows=1),
            convert_options=pacsv.ConvertOptions(
                column_types={n: pa.string() for n in header},
                include_columns=list(schema.names), strings_can_be_null=False,
                quoted_strings_can_be_null=False),
        )
    except pa.ArrowInvalid as err:
        raise DataError(f"{path}: {_arrow_message(err)}") from None


def _arrow_message(err: Exception) -> str:
    text = str(err).strip()
    return text.replace("CSV parse error: ", "")


def _read_parquet(path: str, schema: Schema) -> pa.Table:
    import pyarrow.parquet as pq

    try:
        names = pq.read_schema(path).names
        missing = [n for n in schema.names if n not in names]
        if missing:
            raise DataError(f"{path}: lacks the column(s) {', '.join(missing)} of stream "
                            f"'{schema.name}'")
        return pq.read_table(path, columns=list(schema.names))
    except (pa.ArrowInvalid, OSError) as err:
        raise DataError(f"{path}: not a readable Parquet file: {err}") from None


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
        return _from_strings(col, ty, name, source)
    return _from_typed(col, ty, name, source)


_INT_RE = r"^\s*[+-]?[0-9]+\s*$"


def _from_strings(col: pa.Array, ty: FieldType, name: str, source: str) -> np.ndarray:
    if isinstance(ty, UIntType | IntType):
        ok = pc.match_substring_regex(col, _INT_RE).to_numpy(zero_copy_only=False)
        row = _first_invalid(ok)
        if row is not None:
            raise DataError(f"{_where(source, row, name)}: {col[row].as_py()!r} is not an "
                            f"integer ({ty})")
        stripped = pc.utf8_trim_whitespace(col)
        target = pa.uint64() if isinstance(ty, UIntType) else pa.int64()
        try:
            values = pc.cast(stripped, target).to_numpy()
        except (pa.ArrowInvalid, OverflowError):
            values = None
        if values is None or not _in_range(values, ty).all():
            row = _first_out_of_range(stripped, ty)
            lo, hi = ty.range
            raise DataError(f"{_where(source, row, name)}: {col[row].as_py().strip()} does not "
                            f"fit {ty} ({lo}..{hi})")
        return values
    if isinstance(ty, BoolType):
        lowered = pc.utf8_lower(pc.utf8_trim_whitespace(col))
        truthy = pc.is_in(lowered, value_set=pa.array(["true", "1"])).to_numpy(
            zero_copy_only=False)
        falsy = pc.is_in(lowered, value_set=pa.array(["false", "0"])).to_numpy(
            zero_copy_only=False)
        row = _first_invalid(truthy | falsy)
        if row is not None:
            raise DataError(f"{_where(source, row, name)}: {col[row].as_py()!r} is not a BOOL "
                            "(true, false, 1 or 0)")
        return truthy
    if isinstance(ty, EnumType):
        idx = pc.index_in(col, value_set=pa.array(list(ty.labels)))
        if idx.null_count:
            row = _first_invalid(~idx.is_null().to_numpy(zero_copy_only=False))
            raise DataError(f"{_where(source, row, name)}: {col[row].as_py()!r} is not a label "
                            f"of {ty}")
        return idx.to_numpy().astype(np.int64)
    assert isinstance(ty, Float32Type)
    stripped = pc.utf8_trim_whitespace(col)
    try:
        doubles = pc.cast(stripped, pa.float64()).to_numpy()
    except pa.ArrowInvalid:
        for row, value in enumerate(stripped.to_pylist()):
            try:
                float(value)
            except ValueError:
                raise DataError(f"{_where(source, row, name)}: {value!r} is not a number "
                                "(FLOAT32)") from None
        raise
    return fix_float32_rounding(stripped.to_numpy(zero_copy_only=False), doubles)


def _in_range(values: np.ndarray, ty) -> np.ndarray:
    lo, hi = ty.range
    if values.dtype == np.uint64:
        return values <= np.uint64(hi)
    return (values >= lo) & (values <= hi)


def _first_out_of_range(col: pa.Array, ty) -> int:
    lo, hi = ty.range
    for row, text in enumerate(col.to_pylist()):
        if not lo <= int(text) <= hi:
            return row
    raise AssertionError("no value out of range")


def _from_typed(col: pa.Array, ty: FieldType, name: str, source: str) -> np.ndarray:
    t = col.type
    if isinstance(ty, UIntType | IntType) and pa.types.is_integer(t):
        values = col.to_numpy()
        ok = _in_range(values.astype(object), ty) if values.dtype == np.uint64 and \
            isinstance(ty, IntType) else _in_range(values, ty)
        row = _first_invalid(np.asarray(ok, dtype=bool))
        if row is not None:
            lo, hi = ty.range
            raise DataError(f"{_where(source, row, name)}: {values[row]} does not fit {ty} "
                            f"({lo}..{hi})")
        return values.astype(np.uint64 if isinstance(ty, UIntType) else np.int64)
    if isinstance(ty, BoolType) and pa.types.is_boolean(t):
        return col.to_numpy(zero_copy_only=False).astype(bool)
    if isinstance(ty, Float32Type) and pa.types.is_floating(t):
        return col.to_numpy().astype(np.float32)
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
        return _convert(col.dictionary_decode(), ty, name, source)
    raise DataError(f"{source}: column '{name}' has type {t}, which cannot hold a {ty} field")


def check_order(tuples: Tuples, field: str) -> None:
    """ORDER BY: the field must be non-decreasing in file order."""
    values = tuples.columns[field]
    if values.dtype == np.float32 and np.isnan(values).any():
        row = int(np.flatnonzero(np.isnan(values))[0])
        raise DataError(f"{_where(tuples.source, row, field)}: NaN in the ORDER BY field")
    if len(values) < 2:
        return
    drops = np.flatnonzero(values[1:] < values[:-1])
    if len(drops):
        row = int(drops[0]) + 1
        raise DataError(f"{_where(tuples.source, row, field)}: {values[row]} is less than "
                        f"{values[row - 1]} on the row before; ORDER BY {field} needs the file "
                        "in non-decreasing order")


def format_value(value, ty: FieldType) -> str:
    """A field value as written in a tuple file."""
    if isinstance(ty, EnumType):
        return ty.labels[int(value)]
    if isinstance(ty, BoolType):
        return "true" if value else "false"
    if isinstance(ty, Float32Type):
        return str(np.float32(value))
    return str(int(value))
