"""Predicates as the programmable engine's atoms and truth tables (docs/formats.md,
"Configuration images"): :class:`Atoms` turns a predicate into a truth function over
deduplicated atoms (:class:`Atom`), :func:`truth_table` into a state's table; a predicate not of
the atoms' form raises :class:`Refused`. :mod:`nfacep.image` makes images of them. No numpy,
no amaranth here."""

from __future__ import annotations

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


Truth = Callable[[dict[int, bool]], bool]


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
            value = _compare(op, c, 0)
            return (lambda v: value), set()
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
                b = bool(value)
                return (lambda v: b), set()
            case P.FieldRef(name, BoolType()):
                return self.atom(Atom(self.operand(name), "<>", None, 0))
            case P.Not(operand):
                f, used = self.truth(operand)
                return (lambda v: not f(v)), used
            case P.And(items) | P.Or(items):
                parts = [self.truth(i) for i in items]
                fs = [f for f, _ in parts]
                used = set().union(*(u for _, u in parts))
                if isinstance(e, P.And):
                    return (lambda v: all(f(v) for f in fs)), used
                return (lambda v: any(f(v) for f in fs)), used
            case P.Cmp(op, left, right, "bool"):
                (lf, lu), (rf, ru) = self.truth(left), self.truth(right)
                if op == "=":
                    return (lambda v: lf(v) == rf(v)), lu | ru
                return (lambda v: lf(v) != rf(v)), lu | ru
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
            value = _compare(op, float(left.value), float(right.value))  # NaN: only <>
            return (lambda v: value), set()
        if not isinstance(left, P.FieldRef):
            raise Refused(f"{P.render(left)} is not a FLOAT32 field")
        if isinstance(right, P.Const):
            key = float32_key(float(right.value))
            if key is None:  # NaN: only <> holds
                same = op == "<>"
                return (lambda v: same), set()
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
        inside = op == "="
        return (lambda v: (above(v) and below(v)) == inside), a | b


def truth_table(f: Truth, atoms: tuple[int, ...]) -> int:
    table = 0
    for k in range(1 << ATOMS_PER_STATE):
        values = {a: bool(k >> j & 1) for j, a in enumerate(atoms)}
        if f(values):
            table |= 1 << k
    return table
