"""Typed predicate expressions: the decoder's inputs, with a column-wise evaluator.

The checker (:mod:`nfacep.lang.check`) turns each DEFINE into one of these nodes. They are
hashable and compare structurally, so identical predicates of different queries share one
decoder bit. :func:`evaluate` computes a predicate for a whole batch of tuples with numpy,
exactly as the hardware decoder does: integer arithmetic is exact (no overflow, any width),
FLOAT32 comparisons follow IEEE 754 (NaN satisfies no ordered comparison and ``=``, only
``<>``; -0 equals +0), ENUM values are label indices.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import overload

import numpy as np

from .types import BoolType, EnumType, FieldType, Float32Type, IntType, UIntType

__all__ = [
    "And",
    "Arith",
    "Cmp",
    "Const",
    "FieldRef",
    "Not",
    "Or",
    "PExpr",
    "Param",
    "bind",
    "column_of",
    "evaluate",
    "nodes",
    "render",
]

_INT64 = (-(1 << 63), (1 << 63) - 1)
_UINT64 = (0, (1 << 64) - 1)


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
    """An integer, float32 (stored as a Python float), Boolean or ENUM-index constant."""

    value: int | float | bool
    kind: str  # "int", "float", "bool", "enum"
    enum: EnumType | None = None

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


@dataclass(frozen=True)
class Arith:
    """Exact integer ``+``, ``-`` or unary ``neg`` (right is None)."""

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


PExpr = FieldRef | Const | Param | Arith | Cmp | And | Or | Not
#: the operands of integer arithmetic
IntExpr = FieldRef | Const | Param | Arith


def _const_text(c: Const) -> str:
    if c.kind == "bool":
        return "TRUE" if c.value else "FALSE"
    if c.kind == "enum":
        assert c.enum is not None, "an ENUM constant carries its type"
        return "'" + c.enum.labels[int(c.value)].replace("'", "''") + "'"
    if c.kind == "float":
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
        case Arith("neg", left):
            return f"-{render(left, False)}"
        case Arith(op, left, right) if right is not None:
            text = f"{render(left, False)} {op} {render(right, False)}"
            return text if _top else f"({text})"
        case Cmp(op, left, right):
            text = f"{render(left)} {op} {render(right)}"
            return text if _top else f"({text})"
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
            return Const(values[name], kind, ty if isinstance(ty, EnumType) else None)
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


# --- evaluation -----------------------------------------------------------------------------


def _int_dtype(*ranges: tuple[int, int]):
    lo = min(r[0] for r in ranges)
    hi = max(r[1] for r in ranges)
    if _INT64[0] <= lo and hi <= _INT64[1]:
        return np.int64
    if _UINT64[0] <= lo and hi <= _UINT64[1]:
        return np.uint64
    return object


def _subranges(e: PExpr):
    if isinstance(e, FieldRef | Const | Param):
        yield e.range
    elif isinstance(e, Arith):
        yield e.range
        yield from _subranges(e.left)
        if e.right is not None:
            yield from _subranges(e.right)


def _int_values(e: PExpr, columns, n: int, dtype):
    match e:
        case FieldRef(name):
            col = columns[name]
            if dtype is object:
                return col.astype(object)
            return col.astype(dtype, copy=False)
        case Const(value):
            return np.asarray(value, dtype=dtype)  # 0-d: broadcast, never n copies
        case Param(name):
            return np.asarray(columns[column_of(name)]).astype(dtype, copy=False)
        case Arith("neg", left):
            return -_int_values(left, columns, n, dtype)
        case Arith(op, left, right) if right is not None:
            a = _int_values(left, columns, n, dtype)
            b = _int_values(right, columns, n, dtype)
            return a + b if op == "+" else a - b
    raise TypeError(e)


_OPS = {
    "=": np.equal,
    "<>": np.not_equal,
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
}


def _scalar_or_column(e: PExpr, columns, n: int, dtype):
    if isinstance(e, Const):
        return np.asarray(e.value, dtype=dtype)  # 0-d: broadcast, never n copies
    if isinstance(e, Param):
        return np.asarray(columns[column_of(e.name)]).astype(dtype, copy=False)
    if isinstance(e, FieldRef):
        return columns[e.name].astype(dtype, copy=False)
    raise TypeError(e)


def _column(result, n: int) -> np.ndarray:
    """A comparison's result as n bools (a comparison of constants gives one)."""
    result = np.asarray(result, dtype=bool)
    return result if result.ndim else np.full(n, bool(result))


def evaluate(e: PExpr, columns: dict[str, np.ndarray], n: int) -> np.ndarray:
    """Evaluate a Boolean predicate on ``n`` tuples given as numpy columns (see module doc)."""
    match e:
        case Const(value, "bool"):
            return np.full(n, bool(value))
        case FieldRef(name, BoolType()):
            return columns[name].astype(bool, copy=False)
        case Param(name, BoolType()):
            return _column(np.asarray(columns[column_of(name)]).astype(bool, copy=False), n)
        case Not(operand):
            return ~evaluate(operand, columns, n)
        case And(items):
            out = np.ones(n, dtype=bool)
            for item in items:
                out &= evaluate(item, columns, n)
            return out
        case Or(items):
            out = np.zeros(n, dtype=bool)
            for item in items:
                out |= evaluate(item, columns, n)
            return out
        case Cmp(op, left, right, kind):
            fn = _OPS[op]
            if kind == "int":
                dtype = _int_dtype(*_subranges(left), *_subranges(right))
                return _column(
                    fn(_int_values(left, columns, n, dtype), _int_values(right, columns, n, dtype)),
                    n,
                )
            if kind == "float":
                return _column(
                    fn(
                        _scalar_or_column(left, columns, n, np.float32),
                        _scalar_or_column(right, columns, n, np.float32),
                    ),
                    n,
                )
            if kind == "bool":
                return _column(fn(evaluate(left, columns, n), evaluate(right, columns, n)), n)
            return _column(
                fn(
                    _scalar_or_column(left, columns, n, np.int64),
                    _scalar_or_column(right, columns, n, np.int64),
                ),
                n,
            )
    raise TypeError(f"not a Boolean predicate: {e!r}")


def field_kind(ty: FieldType) -> str:
    if isinstance(ty, UIntType | IntType):
        return "int"
    if isinstance(ty, Float32Type):
        return "float"
    if isinstance(ty, BoolType):
        return "bool"
    return "enum"
