"""Parsing: query text to :class:`nfacep.lang.ast.File`. The only module that imports lark."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib.util
import os
import pathlib
import re
import sys
import tempfile
from typing import Any

import lark
from lark import Lark, Token, Transformer_NonRecursive, v_args
from lark.exceptions import (
    UnexpectedCharacters,
    UnexpectedEOF,
    UnexpectedInput,
    UnexpectedToken,
    VisitError,
)

from ..errors import QueryError, QueryErrors, SourcePos
from ..limits import MAX_ERRORS, MAX_INT_LITERAL, MAX_NESTING, MAX_STATES, MAX_TOKENS
from . import ast
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
from .unsupported import (
    CLAUSE_WORDS,
    SUBQUERY,
    WORDS,
    call_error,
    clause_order_error,
    tail_error,
    word_error,
)
from .values import TIMESTAMP_UNITS

__all__ = ["Parsed", "parse", "parse_all"]


def open_grammar(grammar: pathlib.Path, cache: pathlib.Path | None, **options) -> Lark:
    """The LALR parser of the grammar file, loaded from ``cache`` when that holds the tables of
    this very grammar (its bytes, the options, lark's and Python's versions: a key written in
    the file and in its name), else built and saved there for the next process.

    A cache that is missing, stale, damaged or unwritable (a read-only install) only costs the
    build (tenths of a second); it is replaced whole (a temporary file renamed over it), so a
    concurrent process never reads half of one. ``cache=None`` builds without one.
    """
    text = grammar.read_text(encoding="utf-8")
    key = hashlib.sha256(
        "\0".join([text, repr(sorted(options.items())), lark.__version__, sys.version]).encode()
    ).hexdigest()
    if cache is not None:
        cache = cache.with_name(f"{cache.name}.{key[:16]}")
        # anything but this grammar's tables (no file, another key, a damaged one): build
        with contextlib.suppress(Exception), open(cache, "rb") as f:
            if f.readline() == f"{key}\n".encode():
                return Lark.load(f)
    parser = Lark(text, parser="lalr", **options)
    if cache is not None:
        with contextlib.suppress(OSError):
            cache.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("wb", dir=cache.parent, delete=False) as f:
                try:
                    f.write(f"{key}\n".encode())
                    parser.save(f)
                    f.close()
                    os.replace(f.name, cache)
                except BaseException:
                    os.unlink(f.name)
                    raise
    return parser


_GRAMMAR = pathlib.Path(__file__).with_name("grammar.lark")
#: Beside the module's bytecode, as Python keeps it (``__pycache__``, or PYTHONPYCACHEPREFIX).
_CACHE = pathlib.Path(importlib.util.cache_from_source(str(_GRAMMAR))).with_name("grammar.lalr")
_parser = open_grammar(_GRAMMAR, _CACHE, propagate_positions=True, maybe_placeholders=True)

# How tokens are named in "expected …" messages.
_TOKEN_TEXT = {
    "LPAR": "'('",
    "RPAR": "')'",
    "SEMICOLON": "';'",
    "COMMA": "','",
    "DOT": "'.'",
    "VBAR": "'|'",
    "EQUAL": "'='",
    "NAME": "a name",
    "INT_NUM": "an integer",
    "HEX_NUM": "an integer",
    "DECIMAL": "a number",
    "STRING": "a quoted string",
    "PARAM": "a parameter (:name)",
    "QUANTIFIER": "a quantifier",
    "COMP_OP": "a comparison",
    "ADD_OP": "'+' or '-'",
    "MUL_OP": "'*'",
    "STAR_SELECT": "'*'",
    "STAR_ARG": "'*'",
    "MINUS": "'-'",
    "PLUS": "'+'",
    "CARET": "'^'",
    "DOLLAR": "'$'",
    "__ANON_0": "'{-'",
    "__ANON_1": "'-}'",
    "INT_KW": "INT",
    "$END": "end of file",
}


def _describe(terminals) -> str:
    names = sorted({_TOKEN_TEXT.get(t, t) for t in terminals})
    if len(names) > 8:
        names = [*names[:8], "…"]
    return ", ".join(names)


def _pos(meta_or_token) -> SourcePos:
    return SourcePos(meta_or_token.line, meta_or_token.column)


def _unquote(token: str) -> str:
    return token[1:-1].replace("''", "'")


def _name(token) -> tuple[str, bool]:
    """A NAME token's text without its double quotes, and whether it had them."""
    text = str(token)
    return (text[1:-1], True) if text.startswith('"') else (text, False)


_SELECT_LIST_WHY = (
    "the engine reports where matches end, per partition; "
    "write SELECT * (match records carry seq, query and partition)"
)

#: what is said of a MEASURES clause the parser cannot read (RUNNING, FINAL, …)
_MEASURES = "MEASURES other than FIRST, LAST, COUNT(*) and MATCH_NUMBER()"
_MEASURES_WHY = (
    "the engine reports where a match begins and ends, and the host reads values there; "
    "the measures are FIRST(field), LAST(field), COUNT(*), MATCH_NUMBER() and FIRST(seq), "
    "each AS name, with no RUNNING or FINAL and no expressions around them (docs/language.md)"
)


_QUANT = re.compile(r"(\*|\+|\?|\{\s*(\d*)\s*(,\s*(\d*)\s*)?\})(\?)?")


@v_args(inline=True)
class _ToAst(Transformer_NonRecursive):
    """Builds AST nodes only; no checking beyond what the node shapes require. Iterative, so
    the depth of the parse tree cannot overflow the stack."""

    def __init__(self):
        super().__init__(visit_tokens=False)

    # statements
    @v_args(meta=True, inline=True)
    def create_stream(self, meta, _create, _stream, name, *fields):
        text, quoted = _name(name)
        return ast.CreateStream(text, tuple(fields), pos=_pos(name), quoted=quoted)

    def field_decl(self, name, ty, unit=None):
        text, quoted = _name(name)
        if isinstance(ty, TimestampType | Ipv4Type) and unit is not None:
            why = "its type gives its unit" if isinstance(ty, TimestampType) else "it is no time"
            raise QueryError(
                f"TIME({unit}) does not apply to {ty} field '{text}': {why}", _pos(name)
            )
        if isinstance(ty, TimestampType):
            unit = ty.unit  # WITHIN INTERVAL counts in it
        return ast.FieldDecl(text, ty, unit, pos=_pos(name), quoted=quoted)

    def time_unit(self, _kw, unit):
        text = _name(unit)[0].upper()
        if text not in TIME_UNITS:
            raise QueryError(
                f"TIME({unit}): the time units are {', '.join(TIME_UNITS)}", _pos(unit)
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
                raise QueryError(f"ENUM label '{value}' is listed twice", _pos(token))
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
                _pos(unit),
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
        return ("unsupported", ast.Unsupported("SELECT list", _SELECT_LIST_WHY, pos=_pos(meta)))

    def measures_clause(self, kw, *items):
        return ("measures", tuple(m for m in items if isinstance(m, ast.Measure)))

    @v_args(meta=True, inline=True)
    def measure(self, meta, expr, as_kw, alias):
        text, quoted = _name(alias)
        return ast.Measure(expr, text, pos=_pos(meta), quoted=quoted, alias_pos=_pos(alias))

    def one_row(self, *args):
        return None

    def all_rows(self, kw, *rest):
        return (
            "unsupported",
            ast.Unsupported(
                "ALL ROWS PER MATCH",
                "the engine reports one record where each match ends; it "
                "does not keep the rows of a match",
                pos=_pos(kw),
            ),
        )

    def subset_clause(self, kw, *rest):
        return (
            "unsupported",
            ast.Unsupported(
                "SUBSET",
                "union variables are only useful with MEASURES or navigation functions, "
                "which the engine does not support",
                pos=_pos(kw),
            ),
        )

    def partition_clause(self, _kw, *cols):
        return ("partition", tuple(c for c in cols if isinstance(c, ast.Column)))

    def order_clause(self, kw, _by, *items):
        return ("order", tuple(items))

    def order_item(self, col, direction=None):
        if direction is not None and direction.type == "DESC":
            raise QueryError(
                "ORDER BY … DESC is not supported: the stream is processed in "
                "arrival order, which must be ascending in the ORDER BY field",
                _pos(direction),
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
                pos=_pos(kw),
            ),
        )

    def skip_to_variable(self, kw, *rest):
        return (
            "unsupported",
            ast.Unsupported(
                "AFTER MATCH SKIP TO " + " ".join(str(r) for r in rest).upper(),
                "skipping to a variable needs to know where inside a match each variable was "
                "bound, which the NFA does not keep; use AFTER MATCH SKIP PAST LAST ROW",
                pos=_pos(kw),
            ),
        )

    def pattern_clause(self, kw, *rest):
        within = rest[-1] if rest and isinstance(rest[-1], ast.Within) else None
        pattern = rest[0] if rest and rest[0] is not within else ast.Empty(pos=_pos(kw))
        return ("pattern", pattern, within)

    def within_count(self, kw, count):
        return ast.Within(count=_integer(count), pos=_pos(kw))

    def within_interval(self, kw, _interval, text, unit):
        name = _name(unit)[0].upper()
        if name not in INTERVAL_UNITS:
            raise QueryError(
                f"INTERVAL … {unit}: the units of an interval are {', '.join(INTERVAL_UNITS)}",
                _pos(unit),
            )
        return ast.Within(interval=(_unquote(str(text)), name), pos=_pos(kw))

    def define_clause(self, _kw, *defines):
        return ("define", tuple(d for d in defines if isinstance(d, ast.Define)))

    def define(self, name, _as, expr):
        text, quoted = _name(name)
        return ast.Define(text, expr, pos=_pos(name), quoted=quoted)

    # patterns
    @v_args(meta=True, inline=True)
    def alternation(self, meta, *items):
        return ast.Alt(tuple(items), pos=_pos(meta))

    @v_args(meta=True, inline=True)
    def sequence(self, meta, *items):
        return ast.Seq(tuple(items), pos=_pos(meta))

    def quantified(self, atom, quant):
        m = _QUANT.fullmatch(str(quant))
        assert m is not None, "_QUANT accepts every QUANTIFIER token of the grammar"
        op, lo_text, comma, hi_text, lazy = m.groups()
        pos = _pos(quant)
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
        return ast.Var(text, pos=_pos(name), quoted=quoted)

    @v_args(meta=True, inline=True)
    def wildcard(self, meta):
        return ast.Wildcard(pos=_pos(meta))

    @v_args(meta=True, inline=True)
    def group(self, meta, inner=None):
        return inner if inner is not None else ast.Empty(pos=_pos(meta))

    def permute(self, kw, *items):
        return ast.Permute(tuple(items), pos=_pos(kw))

    def anchor(self, token):
        return ast.Anchor(str(token), pos=_pos(token))

    @v_args(meta=True, inline=True)
    def exclusion(self, meta, child):
        return ast.Exclusion(child, pos=_pos(meta))

    # expressions
    @v_args(meta=True, inline=True)
    def or_expr(self, meta, *items):
        return ast.Logical(
            "OR", tuple(i for i in items if not isinstance(i, Token)), pos=_pos(meta)
        )

    @v_args(meta=True, inline=True)
    def and_expr(self, meta, *items):
        return ast.Logical(
            "AND", tuple(i for i in items if not isinstance(i, Token)), pos=_pos(meta)
        )

    def not_(self, kw, operand):
        return ast.Not(operand, pos=_pos(kw))

    @v_args(meta=True, inline=True)
    def compare(self, meta, left, op, right):
        text = "<>" if str(op) == "!=" else str(op)
        return ast.Compare(text, left, right, pos=_pos(op))

    @v_args(meta=True, inline=True)
    def between(self, meta, operand, *rest):
        negated = rest[0].type == "NOT"
        low, high = [r for r in rest if not isinstance(r, Token)]
        return ast.Between(operand, low, high, negated=negated, pos=_pos(meta))

    @v_args(meta=True, inline=True)
    def in_list(self, meta, operand, *rest):
        negated = rest[0].type == "NOT"
        items = tuple(r for r in rest if not isinstance(r, Token))
        return ast.InList(operand, items, negated=negated, pos=_pos(meta))

    @v_args(meta=True, inline=True)
    def sum(self, meta, first, *rest):
        return _binops(first, rest)

    @v_args(meta=True, inline=True)
    def product(self, meta, first, *rest):
        """``*``, ``/``, ``%``: the checker takes ``*`` by an integer constant, refuses the rest."""
        return _binops(first, rest)

    @v_args(meta=True, inline=True)
    def neg(self, meta, operand):
        return ast.Neg(operand, pos=_pos(meta))

    def unary(self, operand):  # unary plus
        return operand

    def call(self, name, args):
        return ast.Call(_name(name)[0].upper(), tuple(args or ()), pos=_pos(name))

    def call_args(self, *args):
        return tuple(ast.Column("*") if isinstance(a, Token) else a for a in args)

    def column(self, first, second=None):
        text, quoted = _name(first)
        if second is None:
            return ast.Column(text, pos=_pos(first), quoted=quoted)
        name, name_quoted = _name(second)
        return ast.Column(
            name,
            qualifier=text,
            pos=_pos(first),
            quoted=name_quoted,
            qualifier_quoted=quoted,
        )

    def int_lit(self, token):
        return ast.IntLit(_integer(token), pos=_pos(token))

    def dec_lit(self, token):
        return ast.DecLit(str(token), pos=_pos(token))

    def str_lit(self, token):
        return ast.StrLit(_unquote(str(token)), pos=_pos(token))

    def typed_lit(self, name, text):
        if _name(name)[0].upper() != "TIMESTAMP":
            raise QueryError(
                f"unexpected string after '{name}': the only typed literal is "
                "TIMESTAMP '2024-01-01 00:00:00'",
                _pos(text),
            )
        return ast.TimestampLit(_unquote(str(text)), pos=_pos(name))

    def param_ref(self, token):
        text, quoted = _name(str(token)[1:])
        return ast.ParamRef(text, pos=_pos(token), quoted=quoted)

    def true_lit(self, token):
        return ast.BoolLit(True, pos=_pos(token))

    def false_lit(self, token):
        return ast.BoolLit(False, pos=_pos(token))


def _width_type(cls, kw, width):
    digits = str(width).lstrip("0") or "0"
    if len(digits) > 2 or not 1 <= int(digits) <= 64:
        shown = digits if len(digits) <= 20 else f"{digits[:8]}… ({len(digits)} digits)"
        raise QueryError(
            f"{str(kw).upper()}({shown}): the width must be between 1 and 64 bits", _pos(width)
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
            _pos(token),
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
                (name, name_quoted), name_pos = _name(name_tok), _pos(name_tok)
            if stream_tok is not None:
                (stream, stream_quoted), stream_pos = _name(stream_tok), _pos(stream_tok)
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
        pos=_pos(meta),
        name_pos=name_pos,
        stream_pos=stream_pos,
        name_quoted=name_quoted,
        stream_quoted=stream_quoted,
    )


@dataclasses.dataclass(frozen=True)
class Parsed:
    """What :func:`parse_all` makes of a file: the statements that parsed, and the errors of
    the others, in file order."""

    file: ast.File
    errors: tuple[QueryError, ...]
    #: whether every CREATE STREAM parsed: else checking the queries would only echo the broken
    #: declaration (unknown fields, an unknown stream)
    streams_whole: bool


def parse(text: str, filename: str = "<query>") -> ast.File:
    """Parse a query file; raises :class:`QueryError` (a :class:`QueryErrors` when there are
    several) with the place of each error, in file order.

    A byte-order mark at the start is skipped, as spreadsheets and some editors write one.
    """
    parsed = parse_all(text, filename)
    if parsed.errors:
        raise QueryErrors.of(parsed.errors) from None
    return parsed.file


def parse_all(text: str, filename: str = "<query>") -> Parsed:
    """Parse a query file, going on after an error: at the next definition of a DEFINE clause
    when the error is inside one of its conditions, else at the next ';'. Errors have their
    place and the text attached; at most MAX_ERRORS syntax errors are looked for."""
    text = strip_bom(text)
    tree, errors, broken = _Recovery(text).run()
    streams: list[ast.CreateStream] = []
    queries: list[ast.Query] = []
    for statement in tree.children if tree is not None else ():
        try:
            node = _ToAst().transform(statement)
            if isinstance(node, ast.Query):
                _check_depth(node)
        except QueryError as err:
            errors.append(err)
            broken |= statement.data == "create_stream"
            continue
        except VisitError as err:  # lark wraps errors raised inside the transformer
            if not isinstance(err.orig_exc, QueryError):
                raise
            errors.append(err.orig_exc)
            broken |= statement.data == "create_stream"
            continue
        (streams if isinstance(node, ast.CreateStream) else queries).append(node)
    file = ast.File(tuple(streams), tuple(queries), end=_end_of(text))
    located = tuple(err.located(text, filename) for err in errors)
    return Parsed(file, located, not broken)


def strip_bom(text: str) -> str:
    """``text`` without a leading UTF-8 byte-order mark."""
    return text[1:] if text.startswith("\ufeff") else text


# Bracket tokens counted by the nesting limit: '(' and '{-', ')' and '-}'.
_OPEN = {"LPAR", "__ANON_0"}
_CLOSE = {"RPAR", "__ANON_1"}

# What the recovery skips over as a whole, or counts: strings, quoted names, comments,
# parentheses, ',', ';', names, any other character.
_SCAN = re.compile(
    r"'(?:[^']|'')*'|\"[^\"\n]*\"|--[^\n]*|/\*.*?\*/|(?P<word>[A-Za-z_][A-Za-z0-9_]*)|\S", re.S
)


@dataclasses.dataclass
class _Mark:
    """A parser state to go on from: just after a ';' (or at the start), or just after the AS
    of a definition in DEFINE (then ``start`` is where its condition begins)."""

    parser: Any
    lengths: list[int]
    depth: int
    statement: int
    start: int = 0
    as_token: Token | None = None
    #: where the last search for the next definition stopped: place, depth, last name's place
    scan: tuple[int, int, int] | None = None

    def restored(self):
        """A parser in the state of the mark, its stack's trees as they were then."""
        copied = self.parser.copy(deepcopy_values=False)
        stack = copied.parser_state.value_stack
        for i, n in enumerate(self.lengths):
            v = stack[i]
            if n >= 0:
                stack[i] = lark.Tree(v.data, v.children[:n], meta=v._meta)
        return copied


class _Recovery:
    """Lex and parse, counting tokens and bracket depth on the lexer's tokens as they come,
    and going on after a syntax error from the last :class:`_Mark` that lies before it."""

    def __init__(self, text: str):
        self.text = text
        self.seen: list[Token] = []
        self.errors: list[QueryError] = []
        self.broken = False  # a CREATE STREAM did not parse
        self.depth = 0
        self.statement = 0  # ';' read so far
        self.statement_start = 0  # index in seen of the statement's first token
        self.in_define = False
        #: the tokens of the statement so far that say where an error is (_LANDMARKS, and the
        #: ')' that closes MATCH_RECOGNIZE), after the ';' before it: what the messages look
        #: at, kept as tokens come so that no message scans a long statement
        self.heads: list[Token] = []
        self.mr_depth: int | None = None  # the depth MATCH_RECOGNIZE's '(' opens from

    def run(self):
        """The parse tree of the statements that parsed (None when none could be kept), the
        errors, and whether a CREATE STREAM was among the statements that did not parse."""
        parser = _parser.parse_interactive(self.text)
        self.between = _Mark(*_snapshot(parser), 0, 0)
        self.condition: _Mark | None = None
        last = -1  # where the last error was: each recovery must get past it
        while True:
            try:
                self._feed(parser)
                return (
                    parser.feed_eof(self.seen[-1] if self.seen else None),
                    self.errors,
                    self.broken,
                )
            except UnexpectedInput as err:
                offset = _offset(err, self.text)
                if self.seen and self.seen[-1] is getattr(err, "token", None):
                    if self.heads and self.heads[-1] is self.seen[-1]:
                        self.heads.pop()
                    self.seen.pop()
                self.errors.append(_syntax_error(err, self.text, self.seen, self.heads))
                if offset is None or offset <= last or len(self.errors) >= MAX_ERRORS:
                    return self._stop(offset), self.errors, self.broken
                last = offset
                resumed = self._resume(err, offset)
                if resumed is None:
                    return self._stop(None), self.errors, self.broken
                parser = resumed
            except QueryError as err:  # a limit: the rest of the file is not read
                self.errors.append(err)
                return self._stop(None), self.errors, self.broken

    def _feed(self, parser) -> None:
        for token in parser.iter_parse():
            # the token before this one has been fed to the parser: mark after ';' and AS
            prev = self.seen[-1] if self.seen else None
            if prev is not None and prev.type == "SEMICOLON":
                self.statement += 1
                self.statement_start = len(self.seen)
                self.in_define = False
                self.condition = None
                self.heads, self.mr_depth = [prev], None
                self.between = _Mark(*_snapshot(parser), self.depth, self.statement)
            elif (
                self.in_define
                and prev is not None
                and prev.type == "AS"
                and len(self.seen) >= 2
                and self.seen[-2].type == "NAME"
            ):
                self.condition = _Mark(
                    *_snapshot(parser),
                    self.depth,
                    self.statement,
                    start=prev.end_pos or 0,
                    as_token=prev,
                )
            if len(self.seen) >= MAX_TOKENS:
                raise QueryError(
                    f"the file has more than {MAX_TOKENS} tokens (names, numbers, "
                    "operators), more than nfacep accepts in one file",
                    _pos(token),
                )
            self.seen.append(token)
            if token.type in _CLAUSES:
                self.in_define = token.type == "DEFINE"
            if token.type in _LANDMARKS:
                self.heads.append(token)
                if token.type == "MATCH_RECOGNIZE":
                    self.mr_depth = self.depth
            if token.type in _OPEN:
                self.depth += 1
                if self.depth > MAX_NESTING:
                    raise QueryError(
                        f"nesting deeper than {MAX_NESTING} levels of parentheses", _pos(token)
                    )
            elif token.type in _CLOSE:
                self.depth -= 1
                if self.depth == self.mr_depth:  # the ')' that closes MATCH_RECOGNIZE
                    self.heads.append(token)
                    self.mr_depth = None

    def _resume(self, err: UnexpectedInput, offset: int):
        """A parser to go on with after the error at ``offset``: in the DEFINE condition the
        error is in, with TRUE for the condition, from the next definition (or the clause's
        end); else from the next ';'. None at the end of the file."""
        mark = self.condition
        if mark is not None and mark.statement == self.statement and mark.start <= offset:
            assert mark.as_token is not None, "a condition's mark is just after its AS"
            parser = mark.restored()
            with contextlib.suppress(UnexpectedInput):  # then from the next ';'
                parser.feed_token(Token.new_borrow_pos("TRUE", "TRUE", mark.as_token))
                self.depth = mark.depth
                at = _next_definition(self.text, mark, offset)
                return _moved(parser, self.text, at, err, offset)
        first = self.seen[self.statement_start] if self.statement_start < len(self.seen) else None
        self.broken |= first is not None and first.type == "CREATE"
        semicolon = _next_semicolon(self.text, offset)
        if semicolon is None:
            return None
        # the ';' read next starts the next statement (_feed)
        self.depth = self.between.depth
        self.condition = None
        self.in_define = False
        parser = self.between.restored()
        return _moved(parser, self.text, semicolon, err, offset)

    def _stop(self, offset: int | None):
        """The tree of the statements before the last ';' read, the rest left unread."""
        if offset is not None and len(self.errors) >= MAX_ERRORS:
            self.errors.append(
                QueryError(
                    f"nfacep stopped reading the file here, after {MAX_ERRORS} errors",
                    self.errors[-1].pos,
                )
            )
        first = self.seen[self.statement_start] if self.statement_start < len(self.seen) else None
        self.broken |= first is not None and first.type == "CREATE"
        try:
            return self.between.restored().feed_eof(None)
        except UnexpectedInput:  # cannot happen: between statements, the file may end
            return None


def _snapshot(parser) -> tuple[Any, list[int]]:
    """A copy of an interactive parser to go on from later, and the number of children of each
    tree on its stack. lark extends a tree's children in place (a repetition's list, as more
    items are reduced into it), so what the copy shares is cut back to these numbers when it
    is used (:meth:`_Mark.restored`): cheaper than the deep copy lark offers, which would copy
    every statement before at every mark."""
    copied = parser.copy(deepcopy_values=False)
    stack = copied.parser_state.value_stack
    return copied, [len(v.children) if isinstance(v, lark.Tree) else -1 for v in stack]


def _offset(err: UnexpectedInput, text: str) -> int | None:
    """Where in ``text`` an error is, or None at its end."""
    if isinstance(err, UnexpectedCharacters):
        return err.pos_in_stream
    token = getattr(err, "token", None)
    if token is None or token.type == "$END" or token.start_pos is None:
        return None
    return token.start_pos


def _next_definition(text: str, mark: _Mark, offset: int) -> int:
    """Where to go on after an error at ``offset`` in the condition that starts at
    ``mark.start``: its next definition (a ',' or ``name AS`` outside parentheses), or the end
    of the clause (a ';', the ')' that closes MATCH_RECOGNIZE, the end of the file). The scan
    goes on from where the last one for this condition stopped (``mark.scan``)."""
    at, depth, word = mark.scan or (mark.start, 0, -1)  # word: where the last name starts
    for m in _SCAN.finditer(text, at):
        at, found = m.start(), m.group()
        mark.scan = (at, depth, word)
        depth += (found == "(") - (found == ")")
        if at >= offset and (depth < 0 or found == ";" or (depth == 0 and found == ",")):
            return at
        if at >= offset and depth == 0 and found.upper() == "AS" and word > mark.start:
            return word
        word = at if m.group("word") else -1
    return len(text)


def _next_semicolon(text: str, offset: int) -> int | None:
    """The next ';' at or after ``offset`` outside strings and comments, or None."""
    for m in _SCAN.finditer(text, offset):
        if m.group() == ";":
            return m.start()
    return None


def _moved(parser, text: str, at: int, err: UnexpectedInput, offset: int):
    """``parser`` with its lexer moved to ``at`` in ``text`` (counting lines from the error at
    ``offset``, whose line is known)."""
    line = getattr(err, "line", None) or 1
    line += text.count("\n", offset, at)
    counter = parser.lexer_thread.state.line_ctr
    counter.char_pos = at
    counter.line = line
    counter.line_start_pos = text.rfind("\n", 0, at) + 1
    counter.column = at - counter.line_start_pos + 1
    return parser


def _check_depth(query: ast.Query) -> None:
    """Reject a pattern or condition with more than MAX_NESTING operators inside each other."""
    roots: list[ast.Pattern | ast.Expr] = [query.pattern]
    roots.extend(d.expr for d in query.defines)
    for root in roots:
        stack = [(root, 0)]
        while stack:
            node, depth = stack.pop()
            kids = ast.children(node)
            if not kids:
                continue
            if depth == MAX_NESTING:
                raise QueryError(
                    f"nested deeper than {MAX_NESTING} levels: a pattern or condition may nest "
                    f"at most {MAX_NESTING} operators inside each other (a chain of n '+' or "
                    "'-' is n levels)",
                    node.pos,
                )
            stack.extend((k, depth + 1) for k in reversed(kids))


def _end_of(text: str) -> SourcePos:
    """The position just after the last non-blank character: where missing text belongs."""
    body = text.rstrip()
    line = body.count("\n") + 1
    return SourcePos(line, len(body) - (body.rfind("\n") + 1) + 1)


_STATEMENT_STARTS = {"QUERY", "SELECT", "CREATE"}
_TYPE_TOKENS = {"UINT", "INT_KW", "BOOL", "BOOLEAN", "ENUM", "FLOAT32", "IPV4", "TIMESTAMP"}
_TYPES = "UINT(n), INT(n), BOOL, ENUM('a', 'b', …), FLOAT32, IPV4 or TIMESTAMP(unit)"
# The clause keywords that say which part of a query an error is in.
_CLAUSES = {
    "PATTERN",
    "DEFINE",
    "MEASURES",
    "SUBSET",
    "ONE",
    "ALL",
    "AFTER",
    "PARTITION",
    "ORDER",
    "SEMICOLON",
    "CREATE",
}
# The tokens that say which statement, form and clause an error is in (_Recovery.heads).
_LANDMARKS = {*_CLAUSES, *CLAUSE_WORDS, "SELECT", "FROM", "MATCH_RECOGNIZE", "QUERY"}
_OPERATOR_CHARS = {"*", "/", "%", "^", "&", "|", "~"}


def _binops(first, rest):
    """``first op right op right …`` as left-associated :class:`ast.BinOp` nodes."""
    node = first
    for op, right in zip(rest[::2], rest[1::2], strict=True):
        node = ast.BinOp(str(op), node, right, pos=_pos(op))
    return node


def _syntax_error(
    err: UnexpectedInput, text: str, before: list[Token], heads: list[Token]
) -> QueryError:
    """The message for a parse error, knowing the tokens read before it and the landmarks of
    its statement (``heads``): unsupported SQL is recognised by name before falling back to
    "unexpected …, expected …"."""
    pos = SourcePos(err.line, err.column) if err.line > 0 else None
    known = _recognise(err, before, heads)
    if known is not None:
        return known
    if isinstance(err, UnexpectedCharacters):
        return QueryError(f"unexpected character {err.char!r}", pos)
    if isinstance(err, UnexpectedEOF):
        return QueryError(
            f"unexpected end of file, expected {_describe(err.expected)}", _end_of(text)
        )
    assert isinstance(err, UnexpectedToken)
    token = err.token
    if token.type == "$END":
        return QueryError(
            f"unexpected end of file, expected {_describe(err.expected)}", _end_of(text)
        )
    word = before[-1] if before else None
    if str(token).upper() in _STATEMENT_STARTS:  # QUERY q PATTERN (A) QUERY r …
        word = token
    if word is not None and str(word).upper() in _STATEMENT_STARTS:
        return QueryError(
            f"'{word}' starts a new statement here: is a ';' missing before it?", _pos(word)
        )
    return QueryError(f"unexpected {str(token)!r}, expected {_describe(err.expected)}", pos)


def _recognise(err: UnexpectedInput, before: list[Token], heads: list[Token]) -> QueryError | None:
    """A specific message for a mistake made often, or None."""
    token = getattr(err, "token", None)
    prev = before[-1] if before else None
    clause = next((t.type for t in reversed(heads) if t.type in _CLAUSES), None)
    in_condition = clause in ("DEFINE", "MEASURES")
    # CREATE TABLE, CREATE VIEW, …
    if (
        prev is not None
        and prev.type == "CREATE"
        and token is not None
        and token.type not in ("STREAM", "$END")
    ):
        return QueryError(
            f"CREATE {str(token).upper()} is not supported: a query file "
            "declares its input with CREATE STREAM name (field TYPE, …)",
            _pos(prev),
        )
    # a type: INT without its width, INTEGER, UINT8, BIGINT, VARCHAR(n), …
    if prev is not None and prev.type in ("UINT", "INT_KW") and token is not None:
        kw = str(prev).upper()
        if token.type in ("NAME", "INT_NUM") and token.start_pos == prev.end_pos:
            return QueryError(f"unknown type '{prev}{token}': the types are {_TYPES}", _pos(prev))
        return QueryError(f"{kw} needs a width: write {kw}(n), with n from 1 to 64", _pos(prev))
    expected = getattr(err, "expected", None) or getattr(err, "allowed", None) or set()
    if token is not None and token.type == "NAME" and set(expected) >= _TYPE_TOKENS:
        return QueryError(f"unknown type '{token}': the types are {_TYPES}", _pos(token))
    # WITHIN 5 SECOND: a count with a unit, Flink's interval without its INTERVAL
    if (
        len(before) >= 2
        and before[-2].type == "WITHIN"
        and prev is not None
        and prev.type == "INT_NUM"
        and token is not None
        and str(token).upper() in TIME_UNITS
    ):
        return QueryError(
            f"WITHIN {prev} {token}: WITHIN n counts in the ORDER BY field's "
            f"units; write WITHIN INTERVAL '{prev}' {str(token).upper()} for an "
            "interval (the field needs a TIME unit)",
            _pos(token),
        )
    if prev is not None and prev.type == "PATTERN" and token is not None:
        return QueryError("PATTERN takes its pattern in parentheses: PATTERN (A B+ C)", _pos(token))
    # SELECT where a name or a condition goes
    subquery = _subquery(token, before)
    if subquery is not None:
        return subquery
    # inside MEASURES, whatever its expressions are, the clause itself is the problem
    if clause == "MEASURES":
        return _measures_error(token, prev, heads)
    # inside a call of a function the checker rejects by name (COUNT(A.*), PREV(x, 2) …)
    if in_condition:
        call = _open_call(before)
        if call is not None:
            return call_error(str(call).upper(), _pos(call))
    # a SQL word that is not in the language, where the error is
    word = _unsupported_word(token, before)
    if word is not None:
        return word
    known = _misplaced(token, before, heads)
    if known is not None:
        return known
    char = getattr(err, "char", None) if isinstance(err, UnexpectedCharacters) else None
    if char is None and in_condition and token is not None and str(token) in ("*", "|"):
        char = str(token)
    if char in _OPERATOR_CHARS:
        pos = SourcePos(err.line, err.column)
        return QueryError(
            f"'{char}' is not an operator of the language: conditions use comparisons, "
            "+, -, * by an integer constant, AND, OR, NOT",
            pos,
        )
    return None


def _measures_error(token: Token | None, prev: Token | None, heads: list[Token]) -> QueryError:
    """A parse error inside MEASURES: RUNNING or FINAL by name, else the clause."""
    for word in (token, prev):
        if word is not None and str(word).upper() in ("RUNNING", "FINAL"):
            return QueryError(
                f"{str(word).upper()} is not supported: a measure is read once, at the "
                "match's reported row (ONE ROW PER MATCH); write the measure without it",
                _pos(word),
            )
    kw = next(t for t in reversed(heads) if t.type == "MEASURES")
    return QueryError(f"{_MEASURES} is not supported: {_MEASURES_WHY}", _pos(kw))


def _open_call(before: list[Token]) -> Token | None:
    """The function name before the innermost parenthesis still open, if it is one."""
    depth = 0
    for i in range(len(before) - 1, 0, -1):
        t = before[i]
        if t.type in ("AS", "DEFINE", "MEASURES", "SEMICOLON"):  # the condition's start
            return None
        if t.type == "RPAR":
            depth += 1
        elif t.type == "LPAR":
            if depth == 0:
                name = before[i - 1]
                return name if name.type == "NAME" else None
            depth -= 1
    return None


# Tokens that may follow an operand: a word followed by anything else is where an error is.
_AFTER_OPERAND = {
    "COMP_OP",
    "ADD_OP",
    "COMMA",
    "RPAR",
    "SEMICOLON",
    "AND",
    "OR",
    "AS",
    "DOT",
    "BETWEEN",
    "IN",
    "$END",
    "VBAR",
    "QUANTIFIER",
}


def _subquery(token: Token | None, before: list[Token]) -> QueryError | None:
    """The error for SELECT after '(' or FROM, or '(' after FROM; or None."""
    prev = before[-1] if before else None
    for i, word in ((len(before), token), (len(before) - 1, prev)):
        opener = before[i - 1] if i > 0 else None
        if word is None or opener is None or opener.type not in ("LPAR", "FROM"):
            continue
        if str(word).upper() == "SELECT" or (opener.type == "FROM" and word.type == "LPAR"):
            return QueryError(SUBQUERY, _pos(word))
    return None


def _unsupported_word(token: Token | None, before: list[Token]) -> QueryError | None:
    """The error for a SQL word the language does not have (LIKE, IS, CASE, RUNNING, …) in the
    condition or clause the error is in: the unexpected word itself, or a word read as a name
    but followed by an operand (``RUNNING price``, ``CASE WHEN``, ``IS NULL``), or None."""
    start = len(before)
    while start > 0 and before[start - 1].type not in ("AS", "DEFINE", "SEMICOLON"):
        start -= 1
    words = before[start:]
    if token is not None:
        words = [*words, token]
    for i, word in enumerate(words):
        if word.type != "NAME" or str(word).upper() not in WORDS:
            continue
        after = words[i + 1] if i + 1 < len(words) else None
        if after is None or after.type not in _AFTER_OPERAND:
            return word_error(str(word).upper(), _pos(word))
    return None


def _misplaced(token: Token | None, before: list[Token], heads: list[Token]) -> QueryError | None:
    """The error for a clause out of order (``ORDER BY t PARTITION BY k``, WITHIN after
    DEFINE), SQL around ``MATCH_RECOGNIZE ( … )``, or ``T.*`` as the select list; or None.
    ``heads``: the statement's landmarks (the clause keywords, SELECT, FROM, …)."""
    kinds = [t.type for t in heads if t.type != "SEMICOLON"]
    form = "sql" if "SELECT" in kinds else "concise" if kinds[:1] != ["CREATE"] else None
    if form is None or token is None:
        return None
    if form == "sql" and "MATCH_RECOGNIZE" not in kinds and str(token) == "*":
        select = next(i for i in range(len(before) - 1, -1, -1) if before[i].type == "SELECT")
        return QueryError(
            f"SELECT list is not supported: {_SELECT_LIST_WHY}",
            _pos(before[select + 1]) if select + 1 < len(before) else _pos(token),
        )
    if form == "sql" and "FROM" in kinds and "MATCH_RECOGNIZE" not in kinds:
        joined = tail_error(str(token).upper(), _pos(token))  # FROM s JOIN …, FROM s WHERE …
        if joined is not None:
            return joined
    if form == "sql" and "MATCH_RECOGNIZE" in kinds and kinds[-1] == "RPAR":
        return tail_error(str(token).upper(), _pos(token))  # after its closing ')'
    seen = [t for t in kinds if t in CLAUSE_WORDS]
    # the unexpected word, or the word before it when that was read as a name (a DEFINE's)
    prev = before[-1] if before else None
    for word in (token, prev):
        if word is None or str(word).upper() not in CLAUSE_WORDS:
            continue
        if word is prev and (prev.type != "NAME" or token.type == "AS"):
            continue
        if word is token or (seen and seen[-1] == "DEFINE"):
            known = clause_order_error(str(word).upper(), form, seen, _pos(word))
            if known is not None:
                return known
    return None
