"""``nfacep run``: a board over its USB UART, as a back-end.

:class:`UartBoard` is a :class:`~nfacep.backend.Backend`: it opens the serial port (any pyserial
URL: ``/dev/ttyUSB0``, ``COM3``, ``socket://host:port``, ``loop://``), resets the board's engine,
checks that the board runs the engine this query file and these parameters describe (STATUS's
``engine_id``), sends the tuples in TUPLES frames under the link's flow control, and reads the
RECORD frames back until the board reports that it has taken every tuple and is idle. With
runtime parameters it sends the switches in PARAMS frames among the TUPLES frames
(:func:`switch_plan`). The frame format and the flow control are
:mod:`nfacep.boards.link.protocol`'s; ``boards/LINK.md`` describes both.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

from nfacep import NfacepError, wire
from nfacep.errors import UsageError
from nfacep.io.tuples import Tuples
from nfacep.nfa import Nfa
from nfacep.params import EngineParams
from nfacep.result import Result
from nfacep.settings import ParamValues, params_schema

from .link.protocol import (
    ACK_FIELDS,
    ERROR_COUNTERS,
    OVERHEAD,
    STATUS_FIELDS,
    SWITCH_BYTES,
    VERSION,
    FrameReader,
    FrameType,
    decode_fields,
    decode_status,
    encode,
    engine_id,
    fields_size,
    params_payload,
)

__all__ = [
    "BoardResult",
    "LinkError",
    "NoBoardError",
    "PortError",
    "UartBoard",
    "board_result",
    "check_engine",
    "check_timeout",
    "check_values",
    "frame_order",
    "frame_starts",
    "switch_plan",
    "values_bytes",
]

#: The longest ``--timeout`` (a day): what a silent board is waited for.
MAX_TIMEOUT = 86400.0

#: Tuples per TUPLES frame by default (fewer when the board's buffer is small).
FRAME_TUPLES = 16


class LinkError(NfacepError):
    """The board stopped answering, answered wrongly, or results were lost on the link."""

    exit_code = 1


class NoBoardError(LinkError):
    """Nothing (or not the expected engine) answers on the serial port."""


class PortError(UsageError):
    """The serial port cannot be opened (no such device, busy, not allowed, a bad URL): a
    mistake to fix before running (exit 2), unlike a board that does not answer."""


@dataclass
class BoardResult(Result):
    """What a board reported: a :class:`~nfacep.result.Result`, plus the link's view."""

    port: str = ""
    baud: int = 0
    status: dict = field(default_factory=dict)  #: the board's last STATUS
    #: the host's view of the link: frames, retransmissions, bad frames, seconds
    stats: dict = field(default_factory=dict)

    backend = "board"

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


def values_bytes(nfa: Nfa) -> int:
    """Bytes of the packed values of the queries' runtime parameters (0 without any): the end
    of STATUS and of PARAMS."""
    types = nfa.program.parameters
    return wire.tuple_bytes(params_schema(types)) if types else 0


def switch_plan(values: ParamValues | None, board_values: int, n: int) -> list[tuple[int, int]]:
    """The switches a host sends for a run of ``n`` tuples, in order: ``(tuple number, packed
    values)``. First one at tuple 0 when the values in force on the board after RESET
    (``board_values``, packed) are not the run's starting values (a board built with other
    ``--param`` values), then each switch of ``values`` that applies to one of the tuples
    (those from tuple ``n`` on change nothing). Shared by the hosts of both links."""
    if not values or not n:
        return []
    plan = []
    start = values.packed(values.initial)
    if board_values != start:
        plan.append((0, start))
    for seq, _ in values.switches:
        if seq < n:
            if seq >= 1 << 8 * SWITCH_BYTES:
                raise UsageError(
                    f"--param …@{seq}: the board numbers tuples modulo 2^{8 * SWITCH_BYTES}"
                )
            plan.append((seq, values.packed(values.in_force(seq))))
    return plan


def frame_starts(n: int, per_frame: int, cuts=()) -> list[int]:
    """Where the frames (packets) of ``n`` tuples, ``per_frame`` at most in each, start, with a
    new one at each of ``cuts`` (the switches' tuples), and ``n`` last. Shared by the hosts of
    both links."""
    return sorted({*range(0, n, per_frame), *(c for c in cuts if 0 < c < n), n})


def frame_order(
    n: int, per_frame: int, plan=()
) -> tuple[list[tuple[int, int | None]], dict[int, int | None]]:
    """The frames (packets) of a run of ``n`` tuples in order, shared by the hosts of both
    links: ``(first tuple, end)`` for tuples (:func:`frame_starts`), ``(switch's tuple,
    None)`` for each switch of ``plan`` (:func:`switch_plan`), just before the frame that
    starts with its tuple; and, for each switch's index, the tuple of the switch before it
    (None for the first), which the engine must have taken before the switch is sent."""
    switches = dict(plan)
    frames: list[tuple[int, int | None]] = []
    waits: dict[int, int | None] = {}
    last = None
    for a, b in itertools.pairwise(frame_starts(n, per_frame, list(switches))):
        if a in switches:
            waits[len(frames)] = last
            frames.append((a, None))
            last = a
        frames.append((a, b))
    return frames, waits


def check_values(
    values: ParamValues | None, status: dict, n: int, *, error: type[NfacepError] | None = None
) -> None:
    """Raise ``error`` (default :class:`LinkError`) unless the values in force a board reports
    at the end of a run of ``n`` tuples (STATUS's ``values``) are those ``values`` give the
    last tuple."""
    if not values or not n:
        return
    expected = values.in_force(n - 1)
    if status["values"] != values.packed(expected):
        try:
            have = values.texts(values.unpacked(status["values"]))
        except ValueError:
            have = hex(status["values"])
        raise (error or LinkError)(
            f"the board's runtime parameters at the end of the run are {have}, expected "
            f"{values.texts(expected)}: a switch was lost; the results are not this run's"
        )


def check_engine(
    board: dict,
    nfa: Nfa,
    params: EngineParams,
    *,
    link: str,
    error: type[NfacepError] | None = None,
) -> None:
    """Raise ``error`` (default :class:`NoBoardError`) unless ``board`` (its ``engine_id``,
    ``tuple_bytes`` and ``record_bytes``) is the engine of ``nfa`` with ``params``; ``link``
    names the bitstream to load (``uart``, ``udp``). Shared by the UART and UDP hosts."""
    error = error or NoBoardError
    expected = engine_id(nfa, params)
    if board["engine_id"] != expected:
        raise error(
            f"the board runs another engine (engine id {board['engine_id']:08x}, expected "
            f"{expected:08x} for this query file with {params.options()}): load the bitstream "
            f"that `nfacep build --link {link}` made of this query file with these parameters, "
            f"or pass the ones it was built with{_default_hint(board, nfa, params)}"
        )
    tb = wire.tuple_bytes(nfa.program.schema)
    rb = wire.record_format(nfa).nbytes
    if board["tuple_bytes"] != tb or board["record_bytes"] != rb:
        raise error(
            f"the board's tuples are {board['tuple_bytes']} bytes and records "
            f"{board['record_bytes']}, expected {tb} and {rb}"
        )


def _default_hint(board: dict, nfa: Nfa, params: EngineParams) -> str:
    """If the board runs the engine a board gets by default from ``nfacep build`` (no
    ``--store``, ``--partitions`` or ``--ways``; :mod:`nfacep.boards.defaults`), the options
    that name it."""
    import dataclasses

    from .defaults import STORE_OPTIONS, board_engine
    from .registry import BOARDS

    others = {
        f.name: getattr(params, f.name)
        for f in dataclasses.fields(params)
        if f.name not in STORE_OPTIONS
    }
    for name, candidate in BOARDS.items():
        engine = board_engine(nfa, candidate, others)
        if engine != params and engine_id(nfa, engine) == board["engine_id"]:
            options = " ".join(f"--{n} {getattr(engine, n)}" for n in STORE_OPTIONS)
            return (
                f"; it is the engine `nfacep build --board {name}` makes by default: pass {options}"
            )
    return ""


def _check_board(status: dict, nfa: Nfa, params: EngineParams, capacity_min: int) -> None:
    if status["version"] != VERSION:
        raise NoBoardError(
            f"the board speaks version {status['version']} of the link "
            f"protocol, this nfacep version {VERSION}: rebuild the bitstream"
        )
    check_engine(status, nfa, params, link="uart")
    if status["capacity"] < capacity_min:
        raise NoBoardError(
            f"the board's buffer holds {status['capacity']} bytes, less than one "
            f"{capacity_min}-byte tuple"
        )


def check_timeout(timeout: float) -> None:
    """A UsageError unless ``timeout`` is a positive number of seconds up to a day."""
    if not 0 < timeout <= MAX_TIMEOUT:  # NaN and infinity included
        raise UsageError(f"--timeout must be a positive number of seconds, at most {MAX_TIMEOUT}")


class UartBoard:
    """A board loaded with a bitstream from ``nfacep build --link uart``, on the serial port
    ``port`` at ``baud``.

    ``timeout`` bounds every wait for the board (seconds); ``frame_tuples`` the tuples per
    frame (default :data:`FRAME_TUPLES`, fewer when the board's buffer is small).
    ``serial_port`` is an already open pyserial port to use instead of opening ``port``;
    ``progress`` is called with a line of text about once a second.
    """

    def __init__(
        self,
        port: str,
        *,
        baud: int = 115200,
        timeout: float = 5.0,
        frame_tuples: int | None = None,
        serial_port=None,
        progress=None,
    ):
        check_timeout(timeout)
        if frame_tuples is not None and frame_tuples < 1:
            raise UsageError("--frame-tuples must be at least 1")
        self.port = port
        self.baud = baud
        self.timeout = timeout
        self.frame_tuples = frame_tuples
        self.serial_port = serial_port
        self.progress = progress

    def run(self, nfa: Nfa, tuples: Tuples, params: EngineParams, values=None) -> BoardResult:
        """Match ``tuples`` on the board. Raises :class:`NoBoardError` when no board (or one
        with another engine) answers and :class:`LinkError` when it stops answering or results
        are lost. With runtime parameters, ``values`` (:class:`~nfacep.settings.ParamValues`)
        are the values over the stream: the board is switched to their starting values if it
        runs others, and each switch is sent before the tuple it applies to
        (:func:`switch_plan`)."""
        if nfa.program.parameters and not values:
            values = ParamValues.parse(nfa.program.parameters, [])  # (says what is missing)
        schema = nfa.program.schema
        tb = wire.tuple_bytes(schema)
        payload = wire.pack_bytes(schema, tuples)
        ser = self.serial_port if self.serial_port is not None else open_port(self.port, self.baud)
        try:
            session = _Session(
                ser, nfa, baud=self.baud, timeout=self.timeout, progress=self.progress
            )
            started = time.monotonic()
            status = session.reset(self.port)
            _check_board(status, nfa, params, tb)
            plan = switch_plan(values, status["values"], tuples.n)
            stats = _stream(
                session,
                payload,
                tuples.n,
                tb,
                status["capacity"],
                self.frame_tuples,
                plan,
                values.width() if values else 0,
            )
            final = _finish(session, tuples.n)
            stats["seconds"] = round(time.monotonic() - started, 3)
        finally:
            if self.serial_port is None:
                ser.close()
        result = _results(session, nfa, tuples.n, final, stats, params, self.port, self.baud)
        check_values(values, final, tuples.n)
        result.values = values or None
        return result


def _stream(
    s: _Session,
    payload: bytes,
    n: int,
    tb: int,
    capacity: int,
    frame_tuples: int | None,
    plan=(),
    width: int = 0,
) -> dict:
    """Send every tuple under go-back-N with credits, and the switches of ``plan``
    (:func:`switch_plan`; ``width`` bits of values) in PARAMS frames, each before the frame
    whose first tuple it applies to and once the board took the tuple of the one before (it
    takes one switch at a time); return the host's link statistics."""
    room = capacity // tb  # tuples the board's buffer holds
    per_frame = frame_tuples or max(1, min(FRAME_TUPLES, room // 2))
    per_frame = min(per_frame, room)
    frames, waits = frame_order(n, per_frame, plan)
    switches = dict(plan)
    nframes = len(frames)
    # tuples in the frames before each frame (what is acknowledged when it is `base`)
    starts = [first for first, _ in frames] + [n]
    window = 128  # frames in flight at most: sequence numbers are mod 256
    rto = 0.1 + 4 * (capacity + OVERHEAD * (room // per_frame + 1)) * s.byte_time
    poll_every = max(0.01, 3 * (fields_size(STATUS_FIELDS) + OVERHEAD) * s.byte_time)
    base = nxt = 0  # first frame not acknowledged, next frame to send
    sent_hi = 0  # frames ever sent
    consumed = 0  # tuples the engine took, unwrapped from the 32-bit counter
    resent = frames_sent = polls = 0
    progress_at = last_poll = advanced_at = time.monotonic()
    stalled_polls = 0
    next_report = time.monotonic() + 1

    def taken(counter: int) -> int:
        return consumed + ((counter - consumed) % (1 << 32))

    def ready(i: int) -> bool:  # frame i may go now
        end = frames[i][1]
        if end is None:  # PARAMS: the board took the last switch's tuple
            return waits[i] is None or consumed > waits[i]
        return end - consumed <= room

    while base < nframes:
        while nxt < nframes and nxt - base < window and ready(nxt):
            first, end = frames[nxt]
            if end is None:
                s.send(FrameType.PARAMS, params_payload(nxt, first, switches[first], width))
            else:
                s.send(FrameType.TUPLES, bytes([nxt % 256]) + payload[first * tb : end * tb])
            nxt += 1
            sent_hi = max(sent_hi, nxt)
            frames_sent += 1
        s.poll(0.005)
        now = time.monotonic()
        answers, s.answers = s.answers, []
        for a in answers:
            consumed = taken(a["tuples"])
            ahead = (a["next_seq"] - base) % 256
            if 256 - ahead <= window:
                continue  # behind `base`: an answer older than the last one
            acked = base + ahead
            if acked > sent_hi:
                raise LinkError(
                    f"the board acknowledged frame {acked - 1}, but only "
                    f"{sent_hi} were sent: was it reset during the run?"
                )
            if acked > base:
                base = acked
                nxt = max(nxt, acked)  # a late ACK after going back
                progress_at = advanced_at = now
                stalled_polls = 0
        if base == nxt:  # (before going back N, which makes it so)
            advanced_at = now  # nothing in flight: waiting for room, or for a switch's tuple
        elif now - advanced_at > max(s.timeout, 4 * rto):
            raise LinkError(
                f"the board answers but has not accepted frame {base} "
                f"({'PARAMS' if frames[base][1] is None else 'TUPLES'}) for "
                f"{now - advanced_at:.1f} s; its counters: {_errors(s.status)}"
            )
        if base == nxt and nxt < nframes:
            # everything sent was taken into the buffer: wait for room, asking for it
            progress_at = now
            if now - last_poll > poll_every:
                s.send(FrameType.STATUS_REQ)
                last_poll = now
                polls += 1
        elif base < nxt and now - progress_at > rto:
            if stalled_polls == 0:
                # maybe only the ACK was lost: STATUS says where the board is
                s.send(FrameType.STATUS_REQ)
                polls += 1
                stalled_polls = 1
            else:
                resent += nxt - base
                nxt = base  # go back N
                stalled_polls = 0
            progress_at = now
        if s.silent_for() > s.timeout:
            raise LinkError(
                f"the board stopped answering ({s.timeout:g} s without a byte, "
                f"{starts[base]} of {n} tuples acknowledged)"
            )
        if now >= next_report:
            s.say(f"{starts[base]} of {n} tuples sent, {len(s.records)} records back")
            next_report = now + 1
    return {
        "frames": nframes,
        "frames_sent": frames_sent,
        "frames_resent": resent,
        "tuples_per_frame": per_frame,
        "status_polls": polls,
        "switches": len(plan),
        "bytes_out": s.bytes_out,
    }


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


def _results(
    s: _Session,
    nfa: Nfa,
    n: int,
    final: dict,
    stats: dict,
    params: EngineParams,
    port: str,
    baud: int,
) -> BoardResult:
    stats.update(
        {
            "records": len(s.records),
            "bad_frames_in": sum(s.reader.errors.values()),
            "bytes_in": s.bytes_in,
            "board_errors": _errors(final),
        }
    )
    lost = final["records"] - len(s.records)
    if lost:
        raise LinkError(
            f"{lost} of the board's {final['records']} records were lost on the "
            f"way back ({sum(s.reader.errors.values())} corrupted frames came in, "
            f"{s.reader.errors}); the results would be incomplete, run again"
        )
    result = board_result(
        BoardResult, nfa, n, s.records, final, params, port=port, baud=baud, stats=stats
    )
    if stats["frames_resent"] or stats["bad_frames_in"] or stats["board_errors"]:
        result.warnings.append(
            f"warning: the link was noisy: {stats['frames_resent']} frames resent, "
            f"{stats['bad_frames_in']} bad frames from the board, board counters "
            f"{stats['board_errors']}"
        )
    return result


def board_result(
    cls: type[BoardResult],
    nfa: Nfa,
    n: int,
    records: list[bytes],
    final: dict,
    params: EngineParams,
    **fields,
) -> BoardResult:
    """The ``cls`` result of the raw ``records`` a board sent for ``n`` tuples, with its last
    STATUS ``final`` (its ``tuples``, ``matched`` and ``drops`` counters); a LinkError for a
    record that is not this engine's. Shared by the UART and UDP hosts."""
    fmt = wire.record_format(nfa)
    try:
        return cls.from_records(
            nfa,
            n,
            [fmt.decode_bytes(raw) for raw in records],
            params,
            counters={k: final[k] for k in ("tuples", "matched", "drops")},
            status=final,
            **fields,
        )
    except ValueError as err:
        raise LinkError(f"the board sent a record that is not this engine's: {err}") from None
