"""The partition keys' values of the generated stream (:class:`.background.Background` draws
their ranks): how many distinct keys a key's fields allow, and each integer key field's values,
the constants the predicates compare it with first."""

from __future__ import annotations

import itertools
import math

import numpy as np

from nfacep.lang.types import BoolType, EnumType

__all__ = ["domain", "first_value", "key_domain", "key_values"]


def domain(ty) -> int:
    """Distinct values of a key field's type."""
    if isinstance(ty, EnumType):
        return len(ty.labels)
    if isinstance(ty, BoolType):
        return 2
    lo, hi = ty.range
    return hi - lo + 1


def key_domain(program) -> int:
    """Distinct partition keys the stream's type allows: the product over the key's fields."""
    return math.prod(domain(program.schema.field(n).type) for n in program.partition_fields)


def first_value(ty, p: int) -> int:
    """The first of ``p`` consecutive key values of an integer field: 1 where they fit."""
    lo, hi = ty.range
    return 1 if lo <= 1 and p <= hi else lo


def key_values(ty, points: list, p: int) -> np.ndarray:
    """``p`` distinct values of an integer key field: the constants the predicates compare it
    with and their neighbours (inside the type) first, then consecutive values from
    :func:`first_value` (only those without constants: as before)."""
    lo, hi = ty.range
    near = sorted({int(v) + d for v in points for d in (-1, 0, 1) if lo <= int(v) + d <= hi})
    out = near[:p]
    taken = set(out)
    first = first_value(ty, p)
    # (from the first value up, then from the type's least: p is at most the type's domain)
    for v in itertools.chain(range(first, hi + 1), range(lo, first)):
        if len(out) == p:
            break
        if v not in taken:
            out.append(v)
    return np.array(out, dtype=np.int64)
