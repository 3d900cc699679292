"""The gateware's view of a tuple: a :class:`~amaranth.lib.data.StructLayout` of its fields.

The layout is the wire format of :mod:`nfacep.wire` (docs/formats.md, "The tuple wire
format"): fields LSB-first in declaration order, so a packed tuple value from
:func:`nfacep.wire.pack` drives a signal of this layout directly.
"""

from __future__ import annotations

from amaranth.hdl import Shape, signed, unsigned
from amaranth.lib import data

from nfacep.lang.types import BoolType, EnumType, FieldType, Float32Type, IntType, UIntType
from nfacep.schema import Schema

__all__ = ["field_shape", "history_layout", "params_layout", "tuple_layout"]


def field_shape(ty: FieldType) -> Shape:
    """The shape of one field: UINT(n) → ``unsigned(n)``, INT(n) → ``signed(n)``, BOOL →
    ``unsigned(1)``, ENUM → ``unsigned(bits)`` (the label index), FLOAT32 → ``unsigned(32)``
    (the raw IEEE 754 bits)."""
    if isinstance(ty, UIntType):
        return unsigned(ty.width)
    if isinstance(ty, IntType):
        return signed(ty.width)
    if isinstance(ty, BoolType):
        return unsigned(1)
    if isinstance(ty, EnumType):
        return unsigned(ty.bits)
    if isinstance(ty, Float32Type):
        return unsigned(32)
    raise TypeError(f"not a field type: {ty!r}")


def params_layout(types: dict[str, FieldType]) -> data.StructLayout | None:
    """The engine's parameter registers (:attr:`nfacep.schema.Program.parameters`), laid out as
    a tuple of their values (:func:`nfacep.settings.params_schema`); None without any."""
    if not types:
        return None
    return data.StructLayout({name: field_shape(ty) for name, ty in types.items()})


def tuple_layout(schema: Schema) -> data.StructLayout:
    """The layout of a tuple of ``schema``, bit for bit the wire format of :mod:`nfacep.wire`."""
    return data.StructLayout({f.name: field_shape(f.type) for f in schema.fields})


def history_layout(schema: Schema, depth: dict[str, int]) -> data.StructLayout | None:
    """What a partition keeps for PREV (:attr:`nfacep.nfa.Nfa.history`, ``depth``): ``count``,
    how many tuples of the partition came before (up to the deepest PREV, so all zero is a
    fresh partition's), and per field ``f`` its last ``depth[f]`` values, ``values[f][0]`` the
    latest. None without PREV."""
    if not depth:
        return None
    most = max(depth.values())
    values = {f: data.ArrayLayout(field_shape(schema.field(f).type), k) for f, k in depth.items()}
    return data.StructLayout(
        {"count": unsigned(most.bit_length()), "values": data.StructLayout(values)}
    )
