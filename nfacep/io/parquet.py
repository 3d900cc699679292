"""Parquet files: a file's columns checked and read whole, and record batches cut into
tables of a given number of rows."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from ..errors import DataError
from ..schema import Schema
from .columns import alike, renamed
from .tuples import excerpt, piece_sizes

__all__ = ["brief", "check_columns", "read_parquet", "rebatch"]


def rebatch(
    batches: Iterator[pa.RecordBatch], rows: int, first: int | None = None
) -> Iterator[pa.Table]:
    """Record batches as tables of exactly ``rows`` rows (the last may be shorter, none
    empty), in order, or the sizes :func:`~nfacep.io.tuples.piece_sizes` gives with ``first``;
    holds at most one table and a batch."""
    held: list[pa.RecordBatch] = []
    count = 0
    sizes = piece_sizes(rows, first)
    size = next(sizes)
    for batch in batches:
        while batch.num_rows:
            take = min(size - count, batch.num_rows)
            held.append(batch.slice(0, take))
            batch = batch.slice(take)
            count += take
            if count == size:
                yield pa.Table.from_batches(held)
                held, count, size = [], 0, next(sizes)
    if count:
        yield pa.Table.from_batches(held)


def read_parquet(path: str, schema: Schema) -> pa.Table:
    import pyarrow.parquet as pq

    try:
        have = pq.read_schema(path)
        cols = check_columns(path, have, schema.names, schema)
        return renamed(pq.read_table(path, columns=cols), cols, schema.names)
    except (pa.ArrowException, OSError, UnicodeDecodeError) as err:
        raise DataError(f"{path}: not a readable Parquet file: {brief(err)}") from None


def check_columns(path: str, have: pa.Schema, names, schema: Schema) -> list[str]:
    """Each of ``names`` is exactly one column of the Parquet file ``path``: the column of its
    name, or for a field declared unquoted, the one equal to it ignoring case. Returns those
    columns' names, in the order of ``names``."""
    found = alike(path, have.names, schema)
    missing = [n for n in names if n not in have.names and n not in found]
    if missing:
        raise DataError(
            f"{path}: lacks the column(s) {', '.join(missing)} of stream '{schema.name}'"
        )
    names = [found.get(n, n) for n in names]
    for n in names:
        at = have.get_all_field_indices(n)
        if len(at) > 1:
            raise DataError(
                f"{path}: has {len(at)} columns named '{n}' (columns "
                f"{', '.join(str(i + 1) for i in at)}); which one holds it?"
            )
    return names


def brief(err: Exception) -> str:
    """pyarrow's message, first line only, escaped and cut short."""
    lines = str(err).strip().splitlines() or [type(err).__name__]
    text = lines[0]
    return text if len(text) <= 200 and text.isprintable() else excerpt(text)
