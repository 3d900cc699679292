"""Loading a query into a programmable board over UDP (boards/UDP.md, "Loading a query"):
``nfacep load`` and the image step of ``nfacep run --udp``.

A loader needs no session of its own (but while a session is alive the board takes LOAD only
from the session host's IPv4 address, from any of its ports): it sends LOAD packets
(:func:`~.protocol.load_chunks`) from its own socket, each with a session id of its own (the
board's STATUS answer carries it back, so the loader knows which of its packets the board took),
asks for STATUS with LOAD packets without bytes, and learns from STATUS the engine (``engine``,
the capacities, the store), where the load being received stands (``load_offset``: a lost chunk
is sent again from there), the loads refused and the image in force. The board answers a LOAD
with bytes once they are in the engine, and a load's last chunk once the engine checked the
load, so that answer tells its outcome: in force, refused, or waiting for its tuple (the one
case where the loader asks again). :func:`load_image` is the whole conversation.
"""

from __future__ import annotations

import secrets
import socket
import threading
import time
from dataclasses import dataclass

from nfacep import wire
from nfacep.image import Capacity, EngineShape, Image, image, load
from nfacep.params import EngineParams

from ..host import LinkError, check_engine
from ..protocol import decode_fields, fields_size
from .errors import EngineMismatchError, UdpTimeoutError
from .protocol import (
    HEADER_BYTES,
    LOAD_HEADER_BYTES,
    LOAD_LAST,
    LOAD_TAIL,
    STATUS_FIELDS,
    VERSION,
    PacketType,
    decode_header,
    load_chunks,
    packet,
)

__all__ = ["Loaded", "load_image"]

STATUS_BYTES = fields_size(STATUS_FIELDS)
#: Seconds a STATUS request waits for its answer before it is asked again.
ROUND = 0.05
#: While a load the board checked waits for its tuple, STATUS is asked again after pauses
#: doubling from the first to the most (seconds).
PAUSE_FIRST, PAUSE_MOST = 0.0001, 0.01
#: An answer is waited for first by reading the socket without sleeping, for at most this long
#: (seconds), then by sleeping until it comes: a board answers within microseconds, and a
#: process the kernel wakes on an otherwise idle machine takes 50-150 µs more to run again.
#: Only when the loader is its process's only thread: one that reads without sleeping keeps
#: the others from running Python (an in-process software board answered later, not sooner).
SPIN = 0.002


@dataclass
class Loaded:
    """What :func:`load_image` did: the engine the board runs, the image, whether it was sent
    (False: it was already in force), the tuple it is in force from, the board's last STATUS,
    and the LOAD packets sent."""

    params: EngineParams
    image: Image
    sent: bool
    at: int
    status: dict
    record_format: wire.RecordFormat
    packets: int = 0


class _Loader:
    """A conversation of LOAD packets with the board on a connected UDP socket."""

    def __init__(self, sock: socket.socket, address: str, timeout: float):
        self.sock, self.address, self.timeout = sock, address, timeout
        self.base = secrets.randbits(31) << 1 or 2  #: session ids: base + k for packet k
        self.next = 0
        self.answers: dict[int, dict] = {}  #: session id -> the STATUS that answered it
        self.packets = 0
        self.latest: dict | None = None  #: the STATUS of the last packet answered

    def send(self, body: bytes, engine_id: int = 0) -> int:
        """One LOAD; its session id."""
        session = (self.base + self.next) & 0xFFFFFFFF
        self.next += 1
        try:
            self.sock.send(packet(PacketType.LOAD, body, engine_id=engine_id, session=session))
        except ConnectionRefusedError:
            pass
        except OSError as exc:
            raise LinkError(f"cannot send to {self.address}: {exc}") from None
        self.packets += 1
        return session

    def poll(self, wait: float, until: int | None = None) -> None:
        """Take the STATUS answers that come within ``wait`` seconds, or until the answer to
        the packet of session id ``until``."""
        start = time.monotonic()
        alone = threading.active_count() == 1
        deadline, spin = start + wait, start + (min(wait, SPIN) if alone else 0.0)
        try:
            self._take(deadline, spin, until)
        finally:  # (the packets sent next wait for the socket's buffer, as before the poll)
            self.sock.settimeout(self.timeout)

    def _take(self, deadline: float, spin: float, until: int | None) -> None:
        """:meth:`poll`'s loop: the answers that come by ``deadline``, or until ``until``'s."""
        while until not in self.answers:
            data = self._receive(deadline, spin)
            if data is None:
                return
            try:
                head = decode_header(data)
            except ValueError:
                continue
            body = data[HEADER_BYTES:]
            if (
                head["version"] != VERSION
                or head["type"] != PacketType.STATUS
                or len(body) < STATUS_BYTES
            ):
                continue
            status = decode_fields(STATUS_FIELDS, body[:STATUS_BYTES])
            status["engine_id"] = head["engine_id"]
            k = (head["session"] - self.base) & 0xFFFFFFFF
            if k < self.next and head["session"] not in self.answers:
                self.answers[head["session"]] = status
                if self.latest is None or k >= self.latest["_k"]:
                    self.latest = {**status, "_k": k}

    def _receive(self, deadline: float, spin: float) -> bytes | None:
        """The next datagram, read without sleeping until ``spin`` and then sleeping until
        ``deadline`` (monotonic seconds); None when none came, or the board's port refused."""
        while (left := deadline - (now := time.monotonic())) > 0:
            self.sock.settimeout(0.0 if now < spin else left)
            try:
                return self.sock.recv(65536)
            except BlockingIOError:
                continue
            except (TimeoutError, ConnectionRefusedError):
                return None
        return None

    def ask(self) -> dict:
        """A STATUS (a LOAD without bytes), asked for again every round trip."""
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            session = self.send(bytes(LOAD_HEADER_BYTES))
            self.poll(ROUND, session)
            if session in self.answers:
                return self.answers[session]
        raise UdpTimeoutError(
            f"no answer to LOAD from {self.address} within --timeout {self.timeout:g} s: while "
            "a session is alive the board takes loads only from its session host's address "
            "(run `nfacep load` there); else the board is unreachable or has no programmable "
            "engine (`nfacep build --link udp --engine programmable`)"
        )

    def chunks(self, data: bytes, start: int, engine_id: int) -> int | None:
        """Send the load ``data`` from byte ``start`` on: the bulk, then, once the board
        answered the bulk's last chunk, the last :data:`~.protocol.LOAD_TAIL` bytes (so that
        what the engine still has to take in when the load's last byte arrives is those few
        bytes, not a whole chunk). The session id of the load's last chunk, None when the
        bulk went unanswered (within a round)."""
        tail = max(start, len(data) - LOAD_TAIL)
        if start < tail:
            bulk = [self.send(body, engine_id) for body in load_chunks(data, start=start, end=tail)]
            self.poll(ROUND, bulk[-1])
            if bulk[-1] not in self.answers:
                return None
        last = [self.send(body, engine_id) for body in load_chunks(data, start=tail)][-1]
        self.poll(ROUND, last)
        return last

    def deliver(self, data: bytes, status: dict) -> dict:
        """Send the load ``data`` until the board took it whole (the answer to its last chunk
        came, which tells its outcome, or STATUS shows it no longer under way); the STATUS
        after it. ``status``: the board's latest, which names its engine and where a load
        under way stands."""
        engine_id = status["engine_id"]
        refused = status["refused"]
        if status["load_offset"]:  # another loader's load left unfinished: end it (refused)
            self.send(status["load_offset"].to_bytes(4, "little") + bytes([LOAD_LAST, 0]), 1)
            refused += 1
        deadline = time.monotonic() + self.timeout
        start = 0
        while time.monotonic() < deadline:
            last = self.chunks(data, start, engine_id)
            if last in self.answers:  # (taken whole: a chunk is taken only at its offset)
                return {**self.answers[last], "refused_before": refused}
            status = self.ask()
            if last in self.answers and not status["load_offset"]:
                return {**status, "refused_before": refused}
            start = status["load_offset"]  # (where the board stands: the rest again)
            if start >= len(data):
                start = 0
        raise UdpTimeoutError(
            f"the board at {self.address} did not take the load within --timeout {self.timeout:g} s"
        )


def board_engine(status: dict, nfa, given: dict | None) -> EngineParams | None:
    """The programmable engine the board's STATUS describes, checked against ``nfa``'s stream
    declaration and key and the engine options ``given`` (None: a fixed engine's board)."""
    if not status["engine"]:
        return None
    return check_engine(
        status,
        nfa,
        EngineParams(),
        link="udp --engine programmable",
        error=EngineMismatchError,
        given=given or {},
    )


def load_image(
    sock: socket.socket,
    address: str,
    timeout: float,
    nfa,
    *,
    values=None,
    given: dict | None = None,
    at: int | None = None,
    always: bool = False,
    wait: bool = True,
    before=None,
) -> Loaded | None:
    """Put ``nfa``'s image in force on the board at ``address`` (a connected ``sock``):
    from tuple ``at`` (default: the tuples the engine took so far, so the next one it takes),
    unless it is in force already (``always``: send it anyway). None when the board has a fixed
    engine. Raises :class:`~nfacep.image.ImageError` (exit 2) before sending anything when the
    file does not fit the board's engine, :class:`~.host.EngineMismatchError` when the board's
    engine is for another stream declaration or key, :class:`LinkError` when the board refuses
    the load. With ``wait``, returns once the image is in force (else once the board checked
    the load: in force or waiting for its tuple). ``before`` is called with the image before
    it is sent (``nfacep load`` records the file there: the run streaming meanwhile may see it
    in force at once)."""
    loader = _Loader(sock, address, timeout)
    status = loader.ask()
    params = board_engine(status, nfa, given)
    if params is None:
        return None
    program = nfa.program
    shape = EngineShape(program.schema, program.partition_fields, Capacity.of(params))
    img = image(nfa, shape, values)  # (ImageError: every reason, nothing sent)
    named = int.from_bytes(bytes.fromhex(img.fingerprint), "little")
    start = status["tuples"] if at is None else at
    fmt = wire.record_format(nfa, slots=params.queries)
    if status["image"] == named and not always:
        return Loaded(params, img, False, 0, status, fmt, loader.packets)
    if before is not None:
        before(img)
    status = loader.deliver(load(img, start), status)
    deadline = time.monotonic() + timeout
    pause = 0.0
    while True:
        if status["refused"] > status.get("refused_before", status["refused"]):
            raise LinkError(
                f"the board at {address} refused the image {img.fingerprint} (its load arrived "
                "damaged or is not for its engine); the query in force is unchanged"
            )
        if status["image"] == named or not wait:
            return Loaded(params, img, True, start, status, fmt, loader.packets)
        if time.monotonic() > deadline:
            raise UdpTimeoutError(
                f"the board at {address} took the image {img.fingerprint} but it is not in "
                f"force within --timeout {timeout:g} s (it is from tuple {start}; the engine "
                f"took {status['tuples']})"
            )
        # the load waits for its tuple (or, when the answer to its last chunk was lost, an
        # empty LOAD's answer, made at once, came before the engine checked it): asked again
        # less and less often, so that a load waiting for a far tuple does not flood the board
        # with questions
        pause = min(max(2 * pause, PAUSE_FIRST), PAUSE_MOST)
        time.sleep(pause)
        before = status["refused_before"]
        status = {**loader.ask(), "refused_before": before}
