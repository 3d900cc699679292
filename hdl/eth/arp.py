"""The ARP layer (RFC 826, IPv4 over Ethernet): :class:`ArpRx` recognises a request for the
board's address; :func:`reply` is the header of the answer, for a
:class:`~.packet.Packetizer`."""

from __future__ import annotations

from amaranth.hdl import Module, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .headers import ARP, ETHERNET, ETHERTYPE_ARP, ETHERTYPE_IPV4, ipv4_address
from .packet import Depacketizer, frame_signature

__all__ = ["ArpRx", "reply"]

#: An Ethernet/IPv4 ARP packet's fixed fields (``oper`` aside).
_ETHERNET_IPV4 = {"htype": 1, "ptype": ETHERTYPE_IPV4, "hlen": 6, "plen": 4}
_REQUEST, _REPLY = 1, 2


class ArpRx(wiring.Component):
    """The ARP header of a received frame (:data:`~.headers.ARP`, after the Ethernet header)
    and whether it is a request for ``ip`` from an Ethernet/IPv4 station.

    Latency: each field from the cycle after its last byte, ``request`` too (its tests are made
    as the bytes pass); ``is_arp`` (the Ethertype below says ARP) a cycle after the Ethertype
    (a register: timing, its 16-bit compare reached the frame's class in the same cycle).

    Members
    -------
    frame : ``In(frame_signature)``
    ethertype : ``In(16)``
        The Ethernet header's.
    fields : ``Out(ARP.layout)``
    is_arp, request : ``Out(1)``
    """

    def __init__(self, ip: bytes, *, offset: int = ETHERNET.length):
        self._ip = ipv4_address(ip)
        self._offset = offset
        super().__init__(
            {
                "frame": In(frame_signature),
                "ethertype": In(16),
                "fields": Out(ARP.layout),
                "is_arp": Out(1),
                "request": Out(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        compare = {name: (name, value) for name, value in _ETHERNET_IPV4.items()}
        compare |= {"oper": ("oper", _REQUEST), "tpa": ("tpa", self._ip)}
        m.submodules.header = header = Depacketizer(ARP, self._offset, compare)
        wiring.connect(m, wiring.flipped(self.frame), header.frame)
        m.d.comb += [
            self.fields.eq(header.fields),
            self.request.eq(Value.cast(header.equal).all()),
        ]
        m.d.sync += self.is_arp.eq(self.ethertype == ETHERTYPE_ARP)
        return m


def reply(*, mac: Value | int, ip: Value | int, peer_mac: Value, peer_ip: Value) -> dict:
    """The fields of the ARP reply from ``mac``/``ip`` to the station that asked."""
    return {
        **_ETHERNET_IPV4,
        "oper": _REPLY,
        "sha": mac,
        "spa": ip,
        "tha": peer_mac,
        "tpa": peer_ip,
    }
