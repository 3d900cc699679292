"""The UDP layer (RFC 768): :class:`UdpRx` reads and checks a received datagram's header;
:func:`header` builds a sent one's (without a checksum, which IPv4 allows)."""

from __future__ import annotations

from amaranth.hdl import Module, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .headers import ETHERNET, IPV4, PROTOCOL_UDP, UDP
from .packet import Depacketizer, frame_signature, on_bytes

__all__ = ["UdpRx", "header"]


class UdpRx(wiring.Component):
    """The UDP header of a received frame (:data:`~.headers.UDP`, after the IPv4 header) and
    the tests on it.

    ``is_udp``: the IPv4 header below says UDP; ``port_ok``: the destination port is ``port``
    (combinational from the fields). ``length_ok``: the UDP length fills the IPv4 packet
    exactly, registered when the length is in (at byte ``offset + 6``: timing), an equality
    with the IPv4 length less its header's, which a register of its own holds from the IPv4
    header on (no adder before the comparison: timing).

    Members
    -------
    frame : ``In(frame_signature)``
    protocol : ``In(8)``
    ip_length : ``In(16)``
        The IPv4 header's.
    fields : ``Out(UDP.layout)``
    is_udp, port_ok, length_ok : ``Out(1)``
    """

    def __init__(self, port: int, *, offset: int = ETHERNET.length + IPV4.length):
        if not 0 < port < 65536:
            raise ValueError(f"a UDP port is 1 to 65535, not {port}")
        self._port = port
        self._offset = offset
        super().__init__(
            {
                "frame": In(frame_signature),
                "protocol": In(8),
                "ip_length": In(16),
                "fields": Out(UDP.layout),
                "is_udp": Out(1),
                "port_ok": Out(1),
                "length_ok": Out(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        m.submodules.header = header = Depacketizer(
            UDP, self._offset, {"ours": ("dst_port", self._port)}
        )
        wiring.connect(m, wiring.flipped(self.frame), header.frame)
        f = header.fields
        length_ok = Signal(reset_less=True)
        m.d.comb += [
            self.fields.eq(f),
            self.is_udp.eq(self.protocol == PROTOCOL_UDP),
            self.port_ok.eq(header.equal.ours),
            self.length_ok.eq(length_ok),
        ]
        # the IPv4 payload's length (negative, so never equal, below an IPv4 header's): set
        # from the IPv4 header, bytes before the UDP length comes
        expected = Signal(range(-IPV4.length, 1 << 16), reset_less=True)
        m.d.sync += expected.eq(self.ip_length - IPV4.length)
        test = length_ok.eq(f.length == expected)
        on_bytes(m, self.frame, {self._offset + UDP.length - 2: [test]})
        return m


def header(*, src_port: int, dst_port: Value, length: Value) -> dict:
    """The fields of a sent datagram's header (:data:`~.headers.UDP`), checksum 0 (none)."""
    return {"src_port": src_port, "dst_port": dst_port, "length": length, "checksum": 0}
