"""An independent model of the UDP board's receive side for the tests: which class of
``boards/UDP.md`` ("Every frame in exactly one class") a GMII burst counts in, and the sequence
check of the TUPLES packets it accepts.

Written from ``boards/UDP.md`` (and the payload format there), not from the gateware: the
classes are tried in the document's order and the first that applies counts. Where the
document leaves something open, the reading taken here:

- A burst is the bytes sent with ``rx_dv`` high. Its frame starts after the first ``0xD5``
  (the start delimiter); the bytes before it are the preamble, any number of ``0x55`` (none
  too: a shortened preamble is not an error). A burst without ``0xD5`` has no frame at all: it
  is a ``bad_fcs`` ("no start delimiter after the preamble"), whatever its length, since there
  is no frame to measure. A preamble byte other than ``0x55`` before the delimiter is also a
  ``bad_fcs`` (the delimiter did not follow the preamble), but only once the frame after the
  delimiter passed the size test (``bad_size`` comes first).
- ``rx_er`` on any byte of the burst (preamble, frame or FCS) is a PHY error in the frame.
- Behind the expected ``seq`` means by less than 2**31 (modulo 2**32), as the link's
  documentation says (``UdpLink``); anything else is at or after it.

The session (``boards/UDP.md``, "Sessions"): the board is in the session of ``host`` (its IPv4
address and UDP port) with id ``session``, opened before the burst stream; a TUPLES,
STATUS_REQ or CLOSE packet, or a RESET, not from that address and port with that id is
``foreign``, judged after the body (class 10). An accepted RESET or CLOSE is not modelled
(they zero the counters, end the session).

The payload's header is judged before its body (``boards/UDP.md``, classes 7 to 9): a
packet for another engine with a partial tuple is a ``bad_header``. (The document once put
every ``bad_udp`` before ``bad_header``; the first run of this fuzz found that the gateware and
the software board judge the header first, and the document now says so.)
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

from nfacep.links.udp.protocol import FRAME_CLASSES, Endpoint

SFD, PREAMBLE_BYTE = 0xD5, 0x55
BROADCAST = b"\xff" * 6
TUPLES, STATUS_REQ, RESET, CLOSE = 0x01, 0x02, 0x03, 0x05
VERSION, HEADER_BYTES = 6, 16


@dataclass(frozen=True)
class Verdict:
    """A burst's class; for an accepted frame what it asks for (``kind``: ``tuples``,
    ``status_req``, ``reset`` or ``arp``), and a TUPLES packet's ``seq`` and tuple bytes."""

    cls: str
    kind: str | None = None
    seq: int | None = None
    body: bytes = b""
    #: a ``bad_header`` whose body is bad too (the order of classes 8 and 9 decides it)
    disputed: bool = False
    why: str = ""


def _ones_complement_sum(data: bytes) -> int:
    total = sum(struct.unpack(f">{len(data) // 2}H", data))
    while total > 0xFFFF:
        total = (total & 0xFFFF) + (total >> 16)
    return total


@dataclass
class Board:
    """The board at ``endpoint`` running an engine with fingerprint ``engine_id`` and tuples
    of ``tuple_bytes``; :meth:`take` counts a verdict (STATUS's class counters, ``tuples``,
    ``next_seq``, ``lost``, ``late``). No runtime parameters (a PARAMS packet is an unknown
    type); ``engine_full`` is never predicted (the receive buffer is assumed to have room)."""

    endpoint: Endpoint
    engine_id: int
    tuple_bytes: int
    host: Endpoint
    session: int
    counts: dict = field(default_factory=lambda: dict.fromkeys(FRAME_CLASSES, 0))
    tuples: int = 0
    next_seq: int = 0
    lost: int = 0
    late: int = 0
    echoes: int = 0

    def classify(self, burst: bytes, rx_er: bool = False) -> Verdict:
        """The class of one burst of ``rx_dv`` (preamble, delimiter, frame, FCS);
        ``rx_er``: the PHY flagged one of its bytes."""
        start = burst.find(SFD)
        if start < 0:
            return Verdict("bad_fcs", why="no start delimiter")
        frame = burst[start + 1 :]
        # 1. the size, with the FCS
        if not 64 <= len(frame) <= 1518:
            return Verdict("bad_size", why=f"{len(frame)} bytes")
        # 2. the FCS, a PHY error, the preamble
        data, fcs = frame[:-4], frame[-4:]
        if rx_er:
            return Verdict("bad_fcs", why="rx_er")
        if any(b != PREAMBLE_BYTE for b in burst[:start]):
            return Verdict("bad_fcs", why="damaged preamble")
        if zlib.crc32(data) != int.from_bytes(fcs, "little"):
            return Verdict("bad_fcs", why="FCS")
        return self._ethernet(data)

    def _ethernet(self, f: bytes) -> Verdict:
        me = self.endpoint
        if f[0:6] not in (me.mac, BROADCAST):
            return Verdict("not_for_us", why="MAC")
        ethertype = f[12:14]
        if ethertype == b"\x08\x06":
            htype, ptype, hlen, plen, oper = struct.unpack(">HHBBH", f[14:22])
            if (htype, ptype, hlen, plen, oper) == (1, 0x0800, 6, 4, 1) and f[38:42] == me.ip:
                return Verdict("accepted", kind="arp")
            return Verdict("not_for_us", why="ARP")
        if ethertype != b"\x08\x00":
            return Verdict("not_for_us", why="EtherType")
        ip = f[14:34]
        # 3. the IPv4 destination and protocol (UDP or ICMP) before the three IPv4 checks, the
        # port (or the ICMP type) after
        if ip[16:20] != me.ip or ip[9] not in (1, 17):
            return Verdict("not_for_us", why="IP address or protocol")
        if ip[0] != 0x45:
            return Verdict("ip_unsupported")
        if _ones_complement_sum(ip) != 0xFFFF:
            return Verdict("bad_ip_checksum")
        if int.from_bytes(ip[6:8], "big") & 0x3FFF:  # more fragments (0x2000), offset
            return Verdict("ip_fragment")
        if ip[9] == 1:
            return self._icmp(f)
        if int.from_bytes(f[36:38], "big") != me.port:
            return Verdict("not_for_us", why="port")
        return self._udp(f)

    def _icmp(self, f: bytes) -> Verdict:
        """An ICMP message: an echo request is answered (an ``engine_full`` while the last
        one's reply waits is not modelled: the fuzz sends too few for it to happen)."""
        ip_length = int.from_bytes(f[16:18], "big")
        if f[34:36] != b"\x08\x00":
            return Verdict("not_for_us", why="ICMP other than an echo request")
        # 7. lengths
        if 14 + ip_length > len(f):
            return Verdict("bad_udp", why="IP packet longer than the frame")
        if ip_length < 20 + 8:
            return Verdict("bad_udp", why="echo request shorter than its header")
        return Verdict("accepted", kind="echo")

    def _udp(self, f: bytes) -> Verdict:
        ip_length = int.from_bytes(f[16:18], "big")
        udp_length = int.from_bytes(f[38:40], "big")
        # 7. lengths
        if udp_length != ip_length - 20:
            return Verdict("bad_udp", why="UDP length")
        if 14 + ip_length > len(f):
            return Verdict("bad_udp", why="IP packet longer than the frame")
        if udp_length - 8 < HEADER_BYTES:
            return Verdict("bad_udp", why="payload shorter than the header")
        payload = f[42 : 42 + udp_length - 8]
        version, ptype = payload[0], payload[1]
        seq, ident, session = struct.unpack("<III", payload[4:16])
        body = payload[HEADER_BYTES:]
        commands = (STATUS_REQ, RESET, CLOSE)
        body_bad = (ptype in commands and len(body) > 0) or (
            ptype == TUPLES and (not body or len(body) % self.tuple_bytes != 0)
        )
        # 8. the payload's header, then 9. its body
        header_bad = (
            version != VERSION
            or ptype not in (TUPLES, *commands)
            or (ptype == TUPLES and ident != self.engine_id)
        )
        if header_bad:
            return Verdict("bad_header", why="header", disputed=body_bad)
        if body_bad:
            return Verdict("bad_udp", why="body")
        # 10. the session
        sender = (f[26:30], int.from_bytes(f[34:36], "big"))
        if sender != (self.host.ip, self.host.port) or session != self.session:
            return Verdict("foreign", why="session")
        kind = {TUPLES: "tuples", STATUS_REQ: "status_req", RESET: "reset", CLOSE: "close"}[ptype]
        if ptype == TUPLES:
            return Verdict("accepted", kind=kind, seq=seq, body=body)
        return Verdict("accepted", kind=kind)

    def take(self, verdict: Verdict) -> None:
        """Count ``verdict`` as the board does (RESET and CLOSE are not modelled: one zeroes
        everything, the other ends the session)."""
        if verdict.kind in ("reset", "close") and verdict.cls == "accepted":
            raise ValueError("RESET and CLOSE are not modelled")
        self.counts[verdict.cls] += 1
        if verdict.cls == "accepted" and verdict.kind == "echo":
            self.echoes += 1
        if verdict.cls == "accepted" and verdict.kind == "tuples":
            self.tuples += len(verdict.body) // self.tuple_bytes
            gap = (verdict.seq - self.next_seq) % 2**32
            if gap >= 2**31:
                self.late += 1
            else:
                self.lost = (self.lost + gap) % 2**32  # (a counter of 32 bits)
                self.next_seq = (verdict.seq + 1) % 2**32
