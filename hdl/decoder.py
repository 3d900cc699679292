"""The predicate decoder: one bit per distinct predicate of the compiled queries.

Section 5 and appendix C of Woods, Teubner and Alonso (VLDB 2010): the predicates are evaluated
once, outside the NFA, by a block of combinational logic shared by every state and every query
that uses them; each NFA state then looks at a single wire.
"""

from __future__ import annotations

from functools import reduce

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from nfacep.errors import NfacepError
from nfacep.lang import predicates as P
from nfacep.lang.types import BoolType, EnumType, Float32Type, IntType, Ipv4Type, UIntType
from nfacep.lang.values import FLOAT32_INF, FLOAT32_SIGN, float32_key
from nfacep.nfa import Nfa

from .layout import history_layout, params_layout, tuple_layout

__all__ = [
    "DecoderError",
    "PredicateDecoder",
    "float32_key",
    "prev_early",
    "prev_predicates",
    "reads_prev",
]

#: An integer comparison that reads PREV and is wider than this many bits (its operands
#: extended to a common signed width) is split: its high bits can be compared a stage before
#: the rest (:func:`prev_early`), the low ``SPLIT_LOW`` bits and the combination after, so
#: that no stage holds the whole carry chain.
SPLIT_LOW = 16


class DecoderError(NfacepError):
    """A predicate the decoder cannot build in hardware (raised at elaboration). The checker
    refuses every condition the decoder cannot build, so this is nfacep's own fault: the
    command line says so (exit 2) rather than show a traceback."""

    def render(self) -> str:
        return f"{self} (the query passed nfacep's checks: this is a bug of nfacep's, report it)"


_SIGN, _INF = FLOAT32_SIGN, FLOAT32_INF


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
    history : :py:`In(hdl.layout.history_layout(nfa.program.schema, nfa.history))`
        Only with ``history=True`` and queries that read PREV: the stream's last values (the
        engine without partitions keeps them in front of the decoder). Without it, the bits
        of the predicates that read PREV are 0: the partition store evaluates them once it
        has read the partition's entry (:func:`prev_predicates`), in SQL's three-valued
        logic.

    Raises
    ------
    DecoderError
        At elaboration, naming the predicate, if a predicate cannot be built in hardware.
    """

    def __init__(self, nfa: Nfa, *, history: bool = False):
        self._nfa = nfa
        self._layout = tuple_layout(nfa.program.schema)
        members = {"tuple": In(self._layout), "predicates": Out(len(nfa.predicates))}
        params = params_layout(nfa.program.parameters)
        if params is not None:
            members["params"] = In(params)
        kept = history_layout(nfa.program.schema, nfa.history)
        self._history = history and kept is not None
        if self._history:
            members["history"] = In(kept)
        super().__init__(members)

    @property
    def nfa(self) -> Nfa:
        return self._nfa

    @property
    def layout(self):
        """The tuple layout (:func:`nfacep.hdl.layout.tuple_layout` of the NFA's schema)."""
        return self._layout

    def elaborate(self, platform):
        history = getattr(self, "history", None)
        which = [p for p in self._nfa.predicates if history is not None or not reads_prev(p.expr)]
        params = getattr(self, "params", None)
        statements, bits = _build(self._nfa, which, self.tuple, params, history)
        m = Module()  # (after the build, which may raise: never a module left unused)
        m.d.comb += [*statements, self.predicates.eq(bits)]
        return m


def reads_prev(e: P.PExpr) -> bool:
    """Whether a predicate reads PREV (so it needs its partition's history)."""
    return any(isinstance(node, P.Prev) for node in P.nodes(e))


def prev_predicates(m: Module, nfa: Nfa, fields, params, history, early=None) -> Value:
    """The bits of the predicates that read PREV (the others 0), built in ``m`` from the
    tuple's ``fields`` (a view with at least the fields they read), the runtime ``params``
    (None without) and the partition's ``history`` (:func:`~.layout.history_layout`): what the
    partition store evaluates once it has read the partition's entry. Given ``early``, what
    :func:`prev_early` made of the same tuple and history (a stage before), the comparisons
    it split take their high bits' order from it and compare only their low bits here."""
    which = [p for p in nfa.predicates if reads_prev(p.expr)]
    split = None if early is None else _Split(Value.cast(early))
    statements, bits = _build(nfa, which, fields, params, history, prefix="prev_", split=split)
    m.d.comb += statements
    return bits


def prev_early(m: Module | None, nfa: Nfa, fields, params, history) -> Value:
    """What a store can work out of the predicates that read PREV before the rest
    (:func:`prev_predicates` with ``early``): for each integer comparison wider than
    :data:`SPLIT_LOW` bits that reads PREV, in the order they are built, whether its operands'
    high bits are less and whether they are equal (two bits). Empty (0 bits) without such a
    comparison. ``m`` None: only their number matters (nothing is built)."""
    which = [p for p in nfa.predicates if reads_prev(p.expr)]
    split = _Split(None)
    statements, _ = _build(nfa, which, fields, params, history, prefix="early_", split=split)
    if m is not None:
        m.d.comb += statements
    return Cat(*split.bits)


def _build(
    nfa: Nfa, which, view, params, history, prefix: str = "", split=None
) -> tuple[list, Value]:
    """The predicates ``which`` of ``nfa``: the statements that drive them, and a vector of
    all its predicates, one bit each (the others 0)."""
    builder = _Builder(view, params, history)
    builder.split = split
    bits: dict[int, Value] = {}
    for p in which:
        bit = Signal(name=f"{prefix}p{p.index}")
        try:
            value = builder.predicate(p.expr)
        except _Unsupported as err:
            raise DecoderError(
                f"cannot build decoder bit p{p.index} for predicate '{p.text}': {err}"
            ) from None
        builder.statements.append(bit.eq(int(value) if isinstance(value, bool) else value))
        bits[p.index] = bit
    return builder.statements, Cat(*(bits.get(i, Const(0, 1)) for i in range(len(nfa.predicates))))


class _Unsupported(Exception):
    pass


class _Split:
    """The split comparisons of :func:`prev_early` (``early`` None: their high bits'
    relations collected in ``bits``) and :func:`prev_predicates` (``early``: those bits, taken
    in the same order, combined with the low bits' relations)."""

    def __init__(self, early: Value | None):
        self.early, self.bits, self.at = early, [], 0

    def compare(self, op: str, a, b) -> Bit | None:
        """``a op b`` split in two, or None when it is not wider than :data:`SPLIT_LOW`."""
        if isinstance(a, int) and isinstance(b, int):
            return None
        va, vb = Value.cast(a), Value.cast(b)
        width = max(len(va), len(vb)) + 1  # both exact in a common signed width
        if width <= SPLIT_LOW:
            return None
        ea, eb = _extended(va, width), _extended(vb, width)
        if self.early is None:
            hi_a, hi_b = ea[SPLIT_LOW:].as_signed(), eb[SPLIT_LOW:].as_signed()
            self.bits += [hi_a < hi_b, hi_a == hi_b]
            return Const(0, 1)  # stands in for the comparison, which is not made here
        hi_lt, hi_eq = self.early[self.at], self.early[self.at + 1]
        self.at += 2
        lo_a, lo_b = ea[:SPLIT_LOW], eb[:SPLIT_LOW]
        lt = hi_lt | (hi_eq & (lo_a < lo_b))
        eq = hi_eq & (lo_a == lo_b)
        return {"<": lt, "<=": lt | eq, ">": ~(lt | eq), ">=": ~lt, "=": eq, "<>": ~eq}[op]


def _extended(v: Value, width: int) -> Value:
    """``v`` sign- or zero-extended to a signed value of ``width`` bits."""
    fill = v[-1] if v.shape().signed else Const(0, 1)
    return Cat(v, fill.replicate(width - len(v))).as_signed()


Bit = Value | bool


def _not(b: Bit) -> Bit:
    return (not b) if isinstance(b, bool) else ~b


def _int(b: Bit) -> Value | int:
    return int(b) if isinstance(b, bool) else b


class _Builder:
    """Translates predicate expressions to Amaranth values; Python ints and bools stand for
    constants, so constant subexpressions fold as they are built."""

    def __init__(self, view, params=None, history=None):
        self.view = view
        self.params = params
        self.history = history
        self.split: _Split | None = None  # PREV's comparisons split in two (:class:`_Split`)
        self.statements = []
        #: the label of each FLOAT32 operand -> (order key, is NaN)
        self.floats: dict[str, tuple[Signal, Signal]] = {}

    # --- PREV and three-valued logic ----------------------------------------------------------

    def _prev(self, e: P.Prev) -> Value:
        if self.history is None:
            raise _Unsupported(f"{P.render(e)} needs the partition's history")
        return self.history.values[e.name][e.k - 1]

    def predicate(self, e: P.PExpr) -> Bit:
        """Whether a tuple satisfies ``e``: true, in SQL's three-valued logic when it reads
        PREV (as :func:`nfacep.lang.evaluate.evaluate`)."""
        return self.kleene(e)[0] if reads_prev(e) else self.bool(e)

    def kleene(self, e: P.PExpr) -> tuple[Bit, Bit]:
        """(``e`` is true, ``e`` is false); neither: unknown (a comparison with a NULL)."""
        ks = {node.k for node in P.nodes(e) if isinstance(node, P.Prev)}
        match e:
            case _ if not ks:
                value = self.bool(e)
                return value, _not(value)
            case P.Not(operand):
                true, false = self.kleene(operand)
                return false, true
            case P.And(items) | P.Or(items):
                parts = [self.kleene(i) for i in items]
                trues, falses = [t for t, _ in parts], [f for _, f in parts]
                and_ = isinstance(e, P.And)
                return self._reduce(trues, and_=and_), self._reduce(falses, and_=not and_)
            case P.Cmp(op, left, right, "bool"):
                lt, lf = self.kleene(left)
                rt, rf = self.kleene(right)
                known = self._reduce(
                    [self._reduce([lt, lf], and_=False), self._reduce([rt, rf], and_=False)],
                    and_=True,
                )
                value = self._compare(op, _int(lt), _int(rt))
                return self._reduce([value, known], and_=True), self._reduce(
                    [_not(value), known], and_=True
                )
        # a comparison or a BOOL PREV: known where every PREV it reads is
        assert self.history is not None, "a PREV reads the history"
        known = self._reduce([self.history.count >= k for k in sorted(ks)], and_=True)
        value = self._prev(e) if isinstance(e, P.Prev) else self.bool(e)
        return self._reduce([value, known], and_=True), self._reduce(
            [_not(value), known], and_=True
        )

    # --- Boolean ----------------------------------------------------------------------------

    def bool(self, e: P.PExpr) -> Bit:
        match e:
            case P.Const(value, "bool"):
                return bool(value)
            case P.FieldRef(name, BoolType()):
                return self.view[name]
            case P.Prev(_, BoolType()):
                return self._prev(e)
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
            a, b = self.int(left), self.int(right)
            if self.split is not None and (reads_prev(left) or reads_prev(right)):
                split = self.split.compare(op, a, b)
                if split is not None:
                    return split
            return self._compare(op, a, b)
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
            case P.Prev(_, UIntType() | IntType()):
                return self._prev(e)
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
            case P.Prev(_, Ipv4Type()):
                return self._prev(e)
            case P.Const(value, "ipv4"):
                return int(value)
        raise _Unsupported(f"not an IPV4 value: {P.render(e)}")

    def _enum(self, e: P.PExpr) -> Value | int:
        match e:
            case P.FieldRef(name, EnumType()):
                return self.view[name]
            case P.Param(name, EnumType()):
                return self.params[name]
            case P.Prev(_, EnumType()):
                return self._prev(e)
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
            case (
                P.FieldRef(name, Float32Type())
                | P.Param(name, Float32Type())
                | P.Prev(name, Float32Type())
            ):
                if isinstance(e, P.Param):
                    label, bits = f"param_{name}", self.params[name]
                elif isinstance(e, P.Prev):
                    label, bits = f"prev{e.k}_{name}", self._prev(e)
                else:
                    label, bits = name, self.view[name]
                if label not in self.floats:
                    sign, mag = bits[31], bits[:31]
                    key = Signal(unsigned(32), name=f"{label}_key")
                    nan = Signal(name=f"{label}_nan")
                    self.statements += [
                        # two's-complement-like order: negatives inverted, -0 onto +0
                        key.eq(Mux(sign & (mag != 0), ~bits, bits | _SIGN)),
                        nan.eq(mag > _INF),
                    ]
                    self.floats[label] = key, nan
                return self.floats[label]
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
