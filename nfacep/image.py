"""Configuration images of the programmable engine (docs/formats.md, "Configuration images").

The programmable engine (:class:`nfacep.hdl.programmable.ProgrammableEngine`) is built for a
stream declaration (its fields and partition key) and capacities (:class:`Capacity`): ``S``
state slots, ``A`` atomic conditions, ``Q`` query slots. A query file becomes a configuration
of it (:func:`image`):

* an **atom** compares a field with a constant, or with another field plus a constant:
  ``field OP constant`` or ``field OP other + constant`` (``OP`` one of ``= <> < <= > >=``),
  exactly as the reference compares them: integers and TIMESTAMPs as mathematical integers
  (no overflow), ENUMs as label indices, BOOLs as 0/1, IPV4 addresses as 32-bit numbers (a
  network is a range: two atoms), FLOAT32s as their order keys (a NaN satisfies only
  ``<>``);
* each **state** reads at most :data:`ATOMS_PER_STATE` atoms and holds its condition as a
  truth table over them (bit ``sum(atom_j << j)``), an activation mask (the states whose
  being set activates it), start and accept bits, and the query slot it belongs to;
* each **query slot** has its after-match mode (SKIP PAST LAST ROW clears its states).

What does not fit is refused before anything is built or sent, every reason at once
(:class:`ImageError`): each capacity exceeded and each construct the programmable engine has
no logic for (WITHIN, PREV, start positions, runtime parameters switched at a tuple, a
predicate not of the atoms' form). Runtime parameters'
values are constants in the image.

:func:`config_fields` is the one definition of the configuration's bit layout; the gateware
builds its registers from it and :meth:`Image.body` packs it. No numpy, no amaranth here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import UsageError
from .lang import predicates as P
from .lang.types import BoolType, Float32Type
from .lang.values import float32_key
from .nfa import Nfa
from .params import EngineParams
from .schema import Schema

if TYPE_CHECKING:
    from .settings import ParamValues

__all__ = [
    "ATOMS_PER_STATE",
    "AT_BYTES",
    "MAGIC",
    "OPS",
    "VERSION",
    "Atom",
    "Capacity",
    "EngineShape",
    "Image",
    "ImageError",
    "StateConfig",
    "config_fields",
    "image",
    "image_file",
    "load",
    "load_body",
    "load_size",
    "port_words",
]

#: the atoms one state's condition may read: its truth table has ``2**ATOMS_PER_STATE`` bits
ATOMS_PER_STATE = 4
#: the comparison operators, by their code in an atom's ``op`` field
OPS = ("=", "<>", "<", "<=", ">", ">=")
_FLIP = {"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
MAGIC = b"NFCI"
VERSION = 1
_HEADER = struct.Struct("<4sHHHHBB8sI")  # magic, version, header size, S, A, Q, K, engine, body
_FINGERPRINT = 8  # bytes of SHA-256 that end the image


class ImageError(UsageError):
    """A query file that does not fit a programmable engine: every reason, one per line."""

    def __init__(self, reasons: list[str]):
        self.reasons = list(reasons)
        super().__init__(
            "the query file does not fit the programmable engine:\n"
            + "\n".join(f"  {r}" for r in reasons)
        )


@dataclass(frozen=True)
class Capacity:
    """The programmable engine's capacities: state slots, atoms, query slots (their defaults
    and ranges are :class:`~nfacep.params.EngineParams`' ``states``, ``atoms``, ``queries``,
    checked when made)."""

    states: int
    atoms: int
    queries: int

    def __post_init__(self) -> None:
        EngineParams(states=self.states, atoms=self.atoms, queries=self.queries)

    @classmethod
    def of(cls, params: EngineParams) -> Capacity:
        return cls(params.states, params.atoms, params.queries)


def _range(ty) -> tuple[int, int]:
    """The values an atom sees of a field: a FLOAT32's order key (:func:`float32_key`)."""
    if isinstance(ty, BoolType):
        return 0, 1
    if isinstance(ty, Float32Type):
        return 0, (1 << 32) - 1
    return ty.range


@dataclass(frozen=True)
class EngineShape:
    """What a programmable engine is built for: the stream's fields, its partition key and
    the capacities. Its :attr:`fingerprint` names it in every image made for it."""

    schema: Schema
    partition_fields: tuple[str, ...]
    capacity: Capacity = dataclasses.field(default_factory=lambda: Capacity.of(EngineParams()))

    @property
    def operands(self) -> tuple[str, ...]:
        """The fields an atom may read, by index: every field, in declaration order."""
        return tuple(f.name for f in self.schema.fields)

    @property
    def floats(self) -> tuple[int, ...]:
        """The operands that are FLOAT32: an atom compares their order keys, and is false
        on a NaN unless it is ``<>``."""
        return tuple(i for i, f in enumerate(self.schema.fields) if isinstance(f.type, Float32Type))

    def operand_range(self) -> tuple[int, int]:
        """The least and greatest value of any operand field (0 lies between)."""
        ranges = [_range(self.schema.field(n).type) for n in self.operands] or [(0, 0)]
        return min(lo for lo, _ in ranges), max(hi for _, hi in ranges)

    def constant_range(self) -> tuple[int, int]:
        """The constants an atom holds: any difference of two operand values, and one more
        either side (a constant beyond is clamped to these, which keeps every comparison)."""
        lo, hi = self.operand_range()
        return lo - hi - 1, hi - lo + 1

    @property
    def fingerprint(self) -> bytes:
        c = self.capacity
        text = ";".join(f"{f.name}:{f.type}" for f in self.schema.fields)
        text += f"|{','.join(self.partition_fields)}|{c.states},{c.atoms},{c.queries}"
        text += f",{ATOMS_PER_STATE}|v{VERSION}"
        return hashlib.sha256(text.encode()).digest()[:8]


def _bits(n: int) -> int:
    """Bits of an index among ``n`` things (at least 1)."""
    return max(1, (n - 1).bit_length())


def _signed_bits(lo: int, hi: int) -> int:
    return max(lo.bit_length() if lo < 0 else 0, hi.bit_length()) + 1


def config_fields(shape: EngineShape) -> list[tuple[str, int]]:
    """The configuration's bit fields, least significant first: ``(name, width)``. Per atom
    ``a``: ``atom{a}.field`` and ``atom{a}.other`` (operand indices), ``atom{a}.uses_other``,
    ``atom{a}.op`` (its index in :data:`OPS`) and ``atom{a}.constant`` (two's complement);
    per state ``i``: ``state{i}.atom{j}`` for ``j < ATOMS_PER_STATE``, ``state{i}.table``,
    ``state{i}.activation`` (bit ``j``: state ``j``), ``state{i}.start``, ``state{i}.accept``,
    ``state{i}.query`` (one-hot; 0: an unused slot); per query ``q``: ``query{q}.skip``."""
    c = shape.capacity
    fbits = _bits(len(shape.operands))
    cbits = _signed_bits(*shape.constant_range())
    fields: list[tuple[str, int]] = []
    for a in range(c.atoms):
        fields += [
            (f"atom{a}.field", fbits),
            (f"atom{a}.other", fbits),
            (f"atom{a}.uses_other", 1),
            (f"atom{a}.op", 3),
            (f"atom{a}.constant", cbits),
        ]
    for i in range(c.states):
        fields += [(f"state{i}.atom{j}", _bits(c.atoms)) for j in range(ATOMS_PER_STATE)]
        fields += [
            (f"state{i}.table", 1 << ATOMS_PER_STATE),
            (f"state{i}.activation", c.states),
            (f"state{i}.start", 1),
            (f"state{i}.accept", 1),
            (f"state{i}.query", c.queries),
        ]
    fields += [(f"query{q}.skip", 1) for q in range(c.queries)]
    return fields


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


@dataclass(frozen=True)
class StateConfig:
    atoms: tuple[int, ...]  #: the atoms its table reads, ``atoms[j]`` at table index bit j
    table: int  #: bit ``k`` is the condition where atom ``atoms[j]`` is bit j of ``k``
    activation: int  #: bit ``j``: set state ``j`` activates this one
    start: bool
    accept: bool
    query: int


@dataclass(frozen=True)
class Image:
    """A query file configured into a programmable engine of :attr:`shape`."""

    shape: EngineShape
    atoms: tuple[Atom, ...]
    states: tuple[StateConfig, ...]
    skip: tuple[bool, ...]  #: per query: AFTER MATCH SKIP PAST LAST ROW

    def values(self) -> dict[str, int]:
        """Every field of :func:`config_fields`, unsigned (unused slots 0)."""
        out: dict[str, int] = {}
        lo, hi = self.shape.constant_range()
        cbits = _signed_bits(lo, hi)
        for a, atom in enumerate(self.atoms):
            constant = min(max(atom.constant, lo), hi)  # clamped: every comparison unchanged
            out[f"atom{a}.field"] = atom.field
            out[f"atom{a}.other"] = atom.other or 0
            out[f"atom{a}.uses_other"] = int(atom.other is not None)
            out[f"atom{a}.op"] = OPS.index(atom.op)
            out[f"atom{a}.constant"] = constant & ((1 << cbits) - 1)
        for i, s in enumerate(self.states):
            for j, a in enumerate(s.atoms):
                out[f"state{i}.atom{j}"] = a
            out[f"state{i}.table"] = s.table
            out[f"state{i}.activation"] = s.activation
            out[f"state{i}.start"] = int(s.start)
            out[f"state{i}.accept"] = int(s.accept)
            out[f"state{i}.query"] = 1 << s.query
        for q, skip in enumerate(self.skip):
            out[f"query{q}.skip"] = int(skip)
        return out

    def word(self) -> int:
        """The configuration as one integer, :func:`config_fields` from bit 0."""
        values = self.values()
        word, offset = 0, 0
        for name, width in config_fields(self.shape):
            value = values.get(name, 0)
            assert 0 <= value < 1 << width, f"{name} = {value} needs more than {width} bits"
            word |= value << offset
            offset += width
        return word

    def body(self) -> bytes:
        """The configuration word, little-endian, in whole bytes: what the engine's
        configuration port takes, byte 0 first."""
        return self.word().to_bytes(body_size(self.shape), "little")

    def to_bytes(self) -> bytes:
        """The image file: header, body, fingerprint (docs/formats.md)."""
        return image_file(self.shape, self.body())

    @property
    def fingerprint(self) -> str:
        """The image's fingerprint (its last 8 bytes) in hex."""
        return self.to_bytes()[-_FINGERPRINT:].hex()

    @classmethod
    def from_body(cls, shape: EngineShape, body: bytes) -> Image:
        """The configuration a body holds (the inverse of :meth:`body`, every slot, the
        unused ones all zero): what a load writes into the engine, for a software engine
        that runs it (:class:`nfacep.links.model.ImageEngine`)."""
        word = int.from_bytes(body, "little")
        values, offset = {}, 0
        for name, width in config_fields(shape):
            values[name] = word >> offset & ((1 << width) - 1)
            offset += width
        c = shape.capacity
        cbits = _signed_bits(*shape.constant_range())
        atoms = []
        for a in range(c.atoms):
            constant = values[f"atom{a}.constant"]
            constant -= (constant >> (cbits - 1)) << cbits  # two's complement
            op = values[f"atom{a}.op"]
            atoms.append(
                Atom(
                    values[f"atom{a}.field"],
                    OPS[op] if op < len(OPS) else "=",
                    values[f"atom{a}.other"] if values[f"atom{a}.uses_other"] else None,
                    constant,
                )
            )
        states = []
        for i in range(c.states):
            query = values[f"state{i}.query"]
            states.append(
                StateConfig(
                    tuple(values[f"state{i}.atom{j}"] for j in range(ATOMS_PER_STATE)),
                    values[f"state{i}.table"],
                    values[f"state{i}.activation"],
                    bool(values[f"state{i}.start"]),
                    bool(values[f"state{i}.accept"]),
                    query.bit_length() - 1,  # one-hot: -1 for an unused slot
                )
            )
        skip = tuple(bool(values[f"query{q}.skip"]) for q in range(c.queries))
        return cls(shape, tuple(atoms), tuple(states), skip)


#: the tuple number of a load: 4 bytes, modulo 2**32
AT_BYTES = 4


def load(img: Image, at: int = 0) -> bytes:
    """What the engine's configuration port takes to put ``img`` in force from tuple ``at``
    on (its tuple count modulo 2**32): ``at`` (4 bytes, little-endian), the engine's
    fingerprint (8 bytes), the image's (8 bytes: the engine reports the one in force), the
    body, then the CRC-32 (zlib's) of all that, little-endian. The engine
    refuses (and counts) a load for another engine, of another length, or whose CRC does not
    match; docs/formats.md, "Configuration images"."""
    return load_body(img.shape, img.body(), at)


def load_body(shape: EngineShape, body: bytes, at: int = 0) -> bytes:
    """:func:`load` of a body made elsewhere (a test's, or one read from an image file)."""
    named = image_file(shape, body)[-_FINGERPRINT:]
    head = (at % (1 << 32)).to_bytes(AT_BYTES, "little") + shape.fingerprint + named + body
    return head + zlib.crc32(head).to_bytes(4, "little")


def load_size(shape: EngineShape) -> int:
    """Bytes of a :func:`load` for engines of ``shape``."""
    return AT_BYTES + len(shape.fingerprint) + _FINGERPRINT + body_size(shape) + 4


def port_words(data: bytes) -> list[int]:
    """The configuration port's payloads for a load: each byte, with ``last`` (bit 8) on the
    final one."""
    return [b | (i == len(data) - 1) << 8 for i, b in enumerate(data)]


def image_file(shape: EngineShape, body: bytes) -> bytes:
    """The image file of ``body`` for engines of ``shape``: header, body, fingerprint."""
    c = shape.capacity
    head = _HEADER.pack(
        MAGIC,
        VERSION,
        _HEADER.size,
        c.states,
        c.atoms,
        c.queries,
        ATOMS_PER_STATE,
        shape.fingerprint,
        len(body),
    )
    return head + body + hashlib.sha256(head + body).digest()[:_FINGERPRINT]


def body_size(shape: EngineShape) -> int:
    """Bytes of an image's body for engines of ``shape``."""
    return (sum(w for _, w in config_fields(shape)) + 7) // 8


def read_body(shape: EngineShape, data: bytes) -> bytes:
    """The body of image file ``data`` for an engine of ``shape``; a damaged, truncated or
    foreign image raises :class:`~nfacep.errors.UsageError` saying which."""
    if len(data) < _HEADER.size + _FINGERPRINT or data[:4] != MAGIC:
        raise UsageError("not a configuration image (no NFCI header)")
    _, version, size, s, a, q, k, engine, length = _HEADER.unpack_from(data)
    if version != VERSION:
        raise UsageError(f"configuration image version {version}; this nfacep reads {VERSION}")
    if len(data) != size + length + _FINGERPRINT:
        raise UsageError("configuration image truncated or too long")
    if hashlib.sha256(data[:-_FINGERPRINT]).digest()[:_FINGERPRINT] != data[-_FINGERPRINT:]:
        raise UsageError("configuration image damaged: its fingerprint does not match")
    if engine != shape.fingerprint or length != body_size(shape):
        raise UsageError(
            f"configuration image for another engine (S={s} A={a} Q={q} K={k} or another "
            "stream declaration)"
        )
    return data[size : size + length]


# --- from a query file ------------------------------------------------------------------------

Truth = Callable[[dict[int, bool]], bool]


class _Refused(Exception):
    pass


class _Atoms:
    """Turns predicates into truth functions over deduplicated atoms."""

    def __init__(self, shape: EngineShape):
        self.index = {name: i for i, name in enumerate(shape.operands)}
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
        raise _Refused(f"{P.render(e)} is not a field, a constant or their sum")

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
            return self.atom(Atom(self.operand(minus[0]), _FLIP[op], None, c))
        if len(terms) == 2 and len(plus) == 1 and len(minus) == 1:  # f - g + c OP 0
            return self.atom(Atom(self.operand(plus[0]), op, self.operand(minus[0]), -c))
        raise _Refused(
            "an atom compares a field with a constant or with another field ± a constant"
        )

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
        raise _Refused(f"{P.render(e)} is not a condition the programmable engine holds")

    def float_compare(self, op: str, left: P.PExpr, right: P.PExpr) -> tuple[Truth, set[int]]:
        """FLOAT32: fields and constants compare as their order keys; a NaN constant makes
        the comparison constant."""
        if isinstance(left, P.Const) and not isinstance(right, P.Const):
            left, right, op = right, left, _FLIP[op]
        if isinstance(left, P.Const) and isinstance(right, P.Const):
            value = _compare(op, float(left.value), float(right.value))  # NaN: only <>
            return (lambda v: value), set()
        if not isinstance(left, P.FieldRef):
            raise _Refused(f"{P.render(left)} is not a FLOAT32 field")
        if isinstance(right, P.Const):
            key = float32_key(float(right.value))
            if key is None:  # NaN: only <> holds
                same = op == "<>"
                return (lambda v: same), set()
            return self.atom(Atom(self.operand(left.name), op, None, key))
        if isinstance(right, P.FieldRef):
            return self.atom(Atom(self.operand(left.name), op, self.operand(right.name), 0))
        raise _Refused(f"{P.render(right)} is not a FLOAT32 field or constant")

    def ipv4_compare(self, op: str, left: P.PExpr, right: P.PExpr) -> tuple[Truth, set[int]]:
        """IPV4: ``=``/``<>`` with an address or another field; with a network ``a.b.c.d/n``,
        whether the address lies in its range (two atoms, or none for ``/0``)."""
        if isinstance(left, P.Const):
            left, right = right, left
        if not isinstance(left, P.FieldRef):
            raise _Refused(f"{P.render(left)} is not an IPV4 field")
        f = self.operand(left.name)
        if isinstance(right, P.FieldRef):
            return self.atom(Atom(f, op, self.operand(right.name), 0))
        if not isinstance(right, P.Const):
            raise _Refused(f"{P.render(right)} is not an IPV4 field or constant")
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


def _table(f: Truth, atoms: tuple[int, ...]) -> int:
    table = 0
    for k in range(1 << ATOMS_PER_STATE):
        values = {a: bool(k >> j & 1) for j, a in enumerate(atoms)}
        if f(values):
            table |= 1 << k
    return table


def _constructs(nfa: Nfa) -> list[str]:
    """The constructs of the file the programmable engine has no logic for."""
    reasons = []
    program = nfa.program
    for q in program.queries:
        if q.window is not None:
            reasons.append(f"query '{q.name}': WITHIN is not supported by the programmable engine")
        if q.start_seq:
            reasons.append(
                f"query '{q.name}': match start positions (FIRST, COUNT(*), start_seq) are not "
                "supported by the programmable engine"
            )
    if nfa.history:
        reasons.append("PREV is not supported by the programmable engine")
    return reasons


def _bound(nfa: Nfa, values: ParamValues | None) -> tuple[dict[int, P.PExpr], list[str]]:
    """Each predicate with the runtime parameters' values as constants (an image holds them
    so), or why not."""
    program = nfa.program
    exprs = {p.index: p.expr for p in nfa.predicates}
    if not program.parameters:
        return exprs, []
    names = ", ".join(":" + n for n in program.parameters)
    if values is None:
        return exprs, [
            f"runtime parameters ({names}) need values: an image holds them as constants"
        ]
    if values.switches:
        return exprs, [
            f"runtime parameters ({names}) switched at a tuple: an image holds one value of each "
            "(load another image to change them)"
        ]
    return {i: P.bind(e, values.initial) for i, e in exprs.items()}, []


def image(nfa: Nfa, shape: EngineShape, values: ParamValues | None = None) -> Image:
    """The configuration of ``nfa``'s queries in a programmable engine of ``shape``, with the
    runtime parameters' ``values`` (their initial values; no switches) as constants; raises
    :class:`ImageError` naming every capacity exceeded and every construct not supported."""
    c = shape.capacity
    program = nfa.program
    exprs, reasons = _bound(nfa, values)
    reasons = _constructs(nfa) + reasons
    if [(f.name, str(f.type)) for f in program.schema.fields] != [
        (f.name, str(f.type)) for f in shape.schema.fields
    ]:
        reasons.append("the file's stream declaration is not the engine's")
    if tuple(program.partition_fields) != tuple(shape.partition_fields):
        reasons.append(
            f"the file partitions by ({', '.join(program.partition_fields)}), the engine by "
            f"({', '.join(shape.partition_fields)})"
        )
    if len(nfa.states) > c.states:
        reasons.append(f"states: the queries need {len(nfa.states)}, the engine has {c.states}")
    if len(nfa.queries) > c.queries:
        reasons.append(f"queries: the file has {len(nfa.queries)}, the engine has {c.queries}")
    atoms = _Atoms(shape)
    truths: dict[int, tuple[Truth, set[int]]] = {}
    for p in nfa.predicates:
        if nfa.history or any(isinstance(n, P.Param) for n in P.nodes(exprs[p.index])):
            break  # already refused; its atoms would be meaningless
        try:
            truths[p.index] = atoms.truth(exprs[p.index])
        except _Refused as err:
            reasons.append(f"predicate p{p.index} '{p.text}': {err}")
    if len(atoms.atoms) > c.atoms:
        reasons.append(f"atoms: the conditions need {len(atoms.atoms)}, the engine has {c.atoms}")
    for index, (_, used) in truths.items():
        if len(used) > ATOMS_PER_STATE:
            reasons.append(
                f"atoms per state: predicate p{index} '{nfa.predicates[index].text}' reads "
                f"{len(used)} "
                f"atoms, a state at most {ATOMS_PER_STATE}"
            )
    if reasons:
        raise ImageError(reasons)
    states = []
    for s in nfa.states:
        if s.predicate is None:
            read: tuple[int, ...] = ()
            table = (1 << (1 << ATOMS_PER_STATE)) - 1
        else:
            f, used = truths[s.predicate]
            read = tuple(sorted(used))
            table = _table(f, read)
        activation = sum(1 << j for j in s.activation)
        states.append(StateConfig(read, table, activation, s.start, s.accepting, s.query))
    by_index = sorted(atoms.atoms.items(), key=lambda kv: kv[1])
    return Image(
        shape,
        tuple(a for a, _ in by_index),
        tuple(states),
        tuple(q.skip_past_last_row for q in nfa.queries),
    )
