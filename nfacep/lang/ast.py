"""The abstract syntax tree of a query file: plain dataclasses carrying source positions.

Both query forms (the paper's concise ``QUERY … PATTERN … DEFINE`` and the SQL
``SELECT * FROM s MATCH_RECOGNIZE (…)``) produce the same :class:`Query` node. The parser
only builds nodes; every check is done later by :mod:`nfacep.lang.check`. Features the hardware
cannot evaluate are kept as nodes (:class:`Unsupported`, :class:`Call`, :class:`Anchor`) so
the checker can reject them by name.

``dump`` gives a stable one-line text form of patterns and expressions, used by golden tests
and by ``nfacep explain``.

Names are kept as written, without their quotes; a node's ``quoted`` says whether it was
double-quoted. Two names are the same iff their :func:`key` are equal: an unquoted name stands
for its upper-case fold, a quoted one for itself, as in SQL. The checker resolves every
reference so, and what it hands on is spelled as the declaration is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import SourcePos
from .types import FieldType

__all__ = [
    "BROKEN_MEASURE",
    "Alt",
    "Anchor",
    "Between",
    "BinOp",
    "BoolLit",
    "Call",
    "Column",
    "Compare",
    "CreateStream",
    "DecLit",
    "Define",
    "Empty",
    "Expr",
    "FieldDecl",
    "File",
    "InList",
    "IntLit",
    "Logical",
    "Measure",
    "Neg",
    "Not",
    "ParamRef",
    "Pattern",
    "Permute",
    "Query",
    "Repeat",
    "Seq",
    "StrLit",
    "Unsupported",
    "Var",
    "Wildcard",
    "Within",
    "children",
    "dump",
    "key",
    "quote",
]


def key(name: str, quoted: bool = False) -> str:
    """What a name stands for: ``name`` itself when double-quoted, else its upper-case fold."""
    return name if quoted else name.upper()


def quote(name: str, quoted: bool) -> str:
    """A name as written: ``"name"`` when it was double-quoted."""
    return f'"{name}"' if quoted else name


# --- patterns -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Var:
    name: str
    pos: SourcePos | None = field(default=None, compare=False, repr=False)
    quoted: bool = False


@dataclass(frozen=True)
class Wildcard:
    pos: SourcePos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Empty:
    """The empty pattern ``()``: matches only the empty sequence."""

    pos: SourcePos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Seq:
    items: tuple[Pattern, ...]
    pos: SourcePos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Alt:
    items: tuple[Pattern, ...]
    pos: SourcePos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Repeat:
    """``child{lo,hi}``; ``hi`` is None for unbounded. ``*`` is (0, None), ``+`` (1, None)."""

    child: Pattern
    lo: int
    hi: int | None
    reluctant: bool = False
    pos: SourcePos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Permute:
    items: tuple[Pattern, ...]
    pos: SourcePos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Anchor:
    """``^`` or ``$``: parsed so the checker can reject it with a reason."""

    kind: str
    pos: SourcePos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Exclusion:
    """``{- … -}``: parsed so the checker can reject it with a reason."""

    child: Pattern
    pos: SourcePos | None = field(default=None, compare=False, repr=False)


Pattern = Var | Wildcard | Empty | Seq | Alt | Repeat | Permute | Anchor | Exclusion


# --- expressions ----------------------------------------------------------------------------


@dataclass(frozen=True)
class IntLit:
    value: int
    pos: SourcePos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class DecLit:
    text: str
    pos: SourcePos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class StrLit:
    value: str
    pos: SourcePos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class TimestampLit:
    """``TIMESTAMP '2024-01-01 00:00:00'``: ISO 8601 text, converted to the unit of the
    TIMESTAMP field it is compared with."""

    text: str
    pos: SourcePos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class BoolLit:
    value: bool
    pos: SourcePos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class ParamRef:
    """A runtime parameter, ``:name``: a constant whose value is given when the engine runs."""

    name: str
    pos: SourcePos | None = field(default=None, compare=False, repr=False)
    quoted: bool = False


@dataclass(frozen=True)
class Column:
    """A field of the current tuple, optionally qualified (``A.speed``)."""

    name: str
    qualifier: str | None = None
    pos: SourcePos | None = field(default=None, compare=False, repr=False)
    quoted: bool = False
    qualifier_quoted: bool = False


@dataclass(frozen=True)
class Neg:
    operand: Expr
    pos: SourcePos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class BinOp:
    """Integer ``+``, ``-`` or ``*`` (``/`` and ``%`` are parsed to be refused by name)."""

    op: str
    left: Expr
    right: Expr
    pos: SourcePos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Compare:
    """``=``, ``<>`` (also written ``!=``), ``<``, ``<=``, ``>``, ``>=``."""

    op: str
    left: Expr
    right: Expr
    pos: SourcePos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Between:
    operand: Expr
    low: Expr
    high: Expr
    negated: bool = False
    pos: SourcePos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class InList:
    operand: Expr
    items: tuple[Expr, ...]
    negated: bool = False
    pos: SourcePos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Logical:
    """``AND`` or ``OR`` over two or more operands."""

    op: str
    items: tuple[Expr, ...]
    pos: SourcePos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Not:
    operand: Expr
    pos: SourcePos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Call:
    """A function call such as ``PREV(x)`` or ``COUNT(*)``: always rejected by the checker."""

    name: str
    args: tuple[Expr, ...]
    pos: SourcePos | None = field(default=None, compare=False, repr=False)


Expr = (
    IntLit
    | DecLit
    | StrLit
    | TimestampLit
    | BoolLit
    | ParamRef
    | Column
    | Neg
    | BinOp
    | Compare
    | Between
    | InList
    | Logical
    | Not
    | Call
)


# --- statements -----------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldDecl:
    name: str
    type: FieldType
    #: ``TIME(unit)``: the time unit of the field's values (SECOND, MILLISECOND, …), or None
    unit: str | None = None
    pos: SourcePos | None = field(default=None, compare=False, repr=False)
    #: declared double-quoted: a tuple file's column must spell it exactly
    quoted: bool = False

    @property
    def key(self) -> str:
        return key(self.name, self.quoted)


@dataclass(frozen=True)
class CreateStream:
    name: str
    fields: tuple[FieldDecl, ...]
    pos: SourcePos | None = field(default=None, compare=False, repr=False)
    quoted: bool = False


@dataclass(frozen=True)
class Define:
    name: str
    expr: Expr
    pos: SourcePos | None = field(default=None, compare=False, repr=False)
    quoted: bool = False


@dataclass(frozen=True)
class Measure:
    """One item of ``MEASURES``: ``expr AS alias`` (judged by the checker)."""

    expr: Expr
    alias: str
    pos: SourcePos | None = field(default=None, compare=False, repr=False)  #: the item's
    quoted: bool = False  #: the alias was double-quoted
    alias_pos: SourcePos | None = field(default=None, compare=False, repr=False)
    #: RUNNING or FINAL written before it (refused by the checker), and where
    semantics: str | None = None
    semantics_pos: SourcePos | None = field(default=None, compare=False, repr=False)


#: The name of a measure that did not parse, which parsing went on after
#: (:mod:`nfacep.lang.recovery`): the AST leaves it out, its error is reported.
BROKEN_MEASURE = "?"


@dataclass(frozen=True)
class Unsupported:
    """A clause the engine cannot honour (MEASURES, ALL ROWS PER MATCH, SUBSET, …)."""

    feature: str
    reason: str
    pos: SourcePos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Within:
    """``WITHIN n`` (``count``, in the ORDER BY field's units) or ``WITHIN INTERVAL 'text'
    unit`` (``interval``: the quoted text and the unit, upper case)."""

    count: int | None = None
    interval: tuple[str, str] | None = None
    pos: SourcePos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Query:
    pattern: Pattern
    defines: tuple[Define, ...]
    name: str | None = None
    stream: str | None = None
    partition: tuple[Column, ...] = ()
    order: tuple[Column, ...] = ()
    #: AFTER MATCH SKIP PAST LAST ROW (earliest end), else every end; without an AFTER MATCH
    #: clause, the SQL form's default is the former, the concise form's the latter
    skip_past_last_row: bool = False
    within: Within | None = None
    #: ``MEASURES`` items, in order (empty: no MEASURES clause)
    measures: tuple[Measure, ...] = ()
    unsupported: tuple[Unsupported, ...] = ()
    form: str = "concise"
    pos: SourcePos | None = field(default=None, compare=False, repr=False)
    name_pos: SourcePos | None = field(default=None, compare=False, repr=False)
    stream_pos: SourcePos | None = field(default=None, compare=False, repr=False)
    name_quoted: bool = False
    stream_quoted: bool = False


@dataclass(frozen=True)
class File:
    streams: tuple[CreateStream, ...]
    queries: tuple[Query, ...]
    #: just after the file's last non-blank character: where a missing statement belongs
    end: SourcePos | None = field(default=None, compare=False, repr=False)


def children(node: Pattern | Expr) -> tuple[Pattern | Expr, ...]:
    """The sub-patterns or sub-expressions of a node, in source order."""
    match node:
        case Seq(items) | Alt(items) | Permute(items) | Logical(_, items) | Call(_, items):
            return items
        case Repeat(child) | Exclusion(child) | Neg(child) | Not(child):
            return (child,)
        case BinOp(_, left, right) | Compare(_, left, right):
            return (left, right)
        case Between(operand, low, high):
            return (operand, low, high)
        case InList(operand, items):
            return (operand, *items)
    return ()


# --- dumps ----------------------------------------------------------------------------------


def _bound(lo: int, hi: int | None) -> str:
    return f"{lo},{'' if hi is None else hi}"


def _joined(items, sep: str = ",") -> str:
    return sep.join(dump(i) for i in items)


def _dump_repeat(node: Repeat) -> str:
    short = {(0, None): "star", (1, None): "plus", (0, 1): "opt"}.get((node.lo, node.hi))
    name = short or "rep" + "{" + _bound(node.lo, node.hi) + "}"
    return name + ("_lazy" if node.reluctant else "") + "{" + dump(node.child) + "}"


def _dump_column(node: Column) -> str:
    name = quote(node.name, node.quoted)
    if node.qualifier:
        return f"{quote(node.qualifier, node.qualifier_quoted)}.{name}"
    return name


def _dump_between(node: Between) -> str:
    kw = "not-between" if node.negated else "between"
    return f"({kw} {dump(node.operand)} {dump(node.low)} {dump(node.high)})"


def _dump_in_list(node: InList) -> str:
    kw = "not-in" if node.negated else "in"
    return f"({kw} {dump(node.operand)} " + _joined(node.items, " ") + ")"


#: How each node kind is rendered by :func:`dump`, keyed by its class.
_DUMPERS: dict[type, Callable[[Any], str]] = {
    # patterns
    Var: lambda n: quote(n.name, n.quoted),
    Wildcard: lambda n: "any",
    Empty: lambda n: "empty",
    Seq: lambda n: "seq{" + _joined(n.items) + "}",
    Alt: lambda n: "alt{" + _joined(n.items) + "}",
    Permute: lambda n: "permute{" + _joined(n.items) + "}",
    Repeat: _dump_repeat,
    Anchor: lambda n: f"anchor{{{n.kind}}}",
    Exclusion: lambda n: "exclude{" + dump(n.child) + "}",
    # expressions
    IntLit: lambda n: str(n.value),
    DecLit: lambda n: n.text,
    StrLit: lambda n: "'" + n.value.replace("'", "''") + "'",
    BoolLit: lambda n: "TRUE" if n.value else "FALSE",
    ParamRef: lambda n: ":" + quote(n.name, n.quoted),
    Column: _dump_column,
    Neg: lambda n: f"(- {dump(n.operand)})",
    BinOp: lambda n: f"({n.op} {dump(n.left)} {dump(n.right)})",
    Compare: lambda n: f"({n.op} {dump(n.left)} {dump(n.right)})",
    Between: _dump_between,
    InList: _dump_in_list,
    Logical: lambda n: f"({n.op.lower()} " + _joined(n.items, " ") + ")",
    Not: lambda n: f"(not {dump(n.operand)})",
    Call: lambda n: f"{n.name}(" + _joined(n.args, ", ") + ")",
}


def dump(node: Pattern | Expr) -> str:
    """A stable text form: ``seq{A,star{B},C}`` for patterns, prefix form for expressions."""
    dumper = _DUMPERS.get(type(node))
    if dumper is None:
        raise TypeError(f"not an AST node: {node!r}")
    return dumper(node)
