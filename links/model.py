"""What the software boards of every link share: the engine, in software.

A link's software board (:class:`nfacep.links.uart.model.UartBoardModel`,
:class:`nfacep.links.udp.model.UdpBoardModel`) answers a host as the gateware does, with the
reference matcher (:func:`nfacep.reference.matcher.run`) standing in for the engine, so a host
can be tested without hardware. :class:`BoardModel` is that engine: the tuples it took, the
records they produced, its runtime parameter registers (:class:`ParamRegisters`); each link's
model adds its framing, its counters and its STATUS.
"""

from __future__ import annotations

import numpy as np

from nfacep import wire
from nfacep.params import EngineParams
from nfacep.reference import matcher as reference
from nfacep.settings import ParamValues

from .protocol import SWITCH_BYTES, engine_id, params_bytes

__all__ = ["BoardModel", "ImageEngine", "ParamRegisters"]


class ParamRegisters:
    """The engine's runtime parameter registers in software, for the software boards of both
    links: the values it was built with (``values``, required when ``nfa`` has parameters;
    None without), the switches written since RESET (``switches``: first tuple and values).
    As the engine: a switch waits for its tuple (or applies from the next tuple taken if that
    one has passed), and the engine holds one waiting switch."""

    def __init__(self, nfa, values: ParamValues | None, *, enabled: bool = True):
        types = nfa.program.parameters if enabled else {}
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

    With ``params.engine == "programmable"`` the engine is an :class:`ImageEngine` (loaded
    through :meth:`ImageEngine.load`; no runtime parameters: an image holds their values).

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
        programmable = params.engine == "programmable"
        #: the programmable engine in software (None: the fixed engine, the reference matcher)
        self.images = ImageEngine(nfa, params, values) if programmable else None
        self.record_format = wire.record_format(nfa, slots=params.queries if programmable else None)
        self.record_bytes = self.record_format.nbytes
        self.capacity = capacity
        self.id = engine_id(nfa, params) if engine_id_override is None else engine_id_override
        self.registers = ParamRegisters(nfa, values, enabled=not programmable)

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
        if self.images is not None:
            self.images.reset()

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
        if self.images is not None:
            tb = self.tuple_bytes
            piece = wire.unpack_bytes(self.schema, bytes(self.accepted[self.reported * tb :]))
            self.reported = n
            return self.images.run(piece)
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


class ImageEngine:
    """The programmable engine (:class:`nfacep.hdl.programmable.ProgrammableEngine`) in
    software, for the software boards: it takes loads (:func:`nfacep.image.load`) a byte
    string at a time, checks each whole one as the engine does (the engine's fingerprint, the
    length, the CRC-32; else ``refused``), and puts it in force from its tuple (or the next
    tuple taken, when that one has passed; after the load before it), clearing every
    partition's states (a load identical to the last one taken, the same image and tuple
    number, is not applied again); it runs the configuration in force over the tuples it takes, the
    partition store (keys, drops, timers) being the reference matcher's. The configuration
    (and the image in force) survives :meth:`reset`, as the engine's does the UDP link's RESET.

    ``nfa``: a file of the engine's stream declaration and partition key (its queries are not
    used; with runtime parameters, some ``values`` of them, which change nothing);
    ``params``: the engine's, ``params.engine == "programmable"``; ``capacity``: its capacity
    when not ``params``' (:meth:`~nfacep.image.Capacity.of`), e.g. other timed slots.
    """

    def __init__(
        self, nfa, params: EngineParams, values: ParamValues | None = None, *, capacity=None
    ):
        from nfacep.image import Capacity, EngineShape

        program = nfa.program
        self.nfa, self.params, self.values = nfa, params, values
        capacity = capacity or Capacity.of(params)
        self.shape = EngineShape(program.schema, program.partition_fields, capacity)
        self.record_format = wire.record_format(nfa, slots=params.queries)
        self.image = None  #: the configuration in force (an Image), None before the first
        self.named = 0  #: the fingerprint of the image in force, as the load named it
        self.refused = 0
        #: the loads waiting: (the tuple from which, Image, fingerprint, the load's tuple number)
        self.loads: list[tuple[int, object, int, int]] = []
        #: the last load taken: (fingerprint, tuple number); one identical to it is not applied
        #: again (a loader's repeat when an answer was lost); it survives RESET
        self.last: tuple[int, int] | None = None
        self.reset()

    def reset(self) -> None:
        """A RESET: no tuples taken, the partitions and ``refused`` cleared; the configuration
        stays, and a load waiting for its tuple waits for that tuple number again."""
        from nfacep.reference.matcher import Matcher

        self.taken = 0
        self.refused = 0
        #: the first tuple the image in force judged (0 after a RESET: all of them since)
        self.since = 0
        self.store = Matcher(self.nfa, self.params, values=self.values)  # (its keys only)
        #: each partition's states, run starts (by timed slot) and last ORDER BY value
        self.states: dict[int, tuple[int, dict[int, int], int]] = {}
        self.loads = [(at, img, named, at) for _, img, named, at in self.loads[:1]]

    def load(self, data: bytes) -> bool:
        """A whole load (its bytes up to the one with ``last``); False when refused."""
        import zlib

        from nfacep.image import AT_BYTES, Image, load_size

        prints = len(self.shape.fingerprint)
        body = data[AT_BYTES + prints + 8 : -4]
        if (
            len(data) != load_size(self.shape)
            or data[AT_BYTES : AT_BYTES + prints] != self.shape.fingerprint
            or zlib.crc32(data[:-4]).to_bytes(4, "little") != data[-4:]
        ):
            self.refused += 1
            return False
        at = int.from_bytes(data[:AT_BYTES], "little")
        since = self.loads[-1][0] if self.loads else self.taken
        due = (at - since) % 2**32
        start = since + (due if due < 2**31 else 0)
        named = int.from_bytes(data[AT_BYTES + prints : AT_BYTES + prints + 8], "little")
        if self.last == (named, at):
            return True  # (taken before: not applied twice)
        self.last = (named, at)
        self.loads.append((start, Image.from_body(self.shape, body), named, at))
        return True

    def settle(self) -> None:
        """Put in force the loads due at the tuple count (the engine does not wait for a
        tuple to do so)."""
        while self.loads and self.loads[0][0] <= self.taken:
            _, self.image, self.named, _ = self.loads.pop(0)
            self.since = self.taken
            self.states = {}  # a new epoch: every partition's states read as empty

    def run(self, tuples) -> list[wire.Record]:
        """The records of ``tuples``, the next ones taken."""
        codes, admitted, fresh = self.store._admit(tuples, self.taken, False)
        raw = (
            wire.key_raw(self.nfa.program.key, tuples)
            if self.nfa.program.key.names
            else np.zeros(tuples.n, dtype=np.uint64)
        )
        operands = self._operands(tuples)
        out = []
        for i in range(tuples.n):
            seq = self.taken
            self.settle()
            self.taken += 1
            if not admitted[i]:
                out.append(wire.Record(seq, int(raw[i]), 0, 1))
                continue
            code = int(codes[i])
            state = (0, {}, 0) if fresh[i] else self.states.get(code, (0, {}, 0))
            state, matches = self._step(state, [column[i] for column in operands])
            self.states[code] = state
            if matches:
                out.append(wire.Record(seq, int(raw[i]), matches, 0))
        return out

    def _operands(self, tuples) -> list[list[int | None]]:
        """Each field's values as an atom sees them (a FLOAT32's order key, None for NaN)."""
        from nfacep.lang.values import float32_key

        out = []
        floats = self.shape.floats
        for i, name in enumerate(self.shape.operands):
            column = tuples.columns[name]
            if i in floats:
                out.append([float32_key(float(v)) for v in column])
            else:
                out.append([int(v) for v in column])
        return out

    def _step(self, entry: tuple, values: list[int | None]) -> tuple[tuple, int]:
        """The configured NFA step of one partition (its states, the start of the run in each
        timed slot, the last tuple's ORDER BY value): its next entry and the match bits."""
        img = self.image
        if img is None:
            return (0, {}, 0), 0
        state, began, last = entry
        atoms = [atom.holds(values) for atom in img.atoms]
        timed = self.shape.capacity.timed
        now = values[img.order] if timed else 0
        assert now is not None, "an ORDER BY field is an integer"
        nxt, starts = 0, {}
        for i, s in enumerate(img.states):
            k = sum(atoms[a] << j for j, a in enumerate(s.atoms) if a < len(atoms))
            window = img.windows[s.query] if 0 <= s.query < len(img.windows) else 0
            if i < timed and window:  # WITHIN: reached by a run less than the window old
                runs = [
                    began[j]
                    for j in range(timed)
                    if s.activation >> j & 1
                    and state >> j & 1
                    and 0 <= now - last < window
                    and now - began[j] < window
                ]
                reached = s.start or bool(runs)
                starts[i] = now if s.start else max(runs, default=0)
            else:
                reached = s.start or bool(s.activation & state)
            if s.table >> k & 1 and reached:
                nxt |= 1 << i
        matches, clear = 0, 0
        for i, s in enumerate(img.states):
            if s.query >= 0 and nxt >> i & 1 and s.accept:
                matches |= 1 << s.query
        for i, s in enumerate(img.states):
            if s.query >= 0 and matches >> s.query & 1 and img.skip[s.query]:
                clear |= 1 << i
        return (nxt & ~clear, starts, now), matches
