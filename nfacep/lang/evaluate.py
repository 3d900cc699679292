"""Column-wise evaluation of typed predicates (:mod:`nfacep.lang.predicates`) with numpy.

:func:`evaluate` computes a predicate for a whole batch of tuples exactly as the hardware
decoder does: integer arithmetic is exact (no overflow, any width: a comparison whose operands'
ranges, or any of their parts', leave int64 and uint64 is computed with Python integers),
FLOAT32 comparisons follow IEEE 754 (NaN satisfies no ordered comparison and ``=``, only
``<>``; -0 equals +0), ENUM values are label indices.
"""

from __future__ import annotations

import numpy as np

from .predicates import And, Arith, Cmp, Const, FieldRef, Not, Or, Param, PExpr, column_of
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
