"""The UDP host's conversation with the board: one session over a connected socket (RESET's
random session id, sending packets, taking the board's STATUS and RECORDS packets in order,
asking for STATUS until it answers) and the tuple ranges a lost packet touches.
"""

from __future__ import annotations

import secrets
import socket
import time

from nfacep.params import EngineParams

from ..host import LinkError
from ..protocol import decode_fields, fields_size
from .errors import UdpTimeoutError
from .protocol import (
    HEADER_BYTES,
    SESSION_IDLE,
    STATUS_FIELDS,
    VERSION,
    PacketType,
    decode_header,
    packet,
)

#: The frame classes that mean a packet of the host's was not taken: only ``engine_full`` is
#: decided after the session check, so only it cannot be another station's frame (those the
#: board counts elsewhere; a packet of the host's refused for another reason shows as a gap in
#: ``next_seq``).
REJECTED = ("engine_full",)


STATUS_BYTES = fields_size(STATUS_FIELDS)


class _Lost(Exception):
    """A loss in one attempt: ``what`` says where, ``ranges`` the tuple ranges it touches."""

    def __init__(self, what: str, ranges: list[tuple[int, int]]):
        super().__init__(what)
        self.what = what
        self.ranges = ranges


#: Tuple ranges a message names at most (the rest counted).
SHOWN_RANGES = 5


def _ranges_text(ranges: list[tuple[int, int]]) -> str:
    text = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in ranges[:SHOWN_RANGES])
    more = len(ranges) - SHOWN_RANGES
    return text + (f" and {more} more ranges" if more > 0 else "")


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(r for r in ranges if r[0] <= r[1]):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


class _Session:
    """One conversation with the board over a connected UDP socket."""

    def __init__(
        self,
        sock: socket.socket,
        address: str,
        timeout: float,
        say,
        values_bytes: int = 0,
        *,
        record_bytes: int = 1,
        most_records: int = 0,
    ):
        self.sock = sock
        self.values_bytes = values_bytes  #: bytes of the values in force at STATUS's end
        self.record_bytes = record_bytes
        #: records the attempt may have brought at most by the end of the piece being sent
        #: (those of the pieces before, then one per tuple of this piece and a previous
        #: attempt's late ones): more is a board gone wrong, not memory to spend
        self.most_records = most_records
        self.address = address
        self.timeout = timeout
        self.say = say
        #: how long to wait for a STATUS before asking again
        self.rto = min(0.2, timeout / 4)
        self.heard = False  #: any packet from the board at all
        self.engine: EngineParams | None = None  #: the engine the board runs (after RESET)
        self.refused = 0  #: ICMP port unreachable seen
        self.bad_in = 0  #: packets that are not the format's
        self.packets_out = 0
        self.requests = 0
        self.pending: list[dict] = []  #: STATUS packets not yet looked at, in arrival order
        #: the session id of this run (random, never 0)
        self.session = secrets.randbits(32) or 1
        #: packets ignored: another version of the format (the versions seen), another session
        self.versions: set[int] = set()
        self.other_version = 0
        self.other_session = 0
        self.duplicates = 0  #: packets of a board seq already taken
        #: answers still to come for repeated requests already answered (the link keeps the
        #: order, so they come before the answers to later requests)
        self.stale = 0
        self.start_attempt()

    def start_attempt(self) -> None:
        #: board seq -> (type, body): the packets not yet taken into a piece's records
        self.received: dict[int, tuple[int, object]] = {}
        #: the board's packets before this one (its seq since RESET) are all accounted for:
        #: their records were written, so one that comes again is a duplicate
        self.floor = 0
        self.record_packets = 0
        self.record_count = 0  #: records in them
        self.status: dict | None = None  #: the last STATUS taken
        self.status_seq = -1
        self.base = 0  #: the board's seq of the STATUS answering RESET

    def send(self, ptype: int, body: bytes = b"", *, seq: int = 0, engine: int = 0) -> None:
        try:
            self.sock.send(packet(ptype, body, seq=seq, engine_id=engine, session=self.session))
        except ConnectionRefusedError:
            self.refused += 1
        except OSError as exc:
            raise LinkError(f"cannot send to {self.address}: {exc}") from None
        self.packets_out += 1

    def poll(self, wait: float) -> None:
        """Take what the board sent within ``wait`` seconds (at least one read), or until a
        STATUS came (its waiter looks at it at once)."""
        deadline = time.monotonic() + wait
        while True:
            left = deadline - time.monotonic()
            self.sock.settimeout(max(left, 0.0005))
            try:
                data = self.sock.recv(65536)
            except (TimeoutError, BlockingIOError):
                return
            except ConnectionRefusedError:
                self.refused += 1
                time.sleep(max(0.0, min(left, 0.01)))
                if time.monotonic() >= deadline:
                    return
                continue
            self._handle(data)
            if self.pending or time.monotonic() >= deadline:
                return

    def _handle(self, data: bytes) -> None:
        try:
            head = decode_header(data)
        except ValueError:
            self.bad_in += 1
            return
        if head["version"] != VERSION:
            self.versions.add(head["version"])
            self.other_version += 1
            return
        if head["session"] != self.session:
            self.other_session += 1
            return
        self.heard = True
        body = data[HEADER_BYTES:]
        seq = head["seq"]
        # (the board numbers every packet it sends)
        if seq in self.received or (seq - self.base) % 2**32 < self.floor:
            self.duplicates += 1
            return
        # (a programmable board's STATUS has no values: its image holds them)
        sizes = (STATUS_BYTES + self.values_bytes, STATUS_BYTES)
        if head["type"] == PacketType.STATUS and len(body) in sizes:
            status = {
                **decode_fields(STATUS_FIELDS, body[:STATUS_BYTES]),
                "seq": seq,
                "engine_id": head["engine_id"],
                "values": int.from_bytes(body[STATUS_BYTES:], "little"),
            }
            self.received[seq] = (PacketType.STATUS, status)
            self.pending.append(status)
        elif head["type"] == PacketType.RECORDS and body and len(body) % self.record_bytes == 0:
            self.record_count += len(body) // self.record_bytes
            if self.record_count > self.most_records:
                raise LinkError(
                    f"the board at {self.address} sent more than {self.most_records} records "
                    "so far in this attempt, more than one for each tuple sent: it is not "
                    "this nfacep's board, or it is broken"
                )
            self.received[seq] = (PacketType.RECORDS, body)
            self.record_packets += 1
        else:
            self.bad_in += 1

    def ask(self, ptype: int = PacketType.STATUS_REQ, want=lambda status: True) -> dict:
        """Send ``ptype`` (STATUS_REQ or RESET) and return the STATUS that answers it, asking
        again every ``rto``; a UdpTimeoutError when none comes within the timeout.

        A STATUS that is not what ``want`` expects may be a late answer to a request repeated
        earlier (:attr:`stale` of them may still come, before this call's): such are skipped;
        when none can be, it is returned, for the caller to see what it says. One that is
        what ``want`` expects is returned even if it answers an earlier request; the answers to
        this call's requests are then all still to come (:attr:`stale` counts them)."""
        deadline = time.monotonic() + self.timeout
        sent = answered = 0  # this call's requests, and the answers to them that came
        earlier = self.stale  # answers to requests before this call still to come (first)
        while True:
            now = time.monotonic()
            if now >= deadline:
                raise self.silent()
            self.send(ptype)
            sent += 1
            self.requests += 1
            until = min(deadline, now + self.rto)
            while True:
                while self.pending:
                    status = self.pending.pop(0)
                    late = earlier > 0  # (the link keeps the order: earlier answers first)
                    if late:
                        earlier -= 1
                    else:
                        answered += 1
                    if late and not want(status):
                        continue
                    # (an answer to this call's requests: every earlier one came before it)
                    self.stale = (earlier if late else 0) + sent - answered
                    self.status, self.status_seq = status, status["seq"]
                    return status
                left = until - time.monotonic()
                if left <= 0:
                    break
                self.poll(min(left, 0.01))

    def silent(self) -> UdpTimeoutError:
        if self.versions and not self.heard:
            return UdpTimeoutError(
                f"the board at {self.address} speaks version "
                f"{', '.join(map(str, sorted(self.versions)))} of the UDP payload format, this "
                f"nfacep version {VERSION}: rebuild the bitstream with this nfacep"
            )
        if self.heard:
            return UdpTimeoutError(
                f"the board at {self.address} stopped answering (no STATUS "
                f"within --timeout {self.timeout:g} s)"
            )
        why = " (the address refuses UDP: no one listens at that port)" if self.refused else ""
        return UdpTimeoutError(
            f"no board answers at {self.address} within --timeout {self.timeout:g} s{why}: is "
            "the board connected at 1000 Mb/s, loaded with a bitstream from `nfacep build "
            "--link udp`, and are its address and port those it was built with (--ip, "
            f"--port)? (A board in another host's session refuses RESET until that host "
            f"closes it or is silent for {SESSION_IDLE:.1f} s.)"
        )
