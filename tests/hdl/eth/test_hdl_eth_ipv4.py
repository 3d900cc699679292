"""The IPv4 layer's gateware (hdl/eth/ipv4.py): the sent header's checksum against the software
one of the payload format module, and the received header's tests on frames built by it."""

from __future__ import annotations

import random

from amaranth.sim import Simulator

from nfacep.hdl.eth.headers import IPV4, PROTOCOL_UDP, UDP
from nfacep.hdl.eth.ipv4 import Ipv4Checksum, Ipv4Rx, header
from nfacep.links.udp import protocol as udp

SRC = bytes([10, 0, 0, 2])


def test_checksum_of_sent_headers_equals_software():
    """Four cycles after its inputs, the checksum makes the header (as :func:`header` builds
    it) sum to 0xFFFF, as ``ip_checksum`` computes it."""
    dut = Ipv4Checksum(SRC, PROTOCOL_UDP)
    rng = random.Random(1)
    cases = [(rng.randrange(28, 1500), rng.getrandbits(16), rng.getrandbits(32)) for _ in range(20)]

    async def bench(ctx):
        for length, ident, dst in cases:
            ctx.set(dut.length, length)
            ctx.set(dut.ident, ident)
            ctx.set(dut.dst, dst)
            await ctx.tick().repeat(4)
            fields = header(
                length=length,
                ident=ident,
                checksum=ctx.get(dut.checksum),
                src=int.from_bytes(SRC, "big"),
                dst=dst,
                protocol=PROTOCOL_UDP,
            )
            raw = IPV4.encode(**fields)
            assert udp.ip_checksum(raw) == 0, (length, ident, dst)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


def test_received_header_tests():
    """Frames from the software encoder: for us or not, a bad checksum, a fragment, options."""
    board = udp.Endpoint.parse("02:00:5e:00:00:02", "10.0.0.2", 5000)
    host = udp.Endpoint.parse("02:00:5e:00:00:01", "10.0.0.1", 40001)
    good = udp.udp_frame(host, board, b"x" * 20)
    other = udp.udp_frame(host, udp.Endpoint(board.mac, bytes([10, 0, 0, 9]), 5000), b"x" * 20)
    bad_sum = udp.udp_frame(host, board, b"x" * 20, checksum_delta=1)

    def patched(frame, at, value):
        ip = bytearray(frame[14:34])
        ip[at] = value
        ip[10:12] = b"\0\0"
        ip[10:12] = udp.ip_checksum(bytes(ip)).to_bytes(2, "big")
        return frame[:14] + bytes(ip) + frame[34:]

    fragment = patched(good, 6, 0x20)  # more fragments
    options = patched(good, 0, 0x46)
    frames = {
        "good": (good, (1, 1, 0, 1)),
        "other": (other, (0, 1, 0, 1)),
        "bad_sum": (bad_sum, (1, 1, 0, 0)),
        "fragment": (fragment, (1, 1, 1, 1)),
        "options": (options, (1, 0, 0, 1)),
    }
    dut = Ipv4Rx(board.ip)
    got = {}

    async def bench(ctx):
        ctx.set(dut.ethertype, 0x0800)
        for name, (frame, _) in frames.items():
            for i, b in enumerate(frame):
                ctx.set(dut.frame.valid, 1)
                ctx.set(dut.frame.byte, b)
                ctx.set(dut.frame.index, i)
                ctx.set(dut.frame.first, i == 0)
                await ctx.tick()
            ctx.set(dut.frame.valid, 0)
            got[name] = tuple(
                ctx.get(s) for s in (dut.for_us, dut.supported, dut.fragment, dut.checksum_ok)
            )
            assert ctx.get(dut.end) == 14 + len(b"x" * 20) + 28

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert got == {name: flags for name, (_, flags) in frames.items()}


def test_max_payload_is_what_an_ip_packet_of_1500_bytes_leaves_after_the_headers():
    payload = udp.MAX_PAYLOAD
    assert payload == 1500 - IPV4.length - UDP.length
