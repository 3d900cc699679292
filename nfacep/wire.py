"""The wire formats: how tuples travel to the gateware, and match records back from it.

A tuple is its fields packed LSB-first in declaration order: field ``i`` sits at bit offset
``sum(width of the fields before it)``. Widths and encodings:

========== ======= ==============================================
type       bits    encoding
========== ======= ==============================================
UINT(n)    n       the value
INT(n)     n       two's complement
BOOL       1       1 for true
ENUM(…)    fewest  the label's index (:attr:`EnumType.bits`)
FLOAT32    32      the raw IEEE 754 single bits (NaN payloads kept)
IPV4       32      the address, first octet most significant
TIMESTAMP  64      the count of its unit since the epoch, two's complement
========== ======= ==============================================

The packed value is padded with zero bits to whole bytes and sent little-endian (byte 0 holds
bits 0..7). It is exactly the bit pattern of the gateware's
``nfacep.hdl.layout.tuple_layout(schema)`` :class:`~amaranth.lib.data.StructLayout`.

:func:`pack` gives one Python int per tuple (the payload value a simulator drives);
:func:`to_bytes` / :func:`from_bytes` convert such values to and from the byte stream;
:func:`unpack` is the inverse of :func:`pack`. :func:`pack_bytes` and :func:`unpack_bytes` go
straight between columns and bytes. All of them work column-wise on 64-bit words with numpy,
for millions of tuples; only the conversion to and from Python ints is per tuple.

A match record is what the engine emits for a tuple that matched a query or was dropped:
:func:`record_format` gives its fields (``seq``, ``partition``, ``matches``, ``dropped``, and
``starts`` where a query reports start_seq, packed LSB-first in that order), and
:class:`RecordFormat` encodes and decodes it. The gateware builds its record ``StructLayout``
from it; the simulation, the board host and the board model decode and encode records with
it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from .io.tuples import Tuples, format_value
from .lang.types import BoolType, EnumType, FieldType, Float32Type, IntType, UIntType
from .schema import PartitionKey, PartitionText, Schema

if TYPE_CHECKING:
    from .nfa import Nfa

__all__ = [
    "RECORD_FIELDS",
    "SEQ_BITS",
    "Record",
    "RecordColumns",
    "RecordFormat",
    "field_slices",
    "field_text",
    "from_bytes",
    "key_raw",
    "key_text",
    "pack",
    "pack_bytes",
    "raw_column",
    "record_format",
    "start_queries",
    "to_bytes",
    "tuple_bytes",
    "tuple_width",
    "unpack",
    "unpack_bytes",
]

_MASK64 = (1 << 64) - 1


def field_width(ty: FieldType) -> int:
    """Bits a field of type ``ty`` takes on the wire."""
    if isinstance(ty, UIntType | IntType | EnumType | Float32Type | BoolType):
        return ty.bits
    raise TypeError(f"not a field type: {ty!r}")


def field_slices(schema: Schema) -> list[tuple[str, int, int]]:
    """``(name, bit offset, width)`` of every field, in declaration order."""
    out = []
    offset = 0
    for f in schema.fields:
        width = field_width(f.type)
        out.append((f.name, offset, width))
        offset += width
    return out


def tuple_width(schema: Schema) -> int:
    """Bits of a packed tuple, before padding."""
    return sum(field_width(f.type) for f in schema.fields)


def tuple_bytes(schema: Schema) -> int:
    """Bytes of a tuple on the wire (the packed bits padded to whole bytes)."""
    return (tuple_width(schema) + 7) // 8


def _n_words(schema: Schema) -> int:
    return max(1, (tuple_width(schema) + 63) // 64)


# --- columns <-> 64-bit words ---------------------------------------------------------------


def _raw_bits(column, ty: FieldType, name: str) -> np.ndarray:
    """A column as uint64 raw field bits (low ``width`` bits), range-checked."""
    col = np.asarray(column)
    width = field_width(ty)
    if isinstance(ty, Float32Type):
        if col.dtype != np.float32:
            col = col.astype(np.float32)
        return col.view(np.uint32).astype(np.uint64)
    if isinstance(ty, BoolType):
        return col.astype(bool).astype(np.uint64)
    if col.dtype == bool or not np.issubdtype(col.dtype, np.integer):
        raise ValueError(f"field '{name}' ({ty}): expected an integer column, not {col.dtype}")
    lo, hi = ty.range
    if col.size:
        if col.dtype == np.uint64:
            bad = col > np.uint64(hi)
        elif np.issubdtype(col.dtype, np.unsignedinteger):
            bad = col.astype(np.uint64) > np.uint64(hi)
        else:
            c64 = col.astype(np.int64)
            bad = (c64 < lo) | (c64 > min(hi, (1 << 63) - 1))
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"tuple {row}, field '{name}': {col[row]} does not fit {ty} ({lo}..{hi})"
            )
    if np.issubdtype(col.dtype, np.signedinteger):
        raw = col.astype(np.int64).view(np.uint64)
    else:
        raw = col.astype(np.uint64)
    if width < 64:
        raw = raw & np.uint64((1 << width) - 1)
    return raw


def _to_words(schema: Schema, tuples: Tuples) -> np.ndarray:
    """Packed tuples as a ``(n, words)`` uint64 array, word 0 the least significant."""
    n = tuples.n
    words = np.zeros((_n_words(schema), n), dtype=np.uint64)
    for (name, offset, width), f in zip(field_slices(schema), schema.fields, strict=True):
        raw = _raw_bits(tuples.columns[name], f.type, name)
        if raw.shape != (n,):
            raise ValueError(f"field '{name}': column has shape {raw.shape}, expected ({n},)")
        word, shift = divmod(offset, 64)
        words[word] |= raw << np.uint64(shift)
        if shift + width > 64:
            words[word + 1] |= raw >> np.uint64(64 - shift)
    return np.ascontiguousarray(words.T)


def _from_words(schema: Schema, words: np.ndarray, source: str) -> Tuples:
    n = words.shape[0]
    columns = {}
    for (name, offset, width), f in zip(field_slices(schema), schema.fields, strict=True):
        word, shift = divmod(offset, 64)
        raw = words[:, word] >> np.uint64(shift)
        if shift + width > 64:
            raw = raw | (words[:, word + 1] << np.uint64(64 - shift))
        if width < 64:
            raw = raw & np.uint64((1 << width) - 1)
        ty = f.type
        if isinstance(ty, UIntType):
            col = raw
        elif isinstance(ty, IntType):
            sign = np.uint64(1 << (width - 1))
            col = ((raw ^ sign) - sign).view(np.int64)  # sign-extend (mod 2**64)
        elif isinstance(ty, BoolType):
            col = raw != 0
        elif isinstance(ty, EnumType):
            col = raw.astype(np.int64)
            bad = col >= len(ty.labels)
            if bad.any():
                row = int(np.flatnonzero(bad)[0])
                raise ValueError(
                    f"tuple {row}, field '{name}': {col[row]} is not a label index of {ty}"
                )
        else:
            col = raw.astype(np.uint32).view(np.float32)
        columns[name] = col
    return Tuples(columns, n, source)


# --- words <-> Python ints and bytes --------------------------------------------------------


def _words_to_ints(words: np.ndarray) -> list[int]:
    if words.shape[1] == 1:
        return words[:, 0].tolist()
    values = words[:, 0].astype(object)
    for k in range(1, words.shape[1]):
        values |= words[:, k].astype(object) << (64 * k)
    return values.tolist()


def _ints_to_words(schema: Schema, values) -> np.ndarray:
    width = tuple_width(schema)
    nw = _n_words(schema)
    arr = np.empty(len(values), dtype=object)
    arr[:] = [int(v) for v in values]
    if arr.size:
        bad = (arr < 0) | ((arr >> width) != 0)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise ValueError(f"value {row} ({arr[row]:#x}) is not a packed tuple of {width} bits")
    words = np.empty((len(arr), nw), dtype=np.uint64)
    for k in range(nw):
        words[:, k] = ((arr >> (64 * k)) & _MASK64).astype(np.uint64)
    return words


def _words_to_bytes(schema: Schema, words: np.ndarray) -> bytes:
    nb = tuple_bytes(schema)
    nw = _n_words(schema)
    as_bytes = words.astype("<u8", copy=False).view(np.uint8).reshape(len(words), 8 * nw)
    return as_bytes[:, :nb].tobytes()


def _bytes_to_words(schema: Schema, data: bytes) -> np.ndarray:
    nb = tuple_bytes(schema)
    nw = _n_words(schema)
    if nb == 0:
        if len(data):
            raise ValueError("the stream has no fields, so its tuples take no bytes")
        return np.zeros((0, nw), dtype=np.uint64)
    if len(data) % nb:
        raise ValueError(f"{len(data)} bytes is not a whole number of {nb}-byte tuples")
    raw = np.frombuffer(data, dtype=np.uint8).reshape(-1, nb)
    padded = np.zeros((len(raw), 8 * nw), dtype=np.uint8)
    padded[:, :nb] = raw
    words = padded.view("<u8").astype(np.uint64)
    width = tuple_width(schema)
    if width % 8:
        top = raw[:, nb - 1] >> np.uint8(width % 8)
        if top.any():
            row = int(np.flatnonzero(top)[0])
            raise ValueError(f"tuple {row}: padding bits above bit {width - 1} are not zero")
    return words


# --- public API -----------------------------------------------------------------------------


def field_text(raw: int, ty: FieldType) -> str:
    """One field's raw bits (as in a packed tuple or an engine record) as a tuple file writes
    the value (:func:`nfacep.io.tuples.format_value`); ValueError for an ENUM index past the last
    label."""
    if isinstance(ty, IntType) and raw >= 1 << (ty.width - 1):
        value = raw - (1 << ty.width)
    elif isinstance(ty, EnumType):
        if raw >= len(ty.labels):
            raise ValueError(f"{raw} is no label index of {ty}")
        value = raw
    elif isinstance(ty, BoolType):
        value = bool(raw)
    elif isinstance(ty, Float32Type):
        value = struct.unpack("<f", struct.pack("<I", raw))[0]
    else:
        value = raw
    return format_value(value, ty)


def pack(schema: Schema, tuples: Tuples) -> list[int]:
    """One Python int per tuple: its fields packed LSB-first (raises ValueError when a value
    does not fit its field)."""
    return _words_to_ints(_to_words(schema, tuples))


def unpack(schema: Schema, values) -> Tuples:
    """The inverse of :func:`pack`: columns typed as :mod:`nfacep.io.tuples` reads them."""
    return _from_words(schema, _ints_to_words(schema, values), "<wire>")


def to_bytes(schema: Schema, values) -> bytes:
    """Packed values (from :func:`pack`) as the byte stream: each padded to
    :func:`tuple_bytes` bytes, little-endian, in order."""
    return _words_to_bytes(schema, _ints_to_words(schema, values))


def from_bytes(schema: Schema, data: bytes) -> list[int]:
    """The inverse of :func:`to_bytes` (raises ValueError on a partial tuple or nonzero
    padding)."""
    return _words_to_ints(_bytes_to_words(schema, data))


def pack_bytes(schema: Schema, tuples: Tuples) -> bytes:
    """``to_bytes(schema, pack(schema, tuples))`` without Python ints in between."""
    return _words_to_bytes(schema, _to_words(schema, tuples))


def hex_lines(schema: Schema, tuples: Tuples) -> bytes:
    """The packed tuples (:func:`pack`) as text for Verilog's ``$readmemh``: one line each,
    the value in hexadecimal, most significant digit first, with leading zeros up to the
    digits the tuple's width takes (made column-wise, without Python ints)."""
    tb = tuple_bytes(schema)
    digits = (tuple_width(schema) + 3) // 4
    raw = np.frombuffer(pack_bytes(schema, tuples), dtype=np.uint8).reshape(tuples.n, tb)
    raw = raw[:, ::-1]  # most significant byte first
    text = np.empty((tuples.n, 2 * tb + 1), dtype=np.uint8)
    text[:, 0 : 2 * tb : 2] = _HEX[raw >> 4]
    text[:, 1 : 2 * tb : 2] = _HEX[raw & 15]
    text[:, -1] = ord("\n")
    return text[:, 2 * tb - digits :].tobytes()


_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def unpack_bytes(schema: Schema, data: bytes) -> Tuples:
    """``unpack(schema, from_bytes(schema, data))`` without Python ints in between."""
    return _from_words(schema, _bytes_to_words(schema, data), "<wire>")


def raw_column(schema: Schema, tuples: Tuples, name: str) -> np.ndarray:
    """Field ``name`` of every tuple as its raw bits on the wire (uint64): ENUM as the label
    index, INT in two's complement, FLOAT32 as its IEEE bits; ValueError when a value does not
    fit its field."""
    return _raw_bits(tuples.columns[name], schema.field(name).type, name)


# --- the partition key ------------------------------------------------------------------------


def key_raw(key: PartitionKey, tuples: Tuples) -> np.ndarray:
    """The raw partition key of every tuple (uint64, :class:`nfacep.schema.PartitionKey`: the
    fields' raw bits concatenated); ValueError when a value does not fit its field."""
    raw = np.zeros(tuples.n, dtype=np.uint64)
    for (name, offset, _), ty in zip(key.slices, key.types, strict=True):
        raw |= _raw_bits(tuples.columns[name], ty, name) << np.uint64(offset)
    return raw


def key_text(key: PartitionKey, raw: int) -> PartitionText:
    """A raw partition key as the match file writes it: its field's value, or one value per
    field for a key of several (None without PARTITION); ValueError for an ENUM index past
    the last label."""
    if not key.names:
        return None
    # the first field takes every bit above the others' (as one field takes the whole key)
    texts = tuple(
        field_text(raw >> offset & (-1 if i == 0 else (1 << width) - 1), ty)
        for i, ((_, offset, width), ty) in enumerate(zip(key.slices, key.types, strict=True))
    )
    return texts[0] if len(texts) == 1 else texts


# --- match records ----------------------------------------------------------------------------

#: Width of a record's ``seq``: the engine numbers its input tuples modulo ``2**SEQ_BITS``.
SEQ_BITS = 48
#: A record's fields, in order from bit 0; ``starts`` only where a query reports start_seq.
RECORD_FIELDS = ("seq", "partition", "matches", "dropped", "starts")
#: The fields every record has.
_REQUIRED_FIELDS = RECORD_FIELDS[:4]


class Record(NamedTuple):
    """One match record, its fields as integers."""

    seq: int  #: 0-based input position of the tuple (modulo ``2**SEQ_BITS``)
    partition: (
        int  #: the raw partition key (:class:`~nfacep.schema.PartitionKey`); 0 without PARTITION
    )
    matches: int  #: bit q set iff query q (``nfa.queries[q]``) matched at this tuple
    dropped: int  #: 1 if the partitioner dropped the tuple (then ``matches`` is 0)
    #: where the matches begin, for the queries that report start_seq (:func:`start_queries`):
    #: the k-th of them in bits ``[k * SEQ_BITS, (k + 1) * SEQ_BITS)``, the latest start of
    #: its runs that end here (modulo ``2**SEQ_BITS``; 0 when it did not match)
    starts: int = 0

    def __str__(self) -> str:
        text = (
            f"seq {self.seq} partition {self.partition} matches {self.matches:#b} "
            f"dropped {self.dropped}"
        )
        return text + (f" starts {self.starts:#x}" if self.starts else "")

    def start(self, k: int) -> int:
        """The start of the ``k``-th query that reports start_seq."""
        return self.starts >> (k * SEQ_BITS) & ((1 << SEQ_BITS) - 1)


def start_queries(nfa: Nfa) -> list[int]:
    """The indices of the queries that report start_seq, in file order: the k-th of them has
    the k-th start of a record."""
    return [q.index for q in nfa.queries if q.start_seq]


@dataclass(frozen=True)
class RecordFormat:
    """The bit layout of a match record: ``(name, bit offset, width)`` of each field of
    :data:`RECORD_FIELDS` it has, LSB-first; on a byte link the record is padded to whole
    bytes and sent little-endian."""

    fields: tuple[tuple[str, int, int], ...]

    @classmethod
    def from_widths(cls, widths: dict[str, int]) -> RecordFormat:
        at, fields = 0, []
        for name in RECORD_FIELDS:
            if name not in widths:
                continue
            fields.append((name, at, widths[name]))
            at += widths[name]
        return cls(tuple(fields))

    @classmethod
    def from_description(cls, fields) -> RecordFormat:
        """The format a sidecar's ``record.fields`` list describes (``name``, ``offset``,
        ``width`` per field); ValueError when it is not a record's."""
        try:
            found = {f["name"]: (int(f["offset"]), int(f["width"])) for f in fields}
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"not a record layout: {err!r}") from None
        missing = [n for n in _REQUIRED_FIELDS if n not in found]
        if missing:
            raise ValueError(f"the record layout lacks {', '.join(missing)}")
        return cls(tuple((n, *found[n]) for n in RECORD_FIELDS if n in found))

    @property
    def widths(self) -> dict[str, int]:
        return {name: width for name, _, width in self.fields}

    @property
    def width(self) -> int:
        return max(at + width for _, at, width in self.fields)

    @property
    def nbytes(self) -> int:
        """Bytes of a record on a byte link."""
        return (self.width + 7) // 8

    def describe(self) -> list[dict]:
        """The fields as a sidecar lists them (the inverse of :meth:`from_description`)."""
        return [{"name": n, "offset": at, "width": w} for n, at, w in self.fields]

    def decode(self, value: int) -> Record:
        return Record(
            **{name: (value >> at) & ((1 << width) - 1) for name, at, width in self.fields}
        )

    def encode(self, record: Record) -> int:
        value = 0
        names = {name for name, _, _ in self.fields}
        if record.starts and "starts" not in names:
            raise ValueError("the record has starts, but no query reports start_seq")
        for name, at, width in self.fields:
            v = getattr(record, name)
            if not 0 <= v < 1 << width:
                raise ValueError(f"record field {name} = {v} does not fit {width} bits")
            value |= v << at
        return value

    @property
    def hex_digits(self) -> int:
        """Hexadecimal digits of a record as a simulator writes it (``%h``: leading zeros up
        to the width)."""
        return (self.width + 3) // 4

    def decode_hex(self, data: bytes, first: int = 0) -> RecordColumns:
        """Records written one a line in hexadecimal (:attr:`hex_digits` digits and a line
        end each, as the simulation harness writes them), decoded column-wise into
        :class:`RecordColumns`. ValueError naming the line (``first`` + its number) that is not
        such a value (x or z bits, a short or long line)."""
        digits = self.hex_digits
        raw = np.frombuffer(data, dtype=np.uint8)
        if len(raw) % (digits + 1) == 0:
            rows = raw.reshape(-1, digits + 1)
            nibbles = _NIBBLE[rows[:, :digits]]
            if not ((nibbles > 15).any() or (rows[:, digits] != ord("\n")).any()):
                return self._columns(nibbles)
        lines = data.split(b"\n")  # (only when one is wrong: which)
        for number, line in enumerate(lines):
            end = number == len(lines) - 1  # (what follows the last line end)
            if end and not line:
                break
            if (
                end
                or len(line) != digits
                or (_NIBBLE[np.frombuffer(line, dtype=np.uint8)] > 15).any()
            ):
                raise ValueError(
                    f"record {first + number} is not a value: "
                    f"{line.decode('ascii', 'replace').strip()!r}"
                )
        raise AssertionError("unreachable: no wrong line found")

    def _columns(self, nibbles: np.ndarray) -> RecordColumns:
        n, digits = nibbles.shape
        nw = max(1, (digits + 15) // 16)
        padded = np.zeros((n, 16 * nw), dtype=np.uint8)  # most significant digit first
        padded[:, 16 * nw - digits :] = nibbles
        octets = np.ascontiguousarray((padded[:, 0::2] << 4) | padded[:, 1::2])
        words = octets.view(">u8").astype(np.uint64)[:, ::-1]  # word 0 the least significant
        found = {name: _bits(words, at, width) for name, at, width in self.fields}
        zeros = np.zeros(n, dtype=np.uint64)
        return RecordColumns(
            found["seq"],
            found["partition"],
            found["matches"],
            found["dropped"],
            found.get("starts", zeros),
        )

    def decode_bytes(self, data: bytes) -> Record:
        if len(data) != self.nbytes:
            raise ValueError(f"a record is {self.nbytes} bytes, not {len(data)}")
        return self.decode(int.from_bytes(data, "little"))

    def encode_bytes(self, record: Record) -> bytes:
        return self.encode(record).to_bytes(self.nbytes, "little")


_NIBBLE = np.full(256, 255, dtype=np.uint8)
_NIBBLE[np.frombuffer(b"0123456789", dtype=np.uint8)] = np.arange(10)
_NIBBLE[np.frombuffer(b"abcdef", dtype=np.uint8)] = np.arange(10, 16)
_NIBBLE[np.frombuffer(b"ABCDEF", dtype=np.uint8)] = np.arange(10, 16)


def _bits(words: np.ndarray, at: int, width: int) -> np.ndarray:
    """Bits ``[at, at + width)`` of each row of ``words`` (uint64, word 0 the least
    significant): uint64 up to 64 bits, Python ints (an object array) beyond."""
    if width > 64:
        out = np.zeros(len(words), dtype=object)
        for k in range(0, width, 64):
            out |= _bits(words, at + k, min(64, width - k)).astype(object) << k
        return out
    word, shift = divmod(at, 64)
    value = words[:, word] >> np.uint64(shift)
    if shift + width > 64 and word + 1 < words.shape[1]:
        value = value | (words[:, word + 1] << np.uint64(64 - shift))
    if width < 64:
        value = value & np.uint64((1 << width) - 1)
    return value


@dataclass
class RecordColumns:
    """Match records as columns, one entry per record in arrival order: each field of
    :class:`Record` as uint64, or as Python ints (an object array) where it is wider than 64
    bits (``matches`` beyond 64 queries, ``starts`` of two queries or more)."""

    seq: np.ndarray
    partition: np.ndarray
    matches: np.ndarray
    dropped: np.ndarray
    starts: np.ndarray

    def __len__(self) -> int:
        return len(self.seq)

    @classmethod
    def from_records(cls, records: list[Record]) -> RecordColumns:
        def column(values: list[int]) -> np.ndarray:
            if all(0 <= v <= _MASK64 for v in values):
                return np.array(values, dtype=np.uint64)
            out = np.empty(len(values), dtype=object)
            out[:] = values
            return out

        return cls(*(column([getattr(r, name) for r in records]) for name in RECORD_FIELDS))

    def records(self) -> list[Record]:
        """The records as :class:`Record` tuples of Python ints."""
        return [
            Record(*row)
            for row in zip(
                self.seq.tolist(),
                self.partition.tolist(),
                self.matches.tolist(),
                self.dropped.tolist(),
                self.starts.tolist(),
                strict=True,
            )
        ]

    def take(self, rows) -> RecordColumns:
        """The records ``rows`` (an index array, a slice or a mask)."""
        return RecordColumns(
            self.seq[rows],
            self.partition[rows],
            self.matches[rows],
            self.dropped[rows],
            self.starts[rows],
        )


def record_format(nfa: Nfa, seq_bits: int = SEQ_BITS, *, slots: int | None = None) -> RecordFormat:
    """The match record of the engine of ``nfa``: ``seq`` (``seq_bits``), ``partition`` (the
    raw key, :class:`~nfacep.schema.PartitionKey`; 1 bit, always 0, without PARTITION),
    ``matches`` (one bit per query, in file order), ``dropped`` (1 bit) and, when some
    queries report start_seq, ``starts`` (``seq_bits`` for each of them, :attr:`Record.starts`).
    ``slots``: a programmable engine's record, one ``matches`` bit per query slot (bit ``q``:
    the file's query ``q``)."""
    key = nfa.program.key
    widths = {
        "seq": seq_bits,
        "partition": key.width or 1,
        "matches": len(nfa.queries) if slots is None else slots,
        "dropped": 1,
    }
    starting = start_queries(nfa)
    if starting:
        widths["starts"] = seq_bits * len(starting)
    return RecordFormat.from_widths(widths)
