"""What the checker makes of a query file: the :class:`Program` (one stream's :class:`Schema`,
its partition key and its :class:`CheckedQuery` list), which every later stage reads — the NFA
builder, the tuple readers, the wire formats and the engines.

Produced by :func:`nfacep.lang.check.check`; holds no behaviour of its own beyond looking
fields up.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

from .errors import QueryError, SourcePos
from .lang import ast
from .lang import predicates as P
from .lang.types import FieldType

__all__ = [
    "CheckedQuery",
    "Measure",
    "PartitionKey",
    "PartitionText",
    "Program",
    "Schema",
    "partition_columns",
]

#: One match's partition key as text: the value as a tuple file writes it for a key of one
#: field, one such text per field (in PARTITION BY order) for a key of several, None without
#: PARTITION.
PartitionText = str | tuple[str, ...] | None


@dataclass(frozen=True)
class Schema:
    """A declared stream: its name and fields in declaration order."""

    name: str
    fields: tuple[ast.FieldDecl, ...]

    def field(self, name: str) -> ast.FieldDecl:
        """The field declared as ``name`` (spelled as declared); KeyError when there is none."""
        return self._by_name[name]

    def resolve(self, name: str, quoted: bool = False) -> ast.FieldDecl | None:
        """The field a reference names: ``name`` unquoted matches ignoring case, quoted exactly
        (:func:`nfacep.lang.ast.key`)."""
        return self._by_key.get(ast.key(name, quoted))

    @functools.cached_property
    def _by_name(self) -> dict[str, ast.FieldDecl]:
        return {f.name: f for f in self.fields}

    @functools.cached_property
    def _by_key(self) -> dict[str, ast.FieldDecl]:
        return {f.key: f for f in self.fields}

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)


@dataclass(frozen=True)
class Measure:
    """One checked item of ``MEASURES``, a column of the match file named ``name`` (the alias
    as written): ``kind`` is ``"first"`` (the value at the tuple the match begins at),
    ``"last"`` (at the tuple it ends at), ``"count"`` (``COUNT(*)``: the partition's tuples
    from the first to the last) or ``"number"`` (``MATCH_NUMBER()``); ``field`` the field a
    FIRST or LAST reads, spelled as declared, None for ``seq`` (the tuple's position)."""

    name: str
    kind: str
    field: str | None = None
    quoted: bool = False  #: the name was double-quoted: it stands for itself exactly

    #: the kinds that need where a match begins
    STARTS = ("first", "count")

    @property
    def key(self) -> str:
        """What the name stands for, as SQL compares names (one column per key)."""
        return ast.key(self.name, self.quoted)

    def __str__(self) -> str:
        what = {"count": "COUNT(*)", "number": "MATCH_NUMBER()"}.get(self.kind)
        if what is None:
            what = f"{self.kind.upper()}({self.field or 'seq'})"
        return f"{what} AS {self.name}"


@dataclass(frozen=True)
class CheckedQuery:
    name: str
    pattern: ast.Pattern
    #: predicate of each pattern variable; None for a variable DEFINE leaves out (always true)
    predicates: dict[str, P.PExpr | None]
    skip_past_last_row: bool
    order_field: str | None
    form: str
    pos: SourcePos | None
    #: WITHIN: a match's first and last tuples differ by less than this in the ORDER BY field
    window: int | None = None
    #: the engine reports where matches begin (a measure needs it: FIRST or COUNT(*))
    start_seq: bool = False
    #: ``MEASURES``, in order: the match file's columns for this query
    measures: tuple[Measure, ...] = ()


@dataclass(frozen=True)
class PartitionKey:
    """The layout of a program's partition key: the raw bits (as a tuple carries them,
    :mod:`nfacep.wire`) of its fields concatenated, the first field PARTITION BY lists in the
    most significant bits and the last one from bit 0, so that a key of one field is that
    field's bits. At most :data:`nfacep.limits.MAX_KEY_BITS` wide (the checker's limit), a key
    is one 64-bit word: what a match record's ``partition`` holds, what the gateware's
    partition store compares and, for ``--store table``, what indexes the table or is hashed
    (:func:`nfacep.wire.key_raw` makes it from tuples, :func:`nfacep.wire.key_text` reads it
    back)."""

    names: tuple[str, ...]  #: the fields, in PARTITION BY order (none without PARTITION)
    types: tuple[FieldType, ...]  #: their types

    @property
    def width(self) -> int:
        """Bits of the key (0 without PARTITION)."""
        return sum(t.bits for t in self.types)

    @property
    def slices(self) -> tuple[tuple[str, int, int], ...]:
        """``(field, bit offset, width)`` of each field in the key, in PARTITION BY order."""
        out = []
        offset = self.width
        for name, ty in zip(self.names, self.types, strict=True):
            offset -= ty.bits
            out.append((name, offset, ty.bits))
        return tuple(out)


def partition_columns(fields: tuple[str, ...]) -> list[str]:
    """The match file's columns of the partition key of ``fields`` (PARTITION BY's, in its
    order): ``partition`` for one field or none, ``partition_<field>`` for each of several."""
    if len(fields) <= 1:
        return ["partition"]
    return [f"partition_{name}" for name in fields]


@dataclass(frozen=True)
class Program:
    """A checked query file: one stream, one partition key, one or more queries."""

    schema: Schema
    #: the fields of the partition key, as PARTITION BY lists them (empty: no PARTITION); the
    #: key is their concatenation (:class:`PartitionKey`)
    partition_fields: tuple[str, ...]
    queries: tuple[CheckedQuery, ...]
    warnings: tuple[QueryError, ...] = ()
    #: the runtime parameters the queries' predicates use (``:name``), each of the type of the
    #: field it is compared with, in order of first use
    parameters: dict[str, FieldType] = dataclasses.field(default_factory=dict)

    @property
    def key(self) -> PartitionKey:
        """The partition key's layout."""
        names = self.partition_fields
        return PartitionKey(names, tuple(self.schema.field(n).type for n in names))

    @property
    def order_fields(self) -> tuple[str, ...]:
        return tuple(sorted({q.order_field for q in self.queries if q.order_field}))
