"""Predicates as the programmable engine's atoms and truth tables (docs/formats.md,
"Configuration images"): :class:`Atoms` turns a predicate into a truth function over
deduplicated atoms (:class:`Atom`), :func:`truth_table` into a state's table; a predicate not of
the atoms' form raises :class:`Refused`. :mod:`nfacep.image` makes images of them. No numpy,
no amaranth here."""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from dataclasses import dataclass

from .lang import predicates as P
from .lang.types import BoolType
from .lang.values import float32_key

__all__ = ["ATOMS_PER_STATE", "FLIP", "OPS", "Atom", "Atoms", "Refused", "Truth", "truth_table"]

#: the atoms one state's condition may read: its truth table has ``2**ATOMS_PER_STATE`` bits
ATOMS_PER_STATE = 4
#: the comparison operators, by their code in an atom's ``op`` field
OPS = ("=", "<>", "<", "<=", ">", ">=")
#: each operator with its operands swapped
FLIP = {"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


@dataclass(frozen=True)
class Atom:
    """``operands[field] OP (operands[other] if other is not None else 0) + constant``, where
    a FLOAT32 operand is its order key, and a NaN makes the atom false unless ``OP`` is
    ``<>`` (IEEE 754)."""

    field: int
    op: str
    other: int | None
    constant: int

    def holds(self, values: list[int | None]) -> bool:
        """The atom on a tuple's operand values (None: a NaN), for tests and tools."""
        left = values[self.field]
        other = values[self.other] if self.other is not None else 0
        if left is None or other is None:
            return self.op == "<>"
        return _compare(self.op, left, other + self.constant)


def _compare(op: str, a: float, b: float) -> bool:
    return {
        "=": a == b,
        "<>": a != b,
        "<": a < b,
        "<=": a <= b,
        ">": a > b,
        ">=": a >= b,
    }[op]


#: a state's truth table: bit ``k`` is the condition where atom ``j`` of the state's is bit ``j``
#: of ``k``
_ROWS = 1 << ATOMS_PER_STATE
_ALL = (1 << _ROWS) - 1
#: each of a state's atoms as a truth table (bit ``k`` set where bit ``j`` of ``k`` is)
_COLUMNS = tuple(sum(1 << k for k in range(_ROWS) if k >> j & 1) for j in range(ATOMS_PER_STATE))

#: a condition over atoms: given each atom's column (:data:`_COLUMNS`), the condition's truth
#: table (every row at once: bitwise, not row by row)
Truth = Callable[[dict[int, int]], int]


def _constant(value: bool) -> Truth:
    table = _ALL if value else 0
    return lambda v: table


class Refused(Exception):
    pass


class Atoms:
    """Turns predicates into truth functions over deduplicated atoms."""

    def __init__(self, operands: tuple[str, ...]):
        self.index = {name: i for i, name in enumerate(operands)}
        self.atoms: dict[Atom, int] = {}

    def atom(self, a: Atom) -> tuple[Truth, set[int]]:
        n = self.atoms.setdefault(a, len(self.atoms))
        return (lambda v: v[n]), {n}

    def operand(self, name: str) -> int:
        return self.index[name]

    def linear(self, e: P.PExpr) -> tuple[dict[str, int], int]:
        """``e`` as field coefficients and a constant."""
        match e:
            case P.FieldRef(name):
                return {name: 1}, 0
            case P.Const(value, "int" | "enum"):
                return {}, int(value)
            case P.Arith("neg", operand):
                terms, c = self.linear(operand)
                return {k: -v for k, v in terms.items()}, -c
            case P.Arith(op, left, right) if op in ("+", "-") and right is not None:
                lt, lc = self.linear(left)
                rt, rc = self.linear(right)
                sign = 1 if op == "+" else -1
                terms = dict(lt)
                for k, v in rt.items():
                    terms[k] = terms.get(k, 0) + sign * v
                return terms, lc + sign * rc
            case P.Arith("*", left, P.Const(value)):
                terms, c = self.linear(left)
                return {k: v * int(value) for k, v in terms.items()}, c * int(value)
        raise Refused(f"{P.render(e)} is not a field, a constant or their sum")

    def compare(self, op: str, left: P.PExpr, right: P.PExpr) -> tuple[Truth, set[int]]:
        lt, lc = self.linear(left)
        rt, rc = self.linear(right)
        terms = dict(lt)
        for k, v in rt.items():
            terms[k] = terms.get(k, 0) - v
        terms = {k: v for k, v in terms.items() if v}
        c = lc - rc  # sum(terms) + c OP 0
        plus = [k for k, v in terms.items() if v == 1]
        minus = [k for k, v in terms.items() if v == -1]
        if not terms:
            return _constant(_compare(op, c, 0)), set()
        if len(terms) == 1 and plus:  # f + c OP 0: f OP -c
            return self.atom(Atom(self.operand(plus[0]), op, None, -c))
        if len(terms) == 1 and minus:  # -f + c OP 0: f OP' c
            return self.atom(Atom(self.operand(minus[0]), FLIP[op], None, c))
        if len(terms) == 2 and len(plus) == 1 and len(minus) == 1:  # f - g + c OP 0
            return self.atom(Atom(self.operand(plus[0]), op, self.operand(minus[0]), -c))
        raise Refused("an atom compares a field with a constant or with another field ± a constant")

    def truth(self, e: P.PExpr) -> tuple[Truth, set[int]]:
        match e:
            case P.Const(value, "bool"):
                return _constant(bool(value)), set()
            case P.FieldRef(name, BoolType()):
                return self.atom(Atom(self.operand(name), "<>", None, 0))
            case P.Not(operand):
                f, used = self.truth(operand)
                return (lambda v: _ALL & ~f(v)), used
            case P.And(items) | P.Or(items):
                parts = [self.truth(i) for i in items]
                fs = [f for f, _ in parts]
                used = set().union(*(u for _, u in parts))
                if isinstance(e, P.And):
                    return (
                        lambda v: functools.reduce(operator.and_, (f(v) for f in fs), _ALL)
                    ), used
                return (lambda v: functools.reduce(operator.or_, (f(v) for f in fs), 0)), used
            case P.Cmp(op, left, right, "bool"):
                (lf, lu), (rf, ru) = self.truth(left), self.truth(right)
                if op == "=":
                    return (lambda v: _ALL & ~(lf(v) ^ rf(v))), lu | ru
                return (lambda v: lf(v) ^ rf(v)), lu | ru
            case P.Cmp(op, left, right, "int" | "enum"):
                return self.compare(op, left, right)
            case P.Cmp(op, left, right, "float"):
                return self.float_compare(op, left, right)
            case P.Cmp(op, left, right, "ipv4"):
                return self.ipv4_compare(op, left, right)
        raise Refused(f"{P.render(e)} is not a condition the programmable engine holds")

    def float_compare(self, op: str, left: P.PExpr, right: P.PExpr) -> tuple[Truth, set[int]]:
        """FLOAT32: fields and constants compare as their order keys; a NaN constant makes
        the comparison constant."""
        if isinstance(left, P.Const) and not isinstance(right, P.Const):
            left, right, op = right, left, FLIP[op]
        if isinstance(left, P.Const) and isinstance(right, P.Const):
            # (NaN: only <> holds)
            return _constant(_compare(op, float(left.value), float(right.value))), set()
        if not isinstance(left, P.FieldRef):
            raise Refused(f"{P.render(left)} is not a FLOAT32 field")
        if isinstance(right, P.Const):
            key = float32_key(float(right.value))
            if key is None:  # NaN: only <> holds
                return _constant(op == "<>"), set()
            return self.atom(Atom(self.operand(left.name), op, None, key))
        if isinstance(right, P.FieldRef):
            return self.atom(Atom(self.operand(left.name), op, self.operand(right.name), 0))
        raise Refused(f"{P.render(right)} is not a FLOAT32 field or constant")

    def ipv4_compare(self, op: str, left: P.PExpr, right: P.PExpr) -> tuple[Truth, set[int]]:
        """IPV4: ``=``/``<>`` with an address or another field; with a network ``a.b.c.d/n``,
        whether the address lies in its range (two atoms, or none for ``/0``)."""
        if isinstance(left, P.Const):
            left, right = right, left
        if not isinstance(left, P.FieldRef):
            raise Refused(f"{P.render(left)} is not an IPV4 field")
        f = self.operand(left.name)
        if isinstance(right, P.FieldRef):
            return self.atom(Atom(f, op, self.operand(right.name), 0))
        if not isinstance(right, P.Const):
            raise Refused(f"{P.render(right)} is not an IPV4 field or constant")
        if right.prefix == 32:
            return self.atom(Atom(f, op, None, int(right.value)))
        span = (1 << (32 - right.prefix)) - 1
        lo = int(right.value) & ~span & 0xFFFF_FFFF
        (above, a), (below, b) = (
            self.atom(Atom(f, ">=", None, lo)),
            self.atom(Atom(f, "<=", None, lo | span)),
        )
        flip = 0 if op == "=" else _ALL
        return (lambda v: (above(v) & below(v)) ^ flip), a | b


def truth_table(f: Truth, atoms: tuple[int, ...]) -> int:
    """The state's table of condition ``f`` over ``atoms`` (at most :data:`ATOMS_PER_STATE`):
    bit ``k`` is ``f`` where ``atoms[j]`` is bit ``j`` of ``k``."""
    return f({a: _COLUMNS[j] for j, a in enumerate(atoms)})
