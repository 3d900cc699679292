"""A software board for the UDP link: the payload format of :mod:`.payload` with the
reference matcher as the engine, answering UDP datagrams as the gateware does.

:class:`UdpBoardModel` takes a datagram's payload and returns the payloads the board sends
back (same acceptance rules and counters as the gateware for what a UDP socket can carry: the
Ethernet, IPv4 and UDP classes never occur); :func:`serve` runs one on a UDP socket (e.g. on
127.0.0.1) in a thread, so a host can be tested without hardware.
"""

from __future__ import annotations

import random
import socket
import threading

from nfacep import wire
from nfacep.params import EngineParams
from nfacep.reference import matcher as reference

from ..model import ParamRegisters
from ..protocol import SWITCH_BYTES, encode_fields, engine_id
from .payload import FRAME_CLASSES, HEADER_BYTES, STATUS_FIELDS, VERSION, PacketType, packet
from .tx import MAX_PAYLOAD

__all__ = ["UdpBoardModel", "serve"]


class UdpBoardModel:
    """The board's side of the UDP link, in software.

    ``feed(payload)`` takes one UDP payload from the host and returns the UDP payloads the board
    sends back (RECORDS packets of at most as many records as the gateware's, then STATUS
    when asked). The engine is infinitely fast. ``capacity`` bounds a TUPLES packet's bytes as
    the board's buffer does (larger: ``engine_full``).

    With runtime parameters, ``values`` are the ones the board was built with (required);
    PARAMS packets switch them as the engine does
    (:class:`~nfacep.boards.link.model.ParamRegisters`); one while a switch is pending is
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
    ):
        self.nfa = nfa
        self.params = params
        self.schema = nfa.program.schema
        self.tuple_bytes = wire.tuple_bytes(self.schema)
        self.record_format = wire.record_format(nfa)
        self.capacity = capacity
        self.max_records = (MAX_PAYLOAD - HEADER_BYTES) // self.record_format.nbytes
        self.id = engine_id(nfa, params) if engine_id_override is None else engine_id_override
        self.registers = ParamRegisters(nfa, values)
        self.reset()

    def reset(self) -> None:
        self.accepted = bytearray()
        self.reported = 0
        self.seq = 0  # the board's packets
        self.counters = dict.fromkeys((name for name, _ in STATUS_FIELDS), 0)
        self.registers.reset()

    @property
    def switches(self) -> list[tuple[int, dict]]:
        """The switches written since RESET: (first tuple, values)."""
        return self.registers.switches

    def taken(self) -> int:
        return len(self.accepted) // self.tuple_bytes

    def status(self) -> dict:
        return {
            **self.counters,
            "tuple_bytes": self.tuple_bytes,
            "record_bytes": self.record_format.nbytes,
            "capacity": self.capacity,
            "flags": 1,
            "tuples": len(self.accepted) // self.tuple_bytes,
        }

    def _packet(self, ptype: int, body: bytes) -> bytes:
        out = packet(ptype, body, seq=self.seq, engine_id=self.id)
        self.seq += 1
        return out

    def _status_packet(self) -> bytes:
        values = self.registers.in_force(self.taken()).to_bytes(self.registers.nbytes, "little")
        return self._packet(PacketType.STATUS, encode_fields(STATUS_FIELDS, self.status()) + values)

    def _classify(self, data: bytes) -> str:
        if len(data) < HEADER_BYTES:
            return "bad_udp"
        version, ptype = data[0], data[1]
        ident = int.from_bytes(data[8:12], "little")
        body = data[HEADER_BYTES:]
        known = (PacketType.TUPLES, PacketType.STATUS_REQ, PacketType.RESET) + (
            (PacketType.PARAMS,) if self.registers else ()
        )
        if version != VERSION or ptype not in known:
            return "bad_header"
        if ptype in (PacketType.TUPLES, PacketType.PARAMS) and ident != self.id:
            return "bad_header"
        if ptype == PacketType.PARAMS:
            if len(body) != SWITCH_BYTES + self.registers.nbytes:
                return "bad_udp"
            return "engine_full" if self.registers.pending(self.taken()) else "accepted"
        if ptype != PacketType.TUPLES:
            return "bad_udp" if body else "accepted"
        if not body or len(body) % self.tuple_bytes:
            return "bad_udp"
        if len(body) > self.capacity:
            return "engine_full"
        return "accepted"

    def feed(self, data: bytes) -> list[bytes]:
        cls = self._classify(data)
        assert cls in FRAME_CLASSES
        self.counters[cls] += 1
        if cls != "accepted":
            return []
        ptype = data[1]
        if ptype == PacketType.RESET:
            self.reset()
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
        n = len(self.accepted) // self.tuple_bytes
        tuples = wire.unpack_bytes(self.schema, bytes(self.accepted))
        records = [
            r
            for r in reference.run(
                self.nfa, tuples, self.params, values=self.registers.schedule()
            ).records(self.nfa, tuples)
            if r.seq >= self.reported
        ]
        self.reported = n
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
    daemon thread until ``stop`` is set; replies go to the sender. ``lose`` is the chance
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
                for reply in model.feed(data):
                    sock.sendto(reply, sender)

    thread = threading.Thread(target=loop, daemon=True, name="nfacep-udp-board-model")
    thread.start()
    return thread, sock.getsockname()
