"""The UDP host's streaming: one attempt's tuples sent under the board's credit with its
runtime parameter switches (``_stream``), the session opened and finished, the RECORDS of
each piece gathered, checked and written (``_Link``, ``_Tally``), and what the board
reported (:class:`UdpBoardResult`).
"""

from __future__ import annotations

import bisect
import math
import time
from dataclasses import dataclass

from nfacep import wire

from ..host import (
    BoardResult,
    LinkError,
    Tally,
    check_values,
    frame_order,
    piece_result,
    switch_plan,
)
from ..protocol import switch_body
from .errors import UdpTimeoutError
from .protocol import PacketType
from .session import REJECTED, _Lost, _merge, _Session


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
        #: the run's file, where ``nfacep load`` kept the files it loaded (:mod:`.images`),
        #: and each switch seen: (its tuple, the file whose queries name the matches from it)
        self.nfa = None
        self.folder = ""
        #: the board's programmable engine's capacity (a recorded file is used only when it
        #: makes the image in force again for it)
        self.capacity = None
        self.files: list[tuple[int, object]] = []
        self.stats: dict = {
            "packets": 0,
            "tuples_per_packet": per_packet,
            "switches": 0,
            "rate": None if rate is None else ("max" if math.isinf(rate) else rate),
        }

    def see_image(self, final: dict, end: int) -> None:
        """On a programmable board: note when the STATUS ``final`` that drained the tuples
        before ``end`` names another switch than the drain before (another image, or the same
        image again: a ``nfacep load`` while the run streams), at the tuple STATUS's
        ``image_from`` says, and the file whose queries name the matches from there on: the
        one ``nfacep load`` recorded for the image (:mod:`.images`), or else the run's file,
        as the board's slots were named before (and why, in the summary)."""
        if self.image is None:
            return
        now = final["image"].to_bytes(8, "little").hex()
        at = end - (end - final["image_from"]) % 2**32  # (the board counts modulo 2^32)
        last = (self.loads[-1]["image"], self.loads[-1]["from_tuple"]) if self.loads else None
        if (now, at) == (last or (self.image, 0)):
            return
        load: dict = {"image": now, "from_tuple": at}
        if now == self.image:
            nfa = self.nfa
            load["query_file"] = "(the run's)"
        else:
            from .images import look_up

            found = look_up(self.folder, now, self.capacity)
            nfa = found.nfa or self.nfa
            load["query_file"] = found.path if found.nfa is not None else None
            if found.nfa is None:
                load["reason"] = found.reason
            else:
                _check_columns(self.nfa, found.nfa, now, found.path, at)
        load["queries"] = [q.name for q in nfa.queries]
        self.loads.append(load)
        self.files.append((at, nfa))

    def result(self, nfa, end: int, piece, records: list[bytes], final: dict, params, **fields):
        """The result of the piece ``piece`` (the tuples before ``end``), its ``records`` named
        by the file in force at each (:meth:`see_image`; :func:`~nfacep.switched.joined`
        when a switch cut it)."""
        first = end - piece.n
        if not self.files:
            return piece_result(UdpBoardResult, nfa, end, piece, records, final, params, **fields)
        from nfacep.switched import joined

        cuts = [(0, nfa), *self.files]
        start = max(k for k, (at, _) in enumerate(cuts) if at <= first)
        fmt = wire.record_format(nfa, slots=params.queries)
        seqs = [fmt.decode_bytes(raw).seq for raw in records]
        parts = []
        for k in range(start, len(cuts)):
            at, file = cuts[k]
            if at >= end:
                break
            stop = cuts[k + 1][0] if k + 1 < len(cuts) else end
            mine = [raw for raw, q in zip(records, seqs, strict=True) if at <= q < stop]
            result = piece_result(UdpBoardResult, file, end, piece, mine, final, params, **fields)
            parts.append((at, result, file.program))  # (at: the same in every piece)
        return joined(parts)

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
            result.warnings += [_switch_warning(load) for load in self.loads]
        if self.losses or s.bad_in:
            result.warnings.append(
                f"warning: the UDP link lost packets and the run was started again "
                f"({'; '.join(self.losses)}); {s.bad_in} unreadable packets came in"
                if self.losses
                else f"warning: {s.bad_in} unreadable packets came from the board"
            )


def _switch_warning(load: dict) -> str:
    """What the run says of a switch it saw (:meth:`_Link.see_image`)."""
    said = (
        f"warning: image {load['image']} was put in force on the board from tuple "
        f"{load['from_tuple']} while the run streamed (`nfacep load`); "
    )
    if load["query_file"] is not None:
        return said + (
            f"the matches from that tuple on are its file's queries "
            f"({', '.join(load['queries'])}; {load['query_file']})"
        )
    return said + (
        f"{load['reason']}, so the match file names this file's query in each slot for the "
        "matches from that tuple on: they are the matches of the loaded file's query in that "
        "slot"
    )


def _check_columns(run, loaded, image: str, path: str, at: int) -> None:
    """A UsageError when the loaded file has a measure the match file has no column for (its
    columns are the run's file's measures, written before the switch)."""
    from nfacep.errors import UsageError
    from nfacep.measures import columns

    have = {m.key for m in columns(run.program)}
    lack = [m.name for m in columns(loaded.program) if m.key not in have]
    if lack:
        raise UsageError(
            f"image {image} was put in force on the board from tuple {at} while the run "
            f"streamed; its file ({path}) has the measures {', '.join(lack)}, which the match "
            "file has no columns for (its columns are this run's file's measures): nothing "
            "was written; give the run's file every measure the loaded files have"
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
