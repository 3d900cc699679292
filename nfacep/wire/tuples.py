"""The tuple wire format: a tuple's fields packed LSB-first in declaration order, as Python
ints (:func:`pack`, :func:`unpack`) or bytes (:func:`pack_bytes`, :func:`unpack_bytes`,
:func:`to_bytes`, :func:`from_bytes`), column-wise on 64-bit words with numpy; and the texts of
fields and partition keys (:func:`field_text`, :func:`key_text`). The format is described in
:mod:`nfacep.wire`.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

import numpy as np

from ..io.tuples import Tuples, format_value
from ..lang.types import BoolType, EnumType, FieldType, Float32Type, IntType, UIntType
from ..schema import PartitionKey, PartitionText, Schema

if TYPE_CHECKING:
    pass


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
