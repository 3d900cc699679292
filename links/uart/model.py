"""A software board: the UART link's protocol with the reference matcher as the engine.

:class:`UartBoardModel` answers host frames as the gateware does (same frames, same acceptance
rules, same counters), with the engine of :class:`nfacep.links.model.BoardModel` (the reference
matcher), so the host (:mod:`nfacep.links.uart.host`) can be tested without hardware.
:func:`serve` runs one on a file descriptor (a pty's master side) in a thread.
"""

from __future__ import annotations

import os
import random
import select
import threading

from nfacep.params import EngineParams
from nfacep.settings import ParamValues

from ..model import BoardModel
from ..protocol import SWITCH_BYTES, encode_fields, engine_fields
from .protocol import (
    ACK_FIELDS,
    VERSION,
    FrameReader,
    FrameType,
    encode,
    encode_status,
)

__all__ = ["UartBoardModel", "serve"]


class UartBoardModel(BoardModel):
    """The board's side of the UART link, in software.

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
        super().__init__(
            nfa, params, capacity=capacity, engine_id_override=engine_id_override, values=values
        )
        self.values = self.registers.values
        self.values_bytes = self.registers.nbytes
        kinds = [FrameType.TUPLES, FrameType.STATUS_REQ, FrameType.RESET]
        if self.values:
            kinds.append(FrameType.PARAMS)
        self.reader = FrameReader(kinds, max_payload=1 + capacity)
        self.consume = True
        self.reset()

    def reset(self) -> None:
        super().reset()
        self.buffered = bytearray()  # accepted, not yet taken (consume=False)
        self.next_seq = 0
        self.records_sent = 0
        self.frames = 0
        self.matched = 0
        self.drops = 0
        self.counters = {"bad_length": 0, "out_of_seq": 0, "overflow": 0}
        self._base_errors = dict(self.reader.errors)

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
            **engine_fields(self.params),
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
        out = bytearray()
        for r in self.new_records():
            out += encode(FrameType.RECORD, self.record_format.encode_bytes(r))
            self.records_sent += 1
            self.matched += r.matches != 0
            self.drops += r.dropped
        return bytes(out)


def serve(
    model: UartBoardModel,
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
