"""One depacketizer and one packetizer for every header of :mod:`.headers` (LiteEth's
``packet.py``): a layer is its :class:`~.headers.Header` and a small component around these.

The receive side reads the frame as the MAC hands it on: a byte a cycle with its offset from
the destination address (:data:`frame_signature`, from :class:`~.mac.MacRx`; the line does not
wait). A :class:`Depacketizer` captures the header at a fixed offset into a view of its layout.
The transmit side loads a whole header stack into a :class:`Packetizer`'s shift register
(:func:`pack` gives its bytes) and shifts it out a byte at a time.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from functools import reduce

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .headers import INDEX_BITS, Header

__all__ = [
    "Depacketizer",
    "Packetizer",
    "compare_bytes",
    "frame_signature",
    "on_bytes",
    "pack",
]

#: A received frame's bytes, as the MAC hands them on (no ``ready``: the line does not wait):
#: ``byte`` is valid with ``valid``, ``index`` its offset from the destination address, and
#: ``first`` is high with a frame's first byte (``index`` 0). A frame's valid bytes come in
#: order of ``index``, each one more than the last (:class:`~.mac.MacRx` hands them on back to
#: back; a reader allows gaps of ``valid`` low).
frame_signature = wiring.Signature(
    {"valid": Out(1), "byte": Out(8), "index": Out(INDEX_BITS), "first": Out(1)}
)


def on_bytes(m: Module, frame, cases: Mapping[int, list]) -> None:
    """Adds ``cases`` (offset: statements for the ``sync`` domain) to ``m``: each list takes
    effect at the edge after the frame's byte at its offset is handed on (``frame.byte`` is that
    byte). For the tests a layer registers as its header's bytes pass.

    Each offset is decoded a byte ahead: a flip-flop per offset remembers whether the last
    valid byte was the one before it, so that the statements' enable is ``valid``, that
    flip-flop and ``first`` (a LUT from registers), not the index compared with each offset
    (timing: the enables of a header's fields, at 125 MHz). Offset 0 is ``first``."""
    for offset in sorted(cases):
        if offset == 0:
            here = frame.first
        else:
            ahead = Signal(name=f"before_{offset}", reset_less=True)
            with m.If(frame.valid):
                m.d.sync += ahead.eq(frame.index == offset - 1)
            here = ahead & ~frame.first
        with m.If(frame.valid & here):
            m.d.sync += cases[offset]


def compare_bytes(m: Module, frame, flag: Signal, at: int, header: Header, field: str, value):
    """Sets ``flag`` (a register of the ``sync`` domain) to whether ``field`` of ``header``,
    at byte ``at`` of the frame, equals ``value`` (a value of the field's width, or a
    constant), compared a byte at a time as its bytes pass; the flag holds the answer from two
    cycles after the field's last byte until the same bytes of the next frame.

    One statement per flag, each of its terms a register (timing: the receive clock's 125 MHz
    beside any engine). One-hot flip-flops say which of the field's bytes comes next (its
    first from ``index`` two bytes ahead, the next shifted along with ``valid``: no wide
    compare of ``index`` per byte), and a register
    takes the value's byte it will be compared with (at offset 0, ``first`` and the value's
    first byte); when that byte comes, the compare (8 bits against a register) and whether it
    is the field's first byte are registered, and a cycle later the flag takes them, enabled
    by one flip-flop."""
    first, width = header.offset(field), header.layout[field].width
    wire = [header.wire_byte(k)[1] for k in range(first, first + width // 8)]
    value = Const(value, width) if isinstance(value, int) else Value.cast(value)
    byte_of = [value.word_select(j, 8) for j in wire]
    name = f"{header.name}_{field}"
    start_at = at + first
    # ``ahead[i]``: the next valid byte is the field's byte i (``~first``: of this frame)
    ahead = Signal(len(wire), name=f"{name}_ahead", reset_less=True)
    expected = Signal(8, name=f"{name}_expected", reset_less=True)
    # (this byte is the field's byte i; at offset 0 the first is ``first``)
    now = [ahead[i] & ~frame.first for i in range(len(wire))]
    if start_at == 0:
        now[0] = frame.first
    if start_at >= 2:
        pre = Signal(name=f"{name}_pre", reset_less=True)  # (two bytes ahead)
        with m.If(frame.valid):
            m.d.sync += pre.eq(frame.index == start_at - 2)
        near = pre & ~frame.first
    else:  # (at offset 1 the byte after ``first``; at 0 ``first`` itself, below)
        near = frame.first if start_at == 1 else Const(0)
    following = [Mux(now[i], byte_of[i + 1], 0) for i in range(len(wire) - 1)]
    with m.If(frame.valid):
        m.d.sync += [
            ahead.eq(Cat(near, *now[:-1])),
            expected.eq(reduce(operator.or_, [Mux(near, byte_of[0], 0), *following])),
        ]
    hit, start, enable = (
        Signal(name=f"{name}_{x}", reset_less=True) for x in ("hit", "start", "enable")
    )
    hit_now = frame.byte == expected
    if start_at == 0:
        hit_now = Mux(frame.first, frame.byte == byte_of[0], hit_now)
    m.d.sync += [
        hit.eq(hit_now),
        start.eq(now[0]),
        enable.eq(frame.valid & reduce(operator.or_, now)),
    ]
    with m.If(enable):
        m.d.sync += flag.eq(hit & (start | flag))


class Depacketizer(wiring.Component):
    """Captures ``header`` from the frame's bytes ``offset`` to ``offset + header.length - 1``,
    and compares fields with constants as their bytes pass.

    ``equal`` has a flag per name of ``compare`` (name: ``(field, value)``): the field is
    ``value``. It is computed a byte at a time (:func:`compare_bytes`: a few flip-flops, an
    8-bit compare per byte) instead of from the captured field (its flip-flops and a wide
    compare): the tests a layer makes on its own addresses and fixed fields cost no more than
    the bytes.

    Latency: each byte is in ``fields`` from the cycle after the MAC hands it on, so the whole
    header from the cycle after its last byte (index ``offset + header.length``) until the same
    bytes of the next frame; a flag of ``equal`` from two cycles after its field's last byte
    (:func:`compare_bytes`).
    The registers have no reset (only what frames set is read); what nothing reads is
    synthesised away.

    Members
    -------
    frame : ``In(frame_signature)``
    fields : ``Out(header.layout)``
    equal : ``Out(StructLayout({name: 1 for name in compare}))``
    """

    def __init__(self, header: Header, offset: int, compare: Mapping[str, tuple] | None = None):
        if offset < 0 or offset + header.length > 2**INDEX_BITS - 1:
            raise ValueError(f"{header.name} at byte {offset} is beyond the frame's index")
        self._header = header
        self._offset = offset
        self._compare = dict(compare or {})
        for name, (field, _) in self._compare.items():
            if field not in header.layout.members:
                raise ValueError(f"{name}: {header.name} has no field {field}")
        members = {"frame": In(frame_signature), "fields": Out(header.layout)}
        if self._compare:
            members["equal"] = Out(data.StructLayout(dict.fromkeys(self._compare, 1)))
        super().__init__(members)

    @property
    def header(self) -> Header:
        return self._header

    @property
    def offset(self) -> int:
        return self._offset

    def elaborate(self, platform):
        m = Module()
        header, byte = self._header, self.frame.byte
        raw = Signal(header.layout.size, name=f"{header.name}_raw", reset_less=True)
        m.d.comb += self.fields.eq(raw)
        cases = {}
        for k in range(header.length):
            at = header.byte_offset(k)
            cases[self._offset + k] = [raw[at : at + 8].eq(byte)]
        for name, (field, value) in self._compare.items():
            flag = Signal(name=f"{header.name}_{name}", reset_less=True)
            m.d.comb += getattr(self.equal, name).eq(flag)
            compare_bytes(m, self.frame, flag, self._offset, header, field, value)
        on_bytes(m, self.frame, cases)
        return m


def pack(header: Header, fields: Mapping[str, Value | int]) -> Value:
    """The bytes of ``header`` with ``fields`` (name: value or constant; missing ones are 0) in
    wire order, the first byte in the low bits: what a :class:`Packetizer` sends. A value
    narrower than its field is zero-extended; a wider one is cut."""
    unknown = set(fields) - set(header.layout.members)
    if unknown:
        raise ValueError(f"{header.name} has no field {', '.join(sorted(unknown))}")
    wide = {}
    for name, shape in header.layout:
        value = fields.get(name, 0)
        width = shape.width
        value = Const(value, width) if isinstance(value, int) else Value.cast(value)
        wide[name] = Cat(value, Const(0, width))[:width]
    out = []
    for k in range(header.length):
        name, j = header.wire_byte(k)
        out.append(wide[name].word_select(j, 8))
    return Cat(*out)


class Packetizer(wiring.Component):
    """A header stack of up to ``length`` bytes, sent a byte at a time.

    ``load`` takes ``i_data`` (:func:`pack`'s bytes, the first in the low bits; a stack is the
    :class:`~amaranth.hdl.Cat` of its headers' packs) at the clock edge; ``byte`` is the byte
    to send, from the cycle after, and ``shift`` moves to the next one at the edge. Who drives
    ``shift`` counts the bytes.

    With ``groups`` the bytes are cut into that many groups of consecutive bytes (the last
    may be shorter), each loaded and shifted on its own bit of ``load`` and ``shift``: the
    driver gives every group a copy of the same enables from registers of its own, so that no
    one net enables a long stack's every flip-flop (timing). The copies must agree.

    Members
    -------
    load, shift : ``In(groups)``
    i_data : ``In(8 * length)``
    byte : ``Out(8)``
    """

    def __init__(self, length: int, *, groups: int = 1):
        if length < 1:
            raise ValueError(f"a header has at least one byte, not {length}")
        if not 1 <= groups <= length:
            raise ValueError(f"{length} bytes make 1 to {length} groups, not {groups}")
        self._length, self._groups = length, groups
        super().__init__(
            {"load": In(groups), "shift": In(groups), "i_data": In(8 * length), "byte": Out(8)}
        )

    @property
    def length(self) -> int:
        return self._length

    @property
    def groups(self) -> int:
        return self._groups

    def elaborate(self, platform):
        m = Module()
        shreg = Signal(8 * self._length)
        m.d.comb += self.byte.eq(shreg[:8])
        size = -(-self._length // self._groups)
        shifted = shreg >> 8
        for g in range(-(-self._length // size)):  # (every group with bytes)
            bits = slice(8 * size * g, 8 * min(size * (g + 1), self._length))
            with m.If(self.load[g]):
                m.d.sync += shreg[bits].eq(self.i_data[bits])
            with m.Elif(self.shift[g]):
                m.d.sync += shreg[bits].eq(shifted[bits])
        return m
