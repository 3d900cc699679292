"""A software board for the UDP link: the payload format of :mod:`.protocol` with the
engine of :class:`nfacep.links.model.BoardModel` (the reference matcher), answering UDP
datagrams as the gateware does.

:class:`UdpBoardModel` takes a datagram's payload and its sender and returns the payloads the
board sends back and where to (same acceptance rules, sessions, addressing and counters as the
gateware for what a UDP socket can carry: the Ethernet, IPv4 and UDP classes never occur);
:func:`serve` runs one on a UDP socket (e.g. on 127.0.0.1) in a thread, so a host can be tested
without hardware.
"""

from __future__ import annotations

import random
import socket
import struct
import threading
import time

from nfacep.params import EngineParams

from ..model import BoardModel
from ..protocol import SWITCH_BYTES, encode_fields, engine_fields, engine_kind_fields
from .protocol import (
    BROADCAST,
    FRAME_CLASSES,
    HEADER_BYTES,
    LOAD_HEADER_BYTES,
    LOAD_LAST,
    MAX_PAYLOAD,
    SESSION_IDLE,
    STATUS_FIELDS,
    VERSION,
    Endpoint,
    PacketType,
    arp_reply,
    decode_header,
    echo_reply_checksum,
    icmp_echo,
    ip_checksum,
    packet,
    parse_frame,
    udp_frame,
)

#: A host's address: (IPv4 address, UDP port).
Address = tuple[str, int]

__all__ = ["FrameBoard", "UdpBoardModel", "serve"]


class UdpBoardModel(BoardModel):
    """The board's side of the UDP link, in software.

    ``feed(payload, sender)`` takes one UDP payload from ``sender`` (an (IPv4 address, port)
    pair) and returns what the board sends back: (address, payload) pairs, RECORDS packets of
    at most as many records as the gateware's, then STATUS when asked, all to the session's
    host. The engine is infinitely fast. ``capacity`` bounds a TUPLES packet's bytes as the
    board's buffer does (larger: ``engine_full``).

    Sessions as the gateware's (:class:`nfacep.hdl.eth.payload_rx.PayloadRx`): a RESET opens
    one when none is open, or starts it again from its host with its id; CLOSE, or ``idle``
    seconds without an accepted packet of its host's (the gateware's
    :data:`~.protocol.SESSION_IDLE`), ends it; every packet not from the session's host with
    its id is ``foreign`` (RESET too, while a session is open).

    With runtime parameters, ``values`` are the ones the board was built with (required);
    PARAMS packets switch them as the engine does
    (:class:`~nfacep.links.model.ParamRegisters`); one while a switch is pending is
    ``engine_full``. STATUS ends with the values in force.

    A programmable engine (``params.engine``) takes LOAD packets from any sender while no
    session is alive, from the session host's IPv4 address (any port) while one is (another
    sender's is ``foreign``), reassembled
    in order as the gateware does (a chunk elsewhere than where the load stands is
    ``bad_load``), each answered with STATUS to its sender once its bytes are in the engine
    (at once: the engine is infinitely fast; the answer to a load's last chunk tells the
    load's outcome, in force, waiting for its tuple or refused); the engine is an
    :class:`~nfacep.links.model.ImageEngine`. The load being received and the image in force
    survive RESET.
    """

    def __init__(
        self,
        nfa,
        params: EngineParams,
        *,
        capacity: int = 4096,
        engine_id_override: int | None = None,
        values=None,
        idle: float = SESSION_IDLE,
        clock=time.monotonic,
    ):
        super().__init__(
            nfa, params, capacity=capacity, engine_id_override=engine_id_override, values=values
        )
        self.max_records = (MAX_PAYLOAD - HEADER_BYTES) // self.record_bytes
        self.idle, self.clock = idle, clock
        #: the session: open, its host's address and id, when its host was last heard
        self.open = False
        self.peer: Address | None = None
        self.session = 0
        self.heard = 0.0
        self.last = ""  #: the class of the last packet fed
        #: the load being received (its bytes so far), and where it stands
        self.assembling = bytearray()
        self.reset()

    def reset(self) -> None:
        super().reset()
        #: a load being received when RESET came: the engine's CRC started again, it is refused
        self.doomed = bool(getattr(self, "assembling", b""))
        self.seq = 0  # the board's packets
        self.counters = dict.fromkeys((name for name, _ in STATUS_FIELDS), 0)

    def status(self) -> dict:
        return {
            **self.counters,
            "tuple_bytes": self.tuple_bytes,
            "record_bytes": self.record_format.nbytes,
            "capacity": self.capacity,
            **engine_fields(self.params),
            **engine_kind_fields(self.params),
            "flags": 1,
            "tuples": len(self.accepted) // self.tuple_bytes,
            **self._load_status(),
        }

    def _load_status(self) -> dict:
        images = self.images
        if images is None:
            return {}
        images.settle()
        return {
            "load_offset": len(self.assembling),
            "refused": images.refused,
            "image": images.named,
            "image_from": images.since,
        }

    def _packet(self, ptype: int, body: bytes, session: int | None = None) -> bytes:
        """A packet to the session's host (numbered), or (``session``) a LOAD's answer to
        its sender, which carries the next number without taking it."""
        out = packet(
            ptype,
            body,
            seq=self.seq,
            engine_id=self.id,
            session=self.session if session is None else session,
        )
        self.seq += session is None
        return out

    def _status_packet(self, session: int | None = None) -> bytes:
        values = self.registers.in_force(self.taken()).to_bytes(self.registers.nbytes, "little")
        body = encode_fields(STATUS_FIELDS, self.status()) + values
        return self._packet(PacketType.STATUS, body, session)

    def _classify(self, data: bytes, sender: Address) -> str:
        """The frame class of ``data`` from ``sender``, in the gateware's order: header,
        body, session, room."""
        if len(data) < HEADER_BYTES:
            return "bad_udp"
        head = decode_header(data)
        ptype = head["type"]
        body = data[HEADER_BYTES:]
        commands = (PacketType.STATUS_REQ, PacketType.RESET, PacketType.CLOSE)
        known = (PacketType.TUPLES, *commands) + ((PacketType.PARAMS,) if self.registers else ())
        known += (PacketType.LOAD,) if self.images is not None else ()
        engined = (PacketType.TUPLES, PacketType.PARAMS)
        if len(body) > LOAD_HEADER_BYTES:  # (a LOAD without bytes, for STATUS: any engine_id)
            engined += (PacketType.LOAD,)
        if head["version"] != VERSION or ptype not in known:
            return "bad_header"
        if ptype in engined and head["engine_id"] != self.id:
            return "bad_header"
        if ptype == PacketType.LOAD:
            return self._load_class(body, sender)
        if ptype == PacketType.PARAMS:
            wrong = len(body) != SWITCH_BYTES + self.registers.nbytes
        elif ptype in commands:
            wrong = bool(body)
        else:
            wrong = not body or len(body) % self.tuple_bytes != 0
        if wrong:
            return "bad_udp"
        bound = self.open and sender == self.peer and head["session"] == self.session
        if not bound and not (ptype == PacketType.RESET and not self.open):
            return "foreign"
        if ptype == PacketType.PARAMS and self.registers.pending(self.taken()):
            return "engine_full"
        if ptype == PacketType.TUPLES and len(body) > self.capacity:
            return "engine_full"
        return "accepted"

    def _load_class(self, body: bytes, sender: Address) -> str:
        """A LOAD's class after its header's: its offset and flags are there; while a session
        is alive, from its host's IPv4 address (any port); its offset is where the load
        stands."""
        if len(body) < LOAD_HEADER_BYTES:
            return "bad_udp"
        if self.open and self.peer is not None and sender[0] != self.peer[0]:
            return "foreign"
        offset = int.from_bytes(body[:4], "little")
        if len(body) > LOAD_HEADER_BYTES and offset != len(self.assembling):
            return "bad_load"
        return "accepted"

    def _load(self, data: bytes, sender: Address) -> list[tuple[Address, bytes]]:
        """An accepted LOAD: its bytes added to the load (checked by the engine when the last
        comes); STATUS to its sender, with its session id."""
        body = data[HEADER_BYTES:]
        chunk = body[LOAD_HEADER_BYTES:]
        last = bool(chunk) and bool(body[4] & LOAD_LAST)
        self.assembling += chunk
        if last:
            whole = bytes(self.assembling)
            self.assembling = bytearray()
            if self.doomed:
                self.images.refused += 1
            else:
                self.images.load(whole)
            self.doomed = False
        # (as the gateware: made once the chunk's bytes are in the engine, and it checked the
        # load they end: refused, in force, or waiting for its tuple)
        return [(sender, self._status_packet(decode_header(data)["session"]))]

    def feed(self, data: bytes, sender: Address) -> list[tuple[Address, bytes]]:
        """The board's answers to ``data`` from ``sender``: (address, payload) pairs."""
        now = self.clock()
        if self.open and now - self.heard >= self.idle:
            self.open = False
        cls = self.last = self._classify(data, sender)
        assert cls in FRAME_CLASSES
        self.counters[cls] += 1
        if cls != "accepted":
            return []
        if data[1] == PacketType.LOAD:
            return self._load(data, sender)
        self.heard = now
        replies = self._accept(data, sender)
        assert self.peer is not None  # (an accepted packet is a RESET or of its session)
        return [(self.peer, out) for out in replies]

    def _accept(self, data: bytes, sender: Address) -> list[bytes]:
        """What an accepted packet does; the payloads the board sends."""
        ptype = data[1]
        if ptype == PacketType.RESET:
            self.open, self.peer = True, sender
            self.session = decode_header(data)["session"]
            self.reset()
            return [self._status_packet()]
        if ptype == PacketType.CLOSE:
            self.open = False
            return [self._status_packet()]
        if ptype == PacketType.STATUS_REQ:
            return [self._status_packet()]
        seq = int.from_bytes(data[4:8], "little")
        gap = (seq - self.counters["next_seq"]) % 2**32
        if gap >= 2**31:
            self.counters["late"] += 1
        else:
            self.counters["lost"] += gap
            self.counters["next_seq"] = (seq + 1) % 2**32
        if ptype == PacketType.PARAMS:
            self.registers.write(data[HEADER_BYTES:], self.taken())
            return []
        self.accepted += data[HEADER_BYTES:]
        return self._records()

    def _records(self) -> list[bytes]:
        records = self.new_records()
        out = []
        for at in range(0, len(records), self.max_records):
            batch = records[at : at + self.max_records]
            out.append(
                self._packet(
                    PacketType.RECORDS, b"".join(self.record_format.encode_bytes(r) for r in batch)
                )
            )
            self.counters["records"] += len(batch)
            self.counters["packets"] += 1
            self.counters["matched"] += sum(r.matches != 0 for r in batch)
            self.counters["drops"] += sum(r.dropped for r in batch)
        return out


class FrameBoard:
    """The software board at the Ethernet level, at ``board``'s addresses: :meth:`feed` takes a
    frame (destination MAC address to payload, no FCS) and returns the frames the board sends,
    as the gateware does: ARP replies to requests for its IPv4 address (to whoever asks), ICMP
    echo replies, and the UDP datagrams to its port handed to ``model``
    (:class:`UdpBoardModel`), whose answers go to the MAC address of the RESET that opened the
    session. Frames count in the gateware's classes (those a frame with a good FCS and size can
    have) in ``model``'s counters: ARP requests and echo requests answered as ``accepted``
    (and the latter in ``echoes``). It answers at once, so an echo request never finds the last
    reply still waiting (the gateware's ``engine_full`` for pings does not occur here)."""

    def __init__(self, model: UdpBoardModel, board: Endpoint):
        self.model, self.board = model, board
        self.peer_mac = b""  #: the MAC address the session's RESET came from

    def _count(self, cls: str) -> list[bytes]:
        self.model.counters[cls] += 1
        return []

    def feed(self, frame: bytes) -> list[bytes]:
        board = self.board
        if frame[:6] not in (board.mac, BROADCAST) or len(frame) < 34:
            return self._count("not_for_us")
        if frame[12:14] == b"\x08\x06":
            try:
                arp = parse_frame(frame)
            except ValueError:
                return self._count("not_for_us")
            if arp["oper"] != 1 or arp["target"].ip != board.ip:
                return self._count("not_for_us")
            self.model.counters["accepted"] += 1
            return [arp_reply(board, arp["sender"])]
        ip = frame[14:34]
        if frame[12:14] != b"\x08\x00" or ip[16:20] != board.ip or ip[9] not in (1, 17):
            return self._count("not_for_us")
        cls = _ip_class(frame)
        if cls is not None:
            return self._count(cls)
        if ip[9] == 1:
            return self._echo(frame)
        return self._datagram(frame)

    def _echo(self, frame: bytes) -> list[bytes]:
        """An ICMP echo request answered (its checksum is not checked, and the reply's is the
        request's updated for the type, as the gateware's; one shorter than its header,
        identifier and sequence number is ``bad_udp``); any other ICMP message is
        ``not_for_us``."""
        total = int.from_bytes(frame[16:18], "big")
        message = frame[34 : 14 + total]
        if message[:2] != b"\x08\x00":
            return self._count("not_for_us")
        if len(message) < 8:
            return self._count("bad_udp")
        self.model.counters["accepted"] += 1
        self.model.counters["echoes"] += 1
        sender = Endpoint(frame[6:12], frame[26:30], 0)
        checksum = echo_reply_checksum(int.from_bytes(message[2:4], "big"))
        return [icmp_echo(self.board, sender, message[4:], reply=True, checksum=checksum)]

    def _datagram(self, frame: bytes) -> list[bytes]:
        total = int.from_bytes(frame[16:18], "big")
        sport, dport, length = struct.unpack(">HHH", frame[34:40])
        if dport != self.board.port:
            return self._count("not_for_us")
        if length != total - 20:
            return self._count("bad_udp")
        sender = (".".join(map(str, frame[26:30])), sport)
        replies = self.model.feed(frame[42 : 42 + length - 8], sender)
        if self.model.last == "accepted" and frame[43] == PacketType.RESET:
            self.peer_mac = frame[6:12]
        out = []
        for (ip, port), payload in replies:
            peer = Endpoint.parse(self.peer_mac.hex(":"), ip, port)
            out.append(udp_frame(self.board, peer, payload))
        return out


def _ip_class(frame: bytes) -> str | None:
    """The class of an IPv4 frame for the board by its IPv4 header, in the gateware's order:
    options, checksum, fragment, a packet longer than the frame; None when it passes."""
    ip = frame[14:34]
    total = int.from_bytes(ip[2:4], "big")
    if ip[0] != 0x45:
        return "ip_unsupported"
    if ip_checksum(ip) != 0:
        return "bad_ip_checksum"
    if int.from_bytes(ip[6:8], "big") & 0x3FFF:
        return "ip_fragment"
    if 14 + total > len(frame) or total < 28:
        return "bad_udp"
    return None


def serve(
    model: UdpBoardModel,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    stop: threading.Event,
    lose: float = 0.0,
    seed: int = 0,
    pcap=None,
    spin: bool = False,
) -> tuple[threading.Thread, tuple[str, int]]:
    """Answer datagrams on a UDP socket bound to ``host``:``port`` (0: any free port) in a
    daemon thread until ``stop`` is set; replies go to the session's host. ``lose`` is the chance
    that a datagram from the host is lost on the way. ``spin``: read without sleeping for
    :data:`SPIN` after each datagram (a process of its own). ``pcap``: a file to write every
    datagram both ways to, as the frames on the wire (:class:`~.pcap.SocketCapture`; closed
    when the thread ends). Returns the thread and the address."""
    from .pcap import SocketCapture

    rng = random.Random(seed)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((host, port))
    sock.settimeout(_SLEEP)
    capture = None if pcap is None else SocketCapture.at(pcap, sock.getsockname())

    def loop():
        try:
            with sock:
                _answer(
                    model, sock, stop, lambda: bool(lose) and rng.random() < lose, capture, spin
                )
        finally:
            if capture is not None:
                capture.close()

    thread = threading.Thread(target=loop, daemon=True, name="nfacep-udp-board-model")
    thread.start()
    return thread, sock.getsockname()


#: With :func:`serve`'s ``spin``, after a datagram the software board reads its socket without
#: sleeping for this long (seconds) before it sleeps again (in waits of :data:`_SLEEP`, so that
#: it sees ``stop``): a host's next packet in a burst (a load's next chunk, the next piece of
#: tuples) is answered without the 50-150 µs the kernel takes to wake a process on an
#: otherwise idle machine, as a board answers; between bursts it sleeps. For a process of its
#: own (``nfacep serve``): a thread that reads without sleeping keeps the process's other
#: threads from running Python.
SPIN = 0.002
_SLEEP = 0.02


def _answer(model: UdpBoardModel, sock, stop: threading.Event, lost, capture, spin: bool) -> None:
    """:func:`serve`'s loop: each datagram not ``lost()`` to ``model``, its replies back."""
    awake = 0.0  # (monotonic seconds: read without sleeping until then)
    while not stop.is_set():
        sock.settimeout(0.0 if time.monotonic() < awake else _SLEEP)
        try:
            data, sender = sock.recvfrom(65536)
        except (BlockingIOError, TimeoutError):
            continue
        except OSError:
            return
        awake = time.monotonic() + SPIN if spin else 0.0
        if lost():
            continue
        if capture is not None:
            capture.received(data, sender)
        for address, reply in model.feed(data, sender):
            sock.sendto(reply, address)
            if capture is not None:
                capture.sent(reply, address)
