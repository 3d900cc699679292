"""Name and type checking: :class:`nfacep.lang.ast.File` to a :class:`nfacep.schema.Program`.

Resolves each query's stream, partition key and ORDER BY field, types every DEFINE into a
:mod:`nfacep.lang.predicates` expression, and rejects — by name, with the reason — everything the
per-tuple hardware cannot evaluate. Warnings (a DEFINE the pattern never uses) are collected,
not raised; so are errors, each DEFINE, clause and query checked on its own, and raised
together at the end (:class:`nfacep.errors.QueryErrors`, in file order).

Names are compared as SQL compares them (:mod:`nfacep.lang.names`); the :class:`Program` spells
every stream, field, query, pattern variable and parameter as its declaration (or first use)
does. The type rules of the conditions are :mod:`nfacep.lang.conditions`, the MEASURES
:mod:`nfacep.lang.measures`; this module checks the file, its streams and its queries.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from fractions import Fraction

from ..errors import QueryError, QueryErrors, SourcePos, file_order
from ..limits import MAX_ERRORS, MAX_KEY_BITS
from ..schema import CheckedQuery, Measure, Program, Schema
from . import ast
from . import predicates as P
from .conditions import Conditions
from .measures import check_measures
from .names import declare, field_of, shown, suggest
from .types import (
    TIME_UNITS,
    BoolType,
    EnumType,
    FieldType,
    Float32Type,
    IntType,
    Ipv4Type,
    UIntType,
)

__all__ = ["check"]


class _Checker:
    def __init__(self, file: ast.File):
        self.file = file
        self.warnings: list[QueryError] = []
        self.errors: list[QueryError] = []
        self.conditions = Conditions(self.warnings)
        #: the measure names of the queries checked so far, by upper-case fold: one column each
        self.measure_names: dict = {}

    # --- file level -------------------------------------------------------------------------

    def run(self) -> Program:
        streams = self._streams()
        if not self.file.queries:
            raise QueryError(
                "the file holds no query (QUERY … PATTERN … or SELECT … MATCH_RECOGNIZE (…))",
                self.file.end or SourcePos(1, 1),
            )
        names: dict = {}
        checked: list[CheckedQuery] = []
        # the first query's name, stream and partition key
        first: tuple[str, Schema, tuple[str, ...]] | None = None
        for i, q in enumerate(self.file.queries):
            if len(self.errors) >= MAX_ERRORS:
                break
            name = q.name or f"q{i + 1}"
            with self._collecting():
                declare(
                    names,
                    name,
                    q.name_quoted,
                    q.name_pos or q.pos,
                    "query",
                    f"a query named '{name}' is already defined",
                )
            try:
                schema = self._stream_of(q, streams)
            except QueryError as err:
                self.errors.append(err)
                continue
            partition: tuple[str, ...] = ()
            with self._collecting():
                partition = self._partition_of(q, schema)
                if first is None:
                    first = (name, schema, partition)
                else:
                    self._same_engine(q, name, schema, partition, first)
            cq = None
            with self._collecting():  # what _query raises rather than keeps, kept here
                cq = self._query(q, name, schema, partition)
            if cq is not None:
                checked.append(cq)
        if len(self.errors) >= MAX_ERRORS:
            stop = f"nfacep stopped checking the file after {len(self.errors)} errors"
            self.errors.append(QueryError(stop, None))
        if self.errors:
            raise QueryErrors.of(self.errors)
        used: dict[str, FieldType] = {}
        for cq in checked:
            for v in sorted(cq.predicates):
                pred = cq.predicates[v]
                if pred is not None:
                    for node in P.nodes(pred):
                        if isinstance(node, P.Param):
                            used.setdefault(node.name, node.type)
        assert first is not None, "the file holds a query (an error above otherwise)"
        warnings = tuple(sorted(self.warnings, key=file_order))  # in file order, as errors
        return Program(first[1], first[2], tuple(checked), warnings, used)

    @contextlib.contextmanager
    def _collecting(self):
        """Within: a QueryError is kept in ``self.errors`` (all are reported, in file order)
        and checking goes on after the block."""
        try:
            yield
        except QueryError as err:
            self.errors.append(err)

    def _streams(self) -> dict[str, ast.CreateStream]:
        """The file's streams by key, their declarations checked."""
        streams: dict[str, ast.CreateStream] = {}  # by key
        declared: dict = {}
        for s in self.file.streams:
            with self._collecting():
                declare(
                    declared,
                    s.name,
                    s.quoted,
                    s.pos,
                    "stream",
                    f"stream '{s.name}' is declared twice",
                )
            seen: dict = {}
            for f in s.fields:
                with self._collecting():
                    declare(
                        seen,
                        f.name,
                        f.quoted,
                        f.pos,
                        "field",
                        f"field '{f.name}' is declared twice in stream '{s.name}'",
                    )
                if not f.quoted and f.name.upper() in _LITERALS:
                    self.errors.append(
                        QueryError(
                            f"field {f.name} is named as SQL's literal {f.name.upper()}, which a "
                            "condition reads as that value, not as the field: declare it "
                            f'double-quoted ("{f.name}") and name it so',
                            f.pos,
                        )
                    )
                if f.unit is not None and not isinstance(f.type, UIntType | IntType):
                    self.errors.append(
                        QueryError(
                            f"TIME({f.unit}) is for integer fields (UINT or INT), and "
                            f"'{f.name}' is {f.type}",
                            f.pos,
                        )
                    )
            streams.setdefault(ast.key(s.name, s.quoted), s)
        return streams

    def _same_engine(
        self,
        q: ast.Query,
        name: str,
        schema: Schema,
        partition: tuple[str, ...],
        first: tuple[str, Schema, tuple[str, ...]],
    ) -> None:
        """Queries of one file share one engine: the same stream and partition key."""
        first_name, first_stream, first_partition = first
        if schema.name != first_stream.name:
            raise QueryError(
                f"query '{name}' reads stream '{schema.name}', but '{first_name}' reads "
                f"'{first_stream.name}': queries in one file share one engine and must read "
                "the same stream",
                q.stream_pos or q.pos,
            )
        if partition != first_partition:
            raise QueryError(
                f"query '{name}' is partitioned by {', '.join(partition) or 'nothing'}, but "
                f"'{first_name}' by {', '.join(first_partition) or 'nothing'}: queries in one file "
                "share one engine and must use the same partition key",
                q.partition[0].pos if q.partition else q.pos,
            )

    def _stream_of(self, q: ast.Query, streams: dict[str, ast.CreateStream]) -> Schema:
        if not streams:
            raise QueryError(
                "the file declares no stream: add CREATE STREAM name (field TYPE, …)", q.pos
            )
        if q.stream is None:
            if len(streams) > 1:
                raise QueryError(
                    "the query does not say which stream it reads and the file declares "
                    f"{len(streams)} ({', '.join(s.name for s in streams.values())}): write "
                    "QUERY name FROM stream",
                    q.pos,
                )
            (decl,) = streams.values()
        else:
            found = streams.get(ast.key(q.stream, q.stream_quoted))
            if found is None:
                raise QueryError(
                    f"unknown stream {shown(q.stream, q.stream_quoted)}"
                    + suggest(q.stream, streams.values()),
                    q.stream_pos,
                )
            decl = found
        return Schema(decl.name, decl.fields)

    def _partition_of(self, q: ast.Query, schema: Schema) -> tuple[str, ...]:
        """The fields of the partition key, in the order listed (none without PARTITION)."""
        names: list[str] = []
        bits = 0
        for col in q.partition:
            f = field_of(col, schema)
            if isinstance(f.type, Float32Type):
                raise QueryError(
                    f"cannot partition by FLOAT32 field '{f.name}': floating-point "
                    "keys do not compare as identities (NaN, -0)",
                    col.pos,
                )
            if f.name in names:
                raise QueryError(f"PARTITION BY lists field '{f.name}' twice", col.pos)
            names.append(f.name)
            bits += f.type.bits
            if bits > MAX_KEY_BITS:
                raise QueryError(
                    f"the partition key ({', '.join(names)}) is {bits} bits wide, more than "
                    f"the engine's limit of {MAX_KEY_BITS} (MAX_KEY_BITS): partition by "
                    "fewer or narrower fields",
                    col.pos,
                )
        return tuple(names)

    # --- queries ----------------------------------------------------------------------------

    def _query(
        self, q: ast.Query, name: str, schema: Schema, partition: tuple[str, ...]
    ) -> CheckedQuery | None:
        """The checked query, partitioned by the fields ``partition``; None when it has errors
        (kept in ``self.errors``)."""
        errors = len(self.errors)
        for u in q.unsupported:
            self.errors.append(QueryError(f"{u.feature} is not supported: {u.reason}", u.pos))
        order = None
        with self._collecting():
            order = self._order(q, schema)
        occurrences = self._pattern_vars(q.pattern)
        used = {ast.key(v.name, v.quoted) for v in occurrences}
        if not _can_match_nonempty(q.pattern):
            self.errors.append(
                QueryError(
                    "the pattern only matches the empty sequence, and empty matches are never "
                    "reported",
                    q.pattern.pos or q.pos,
                )
            )
        defined: dict[str, P.PExpr | None] = {}  # by key
        defines: dict[str, ast.Define] = {}
        seen: dict = {}
        unused = []
        for d in q.defines:
            if len(self.errors) >= MAX_ERRORS:
                break
            with self._collecting():
                declare(
                    seen,
                    d.name,
                    d.quoted,
                    d.pos,
                    "variable",
                    f"variable '{d.name}' is defined twice",
                )
            k = ast.key(d.name, d.quoted)
            pred: P.PExpr = P.Const(True, "bool")  # after an error: as if true
            with self._collecting():
                pred = self.conditions.condition(d.expr, schema, k)
            defined[k] = None if pred == P.Const(True, "bool") else pred
            defines[k] = d
            if k not in used:
                unused.append(d)
                self.warnings.append(
                    QueryError(
                        f"DEFINE {ast.quote(d.name, d.quoted)} is never used in the PATTERN of "
                        f"'{name}'",
                        d.pos,
                        severity="warning",
                    )
                )
        spelled = self._spell_vars(name, occurrences, defines, unused)
        pattern = _respell(q.pattern, spelled)
        preds = {spelled[k]: defined.get(k) for k in sorted(used, key=spelled.__getitem__)}
        window = None
        with self._collecting():
            window = None if q.within is None else self._window(q, q.within, schema)
        measures: tuple[Measure, ...] = ()
        with self._collecting():
            measures = check_measures(
                q, schema, lambda col: field_of(col, schema), partition, self.measure_names
            )
        if len(self.errors) > errors:
            return None
        return CheckedQuery(
            name,
            pattern,
            preds,
            q.skip_past_last_row,
            order,
            q.form,
            q.pos,
            window,
            start_seq=any(m.kind in Measure.STARTS for m in measures),
            measures=measures,
        )

    def _order(self, q: ast.Query, schema: Schema) -> str | None:
        """The ORDER BY field's name, or None."""
        if not q.order:
            return None
        if len(q.order) > 1:
            raise QueryError(
                "ORDER BY more than one field is not supported: the stream is processed in "
                "input order, and ORDER BY checks that one numeric field ascends",
                q.order[1].pos,
            )
        f = field_of(q.order[0], schema)
        if isinstance(f.type, EnumType | BoolType | Ipv4Type):
            raise QueryError(
                f"cannot ORDER BY {f.type} field '{f.name}': use a numeric time or sequence field",
                q.order[0].pos,
            )
        return f.name

    def _spell_vars(
        self,
        query: str,
        occurrences: list[ast.Var],
        defines: dict[str, ast.Define],
        unused: list[ast.Define],
    ) -> dict[str, str]:
        """How each pattern variable (by key) is spelled from here on: as its DEFINE, or, when
        it has none, as it is first written; an undefined one that would then be spelled as
        another variable is (``"r"`` beside ``r``) is written with its quotes, or as its key.
        An undefined variable while a DEFINE is unused is a warning, with a suggestion."""
        spelled: dict[str, str] = {}
        undefined: list[ast.Var] = []
        for v in occurrences:
            k = ast.key(v.name, v.quoted)
            if k in spelled:
                continue
            if k in defines:
                spelled[k] = defines[k].name
            else:
                spelled[k] = v.name
                undefined.append(v)
        for v in undefined:
            k = ast.key(v.name, v.quoted)
            if any(other != k and text == v.name for other, text in spelled.items()):
                spelled[k] = ast.quote(v.name, True) if v.quoted else k
            if unused:
                self.warnings.append(
                    QueryError(
                        f"pattern variable {ast.quote(v.name, v.quoted)} of '{query}' has no "
                        "DEFINE, so it holds for every tuple, while "
                        + ", ".join(f"DEFINE {ast.quote(d.name, d.quoted)}" for d in unused)
                        + (" is" if len(unused) == 1 else " are")
                        + " never used"
                        + suggest(v.name, unused),
                        v.pos,
                        severity="warning",
                    )
                )
        return spelled

    def _window(self, q: ast.Query, w: ast.Within, schema: Schema) -> int:
        """``q``'s WITHIN, ``w``: its window in the ORDER BY field's units."""
        if not q.order:
            where = (
                "add ORDER BY field to MATCH_RECOGNIZE (…)"
                if q.form == "sql"
                else "add a line ORDER BY field after PARTITION"
            )
            raise QueryError(
                "WITHIN needs ORDER BY: the window is measured in the ORDER BY "
                f"field's units; {where}",
                w.pos,
            )
        f = field_of(q.order[0], schema)
        if not isinstance(f.type, UIntType | IntType):
            raise QueryError(
                f"WITHIN needs an integer ORDER BY field (UINT or INT), and '{f.name}' is {f.type}",
                q.order[0].pos,
            )
        if w.interval is None:
            assert w.count is not None, "WITHIN is a count or an interval"
            n = w.count
            shown = f"WITHIN {n}"
        else:
            text, unit = w.interval
            shown = f"WITHIN INTERVAL '{text}' {unit}"
            if f.unit is None:
                raise QueryError(
                    f"{shown}: the ORDER BY field '{f.name}' has no time unit; declare it in "
                    f"CREATE STREAM, as {f.name} {f.type} TIME(MILLISECOND), or write WITHIN n "
                    f"in {f.name}'s units",
                    w.pos,
                )
            if not re.fullmatch(r"\s*[0-9]{1,30}(\.[0-9]{0,30})?\s*", text):
                raise QueryError(
                    f"{shown}: the interval must be a number, such as '10' or '1.5'", w.pos
                )
            span = Fraction(text.strip()) * TIME_UNITS[unit] / TIME_UNITS[f.unit]
            if span.denominator != 1:
                raise QueryError(
                    f"{shown} is not a whole number of {f.unit}S, the unit of '{f.name}'", w.pos
                )
            n = int(span)
        if n == 0:
            raise QueryError(
                f"{shown}: the window must be positive (a match's first and last "
                "tuples differ by less than it)",
                w.pos,
            )
        most = f.type.range[1]
        if n > most:
            raise QueryError(
                f"{shown}: the window {n} is more than {f.name} {f.type} can hold ({most})", w.pos
            )
        return n

    def _pattern_vars(self, p: ast.Pattern) -> list[ast.Var]:
        """The variable occurrences of a pattern, in source order; an anchor or exclusion is
        an error, kept in ``self.errors``."""
        match p:
            case ast.Var():
                return [p]
            case ast.Wildcard() | ast.Empty():
                return []
            case ast.Seq(items) | ast.Alt(items) | ast.Permute(items):
                out = []
                for i in items:
                    out += self._pattern_vars(i)
                return out
            case ast.Repeat(child):
                return self._pattern_vars(child)
            case ast.Anchor(kind):
                what = "end" if kind == "$" else "start"
                self.errors.append(
                    QueryError(
                        f"the '{kind}' anchor is not supported: a partition of an unbounded "
                        f"stream has no {what} the engine could see; matches may {what} at any "
                        "tuple",
                        p.pos,
                    )
                )
                return []
            case ast.Exclusion(child):
                self.errors.append(
                    QueryError(
                        "{- … -} exclusion is not supported: it only changes which "
                        "rows ALL ROWS PER MATCH returns",
                        p.pos,
                    )
                )
                return self._pattern_vars(child)
        raise TypeError(p)


def _can_match_nonempty(p: ast.Pattern) -> bool:
    match p:
        case ast.Var() | ast.Wildcard():
            return True
        case ast.Empty() | ast.Anchor():
            return False
        case ast.Seq(items) | ast.Alt(items) | ast.Permute(items):
            return any(_can_match_nonempty(i) for i in items)
        case ast.Repeat(child, _, hi):
            return hi != 0 and _can_match_nonempty(child)
        case ast.Exclusion(child):
            return _can_match_nonempty(child)
    raise TypeError(p)


def _respell(p: ast.Pattern, spelled: dict[str, str]) -> ast.Pattern:
    """``p`` with each variable spelled as ``spelled`` says (by key), unquoted."""
    match p:
        case ast.Var(name):
            return ast.Var(spelled[ast.key(name, p.quoted)], pos=p.pos)
        case ast.Seq(items) | ast.Alt(items) | ast.Permute(items):
            return dataclasses.replace(p, items=tuple(_respell(i, spelled) for i in items))
        case ast.Repeat(child):
            return dataclasses.replace(p, child=_respell(child, spelled))
    return p


#: SQL's literals, which an unquoted field name may not be: a condition reads them as values.
_LITERALS = ("TRUE", "FALSE", "NULL")


def check(file: ast.File) -> Program:
    """Check a parsed file; raises :class:`QueryError` (a :class:`QueryErrors` when there are
    several) naming every error, in file order."""
    return _Checker(file).run()
