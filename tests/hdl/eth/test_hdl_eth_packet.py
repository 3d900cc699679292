"""The UDP link's headers (hdl/eth/headers.py) and its generic depacketizer and packetizer
(hdl/eth/packet.py), against ``struct`` packing written out by hand for each header: every
header round-trips software ▸ gateware ▸ software, in both directions."""

from __future__ import annotations

import random
import struct

import pytest
from amaranth.hdl import Cat, Module
from amaranth.sim import Simulator

from nfacep.hdl.eth.headers import ARP, ETHERNET, IPV4, PAYLOAD, UDP, Header
from nfacep.hdl.eth.packet import Depacketizer, Packetizer, pack

#: Each header's fields as ``struct`` packs them (an independent statement of the format).
STRUCTS = {
    "ethernet": (">6s6sH", ETHERNET),
    "arp": (">HHBBH6s4s6s4s", ARP),
    "ipv4": (">BBHHHBBH4s4s", IPV4),
    "udp": (">HHHH", UDP),
    "payload": ("<BBHIII", PAYLOAD),
}


def _random_fields(header: Header, rng) -> dict[str, int]:
    return {name: rng.getrandbits(shape.width) for name, shape in header.layout}


def _struct_pack(fmt: str, header: Header, fields: dict[str, int]) -> bytes:
    values = []
    for (name, shape), code in zip(header.layout, _codes(fmt), strict=True):
        v = fields[name]
        values.append(v.to_bytes(shape.width // 8, "big") if code.endswith("s") else v)
    return struct.pack(fmt, *values)


def _codes(fmt: str) -> list[str]:
    codes, digits = [], ""
    for c in fmt[1:]:
        if c.isdigit():
            digits += c
        else:
            codes.append(digits + c)
            digits = ""
    return codes


@pytest.mark.parametrize("name", list(STRUCTS))
def test_header_encode_decode_equal_struct(name):
    fmt, header = STRUCTS[name]
    rng = random.Random(name)
    assert header.length == struct.calcsize(fmt)
    for _ in range(20):
        fields = _random_fields(header, rng)
        raw = _struct_pack(fmt, header, fields)
        assert header.encode(**fields) == raw
        assert header.decode(raw + b"tail") == fields


def test_header_offsets_and_errors():
    assert (IPV4.length, UDP.length, ARP.length, ETHERNET.length) == (20, 8, 28, 14)
    assert IPV4.offset("checksum") == 10 and IPV4.offset("dst") == 16
    assert ARP.offset("tpa") == 24 and PAYLOAD.offset("engine_id") == 8
    # network order: the first byte of a field is its most significant
    assert ETHERNET.wire_byte(12) == ("ethertype", 1) and PAYLOAD.wire_byte(4) == ("seq", 0)
    with pytest.raises(ValueError, match="no field"):
        UDP.encode(port=1)
    with pytest.raises(ValueError, match="byteorder"):
        Header("x", {"a": 1}, byteorder="middle")


@pytest.mark.parametrize("name", list(STRUCTS))
def test_depacketizer_captures_each_header_at_its_offset(name):
    """Frames of random bytes with the header at ``offset``, a byte a cycle with gaps (valid
    low) in between; after the header's last byte ``fields`` is what ``struct`` packed."""
    fmt, header = STRUCTS[name]
    offset = 14 if name not in ("ethernet",) else 0
    dut = Depacketizer(header, offset)
    rng = random.Random(name)
    frames = [_random_fields(header, rng) for _ in range(4)]

    async def bench(ctx):
        for fields in frames:
            raw = rng.randbytes(offset) + _struct_pack(fmt, header, fields) + rng.randbytes(9)
            index = 0
            while index < len(raw):
                valid = rng.random() < 0.8
                ctx.set(dut.frame.valid, valid)
                ctx.set(dut.frame.byte, raw[index] if valid else rng.randrange(256))
                ctx.set(dut.frame.index, index)
                ctx.set(dut.frame.first, index == 0)
                await ctx.tick()
                if valid:
                    index += 1
                if index == offset + header.length and valid:
                    # the cycle after the header's last byte
                    got = ctx.get(dut.fields)
                    assert {k: getattr(got, k) for k, _ in header.layout} == fields
            ctx.set(dut.frame.valid, 0)
            await ctx.tick()
            got = ctx.get(dut.fields)  # kept after the header (the tail changes nothing)
            assert {k: getattr(got, k) for k, _ in header.layout} == fields

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


def test_packetizer_sends_a_stack_as_struct_packs_it():
    """Ethernet, IPv4, UDP and the payload header, packed from signals and constants, loaded
    whole and shifted out: the bytes are ``struct``'s; then a shorter stack (Ethernet, ARP) in
    the same packetizer."""
    rng = random.Random(7)
    stack = [ETHERNET, IPV4, UDP, PAYLOAD]
    length = sum(h.length for h in stack)
    dut = Packetizer(length)
    values = [_random_fields(h, rng) for h in stack]
    arp = [_random_fields(ETHERNET, rng), _random_fields(ARP, rng)]
    m = Module()
    m.submodules.dut = dut
    udp_stack = Cat(*(pack(h, v) for h, v in zip(stack, values, strict=True)))
    arp_stack = Cat(*(pack(h, v) for h, v in zip([ETHERNET, ARP], arp, strict=True)))
    sent = {"udp": bytearray(), "arp": bytearray()}

    async def bench(ctx):
        for name, value, n in (("udp", udp_stack, length), ("arp", arp_stack, 42)):
            ctx.set(dut.i_data, ctx.get(value))
            ctx.set(dut.load, 1)
            await ctx.tick()
            ctx.set(dut.load, 0)
            while len(sent[name]) < n:
                stall = rng.random() < 0.3
                ctx.set(dut.shift, not stall)
                if not stall:
                    sent[name].append(ctx.get(dut.byte))
                await ctx.tick()
            ctx.set(dut.shift, 0)

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()

    def expect(headers, fields):
        return b"".join(
            _struct_pack(STRUCTS[h.name][0], h, f) for h, f in zip(headers, fields, strict=True)
        )

    assert bytes(sent["udp"]) == expect(stack, values)
    assert bytes(sent["arp"]) == expect([ETHERNET, ARP], arp)
    # and back: the depacketizers read what was sent
    assert IPV4.decode(bytes(sent["udp"][14:34])) == values[1]


def test_pack_refuses_unknown_fields_and_fills_missing_with_zeros():
    with pytest.raises(ValueError, match="no field"):
        pack(UDP, {"port": 1})
    sim_value = pack(UDP, {"dst_port": 0x1234})
    m = Module()
    got = {}

    async def bench(ctx):
        got["v"] = ctx.get(sim_value)

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    assert got["v"].to_bytes(8, "little") == struct.pack(">HHHH", 0, 0x1234, 0, 0)


def test_depacketizer_compares_fields_as_their_bytes_pass():
    """``equal``'s flags against the captured field, in both byte orders: equal, one byte off
    (the first, the last), and another frame's value left behind."""
    mac = 0x02005E000002
    compare = {"ours": ("dst", mac), "broadcast": ("dst", (1 << 48) - 1)}
    eth = Depacketizer(ETHERNET, 0, compare)
    pay = Depacketizer(PAYLOAD, ETHERNET.length, {"engine": ("engine_id", 0x1234ABCD)})
    m = Module()
    m.submodules.eth, m.submodules.pay = eth, pay
    cases = [
        (mac, 0x1234ABCD),
        ((1 << 48) - 1, 0x1234ABCC),
        (mac ^ 1 << 40, 0x0234ABCD),
        (mac ^ 1, 0x1234ABCD),
    ]
    got = []

    async def bench(ctx):
        for dst, engine in cases:
            raw = ETHERNET.encode(dst=dst, src=7, ethertype=0x0800)
            for i, b in enumerate(raw + PAYLOAD.encode(version=2, engine_id=engine)):
                for dut in (eth, pay):
                    ctx.set(dut.frame.valid, 1)
                    ctx.set(dut.frame.byte, b)
                    ctx.set(dut.frame.index, i)
                    ctx.set(dut.frame.first, i == 0)
                await ctx.tick()
            for dut in (eth, pay):  # (the flags: two cycles after the field's last byte)
                ctx.set(dut.frame.valid, 0)
            await ctx.tick()
            got.append(
                (ctx.get(eth.equal.ours), ctx.get(eth.equal.broadcast), ctx.get(pay.equal.engine))
            )

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert got == [(1, 0, 1), (0, 1, 0), (0, 0, 0), (0, 0, 1)]


def test_compare_bytes_with_a_register_across_gaps_and_runts():
    """``compare_bytes`` against a value held in a register (as the session's id is): frames
    whose bytes come with gaps of ``valid`` low, a runt that ends just before the field, and
    the register changed between frames; the flag is the field's equality once the frame's
    bytes have passed, whatever came before."""
    from amaranth.hdl import Signal

    from nfacep.hdl.eth.packet import compare_bytes, frame_signature

    at = 3  # (the payload header at byte 3: its session id at bytes 15 to 18)
    frame = frame_signature.flip().create()
    value = Signal(32)
    flag = Signal()
    m = Module()
    compare_bytes(m, frame, flag, at, PAYLOAD, "session", value)
    rng = random.Random(5)
    # (the register's value, the session id on the wire, bytes sent (None: all))
    cases = [
        (0x1234ABCD, 0x1234ABCD, None),
        (0x1234ABCD, 0x1234ABCC, None),
        (0x1234ABCD, 0x0234ABCD, None),
        (0x1234ABCD, 0x1234ABCD, at + PAYLOAD.offset("session")),  # a runt, then ...
        (0x1234ABCD, 0x1234ABCD, None),  # ... a whole frame
        (0x55AA55AA, 0x1234ABCD, None),  # the register changed
        (0x55AA55AA, 0x55AA55AA, None),
    ]
    got = []

    async def bench(ctx):
        for held, wire, sent in cases:
            ctx.set(value, held)
            raw = bytes(at) + PAYLOAD.encode(version=2, session=wire) + bytes(4)
            for i, b in enumerate(raw[:sent]):
                while rng.random() < 0.3:  # a gap
                    ctx.set(frame.valid, 0)
                    await ctx.tick()
                ctx.set(frame.valid, 1)
                ctx.set(frame.byte, b)
                ctx.set(frame.index, i)
                ctx.set(frame.first, i == 0)
                await ctx.tick()
            ctx.set(frame.valid, 0)
            await ctx.tick().repeat(3)
            if sent is None:
                got.append(ctx.get(flag))

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert got == [1, 0, 0, 1, 0, 1]
