"""Lark's parse tree of one statement to :mod:`nfacep.lang.ast` nodes (:class:`ToAst`), with the
checks the nodes' shapes need: widths, quantifier bounds, integer literals."""

from __future__ import annotations

import re
from typing import Any

from lark import Token, Transformer_NonRecursive, v_args

from ..errors import QueryError, SourcePos
from ..limits import MAX_INT_LITERAL, MAX_STATES
from . import ast
from .syntax_errors import SELECT_LIST_WHY, pos_of
from .types import (
    INTERVAL_UNITS,
    TIME_UNITS,
    BoolType,
    EnumType,
    Float32Type,
    IntType,
    Ipv4Type,
    TimestampType,
    UIntType,
)
from .unsupported import ALL_ROWS_WHY
from .values import TIMESTAMP_UNITS


def _unquote(token: str) -> str:
    return token[1:-1].replace("''", "'")


def _name(token) -> tuple[str, bool]:
    """A NAME token's text without its double quotes, and whether it had them."""
    text = str(token)
    return (text[1:-1], True) if text.startswith('"') else (text, False)


_QUANT = re.compile(r"(\*|\+|\?|\{\s*(\d*)\s*(,\s*(\d*)\s*)?\})(\?)?")


@v_args(inline=True)
class ToAst(Transformer_NonRecursive):
    """Builds AST nodes only; no checking beyond what the node shapes require. Iterative, so
    the depth of the parse tree cannot overflow the stack.

    A refusal in a query's clause that leaves the rest of the query readable (ORDER BY …
    DESC, an interval's unit, a quantifier's counts, WITHIN's count) is kept in ``errors``
    and the clause read as if without it, so that the query is still checked and its other
    errors come with it; other refusals are raised."""

    def __init__(self):
        super().__init__(visit_tokens=False)
        self.errors: list[QueryError] = []

    # statements
    @v_args(meta=True, inline=True)
    def create_stream(self, meta, _create, _stream, name, *fields):
        text, quoted = _name(name)
        return ast.CreateStream(text, tuple(fields), pos=pos_of(name), quoted=quoted)

    def field_decl(self, name, ty, unit=None):
        text, quoted = _name(name)
        if isinstance(ty, TimestampType | Ipv4Type) and unit is not None:
            why = "its type gives its unit" if isinstance(ty, TimestampType) else "it is no time"
            raise QueryError(
                f"TIME({unit}) does not apply to {ty} field '{text}': {why}", pos_of(name)
            )
        if isinstance(ty, TimestampType):
            unit = ty.unit  # WITHIN INTERVAL counts in it
        return ast.FieldDecl(text, ty, unit, pos=pos_of(name), quoted=quoted)

    def time_unit(self, _kw, unit):
        text = _name(unit)[0].upper()
        if text not in TIME_UNITS:
            raise QueryError(
                f"TIME({unit}): the time units are {', '.join(TIME_UNITS)}", pos_of(unit)
            )
        return text

    def uint_type(self, kw, width):
        return _width_type(UIntType, kw, width)

    def int_type(self, kw, width):
        return _width_type(IntType, kw, width)

    def bool_type(self, _kw):
        return BoolType()

    def enum_type(self, kw, *labels):
        values = [_unquote(s) for s in labels]
        seen = set()
        for token, value in zip(labels, values, strict=True):
            if value in seen:
                raise QueryError(f"ENUM label '{value}' is listed twice", pos_of(token))
            seen.add(value)
        return EnumType(tuple(values))

    def float32_type(self, _kw):
        return Float32Type()

    def ipv4_type(self, _kw):
        return Ipv4Type()

    def timestamp_type(self, kw, unit):
        text = _name(unit)[0].upper()
        if text not in TIMESTAMP_UNITS:
            raise QueryError(
                f"TIMESTAMP({unit}): the units of a TIMESTAMP are {', '.join(TIMESTAMP_UNITS)}",
                pos_of(unit),
            )
        return TimestampType(unit=text)

    # queries
    @v_args(meta=True, inline=True)
    def concise_query(self, meta, *clauses):
        return _build_query(meta, clauses, form="concise")

    def query_head(self, _kw, name, _from=None, stream=None):
        return ("head", name, stream)

    @v_args(meta=True, inline=True)
    def sql_query(self, meta, _select, select, _from, stream, _mr, *rest):
        tail = list(rest)
        name = None
        if tail and isinstance(tail[-1], Token) and tail[-1].type == "NAME":
            name = tail.pop()
        tail = [r for r in tail if not (isinstance(r, Token) and r.type == "AS")]
        clauses = [("head", name, stream), *tail]
        if select is not None:
            clauses.append(select)
        return _build_query(meta, clauses, form="sql")

    def select_star(self, _star):
        return None

    @v_args(meta=True, inline=True)
    def select_columns(self, meta, *exprs):
        return ("unsupported", ast.Unsupported("SELECT list", SELECT_LIST_WHY, pos=pos_of(meta)))

    def measures_clause(self, kw, *items):
        measures = (m for m in items if isinstance(m, ast.Measure))
        return ("measures", tuple(m for m in measures if m.alias != ast.BROKEN_MEASURE))

    @v_args(meta=True, inline=True)
    def measure(self, meta, *children):
        *semantics, expr, _as, alias = children
        text, quoted = _name(alias)
        word = semantics[0] if semantics else None
        return ast.Measure(
            expr,
            text,
            pos=pos_of(meta),
            quoted=quoted,
            alias_pos=pos_of(alias),
            semantics=None if word is None else str(word).upper(),
            semantics_pos=None if word is None else pos_of(word),
        )

    def one_row(self, *args):
        return None

    def all_rows(self, kw, *rest):
        return (
            "unsupported",
            ast.Unsupported(
                "ALL ROWS PER MATCH",
                ALL_ROWS_WHY,
                pos=pos_of(kw),
            ),
        )

    def subset_clause(self, kw, *rest):
        return (
            "unsupported",
            ast.Unsupported(
                "SUBSET",
                "union variables only name groups of variables for measures and navigation "
                "(LAST(U.price)); nfacep's measures read the first and last tuple of the "
                "whole match and PREV the variable being defined, neither a variable by name",
                pos=pos_of(kw),
            ),
        )

    def partition_clause(self, _kw, *cols):
        return ("partition", tuple(c for c in cols if isinstance(c, ast.Column)))

    def order_clause(self, kw, _by, *items):
        return ("order", tuple(items))

    def order_item(self, col, direction=None):
        if direction is not None and direction.type == "DESC":  # kept: read as ascending
            self.errors.append(
                QueryError(
                    "ORDER BY … DESC is not supported: the stream is processed in "
                    "arrival order, which must be ascending in the ORDER BY field",
                    pos_of(direction),
                )
            )
        return col

    def skip_clause(self, _after, _match, _skip, target):
        return target

    def report_every_end(self, *_):
        return ("skip", False)

    def skip_past_last_row(self, *_):
        return ("skip", True)

    def skip_to_next_row(self, kw, *_):
        return (
            "unsupported",
            ast.Unsupported(
                "AFTER MATCH SKIP TO NEXT ROW",
                "it reports, for each row a match starts at, the match SQL's quantifiers "
                "prefer, which needs the rows a match binds, and the engine keeps only where "
                "matches end; it supports AFTER MATCH SKIP PAST LAST ROW (earliest end, the SQL "
                "form's default) and AFTER MATCH REPORT EVERY END (every end is reported)",
                pos=pos_of(kw),
            ),
        )

    def skip_to_variable(self, kw, *rest):
        return (
            "unsupported",
            ast.Unsupported(
                "AFTER MATCH SKIP TO " + " ".join(str(r) for r in rest).upper(),
                "skipping to a variable needs to know where inside a match each variable was "
                "bound, which the NFA does not keep; use AFTER MATCH SKIP PAST LAST ROW",
                pos=pos_of(kw),
            ),
        )

    def pattern_clause(self, kw, *rest):
        within = rest[-1] if rest and isinstance(rest[-1], ast.Within) else None
        pattern = rest[0] if rest and rest[0] is not within else ast.Empty(pos=pos_of(kw))
        return ("pattern", pattern, within)

    def within_count(self, kw, count):
        try:
            return ast.Within(count=_integer(count), pos=pos_of(kw))
        except QueryError as err:  # kept: the pattern read without its window
            self.errors.append(err)
            return None

    def within_interval(self, kw, _interval, text, unit):
        name = _name(unit)[0].upper()
        if name not in INTERVAL_UNITS:  # kept: the pattern read without its window
            self.errors.append(
                QueryError(
                    f"INTERVAL … {unit}: the units of an interval are {', '.join(INTERVAL_UNITS)}",
                    pos_of(unit),
                )
            )
            return None
        return ast.Within(interval=(_unquote(str(text)), name), pos=pos_of(kw))

    def define_clause(self, _kw, *defines):
        return ("define", tuple(d for d in defines if isinstance(d, ast.Define)))

    def define(self, name, _as, expr):
        text, quoted = _name(name)
        return ast.Define(text, expr, pos=pos_of(name), quoted=quoted)

    # patterns
    @v_args(meta=True, inline=True)
    def alternation(self, meta, *items):
        return ast.Alt(tuple(items), pos=pos_of(meta))

    @v_args(meta=True, inline=True)
    def sequence(self, meta, *items):
        return ast.Seq(tuple(items), pos=pos_of(meta))

    def quantified(self, atom, quant):
        try:
            return self._quantified(atom, quant)
        except QueryError as err:  # kept: the operand read without its quantifier
            self.errors.append(err)
            return atom

    def _quantified(self, atom, quant):
        m = _QUANT.fullmatch(str(quant))
        assert m is not None, "_QUANT accepts every QUANTIFIER token of the grammar"
        op, lo_text, comma, hi_text, lazy = m.groups()
        pos = pos_of(quant)
        if op == "*":
            lo, hi = 0, None
        elif op == "+":
            lo, hi = 1, None
        elif op == "?":
            lo, hi = 0, 1
        else:
            if not lo_text and not (comma and hi_text):
                raise QueryError(f"quantifier {op} needs a count", pos)
            lo = _count(lo_text, op, pos) if lo_text else 0
            hi = lo if comma is None else (_count(hi_text, op, pos) if hi_text else None)
            if hi is not None and hi < lo:
                raise QueryError(
                    f"quantifier {op}: the maximum {hi} is below the minimum {lo}", pos
                )
        return ast.Repeat(atom, lo, hi, reluctant=bool(lazy), pos=pos)

    def var(self, name):
        text, quoted = _name(name)
        return ast.Var(text, pos=pos_of(name), quoted=quoted)

    @v_args(meta=True, inline=True)
    def wildcard(self, meta):
        return ast.Wildcard(pos=pos_of(meta))

    @v_args(meta=True, inline=True)
    def group(self, meta, inner=None):
        return inner if inner is not None else ast.Empty(pos=pos_of(meta))

    def permute(self, kw, *items):
        return ast.Permute(tuple(items), pos=pos_of(kw))

    def anchor(self, token):
        return ast.Anchor(str(token), pos=pos_of(token))

    @v_args(meta=True, inline=True)
    def exclusion(self, meta, child):
        return ast.Exclusion(child, pos=pos_of(meta))

    # expressions
    @v_args(meta=True, inline=True)
    def or_expr(self, meta, *items):
        return ast.Logical(
            "OR", tuple(i for i in items if not isinstance(i, Token)), pos=pos_of(meta)
        )

    @v_args(meta=True, inline=True)
    def and_expr(self, meta, *items):
        return ast.Logical(
            "AND", tuple(i for i in items if not isinstance(i, Token)), pos=pos_of(meta)
        )

    def not_(self, kw, operand):
        return ast.Not(operand, pos=pos_of(kw))

    @v_args(meta=True, inline=True)
    def compare(self, meta, left, op, right):
        text = "<>" if str(op) == "!=" else str(op)
        return ast.Compare(text, left, right, pos=pos_of(op))

    @v_args(meta=True, inline=True)
    def between(self, meta, operand, *rest):
        negated = rest[0].type == "NOT"
        low, high = [r for r in rest if not isinstance(r, Token)]
        return ast.Between(operand, low, high, negated=negated, pos=pos_of(meta))

    @v_args(meta=True, inline=True)
    def in_list(self, meta, operand, *rest):
        negated = rest[0].type == "NOT"
        items = tuple(r for r in rest if not isinstance(r, Token))
        return ast.InList(operand, items, negated=negated, pos=pos_of(meta))

    @v_args(meta=True, inline=True)
    def sum(self, meta, first, *rest):
        return _binops(first, rest)

    @v_args(meta=True, inline=True)
    def product(self, meta, first, *rest):
        """``*``, ``/``, ``%``: the checker takes ``*`` by an integer constant, refuses the rest."""
        return _binops(first, rest)

    @v_args(meta=True, inline=True)
    def neg(self, meta, operand):
        return ast.Neg(operand, pos=pos_of(meta))

    def unary(self, operand):  # unary plus
        return operand

    def call(self, name, args):
        return ast.Call(_name(name)[0].upper(), tuple(args or ()), pos=pos_of(name))

    def call_args(self, *args):
        return tuple(ast.Column("*") if isinstance(a, Token) else a for a in args)

    def column(self, first, second=None):
        text, quoted = _name(first)
        if second is None:
            return ast.Column(text, pos=pos_of(first), quoted=quoted)
        name, name_quoted = _name(second)
        return ast.Column(
            name,
            qualifier=text,
            pos=pos_of(first),
            quoted=name_quoted,
            qualifier_quoted=quoted,
        )

    def int_lit(self, token):
        return ast.IntLit(_integer(token), pos=pos_of(token))

    def dec_lit(self, token):
        return ast.DecLit(str(token), pos=pos_of(token))

    def str_lit(self, token):
        return ast.StrLit(_unquote(str(token)), pos=pos_of(token))

    def typed_lit(self, name, text):
        if _name(name)[0].upper() != "TIMESTAMP":
            raise QueryError(
                f"unexpected string after '{name}': the only typed literal is "
                "TIMESTAMP '2024-01-01 00:00:00'",
                pos_of(text),
            )
        return ast.TimestampLit(_unquote(str(text)), pos=pos_of(name))

    def param_ref(self, token):
        text, quoted = _name(str(token)[1:])
        return ast.ParamRef(text, pos=pos_of(token), quoted=quoted)

    def true_lit(self, token):
        return ast.BoolLit(True, pos=pos_of(token))

    def false_lit(self, token):
        return ast.BoolLit(False, pos=pos_of(token))


def _width_type(cls, kw, width):
    digits = str(width).lstrip("0") or "0"
    if len(digits) > 2 or not 1 <= int(digits) <= 64:
        shown = digits if len(digits) <= 20 else f"{digits[:8]}… ({len(digits)} digits)"
        raise QueryError(
            f"{str(kw).upper()}({shown}): the width must be between 1 and 64 bits", pos_of(width)
        )
    return cls(int(digits))


def _count(text: str, op: str, pos: SourcePos) -> int:
    """A quantifier's bound: at most the states of one engine, since every copy of an operand
    that can match a tuple is at least one state (and copies of one that cannot are useless)."""
    digits = text.lstrip("0") or "0"
    if len(digits) > len(str(MAX_STATES)) or int(digits) > MAX_STATES:
        shown = digits if len(digits) <= 20 else f"of {len(digits)} digits"
        op = op if len(op) <= 24 else op[:12] + "…}"
        raise QueryError(
            f"quantifier {op}: a count {shown} is more than the limit of "
            f"{MAX_STATES}, the states of one engine (each copy of the operand is "
            "at least one state)",
            pos,
        )
    return int(digits)


def _integer(token: Token) -> int:
    """An integer literal: decimal (leading zeros allowed, as in SQL) or 0x hexadecimal."""
    text = str(token)
    if token.type == "HEX_NUM":
        digits, base, most = text[2:].lstrip("0") or "0", 16, 32
    else:
        digits, base, most = text.lstrip("0") or "0", 10, len(str(MAX_INT_LITERAL))
    if len(digits) > most or int(digits, base) > MAX_INT_LITERAL:
        raise QueryError(
            f"integer literal of {len(digits)} digits is too large: integer "
            "literals are at most 2^128 - 1 (39 decimal digits); fields are at "
            "most 64 bits",
            pos_of(token),
        )
    return int(digits, base)


def _build_query(meta, clauses, *, form):
    # the clauses' nodes, as the transformer's methods return them
    fields: dict[str, Any] = {"partition": (), "order": (), "skip": None, "define": ()}
    unsupported = []
    name = stream = None
    name_quoted = stream_quoted = False
    name_pos = stream_pos = None
    pattern: ast.Pattern | None = None
    within = None
    measures: tuple[ast.Measure, ...] = ()
    for clause in clauses:
        if clause is None or isinstance(clause, Token):
            continue
        kind = clause[0]
        if kind == "head":
            _, name_tok, stream_tok = clause
            if name_tok is not None:
                (name, name_quoted), name_pos = _name(name_tok), pos_of(name_tok)
            if stream_tok is not None:
                (stream, stream_quoted), stream_pos = _name(stream_tok), pos_of(stream_tok)
        elif kind == "unsupported":
            unsupported.append(clause[1])
        elif kind == "pattern":
            _, pattern, within = clause
        elif kind == "measures":
            measures = clause[1]
        else:
            fields[kind] = clause[1]
    assert pattern is not None, "the grammar requires a PATTERN clause in both forms"
    return ast.Query(
        pattern=pattern,
        defines=fields["define"],
        name=name,
        stream=stream,
        partition=fields["partition"],
        order=fields["order"],
        # without AFTER MATCH: SQL's default in the SQL form, every end in the paper's
        skip_past_last_row=form == "sql" if fields["skip"] is None else fields["skip"],
        within=within,
        measures=measures,
        unsupported=tuple(unsupported),
        form=form,
        pos=pos_of(meta),
        name_pos=name_pos,
        stream_pos=stream_pos,
        name_quoted=name_quoted,
        stream_quoted=stream_quoted,
    )


def _binops(first, rest):
    """``first op right op right …`` as left-associated :class:`ast.BinOp` nodes."""
    node = first
    for op, right in zip(rest[::2], rest[1::2], strict=True):
        node = ast.BinOp(str(op), node, right, pos=pos_of(op))
    return node
