"""Parsing: query text to :class:`nfacep.ast.File`. The only module that imports lark."""

from __future__ import annotations

import re

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from . import ast
from .errors import QueryError, SourcePos
from .types import BoolType, EnumType, Float32Type, IntType, UIntType

__all__ = ["MAX_NESTING", "parse"]

#: Deepest nesting of parentheses accepted, like regex-syntax's nest limit: deeper input is
#: rejected before parsing so no later recursive pass can overflow the stack.
MAX_NESTING = 100

_parser = Lark.open("grammar.lark", rel_to=__file__, parser="lalr", propagate_positions=True,
                    maybe_placeholders=True)

# How tokens are named in "expected …" messages.
_TOKEN_TEXT = {
    "LPAR": "'('", "RPAR": "')'", "SEMICOLON": "';'", "COMMA": "','", "DOT": "'.'",
    "VBAR": "'|'", "EQUAL": "'='", "NAME": "a name", "INT_NUM": "an integer",
    "HEX_NUM": "an integer", "DECIMAL": "a number", "STRING": "a quoted string",
    "QUANTIFIER": "a quantifier", "COMP_OP": "a comparison", "ADD_OP": "'+' or '-'",
    "STAR_SELECT": "'*'", "STAR_ARG": "'*'", "MINUS": "'-'", "PLUS": "'+'",
    "CARET": "'^'", "DOLLAR": "'$'", "__ANON_0": "'{-'", "__ANON_1": "'-}'",
    "INT_KW": "INT", "$END": "end of file",
}


def _describe(terminals) -> str:
    names = sorted({_TOKEN_TEXT.get(t, t) for t in terminals})
    if len(names) > 8:
        names = [*names[:8], "…"]
    return ", ".join(names)


def _pos(meta_or_token) -> SourcePos:
    return SourcePos(meta_or_token.line, meta_or_token.column)


def _check_nesting(text: str) -> None:
    depth = 0
    line, col = 1, 1
    in_string = in_comment = False
    i = 0
    while i < len(text):
        ch = text[i]
        if in_comment:
            if ch == "\n":
                in_comment = False
        elif in_string:
            if ch == "'":
                in_string = False
        elif ch == "'":
            in_string = True
        elif text.startswith("--", i):
            in_comment = True
        elif ch == "(":
            depth += 1
            if depth > MAX_NESTING:
                raise QueryError(f"nesting deeper than {MAX_NESTING} levels of parentheses",
                                 SourcePos(line, col))
        elif ch == ")":
            depth -= 1
        if ch == "\n":
            line, col = line + 1, 1
        else:
            col += 1
        i += 1


def _unquote(token: str) -> str:
    return token[1:-1].replace("''", "'")


_QUANT = re.compile(r"(\*|\+|\?|\{\s*(\d*)\s*(,\s*(\d*)\s*)?\})(\?)?")


@v_args(inline=True)
class _ToAst(Transformer):
    """Builds AST nodes only; no checking beyond what the node shapes require."""

    def __init__(self):
        super().__init__(visit_tokens=False)

    # statements
    def start(self, *items):
        items = [i for i in items if not isinstance(i, Token)]
        streams = tuple(i for i in items if isinstance(i, ast.CreateStream))
        queries = tuple(i for i in items if isinstance(i, ast.Query))
        return ast.File(streams, queries)

    @v_args(meta=True, inline=True)
    def create_stream(self, meta, _create, _stream, name, *fields):
        return ast.CreateStream(str(name), tuple(fields), pos=_pos(name))

    def field_decl(self, name, ty):
        return ast.FieldDecl(str(name), ty, pos=_pos(name))

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

    # queries
    @v_args(meta=True, inline=True)
    def concise_query(self, meta, *clauses):
        return _build_query(meta, clauses, form="concise")

    def query_head(self, _kw, name, _from=None, stream=None):
        return ("head", name, stream)

    @v_args(meta=True, inline=True)
    def sql_query(self, meta, _select, select, _from, stream, _mr, *rest):
        rest = list(rest)
        name = None
        if rest and isinstance(rest[-1], Token) and rest[-1].type == "NAME":
            name = rest.pop()
        rest = [r for r in rest if not (isinstance(r, Token) and r.type == "AS")]
        clauses = [("head", name, stream), *rest]
        if select is not None:
            clauses.append(select)
        return _build_query(meta, clauses, form="sql")

    def select_star(self, _star):
        return None

    @v_args(meta=True, inline=True)
    def select_columns(self, meta, *exprs):
        return ("unsupported", ast.Unsupported(
            "SELECT list", "the engine reports where matches end, per partition; "
            "write SELECT * (match records carry seq, query and partition)", pos=_pos(meta)))

    @v_args(meta=True, inline=True)
    def measures_clause(self, meta, kw, *measures):
        return ("unsupported", ast.Unsupported(
            "MEASURES", "measures need values from several rows of a match, which the "
            "per-tuple hardware does not keep; matches are reported as (seq, query, partition)",
            pos=_pos(kw)))

    def measure(self, *args):
        return None

    def one_row(self, *args):
        return None

    def all_rows(self, kw, *rest):
        return ("unsupported", ast.Unsupported(
            "ALL ROWS PER MATCH", "the engine reports one record where each match ends; it "
            "does not keep the rows of a match", pos=_pos(kw)))

    def subset_clause(self, kw, *rest):
        return ("unsupported", ast.Unsupported(
            "SUBSET", "union variables are only useful with MEASURES or navigation functions, "
            "which the engine does not support", pos=_pos(kw)))

    def partition_clause(self, _kw, *cols):
        return ("partition", tuple(c for c in cols if isinstance(c, ast.Column)))

    def order_clause(self, kw, _by, *items):
        return ("order", tuple(items))

    def order_item(self, col, direction=None):
        if direction is not None and direction.type == "DESC":
            raise QueryError("ORDER BY … DESC is not supported: the stream is processed in "
                             "arrival order, which must be ascending in the ORDER BY field",
                             _pos(direction))
        return col

    def skip_clause(self, _after, _match, _skip, target):
        return target

    def skip_past_last_row(self, *_):
        return ("skip", True)

    def skip_to_next_row(self, kw, *_):
        return ("unsupported", ast.Unsupported(
            "AFTER MATCH SKIP TO NEXT ROW", "the engine supports the default (every match end "
            "is reported) and AFTER MATCH SKIP PAST LAST ROW", pos=_pos(kw)))

    def skip_to_variable(self, kw, *rest):
        return ("unsupported", ast.Unsupported(
            "AFTER MATCH SKIP TO " + " ".join(str(r) for r in rest).upper(),
            "skipping to a variable needs to know where inside a match each variable was "
            "bound, which the NFA does not keep; use AFTER MATCH SKIP PAST LAST ROW",
            pos=_pos(kw)))

    def pattern_clause(self, kw, pattern=None):
        return ("pattern", pattern if pattern is not None else ast.Empty(pos=_pos(kw)))

    def define_clause(self, _kw, *defines):
        return ("define", tuple(d for d in defines if isinstance(d, ast.Define)))

    def define(self, name, _as, expr):
        return ast.Define(str(name), expr, pos=_pos(name))

    # patterns
    @v_args(meta=True, inline=True)
    def alternation(self, meta, *items):
        return ast.Alt(tuple(items), pos=_pos(meta))

    @v_args(meta=True, inline=True)
    def sequence(self, meta, *items):
        return ast.Seq(tuple(items), pos=_pos(meta))

    def quantified(self, atom, quant):
        m = _QUANT.fullmatch(str(quant))
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
            lo = int(lo_text) if lo_text else 0
            hi = lo if comma is None else (int(hi_text) if hi_text else None)
            if hi is not None and hi < lo:
                raise QueryError(f"quantifier {op}: the maximum {hi} is below the minimum {lo}",
                                 pos)
        return ast.Repeat(atom, lo, hi, reluctant=bool(lazy), pos=pos)

    def var(self, name):
        return ast.Var(str(name), pos=_pos(name))

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
        return ast.Logical("OR", tuple(i for i in items if not isinstance(i, Token)),
                           pos=_pos(meta))

    @v_args(meta=True, inline=True)
    def and_expr(self, meta, *items):
        return ast.Logical("AND", tuple(i for i in items if not isinstance(i, Token)),
                           pos=_pos(meta))

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
        node = first
        for op, right in zip(rest[::2], rest[1::2], strict=True):
            node = ast.BinOp(str(op), node, right, pos=_pos(op))
        return node

    @v_args(meta=True, inline=True)
    def neg(self, meta, operand):
        return ast.Neg(operand, pos=_pos(meta))

    def unary(self, operand):  # unary plus
        return operand

    def call(self, name, args):
        return ast.Call(str(name).upper(), tuple(args or ()), pos=_pos(name))

    def call_args(self, *args):
        return tuple(ast.Column("*") if isinstance(a, Token) else a for a in args)

    def column(self, first, second=None):
        if second is None:
            return ast.Column(str(first), pos=_pos(first))
        return ast.Column(str(second), qualifier=str(first), pos=_pos(first))

    def int_lit(self, token):
        return ast.IntLit(int(str(token), 0), pos=_pos(token))

    def dec_lit(self, token):
        return ast.DecLit(str(token), pos=_pos(token))

    def str_lit(self, token):
        return ast.StrLit(_unquote(str(token)), pos=_pos(token))

    def true_lit(self, token):
        return ast.BoolLit(True, pos=_pos(token))

    def false_lit(self, token):
        return ast.BoolLit(False, pos=_pos(token))


def _width_type(cls, kw, width):
    n = int(str(width))
    if not 1 <= n <= 64:
        raise QueryError(f"{str(kw).upper()}({n}): the width must be between 1 and 64 bits",
                         _pos(width))
    return cls(n)


def _build_query(meta, clauses, *, form):
    fields = {"partition": (), "order": (), "skip": False, "define": ()}
    unsupported = []
    name = stream = None
    name_pos = stream_pos = None
    pattern = None
    for clause in clauses:
        if clause is None or isinstance(clause, Token):
            continue
        kind = clause[0]
        if kind == "head":
            _, name_tok, stream_tok = clause
            if name_tok is not None:
                name, name_pos = str(name_tok), _pos(name_tok)
            if stream_tok is not None:
                stream, stream_pos = str(stream_tok), _pos(stream_tok)
        elif kind == "unsupported":
            unsupported.append(clause[1])
        elif kind == "pattern":
            pattern = clause[1]
        else:
            fields[kind] = clause[1]
    return ast.Query(
        pattern=pattern, defines=fields["define"], name=name, stream=stream,
        partition=fields["partition"], order=fields["order"],
        skip_past_last_row=fields["skip"], unsupported=tuple(unsupported), form=form,
        pos=_pos(meta), name_pos=name_pos, stream_pos=stream_pos)


def parse(text: str, filename: str = "<query>") -> ast.File:
    """Parse a query file; raises :class:`QueryError` with the position of the first error."""
    try:
        _check_nesting(text)
        tree = _parser.parse(text)
        return _ToAst().transform(tree)
    except QueryError as err:
        raise err.located(text, filename) from None
    except UnexpectedInput as err:
        raise _syntax_error(err, text).located(text, filename) from None
    except Exception as err:  # lark wraps errors raised inside the transformer
        inner = getattr(err, "orig_exc", None)
        if isinstance(inner, QueryError):
            raise inner.located(text, filename) from None
        raise


def _end_of(text: str) -> SourcePos:
    """The position just after the last non-blank character: where missing text belongs."""
    body = text.rstrip()
    line = body.count("\n") + 1
    return SourcePos(line, len(body) - (body.rfind("\n") + 1) + 1)


def _syntax_error(err: UnexpectedInput, text: str) -> QueryError:
    pos = SourcePos(err.line, err.column) if err.line > 0 else None
    if isinstance(err, UnexpectedCharacters):
        return QueryError(f"unexpected character {err.char!r}", pos)
    if isinstance(err, UnexpectedEOF):
        return QueryError(f"unexpected end of file, expected {_describe(err.expected)}",
                          _end_of(text))
    assert isinstance(err, UnexpectedToken)
    token = err.token
    if token.type == "$END":
        return QueryError(f"unexpected end of file, expected {_describe(err.expected)}",
                          _end_of(text))
    before = _word_before(text, token.start_pos)
    if before is not None and before[0].upper() in _STATEMENT_STARTS:
        word, at = before
        return QueryError(f"'{word}' starts a new statement here: is a ';' missing before it?",
                          at)
    return QueryError(f"unexpected {str(token)!r}, expected {_describe(err.expected)}", pos)


_STATEMENT_STARTS = {"QUERY", "SELECT", "CREATE"}


def _word_before(text: str, offset: int | None):
    """The identifier-like word ending just before ``offset`` (skipping blanks), with its
    position."""
    if offset is None:
        return None
    words = list(re.finditer(r"[A-Za-z_][A-Za-z0-9_]*", text[:offset]))
    m = words[-1] if words else None
    if m is None or text[m.end():offset].strip():
        return None
    line = text.count("\n", 0, m.start()) + 1
    column = m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1
    return m.group(), SourcePos(line, column)
