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

This module holds the options, the attempts and their retries; the conversation with the board
(one session) is :mod:`~nfacep.links.udp.session`'s, sending a stream and checking its records
:mod:`~nfacep.links.udp.stream`'s.
"""

from __future__ import annotations

import contextlib
import math
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
    LinkError,
    check_engine,
    check_timeout,
    each_piece,
    run_whole,
    values_bytes,
)
from . import images
from .errors import EngineMismatchError, UdpTimeoutError
from .protocol import DEFAULT_ENDPOINT, HEADER_BYTES, MAX_PAYLOAD, PacketType
from .session import _Lost, _ranges_text, _Session
from .stream import (
    OPEN_STATUS_EVERY,
    UdpBoardResult,
    _await_records,
    _check_records,
    _finish,
    _Link,
    _stream,
    _Tally,
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
#: ``--rate`` bounds, tuples per second (``max`` is beyond them: as fast as the socket takes).
MIN_RATE, MAX_RATE = 1.0, 1e12
#: ``--retries`` at most.
MAX_RETRIES = 100


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
    (:func:`~nfacep.links.host.check_engine`). ``images``: the folder where ``nfacep load``
    kept the files it loaded (:mod:`.images`; None: its default).
    """

    address: str
    timeout: float = 5.0
    tuples_per_packet: int | None = None
    retries: int = 2
    rate: float | None = None
    engine_given: tuple[tuple[str, int | str], ...] | None = None
    images: str | None = None

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
        self.capacity = None  #: its engine's capacity (a programmable board's)

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
        self.image = self.capacity = None
        if not status["engine"]:
            return status
        from nfacep.image import Capacity

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
        self.capacity = Capacity.of(loaded.params)
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
            link.image, link.nfa = self.image, nfa
            link.folder = images.folder(self.options.images)
            link.capacity = self.capacity
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
                link.see_image(final, end)
                records = tally.take(s, end, final, fmt)
                result = link.result(
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
                del piece, result  # (before the piece after the next is read: each_piece)
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
        # (the answers to a RESET sent again number from 0 as this one: duplicates, they
        # never come through)
        s.stale = 0
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
