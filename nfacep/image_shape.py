"""What a programmable engine is built for (:class:`EngineShape`: the stream's fields, its
partition key and its :class:`Capacity`), and its configuration word (docs/formats.md,
"Configuration images"): :func:`config_fields`, the one definition of the word's bit fields,
which the gateware builds its registers from and :meth:`nfacep.image.Image.body` packs, and
where :meth:`~nfacep.image.Image.from_body` finds each of them again (:func:`unpacking`). No
numpy, no amaranth here."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from dataclasses import dataclass
from typing import NamedTuple

from .errors import UsageError
from .image_atoms import ATOMS_PER_STATE
from .lang.types import BoolType, Float32Type
from .nfa import start_bits
from .params import EngineParams
from .schema import Schema

__all__ = [
    "TIMED_STATES",
    "VERSION",
    "WINDOW_BITS",
    "Capacity",
    "EngineShape",
    "body_size",
    "config_fields",
    "signed_bits",
    "unpacking",
]

#: the image format's version (docs/formats.md); an engine's shape names it in its fingerprint
VERSION = 2
#: the state slots that keep their run's start, for WITHIN: slots ``0 .. TIMED_STATES - 1``
TIMED_STATES = 6
#: the longest window, ``2**WINDOW_BITS`` of the ORDER BY field's units
WINDOW_BITS = 16


@dataclass(frozen=True)
class Capacity:
    """The programmable engine's capacities: state slots, atoms, query slots (their defaults
    and ranges are :class:`~nfacep.params.EngineParams`' ``states``, ``atoms``, ``queries``,
    checked when made), and for WITHIN the ``timed`` state slots (the first ones: those that
    keep their run's start; 0 for an engine without windows, at most ``states``; by default
    :data:`TIMED_STATES`, or ``states`` when fewer) and ``window_bits`` (the longest window
    is ``2**window_bits``, 1 to 32)."""

    states: int
    atoms: int
    queries: int
    timed: int = None  # type: ignore[assignment]  # (set when made)
    window_bits: int = WINDOW_BITS

    def __post_init__(self) -> None:
        EngineParams(states=self.states, atoms=self.atoms, queries=self.queries)
        if self.timed is None:
            object.__setattr__(self, "timed", min(TIMED_STATES, self.states))
        if not 0 <= self.timed <= self.states:
            raise UsageError(f"timed state slots: {self.timed}, not 0 to {self.states}")
        if not 1 <= self.window_bits <= 32:
            raise UsageError(f"window bits: {self.window_bits}, not 1 to 32")

    @property
    def start_bits(self) -> int:
        """Bits of a timed slot's run start: the low bits of the ORDER BY value it began at,
        wrapping, as the fixed engine keeps them (:func:`start_bits`)."""
        return start_bits(1 << self.window_bits)

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

    @functools.cached_property
    def fingerprint(self) -> bytes:  # (made once: a loader and an engine ask several times)
        c = self.capacity
        text = ";".join(f"{f.name}:{f.type}" for f in self.schema.fields)
        text += f"|{','.join(self.partition_fields)}|{c.states},{c.atoms},{c.queries}"
        text += f",{ATOMS_PER_STATE},{c.timed},{c.window_bits}|v{VERSION}"
        return hashlib.sha256(text.encode()).digest()[:8]


def _bits(n: int) -> int:
    """Bits of an index among ``n`` things (at least 1)."""
    return max(1, (n - 1).bit_length())


def signed_bits(lo: int, hi: int) -> int:
    return max(lo.bit_length() if lo < 0 else 0, hi.bit_length()) + 1


def config_fields(shape: EngineShape) -> list[tuple[str, int]]:
    """:func:`_config_fields` (made once per shape: every image made for it asks)."""
    return list(_config_fields(shape))


class _Unpacking(NamedTuple):
    """Where :meth:`Image.from_body` finds each field of :func:`config_fields` (made once per
    shape; an index into the fields' list): ``fields``, each field's offset and mask in the
    word; per atom, its ``field``, ``other``, ``uses_other``, ``op`` and ``constant``; per
    state, its atoms' (a tuple), ``table``, ``activation``, ``start``, ``accept``, ``query``;
    ``rest``, the other fields (by name)."""

    fields: tuple[tuple[int, int], ...]
    atoms: tuple[tuple[int, int, int, int, int], ...]
    states: tuple[tuple[tuple[int, ...], int, int, int, int, int], ...]
    rest: tuple[tuple[int, str], ...]


@functools.lru_cache(maxsize=16)
def unpacking(shape: EngineShape) -> _Unpacking:
    fields = config_fields(shape)
    at = {name: k for k, (name, _) in enumerate(fields)}
    offsets, offset = [], 0
    for _, width in fields:
        offsets.append((offset, (1 << width) - 1))
        offset += width
    c = shape.capacity
    taken: set[int] = set()

    def index(name: str) -> int:
        taken.add(at[name])
        return at[name]

    atoms = tuple(
        (
            index(f"atom{a}.field"),
            index(f"atom{a}.other"),
            index(f"atom{a}.uses_other"),
            index(f"atom{a}.op"),
            index(f"atom{a}.constant"),
        )
        for a in range(c.atoms)
    )
    states = tuple(
        (
            tuple(index(f"state{i}.atom{j}") for j in range(ATOMS_PER_STATE)),
            index(f"state{i}.table"),
            index(f"state{i}.activation"),
            index(f"state{i}.start"),
            index(f"state{i}.accept"),
            index(f"state{i}.query"),
        )
        for i in range(c.states)
    )
    rest = tuple((k, name) for k, (name, _) in enumerate(fields) if k not in taken)
    return _Unpacking(tuple(offsets), atoms, states, rest)


@functools.lru_cache(maxsize=16)
def _config_fields(shape: EngineShape) -> tuple[tuple[str, int], ...]:
    """The configuration's bit fields, least significant first: ``(name, width)``. Per atom
    ``a``: ``atom{a}.field`` and ``atom{a}.other`` (operand indices), ``atom{a}.uses_other``,
    ``atom{a}.op`` (its index in :data:`OPS`) and ``atom{a}.constant`` (two's complement);
    per state ``i``: ``state{i}.atom{j}`` for ``j < ATOMS_PER_STATE``, ``state{i}.table``,
    ``state{i}.activation`` (bit ``j``: state ``j``), ``state{i}.start``, ``state{i}.accept``,
    ``state{i}.query`` (one-hot; 0: an unused slot); per query ``q``: ``query{q}.skip``.
    With timed slots (WITHIN), then: ``order``, the operand the windows are measured in (the
    ORDER BY field), and per query ``query{q}.window``, its window in that field's units (0:
    none; ``window_bits + 1`` bits, up to ``2**window_bits``)."""
    c = shape.capacity
    fbits = _bits(len(shape.operands))
    cbits = signed_bits(*shape.constant_range())
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
    if c.timed:
        fields.append(("order", fbits))
        fields += [(f"query{q}.window", c.window_bits + 1) for q in range(c.queries)]
    return tuple(fields)


@functools.lru_cache(maxsize=16)
def body_size(shape: EngineShape) -> int:
    """Bytes of an image's body for engines of ``shape``."""
    return (sum(w for _, w in _config_fields(shape)) + 7) // 8
