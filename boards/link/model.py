"""A software board: the UART link's protocol with the reference matcher as the engine.

:class:`BoardModel` answers host frames as the gateware does (same frames, same acceptance
rules, same counters), with the reference matcher (:func:`nfacep.reference.matcher.run`) standing in
for the engine, so the host (:mod:`nfacep.boards.host`) can be tested without hardware.
:func:`serve` runs one on a file descriptor (a pty's master side) in a thread.
"""

from __future__ import annotations

import os
import random
import select
import threading

from nfacep import wire
from nfacep.params import EngineParams
from nfacep.reference import matcher as reference
from nfacep.settings import ParamValues

from .protocol import (
    ACK_FIELDS,
    SWITCH_BYTES,
    VERSION,
    FrameReader,
    FrameType,
    encode,
    encode_fields,
    encode_status,
    engine_id,
    params_bytes,
)

__all__ = ["BoardModel", "ParamRegisters", "serve"]


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
        """Take the switch ``body`` (:func:`~.protocol.switch_body`, of the right length) after
        ``taken`` tuples; False if one is pending."""
        if self.pending(taken):
            return False
        seq = int.from_bytes(body[:SWITCH_BYTES], "little")
        packed = int.from_bytes(body[SWITCH_BYTES:], "little") & ((1 << self.values.width()) - 1)
        self.switches.append((max(seq, taken), self.values.unpacked(packed)))
        return True


class BoardModel:
    """The board's side of the link, in software.

    ``feed(data)`` takes bytes from the host and returns the bytes the board sends back. The
    engine is infinitely fast: accepted tuples are matched at once. ``capacity`` is the tuple
    buffer's size in bytes, as on the board; it only bounds frames, since the model never
    fills up unless ``consume`` is False: then tuples stay buffered until the next STATUS_REQ
    (an engine slower than the link, so the host must wait for room).
    ``engine_id`` overrides the fingerprint it reports (to model a board with another engine).

    With runtime parameters, ``values`` are the ones the board was built with (its values after
    RESET; required then); PARAMS frames switch them as the engine does: a
    switch waits for its tuple (or applies to the next tuple taken if that one has passed),
    and one that comes while another waits is an ``overflow``.
    """

    def __init__(
        self,
        nfa,
        params: EngineParams,
        *,
        capacity: int = 512,
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
        self.values = self.registers.values
        self.values_bytes = self.registers.nbytes
        kinds = [FrameType.TUPLES, FrameType.STATUS_REQ, FrameType.RESET]
        if self.values:
            kinds.append(FrameType.PARAMS)
        self.reader = FrameReader(kinds, max_payload=1 + capacity)
        self.consume = True
        self.reset()

    def reset(self) -> None:
        self.accepted = bytearray()  # tuple bytes the engine took
        self.buffered = bytearray()  # accepted, not yet taken (consume=False)
        self.next_seq = 0
        self.records_sent = 0
        self.frames = 0
        self.matched = 0
        self.drops = 0
        self.reported = 0  # tuples whose records were sent
        self.counters = {"bad_length": 0, "out_of_seq": 0, "overflow": 0}
        self._base_errors = dict(self.reader.errors)
        self.registers.reset()

    @property
    def switches(self) -> list[tuple[int, dict]]:
        """The switches written since RESET: (first tuple, values)."""
        return self.registers.switches

    def taken(self) -> int:
        """Tuples the engine took."""
        return len(self.accepted) // self.tuple_bytes

    def status(self) -> dict:
        errors = {k: v - self._base_errors.get(k, 0) for k, v in self.reader.errors.items()}
        return {
            "values": self.registers.in_force(self.taken()),
            "version": VERSION,
            "flags": 1 if not self.buffered else 0,
            "next_seq": self.next_seq,
            "engine_id": self.id,
            "tuple_bytes": self.tuple_bytes,
            "record_bytes": self.record_bytes,
            "capacity": self.capacity,
            "tuples": len(self.accepted) // self.tuple_bytes,
            "matched": self.matched,
            "drops": self.drops,
            "records": self.records_sent,
            "frames": self.frames,
            "truncated": 0,
            "uart_errors": 0,
            "bad_type": errors["bad_type"],
            "bad_crc": errors["bad_crc"],
            "bad_length": errors["bad_length"] + self.counters["bad_length"],
            "out_of_seq": self.counters["out_of_seq"],
            "overflow": self.counters["overflow"],
        }

    def feed(self, data: bytes) -> bytes:
        out = bytearray()
        for frame in self.reader.feed(data):
            if frame.type == FrameType.RESET:
                self.reset()
                out += self._status()
            elif frame.type == FrameType.STATUS_REQ:
                if not self.consume:
                    out += self.drain()  # a slow engine: it takes tuples between polls
                out += self._status()
            elif frame.type == FrameType.TUPLES:
                out += self._tuples(frame.payload)
            elif frame.type == FrameType.PARAMS:
                out += self.params_frame(frame.payload)
        return bytes(out)

    def _status(self) -> bytes:
        return encode(FrameType.STATUS, encode_status(self.status(), self.values_bytes))

    def ack(self) -> bytes:
        """The ACK frame the board answers a TUPLES or PARAMS frame with."""
        ack = {"next_seq": self.next_seq, "tuples": self.taken()}
        return encode(FrameType.ACK, encode_fields(ACK_FIELDS, ack))

    def params_frame(self, payload: bytes) -> bytes:
        """A PARAMS frame's payload: take the switch or count why not; the ACK."""
        if len(payload) != 1 + SWITCH_BYTES + self.values_bytes:
            self.counters["bad_length"] += 1
            return b""
        if payload[0] != self.next_seq:
            self.counters["out_of_seq"] += 1
        elif not self.registers.write(payload[1:], self.taken()):
            self.counters["overflow"] += 1
        else:
            self.next_seq = (self.next_seq + 1) % 256
            self.frames += 1
        return self.ack()

    def _tuples(self, payload: bytes) -> bytes:
        body = payload[1:]
        if not body or len(body) % self.tuple_bytes:
            self.counters["bad_length"] += 1
            return b""
        if payload[0] != self.next_seq:
            self.counters["out_of_seq"] += 1
        elif len(body) > self.capacity - len(self.buffered):
            self.counters["overflow"] += 1
        else:
            self.next_seq = (self.next_seq + 1) % 256
            self.frames += 1
            self.buffered += body
        out = bytearray()
        if self.consume:
            out += self.drain()
        return self.ack() + bytes(out)

    def drain(self) -> bytes:
        """Let the engine take every buffered tuple; the RECORD frames that produces."""
        self.accepted += self.buffered
        self.buffered = bytearray()
        n = len(self.accepted) // self.tuple_bytes
        if n == self.reported:
            return b""
        tuples = wire.unpack_bytes(self.schema, bytes(self.accepted))
        records = reference.run(
            self.nfa, tuples, self.params, values=self.registers.schedule()
        ).records(self.nfa, tuples)
        out = bytearray()
        for r in records:
            if r.seq < self.reported:
                continue
            out += encode(FrameType.RECORD, self.record_format.encode_bytes(r))
            self.records_sent += 1
            self.matched += r.matches != 0
            self.drops += r.dropped
        self.reported = n
        return bytes(out)


def serve(
    model: BoardModel,
    fd: int,
    *,
    stop: threading.Event,
    lose: float = 0.0,
    corrupt: float = 0.0,
    seed: int = 0,
) -> threading.Thread:
    """Answer host frames arriving on ``fd`` (e.g. a pty's master) in a daemon thread until
    ``stop`` is set. ``lose`` and ``corrupt`` are the chances that a byte from the host is
    lost or has a bit flipped on the way (a bad link)."""
    rng = random.Random(seed)

    def loop():
        while not stop.is_set():
            ready, _, _ = select.select([fd], [], [], 0.02)
            if not ready:
                continue
            try:
                data = os.read(fd, 4096)
            except OSError:
                return
            if lose or corrupt:
                noisy = bytearray()
                for b in data:
                    if rng.random() < lose:
                        continue
                    if rng.random() < corrupt:
                        b ^= 1 << rng.randrange(8)
                    noisy.append(b)
                data = bytes(noisy)
            reply = model.feed(data)
            while reply:
                try:
                    n = os.write(fd, reply)
                except OSError:
                    return
                reply = reply[n:]

    thread = threading.Thread(target=loop, daemon=True, name="nfacep-board-model")
    thread.start()
    return thread
