"""Name and type checking: :class:`nfacep.lang.ast.File` to a :class:`nfacep.schema.Program`.

Resolves each query's stream, partition key and ORDER BY field, types every DEFINE into a
:mod:`nfacep.lang.predicates` expression, and rejects — by name, with the reason — everything the
per-tuple hardware cannot evaluate. Warnings (a DEFINE the pattern never uses) are collected,
not raised; so are errors, each DEFINE, clause and query checked on its own, and raised
together at the end (:class:`nfacep.errors.QueryErrors`, in file order).

Names are compared as SQL compares them (:func:`nfacep.lang.ast.key`: an unquoted name stands for
its upper-case fold, a double-quoted one for itself); two declarations of one kind whose names
differ only in case are an error. The :class:`Program` spells every stream, field, query,
pattern variable and parameter as its declaration (or first use) does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import operator
import re
from fractions import Fraction

from ..errors import QueryError, QueryErrors, SourcePos
from ..limits import MAX_ERRORS, MAX_KEY_BITS, MAX_PREV
from ..schema import CheckedQuery, Measure, Program, Schema
from . import ast
from . import predicates as P
from .measures import check_measures
from .types import (
    TIME_UNITS,
    BoolType,
    EnumType,
    FieldType,
    Float32Type,
    IntType,
    Ipv4Type,
    TimestampType,
    UIntType,
)
from .unsupported import call_error
from .values import decimal_to_float32, parse_network, parse_timestamp

__all__ = ["check"]


def _largest(ty: UIntType | IntType) -> int:
    """The largest value a field of type ``ty`` holds."""
    return (1 << ty.width) - 1 if isinstance(ty, UIntType) else (1 << (ty.width - 1)) - 1


def _reject_call(call: ast.Call) -> QueryError:
    return call_error(call.name, call.pos)


def _declare(
    seen: dict, name: str, quoted: bool, pos: SourcePos | None, kind: str, twice: str
) -> None:
    """Record a declaration of a ``kind`` in ``seen`` (by upper-case fold): one whose name is an
    earlier one's (``twice`` says so) or differs from it only in case is an error naming both
    places."""
    earlier = seen.get(name.upper())
    if earlier is None:
        seen[name.upper()] = (name, quoted, pos)
        return
    other, other_quoted, other_pos = earlier
    if ast.key(name, quoted) != ast.key(other, other_quoted):
        raise _case_clash(kind, ast.quote(name, quoted), earlier, pos)
    where = f" at {other_pos}" if other_pos else ""
    same = "" if (name, quoted) == (other, other_quoted) else "; unquoted names ignore case"
    raise QueryError(f"{twice} (first as {ast.quote(other, other_quoted)}{where}{same})", pos)


def _case_clash(kind: str, written: str, earlier: tuple, pos: SourcePos | None) -> QueryError:
    other, other_quoted, other_pos = earlier
    where = f" at {other_pos}" if other_pos else ""
    prefix = ":" if kind == "parameter" else ""
    return QueryError(
        f"{kind} {written} differs only in case from {prefix}{ast.quote(other, other_quoted)}"
        f"{where}: two {kind} names must differ in more than case (a double-quoted name keeps "
        "its case, an unquoted one stands for its upper case)",
        pos,
    )


class _Checker:
    def __init__(self, file: ast.File):
        self.file = file
        self.warnings: list[QueryError] = []
        self.errors: list[QueryError] = []
        #: each parameter (by key) with its type, the field that gave it and its first spelling
        self.params: dict[str, tuple[FieldType, str, str]] = {}
        #: each parameter's name folded to upper case, with its first use: for case-only clashes
        self.param_folds: dict[str, tuple[str, bool, SourcePos | None]] = {}

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
                _declare(
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
            with self._collecting():
                partition = self._partition_of(q, schema)
                if first is None:
                    first = (name, schema, partition)
                else:
                    self._same_engine(q, name, schema, partition, first)
            cq = None
            with self._collecting():  # what _query raises rather than keeps, kept here
                cq = self._query(q, name, schema)
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
        return Program(first[1], first[2], tuple(checked), tuple(self.warnings), used)

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
                _declare(
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
                    _declare(
                        seen,
                        f.name,
                        f.quoted,
                        f.pos,
                        "field",
                        f"field '{f.name}' is declared twice in stream '{s.name}'",
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
                    f"unknown stream {_shown(q.stream, q.stream_quoted)}"
                    + _suggest(q.stream, streams.values()),
                    q.stream_pos,
                )
            decl = found
        return Schema(decl.name, decl.fields)

    def _partition_of(self, q: ast.Query, schema: Schema) -> tuple[str, ...]:
        """The fields of the partition key, in the order listed (none without PARTITION)."""
        names: list[str] = []
        bits = 0
        for col in q.partition:
            f = self._field(col, schema)
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

    def _field(self, col: ast.Column, schema: Schema, qualifier_ok: str | None = None):
        """The field ``col`` names; ``qualifier_ok``: the key of the variable being defined."""
        if (
            col.qualifier is not None
            and ast.key(col.qualifier, col.qualifier_quoted) != qualifier_ok
        ):
            written = ast.quote(col.qualifier, col.qualifier_quoted) + "."
            written += ast.quote(col.name, col.quoted)
            raise QueryError(
                f"'{written}' refers to another variable's row; a predicate "
                "sees only the current tuple (qualify with the variable being defined, or not "
                "at all)",
                col.pos,
            )
        f = schema.resolve(col.name, col.quoted)
        if f is None:
            if col.qualifier is None and not col.quoted and col.name.upper() == "NULL":
                raise QueryError(
                    "NULL is not supported: a tuple's fields always hold a value", col.pos
                )
            raise QueryError(
                f"unknown field {_shown(col.name, col.quoted)} in stream '{schema.name}'"
                + (_string_hint(col.name, schema) if col.quoted else "")
                + _suggest(col.name, schema.fields),
                col.pos,
            )
        return f

    # --- queries ----------------------------------------------------------------------------

    def _query(self, q: ast.Query, name: str, schema: Schema) -> CheckedQuery | None:
        """The checked query; None when it has errors (kept in ``self.errors``)."""
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
                _declare(
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
                pred = self._bool(d.expr, schema, k)
            defined[k] = None if pred == P.Const(True, "bool") else pred
            defines[k] = d
            if k not in used:
                unused.append(d)
                self.warnings.append(
                    QueryError(
                        f"DEFINE {d.name} is never used in the PATTERN of '{name}'",
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
            measures = check_measures(q, schema, lambda col: self._field(col, schema))
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
        f = self._field(q.order[0], schema)
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
                        + _suggest(v.name, unused),
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
        f = self._field(q.order[0], schema)
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
        most = _largest(f.type)
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
                        f"stream has no {what} the engine could see; matches may start at any "
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

    # --- expressions ------------------------------------------------------------------------

    def _bool(self, e: ast.Expr, schema: Schema, var: str) -> P.PExpr:
        match e:
            case ast.BoolLit(value):
                return P.Const(value, "bool")
            case ast.Logical(op, items):
                parts = tuple(self._bool(i, schema, var) for i in items)
                return P.And(parts) if op == "AND" else P.Or(parts)
            case ast.Not(operand):
                return P.Not(self._bool(operand, schema, var))
            case ast.Compare():
                return self._compare(e, schema, var)
            case ast.Between(operand, low, high, negated):
                both = P.And(
                    (
                        self._compare(ast.Compare(">=", operand, low, pos=e.pos), schema, var),
                        self._compare(ast.Compare("<=", operand, high, pos=e.pos), schema, var),
                    )
                )
                return P.Not(both) if negated else both
            case ast.InList(operand, items, negated):
                anyof = P.Or(
                    tuple(
                        self._compare(
                            ast.Compare("=", operand, i, pos=i.pos), schema, var, member=True
                        )
                        for i in items
                    )
                )
                return P.Not(anyof) if negated else anyof
            case ast.Column():
                f = self._field(e, schema, var)
                if isinstance(f.type, BoolType):
                    return P.FieldRef(f.name, f.type)
                raise QueryError(
                    f"field '{f.name}' is {f.type}, not a condition: compare it with something",
                    e.pos,
                )
            case ast.Call("PREV"):
                prev = self._prev(e, schema, var)
                if isinstance(prev.type, BoolType):
                    return prev
                raise QueryError(
                    f"{P.render(prev)} is {prev.type}, not a condition: compare it with something",
                    e.pos,
                )
            case ast.Call():
                raise _reject_call(e)
        raise QueryError("expected a condition (a comparison, AND, OR, NOT, a BOOL field)", e.pos)

    def _operand(self, e: ast.Expr, schema: Schema, var: str):
        """Type an operand: returns (kind, PExpr | ast literal awaiting context)."""
        match e:
            case ast.Column():
                f = self._field(e, schema, var)
                kind = P.field_kind(f.type)
                return kind, P.FieldRef(f.name, f.type)
            case ast.IntLit(value):
                return "intlit", P.Const(value, "int")
            case ast.DecLit():
                return "declit", e
            case ast.StrLit():
                return "strlit", e
            case ast.TimestampLit():
                return "tslit", e
            case ast.BoolLit(value):
                return "bool", P.Const(value, "bool")
            case ast.ParamRef():
                return "param", e
            case ast.Neg(operand):
                return self._negated(e, operand, schema, var)
            case ast.BinOp():
                return self._arith(e, schema, var)
            case ast.Call("PREV"):
                prev = self._prev(e, schema, var)
                return P.field_kind(prev.type), prev
            case ast.Call():
                raise _reject_call(e)
            case _:
                return "bool", self._bool(e, schema, var)

    def _prev(self, call: ast.Call, schema: Schema, var: str) -> P.Prev:
        """Type ``PREV(field)`` or ``PREV(field, k)``: a field of the current stream, qualified
        with the variable being defined or not at all, ``k`` an integer constant 1 … MAX_PREV."""
        usage = f"write PREV(field) or PREV(field, k), k an integer from 1 to {MAX_PREV}"
        if not 1 <= len(call.args) <= 2:
            raise QueryError(
                f"PREV takes a field and how many tuples back, not {len(call.args)} "
                f"arguments: {usage}",
                call.pos,
            )
        col = call.args[0]
        if not isinstance(col, ast.Column) or col.name == "*":
            raise QueryError(
                f"PREV reads a field of an earlier tuple, not an expression: {usage} "
                "(PREV(a) + 1 for PREV(a + 1))",
                getattr(col, "pos", None) or call.pos,
            )
        if col.qualifier is not None and ast.key(col.qualifier, col.qualifier_quoted) != var:
            written = ast.quote(col.qualifier, col.qualifier_quoted)
            raise QueryError(
                f"PREV({written}.{ast.quote(col.name, col.quoted)}) reads the row before "
                f"the last one mapped to {written}, which the NFA does not keep: PREV reads "
                "the previous tuples of the partition, qualified with the variable being "
                "defined or not at all",
                col.pos,
            )
        f = self._field(col, schema, var)
        k = 1
        if len(call.args) == 2:
            arg = call.args[1]
            if not isinstance(arg, ast.IntLit) or not 1 <= arg.value <= MAX_PREV:
                raise QueryError(
                    f"PREV's second argument counts tuples back and must be an integer "
                    f"constant from 1 to {MAX_PREV}: the partition's entry keeps at most "
                    f"{MAX_PREV} earlier values of a field",
                    getattr(arg, "pos", None) or call.pos,
                )
            k = arg.value
        return P.Prev(f.name, f.type, k)

    def _negated(self, e: ast.Neg, operand: ast.Expr, schema: Schema, var: str):
        """Type a unary minus: literals fold, an integer field becomes ``neg``."""
        kind, inner = self._operand(operand, schema, var)
        if kind == "param":
            raise _param_alone(inner)
        if kind == "intlit":
            return "intlit", P.Const(-inner.value, "int")
        if kind == "declit":
            text = inner.text[1:] if inner.text.startswith("-") else "-" + inner.text
            return "declit", ast.DecLit(text, pos=e.pos)
        if kind != "int":
            raise QueryError(f"unary minus needs an integer operand, not {kind}", e.pos)
        return "int", P.Arith("neg", inner)

    def _arith(self, e: ast.BinOp, schema: Schema, var: str):
        """Type ``+``/``-``/``*``: integers only, ``*`` by an integer constant; literals fold."""
        op, left, right = e.op, e.left, e.right
        if op not in ("+", "-", "*"):
            raise QueryError(
                f"'{op}' is not supported: integer division and remainder are not exact; "
                "conditions use +, - and * by an integer constant (write x / 3 > y as "
                "x > y * 3 + 2)",
                e.pos,
            )
        lk, lv = self._operand(left, schema, var)
        rk, rv = self._operand(right, schema, var)
        for k, side in ((lk, left), (rk, right)):
            if k == "param" and op == "*":
                raise QueryError(
                    f"parameter :{(lv if side is left else rv).name} cannot be a factor: '*' "
                    "multiplies by a constant the gateware builds into its logic, and a "
                    "parameter, which may change while the engine runs, would need a "
                    "multiplier; compare the field with the parameter instead",
                    side.pos,
                )
            if k == "param":
                raise _param_alone(lv if side is left else rv)
            if k not in ("int", "intlit"):
                raise QueryError(
                    f"'{op}' works on integer fields and integer literals "
                    f"only, not on {_kind_text(k)}",
                    side.pos,
                )
        if lk == rk == "intlit":
            value = {"+": operator.add, "-": operator.sub, "*": operator.mul}[op](
                lv.value, rv.value
            )
            return "intlit", P.Const(value, "int")
        if op == "*":
            if lk == rk == "int":
                raise QueryError(
                    "'*' multiplies by an integer constant only: a product of two fields "
                    "needs a multiplier in the gateware (write the constant as a literal)",
                    e.pos,
                )
            if lk == "intlit":  # c * e is e * c: one decoder bit for both spellings
                lv, rv = rv, lv
        node = P.Arith(op, lv, rv)
        lo, hi = node.range
        if not -(1 << (P.WIDEST - 1)) <= min(lo, hi) <= max(lo, hi) < 1 << (P.WIDEST - 1):
            raise QueryError(
                f"'{P.render(node)}' ranges over {lo}..{hi}, beyond {P.WIDEST}-bit integers: "
                f"intermediate values must fit INT({P.WIDEST})",
                e.pos,
            )
        return "int", node

    def _compare(self, c: ast.Compare, schema: Schema, var: str, member: bool = False) -> P.PExpr:
        """A comparison; ``member``: an item of ``IN (…)``, where an IPv4 network may stand."""
        lk, lv = self._operand(c.left, schema, var)
        rk, rv = self._operand(c.right, schema, var)
        op = c.op
        # put a lone constant on the right, so `5 < x` and `x > 5` share a decoder bit
        constants = ("intlit", "declit", "strlit", "param", "tslit")
        if lk in constants and rk not in constants:
            lk, lv, rk, rv, _lside, rside = rk, rv, lk, lv, c.right, c.left
            op = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(op, op)
        else:
            _lside, rside = c.left, c.right
        if rk == "param" or lk == "param":
            return self._param_compare(op, lk, lv, rk, rv, c)
        if "ipv4" in (lk, rk):
            return _ipv4_compare(op, lk, lv, rk, rv, c, rside, member)
        if rk == "tslit":
            rk, rv = "intlit", _timestamp_const(lk, lv, rv, c)
        kinds = {lk, rk}
        if kinds <= {"int", "intlit"}:
            _same_units(lv, rv, c)
            if lk == rk == "intlit":
                from .evaluate import evaluate  # numpy, only for a comparison of constants

                return P.Const(bool(evaluate(P.Cmp(op, lv, rv, "int"), {}, 1)[0]), "bool")
            self._fits(lv, rv, rside)
            return P.Cmp(op, lv, rv, "int")
        if lk == "float" and rk in ("float", "declit", "intlit"):
            if rk != "float":
                text = rv.text if rk == "declit" else str(rv.value)
                rv = P.Const(self._float32(text, rside), "float")
            return P.Cmp(op, lv, rv, "float")
        if lk == "enum" and (found := _enum_compare(op, lv, rk, rv, c, rside)) is not None:
            return found
        if lk == "bool" and rk == "bool":
            if op not in ("=", "<>"):
                raise QueryError("BOOL values can only be compared with = or <>", c.pos)
            return P.Cmp(op, lv, rv, "bool")
        raise QueryError(f"cannot compare {_kind_text(lk, lv)} with {_kind_text(rk, rv)}", c.pos)

    def _param_compare(self, op: str, lk: str, lv, rk: str, rv, c: ast.Compare) -> P.PExpr:
        """``field op :name``: the parameter takes the field's type; every comparison of the
        same name must agree on it."""
        if rk != "param" or not isinstance(lv, P.FieldRef | P.Prev):
            raise _param_alone(rv if rk == "param" else lv)
        ty = lv.type
        first = self.param_folds.setdefault(rv.name.upper(), (rv.name, rv.quoted, rv.pos))
        if ast.key(first[0], first[1]) != ast.key(rv.name, rv.quoted):
            raise _case_clash("parameter", f":{ast.quote(rv.name, rv.quoted)}", first, rv.pos)
        earlier = self.params.setdefault(ast.key(rv.name, rv.quoted), (ty, lv.name, rv.name))
        if earlier[0] != ty:
            raise QueryError(
                f"parameter :{rv.name} is compared with {ty} field '{lv.name}' "
                f"here, but with {earlier[0]} field '{earlier[1]}' before: a "
                "parameter has one type, that of the fields it is compared with",
                rv.pos,
            )
        kind = P.field_kind(ty)
        if kind in ("enum", "bool", "ipv4") and op not in ("=", "<>"):
            raise QueryError(f"{ty} field '{lv.name}' can only be compared with = or <>", c.pos)
        return P.Cmp(op, lv, P.Param(earlier[2], ty), kind)

    def _float32(self, text: str, where: ast.Expr) -> float:
        """A constant rounded to FLOAT32, with a warning when it is out of FLOAT32's range:
        rounded to an infinity, or a non-zero constant to zero."""
        value = float(decimal_to_float32(text))
        mantissa = re.split("[eE]", text)[0]
        if math.isinf(value):
            self.warnings.append(
                QueryError(
                    f"{_short(text)} is beyond the range of FLOAT32 (its largest finite value is "
                    f"{_FLT_MAX}) and is rounded to {'-' if value < 0 else ''}inf",
                    where.pos,
                    severity="warning",
                )
            )
        elif value == 0 and re.search("[1-9]", mantissa):
            self.warnings.append(
                QueryError(
                    f"{_short(text)} is closer to 0 than the smallest FLOAT32 ({_FLT_TINY}) and is "
                    "rounded to 0",
                    where.pos,
                    severity="warning",
                )
            )
        return value

    def _fits(self, left: P.PExpr, right: P.PExpr, rside: ast.Expr) -> None:
        if isinstance(left, P.FieldRef | P.Prev) and isinstance(right, P.Const):
            lo, hi = left.range
            if not lo <= right.value <= hi:
                shown = f"field '{left.name}'" if isinstance(left, P.FieldRef) else P.render(left)
                raise QueryError(
                    f"constant {right.value} does not fit {shown} {left.type} ({lo}..{hi})",
                    rside.pos,
                )


_FLT_MAX = "3.4028235e+38"
_FLT_TINY = "1e-45"


def _short(text: str) -> str:
    return text if len(text) <= 30 else f"{text[:12]}…{text[-8:]} ({len(text)} characters)"


def _string_hint(text: str, schema: Schema) -> str:
    """What to say of an unknown double-quoted name: double quotes quote names, as in SQL,
    so a string (an ENUM label) in double quotes is a name that is not a field."""
    labels = [
        f.name for f in schema.fields if isinstance(f.type, EnumType) and text in f.type.labels
    ]
    if labels:
        return (
            f": did you mean the label '{text}' of {labels[0]}? Double quotes quote names, "
            "as in SQL; ENUM labels take single quotes"
        )
    return ": double quotes quote names, as in SQL; a string takes single quotes"


def _param_alone(p: ast.ParamRef) -> QueryError:
    return QueryError(
        f"parameter :{p.name} must be compared directly with a field (as in "
        f"'temp > :{p.name}'): it takes that field's type",
        p.pos,
    )


def _kind_text(kind: str, value=None) -> str:
    if isinstance(value, P.FieldRef):
        return f"{value.type} field '{value.name}'"
    if isinstance(value, P.Prev):
        return f"{value.type} {P.render(value)}"
    return {
        "intlit": "an integer literal",
        "declit": "a decimal literal",
        "strlit": "a string literal",
        "bool": "a Boolean",
        "int": "an integer expression",
        "float": "a FLOAT32 value",
        "enum": "an ENUM value",
        "ipv4": "an IPV4 value",
        "tslit": "a TIMESTAMP literal",
    }.get(kind, kind)


def _enum_compare(op: str, lv, rk: str, rv, c: ast.Compare, rside) -> P.PExpr | None:
    """An ENUM field compared with a label or a field of its type (None: with neither)."""
    if op not in ("=", "<>"):
        raise QueryError(
            f"ENUM field '{lv.name}' can only be compared with = or <> (labels have no order)",
            c.pos,
        )
    enum = lv.type
    if rk == "strlit":
        if rv.value not in enum.labels:
            raise QueryError(
                f"'{rv.value}' is not a label of field '{lv.name}' "
                f"{enum}" + _suggest_label(rv.value, enum.labels),
                rside.pos,
            )
        return P.Cmp(op, lv, P.Const(enum.labels.index(rv.value), "enum", enum), "enum")
    if rk == "enum" and rv.type == enum:
        return P.Cmp(op, lv, rv, "enum")
    return None


def _ipv4_compare(op: str, lk: str, lv, rk: str, rv, c: ast.Compare, rside, member: bool):
    """An IPV4 field compared with another, with an address, or (in ``IN``) a network."""
    if op not in ("=", "<>", "!="):
        raise QueryError(
            "IPV4 addresses compare only with = and <>, and with a network by IN "
            "'a.b.c.d/n': they have no order here",
            c.pos,
        )
    if lk == rk == "ipv4":
        return P.Cmp(op, lv, rv, "ipv4")
    if lk == "ipv4" and rk == "strlit":
        try:
            value, prefix = parse_network(rv.value)
        except ValueError as err:
            raise QueryError(f"'{_short(rv.value)}' {err}", rside.pos) from None
        if prefix < 32 and not member:
            raise QueryError(
                f"'{rv.value}' is a network: test whether an address is in it with "
                f"{lv.name} IN '{rv.value}'",
                rside.pos,
            )
        return P.Cmp(op, lv, P.Const(value, "ipv4", prefix=prefix), "ipv4")
    raise QueryError(f"cannot compare {_kind_text(lk, lv)} with {_kind_text(rk, rv)}", c.pos)


def _units(e) -> set[str]:
    """The units of the TIMESTAMP fields an integer expression reads."""
    return {
        n.type.unit
        for n in P.nodes(e)
        if isinstance(n, P.FieldRef) and isinstance(n.type, TimestampType)
    }


def _timestamp_const(lk: str, lv, lit: ast.TimestampLit, c: ast.Compare) -> P.Const:
    """A TIMESTAMP literal as a count of the unit of the TIMESTAMP fields it is compared with."""
    units = _units(lv) if lk == "int" else set()
    if len(units) != 1:
        raise QueryError(
            f"TIMESTAMP '{_short(lit.text)}' must be compared with a TIMESTAMP field (or an "
            "expression over TIMESTAMP fields of one unit), which gives its unit",
            lit.pos,
        )
    (unit,) = units
    try:
        return P.Const(parse_timestamp(lit.text, unit), "int", unit=unit)
    except ValueError as err:
        raise QueryError(f"TIMESTAMP '{_short(lit.text)}' {err}", lit.pos) from None


def _same_units(left, right, c: ast.Compare) -> None:
    """Two TIMESTAMP fields of different units compared as they are would compare counts of
    different units: an error that says how to convert."""
    if isinstance(left, P.FieldRef) and isinstance(right, P.FieldRef):
        units = _units(left) | _units(right)
        if len(units) > 1:
            raise QueryError(
                f"'{left.name}' is {left.type} and '{right.name}' is {right.type}: their "
                "counts are in different units; convert one with * (as ms_field > s_field * "
                "1000)",
                c.pos,
            )


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


def _shown(name: str, quoted: bool) -> str:
    """A name in a message: ``'name'``, or ``"name"`` as written when it was quoted."""
    return ast.quote(name, True) if quoted else f"'{name}'"


def _suggest_label(label: str, labels: tuple[str, ...]) -> str:
    """A hint naming the ENUM label ``label`` may have meant: labels are exact strings."""
    for c in labels:
        if c.lower() == label.lower():
            return f" (did you mean '{c}'? labels are case-sensitive)"
    import difflib

    close = difflib.get_close_matches(label, list(labels), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _suggest(name: str, choices) -> str:
    """A hint naming the declaration (an AST node with ``name`` and ``quoted``) that a
    reference ``name`` may have meant: one equal ignoring case (the quotes differ), else a
    close spelling."""
    written = {c.name: ast.quote(c.name, c.quoted) for c in choices}
    for c, text in written.items():
        if c.lower() == name.lower():
            return (
                f" (did you mean {text}? a double-quoted name keeps its case, an unquoted one "
                "stands for its upper case)"
            )
    import difflib

    close = difflib.get_close_matches(name.upper(), [c.upper() for c in written], n=1)
    if not close:
        return ""
    text = next(t for c, t in written.items() if c.upper() == close[0])
    return f" (did you mean {text}?)"


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


def check(file: ast.File) -> Program:
    """Check a parsed file; raises :class:`QueryError` (a :class:`QueryErrors` when there are
    several) naming every error, in file order."""
    return _Checker(file).run()
