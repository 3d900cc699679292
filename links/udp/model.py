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
import threading
import time

from nfacep.params import EngineParams

from ..model import BoardModel
from ..protocol import SWITCH_BYTES, encode_fields, engine_fields
from .protocol import (
    FRAME_CLASSES,
    HEADER_BYTES,
    MAX_PAYLOAD,
    SESSION_IDLE,
    STATUS_FIELDS,
    VERSION,
    PacketType,
    decode_header,
    packet,
)

#: A host's address: (IPv4 address, UDP port).
Address = tuple[str, int]

__all__ = ["UdpBoardModel", "serve"]


class UdpBoardModel(BoardModel):
    """The board's side of the UDP link, in software.

    ``feed(payload, sender)`` takes one UDP payload from ``sender`` (an (IPv4 address, port)
    pair) and returns what the board sends back: (address, payload) pairs, RECORDS packets of
    at most as many records as the gateware's, then STATUS when asked, all to the session's
    host. The engine is infinitely fast. ``capacity`` bounds a TUPLES packet's bytes as the
    board's buffer does (larger: ``engine_full``).

    Sessions as the gateware's (:class:`nfacep.hdl.eth.payload.PayloadRx`): a RESET opens
    one when none is open, or starts it again from its host with its id; CLOSE, or ``idle``
    seconds without an accepted packet of its host's (the gateware's
    :data:`~.protocol.SESSION_IDLE`), ends it; every packet not from the session's host with
    its id is ``foreign`` (RESET too, while a session is open).

    With runtime parameters, ``values`` are the ones the board was built with (required);
    PARAMS packets switch them as the engine does
    (:class:`~nfacep.links.model.ParamRegisters`); one while a switch is pending is
    ``engine_full``. STATUS ends with the values in force.
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
        self.reset()

    def reset(self) -> None:
        super().reset()
        self.seq = 0  # the board's packets
        self.counters = dict.fromkeys((name for name, _ in STATUS_FIELDS), 0)

    def status(self) -> dict:
        return {
            **self.counters,
            "tuple_bytes": self.tuple_bytes,
            "record_bytes": self.record_format.nbytes,
            "capacity": self.capacity,
            **engine_fields(self.params),
            "flags": 1,
            "tuples": len(self.accepted) // self.tuple_bytes,
        }

    def _packet(self, ptype: int, body: bytes) -> bytes:
        out = packet(ptype, body, seq=self.seq, engine_id=self.id, session=self.session)
        self.seq += 1
        return out

    def _status_packet(self) -> bytes:
        values = self.registers.in_force(self.taken()).to_bytes(self.registers.nbytes, "little")
        return self._packet(PacketType.STATUS, encode_fields(STATUS_FIELDS, self.status()) + values)

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
        if head["version"] != VERSION or ptype not in known:
            return "bad_header"
        if ptype in (PacketType.TUPLES, PacketType.PARAMS) and head["engine_id"] != self.id:
            return "bad_header"
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


def serve(
    model: UdpBoardModel,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    stop: threading.Event,
    lose: float = 0.0,
    seed: int = 0,
) -> tuple[threading.Thread, tuple[str, int]]:
    """Answer datagrams on a UDP socket bound to ``host``:``port`` (0: any free port) in a
    daemon thread until ``stop`` is set; replies go to the session's host. ``lose`` is the chance
    that a datagram from the host is lost on the way. Returns the thread and the address."""
    rng = random.Random(seed)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((host, port))
    sock.settimeout(0.02)

    def loop():
        with sock:
            while not stop.is_set():
                try:
                    data, sender = sock.recvfrom(65536)
                except TimeoutError:
                    continue
                except OSError:
                    return
                if lose and rng.random() < lose:
                    continue
                for address, reply in model.feed(data, sender):
                    sock.sendto(reply, address)

    thread = threading.Thread(target=loop, daemon=True, name="nfacep-udp-board-model")
    thread.start()
    return thread, sock.getsockname()
