"""Folders of Parquet part files (as Spark and ``nfacep vectors`` write them): the part
files found and checked against each other, and their stream order (by name, or by ``seq``)."""

from __future__ import annotations

import os
import re
from typing import Literal

import numpy as np
import pyarrow as pa

from ..errors import DataError
from ..schema import Schema
from .arrays import to_numpy
from .columns import renamed
from .convert import first_null, from_table
from .parquet import brief, check_columns
from .tuples import Location, Origin, Tuples, where_row

__all__ = ["SEQ", "folder_parts", "natural_order", "read_folder", "seq_range"]


#: A folder's ordering column, when the stream has no field of that name.
SEQ = "seq"


def seq_range(path: str) -> tuple[int, int] | Literal[False] | None:
    """The ``seq`` column of a part file, read alone: (first, last) when it rises strictly,
    None for a file without rows, False when it does not rise."""
    import pyarrow.parquet as pq

    first: int | None = None
    last: int | None = None
    for batch in pq.ParquetFile(path, pre_buffer=False).iter_batches(columns=[SEQ]):
        seq = _seq_column(pa.Table.from_batches([batch]), path)
        if not len(seq):
            continue
        if (last is not None and seq[0] <= last) or bool((seq[1:] <= seq[:-1]).any()):
            return False
        first = int(seq[0]) if first is None else first
        last = int(seq[-1])
    return None if first is None or last is None else (first, last)


def natural_order(name: str) -> tuple:
    """Sort key: digit runs compare as numbers (``part-2`` < ``part-10``), ties by the name."""
    parts = re.split(r"(\d+)", name)
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts)), name


def _plain(t: pa.DataType) -> pa.DataType:
    """A column's type as the folder's part files must agree on it: a dictionary's values;
    text of any kind (string, large_string, string_view: one Parquet type) as string."""
    t = t.value_type if pa.types.is_dictionary(t) else t
    return pa.string() if pa.types.is_large_string(t) or str(t) == "string_view" else t


def folder_parts(
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
    files = sorted(found.files, key=lambda f: natural_order(os.path.relpath(f, folder)))
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
            raise DataError(
                f"{path}: not a readable Parquet file: {brief(err)}{_text_hint(path, folder)}"
            ) from None
        spelled = dict(zip(names, check_columns(path, have, names, schema), strict=True))
        if index == 0:  # the first part file decides whether seq orders the folder
            use_seq = SEQ not in names and SEQ in have.names
            cols = [*names, SEQ] if use_seq else names
            if use_seq:
                check_columns(path, have, [SEQ], schema)
            types = {n: _plain(have.field(spelled.get(n, n)).type) for n in cols}
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
                check_columns(path, have, [SEQ], schema)
            for n in cols:
                t = _plain(have.field(spelled.get(n, n)).type)
                if t != types[n]:
                    raise DataError(
                        f"{path}: column '{n}' is {t}, but {files[0]} has it as "
                        f"{types[n]}; every part file of {folder} needs the same "
                        "columns and types"
                    )
        if read_data:
            try:
                actual = [spelled.get(n, n) for n in cols]
                tables.append(renamed(pq.read_table(path, columns=actual), actual, cols))
            except (pa.ArrowException, OSError, UnicodeDecodeError) as err:
                raise DataError(f"{path}: not a readable Parquet file: {brief(err)}") from None
    return files, use_seq, cols, tables


def _text_hint(path: str, folder: str) -> str:
    """What to do when a folder's part file looks like text (a CSV file, most likely): a
    folder of tuples is read as Parquet part files only."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return ""
    if not head or b"\0" in head:
        return ""
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as err:
        if err.start < len(head) - 3:  # (not only a character cut at the end of the sample)
            return ""
    return (
        f" (it looks like text, such as CSV: a folder of tuples is read as Parquet part "
        f"files; give a CSV file itself as --input, or write {folder} as Parquet)"
    )


def read_folder(folder: str, schema: Schema) -> Tuples:
    files, use_seq, _, tables = folder_parts(folder, schema)
    names = list(schema.names)
    # convert file by file, so that a bad value is named by its file and row
    parts = [
        from_table(t, schema, source=Location.parquet(p))
        for t, p in zip(tables, files, strict=True)
    ]
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
                f"{where_row(Location.parquet(files[which[b]]), int(within[b]), SEQ)}: seq "
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
        row = first_null(col)
        raise DataError(f"{where_row(Location.parquet(path), row, SEQ)}: empty value")
    try:
        return to_numpy(col.cast(pa.int64()))
    except pa.ArrowInvalid:
        raise DataError(
            f"{path}: column '{SEQ}' holds values beyond 64-bit signed integers"
        ) from None
