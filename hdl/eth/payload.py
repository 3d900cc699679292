"""The nfacep payload layer of the UDP link, on top of UDP (the format is
:mod:`nfacep.links.udp.protocol`): what its receive and transmit sides share, the classes of
a received frame (:class:`FrameClass`), the events it hands on (:class:`EventKind`,
:func:`event_layout`) and what the layers below report (:data:`LOWER`).

Its parts, each in a module of its own: the receive side (:class:`~.payload_rx.PayloadRx`,
which classifies each received frame from what the layers below found, in
:mod:`~.payload_classify`, and hands on the tuple bytes of TUPLES packets) and the transmit
side (:class:`~.payload_tx.UdpTx`, which sends RECORDS, STATUS, ARP and echo replies: the
headers of the layers below in :mod:`~.payload_headers`, the STATUS and RECORDS bodies in
:mod:`~.payload_records`).
"""

from __future__ import annotations

from amaranth.lib import data, enum

from nfacep.links.protocol import SWITCH_BYTES
from nfacep.links.udp.protocol import (
    FRAME_CLASSES,
    HEADER_BYTES,
)

from .headers import (
    ETHERNET,
    ICMP,
    IPV4,
    PAYLOAD,
    UDP,
)

__all__ = ["ECHO_AT", "LOWER", "PAYLOAD_AT", "EventKind", "FrameClass", "event_layout"]

#: Where the payload starts in a frame (no VLAN tag, no IPv4 options).
PAYLOAD_AT = ETHERNET.length + IPV4.length + UDP.length
assert PAYLOAD.length == HEADER_BYTES


class FrameClass(enum.IntEnum, shape=4):
    """A received frame's class (``FRAME_CLASSES`` of :mod:`nfacep.links.udp.protocol`, in
    order)."""

    ACCEPTED = 0
    BAD_SIZE = 1
    BAD_FCS = 2
    NOT_FOR_US = 3
    IP_UNSUPPORTED = 4
    BAD_IP_CHECKSUM = 5
    IP_FRAGMENT = 6
    BAD_UDP = 7
    BAD_HEADER = 8
    FOREIGN = 9
    ENGINE_FULL = 10
    BAD_LOAD = 11


assert [c.name.lower() for c in FrameClass] == list(FRAME_CLASSES)


class EventKind(enum.IntEnum, shape=3):
    """What an accepted frame asks for."""

    TUPLES = 0
    STATUS_REQ = 1
    RESET = 2
    ARP = 3
    PARAMS = 4
    CLOSE = 5
    ECHO = 6  # an ICMP echo request
    LOAD = 7


def event_layout(params_bytes: int = 0, load: bool = False) -> data.StructLayout:
    """One received frame: its class and, when accepted, what it asks for, who sent it and
    its session id (an ICMP echo request: ``seq`` holds its IPv4 length in the low 16 bits and
    its ICMP checksum in the high ones); with ``params_bytes`` (bytes of the engine's runtime
    parameters), a PARAMS packet's body (``switch``: the tuple number in the low 48 bits, the
    values above); with ``load`` (a programmable engine), ``load_offset``: where the load being
    received stands after the frame (STATUS's), ``load_data``: a LOAD carries bytes of a load,
    and a LOAD's ``seq`` holds how many."""
    fields = {
        "cls": FrameClass,
        "kind": EventKind,
        "seq": 32,
        "mac": 48,
        "ip": 32,
        "port": 16,
        "session": 32,
    }
    if params_bytes:
        fields["switch"] = 8 * (SWITCH_BYTES + params_bytes)
    if load:
        fields["load_offset"] = 32
        fields["load_data"] = 1
    return data.StructLayout(fields)


#: What the layers below say about a received frame (:class:`~.rx.EthRx` wires them): the
#: Ethernet destination is ours or broadcast; an ARP packet, a request for our address; IPv4
#: for our address, version 4 without options, its checksum, a fragment, where the packet
#: ends; UDP, to our port, a length that fills the IPv4 packet, the length; the sender; ICMP,
#: an echo request, its checksum, and the IPv4 length.
LOWER = data.StructLayout(
    {
        "for_us": 1,
        "arp": 1,
        "arp_request": 1,
        "ip_for_us": 1,
        "ip_supported": 1,
        "ip_checksum_ok": 1,
        "ip_fragment": 1,
        "ip_end": 17,
        "udp": 1,
        "port_ok": 1,
        "udp_length_ok": 1,
        "udp_length": 16,
        "mac": 48,
        "ip": 32,
        "port": 16,
        "icmp": 1,
        "echo_request": 1,
        "icmp_checksum": 16,
        "ip_length": 16,
    }
)
#: Where an ICMP echo's identifier, sequence number and data start in a frame: what the
#: reply sends back, kept in the echo buffer from its address 0.
ECHO_AT = ETHERNET.length + IPV4.length + ICMP.length
