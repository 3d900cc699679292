"""``nfacep run``: a board over its USB UART, as a back-end.

:class:`UartBoard` is a :class:`~nfacep.backend.Backend`: it opens the serial port (any pyserial
URL: ``/dev/ttyUSB0``, ``COM3``, ``socket://host:port``, ``loop://``), resets the board's engine,
checks that the board runs the engine this query file and these parameters describe (STATUS's
``engine_id``), sends the tuples in TUPLES frames under the link's flow control, and reads the
RECORD frames back until the board reports that it has taken every tuple and is idle. With
runtime parameters it sends the switches in PARAMS frames among the TUPLES frames
(:func:`~nfacep.links.host.switch_plan`). The frame format and the flow control are
:mod:`nfacep.links.uart.protocol`'s; ``boards/LINK.md`` describes both.
"""

from __future__ import annotations

import contextlib
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
    NoBoardError,
    Tally,
    check_engine,
    check_timeout,
    check_values,
    each_piece,
    frame_order,
    piece_result,
    record_format,
    run_whole,
    switch_plan,
    values_bytes,
)
from ..protocol import decode_fields, fields_size
from .protocol import (
    ACK_FIELDS,
    ERROR_COUNTERS,
    OVERHEAD,
    STATUS_FIELDS,
    VERSION,
    FrameReader,
    FrameType,
    decode_status,
    encode,
    params_payload,
)

__all__ = ["FRAME_TUPLES", "PortError", "UartBoard", "UartBoardResult", "UartOptions", "open_port"]

#: Tuples per TUPLES frame by default (fewer when the board's buffer is small).
FRAME_TUPLES = 16


class PortError(UsageError):
    """The serial port cannot be opened (no such device, busy, not allowed, a bad URL): a
    mistake to fix before running (exit 2), unlike a board that does not answer."""


@dataclass
class UartBoardResult(BoardResult):
    """What a board reported over its UART."""

    baud: int = 0

    def details(self) -> dict:
        board = {k: self.status[k] for k, _ in STATUS_FIELDS if k != "reserved"}
        if self.values:  # the values in force at the end, as STATUS reported them
            board["values"] = self.values.texts(self.values.unpacked(self.status["values"]))
        return {"port": self.port, "baud": self.baud, "board": board, "link": self.stats}

    def note(self) -> str:
        seconds = self.stats.get("seconds") or 0
        rate = self.n / seconds if seconds else 0
        return f"board on {self.port} at {self.baud} baud, {seconds:.2f} s, {rate:.0f} tuples/s"


def open_port(port: str, baud: int):
    """The serial port ``port`` (a device or a pyserial URL) at ``baud``."""
    try:
        import serial
    except ImportError:  # pragma: no cover - pyserial is a dependency
        raise UsageError("`nfacep run` needs pyserial: pip install pyserial") from None
    try:
        return serial.serial_for_url(port, baudrate=baud, timeout=0.01, write_timeout=5)
    except (serial.SerialException, ValueError, OverflowError, OSError) as exc:
        raise PortError(f"cannot open the serial port {port}: {exc}") from None


class _Session:
    """One conversation with the board over an open port."""

    def __init__(self, ser, nfa, *, baud: int, timeout: float, progress):
        self.ser = ser
        self.nfa = nfa
        self.timeout = timeout
        self.say = progress or (lambda text: None)
        self.byte_time = 10 / baud
        self.values_bytes = values_bytes(nfa)
        self.status_bytes = fields_size(STATUS_FIELDS) + self.values_bytes
        self.reader = FrameReader(
            [FrameType.RECORD, FrameType.STATUS, FrameType.ACK],
            max_payload=max(self.status_bytes, wire.record_format(nfa).nbytes),
        )
        self.records: list[bytes] = []
        self.status: dict | None = None
        self.status_count = 0
        self.answers: list[dict] = []  #: ACK and STATUS payloads, in arrival order
        self.last_heard = time.monotonic()
        self.bytes_in = 0
        self.bytes_out = 0

    def send(self, ftype: FrameType, payload: bytes = b"") -> None:
        frame = encode(ftype, payload)
        try:
            self.ser.write(frame)
        except Exception as exc:  # serial.SerialTimeoutException, OSError
            raise LinkError(f"cannot write to the serial port: {exc}") from None
        self.bytes_out += len(frame)

    def poll(self, wait: float) -> bool:
        """Read what the board sent within ``wait`` seconds; True if any frame came."""
        deadline = time.monotonic() + wait
        got = False
        while True:
            try:
                data = self.ser.read(max(1, self.ser.in_waiting))
            except Exception as exc:
                raise LinkError(f"cannot read from the serial port: {exc}") from None
            if data:
                self.bytes_in += len(data)
                self.last_heard = time.monotonic()
                for frame in self.reader.feed(data):
                    got = True
                    self._handle(frame)
            if time.monotonic() >= deadline:
                return got

    def _handle(self, frame) -> None:
        if frame.type == FrameType.RECORD:
            self.records.append(frame.payload)
        elif frame.type == FrameType.STATUS:
            if len(frame.payload) != self.status_bytes:
                raise LinkError(
                    f"the board's STATUS frame has {len(frame.payload)} bytes, not "
                    f"{self.status_bytes}: it speaks another version of the link "
                    "protocol, or its engine has other runtime parameters; rebuild "
                    "its bitstream"
                )
            self.status = decode_status(frame.payload, self.values_bytes)
            self.status_count += 1
            self.answers.append(self.status)
        elif frame.type == FrameType.ACK:
            self.answers.append(decode_fields(ACK_FIELDS, frame.payload))

    def silent_for(self) -> float:
        return time.monotonic() - self.last_heard

    def reset(self, port_name: str) -> dict:
        """RESET the board; its STATUS answer."""
        tries = 3
        for _ in range(tries):
            self.status = None
            self.send(FrameType.RESET)
            deadline = time.monotonic() + self.timeout / tries
            while self.status is None and time.monotonic() < deadline:
                self.poll(0.02)
            if self.status is not None:
                break
        if self.status is None:
            heard = (
                f"it sent {self.bytes_in} bytes but no STATUS frame"
                if self.bytes_in
                else "nothing came back"
            )
            raise NoBoardError(
                f"no board answers on {port_name} ({heard} within {self.timeout:g} s): is "
                "the board plugged in and loaded with a bitstream from `nfacep build --link "
                "uart`, and is --baud the one it was built with?"
            )
        # a board that saw two RESETs answers twice: take in the second answer too
        self.poll(max(0.05, 60 * self.byte_time))
        self.records.clear()
        self.answers.clear()
        return self.status


def _check_board(
    status: dict, nfa: Nfa, params: EngineParams, capacity_min: int, given: dict | None
) -> EngineParams:
    """The engine the board runs (:func:`~nfacep.links.host.check_engine`), once its STATUS
    shows a board of this protocol version with room for a tuple."""
    if status["version"] != VERSION:
        raise NoBoardError(
            f"the board speaks version {status['version']} of the link "
            f"protocol, this nfacep version {VERSION}: rebuild the bitstream"
        )
    params = check_engine(status, nfa, params, link="uart", given=given)
    if status["capacity"] < capacity_min:
        raise NoBoardError(
            f"the board's buffer holds {status['capacity']} bytes, less than one "
            f"{capacity_min}-byte tuple"
        )
    return params


@dataclass(frozen=True)
class UartOptions:
    """How :class:`UartBoard` reaches the board, checked once when made: the serial port
    ``port`` at ``baud``; ``timeout`` bounds every wait for the board (seconds);
    ``frame_tuples`` the tuples per frame (default :data:`FRAME_TUPLES`, fewer when the board's
    buffer is small). ``engine_given``: None, the board must run the engine :meth:`UartBoard.run`
    is given; else the engine options given on ``nfacep run``'s command line, as (name, value)
    pairs: the engine is learnt from the board's STATUS and must agree with them
    (:func:`~nfacep.links.host.check_engine`)."""

    port: str
    baud: int = 115200
    timeout: float = 5.0
    frame_tuples: int | None = None
    engine_given: tuple[tuple[str, int | str], ...] | None = None

    def __post_init__(self):
        check_timeout(self.timeout)
        if self.baud <= 0:
            raise UsageError("--baud must be positive")
        if self.frame_tuples is not None and self.frame_tuples < 1:
            raise UsageError("--frame-tuples must be at least 1")


class UartBoard:
    """A board loaded with a bitstream from ``nfacep build --link uart``, reached as
    ``options`` (:class:`UartOptions`) say.

    ``serial_port`` is an already open pyserial port to use instead of opening
    ``options.port``; ``progress`` is called with a line of text about once a second.
    """

    #: Tuples a piece of a file read by :meth:`run_stream` (:func:`nfacep.backend.run_files`
    #: reads such pieces): the host holds three pieces' tuples and one piece's records, and
    #: drains the board once a piece (a STATUS round trip; boards/LINK.md, "What the host
    #: holds").
    chunk = 1 << 16

    def __init__(self, options: UartOptions, *, serial_port=None, progress=None):
        self.options = options
        self.port, self.baud = options.port, options.baud
        self.timeout, self.frame_tuples = options.timeout, options.frame_tuples
        self.serial_port = serial_port
        self.progress = progress

    def run(self, nfa: Nfa, tuples: Tuples, params: EngineParams, values=None) -> UartBoardResult:
        """Match ``tuples`` on the board. Raises :class:`NoBoardError` when no board (or one
        with another engine) answers and :class:`LinkError` when it stops answering or results
        are lost. With runtime parameters, ``values`` (:class:`~nfacep.settings.ParamValues`)
        are the values over the stream: the board is switched to their starting values if it
        runs others, and each switch is sent before the tuple it applies to
        (:func:`switch_plan`)."""
        result = run_whole(self._run, nfa, tuples, params, values)
        assert isinstance(result, UartBoardResult)  # (its one piece was added)
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
        ``nfacep run --port`` reads its input). The link resends lost frames itself, so
        ``pieces()`` is read once and ``sink()`` opened once: each piece is sent, the host waits
        until the board took all of it and is idle, checks the piece's records (none lost, in
        order, counted as STATUS counts them: :class:`~nfacep.links.host.Tally`) and adds them
        to the sink before it reads on. An error leaves the sink's block with it: nothing is
        written."""
        return self._run(nfa, pieces, sink, params, values)

    def _run(self, nfa: Nfa, pieces, sink, params: EngineParams, values):
        if nfa.program.parameters and not values:
            values = ParamValues.parse(nfa.program.parameters, [])  # (says what is missing)
        tb = wire.tuple_bytes(nfa.program.schema)
        ser = self.serial_port if self.serial_port is not None else open_port(self.port, self.baud)
        try:
            session = _Session(
                ser, nfa, baud=self.baud, timeout=self.timeout, progress=self.progress
            )
            started = time.monotonic()
            status = session.reset(self.port)
            given = self.options.engine_given
            params = _check_board(status, nfa, params, tb, None if given is None else dict(given))
            run = _Run(self, session, nfa, params, values, status, started)
            with sink() as out, contextlib.closing(pieces()) as stream:
                for piece, last in each_piece(stream):
                    out.add(run.piece(piece, last), piece)
                    del piece  # (before the piece after the next is read: each_piece)
                return out.finish()
        finally:
            if self.serial_port is None:
                ser.close()


class _Run:
    """One run over an open session after RESET, a piece at a time: the frames and tuples
    sent so far, the records taken, and the host's link statistics (the summary's ``link``)."""

    def __init__(self, board: UartBoard, s: _Session, nfa: Nfa, params, values, status, started):
        self.board, self.s, self.nfa, self.params = board, s, nfa, params
        self.values, self.status, self.started = values, status, started
        self.fmt = record_format(nfa, params)
        self.tally = Tally(f"on {board.port}")
        self.sent = self.frames = self.received = 0  # tuples, frames and records so far
        self.stats: dict = {
            "frames": 0,
            "frames_sent": 0,
            "frames_resent": 0,
            "tuples_per_frame": 0,
            "status_polls": 0,
            "switches": 0,
        }

    def piece(self, piece: Tuples, last: bool) -> UartBoardResult:
        """Send ``piece`` (the ``last`` or not), drain the board, check its records; the
        piece's result (the last one's with the run's statistics and warnings)."""
        s, values = self.s, self.values
        tb = wire.tuple_bytes(self.nfa.program.schema)
        end = self.sent + piece.n
        plan = [
            (q - self.sent, v)
            for q, v in switch_plan(values, self.status["values"], end)
            if q >= self.sent
        ]
        link = _GoBackN(
            s,
            wire.pack_bytes(self.nfa.program.schema, piece),
            piece.n,
            tb,
            self.status["capacity"],
            frame_tuples=self.board.frame_tuples,
            plan=plan,
            width=values.width() if values else 0,
            first=self.sent,
            seq=self.frames,
        )
        _stream(s, link)
        self.frames += len(link.frames)
        for k, v in link.stats(len(plan)).items():
            self.stats[k] = v if k in ("tuples_per_frame", "bytes_out") else self.stats[k] + v
        final = _finish(s, end)
        records, s.records = s.records, []
        self.received += len(records)
        _check_lost(s, final, self.received)
        self.tally.check(records, end, final, self.fmt)
        stats = self.stats
        result = piece_result(
            UartBoardResult,
            self.nfa,
            end,
            piece,
            records,
            final,
            self.params,
            port=self.board.port,
            baud=self.board.baud,
            stats=stats,
        )
        self.sent = end
        if last:
            stats["seconds"] = round(time.monotonic() - self.started, 3)
            stats.update(
                {
                    "records": self.received,
                    "bad_frames_in": sum(s.reader.errors.values()),
                    "bytes_in": s.bytes_in,
                    "board_errors": _errors(final),
                }
            )
            check_values(values, final, end)
            result.values = values or None
            if stats["frames_resent"] or stats["bad_frames_in"] or stats["board_errors"]:
                result.warnings.append(
                    f"warning: the link was noisy: {stats['frames_resent']} frames resent, "
                    f"{stats['bad_frames_in']} bad frames from the board, board counters "
                    f"{stats['board_errors']}"
                )
        return result


#: Frames in flight at most: sequence numbers are mod 256.
WINDOW = 128


class _GoBackN:
    """The host's side of the flow control for one run (``boards/LINK.md``): the frames of
    :func:`frame_order`, sent go-back-N within :data:`WINDOW` and within the credit of the
    board's buffer (``capacity`` bytes); a PARAMS frame once the board took the tuple of the
    switch before."""

    def __init__(self, s: _Session, payload: bytes, n: int, tb: int, capacity: int, **kw):
        frame_tuples, plan, width = kw["frame_tuples"], kw["plan"], kw["width"]
        self.s, self.payload, self.n, self.tb, self.width = s, payload, n, tb, width
        #: the stream's tuple and frame numbers of this piece's first (the engine took
        #: every tuple before, the board acknowledged every frame before)
        self.first, self.seq = kw.get("first", 0), kw.get("seq", 0)
        self.room = capacity // tb  # tuples the board's buffer holds
        per_frame = frame_tuples or max(1, min(FRAME_TUPLES, self.room // 2))
        self.per_frame = min(per_frame, self.room)
        self.frames, self.waits = frame_order(n, self.per_frame, plan)
        self.switches = dict(plan)
        # tuples in the frames before each frame (what is acknowledged when it is `base`)
        self.starts = [first for first, _ in self.frames] + [n]
        frames_in_buffer = self.room // self.per_frame + 1
        self.rto = 0.1 + 4 * (capacity + OVERHEAD * frames_in_buffer) * s.byte_time
        self.poll_every = max(0.01, 3 * (fields_size(STATUS_FIELDS) + OVERHEAD) * s.byte_time)
        self.base = self.nxt = 0  # first frame not acknowledged, next frame to send
        self.sent_hi = 0  # frames ever sent
        self.consumed = self.first  # tuples the engine took, unwrapped from the 32-bit counter
        self.resent = self.frames_sent = self.polls = 0
        self.progress_at = self.last_poll = self.advanced_at = time.monotonic()
        self.stalled_polls = 0

    def done(self) -> bool:
        return self.base >= len(self.frames)

    def acknowledged(self) -> int:
        """Tuples of the stream in the frames the board acknowledged."""
        return self.first + self.starts[self.base]

    def _ready(self, i: int) -> bool:
        """Frame ``i`` may go now."""
        end = self.frames[i][1]
        if end is None:  # PARAMS: the board took the last switch's tuple
            return self.waits[i] is None or self.consumed > self.first + self.waits[i]
        return self.first + end - self.consumed <= self.room

    def send(self) -> None:
        """Send the frames that may go, from ``nxt`` on."""
        s, tb = self.s, self.tb
        while (
            self.nxt < len(self.frames) and self.nxt - self.base < WINDOW and self._ready(self.nxt)
        ):
            first, end = self.frames[self.nxt]
            if end is None:
                payload = params_payload(
                    self.seq + self.nxt, self.first + first, self.switches[first], self.width
                )
                s.send(FrameType.PARAMS, payload)
            else:
                body = self.payload[first * tb : end * tb]
                s.send(FrameType.TUPLES, bytes([(self.seq + self.nxt) % 256]) + body)
            self.nxt += 1
            self.sent_hi = max(self.sent_hi, self.nxt)
            self.frames_sent += 1

    def take_answers(self, now: float) -> None:
        """Advance ``base`` and the engine's count by the ACK and STATUS answers that came."""
        answers, self.s.answers = self.s.answers, []
        for a in answers:
            self.consumed += (a["tuples"] - self.consumed) % (1 << 32)
            ahead = (a["next_seq"] - self.seq - self.base) % 256
            if 256 - ahead <= WINDOW:
                continue  # behind `base`: an answer older than the last one
            acked = self.base + ahead
            if acked > self.sent_hi:
                raise LinkError(
                    f"the board acknowledged frame {acked - 1}, but only "
                    f"{self.sent_hi} were sent: was it reset during the run?"
                )
            if acked > self.base:
                self.base = acked
                self.nxt = max(self.nxt, acked)  # a late ACK after going back
                self.progress_at = self.advanced_at = now
                self.stalled_polls = 0

    def check_progress(self, now: float) -> None:
        """A LinkError when the board answers but has not accepted the frame at ``base`` for
        longer than the timeout (and four retransmission timeouts)."""
        if self.base == self.nxt:  # (before going back N, which makes it so)
            self.advanced_at = now  # nothing in flight: waiting for room, or for a switch's tuple
        elif now - self.advanced_at > max(self.s.timeout, 4 * self.rto):
            kind = "PARAMS" if self.frames[self.base][1] is None else "TUPLES"
            raise LinkError(
                f"the board answers but has not accepted frame {self.base} ({kind}) for "
                f"{now - self.advanced_at:.1f} s; its counters: {_errors(self.s.status)}"
            )

    def pace(self, now: float) -> None:
        """Ask for STATUS while waiting for room; when frames in flight are not acknowledged
        within ``rto``, ask for STATUS once (only the ACK may have been lost), then go back N."""
        s = self.s
        if self.base == self.nxt and self.nxt < len(self.frames):
            # everything sent was taken into the buffer: wait for room, asking for it
            self.progress_at = now
            if now - self.last_poll > self.poll_every:
                s.send(FrameType.STATUS_REQ)
                self.last_poll = now
                self.polls += 1
        elif self.base < self.nxt and now - self.progress_at > self.rto:
            if self.stalled_polls == 0:
                # maybe only the ACK was lost: STATUS says where the board is
                s.send(FrameType.STATUS_REQ)
                self.polls += 1
                self.stalled_polls = 1
            else:
                self.resent += self.nxt - self.base
                self.nxt = self.base  # go back N
                self.stalled_polls = 0
            self.progress_at = now

    def stats(self, switches: int) -> dict:
        return {
            "frames": len(self.frames),
            "frames_sent": self.frames_sent,
            "frames_resent": self.resent,
            "tuples_per_frame": self.per_frame,
            "status_polls": self.polls,
            "switches": switches,
            "bytes_out": self.s.bytes_out,
        }


def _stream(s: _Session, link: _GoBackN) -> None:
    """Send a piece's tuples under go-back-N with credits (``link``, a :class:`_GoBackN`), and
    the switches of its plan (:func:`switch_plan`) in PARAMS frames, each before the frame
    whose first tuple it applies to and once the board took the tuple of the one before (it
    takes one switch at a time)."""
    next_report = time.monotonic() + 1
    end = link.first + link.n
    while not link.done():
        link.send()
        s.poll(0.005)
        now = time.monotonic()
        link.take_answers(now)
        link.check_progress(now)
        link.pace(now)
        if s.silent_for() > s.timeout:
            raise LinkError(
                f"the board stopped answering ({s.timeout:g} s without a byte, "
                f"{link.acknowledged()} of {end} tuples acknowledged)"
            )
        if now >= next_report:
            s.say(f"{link.acknowledged()} of {end} tuples sent, {len(s.records)} records back")
            next_report = now + 1


def _errors(status: dict | None) -> dict:
    return {k: status[k] for k in ERROR_COUNTERS if status[k]} if status else {}


def _finish(s: _Session, n: int) -> dict:
    """Poll STATUS until the board has taken all ``n`` tuples and is idle; that STATUS."""
    seen = s.status_count
    deadline = time.monotonic() + s.timeout
    while True:
        s.send(FrameType.STATUS_REQ)
        until = time.monotonic() + 0.25
        while s.status_count == seen and time.monotonic() < until:
            s.poll(0.01)
        if s.status_count != seen:
            seen = s.status_count
            st = s.status
            if st["tuples"] == n % (1 << 32) and st["flags"] & 1:
                return st
            deadline = time.monotonic() + s.timeout  # the board answers: keep waiting
        if s.silent_for() > s.timeout or time.monotonic() > deadline:
            raise LinkError(
                f"the board stopped answering at the end of the run ({s.timeout:g}"
                " s without a STATUS frame)"
            )
        s.poll(0.01)


def _check_lost(s: _Session, final: dict, received: int) -> None:
    """A LinkError when fewer than the ``final`` STATUS's ``records`` came (``received``)."""
    lost = final["records"] - received
    if lost:
        raise LinkError(
            f"{lost} of the board's {final['records']} records were lost on the "
            f"way back ({sum(s.reader.errors.values())} corrupted frames came in, "
            f"{s.reader.errors}); the results would be incomplete, run again"
        )
