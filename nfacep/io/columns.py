"""Which column of a file holds each field: its name, or for a field declared unquoted, the
column equal to it ignoring case (SQL's rule for unquoted names, docs/formats.md)."""

from __future__ import annotations

from ..errors import DataError
from ..schema import Schema

__all__ = ["alike", "renamed"]


def alike(where: str, columns: list[str], schema: Schema) -> dict[str, str]:
    """The column of ``columns`` holding each field declared unquoted that no column names
    exactly: the one equal to its name ignoring case (more than one is an error)."""
    found = {}
    for f in schema.fields:
        if f.quoted or f.name in columns:
            continue
        same = [c for c in columns if c.upper() == f.name.upper()]
        if len(same) > 1:
            raise DataError(
                f"{where} has the columns {', '.join(repr(c) for c in same)}, all named "
                f"'{f.name}' ignoring case (the field is declared unquoted, so its name ignores "
                "case); which one holds it?"
            )
        if same:
            found[f.name] = same[0]
    return found


def renamed(table, columns: list[str], names):
    """``table`` (a pyarrow table or record batch) with the columns named ``columns`` renamed
    to ``names``."""
    back = dict(zip(columns, names, strict=True))
    return table.rename_columns([back.get(c, c) for c in table.column_names])
