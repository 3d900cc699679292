"""The ICMP layer (RFC 792), echo only: :class:`IcmpRx` recognises an echo request (``ping``)
after the IPv4 header; :func:`reply_checksum` and :func:`header` build the echo reply's header,
whose identifier, sequence number and data are the request's, sent back unchanged."""

from __future__ import annotations

from amaranth.hdl import Module, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .headers import ETHERNET, ICMP, IPV4, PROTOCOL_ICMP
from .packet import Depacketizer, frame_signature

__all__ = [
    "ECHO_REPLY",
    "ECHO_REQUEST",
    "IcmpRx",
    "header",
    "reply_checksum",
    "reply_fold",
    "reply_sum",
]

ECHO_REQUEST, ECHO_REPLY = 8, 0


class IcmpRx(wiring.Component):
    """The ICMP header of a received frame (:data:`~.headers.ICMP`, after the IPv4 header).

    ``is_icmp``: the IPv4 header below says ICMP (combinational); ``echo_request``: type 8,
    code 0, from the cycle after the code's byte. The ICMP checksum is not checked (as the UDP
    one is not: the FCS covers the link); the reply's is the request's, adjusted for the type
    (:func:`reply_checksum`).

    Members
    -------
    frame : ``In(frame_signature)``
    protocol : ``In(8)``
    fields : ``Out(ICMP.layout)``
    is_icmp, echo_request : ``Out(1)``
    """

    def __init__(self, *, offset: int = ETHERNET.length + IPV4.length):
        self._offset = offset
        super().__init__(
            {
                "frame": In(frame_signature),
                "protocol": In(8),
                "fields": Out(ICMP.layout),
                "is_icmp": Out(1),
                "echo_request": Out(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        compare = {"type": ("type", ECHO_REQUEST), "code": ("code", 0)}
        m.submodules.header = header = Depacketizer(ICMP, self._offset, compare)
        wiring.connect(m, wiring.flipped(self.frame), header.frame)
        m.d.comb += [
            self.fields.eq(header.fields),
            self.is_icmp.eq(self.protocol == PROTOCOL_ICMP),
            self.echo_request.eq(header.equal.type & header.equal.code),
        ]
        return m


def reply_checksum(request: Value) -> Value:
    """The echo reply's checksum from the request's: only the type changed (8 to 0), so the
    checksum is updated for that one word as RFC 1624 (eqn. 3) says:
    ``~(~request + ~0x0800 + 0x0000)`` in one's complement arithmetic. In two halves, each one
    add (a register may sit between them, for timing): :func:`reply_sum`, then
    :func:`reply_fold`."""
    return reply_fold(reply_sum(request))


def reply_sum(request: Value) -> Value:
    """The first half of :func:`reply_checksum`: ``~request + ~0x0800`` (17 bits, the carry
    not yet folded back)."""
    return (~request)[:16] + 0xF7FF


def reply_fold(total: Value) -> Value:
    """The second half of :func:`reply_checksum`: the carry of :func:`reply_sum`'s ``total``
    added back in (one's complement), complemented."""
    return ~(total[:16] + total[16])[:16]


def header(checksum: Value) -> dict:
    """The fields of an echo reply's header (:data:`~.headers.ICMP`)."""
    return {"type": ECHO_REPLY, "code": 0, "checksum": checksum}
