"""The tuple wire format (docs/formats.md): exact bit positions, byte order and round trips."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nfacep import wire
from nfacep.io.tuples import Tuples
from nfacep.lang.ast import FieldDecl
from nfacep.lang.types import BoolType, EnumType, Float32Type, IntType, UIntType
from nfacep.schema import Schema


def schema(*fields) -> Schema:
    return Schema("s", tuple(FieldDecl(name, ty) for name, ty in fields))


def f32(bits: int) -> np.float32:
    return np.array([bits], dtype=np.uint32).view(np.float32)[0]


def naive_pack(sch: Schema, rows: list[dict]) -> list[int]:
    """The wire format written as plainly as possible: one field of one tuple at a time."""
    out = []
    for row in rows:
        value, offset = 0, 0
        for f in sch.fields:
            v = row[f.name]
            ty = f.type
            if isinstance(ty, Float32Type):
                raw, width = int(np.array([v], dtype=np.float32).view(np.uint32)[0]), 32
            elif isinstance(ty, BoolType):
                raw, width = int(bool(v)), 1
            else:
                raw, width = int(v) % (1 << ty.bits), ty.bits
            value |= raw << offset
            offset += width
        out.append(value)
    return out


def columns_of(sch: Schema, rows: list[dict]) -> Tuples:
    dtypes = {
        UIntType: np.uint64,
        IntType: np.int64,
        BoolType: bool,
        EnumType: np.int64,
        Float32Type: np.float32,
    }
    cols = {}
    for f in sch.fields:
        dtype = dtypes[type(f.type)]
        cols[f.name] = np.array([row[f.name] for row in rows], dtype=dtype)
    return Tuples(cols, len(rows))


def assert_same_columns(sch: Schema, a: Tuples, b: Tuples) -> None:
    assert a.n == b.n
    for f in sch.fields:
        x, y = a.columns[f.name], b.columns[f.name]
        assert x.dtype == y.dtype, f.name
        if isinstance(f.type, Float32Type):  # bit-exact: NaN payloads, -0
            np.testing.assert_array_equal(x.view(np.uint32), y.view(np.uint32))
        else:
            np.testing.assert_array_equal(x, y)


# --- a hand-computed example ----------------------------------------------------------------

EXAMPLE = schema(
    ("a", UIntType(3)),
    ("b", IntType(5)),
    ("c", BoolType()),
    ("d", EnumType(("x", "y", "z"))),
    ("e", Float32Type()),
)


def test_field_slices():
    assert wire.field_slices(EXAMPLE) == [
        ("a", 0, 3),
        ("b", 3, 5),
        ("c", 8, 1),
        ("d", 9, 2),
        ("e", 11, 32),
    ]
    assert wire.tuple_width(EXAMPLE) == 43
    assert wire.tuple_bytes(EXAMPLE) == 6


def test_hand_computed_example():
    # a=5 -> 101, b=-3 -> 11101 at bit 3, c=1 at bit 8, d='z'=2 -> 10 at bit 9,
    # e=1.0 -> 0x3F800000 at bit 11
    t = columns_of(EXAMPLE, [{"a": 5, "b": -3, "c": True, "d": 2, "e": 1.0}])
    (value,) = wire.pack(EXAMPLE, t)
    assert value == 0b101 | 0b11101 << 3 | 1 << 8 | 0b10 << 9 | 0x3F80_0000 << 11
    assert value == 0x1FC_0000_05ED
    data = wire.to_bytes(EXAMPLE, [value])
    assert data == bytes([0xED, 0x05, 0x00, 0x00, 0xFC, 0x01])  # little-endian, 6 bytes
    assert wire.pack_bytes(EXAMPLE, t) == data
    assert wire.from_bytes(EXAMPLE, data) == [value]
    assert_same_columns(EXAMPLE, wire.unpack(EXAMPLE, [value]), t)


def test_fields_across_64_bit_words():
    sch = schema(("a", UIntType(60)), ("b", IntType(64)), ("c", UIntType(64)), ("d", BoolType()))
    rows = [
        {"a": (1 << 60) - 1, "b": -(1 << 63), "c": (1 << 64) - 1, "d": True},
        {"a": 0, "b": -1, "c": 1 << 63, "d": False},
        {"a": 123456789, "b": (1 << 63) - 1, "c": 0, "d": True},
    ]
    t = columns_of(sch, rows)
    values = wire.pack(sch, t)
    assert values == naive_pack(sch, rows)
    assert values[0] == ((1 << 60) - 1) | (1 << 63) << 60 | ((1 << 64) - 1) << 124 | 1 << 188
    assert wire.tuple_bytes(sch) == 24
    assert_same_columns(sch, wire.unpack(sch, values), t)


def test_no_tuples():
    t = columns_of(EXAMPLE, [])
    assert wire.pack(EXAMPLE, t) == []
    assert wire.to_bytes(EXAMPLE, []) == b""
    assert wire.from_bytes(EXAMPLE, b"") == []
    assert wire.unpack(EXAMPLE, []).n == 0


# --- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ty", "value"),
    [
        (UIntType(3), 8),
        (IntType(5), 16),
        (IntType(5), -17),
        (EnumType(("x", "y", "z")), 3),
        (UIntType(8), -1),
    ],
)
def test_value_out_of_range(ty, value):
    sch = schema(("v", ty))
    dtype = np.int64 if value < 0 or isinstance(ty, IntType | EnumType) else np.uint64
    with pytest.raises(ValueError, match="tuple 1, field 'v'"):
        wire.pack(sch, Tuples({"v": np.array([0, value], dtype=dtype)}, 2))


def test_bad_bytes():
    with pytest.raises(ValueError, match="whole number of 6-byte tuples"):
        wire.from_bytes(EXAMPLE, bytes(7))
    with pytest.raises(ValueError, match="padding bits above bit 42"):
        wire.from_bytes(EXAMPLE, bytes(6) + bytes([0, 0, 0, 0, 0, 0x08]))
    with pytest.raises(ValueError, match="not a packed tuple of 43 bits"):
        wire.to_bytes(EXAMPLE, [1 << 43])
    with pytest.raises(ValueError, match="not a packed tuple"):
        wire.unpack(EXAMPLE, [-1])


def test_bad_enum_index_on_the_wire():
    sch = schema(("d", EnumType(("x", "y", "z"))))
    with pytest.raises(ValueError, match="tuple 0, field 'd': 3 is not a label index"):
        wire.unpack(sch, [3])


# --- round trips ----------------------------------------------------------------------------

FLOAT_SPECIALS = [
    0x0000_0000,
    0x8000_0000,  # +0, -0
    0x7F80_0000,
    0xFF80_0000,  # +inf, -inf
    0x7FC0_0000,
    0xFFC0_0000,
    0x7F80_0001,
    0xFFBF_FFFF,  # quiet, negative, signalling NaNs
    0x0000_0001,
    0x8000_0001,
    0x007F_FFFF,
    0x807F_FFFF,  # subnormals
    0x0080_0000,
    0x7F7F_FFFF,
    0xFF7F_FFFF,
    0x3F80_0000,  # FLT_MIN, ±FLT_MAX, 1.0
]

field_types = st.one_of(
    st.integers(1, 64).map(UIntType),
    st.integers(1, 64).map(IntType),
    st.just(BoolType()),
    st.integers(1, 9).map(lambda k: EnumType(tuple(f"l{i}" for i in range(k)))),
    st.just(Float32Type()),
)


def values_of(ty):
    if isinstance(ty, Float32Type):
        return st.one_of(st.sampled_from(FLOAT_SPECIALS), st.integers(0, (1 << 32) - 1)).map(f32)
    if isinstance(ty, BoolType):
        return st.booleans()
    lo, hi = ty.range
    return st.one_of(
        st.sampled_from([lo, hi, 0 if lo <= 0 <= hi else lo, lo + 1 if lo < hi else lo]),
        st.integers(lo, hi),
    )


@st.composite
def schemas_and_rows(draw):
    types = draw(st.lists(field_types, min_size=1, max_size=10))
    sch = schema(*((f"f{i}", ty) for i, ty in enumerate(types)))
    n = draw(st.integers(0, 12))
    rows = [{f.name: draw(values_of(f.type)) for f in sch.fields} for _ in range(n)]
    return sch, rows


@settings(max_examples=300)
@given(schemas_and_rows())
def test_round_trip(case):
    sch, rows = case
    t = columns_of(sch, rows)
    values = wire.pack(sch, t)
    assert values == naive_pack(sch, rows)
    width = wire.tuple_width(sch)
    assert all(0 <= v < 1 << width for v in values)
    assert wire.field_slices(sch)[-1][1] + wire.field_slices(sch)[-1][2] == width
    data = wire.to_bytes(sch, values)
    nb = wire.tuple_bytes(sch)
    assert nb == (width + 7) // 8
    assert data == b"".join(v.to_bytes(nb, "little") for v in values)
    assert wire.pack_bytes(sch, t) == data
    assert wire.from_bytes(sch, data) == values
    assert_same_columns(sch, wire.unpack(sch, values), t)
    assert_same_columns(sch, wire.unpack_bytes(sch, data), t)


def test_many_tuples_vectorised():
    sch = schema(
        ("a", UIntType(64)),
        ("b", IntType(37)),
        ("c", Float32Type()),
        ("d", BoolType()),
        ("e", EnumType(("x", "y", "z"))),
    )
    rng = np.random.default_rng(0)
    n = 200_000
    t = Tuples(
        {
            "a": rng.integers(0, 1 << 64, n, dtype=np.uint64, endpoint=False),
            "b": rng.integers(-(1 << 36), (1 << 36) - 1, n, dtype=np.int64, endpoint=True),
            "c": rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32),
            "d": rng.random(n) < 0.5,
            "e": rng.integers(0, 3, n, dtype=np.int64),
        },
        n,
    )
    values = wire.pack(sch, t)
    assert len(values) == n
    assert_same_columns(sch, wire.unpack(sch, values), t)
    data = wire.pack_bytes(sch, t)
    assert len(data) == n * wire.tuple_bytes(sch)
    assert_same_columns(sch, wire.unpack_bytes(sch, data), t)
    assert wire.from_bytes(sch, data[: 1000 * wire.tuple_bytes(sch)]) == values[:1000]
