"""What the hosts of every link share: their errors, their result, the order in which they send
tuples and runtime-parameter switches, and the checks of a board's answers.

A link's host (:class:`nfacep.links.uart.host.UartBoard`, :class:`nfacep.links.udp.host.UdpBoard`)
is a :class:`~nfacep.backend.Backend`: it resets the board, takes the engine parameters its STATUS
reports (or, through the API, checks that it runs the parameters given) and checks that it runs
this query file's engine (:func:`check_engine`), sends the tuples in frames or
packets of :func:`frame_order` with the switches of :func:`switch_plan` among them, and turns
the records the board sent back into a :class:`BoardResult` (:func:`board_result`).

Both hosts read a file in pieces (their ``run_stream``, as ``nfacep run`` reads its input): each
piece is sent, the board drained (it took every tuple and is idle), the piece's records checked
against what was sent and what STATUS counts (:class:`Tally`) and turned into the piece's result
(:func:`piece_result`), which the sink writes to a temporary file before the next piece is read
(:func:`each_piece`). So a host holds a few pieces of the input and one piece's records, and the
match file appears only when the whole run succeeded.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field

from nfacep import NfacepError, wire
from nfacep.errors import UsageError
from nfacep.io.tuples import Tuples
from nfacep.nfa import Nfa
from nfacep.params import EngineParams, option
from nfacep.result import Result
from nfacep.settings import ParamValues, params_schema

from .protocol import SWITCH_BYTES, engine_from_fields, engine_id

__all__ = [
    "MAX_TIMEOUT",
    "BoardResult",
    "Kept",
    "LinkError",
    "NoBoardError",
    "Tally",
    "board_result",
    "check_engine",
    "check_timeout",
    "check_values",
    "each_piece",
    "frame_order",
    "frame_starts",
    "piece_result",
    "reads_before",
    "record_format",
    "run_whole",
    "switch_plan",
    "values_bytes",
]

#: The longest ``--timeout`` (a day): what a silent board is waited for.
MAX_TIMEOUT = 86400.0


class LinkError(NfacepError):
    """The board stopped answering, answered wrongly, or results were lost on the link."""

    exit_code = 1


class NoBoardError(LinkError):
    """Nothing (or not the expected engine) answers on the link."""


@dataclass
class BoardResult(Result):
    """What a board reported: a :class:`~nfacep.result.Result`, plus the link's view (each
    link's host adds what its summary and report line say)."""

    port: str = ""  #: where the board is: a serial port, an address
    status: dict = field(default_factory=dict)  #: the board's last STATUS
    #: the host's view of the link: frames, retransmissions, bad frames, seconds
    stats: dict = field(default_factory=dict)

    backend = "board"


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
    new one at each of ``cuts`` (the switches' tuples), and ``n`` last."""
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
    given: dict | None = None,
) -> EngineParams:
    """The engine the board runs, from its STATUS ``board`` (its ``engine_id``, engine
    parameters, ``tuple_bytes`` and ``record_bytes``); ``error`` (default
    :class:`NoBoardError`) unless it is an engine of ``nfa``. ``link`` names the bitstream to
    load (``uart``, ``udp``).

    With ``given`` None the board must run ``params``. With ``given`` (the engine options given
    on ``nfacep run``'s command line, by name: :func:`nfacep.params.given`, maybe none) the
    engine is learnt from the board, and an option given that differs from the board's is an
    error naming both."""
    error = error or NoBoardError
    if given is not None:  # (learnt from the board: its engine id checked there)
        params = _learn_engine(board, nfa, given, link=link, error=error)
    elif board["engine_id"] != (expected := engine_id(nfa, params)):
        raise error(
            f"the board runs another engine (engine id {board['engine_id']:08x}, expected "
            f"{expected:08x} for this query file with {params.options()}): load the bitstream "
            f"that `nfacep build --link {link}` made of this query file with these parameters, "
            f"or pass the ones it was built with{_default_hint(board, nfa, params)}"
        )
    tb = wire.tuple_bytes(nfa.program.schema)
    rb = record_format(nfa, params).nbytes
    if board["tuple_bytes"] != tb or board["record_bytes"] != rb:
        raise error(
            f"the board's tuples are {board['tuple_bytes']} bytes and records "
            f"{board['record_bytes']}, expected {tb} and {rb}"
        )
    return params


def _learn_engine(
    board: dict, nfa: Nfa, given: dict, *, link: str, error: type[NfacepError]
) -> EngineParams:
    """The engine parameters the board reports, checked against those ``given``."""
    try:
        built = engine_from_fields(board)
    except ValueError as err:
        raise error(
            f"the board reports engine parameters this nfacep cannot build ({err}): load a "
            f"bitstream that this nfacep's `nfacep build --link {link}` made"
        ) from None
    if engine_id(nfa, built) != board["engine_id"]:
        raise error(
            f"the board runs another engine (engine id {board['engine_id']:08x}, built with "
            f"{built.options()}; this query file with those parameters is "
            f"{engine_id(nfa, built):08x}): load the bitstream that `nfacep build --link "
            f"{link}` made of this query file"
        )
    differ = [
        f"{option(name)} {getattr(built, name)} (given: {value})"
        for name, value in given.items()
        if getattr(built, name) != value
    ]
    if differ:
        raise error(
            f"the board runs this query file's engine built with {built.options()}, not the "
            f"engine options given: it has {', '.join(differ)}; give none of them (`run` takes "
            "the board's) or the board's"
        )
    return built


def _default_hint(board: dict, nfa: Nfa, params: EngineParams) -> str:
    """If the board runs the engine a board gets by default from ``nfacep build`` (no
    ``--store``, ``--partitions`` or ``--ways``; :mod:`nfacep.boards.defaults`), the options
    that name it."""
    import dataclasses

    from nfacep.boards.defaults import STORE_OPTIONS, board_engine
    from nfacep.boards.registry import BOARDS

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


def record_format(nfa: Nfa, params: EngineParams) -> wire.RecordFormat:
    """The records of the engine of ``nfa`` and ``params``: a programmable engine's have a
    ``matches`` bit per query slot (bit ``q``: the file's query ``q``)."""
    programmable = params.engine == "programmable"
    return wire.record_format(nfa, slots=params.queries if programmable else None)


def check_timeout(timeout: float) -> None:
    """A UsageError unless ``timeout`` is a positive number of seconds up to a day."""
    if not 0 < timeout <= MAX_TIMEOUT:  # NaN and infinity included
        raise UsageError(f"--timeout must be a positive number of seconds, at most {MAX_TIMEOUT}")


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
    record that is not this engine's."""
    fmt = record_format(nfa, params)
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


def reads_before(nfa: Nfa) -> bool:
    """Whether the queries' measures may read any tuple before a match's (a COUNT, or FIRST of
    a field): a piece's result then keeps every tuple of the stream so far alive."""
    return any(
        m.kind == "count" or (m.kind == "first" and m.field)
        for q in nfa.program.queries
        for m in q.measures
    )


def piece_result(
    cls: type[BoardResult],
    nfa: Nfa,
    end: int,
    piece: Tuples,
    records: list[bytes],
    final: dict,
    params: EngineParams,
    **fields,
) -> BoardResult:
    """The ``cls`` result of one piece of a stream (:func:`board_result`): ``piece``, the
    stream's tuples up to ``end``, its ``records`` (checked by :class:`Tally`) and the STATUS
    ``final`` that drained it."""
    import numpy as np

    result = board_result(cls, nfa, end, records, final, params, **fields)
    result.n = piece.n  # (its records name tuples of the stream up to ``end``)
    if reads_before(nfa):  # the measures may read any tuple before: keep them all
        result.live = np.arange(end, dtype=np.int64)
    return result


def each_piece(stream: Iterator[Tuples]) -> Iterator[tuple[Tuples, bool]]:
    """The pieces of ``stream``, each with whether it is the last (the next one is read before
    a piece is given: a run holds two pieces, the one read ahead in a thread a third). The
    caller lets go of a piece before it asks for the next (``del``: a loop's variable holds
    it while the piece after the next is read, a fourth when the reader is quicker)."""
    piece = next(stream)
    while piece is not None:
        after = next(stream, None)
        yield piece, after is None
        piece = after


def run_whole(run_stream, nfa: Nfa, tuples: Tuples, params: EngineParams, values=None):
    """A host's ``run``: its ``run_stream`` over the one piece ``tuples``, its result kept
    (:class:`Kept`)."""
    kept = Kept()
    run_stream(nfa, lambda: iter([tuples]), lambda: contextlib.nullcontext(kept), params, values)
    return kept.result


class Kept:
    """The sink of a host's ``run`` (tuples already read, one piece): its result, kept."""

    result: BoardResult | None = None

    def add(self, result, tuples) -> None:
        self.result = result

    def finish(self) -> None:
        return None


class Tally:
    """What the records of a run (an attempt) said so far, checked a piece at a time against
    the tuples sent and the board's counters: the last record's tuple and the counts, nothing
    more. ``where`` names the board in messages."""

    def __init__(self, where: str):
        self.where = where
        self.last = -1  #: the tuple of the last record taken
        self.counted = {"records": 0, "matched": 0, "drops": 0}

    def check(self, records: list[bytes], n: int, final: dict, fmt: wire.RecordFormat) -> None:
        """A LinkError (nothing is written) unless the raw ``records`` of the next piece, in
        the board's order, agree with what was sent and what ``final`` counts (the STATUS
        that drained the piece: the board took the ``n`` tuples sent so far and is idle): a
        record for a tuple not sent, records out of order or twice for a tuple, or more or
        other records, matches or drops than STATUS says, are errors."""
        problem = None
        for raw in records:
            record = fmt.decode_bytes(raw)
            if record.seq >= n:
                problem = f"a record names tuple {record.seq}, but only {n} were sent"
                break
            if record.seq <= self.last:
                problem = "records come out of tuple order or twice for one tuple"
                break
            self.last = record.seq
            self.counted["records"] += 1
            self.counted["matched"] += record.matches != 0
            self.counted["drops"] += bool(record.dropped)
        if problem is None:
            wrong = {
                k: (v, final[k]) for k, v in self.counted.items() if v % 2**32 != final[k] % 2**32
            }
            problem = "; ".join(f"{v} {k} came, STATUS counts {c}" for k, (v, c) in wrong.items())
        if problem:
            raise LinkError(
                f"the board {self.where} contradicts itself: {problem}; nothing was written"
            )
