"""The predicate decoder: one bit per distinct predicate of the compiled queries.

Section 5 and appendix C of Woods, Teubner and Alonso (VLDB 2010): the predicates are evaluated
once, outside the NFA, by a block of combinational logic shared by every state and every query
that uses them; each NFA state then looks at a single wire.
"""

from __future__ import annotations

import struct
from functools import reduce

from amaranth.hdl import Module, Mux, Signal, Value, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from nfacep.lang import predicates as P
from nfacep.lang.types import BoolType, EnumType, Float32Type, IntType, Ipv4Type, UIntType
from nfacep.nfa import Nfa

from .layout import params_layout, tuple_layout

__all__ = ["DecoderError", "PredicateDecoder", "float32_key"]


class DecoderError(Exception):
    """A predicate the decoder cannot build in hardware (raised at elaboration)."""


_SIGN = 1 << 31
_MAG = _SIGN - 1
_INF = 0x7F80_0000


def float32_key(value: float) -> int | None:
    """The unsigned 32-bit order key of a float32 as the decoder computes it, or None for NaN.

    Non-NaN floats compare (``=``, ``<``, …) exactly as their keys do: positive floats map to
    ``bits | 2**31``, negative ones to ``~bits``, and -0 to the key of +0.
    """
    (bits,) = struct.unpack("<I", struct.pack("<f", value))
    if bits & _MAG > _INF:
        return None
    if bits & _SIGN and bits & _MAG:
        return ~bits & 0xFFFF_FFFF
    return (bits & _MAG) | _SIGN


_OPS = {
    "=": lambda a, b: a == b,
    "<>": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


class PredicateDecoder(wiring.Component):
    """Predicate decoder: the predicate vector of a tuple.

    Combinational: ``predicates`` is a function of ``tuple`` alone, with zero latency and no
    clock, reset or state; it decodes one tuple per cycle at whatever clock rate its logic depth
    allows.

    Bit ``i`` of ``predicates`` is predicate ``nfa.predicates[i]`` (``p{i}`` in ``nfacep
    check``), evaluated on ``tuple`` exactly as :func:`nfacep.lang.evaluate.evaluate` does:

    * integer arithmetic (``+``, ``-``, ``*`` by a constant) and comparisons are exact,
      whatever the widths and signedness of the fields (no overflow, UINT and INT compared as
      mathematical integers);
    * ENUM fields compare as label indices, BOOL fields as single bits; IPV4 fields as 32-bit
      values, or against a network ``a.b.c.d/n`` on their n leading bits (a masked compare);
    * FLOAT32 comparisons follow IEEE 754 as numpy's float32 does: -0 equals +0, a NaN
      satisfies no ordered comparison and not ``=``, but satisfies ``<>``.

    Constants (literals, arithmetic on literals, the order keys of FLOAT32 literals) are folded
    at elaboration. A runtime parameter (``:name``) is compared as a field is, from ``params``
    (the registers the engine holds the values in force in). Each bit is driven through a
    signal named ``p{i}``.

    Parameters
    ----------
    nfa : :class:`nfacep.nfa.Nfa`
        The compiled queries; the tuple layout is that of ``nfa.program.schema``.

    Members
    -------
    tuple : :py:`In(hdl.layout.tuple_layout(nfa.program.schema))`
        The tuple, in the wire format of :mod:`nfacep.wire`.
    predicates : :py:`Out(len(nfa.predicates))`
        The predicate vector: bit ``i`` is 1 when the tuple satisfies predicate ``i``.
    params : :py:`In(hdl.layout.params_layout(nfa.program.parameters))`
        Only when the queries have runtime parameters: their values, as a tuple of them.

    Raises
    ------
    DecoderError
        At elaboration, naming the predicate, if a predicate cannot be built in hardware.
    """

    def __init__(self, nfa: Nfa):
        self._nfa = nfa
        self._layout = tuple_layout(nfa.program.schema)
        members = {"tuple": In(self._layout), "predicates": Out(len(nfa.predicates))}
        params = params_layout(nfa.program.parameters)
        if params is not None:
            members["params"] = In(params)
        super().__init__(members)

    @property
    def nfa(self) -> Nfa:
        return self._nfa

    @property
    def layout(self):
        """The tuple layout (:func:`nfacep.hdl.layout.tuple_layout` of the NFA's schema)."""
        return self._layout

    def elaborate(self, platform):
        builder = _Builder(self.tuple, getattr(self, "params", None))
        for p in self._nfa.predicates:
            bit = Signal(name=f"p{p.index}")
            try:
                value = builder.bool(p.expr)
            except _Unsupported as err:
                raise DecoderError(
                    f"cannot build decoder bit p{p.index} for predicate '{p.text}': {err}"
                ) from None
            builder.statements += [
                bit.eq(int(value) if isinstance(value, bool) else value),
                self.predicates[p.index].eq(bit),
            ]
        m = Module()
        m.d.comb += builder.statements
        return m


class _Unsupported(Exception):
    pass


Bit = Value | bool


class _Builder:
    """Translates predicate expressions to Amaranth values; Python ints and bools stand for
    constants, so constant subexpressions fold as they are built."""

    def __init__(self, view, params=None):
        self.view = view
        self.params = params
        self.statements = []
        #: (is a parameter, name) -> (order key, is NaN) of each FLOAT32 operand
        self.floats: dict[tuple[bool, str], tuple[Signal, Signal]] = {}

    # --- Boolean ----------------------------------------------------------------------------

    def bool(self, e: P.PExpr) -> Bit:
        match e:
            case P.Const(value, "bool"):
                return bool(value)
            case P.FieldRef(name, BoolType()):
                return self.view[name]
            case P.Param(name, BoolType()):
                return self.params[name]
            case P.Not(operand):
                inner = self.bool(operand)
                return (not inner) if isinstance(inner, bool) else ~inner
            case P.And(items):
                return self._reduce([self.bool(i) for i in items], and_=True)
            case P.Or(items):
                return self._reduce([self.bool(i) for i in items], and_=False)
            case P.Cmp(op, left, right, kind):
                return self._comparison(op, left, right, kind)
        raise _Unsupported(f"not a Boolean expression: {P.render(e)}")

    def _comparison(self, op: str, left: P.PExpr, right: P.PExpr, kind: str) -> Bit:
        """A comparison in one of the four domains the checker types them in."""
        if op not in _OPS:
            raise _Unsupported(f"unknown comparison operator '{op}'")
        if kind == "int":
            return self._compare(op, self.int(left), self.int(right))
        if kind == "float":
            return self._float_compare(op, left, right)
        if kind == "enum":
            if op not in ("=", "<>"):
                raise _Unsupported("ENUM values compare only with = and <>")
            return self._compare(op, self._enum(left), self._enum(right))
        if kind == "bool":
            return self._bool_compare(op, left, right)
        if kind == "ipv4":
            return self._ipv4_compare(op, left, right)
        raise _Unsupported(f"unknown comparison domain '{kind}'")

    def _bool_compare(self, op: str, left: P.PExpr, right: P.PExpr) -> Bit:
        if op not in ("=", "<>"):
            raise _Unsupported("BOOL values compare only with = and <>")
        a, b = self.bool(left), self.bool(right)
        if isinstance(a, bool) and isinstance(b, bool):
            return _OPS[op](a, b)
        return self._compare(
            op,
            int(a) if isinstance(a, bool) else a,
            int(b) if isinstance(b, bool) else b,
        )

    @staticmethod
    def _reduce(items: list[Bit], *, and_: bool) -> Bit:
        absorbing = not and_  # False absorbs an AND, True absorbs an OR
        if any(i is absorbing for i in items):
            return absorbing
        rest = [i for i in items if not isinstance(i, bool)]
        if not rest:
            return and_
        return reduce((lambda a, b: a & b) if and_ else (lambda a, b: a | b), rest)

    @staticmethod
    def _compare(op: str, a, b) -> Bit:
        result = _OPS[op](a, b)
        return bool(result) if isinstance(result, bool) else result

    # --- integers ---------------------------------------------------------------------------

    def int(self, e: P.PExpr) -> Value | int:
        match e:
            case P.FieldRef(name, UIntType() | IntType()):
                return self.view[name]
            case P.Param(name, UIntType() | IntType()):
                return self.params[name]
            case P.Const(value, "int"):
                return int(value)
            case P.Arith("neg", operand):
                return -self.int(operand)
            case P.Arith("+", left, right):
                return self.int(left) + self.int(right)
            case P.Arith("-", left, right):
                return self.int(left) - self.int(right)
            case P.Arith("*", left, right):
                # Amaranth sizes a product to hold every value of its operands (the sum of
                # their widths, signed if either is): exact, as every operator here
                return self.int(left) * self.int(right)
        raise _Unsupported(f"not an integer expression: {P.render(e)}")

    def _ipv4_compare(self, op: str, left: P.PExpr, right: P.PExpr) -> Bit:
        """``=``/``<>`` of IPv4 values; against a network constant, a masked compare: only
        the address's leading ``prefix`` bits are compared (none: always in the network)."""
        if op not in ("=", "<>"):
            raise _Unsupported("IPV4 values compare only with = and <>")
        a = self._ipv4(left)
        if isinstance(right, P.Const) and right.prefix < 32:
            if right.prefix == 0:
                return op == "="
            assert isinstance(a, Value), "the checker puts an IPV4 field left of a constant"
            shift = 32 - right.prefix
            return self._compare(op, a[shift:], int(right.value) >> shift)
        return self._compare(op, a, self._ipv4(right))

    def _ipv4(self, e: P.PExpr) -> Value | int:
        match e:
            case P.FieldRef(name, Ipv4Type()):
                return self.view[name]
            case P.Param(name, Ipv4Type()):
                return self.params[name]
            case P.Const(value, "ipv4"):
                return int(value)
        raise _Unsupported(f"not an IPV4 value: {P.render(e)}")

    def _enum(self, e: P.PExpr) -> Value | int:
        match e:
            case P.FieldRef(name, EnumType()):
                return self.view[name]
            case P.Param(name, EnumType()):
                return self.params[name]
            case P.Const(value, "enum"):
                return int(value)
        raise _Unsupported(f"not an ENUM value: {P.render(e)}")

    # --- FLOAT32 ----------------------------------------------------------------------------

    def _float(self, e: P.PExpr) -> tuple[Value | int | None, Value | bool]:
        """(order key, is NaN) of a FLOAT32 operand; the key is None for a NaN constant."""
        match e:
            case P.Const(value, "float" | "int"):
                key = float32_key(float(value))
                return key, key is None
            case P.FieldRef(name, Float32Type()) | P.Param(name, Float32Type()):
                param = isinstance(e, P.Param)
                label = f"param_{name}" if param else name
                if (param, name) not in self.floats:
                    bits = self.params[name] if param else self.view[name]
                    sign, mag = bits[31], bits[:31]
                    key = Signal(unsigned(32), name=f"{label}_key")
                    nan = Signal(name=f"{label}_nan")
                    self.statements += [
                        # two's-complement-like order: negatives inverted, -0 onto +0
                        key.eq(Mux(sign & (mag != 0), ~bits, bits | _SIGN)),
                        nan.eq(mag > _INF),
                    ]
                    self.floats[param, name] = key, nan
                return self.floats[param, name]
        raise _Unsupported(f"not a FLOAT32 value: {P.render(e)}")

    def _float_compare(self, op: str, left: P.PExpr, right: P.PExpr) -> Bit:
        lkey, lnan = self._float(left)
        rkey, rnan = self._float(right)
        if lkey is None or rkey is None:  # a NaN constant
            return op == "<>"
        ordered = self._compare(op, lkey, rkey)
        nans = self._reduce([lnan, rnan], and_=False)
        if op == "<>":
            return self._reduce([ordered, nans], and_=False)
        not_nans = (not nans) if isinstance(nans, bool) else ~nans
        return self._reduce([ordered, not_nans], and_=True)
