"""What the software boards of every link share: the engine, in software.

A link's software board (:class:`nfacep.links.uart.model.UartBoardModel`,
:class:`nfacep.links.udp.model.UdpBoardModel`) answers a host as the gateware does, with the
reference matcher (:func:`nfacep.reference.matcher.run`) standing in for the engine, so a host
can be tested without hardware. :class:`BoardModel` is that engine: the tuples it took, the
records they produced, its runtime parameter registers (:class:`ParamRegisters`); each link's
model adds its framing, its counters and its STATUS.
"""

from __future__ import annotations

from nfacep import wire
from nfacep.params import EngineParams
from nfacep.reference import matcher as reference
from nfacep.settings import ParamValues

from .protocol import SWITCH_BYTES, engine_id, params_bytes

__all__ = ["BoardModel", "ParamRegisters"]


class ParamRegisters:
    """The engine's runtime parameter registers in software, for the software boards of both
    links: the values it was built with (``values``, required when ``nfa`` has parameters;
    None without), the switches written since RESET (``switches``: first tuple and values).
    As the engine: a switch waits for its tuple (or applies from the next tuple taken if that
    one has passed), and the engine holds one waiting switch."""

    def __init__(self, nfa, values: ParamValues | None):
        types = nfa.program.parameters
        if types and not values:
            raise ValueError("a model of an engine with runtime parameters needs their values")
        self.values = values if types else None
        #: bytes of the packed values (0 without parameters)
        self.nbytes = params_bytes(self.values.width()) if self.values else 0
        self.switches: list[tuple[int, dict]] = []

    def __bool__(self) -> bool:
        return self.values is not None

    def reset(self) -> None:
        self.switches = []

    def schedule(self) -> ParamValues | None:
        """The values the engine judged (and will judge) the tuples with."""
        if not self.values:
            return None
        initial = dict(self.values.initial)
        later = []
        for seq, vals in self.switches:
            if seq == 0:
                initial = vals
            else:
                later.append((seq, vals))
        return ParamValues(self.values.types, initial, tuple(later))

    def in_force(self, taken: int) -> int:
        """The values in force after ``taken`` tuples, packed (the engine's
        ``param_values``; 0 without parameters)."""
        if not self.values:
            return 0
        schedule = self.schedule()
        return self.values.packed(schedule.in_force(taken - 1) if taken else schedule.initial)

    def pending(self, taken: int) -> bool:
        """A switch waits for its tuple."""
        return bool(self.switches) and self.switches[-1][0] >= taken

    def write(self, body: bytes, taken: int) -> bool:
        """Take the switch ``body`` (:func:`~nfacep.links.protocol.switch_body`, of the right
        length) after ``taken`` tuples; False if one is pending."""
        if self.pending(taken):
            return False
        seq = int.from_bytes(body[:SWITCH_BYTES], "little")
        packed = int.from_bytes(body[SWITCH_BYTES:], "little") & ((1 << self.values.width()) - 1)
        self.switches.append((max(seq, taken), self.values.unpacked(packed)))
        return True


class BoardModel:
    """The engine of a software board: infinitely fast, it matches the tuples it takes at once.

    ``capacity`` is the board's tuple buffer in bytes; ``engine_id_override`` the fingerprint
    it reports instead of the engine's (to model a board with another engine). With runtime
    parameters, ``values`` are the ones the board was built with (its values after RESET;
    required then), switched as the engine does (:class:`ParamRegisters`).

    A link's model calls :meth:`reset` at the end of its ``__init__`` and on RESET.
    """

    def __init__(
        self,
        nfa,
        params: EngineParams,
        *,
        capacity: int,
        engine_id_override: int | None = None,
        values: ParamValues | None = None,
    ):
        self.nfa = nfa
        self.params = params
        self.schema = nfa.program.schema
        self.tuple_bytes = wire.tuple_bytes(self.schema)
        self.record_format = wire.record_format(nfa)
        self.record_bytes = self.record_format.nbytes
        self.capacity = capacity
        self.id = engine_id(nfa, params) if engine_id_override is None else engine_id_override
        self.registers = ParamRegisters(nfa, values)

    #: Up to how many tuples taken the records are found by matching them all again (the
    #: reference's array operations, quick on short streams); beyond, by one reference matcher
    #: fed a packet at a time (its compiled loops take a moment to load, then keep a long
    #: stream's cost linear).
    whole_up_to = 1 << 15

    def reset(self) -> None:
        """Clear the engine: no tuples taken, no records sent, the parameters it was built with."""
        self.accepted = bytearray()  # tuple bytes the engine took
        self.reported = 0  # tuples whose records were sent
        self.registers.reset()
        #: the reference matcher fed the tuples taken so far, a packet at a time (its state
        #: carried), once more than :attr:`whole_up_to` were taken, and how many it was fed
        self._matcher: reference.Matcher | None = None
        self._fed: int | None = 0

    @property
    def switches(self) -> list[tuple[int, dict]]:
        """The switches written since RESET: (first tuple, values)."""
        return self.registers.switches

    def taken(self) -> int:
        """Tuples the engine took."""
        return len(self.accepted) // self.tuple_bytes

    def new_records(self) -> list[wire.Record]:
        """The records of the tuples taken since the last call, in order."""
        n = self.taken()
        if n == self.reported:
            return []
        if n > self.whole_up_to and (self._matcher is None or self._fed == self.reported):
            return self._new_records(n)
        if self._matcher is not None:
            self._fed = None  # counters set by hand (tests): the whole stream from now on
            self._matcher = None
        tuples = wire.unpack_bytes(self.schema, bytes(self.accepted))
        records = reference.run(
            self.nfa, tuples, self.params, values=self.registers.schedule()
        ).records(self.nfa, tuples)
        reported, self.reported = self.reported, n
        return [r for r in records if r.seq >= reported]

    def _new_records(self, n: int) -> list[wire.Record]:
        """:meth:`new_records` in time that grows with the new tuples, not with all those
        taken: the tuples since the last call (all of them the first time) fed to one
        reference matcher, whose runtime parameters are the switches written so far (each
        applies from a tuple not yet taken)."""
        fed = self._fed if self._matcher is not None and self._fed is not None else 0
        tb = self.tuple_bytes
        tuples = wire.unpack_bytes(self.schema, bytes(self.accepted[fed * tb : n * tb]))
        tuples.offset = fed
        if self._matcher is None:
            self._matcher = reference.Matcher(
                self.nfa, self.params, values=self.registers.schedule()
            )
        self._matcher.values = self.registers.schedule()
        records = self._matcher.feed(tuples).records(self.nfa, tuples)
        reported, self._fed, self.reported = self.reported, n, n
        return [r for r in records if r.seq >= reported]
