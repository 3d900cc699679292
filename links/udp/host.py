"""``nfacep run --udp``: a board over its Gigabit Ethernet/UDP link, as a back-end.

:class:`UdpBoard` is a :class:`~nfacep.backend.Backend` beside
:class:`~nfacep.links.uart.host.UartBoard` and shares the checks and the result of
:mod:`nfacep.links.host` with it. It talks to the board through the operating system's UDP
socket, in the payload format of :mod:`nfacep.links.udp.protocol` (``boards/UDP.md``):

1. RESET the board, opening a session with a random id (every packet both ways carries it;
   the board refuses other hosts while it lasts), and read its STATUS; check the header's
   ``engine_id`` and the tuple and record sizes against this query file and these
   parameters (exit 2 when they differ).
2. Send the tuples in TUPLES packets (``seq`` 0, 1, ...) under a credit of the board's
   ``capacity`` bytes: tuples sent minus STATUS's ``tuples`` (those the engine took) never
   exceed it. After each burst the host asks for STATUS; as UDP between two stations keeps
   the order, a STATUS whose ``next_seq`` is not the host's next ``seq`` (or with ``lost``,
   ``late`` or ``engine_full`` counted) means TUPLES packets were lost on the way. With runtime
   parameters, the switches go in PARAMS packets numbered with them (as over the UART:
   :func:`~nfacep.links.host.switch_plan`), each once the engine took the tuple of the one
   before; a PARAMS packet that finds a switch pending counts as ``engine_full``.
3. Collect the RECORDS packets; the board's ``seq`` numbers every packet it sends (RECORDS and
   STATUS), so a gap is a packet lost on the way back, and the last STATUS's ``records`` and
   ``packets`` say how many records and RECORDS packets there were.

The engine keeps state from tuple to tuple and the board does not retransmit records, so the
one safe resend is of the whole stream: on a loss in either direction the host RESETs the board
and starts again, up to ``retries`` times; after that it fails (exit 1) naming the tuple ranges
whose tuples or records were lost. At the end (or on failure) the host sends CLOSE, ending
the session.

A file is read and sent in pieces (:meth:`UdpBoard.run_stream`, ``nfacep run --udp``): after
each piece the host waits until the board took it and is idle, checks the piece's records and
writes their matches to a temporary file beside the output, so that it holds a bounded part of
the stream; the file becomes the match file only when the run is complete, and nothing is
written otherwise (``boards/UDP.md``, "What the host holds").
"""

from __future__ import annotations

import bisect
import contextlib
import math
import secrets
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass

from nfacep import wire
from nfacep.backend import Sink
from nfacep.errors import UsageError
from nfacep.io.tuples import Tuples
from nfacep.nfa import Nfa
from nfacep.params import EngineParams
from nfacep.result import Totals
from nfacep.settings import ParamValues

from ..host import (
    BoardResult,
    LinkError,
    Tally,
    check_engine,
    check_timeout,
    check_values,
    each_piece,
    frame_order,
    piece_result,
    run_whole,
    switch_plan,
    values_bytes,
)
from ..protocol import decode_fields, fields_size, switch_body
from .errors import EngineMismatchError, UdpTimeoutError
from .protocol import (
    DEFAULT_ENDPOINT,
    HEADER_BYTES,
    MAX_PAYLOAD,
    SESSION_IDLE,
    STATUS_FIELDS,
    VERSION,
    PacketType,
    decode_header,
    packet,
)

__all__ = [
    "DEFAULT_PORT",
    "EngineMismatchError",
    "UdpBoard",
    "UdpBoardResult",
    "UdpOptions",
    "UdpTimeoutError",
    "max_tuples_per_packet",
    "parse_address",
]

#: The board's UDP port unless ``--udp HOST:PORT`` names another (``nfacep build``'s default).
DEFAULT_PORT = DEFAULT_ENDPOINT.port
#: Bytes of tuples in one TUPLES packet at most: a 1,500-byte IP packet (the board counts a
#: longer frame as ``bad_size``).
MAX_TUPLE_BYTES = MAX_PAYLOAD - HEADER_BYTES
#: The frame classes that mean a packet of the host's was not taken: only ``engine_full`` is
#: decided after the session check, so only it cannot be another station's frame (those the
#: board counts elsewhere; a packet of the host's refused for another reason shows as a gap in
#: ``next_seq``).
REJECTED = ("engine_full",)
STATUS_BYTES = fields_size(STATUS_FIELDS)
#: ``--rate`` bounds, tuples per second (``max`` is beyond them: as fast as the socket takes).
MIN_RATE, MAX_RATE = 1.0, 1e12
#: ``--retries`` at most.
MAX_RETRIES = 100


class _Lost(Exception):
    """A loss in one attempt: ``what`` says where, ``ranges`` the tuple ranges it touches."""

    def __init__(self, what: str, ranges: list[tuple[int, int]]):
        super().__init__(what)
        self.what = what
        self.ranges = ranges


def max_tuples_per_packet(tuple_bytes: int) -> int:
    """Tuples of ``tuple_bytes`` bytes that fit one TUPLES packet in a 1,500-byte MTU."""
    return MAX_TUPLE_BYTES // tuple_bytes


def parse_address(text: str) -> tuple[str, int]:
    """``HOST[:PORT]`` as (IPv4 address, port), the name resolved; a UsageError if bad."""
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = text, str(DEFAULT_PORT)
    if not host:
        raise UsageError(f"--udp {text!r}: expected HOST or HOST:PORT")
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise UsageError(f"--udp {text!r}: {port_text!r} is not a UDP port (1 to 65535)")
    try:
        infos = socket.getaddrinfo(host, int(port_text), socket.AF_INET, socket.SOCK_DGRAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise UsageError(
            f"--udp {text!r}: cannot resolve {host!r} to an IPv4 address: {exc}"
        ) from None
    return infos[0][4][0], int(port_text)


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


@dataclass
class UdpBoardResult(BoardResult):
    """What a board reported over UDP."""

    address: str = ""

    def details(self) -> dict:
        board = dict(self.status)
        board.pop("values", None)
        if self.values:  # the values in force at the end, as STATUS reported them
            board["values"] = self.values.texts(self.values.unpacked(self.status["values"]))
        return {"udp": self.address, "board": board, "link": self.stats}

    def note(self) -> str:
        seconds = self.stats.get("seconds") or 0
        rate = self.n / seconds if seconds else 0
        return f"board at {self.address} over UDP, {seconds:.2f} s, {rate:.0f} tuples/s"


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
        earlier (:attr:`stale` of them may still come): such are skipped; when none can be, it
        is returned, for the caller to see what it says."""
        deadline = time.monotonic() + self.timeout
        sent = 0
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
                    if not want(status) and self.stale:
                        self.stale -= 1
                        continue
                    if want(status):
                        self.stale = 0  # the older answers came before this one
                    self.stale += sent - 1
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


@dataclass(frozen=True)
class UdpOptions:
    """How :class:`UdpBoard` reaches the board, checked once when made: at ``address``
    (``HOST[:PORT]``, port :data:`DEFAULT_PORT` if omitted).

    ``timeout`` bounds every wait for the board (seconds); ``tuples_per_packet`` the tuples per
    TUPLES packet (default: as many as fit a 1,500-byte MTU and the board's buffer);
    ``retries`` how many times a run with a lost packet starts again. ``rate`` (tuples per
    second; ``math.inf``: as fast as the socket takes them) sends open loop, without waiting
    for the board's credit: the board takes packets at line rate, so only a query whose records
    outrun the line back fills its buffer (``engine_full``, a loss like any other); STATUS is
    asked for on the way, to see losses early. None (the default) keeps to the credit.
    ``engine_given``: None, the board must run the engine :meth:`UdpBoard.run` is given; else
    the engine options given on ``nfacep run``'s command line, as (name, value) pairs: the
    engine is learnt from the board's STATUS and must agree with them
    (:func:`~nfacep.links.host.check_engine`).
    """

    address: str
    timeout: float = 5.0
    tuples_per_packet: int | None = None
    retries: int = 2
    rate: float | None = None
    engine_given: tuple[tuple[str, int | str], ...] | None = None

    def __post_init__(self):
        check_timeout(self.timeout)
        if self.rate is not None and not (
            MIN_RATE <= self.rate <= MAX_RATE or self.rate == math.inf
        ):
            raise UsageError(
                f"--rate must be {MIN_RATE:g} to {MAX_RATE:g} tuples per second, or max"
            )
        if self.tuples_per_packet is not None and self.tuples_per_packet < 1:
            raise UsageError("--tuples-per-packet must be at least 1")
        if not 0 <= self.retries <= MAX_RETRIES:
            raise UsageError(f"--retries must be 0 to {MAX_RETRIES}")
        parse_address(self.address)


class UdpBoard:
    """A board loaded with a bitstream from ``nfacep build --link udp``, reached as
    ``options`` (:class:`UdpOptions`) say; ``progress`` is called with a line of text about
    once a second.
    """

    #: Tuples a piece of a file read by :meth:`run_stream` (:func:`nfacep.backend.run_files`
    #: reads such pieces): the host holds three pieces' tuples and one piece's records, and
    #: drains the board once a piece (a few STATUS round trips; boards/UDP.md, "What the host
    #: holds").
    chunk = 1 << 16

    def __init__(self, options: UdpOptions, *, progress=None):
        self.options = options
        self.host, self.port = parse_address(options.address)
        self.address = f"{self.host}:{self.port}"
        self.timeout, self.tuples_per_packet = options.timeout, options.tuples_per_packet
        self.retries, self.rate = options.retries, options.rate
        self.progress = progress
        self.image: str | None = None  #: the fingerprint of the run's image (programmable)

    def run(self, nfa: Nfa, tuples: Tuples, params: EngineParams, values=None) -> UdpBoardResult:
        """Match ``tuples`` on the board. Raises :class:`UdpTimeoutError` when nothing
        answers, :class:`EngineMismatchError` when the board runs another engine (both exit
        2), :class:`LinkError` when packets are lost in every attempt. With runtime parameters,
        ``values`` are the values over the stream, sent as the UART host sends them
        (:func:`~nfacep.links.host.switch_plan`): PARAMS packets among the TUPLES packets."""
        result = run_whole(self._run, nfa, tuples, params, values)
        assert isinstance(result, UdpBoardResult)  # (the attempt added its one piece)
        return result

    def run_stream(
        self,
        nfa: Nfa,
        pieces: Callable[[], Iterator[Tuples]],
        sink: Callable[[], AbstractContextManager[Sink]],
        params: EngineParams,
        values: ParamValues | None = None,
    ) -> Totals:
        """:meth:`run` over a stream read in pieces (:class:`~nfacep.backend.Restarts`, as
        ``nfacep run --udp`` reads its input): each attempt reads ``pieces()`` from the start
        and opens ``sink()``. Each piece is sent, then the host waits until the board took
        all of it and is idle, checks the piece's records (none lost, in order, counted as
        STATUS counts them) and adds them to the sink before it reads on: the host holds
        the piece being sent, the next one read, and that piece's records, never the whole
        stream. A loss leaves the sink's block with the error, so that nothing of the
        attempt is kept, and the next attempt starts from the first piece."""
        return self._run(nfa, pieces, sink, params, values)

    def _run(self, nfa: Nfa, pieces, sink, params: EngineParams, values):
        if nfa.program.parameters and not values:
            values = ParamValues.parse(nfa.program.parameters, [])  # (says what is missing)
        tb = wire.tuple_bytes(nfa.program.schema)
        per_mtu = max_tuples_per_packet(tb)
        if self.tuples_per_packet is not None and self.tuples_per_packet > per_mtu:
            raise UsageError(
                f"--tuples-per-packet {self.tuples_per_packet}: at most {per_mtu} "
                f"tuples of {tb} bytes fit a 1,500-byte packet"
            )
        sock = self._connect()
        self.record_fmt = wire.record_format(nfa)  # (a programmable board's: _image)
        s = _Session(
            sock,
            self.address,
            self.timeout,
            self.progress or (lambda text: None),
            values_bytes(nfa),
            record_bytes=self.record_fmt.nbytes,
        )
        try:
            return self._attempts(s, nfa, params, values, pieces, sink)
        finally:
            if s.heard:  # end the session, so that the board takes the next host at once
                with contextlib.suppress(LinkError):
                    s.send(PacketType.CLOSE)
            sock.close()

    def _image(self, s: _Session, nfa: Nfa, status: dict, values) -> dict:
        """After RESET, on a programmable board (STATUS's ``engine``): put the file's image in
        force from tuple 0, sent only when STATUS shows another in force (it survives RESET;
        :mod:`.load`), and read its records (a ``matches`` bit per query slot). ``status``
        (RESET's) unchanged."""
        self.image = None
        if not status["engine"]:
            return status
        from .load import load_image

        given = self.options.engine_given
        loaded = load_image(
            s.sock,
            self.address,
            self.timeout,
            nfa,
            values=values,
            given=None if given is None else dict(given),
        )
        assert loaded is not None  # (STATUS said programmable)
        self.record_fmt = loaded.record_format
        s.record_bytes = loaded.record_format.nbytes
        self.image = loaded.image.fingerprint
        if loaded.sent:
            s.say(f"loaded the image {loaded.image.fingerprint} ({loaded.packets} LOAD packets)")
        return status

    def _connect(self) -> socket.socket:
        """A UDP socket connected to the board (a UsageError if it cannot be)."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
        try:
            sock.connect((self.host, self.port))
        except OSError as exc:
            sock.close()
            raise UsageError(f"--udp {self.address}: {exc}") from None
        return sock

    def _attempts(
        self,
        s: _Session,
        nfa: Nfa,
        params: EngineParams,
        values: ParamValues | None,
        pieces,
        sink,
    ):
        """Run the stream (``pieces()``, into ``sink()``: :meth:`run_stream`) until an attempt
        loses nothing, up to ``retries`` times again; what the sink's ``finish`` returns; a
        LinkError when every attempt lost packets."""
        tb = wire.tuple_bytes(nfa.program.schema)
        per_mtu = max_tuples_per_packet(tb)
        say = s.say
        losses: list[str] = []
        started = time.monotonic()
        for attempt in range(self.retries + 1):
            s.start_attempt()
            status = self._reset(s, nfa, params, tb)
            status = self._image(s, nfa, status, values)
            link = _Link(
                status, self._per_packet(status, tb, per_mtu), values, self.rate, losses, started
            )
            link.image = self.image
            try:
                return self._attempt(s, nfa, link, pieces, sink)
            except _Lost as lost:
                losses.append(
                    f"attempt {attempt + 1}: {lost.what}: tuples {_ranges_text(lost.ranges)}"
                )
                say(f"{lost.what}; tuples {_ranges_text(lost.ranges)}")
                if attempt == self.retries:
                    raise LinkError(
                        f"packets were lost between the host and the board at "
                        f"{self.address} in each of {self.retries + 1} attempts (the last: "
                        f"{lost.what}, touching tuples {_ranges_text(lost.ranges)}, 0-based); "
                        "nothing was written"
                    ) from None
                say(f"starting again ({attempt + 2} of {self.retries + 1})")
        raise AssertionError("unreachable")  # the last attempt returns or raises

    def _attempt(self, s: _Session, nfa: Nfa, link: _Link, pieces, sink):
        """One attempt from RESET on: each piece sent, drained (the board took it all and is
        idle), its records checked and added to the sink; the sink's ``finish``."""
        fmt = self.record_fmt  # (a programmable board's: a ``matches`` bit per query slot)
        schema = nfa.program.schema
        tb = wire.tuple_bytes(schema)
        tally = _Tally(f"at {s.address}")
        sent = seq = 0  # tuples and packets sent before this piece
        with sink() as out, contextlib.closing(pieces()) as stream:
            for piece, last in each_piece(stream):
                end = sent + piece.n
                plan = [(q - sent, v) for q, v in link.plan(end) if q >= sent]
                # (the records held, this piece's, at most two a tuple)
                s.most_records = s.record_count + 2 * piece.n
                seq += _stream(
                    s,
                    wire.pack_bytes(schema, piece),
                    piece.n,
                    tb,
                    link.per_packet,
                    link.status["capacity"],
                    engine_id=link.status["engine_id"],
                    plan=plan,
                    width=link.switched.width() if link.switched else 0,
                    rate=link.rate,
                    first=sent,
                    seq=seq,
                    stats=link.stats,
                )
                final = _finish(s, end)
                _await_records(s, final)
                _check_records(s, end, final, fmt, first=sent)
                link.see_image(final, sent, end)
                records = tally.take(s, end, final, fmt)
                result = piece_result(
                    UdpBoardResult,
                    nfa,
                    end,
                    piece,
                    records,
                    final,
                    s.engine,
                    port=self.address,
                    address=self.address,
                    stats=link.stats,
                )
                if last:  # (the last piece's result carries the summary)
                    link.finish(s, result, end)
                out.add(result, piece)
                sent = end
            return out.finish()

    def _reset(self, s: _Session, nfa: Nfa, params: EngineParams, tb: int) -> dict:
        """RESET until a STATUS shows the board cleared (an answer from before the RESET may
        come first); a LinkError when it never does within the timeout."""

        def cleared(status):
            return status["tuples"] == 0 and status["next_seq"] == 0

        deadline = time.monotonic() + s.timeout
        while True:
            s.received = {}  # (RESET restarts the board's numbering)
            status = s.ask(PacketType.RESET, cleared)
            if cleared(status):
                break
            if time.monotonic() >= deadline:
                raise LinkError(
                    f"the board at {self.address} does not clear on RESET: its STATUS still "
                    f"counts {status['tuples']} tuples taken and expects packet "
                    f"{status['next_seq']} after --timeout {s.timeout:g} s"
                )
            s.poll(min(s.rto, 0.01))
        given = self.options.engine_given
        s.engine = check_engine(
            status,
            nfa,
            params,
            link="udp",
            error=EngineMismatchError,
            given=None if given is None else dict(given),
        )
        if status["capacity"] < tb:
            raise EngineMismatchError(
                f"the board's buffer holds {status['capacity']} bytes, "
                f"less than one {tb}-byte tuple"
            )
        s.base = s.status_seq
        s.received = {s.base: (PacketType.STATUS, status)}  # nothing from before the RESET
        s.floor = 0
        s.record_packets = s.record_count = 0
        return status

    def _per_packet(self, status: dict, tb: int, per_mtu: int) -> int:
        room = status["capacity"] // tb
        if self.tuples_per_packet is None:
            if self.rate is not None and not math.isinf(self.rate):  # a packet every 50 ms
                return max(1, min(per_mtu, room, int(self.rate * OPEN_STATUS_EVERY)))
            return min(per_mtu, room)
        if self.tuples_per_packet > room:
            raise UsageError(
                f"--tuples-per-packet {self.tuples_per_packet}: the board's buffer "
                f"holds {room} tuples of {tb} bytes"
            )
        return self.tuples_per_packet


class _Link:
    """What one attempt knows of the link after RESET: the board's STATUS, the packet size,
    the runtime parameters' switches, and the host's statistics (the summary's ``link``)."""

    def __init__(self, status, per_packet, values, rate, losses, started):
        self.status, self.per_packet, self.values, self.rate = status, per_packet, values, rate
        #: the values switched by PARAMS: none on a programmable board (its image holds them)
        self.switched = None if status["engine"] else values
        self.losses, self.started = losses, started
        #: the fingerprint of the run's image (a programmable board's; None on a fixed one),
        #: and the images STATUS showed in force after it, with where each took over
        self.image: str | None = None
        self.loads: list[dict] = []
        self.stats: dict = {
            "packets": 0,
            "tuples_per_packet": per_packet,
            "switches": 0,
            "rate": None if rate is None else ("max" if math.isinf(rate) else rate),
        }

    def see_image(self, final: dict, first: int, end: int) -> None:
        """On a programmable board: note when the STATUS ``final`` that drained the piece of
        tuples ``first`` to ``end - 1`` names another image in force than the drain before (a
        ``nfacep load`` while the run streams): it took over at a tuple from ``first`` to
        ``end``."""
        if self.image is None:
            return
        now = final["image"].to_bytes(8, "little").hex()
        if now != (self.loads[-1]["image"] if self.loads else self.image):
            self.loads.append({"image": now, "from_tuple": [first, end]})

    def plan(self, end: int) -> list[tuple[int, int]]:
        """The switches of the tuples before ``end`` (:func:`~nfacep.links.host.switch_plan`)."""
        return switch_plan(self.switched, self.status["values"], end)

    def finish(self, s: _Session, result: UdpBoardResult, n: int) -> None:
        """The last piece's ``result`` (``n`` tuples in the stream) gets the run's statistics,
        values and warnings: the summary is the last piece's."""
        self.stats.update(
            {
                "seconds": round(time.monotonic() - self.started, 3),
                "attempts": len(self.losses) + 1,
                "losses": self.losses,
                "packets_out": s.packets_out,
                "status_requests": s.requests,
                "records": s.record_packets,
                "record_packets": s.record_packets,
                "bad_packets_in": s.bad_in,
                "ignored_packets_in": {
                    "other_version": s.other_version,
                    "other_session": s.other_session,
                    "duplicate": s.duplicates,
                    "unreadable": s.bad_in,
                },
            }
        )
        check_values(self.switched, result.status, n)
        result.values = self.values or None
        if self.loads:
            self.stats["images"] = {"run": self.image, "loaded": self.loads}
            took = "; ".join(
                f"image {load['image']} from a tuple in {load['from_tuple'][0]}-"
                f"{load['from_tuple'][1]}"
                for load in self.loads
            )
            result.warnings.append(
                "warning: another image was put in force on the board while the run streamed "
                f"(`nfacep load`: {took}); the host does not know the loaded file's queries, so "
                "the match file names this file's query in each slot for the matches after the "
                "switch: they are the matches of the loaded file's query in that slot"
            )
        if self.losses or s.bad_in:
            result.warnings.append(
                f"warning: the UDP link lost packets and the run was started again "
                f"({'; '.join(self.losses)}); {s.bad_in} unreadable packets came in"
                if self.losses
                else f"warning: {s.bad_in} unreadable packets came from the board"
            )


class _Tally(Tally):
    """:class:`~nfacep.links.host.Tally` over the packets of a session."""

    def take(self, s: _Session, n: int, final: dict, fmt: wire.RecordFormat) -> list[bytes]:
        """The records of the board's packets up to ``final`` (the STATUS that drained the
        piece), in the board's order, taken out of the session and checked
        (:meth:`~nfacep.links.host.Tally.check`)."""
        top = (s.status_seq - s.base) % 2**32
        bodies = []
        for rel, q in sorted(((q - s.base) % 2**32, q) for q in s.received):
            if rel > top:
                break
            kind, body = s.received.pop(q)
            if kind == PacketType.RECORDS:
                bodies.append(body)
        s.floor = top + 1
        rb = fmt.nbytes
        records = [body[at : at + rb] for body in bodies for at in range(0, len(body), rb)]
        self.check(records, n, final, fmt)
        return records


def _arrived(status: dict, sent: int) -> bool:
    """Whether ``status`` shows the host's ``sent`` TUPLES packets all taken, in order."""
    return (
        status["next_seq"] == sent % 2**32
        and not status["lost"]
        and not status["late"]
        and not any(status[c] for c in REJECTED)
    )


def _upstream(
    s: _Session,
    status: dict,
    sent: int,
    confirmed: int,
    starts: list[int],
    n: int,
    seq: int = 0,
) -> None:
    """A _Lost when ``status`` shows that TUPLES packets ``confirmed`` .. ``sent - 1`` of this
    piece (whose first packet is ``seq``) did not all arrive (the host's packets before
    ``confirmed`` did, as an earlier STATUS showed)."""
    if _arrived(status, seq + sent):
        return
    rejected = {c: status[c] for c in REJECTED if status[c]}
    last = min(sent, len(starts) - 1)
    what = (
        f"TUPLES packets {seq + confirmed}-{seq + last - 1} did not all reach the board at "
        f"{s.address} (it expects packet {status['next_seq']} next, counted lost "
        f"{status['lost']}, late {status['late']}" + (f", {rejected}" if rejected else "") + ")"
    )
    raise _Lost(what, [(starts[confirmed], min(starts[last], n) - 1)])


def _stream(
    s: _Session,
    payload: bytes,
    n: int,
    tb: int,
    per_packet: int,
    capacity: int,
    *,
    engine_id: int,
    plan=(),
    width: int = 0,
    rate: float | None = None,
    first: int = 0,
    seq: int = 0,
    stats: dict | None = None,
) -> int:
    """Send the ``n`` tuples of a piece (``payload``; tuples ``first`` on of the stream, the
    engine having taken every tuple before), and the switches of ``plan``
    (:func:`~nfacep.links.host.switch_plan`, tuples counted from ``first``, ``width`` bits of
    values) in PARAMS packets, numbered with the TUPLES packets from ``seq`` on, each before
    the packet that starts with its tuple and once the engine took the tuple of the one before;
    the packets sent (counted in ``stats``). Without ``rate``, under the credit of
    ``capacity`` bytes (a STATUS round trip per burst); with it, open loop at ``rate`` tuples
    per second (:func:`_open`)."""
    room = capacity // tb
    switches = {first + q: v for q, v in plan}
    local, local_waits = frame_order(n, per_packet, plan)
    packets = [(first + a, None if b is None else first + b) for a, b in local]
    waits = {i: None if w is None else first + w for i, w in local_waits.items()}
    starts = [a for a, _ in packets] + [first + n]
    npackets = len(packets)
    if stats is not None:
        stats["packets"] += npackets
        stats["switches"] += len(plan)

    def send(i: int) -> None:
        a, b = packets[i]
        if b is None:
            body = switch_body(a, switches[a], width)
            s.send(PacketType.PARAMS, body, seq=seq + i, engine=engine_id)
        else:
            body = payload[(a - first) * tb : (b - first) * tb]
            s.send(PacketType.TUPLES, body, seq=seq + i, engine=engine_id)

    if rate is not None:
        _open(s, send, packets, waits, starts, rate, seq)
        return npackets
    sent = 0  # packets of this piece sent (the next seq, less ``seq``)
    confirmed = 0  # packets the board is known to have taken
    taken = first  # tuples the engine took, as the last STATUS said (unwrapped)
    next_report = time.monotonic() + 1

    def ready(i: int) -> bool:
        b = packets[i][1]
        if b is None:  # PARAMS: the engine took the last switch's tuple
            return waits[i] is None or taken > waits[i]
        return b - taken <= room

    stalled = time.monotonic() + s.timeout  # (no progress until then: the board is stuck)
    while sent < npackets:
        before = (sent, taken)
        while sent < npackets and ready(sent):
            send(sent)
            sent += 1
        status = s.ask(want=lambda st, sent=sent: _arrived(st, seq + sent))
        _upstream(s, status, sent, confirmed, starts, first + n, seq)
        confirmed = sent
        taken = _taken(s, status, taken, starts[sent])
        if (sent, taken) != before:
            stalled = time.monotonic() + s.timeout
        elif time.monotonic() > stalled:
            raise UdpTimeoutError(
                f"the board at {s.address} answers but took no tuple within --timeout "
                f"{s.timeout:g} s (it took {taken} of {starts[sent]} sent)"
            )
        if time.monotonic() >= next_report:
            s.say(f"{starts[sent]} tuples sent, {s.record_packets} RECORDS packets back")
            next_report = time.monotonic() + 1
    return npackets


def _taken(s: _Session, status: dict, taken: int, sent: int) -> int:
    """The tuples the engine took, from STATUS's 32-bit ``tuples`` and the count before
    (``taken``); a LinkError when that is more than the ``sent`` tuples."""
    now = taken + (status["tuples"] - taken) % 2**32
    if now > sent:
        raise LinkError(
            f"the board at {s.address} contradicts itself: STATUS counts {status['tuples']} "
            f"tuples taken, but {sent} were sent; nothing was written"
        )
    return now


#: Seconds between the STATUS requests of an open-loop run (also while it waits for the
#: rate: they keep the session alive).
OPEN_STATUS_EVERY = 0.05


def _open(
    s: _Session, send, packets: list, waits: dict, starts: list[int], rate: float, seq: int = 0
) -> None:
    """Send a piece's ``packets`` (from ``seq``) open loop: packet ``i`` not before
    ``(starts[i] - starts[0]) / rate`` s into the piece, without credit. A STATUS is asked for every
    :data:`OPEN_STATUS_EVERY` seconds without waiting for it; each that comes back either
    confirms the packets before its ``next_seq`` (nothing lost, late or refused so far) or
    ends the attempt (a _Lost naming the packets since the last confirmed). A PARAMS packet
    still waits, by STATUS round trips, until the engine took the tuple of the switch before."""
    t0 = time.monotonic()
    state = {"confirmed": 0, "taken": starts[0], "sent": 0, "outstanding": 0}
    next_status = t0 + OPEN_STATUS_EVERY
    next_report = t0 + 1

    def look() -> None:
        """Take the STATUS answers that came (the link keeps their order)."""
        while s.pending:
            status = s.pending.pop(0)
            state["outstanding"] = max(0, state["outstanding"] - 1)
            s.status, s.status_seq = status, status["seq"]
            sent = state["sent"]
            if status["lost"] or status["late"] or any(status[c] for c in REJECTED):
                _upstream(s, status, sent, state["confirmed"], starts, starts[-1], seq)
            mine = (status["next_seq"] - seq) % 2**32  # (its packets of this piece)
            state["confirmed"] = max(state["confirmed"], min(mine, sent))
            state["taken"] = _taken(s, status, state["taken"], starts[sent])

    def ask(want) -> dict:
        """A blocking STATUS round trip, once the open requests' answers are in (or a round
        trip's time passed: those still to come are skipped by :meth:`_Session.ask`)."""
        deadline = time.monotonic() + s.rto
        while state["outstanding"] and time.monotonic() < deadline:
            s.poll(0.002)
            look()
        s.stale = state["outstanding"]
        state["outstanding"] = 0
        status = s.ask(want=want)
        s.pending.insert(0, status)
        state["outstanding"] = 1 + s.stale  # (look() counts this one off)
        s.stale = 0
        look()
        return status

    def keep(now: float) -> None:  # a STATUS request when due (not waited for); what came
        nonlocal next_status
        if now >= next_status:
            s.send(PacketType.STATUS_REQ)
            s.requests += 1
            state["outstanding"] += 1
            next_status = now + OPEN_STATUS_EVERY
            s.poll(0)
            look()

    for i, (_, end) in enumerate(packets):
        if end is None and waits[i] is not None:
            stalled = time.monotonic() + s.timeout
            while state["taken"] <= waits[i]:  # the engine took the last switch's tuple
                if time.monotonic() > stalled:
                    raise UdpTimeoutError(
                        f"the board at {s.address} answers but did not take tuple "
                        f"{waits[i]} within --timeout {s.timeout:g} s"
                    )
                ask(
                    lambda st, w=waits[i]: (
                        (st["tuples"] - state["taken"]) % 2**32 + state["taken"] > w
                    )
                )
        if not math.isinf(rate):  # (asleep at most OPEN_STATUS_EVERY at a time)
            while (wait := t0 + (starts[i] - starts[0]) / rate - time.monotonic()) > 0:
                time.sleep(min(wait, OPEN_STATUS_EVERY))
                keep(time.monotonic())
        send(i)
        state["sent"] += 1
        now = time.monotonic()
        keep(now)
        if now >= next_report:
            s.say(f"{starts[i + 1]} tuples sent, {s.record_packets} RECORDS packets back")
            next_report = now + 1
    status = ask(lambda st: _arrived(st, seq + state["sent"]))
    _upstream(s, status, state["sent"], state["confirmed"], starts, starts[-1], seq)


def _finish(s: _Session, n: int) -> dict:
    """Ask for STATUS until the board has taken all ``n`` tuples and is idle; that STATUS."""

    def done(status):
        return status["tuples"] == n % 2**32 and status["flags"] & 1

    deadline = time.monotonic() + s.timeout
    while True:
        status = s.ask(want=done)
        if done(status):
            return status
        if time.monotonic() > deadline:
            raise UdpTimeoutError(
                f"the board at {s.address} answers but did not finish within --timeout "
                f"{s.timeout:g} s (it took {status['tuples']} of {n} tuples, idle "
                f"{status['flags'] & 1})"
            )
        s.poll(0.002)


def _await_records(s: _Session, final: dict) -> None:
    """Wait up to a round trip for RECORDS packets the final STATUS counts that have not come
    (one reordered behind it)."""
    deadline = time.monotonic() + s.rto
    while s.record_packets < final["packets"] and time.monotonic() < deadline:
        s.poll(0.005)


def _check_records(
    s: _Session, n: int, final: dict, fmt: wire.RecordFormat, first: int = 0
) -> None:
    """A _Lost naming the tuples whose records did not arrive, if any did not (of tuples
    ``first`` to ``n - 1``: the records of those before were all taken); a LinkError
    when the board's counts contradict what came (more records or packets than it says it
    sent, or a ``seq`` beyond the packets it can have sent)."""
    rb = fmt.nbytes
    missing = final["records"] - s.record_count
    missing_packets = final["packets"] - s.record_packets
    top = (s.status_seq - s.base) % 2**32
    # the board's packets since RESET: RECORDS, and STATUS answers to the host's requests
    most = final["packets"] + s.requests + 2
    if missing < 0 or missing_packets < 0 or top > most:
        raise LinkError(
            f"the board at {s.address} contradicts itself: STATUS counts {final['records']} "
            f"records in {final['packets']} RECORDS packets, {s.record_count} records in "
            f"{s.record_packets} came, and its packet number says {top} packets since RESET "
            f"(at most {most} can be); nothing was written"
        )
    if not missing and not missing_packets:
        return
    got = {(q - s.base) % 2**32: v for q, v in s.received.items()}
    # each RECORDS packet's first and last tuple, in the board's order
    spans = sorted(
        (q, fmt.decode_bytes(b[:rb]).seq, fmt.decode_bytes(b[-rb:]).seq)
        for q, (t, b) in got.items()
        if t == PacketType.RECORDS
    )
    order = [q for q, _, _ in spans]
    ranges = []
    # (bounded above: by the packets the board reports)
    for gap in range(max(1, s.floor), top):
        if gap in got:
            continue
        i = bisect.bisect_left(order, gap)
        lo = spans[i - 1][2] + 1 if i else first
        hi = spans[i][1] - 1 if i < len(spans) else n - 1
        ranges.append((lo, min(hi, n - 1)))
    raise _Lost(
        f"{missing_packets} RECORDS packets ({missing} records) from the board were "
        f"lost on the way back",
        _merge(ranges) or [(first, n - 1)],
    )
