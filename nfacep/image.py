"""Configuration images of the programmable engine (docs/formats.md, "Configuration images").

The programmable engine (:class:`nfacep.hdl.programmable.ProgrammableEngine`) is built for a
stream declaration (its fields and partition key) and capacities (:class:`Capacity`): ``S``
state slots, ``A`` atomic conditions, ``Q`` query slots, and for WITHIN ``T`` timed state
slots and ``W`` window bits. A query file becomes a configuration of it (:func:`image`):

* an **atom** compares a field with a constant, or with another field plus a constant:
  ``field OP constant`` or ``field OP other + constant`` (``OP`` one of ``= <> < <= > >=``),
  exactly as the reference compares them: integers and TIMESTAMPs as mathematical integers
  (no overflow), ENUMs as label indices, BOOLs as 0/1, IPV4 addresses as 32-bit numbers (a
  network is a range: two atoms), FLOAT32s as their order keys (a NaN satisfies only
  ``<>``);
* each **state** reads at most :data:`ATOMS_PER_STATE` atoms and holds its condition as a
  truth table over them (bit ``sum(atom_j << j)``), an activation mask (the states whose
  being set activates it), start and accept bits, and the query slot it belongs to;
* each **query slot** has its after-match mode (SKIP PAST LAST ROW clears its states) and
  its window (WITHIN, up to ``2**W`` in the units of the one ORDER BY field the
  configuration names); the windowed queries' states take the first, timed, state slots,
  which keep their run's start (:func:`nfacep.nfa.start_bits`).

What does not fit is refused before anything is built or sent, every reason at once
(:class:`ImageError`): each capacity exceeded and each construct the programmable engine has
no logic for (PREV, start positions, runtime parameters switched at a tuple, a predicate not
of the atoms' form). Runtime parameters' values are constants in the image.

:func:`config_fields` (:mod:`nfacep.image_shape`) is the one definition of the
configuration's bit layout; the gateware builds its registers from it and :meth:`Image.body`
packs it. No numpy, no amaranth here.
"""

from __future__ import annotations

import functools
import hashlib
import struct
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import UsageError
from .image_atoms import ATOMS_PER_STATE, OPS, Atom, Atoms, Refused, Truth, truth_table
from .image_shape import (
    VERSION,
    Capacity,
    EngineShape,
    body_size,
    config_fields,
    signed_bits,
    unpacking,
)
from .lang import predicates as P
from .nfa import Nfa

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

MAGIC = b"NFCI"
#: magic, version, header size, S, A, Q, K, engine, body, T, W
_HEADER = struct.Struct("<4sHHHHBB8sIHB")
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
    windows: tuple[int, ...] = ()  #: per query: WITHIN's window (0: none; none given: none)
    order: int = 0  #: the operand the windows are measured in (ORDER BY)

    def values(self) -> dict[str, int]:
        """Every field of :func:`config_fields`, unsigned (unused slots 0)."""
        out: dict[str, int] = {}
        lo, hi = self.shape.constant_range()
        cbits = signed_bits(lo, hi)
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
            out[f"state{i}.query"] = 1 << s.query if s.query >= 0 else 0
        for q, skip in enumerate(self.skip):
            out[f"query{q}.skip"] = int(skip)
        if self.shape.capacity.timed:
            out["order"] = self.order
            for q, window in enumerate(self.windows):
                out[f"query{q}.window"] = window
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
        return self._body

    @functools.cached_property
    def _body(self) -> bytes:  # (made once: a loader asks for it several times)
        return self.word().to_bytes(body_size(self.shape), "little")

    def to_bytes(self) -> bytes:
        """The image file: header, body, fingerprint (docs/formats.md)."""
        return self._file

    @functools.cached_property
    def _file(self) -> bytes:
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
        plan = unpacking(shape)
        word = int.from_bytes(body, "little")
        v = [word >> offset & mask for offset, mask in plan.fields]
        c = shape.capacity
        cbits = signed_bits(*shape.constant_range())
        atoms = []
        for field, other, uses_other, op, constant in plan.atoms:
            constant = v[constant]
            constant -= (constant >> (cbits - 1)) << cbits  # two's complement
            code = v[op]
            atoms.append(
                Atom(
                    v[field],
                    OPS[code] if code < len(OPS) else "=",
                    v[other] if v[uses_other] else None,
                    constant,
                )
            )
        states = []
        for read, table, activation, start, accept, query in plan.states:
            states.append(
                StateConfig(
                    tuple(v[j] for j in read),
                    v[table],
                    v[activation],
                    bool(v[start]),
                    bool(v[accept]),
                    v[query].bit_length() - 1,  # one-hot: -1 for an unused slot
                )
            )
        values = {name: v[k] for k, name in plan.rest}
        skip = tuple(bool(values[f"query{q}.skip"]) for q in range(c.queries))
        windows = tuple(values.get(f"query{q}.window", 0) for q in range(c.queries))
        return cls(shape, tuple(atoms), tuple(states), skip, windows, values.get("order", 0))


#: the tuple number of a load: 4 bytes, modulo 2**32
AT_BYTES = 4


def load(img: Image, at: int = 0) -> bytes:
    """What the engine's configuration port takes to put ``img`` in force from tuple ``at``
    on (its tuple count modulo 2**32): ``at`` (4 bytes, little-endian), the engine's
    fingerprint (8 bytes), the image's (8 bytes: the engine reports the one in force), the
    body, then the CRC-32 (zlib's) of all that, little-endian. The engine
    refuses (and counts) a load for another engine, of another length, or whose CRC does not
    match; docs/formats.md, "Configuration images"."""
    return load_body(img.shape, img.body(), at, img.to_bytes()[-_FINGERPRINT:])


def load_body(shape: EngineShape, body: bytes, at: int = 0, named: bytes | None = None) -> bytes:
    """:func:`load` of a body made elsewhere (a test's, or one read from an image file);
    ``named``: the image's fingerprint, when known."""
    named = image_file(shape, body)[-_FINGERPRINT:] if named is None else named
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
        c.timed,
        c.window_bits,
    )
    return head + body + hashlib.sha256(head + body).digest()[:_FINGERPRINT]


def read_body(shape: EngineShape, data: bytes) -> bytes:
    """The body of image file ``data`` for an engine of ``shape``; a damaged, truncated or
    foreign image raises :class:`~nfacep.errors.UsageError` saying which."""
    if len(data) < _HEADER.size + _FINGERPRINT or data[:4] != MAGIC:
        raise UsageError("not a configuration image (no NFCI header)")
    version = int.from_bytes(data[4:6], "little")
    if version != VERSION:
        raise UsageError(f"configuration image version {version}; this nfacep reads {VERSION}")
    _, _, size, s, a, q, k, engine, length, t, w = _HEADER.unpack_from(data)
    if len(data) != size + length + _FINGERPRINT:
        raise UsageError("configuration image truncated or too long")
    if hashlib.sha256(data[:-_FINGERPRINT]).digest()[:_FINGERPRINT] != data[-_FINGERPRINT:]:
        raise UsageError("configuration image damaged: its fingerprint does not match")
    if engine != shape.fingerprint or length != body_size(shape):
        raise UsageError(
            f"configuration image for another engine (S={s} A={a} Q={q} K={k} T={t} W={w} or "
            "another stream declaration)"
        )
    return data[size : size + length]


# --- from a query file ------------------------------------------------------------------------


def _windows(nfa: Nfa, shape: EngineShape) -> list[str]:
    """Why the file's windows do not fit the engine's timed slots (none: they fit)."""
    c = shape.capacity
    timed = [q for q in nfa.queries if q.window is not None]
    if not timed:
        return []
    if not c.timed:
        return ["WITHIN: the engine has no timed state slots (it was built without windows)"]
    reasons = []
    used = sum(q.count for q in timed)
    if used > c.timed:
        reasons.append(f"timed states: the windowed queries need {used}, the engine has {c.timed}")
    longest = 1 << c.window_bits
    reasons += [
        f"query '{q.name}': WITHIN {q.window} is longer than the engine's longest window "
        f"({longest}, {c.window_bits} window bits)"
        for q in timed
        if (q.window or 0) > longest
    ]
    fields = sorted({str(q.order_field) for q in timed})
    if len(fields) > 1:
        reasons.append(
            f"WITHIN: the windowed queries order by {' and '.join(fields)}; the engine measures "
            "every window in one ORDER BY field"
        )
    return reasons


def _slots(nfa: Nfa) -> list[int]:
    """The state slot of each NFA state: the windowed queries' states first (the timed slots),
    then the others, each query's in order."""
    timed = [q for q in nfa.queries if q.window is not None]
    rest = [q for q in nfa.queries if q.window is None]
    order = [i for q in timed + rest for i in q.states]
    slots = [0] * len(order)
    for slot, i in enumerate(order):
        slots[i] = slot
    return slots


def _constructs(nfa: Nfa) -> list[str]:
    """The constructs of the file the programmable engine has no logic for."""
    reasons = []
    program = nfa.program
    for q in program.queries:
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
    reasons = _constructs(nfa) + _windows(nfa, shape) + reasons
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
    atoms = Atoms(shape.operands)
    truths: dict[int, tuple[Truth, set[int]]] = {}
    for p in nfa.predicates:
        if nfa.history or any(isinstance(n, P.Param) for n in P.nodes(exprs[p.index])):
            break  # already refused; its atoms would be meaningless
        try:
            truths[p.index] = atoms.truth(exprs[p.index])
        except Refused as err:
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
    slots = _slots(nfa)
    states: list[StateConfig | None] = [None] * len(nfa.states)
    for s in nfa.states:
        if s.predicate is None:
            read: tuple[int, ...] = ()
            table = (1 << (1 << ATOMS_PER_STATE)) - 1
        else:
            f, used = truths[s.predicate]
            read = tuple(sorted(used))
            table = truth_table(f, read)
        activation = sum(1 << slots[j] for j in s.activation)
        states[slots[s.index]] = StateConfig(read, table, activation, s.start, s.accepting, s.query)
    by_index = sorted(atoms.atoms.items(), key=lambda kv: kv[1])
    timed = [q for q in nfa.queries if q.window is not None]
    order = shape.operands.index(timed[0].order_field) if timed else 0
    return Image(
        shape,
        tuple(a for a, _ in by_index),
        tuple(s for s in states if s is not None),
        tuple(q.skip_past_last_row for q in nfa.queries),
        tuple(q.window or 0 for q in nfa.queries),
        order,
    )
