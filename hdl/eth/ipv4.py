"""The IPv4 layer (RFC 791, no options): :class:`Ipv4Rx` reads and checks a received packet's
header; :class:`Ipv4Checksum` and :func:`header` build a sent one's."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .headers import ETHERNET, ETHERTYPE_IPV4, IPV4, ipv4_address
from .packet import Depacketizer, frame_signature, on_bytes

__all__ = ["Ipv4Checksum", "Ipv4Rx", "header"]

#: What the board sends: version 4, IHL 5, no TOS, don't fragment, a TTL of 64.
_VER_IHL, _FLAGS, _TTL = 0x45, 0x4000, 64


class Ipv4Rx(wiring.Component):
    """The IPv4 header of a received frame (:data:`~.headers.IPV4`, after the Ethernet header)
    and the tests on it.

    ``for_us``: the Ethertype below says IPv4 (registered a cycle after the Ethertype: timing)
    and the destination is ``ip``; ``supported``:
    version 4 without options; ``fragment``: more fragments follow or this is not the first
    (combinational from the fields). The header checksum is summed as the bytes pass:
    ``checksum_ok`` is registered two cycles after the header's last byte (at the bytes
    ``offset + 20`` and ``+ 21``: timing), ``end`` (the frame's offset just past the packet)
    when the length is in (at byte ``offset + 4``).

    Members
    -------
    frame : ``In(frame_signature)``
    ethertype : ``In(16)``
    fields : ``Out(IPV4.layout)``
    for_us, supported, fragment, checksum_ok : ``Out(1)``
    end : ``Out(17)``
    """

    def __init__(self, ip: bytes, *, offset: int = ETHERNET.length):
        self._ip = ipv4_address(ip)
        self._offset = offset
        super().__init__(
            {
                "frame": In(frame_signature),
                "ethertype": In(16),
                "fields": Out(IPV4.layout),
                "for_us": Out(1),
                "supported": Out(1),
                "fragment": Out(1),
                "checksum_ok": Out(1),
                "end": Out(17),
            }
        )

    def elaborate(self, platform):
        m = Module()
        m.submodules.header = header = Depacketizer(IPV4, self._offset, {"ours": ("dst", self._ip)})
        wiring.connect(m, wiring.flipped(self.frame), header.frame)
        f = header.fields
        is_ipv4 = Signal()
        m.d.sync += is_ipv4.eq(self.ethertype == ETHERTYPE_IPV4)
        m.d.comb += [
            self.fields.eq(f),
            self.for_us.eq(is_ipv4 & header.equal.ours),
            self.supported.eq(f.ver_ihl == _VER_IHL),
            self.fragment.eq(f.flags_fragment[:14] != 0),  # more fragments, or an offset
        ]
        at = self._offset
        high = Signal(8, reset_less=True)
        total = Signal(20, reset_less=True)  # the header's 10 words, summed
        folded = Signal(17, reset_less=True)  # the sum folded once, then twice
        end = Signal(17, reset_less=True)
        checksum_ok = Signal(reset_less=True)
        m.d.comb += [self.checksum_ok.eq(checksum_ok), self.end.eq(end)]
        byte = self.frame.byte
        cases = {}
        for k in range(0, IPV4.length, 2):
            cases[at + k] = [high.eq(byte)]
            cases[at + k + 1] = [total.eq((0 if k == 0 else total) + Cat(byte, high))]
        cases[at + 4].append(end.eq(f.length + at))
        cases[at + IPV4.length] = [folded.eq(total[:16] + total[16:])]
        cases[at + IPV4.length + 1] = [checksum_ok.eq((folded[:16] + folded[16])[:16] == 0xFFFF)]
        on_bytes(m, self.frame, cases)
        return m


class Ipv4Checksum(wiring.Component):
    """The header checksum of the packets the board sends (:func:`header` from ``src`` with
    ``protocol``), from the fields that change: ``length``, ``ident`` and ``dst``.

    Latency: ``checksum`` is that of the inputs four cycles before (three adds and a fold,
    registered: timing); the inputs must hold for the first two of them.

    Members
    -------
    length, ident : ``In(16)``
    dst : ``In(32)``
    checksum : ``Out(16)``
    """

    def __init__(self, src: bytes, protocol: int):
        src_ip = int.from_bytes(src, "big")
        words = (_VER_IHL << 8, _FLAGS, _TTL << 8 | protocol, src_ip >> 16, src_ip & 0xFFFF)
        self._constant = sum(words)
        super().__init__({"length": In(16), "ident": In(16), "dst": In(32), "checksum": Out(16)})

    def elaborate(self, platform):
        m = Module()
        part1, part2 = Signal(17), Signal(17)
        total = Signal(20)
        fold = Signal(17)
        m.d.sync += [
            part1.eq(self.length + self.ident),
            part2.eq(self.dst[16:] + self.dst[:16]),
            total.eq(part1 + part2 + self._constant),
            fold.eq(total[:16] + total[16:]),
            self.checksum.eq(~(fold[:16] + fold[16])[:16]),
        ]
        return m


def header(
    *, length: Value, ident: Value, checksum: Value, src: int, dst: Value, protocol: int
) -> dict:
    """The fields of a sent packet's header (:data:`~.headers.IPV4`)."""
    return {
        "ver_ihl": _VER_IHL,
        "length": length,
        "ident": ident,
        "flags_fragment": _FLAGS,
        "ttl": _TTL,
        "protocol": protocol,
        "checksum": checksum,
        "src": src,
        "dst": dst,
    }
