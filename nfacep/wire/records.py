"""The match record format: the fields the engine emits for a tuple that matched or was dropped
(``seq``, ``partition``, ``matches``, ``dropped``, ``starts``), their layout for a query file
(:func:`record_format`), and records encoded and decoded one by one (:class:`Record`) or
column-wise (:class:`RecordColumns`), from bytes or hex lines.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from .tuples import _MASK64

if TYPE_CHECKING:
    from ..nfa import Nfa


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
