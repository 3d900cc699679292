"""Typed predicate expressions: the decoder's inputs.

The checker (:mod:`nfacep.lang.check`) turns each DEFINE into one of these nodes. They are
hashable and compare structurally, so identical predicates of different queries share one
decoder bit. :mod:`nfacep.lang.evaluate` computes them column-wise (the only part of the
language that needs numpy).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import overload

from .types import (
    BoolType,
    EnumType,
    FieldType,
    Float32Type,
    IntType,
    Ipv4Type,
    TimestampType,
    UIntType,
)
from .values import format_ipv4, format_timestamp

__all__ = [
    "WIDEST",
    "And",
    "Arith",
    "Cmp",
    "Const",
    "FieldRef",
    "Not",
    "Or",
    "PExpr",
    "Param",
    "Prev",
    "bind",
    "column_of",
    "history",
    "known_of",
    "nodes",
    "prev_of",
    "render",
]


def _range(ty: FieldType) -> tuple[int, int]:
    """The values of an integer type, or an ENUM's label indices: what "int" and "enum"
    comparisons compare."""
    if isinstance(ty, BoolType | Float32Type):
        raise TypeError(f"{ty} has no integer range")
    return ty.range


@dataclass(frozen=True)
class FieldRef:
    name: str
    type: FieldType

    @property
    def range(self) -> tuple[int, int]:
        return _range(self.type)


@dataclass(frozen=True)
class Const:
    """An integer, float32 (stored as a Python float), Boolean, ENUM-index or IPv4 constant.
    An IPv4 constant is a network: ``prefix`` leading bits of ``value`` (32: one address);
    ``=`` with it means "in the network", ``<>`` "not in it". A TIMESTAMP constant is an
    integer, a count of ``unit`` since the epoch: the unit only says how to show it (as the
    time), not what it is (equal counts are equal constants)."""

    value: int | float | bool
    kind: str  # "int", "float", "bool", "enum", "ipv4"
    enum: EnumType | None = None
    prefix: int = 32
    unit: str | None = field(default=None, compare=False)

    @property
    def range(self) -> tuple[int, int]:
        return int(self.value), int(self.value)


@dataclass(frozen=True)
class Param:
    """A runtime parameter (``:name``), of the type of the field it is compared with. When
    evaluated, its values are the column ``column_of(name)`` of the columns handed to
    :func:`evaluate`: one value, or one per tuple (the value in force at each)."""

    name: str
    type: FieldType

    @property
    def range(self) -> tuple[int, int]:
        return _range(self.type)


def column_of(name: str) -> str:
    """The key of parameter ``name``'s values among :func:`evaluate`'s columns (no field can
    have it: field names do not start with ':')."""
    return ":" + name


#: Integer expressions are exact: the checker refuses one with a value (or an intermediate
#: value) outside signed integers of this many bits.
WIDEST = 128


@dataclass(frozen=True)
class Prev:
    """``PREV(name, k)``: field ``name`` of the tuple ``k`` tuples back in the same partition
    (1 ≤ k ≤ :data:`nfacep.limits.MAX_PREV`), NULL where fewer than ``k`` precede it there.
    Evaluated, its values are the column ``prev_of(name, k)`` and whether they are known
    (not NULL) the column ``known_of(k)``."""

    name: str
    type: FieldType
    k: int = 1

    @property
    def range(self) -> tuple[int, int]:
        return _range(self.type)


def prev_of(name: str, k: int) -> str:
    """The key of ``PREV(name, k)``'s values among :func:`evaluate`'s columns (no field can
    have it: a field name has no parenthesis)."""
    return f"PREV({name},{k})"


def known_of(k: int) -> str:
    """The key of the column saying, per tuple, whether ``k`` tuples precede it in its
    partition (where they do not, every ``PREV(…, k)`` is NULL)."""
    return f"PREV(*,{k})"


@dataclass(frozen=True)
class Arith:
    """Exact integer ``+``, ``-``, ``*`` (the right operand a :class:`Const`, as the checker
    builds it) or unary ``neg`` (right is None)."""

    op: str
    left: IntExpr
    right: IntExpr | None = None

    @property
    def range(self) -> tuple[int, int]:
        llo, lhi = self.left.range
        if self.op == "neg":
            return -lhi, -llo
        assert self.right is not None, "+ and - have a right operand"
        rlo, rhi = self.right.range
        if self.op == "+":
            return llo + rlo, lhi + rhi
        if self.op == "*":
            corners = (llo * rlo, llo * rhi, lhi * rlo, lhi * rhi)
            return min(corners), max(corners)
        return llo - rhi, lhi - rlo


@dataclass(frozen=True)
class Cmp:
    """A comparison; ``kind`` is the domain both sides are compared in."""

    op: str  # = <> < <= > >=
    left: PExpr
    right: PExpr
    kind: str  # "int", "float", "bool", "enum"


@dataclass(frozen=True)
class And:
    items: tuple[PExpr, ...]


@dataclass(frozen=True)
class Or:
    items: tuple[PExpr, ...]


@dataclass(frozen=True)
class Not:
    operand: PExpr


PExpr = FieldRef | Const | Param | Prev | Arith | Cmp | And | Or | Not
#: the operands of integer arithmetic
IntExpr = FieldRef | Const | Param | Prev | Arith


def _const_text(c: Const) -> str:
    if c.kind == "bool":
        return "TRUE" if c.value else "FALSE"
    if c.kind == "enum":
        assert c.enum is not None, "an ENUM constant carries its type"
        return "'" + c.enum.labels[int(c.value)].replace("'", "''") + "'"
    if c.kind == "ipv4":
        length = "" if c.prefix == 32 else f"/{c.prefix}"
        return f"'{format_ipv4(int(c.value))}{length}'"
    if c.unit is not None:  # a TIMESTAMP: the time, its fraction digits the unit's
        return f"TIMESTAMP '{format_timestamp(int(c.value), c.unit)}'"
    if c.kind == "float":
        import numpy as np  # the shortest text of a FLOAT32, only for float constants

        return str(np.float32(c.value))
    return str(c.value)


def render(e: PExpr, _top: bool = True) -> str:
    """Canonical SQL-like text of a predicate (used in dumps, explain and the decoder names)."""
    match e:
        case FieldRef(name):
            return name
        case Const():
            return _const_text(e)
        case Param(name):
            return ":" + name
        case Prev(name, _, k):
            return f"PREV({name})" if k == 1 else f"PREV({name}, {k})"
        case Arith("neg", left):
            return f"-{render(left, False)}"
        case Arith(op, left, right) if right is not None:
            text = f"{render(left, False)} {op} {render(right, False)}"
            return text if _top else f"({text})"
        case Cmp(op, left, Const(kind="ipv4", prefix=prefix) as right) if prefix < 32:
            word = "IN" if op == "=" else "NOT IN"
            text = f"{render(left)} {word} {render(right)}"
            return text if _top else f"({text})"
        case Cmp(op, left, right):
            text = f"{render(left)} {op} {render(right)}"
            return text if _top else f"({text})"
        case And((item,)) | Or((item,)):  # IN with one item, as `ip IN '10.0.0.0/8'`
            return render(item, _top)
        case And(items) | Or(items):
            word = " AND " if isinstance(e, And) else " OR "
            text = word.join(render(i, False) for i in items)
            return text if _top else f"({text})"
        case Not(operand):
            return f"NOT {render(operand, False)}"
    raise TypeError(e)


@overload
def bind(e: IntExpr, values: dict) -> IntExpr: ...
@overload
def bind(e: PExpr, values: dict) -> PExpr: ...
def bind(e: PExpr, values: dict) -> PExpr:
    """``e`` with every runtime parameter replaced by a constant: its value in ``values``
    (as :class:`nfacep.settings.ParamValues` holds them: the label's index for ENUM)."""
    match e:
        case Param(name, ty):
            kind = field_kind(ty)
            unit = ty.unit if isinstance(ty, TimestampType) else None
            return Const(values[name], kind, ty if isinstance(ty, EnumType) else None, unit=unit)
        case Arith(op, left, right):
            return Arith(op, bind(left, values), None if right is None else bind(right, values))
        case Cmp(op, left, right, kind):
            return Cmp(op, bind(left, values), bind(right, values), kind)
        case And(items):
            return And(tuple(bind(i, values) for i in items))
        case Or(items):
            return Or(tuple(bind(i, values) for i in items))
        case Not(operand):
            return Not(bind(operand, values))
    return e


def nodes(e: PExpr):
    """Every node of a predicate, ``e`` first, depth first."""
    yield e
    match e:
        case Arith(_, left, right) | Cmp(_, left, right):
            yield from nodes(left)
            if right is not None:
                yield from nodes(right)
        case And(items) | Or(items):
            for item in items:
                yield from nodes(item)
        case Not(operand):
            yield from nodes(operand)


def history(exprs) -> dict[str, int]:
    """The fields the predicates ``exprs`` read with PREV, each with the most tuples back it is
    read: how many of its values each partition keeps (its depth), in the order first read."""
    depth: dict[str, int] = {}
    for e in exprs:
        for node in nodes(e):
            if isinstance(node, Prev):
                depth[node.name] = max(depth.get(node.name, 0), node.k)
    return depth


def field_kind(ty: FieldType) -> str:
    if isinstance(ty, Ipv4Type):
        return "ipv4"
    if isinstance(ty, UIntType | IntType):  # TIMESTAMP too: an integer count of its unit
        return "int"
    if isinstance(ty, Float32Type):
        return "float"
    if isinstance(ty, BoolType):
        return "bool"
    return "enum"
