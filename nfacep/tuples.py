"""Tuple files (CSV, Parquet, a folder of Parquet part files) to typed numpy columns, with
row-exact error reporting.

Values are converted column-wise with pyarrow; only when a column fails is it scanned value
by value, to name the first offending row. Columns come out as: UINT → uint64, INT → int64,
BOOL → bool, ENUM → int64 label index, FLOAT32 → float32 (the nearest single).

A folder is read as Spark and ``nfacep vectors`` write one (``V/tuples.parquet/``): see
:func:`read` for which files it reads, in what order, and how its errors name a row.
"""

from __future__ import annotations

import csv
import os
import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .check import Schema
from .errors import DataError
from .types import BoolType, EnumType, FieldType, Float32Type, IntType, UIntType
from .values import fix_float32_rounding

__all__ = ["Origin", "Tuples", "check_order", "format_value", "from_table", "read"]


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

    def where(self, row: int, column: str) -> str:
        """Where the tuple at stream position ``row`` (0-based) is, for an error message:
        its file, row (and line) and ``column``; for a folder, its part file and the row
        within it, then its stream position."""
        if self.origin is None:
            return _where(self.source, row, column)
        o = self.origin
        return (f"{_where(o.files[int(o.file[row])], int(o.row[row]), column)} "
                f"(stream position {row})")


def _where(source: str, row: int, column: str) -> str:
    # row is 0-based among data rows; the header is line 1 of a CSV file
    return f"{source}: row {row + 1} (line {row + 2}), column '{column}'"


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
        table = _read_parquet(path, schema)
    else:
        table = _read_csv(path, schema)
    return from_table(table, schema, source=path)


def _natural(name: str) -> tuple:
    """Sort key: digit runs compare as numbers (``part-2`` < ``part-10``), ties by the name."""
    parts = re.split(r"(\d+)", name)
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts)), name


def _plain(t: pa.DataType) -> pa.DataType:
    return t.value_type if pa.types.is_dictionary(t) else t


def _read_folder(folder: str, schema: Schema) -> Tuples:
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
        raise DataError(f"{folder}: the folder holds no Parquet file (a folder of tuples is "
                        "read as Parquet part files, like `nfacep vectors`' tuples.parquet/)")
    names = list(schema.names)
    use_seq = False
    cols: list[str] = names
    types: dict[str, pa.DataType] = {}  # the first part file's, which every other must have
    tables = []
    for path in files:
        try:
            have = pq.read_schema(path)
        except (pa.ArrowInvalid, OSError) as err:
            raise DataError(f"{path}: not a readable Parquet file: {err}") from None
        missing = [n for n in names if n not in have.names]
        if missing:
            raise DataError(f"{path}: lacks the column(s) {', '.join(missing)} of stream "
                            f"'{schema.name}'")
        if not tables:  # the first part file decides whether seq orders the folder
            use_seq = SEQ not in names and SEQ in have.names
            cols = [*names, SEQ] if use_seq else names
            types = {n: _plain(have.field(n).type) for n in cols}
            if use_seq and not pa.types.is_integer(types[SEQ]):
                raise DataError(f"{path}: column '{SEQ}' is {types[SEQ]}, not integers; the "
                                f"{SEQ} column of a folder orders its tuples")
        elif SEQ not in names and (SEQ in have.names) != use_seq:
            how = "has a" if SEQ in have.names else "lacks the"
            other = "lacks" if SEQ in have.names else "has"
            raise DataError(f"{path}: {how} column '{SEQ}' (it orders a folder's tuples), which "
                            f"{files[0]} {other}; every part file of {folder} needs the same "
                            "columns")
        else:
            for n in cols:
                t = _plain(have.field(n).type)
                if t != types[n]:
                    raise DataError(f"{path}: column '{n}' is {t}, but {files[0]} has it as "
                                    f"{types[n]}; every part file of {folder} needs the same "
                                    "columns and types")
        try:
            tables.append(pq.read_table(path, columns=cols))
        except (pa.ArrowInvalid, OSError) as err:
            raise DataError(f"{path}: not a readable Parquet file: {err}") from None

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
            raise DataError(f"{_where(files[which[b]], int(within[b]), SEQ)}: seq "
                            f"{int(seq[b])} again (also at {files[which[a]]}: row "
                            f"{int(within[a]) + 1}); the {SEQ} column of a folder orders its "
                            "tuples, so its values must be distinct")
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
        raise DataError(f"{path}: column '{SEQ}' holds values beyond 64-bit signed integers") \
            from None


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
        raise DataError(f"{tuples.where(row, field)}: NaN in the ORDER BY field")
    if len(values) < 2:
        return
    drops = np.flatnonzero(values[1:] < values[:-1])
    if len(drops):
        row = int(drops[0]) + 1
        raise DataError(f"{tuples.where(row, field)}: {values[row]} is less than "
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
