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

The tuple format is :mod:`.tuples`'s, the record format :mod:`.records`'.
"""

from __future__ import annotations

from .records import (
    RECORD_FIELDS,
    SEQ_BITS,
    Record,
    RecordColumns,
    RecordFormat,
    record_format,
    start_queries,
)
from .tuples import (
    field_slices,
    field_text,
    from_bytes,
    hex_lines,
    key_raw,
    key_text,
    pack,
    pack_bytes,
    raw_column,
    to_bytes,
    tuple_bytes,
    tuple_width,
    unpack,
    unpack_bytes,
)

__all__ = [
    "RECORD_FIELDS",
    "SEQ_BITS",
    "Record",
    "RecordColumns",
    "RecordFormat",
    "field_slices",
    "field_text",
    "from_bytes",
    "hex_lines",
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
