"""Column-wise evaluation of typed predicates (:mod:`nfacep.lang.predicates`) with numpy.

:func:`evaluate` computes a predicate for a whole batch of tuples exactly as the hardware
decoder does: integer arithmetic is exact (no overflow, any width: a comparison whose operands'
ranges, or any of their parts', leave int64 and uint64 is computed with Python integers),
FLOAT32 comparisons follow IEEE 754 (NaN satisfies no ordered comparison and ``=``, only
``<>``; -0 equals +0), ENUM values are label indices.

``PREV(field, k)`` (:class:`~nfacep.lang.predicates.Prev`) reads the columns
``prev_of(field, k)`` (the values, anything where NULL) and ``known_of(k)`` (whether they are
not NULL). A predicate that reads one follows SQL's three-valued logic: a comparison with a
NULL is unknown, NOT unknown is unknown, AND and OR are Kleene's, and a tuple satisfies the
predicate only where it is true.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .predicates import (
    And,
    Arith,
    Cmp,
    Const,
    FieldRef,
    Not,
    Or,
    Param,
    PExpr,
    Prev,
    column_of,
    known_of,
    nodes,
    prev_of,
)
from .types import BoolType

__all__ = ["evaluate"]

_INT64 = (-(1 << 63), (1 << 63) - 1)
_UINT64 = (0, (1 << 64) - 1)


def _int_dtype(*ranges: tuple[int, int]):
    lo = min(r[0] for r in ranges)
    hi = max(r[1] for r in ranges)
    if _INT64[0] <= lo and hi <= _INT64[1]:
        return np.int64
    if _UINT64[0] <= lo and hi <= _UINT64[1]:
        return np.uint64
    return object


def _subranges(e: PExpr):
    if isinstance(e, FieldRef | Const | Param | Prev):
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
        case Prev(name, _, k):
            col = columns[prev_of(name, k)]
            return col.astype(object) if dtype is object else col.astype(dtype, copy=False)
        case Arith("neg", left):
            return -_int_values(left, columns, n, dtype)
        case Arith(op, left, right) if right is not None:
            a = _int_values(left, columns, n, dtype)
            b = _int_values(right, columns, n, dtype)
            if op == "*":
                return a * b
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
    if isinstance(e, Prev):
        return columns[prev_of(e.name, e.k)].astype(dtype, copy=False)
    raise TypeError(e)


def _column(result, n: int) -> np.ndarray:
    """A comparison's result as n bools (a comparison of constants gives one)."""
    result = np.asarray(result, dtype=bool)
    return result if result.ndim else np.full(n, bool(result))


def _ipv4(fn, left: PExpr, right: PExpr, columns, n: int):
    """IPv4 ``=``/``<>``: against a network constant, on the address's leading ``prefix``
    bits (the masked compare of the decoder); otherwise on all 32."""
    a = _scalar_or_column(left, columns, n, np.uint64)
    if isinstance(right, Const) and right.prefix < 32:
        shift = np.uint64(32 - right.prefix)
        return fn(a >> shift, np.uint64(int(right.value)) >> shift)
    return fn(a, _scalar_or_column(right, columns, n, np.uint64))


def evaluate(e: PExpr, columns: Mapping[str, np.ndarray], n: int) -> np.ndarray:
    """Evaluate a Boolean predicate on ``n`` tuples given as numpy columns (see module doc):
    whether each tuple satisfies it."""
    if any(isinstance(node, Prev) for node in nodes(e)):
        return _kleene(e, columns, n)[0]
    return _evaluate(e, columns, n)


def _kleene(e: PExpr, columns, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A Boolean predicate in three-valued logic: (where it is true, where it is false); where
    it is neither, it is unknown."""
    prevs = {node.k for node in nodes(e) if isinstance(node, Prev)}
    match e:
        case _ if not prevs:
            true = _evaluate(e, columns, n)
            return true, ~true
        case Not(operand):
            true, false = _kleene(operand, columns, n)
            return false, true
        case And(items) | Or(items):
            parts = [_kleene(i, columns, n) for i in items]
            trues = np.array([t for t, _ in parts]).reshape(len(parts), n)
            falses = np.array([f for _, f in parts]).reshape(len(parts), n)
            if isinstance(e, And):
                return np.all(trues, axis=0), np.any(falses, axis=0)
            return np.any(trues, axis=0), np.all(falses, axis=0)
        case Cmp(op, left, right, "bool"):
            lt, lf = _kleene(left, columns, n)
            rt, rf = _kleene(right, columns, n)
            known = (lt | lf) & (rt | rf)
            value = _OPS[op](lt, rt)
            return value & known, ~value & known
    # a comparison or a BOOL PREV: known where every PREV it reads is
    known = np.ones(n, dtype=bool)
    for k in prevs:
        known &= columns[known_of(k)]
    if isinstance(e, Prev):
        value = columns[prev_of(e.name, e.k)].astype(bool, copy=False)
    else:
        value = _evaluate(e, columns, n)
    return value & known, ~value & known


def _evaluate(e: PExpr, columns: Mapping[str, np.ndarray], n: int) -> np.ndarray:
    """:func:`evaluate` of a predicate without PREV (or a comparison, PREV's NULLs aside)."""
    match e:
        case Const(value, "bool"):
            return np.full(n, bool(value))
        case FieldRef(name, BoolType()):
            return columns[name].astype(bool, copy=False)
        case Param(name, BoolType()):
            return _column(np.asarray(columns[column_of(name)]).astype(bool, copy=False), n)
        case Not(operand):
            return ~_evaluate(operand, columns, n)
        case And(items):
            out = np.ones(n, dtype=bool)
            for item in items:
                out &= _evaluate(item, columns, n)
            return out
        case Or(items):
            out = np.zeros(n, dtype=bool)
            for item in items:
                out |= _evaluate(item, columns, n)
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
                return _column(fn(_evaluate(left, columns, n), _evaluate(right, columns, n)), n)
            if kind == "ipv4":
                return _column(_ipv4(fn, left, right, columns, n), n)
            return _column(
                fn(
                    _scalar_or_column(left, columns, n, np.int64),
                    _scalar_or_column(right, columns, n, np.int64),
                ),
                n,
            )
    raise TypeError(f"not a Boolean predicate: {e!r}")
