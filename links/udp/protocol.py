"""The UDP link's payload format (version 6), shared by the gateware, the tests, the host and the
software board model; ``boards/UDP.md`` describes it for users.

Every UDP payload, in both directions, starts with a 16-byte header (little-endian fields, as
the tuple wire format and the UART link's STATUS)::

    version (1) | type (1) | reserved (2, zero) | seq (4) | engine_id (4) | session (4) | body

``seq`` numbers the sender's packets (the host's so that the board counts upstream loss, the
board's to the session's host so that the host counts loss on the way back: a STATUS answering
a LOAD carries the next number without taking it); ``engine_id`` is the engine's
fingerprint (:func:`nfacep.links.protocol.engine_id`, the UART link's too): the board drops
TUPLES packets for another engine; STATUS_REQ, RESET and CLOSE need not know it (send 0).
``session`` is the session id the host chose at random for its run: a RESET opens a session
(the board binds to the sender's IPv4 address and UDP port and to that id), every other packet
of the host's must come from that address and port and carry that id (else ``foreign``), and
the board's packets carry it too. The session ends with CLOSE, or after :data:`SESSION_IDLE`
seconds without an accepted packet of the host's; a RESET from the session's host with its id
starts the run again.

Host to board (to the board's UDP port):

========== ====== =================================================================
type       code   body
========== ====== =================================================================
TUPLES     0x01   k >= 1 tuples of :func:`nfacep.wire.tuple_bytes` bytes each
STATUS_REQ 0x02   none: the board answers with STATUS
RESET      0x03   none: open the session (or start it again: from the session's host with
                  its id), clear the engine and the counters; the board answers with STATUS
PARAMS     0x04   only for queries with runtime parameters: a switch, the tuple number
                  it applies from (6 bytes) and the packed values
                  (:func:`nfacep.links.protocol.switch_body`); numbered with the
                  TUPLES packets
CLOSE      0x05   none: end the session; the board answers with STATUS
LOAD       0x06   only to a programmable engine: a chunk of a load of a configuration
                  image (:func:`nfacep.image.load`): its offset in the load (4 bytes),
                  flags (1 byte, bit 0: the load's last chunk), then its bytes
                  (:func:`load_chunks`); no bytes: only STATUS (any engine_id). While
                  a session is alive, only from its host's IPv4 address, any UDP port
                  and session id (another process of the host's may load a query while
                  a run streams; another sender's is ``foreign``), else from any
                  sender, for this engine_id; the board answers the sender with STATUS
========== ====== =================================================================

A load is reassembled in order: a chunk is taken when its offset is where the load being
received stands (0 when none is), else it is counted ``bad_load`` and changes nothing (a gap
or an overlap); STATUS's ``load_offset`` says where the load stands. The engine checks the
whole load (its engine fingerprint, length and CRC-32) and counts a bad one in ``refused``;
STATUS's ``image`` is the fingerprint of the image in force.

Board to host (to the address and port of the session's host: the sender of the RESET that
opened it):

========== ====== =================================================================
RECORDS    0x81   n >= 1 match records of :meth:`nfacep.wire.RecordFormat.nbytes` each
STATUS     0x82   :data:`STATUS_FIELDS` (the engine parameters among them), then (runtime
                  parameters) the values in force
========== ====== =================================================================

Every Ethernet frame the board receives is counted in exactly one class of
:data:`FRAME_CLASSES` (the first that applies in the order ``boards/UDP.md`` gives: size, FCS,
addresses, IPv4, UDP port, lengths, payload header, body, session, room; ``accepted`` when
none does).

The module also builds and parses the Ethernet, ARP, IPv4 and UDP headers around a payload
(:func:`udp_frame`, :func:`arp_request`, :func:`parse_frame`), for the tests and the model;
the host sends and receives through the operating system's UDP sockets.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from ..protocol import ENGINE_FIELDS

__all__ = [
    "BROADCAST",
    "DEFAULT_ENDPOINT",
    "FRAME_CLASSES",
    "HEADER",
    "HEADER_BYTES",
    "LINE_BITS_PER_S",
    "LOAD_CHUNK",
    "LOAD_HEADER_BYTES",
    "LOAD_LAST",
    "LOAD_TAIL",
    "MAX_FRAME",
    "MAX_PAYLOAD",
    "MIN_FRAME",
    "SESSION_IDLE",
    "SESSION_IDLE_CYCLES",
    "STATUS_FIELDS",
    "VERSION",
    "WIRE_OVERHEAD",
    "Endpoint",
    "PacketType",
    "arp_reply",
    "arp_request",
    "decode_header",
    "echo_reply_checksum",
    "encode_header",
    "ethernet_fcs",
    "icmp_echo",
    "ip_checksum",
    "line_limit",
    "line_tuples_limit",
    "load_chunks",
    "packet",
    "parse_frame",
    "tuples_frame_bytes",
    "udp_frame",
]

#: Payload format version, the first byte of every payload. (2: PARAMS, and the values in
#: force at the end of STATUS; 3: sessions, the header's ``session``, CLOSE and ``foreign``;
#: 4: the engine parameters in STATUS; 5: LOAD, ``bad_load`` and the programmable engine's
#: fields in STATUS, and STATUS's ``echoes``, the ICMP echo requests answered; 6: STATUS's
#: ``image_from``, the tuple the image in force took over at.)
VERSION = 6
#: The header's fields: (name, bytes), in order.
HEADER = (
    ("version", 1),
    ("type", 1),
    ("reserved", 2),
    ("seq", 4),
    ("engine_id", 4),
    ("session", 4),
)
#: A session ends when no packet of its host's was accepted for this many cycles of the
#: receive clock (125 MHz at 1000 Mb/s) ...
SESSION_IDLE_CYCLES = 2**29
#: ... that is, seconds (about 4.3).
SESSION_IDLE = SESSION_IDLE_CYCLES / 125e6
HEADER_BYTES = sum(n for _, n in HEADER)
BROADCAST = b"\xff" * 6
#: The Ethernet frame length limits the board checks (destination MAC to FCS, no VLAN tag).
MIN_FRAME = 64
MAX_FRAME = 1518
#: The largest UDP payload in a 1,500-byte IP packet (the host's TUPLES packets and the board's
#: RECORDS packets at most).
MAX_PAYLOAD = 1500 - 20 - 8


class PacketType:
    """The ``type`` byte."""

    TUPLES = 0x01
    STATUS_REQ = 0x02
    RESET = 0x03
    PARAMS = 0x04
    CLOSE = 0x05
    LOAD = 0x06
    RECORDS = 0x81
    STATUS = 0x82


#: The classes a received frame is counted in (one each), in STATUS order.
FRAME_CLASSES = (
    "accepted",  # TUPLES whose tuples went to the engine, STATUS_REQ, RESET, CLOSE,
    # PARAMS, LOAD, ARP request for the board's IP address
    "bad_size",  # runt (< 64 bytes) or oversize (> 1518 bytes), counted with the FCS
    "bad_fcs",  # FCS mismatch, PHY error (rx_er) or no start-of-frame delimiter
    "not_for_us",  # another MAC address (not broadcast), EtherType, IP address,
    # protocol or UDP port; ARP other than a request for our address
    "ip_unsupported",  # IPv4 version/IHL other than 4/5 (options): checked before the sum
    "bad_ip_checksum",  # the IPv4 header checksum
    "ip_fragment",  # more fragments or a fragment offset
    "bad_udp",  # UDP length not the IP length's, a truncated frame, a payload shorter
    # than the header, a command with a body, no or a partial tuple,
    # PARAMS of another length, LOAD shorter than its offset and flags
    "bad_header",  # unknown payload version or type, TUPLES or PARAMS for another
    # engine_id, PARAMS to an engine without runtime parameters, LOAD for another
    # engine_id or to a fixed engine
    "foreign",  # no session open (but for RESET), or not from the session's host (its IPv4
    # address and UDP port) with its session id (a RESET from another host included)
    "engine_full",  # TUPLES whose tuples did not fit the board's buffer; PARAMS while
    # a switch is pending; LOAD whose bytes did not fit the load buffer
    "bad_load",  # LOAD whose offset is not where the load being received stands (a gap
    # or an overlap)
)

#: Bytes of a LOAD body before the chunk: the offset (4) and the flags (1).
LOAD_HEADER_BYTES = 5
#: A LOAD's flags: the chunk is the load's last.
LOAD_LAST = 0x01
#: The board's load buffer: a LOAD carries at most this many bytes of the load.
LOAD_CHUNK = 1024
#: ``nfacep load`` sends a load's last bytes, at most this many, in a LOAD of their own once the
#: board answered the rest: the engine then has the rest in hand, and the new query is in force
#: as soon as it took these few (a byte per cycle of the engine's clock) and checked the load.
LOAD_TAIL = 16


#: STATUS body: (name, bytes), little-endian. Counters wrap at 2**32.
STATUS_FIELDS: tuple[tuple[str, int], ...] = (
    ("tuple_bytes", 2),
    ("record_bytes", 2),
    ("capacity", 4),  # bytes of the board's tuple buffer
    *ENGINE_FIELDS,  # the engine parameters it was built with
    ("flags", 4),  # bit 0: idle
    ("tuples", 4),  # tuples the engine took
    ("matched", 4),  # records sent for a tuple that matched a query
    ("drops", 4),  # records sent for a dropped tuple
    ("records", 4),  # records sent
    ("packets", 4),  # RECORDS packets sent
    ("next_seq", 4),  # the TUPLES seq the board expects next
    ("lost", 4),  # sum of the forward jumps of TUPLES seq (packets missing upstream)
    ("late", 4),  # TUPLES packets whose seq was behind the expected one
    ("echoes", 4),  # ICMP echo requests answered (ping)
    *((name, 4) for name in FRAME_CLASSES),
    ("engine", 1),  # the index of its kind in nfacep.params.ENGINES: 0 fixed, 1 programmable
    ("states", 2),  # the programmable engine's capacities (0 for the fixed engine)
    ("atoms", 2),
    ("queries", 1),
    ("load_offset", 4),  # where the load being received stands (0: none is)
    ("refused", 4),  # loads the engine refused: another engine's, another length, bad CRC
    ("image", 8),  # the fingerprint of the image in force (0: none yet)
    # the first tuple the image in force judged (its switch's tuple; 0: in force since the
    # last RESET, or none yet)
    ("image_from", 4),
)


def encode_header(
    ptype: int,
    seq: int = 0,
    engine_id: int = 0,
    version: int = VERSION,
    reserved: int = 0,
    session: int = 0,
) -> bytes:
    mask = 0xFFFFFFFF
    return struct.pack(
        "<BBHIII", version, ptype, reserved, seq & mask, engine_id & mask, session & mask
    )


def decode_header(payload: bytes) -> dict[str, int]:
    """The header's fields (ValueError when the payload is shorter than a header; the version
    is not checked: a payload of another version has these fields only if it says so)."""
    if len(payload) < HEADER_BYTES:
        raise ValueError(f"a payload of {len(payload)} bytes has no header")
    values = struct.unpack("<BBHIII", payload[:HEADER_BYTES])
    return dict(zip((name for name, _ in HEADER), values, strict=True))


def packet(
    ptype: int, body: bytes = b"", *, seq: int = 0, engine_id: int = 0, session: int = 0
) -> bytes:
    """One UDP payload."""
    return encode_header(ptype, seq, engine_id, session=session) + body


def load_chunks(
    data: bytes, size: int = LOAD_CHUNK, start: int = 0, end: int | None = None
) -> list[bytes]:
    """The LOAD bodies that carry the bytes ``start`` to ``end`` (default: the end) of the load
    ``data`` (:func:`nfacep.image.load`), ``size`` bytes of it at most in each: offset, flags
    (:data:`LOAD_LAST` on the chunk that ends ``data``), bytes."""
    if not 0 < size <= LOAD_CHUNK:
        raise ValueError(f"a LOAD carries 1 to {LOAD_CHUNK} bytes of a load, not {size}")
    end = len(data) if end is None else end
    out = []
    for at in range(start, end, size):
        stop = min(at + size, end)
        head = at.to_bytes(4, "little") + bytes([LOAD_LAST if stop >= len(data) else 0])
        out.append(head + data[at:stop])
    return out


# --------------------------------------------------------------------------- frames


@dataclass(frozen=True)
class Endpoint:
    """A station: MAC address (6 bytes), IPv4 address (4 bytes) and UDP port."""

    mac: bytes
    ip: bytes
    port: int

    @classmethod
    def parse(cls, mac: str, ip: str, port: int) -> Endpoint:
        """From ``02:00:5e:00:00:02``, ``10.0.0.2`` and a port; ValueError if malformed."""
        try:
            raw = bytes.fromhex(mac.replace(":", "").replace("-", ""))
        except ValueError:
            raw = b""
        parts = ip.split(".")
        if len(raw) != 6:
            raise ValueError(
                f"not a MAC address (6 bytes in hexadecimal, as 02:4e:46:41:43:50): {mac!r}"
            )
        if len(parts) != 4 or not all(p.isascii() and p.isdigit() and int(p) < 256 for p in parts):
            raise ValueError(f"not an IPv4 address: {ip!r}")
        if not 0 < port < 65536:
            raise ValueError(f"not a UDP port: {port}")
        return cls(raw, bytes(int(p) for p in parts), port)

    def check_station(self) -> Endpoint:
        """Itself, when it can be a board's own address on a LAN; ValueError naming why not:
        a group MAC address (its first byte odd: multicast or broadcast) or the zero one; an
        IPv4 address of "this network" (0/8), loopback (127/8), multicast (224/4) or the
        broadcast 255.255.255.255. A board answering from one would never be reached, or
        would take frames meant for others."""
        mac = self.mac.hex(":")
        if self.mac[0] & 1:
            raise ValueError(f"{mac} is a group MAC address (its first byte odd), not a station's")
        if not any(self.mac):
            raise ValueError(f"{mac} is the zero MAC address, not a station's")
        ip, first = ".".join(map(str, self.ip)), self.ip[0]
        kind = {0: "an address of 'this network' (0/8)", 127: "a loopback address (127/8)"}.get(
            first, "a multicast address (224/4)" if 224 <= first <= 239 else None
        )
        if self.ip == b"\xff" * 4:
            kind = "the broadcast address"
        if kind is not None:
            raise ValueError(f"{ip} is {kind}, not a station's")
        return self

    def __str__(self) -> str:
        return f"{self.mac.hex(':')} {'.'.join(map(str, self.ip))}:{self.port}"


#: The board's addresses unless ``nfacep build`` is told others: a locally administered MAC
#: address, a private IPv4 address.
DEFAULT_ENDPOINT = Endpoint.parse("02:4e:46:41:43:50", "192.168.1.50", 5000)


def ip_checksum(header: bytes) -> int:
    """The IPv4 header checksum: one's complement of the one's complement sum of 16-bit
    words."""
    total = sum(struct.unpack(f">{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def ethernet_fcs(frame: bytes) -> bytes:
    """The frame check sequence to append (CRC-32, ``amaranth.lib.crc.catalog.CRC32_ETHERNET``,
    least significant byte first)."""
    return struct.pack("<I", zlib.crc32(frame))


def _pad(frame: bytes) -> bytes:
    return frame + bytes(max(0, MIN_FRAME - 4 - len(frame)))


def udp_frame(
    src: Endpoint,
    dst: Endpoint,
    payload: bytes,
    *,
    ident: int = 0,
    ttl: int = 64,
    flags_fragment: int = 0x4000,
    options: bytes = b"",
    ip_length: int | None = None,
    udp_length: int | None = None,
    checksum_delta: int = 0,
    protocol: int = 17,
    dst_mac: bytes | None = None,
    pad: bool = True,
    udp_checksum: bool = False,
) -> bytes:
    """An Ethernet II frame with an IPv4/UDP packet, without preamble and FCS (padded to the
    minimum length). The UDP checksum is 0 (none, as the board sends) unless ``udp_checksum``
    (as an operating system's stack sends). The keyword arguments make malformed frames for
    tests: ``ip_length`` and ``udp_length`` override the lengths, ``checksum_delta`` spoils the
    IP checksum."""
    udp_len = 8 + len(payload) if udp_length is None else udp_length
    udp = struct.pack(">HHHH", src.port, dst.port, udp_len, 0) + payload
    if udp_checksum:
        pseudo = src.ip + dst.ip + struct.pack(">BBH", 0, protocol, len(udp))
        odd = b"\0" if len(udp) % 2 else b""
        udp = udp[:6] + struct.pack(">H", ip_checksum(pseudo + udp + odd) or 0xFFFF) + udp[8:]
    ihl = 5 + len(options) // 4
    total = 4 * ihl + len(udp) if ip_length is None else ip_length
    ip = (
        struct.pack(
            ">BBHHHBBH4s4s",
            0x40 | ihl,
            0,
            total,
            ident,
            flags_fragment,
            ttl,
            protocol,
            0,
            src.ip,
            dst.ip,
        )
        + options
    )
    ip = ip[:10] + struct.pack(">H", (ip_checksum(ip) + checksum_delta) & 0xFFFF) + ip[12:]
    eth = (dst.mac if dst_mac is None else dst_mac) + src.mac + b"\x08\x00"
    frame = eth + ip + udp
    return _pad(frame) if pad else frame


def echo_reply_checksum(request: int) -> int:
    """An echo reply's ICMP checksum from its request's, as the board updates it (only the
    type changed, 8 to 0: RFC 1624, eqn. 3)."""
    total = (~request & 0xFFFF) + 0xF7FF
    return ~((total & 0xFFFF) + (total >> 16)) & 0xFFFF


def icmp_echo(
    src: Endpoint, dst: Endpoint, rest: bytes, *, reply: bool = False, checksum: int | None = None
) -> bytes:
    """An ICMP echo request (or ``reply``) frame from ``src`` to ``dst`` (no FCS): ``rest`` is
    the message after its type, code and checksum (identifier, sequence number, data), echoed
    unchanged by the answer; ``checksum`` overrides the ICMP checksum."""
    message = bytes([0 if reply else 8, 0, 0, 0]) + rest
    odd = b"\0" if len(message) % 2 else b""
    if checksum is None:
        checksum = ip_checksum(message + odd)
    message = message[:2] + struct.pack(">H", checksum) + message[4:]
    ip = struct.pack(
        ">BBHHHBBH4s4s", 0x45, 0, 20 + len(message), 0, 0x4000, 64, 1, 0, src.ip, dst.ip
    )
    ip = ip[:10] + struct.pack(">H", ip_checksum(ip)) + ip[12:]
    return _pad(dst.mac + src.mac + b"\x08\x00" + ip + message)


def arp_request(src: Endpoint, target_ip: bytes) -> bytes:
    """A broadcast ARP request from ``src`` for ``target_ip`` (no FCS)."""
    arp = struct.pack(">HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, src.mac, src.ip, bytes(6), target_ip)
    return _pad(BROADCAST + src.mac + b"\x08\x06" + arp)


def arp_reply(src: Endpoint, dst: Endpoint) -> bytes:
    """The ARP reply ``src`` sends to ``dst``'s request (no FCS)."""
    arp = struct.pack(">HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 2, src.mac, src.ip, dst.mac, dst.ip)
    return _pad(dst.mac + src.mac + b"\x08\x06" + arp)


def parse_frame(frame: bytes) -> dict:
    """What a frame (no preamble, FCS stripped) from the board holds: ``{"kind": "arp",
    ...}``, ``{"kind": "udp", "src", "dst", "payload", ...}`` or ``{"kind": "icmp", "type",
    "code", "rest", ...}`` (``rest``: after the checksum); ValueError when it is
    malformed (so the tests check the board's headers, checksums and lengths)."""
    if len(frame) < MIN_FRAME - 4:
        raise ValueError(f"a frame of {len(frame)} bytes is a runt")
    dst_mac, src_mac, ethertype = frame[:6], frame[6:12], frame[12:14]
    if ethertype == b"\x08\x06":
        htype, ptype, hlen, plen, oper, sha, spa, tha, tpa = struct.unpack(
            ">HHBBH6s4s6s4s", frame[14:42]
        )
        if (htype, ptype, hlen, plen) != (1, 0x0800, 6, 4):
            raise ValueError("not an Ethernet/IPv4 ARP packet")
        return {
            "kind": "arp",
            "dst_mac": dst_mac,
            "src_mac": src_mac,
            "oper": oper,
            "sender": Endpoint(sha, spa, 0),
            "target": Endpoint(tha, tpa, 0),
        }
    if ethertype != b"\x08\x00":
        raise ValueError(f"EtherType {ethertype.hex()}")
    ip = frame[14:34]
    if ip[0] != 0x45:
        raise ValueError(f"IPv4 version/IHL {ip[0]:#x}")
    if ip_checksum(ip) != 0:
        raise ValueError("bad IPv4 header checksum")
    (total,) = struct.unpack(">H", ip[2:4])
    if 14 + total > len(frame):
        raise ValueError("truncated")
    if ip[9] == 1:
        message = frame[34 : 14 + total]
        odd = b"\0" if len(message) % 2 else b""
        if len(message) < 8 or ip_checksum(message + odd) != 0:
            raise ValueError("a short ICMP message, or a bad ICMP checksum")
        return {
            "kind": "icmp",
            "dst_mac": dst_mac,
            "src_mac": src_mac,
            "src": Endpoint(src_mac, ip[12:16], 0),
            "dst": Endpoint(dst_mac, ip[16:20], 0),
            "type": message[0],
            "code": message[1],
            "rest": message[4:],
        }
    if ip[9] != 17:
        raise ValueError(f"IP protocol {ip[9]}")
    sport, dport, ulen, _ = struct.unpack(">HHHH", frame[34:42])
    if ulen != total - 20:
        raise ValueError(f"UDP length {ulen} in an IP packet of {total}")
    return {
        "kind": "udp",
        "dst_mac": dst_mac,
        "src_mac": src_mac,
        "src": Endpoint(src_mac, ip[12:16], sport),
        "dst": Endpoint(dst_mac, ip[16:20], dport),
        "ttl": ip[8],
        "payload": frame[42 : 42 + ulen - 8],
    }


#: Bytes a frame takes on the wire besides the frame itself (destination MAC to FCS): the
#: preamble and start delimiter (8) and the minimum inter-frame gap (12).
WIRE_OVERHEAD = 20
#: Bits per second of the line (1000BASE-T).
LINE_BITS_PER_S = 1e9


def line_limit(frame_bytes: int) -> float:
    """Frames per second a 1 Gb/s line carries of frames of ``frame_bytes`` (destination MAC
    to FCS; shorter frames are padded to 64): 10^9 / 8 / (bytes + 20)."""
    return LINE_BITS_PER_S / 8 / (max(frame_bytes, MIN_FRAME) + WIRE_OVERHEAD)


def tuples_frame_bytes(tuple_bytes: int, per_packet: int) -> int:
    """Bytes of the frame (destination MAC to FCS) of a TUPLES packet of ``per_packet``
    tuples of ``tuple_bytes``: Ethernet 14, IPv4 20, UDP 8, the payload header, the tuples,
    the FCS 4."""
    return 14 + 20 + 8 + HEADER_BYTES + per_packet * tuple_bytes + 4


def line_tuples_limit(tuple_bytes: int) -> tuple[float, int]:
    """The most tuples of ``tuple_bytes`` per second the line can carry to the board, and the
    packet size (tuples per TUPLES packet) that carries them: the worst case for the engine,
    the largest packet of a 1,500-byte MTU (the headers shared by the most tuples)."""
    most = (MAX_PAYLOAD - HEADER_BYTES) // tuple_bytes
    rates = [
        (per * line_limit(tuples_frame_bytes(tuple_bytes, per)), per) for per in range(1, most + 1)
    ]
    return max(rates)
