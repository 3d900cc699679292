"""The UART link's receive framing: frames from the UART's bytes, their tuple bytes into a
:class:`~nfacep.hdl.stream.PacketQueue`, committed only when the whole frame is good. The frame
format is :mod:`nfacep.links.uart.protocol`'s.

``UartRx ▸ Deframer ▸ PacketQueue ▸ TupleGatherer ▸`` engine

A UART byte takes at least 40 clock cycles (:func:`nfacep.hdl.uart.rx.divisor` is at least 4),
so the CRC goes one bit per cycle (:data:`~.crc.CRC`). Registers that are loaded before they
are used have no reset (``reset_less``): on iCE40 the domain's reset would cost a LUT in front
of each one that also has a reset or set of its own. Where a frame is, and what kind of frame
it is, are :mod:`amaranth.lib.enum` shapes (:class:`RxSection` and :class:`RxRequest`, one-hot,
one flip-flop per name), so the simulator's waveforms and the Verilog show their names.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import enum, stream, wiring
from amaranth.lib.wiring import In, Out

from nfacep.links.protocol import SWITCH_BYTES
from nfacep.links.uart.protocol import SYNC, FrameType

from .crc import CRC

__all__ = ["EVENTS", "Deframer", "RxRequest", "RxSection"]

#: The deframer's event pulses, as members of its ``events`` port.
EVENTS = (
    "accepted",
    "ack",
    "status",
    "reset",
    "bad_type",
    "bad_length",
    "bad_crc",
    "truncated",
    "out_of_seq",
    "overflow",
)


class RxSection(enum.IntEnum, shape=8):
    """Where in a frame the :class:`Deframer`'s next byte goes: one bit each (one-hot), none
    while it hunts for the sync word."""

    HUNT = 0
    SYNC1 = 1 << 0
    TYPE = 1 << 1
    LEN0 = 1 << 2
    LEN1 = 1 << 3
    SEQ = 1 << 4
    PAYLOAD = 1 << 5
    CRC0 = 1 << 6
    CRC1 = 1 << 7


class RxRequest(enum.IntEnum, shape=3):
    """The host's request the :class:`Deframer` receives (its frame's type): one bit each, none
    for RESET."""

    RESET = 0
    TUPLES = 1 << 0
    STATUS_REQ = 1 << 1
    PARAMS = 1 << 2


def _one_hot(value: Value, member: int) -> Value:
    """The bit of ``value`` that says it is ``member`` (a one-hot enum's member, not 0)."""
    return value[member.bit_length() - 1]


def _at_most(value: Value, limit: int) -> Value:
    """``value <= limit`` for a constant ``limit``, as plain logic (no carry chain)."""
    result = Const(1)
    for i in range(len(value)):  # from the LSB: is value[:i + 1] <= limit[:i + 1]?
        result = (~value[i] | result) if limit >> i & 1 else (~value[i] & result)
    return result


class _RxFrame:
    """The :class:`Deframer`'s registers for the frame being received, and the tests on them.

    (Registers that need no reset have none: the domain's reset would cost logic in front of
    them.)
    """

    def __init__(self, tuple_bytes: int, capacity: int):
        self.section = Signal(RxSection)  # where the next byte goes
        self.request = Signal(RxRequest, reset_less=True)  # from the type byte
        # the payload's length, then the bytes of it left (seq and tuples); at LEN1 its low
        # byte and the high byte on `i_stream` are the length field
        self.remaining = Signal(range(max(capacity + 2, 256)), reset_less=True)
        self.phase = Signal(range(tuple_bytes), reset_less=True)  # the byte's place in a tuple
        self.seq_ok = Signal(reset_less=True)  # the frame's seq is the one expected
        # (combinational) the byte on `i_stream` is a known type; the length field is one the
        # frame's type allows; the payload byte on `i_stream` is the last
        self.known = Signal()
        self.length_ok = Signal()
        self.last = Signal()

    def at(self, section: RxSection) -> Value:
        """The next byte goes to ``section``."""
        return _one_hot(self.section, section)

    def wants(self, request: RxRequest) -> Value:
        """The frame is a ``request``."""
        return _one_hot(self.request, request)


class Deframer(wiring.Component):
    """Parses host frames from a byte stream; puts the tuple bytes of TUPLES frames into a
    :class:`~nfacep.hdl.stream.PacketQueue` and commits them only when the whole frame is good.

    Throughput and backpressure: takes at most one byte in eight cycles. While a byte waits on
    ``i_stream`` its bits go through the CRC, one a cycle, MSB first; ``i_stream.ready`` rises
    in the eighth cycle (a UART byte takes longer than that).

    ``o_stream`` carries the payload bytes after ``seq`` of a TUPLES frame that is in sequence,
    combinationally, in the cycle each is taken from ``i_stream``; it does not wait: the buffer
    must always be ready, and raises ``overflow`` when one of them did not fit. One cycle after
    the frame's last byte is taken (the CRC register then holds its last bit) one of ``commit``
    or ``rollback`` pulses, with the frame's events. Errors and commands pulse the members of
    ``events`` (:data:`EVENTS`) for one cycle: at the end of the frame, or when the error is
    seen: ``bad_type`` when the type byte is taken, ``bad_length`` when the length is (or at the
    end, when the payload is no whole number of tuples), ``truncated`` when no byte came for
    ``timeout`` cycles inside a frame. After an error the deframer hunts for the next sync word.
    A frame pulses at most one of ``accepted`` and the errors (what :data:`DEFRAMED` counts), so
    they come one at a time, at most one in three bytes; ``ack`` and ``status`` come with the
    verdict they answer, ``reset`` with ``status``.

    ``tick`` (``tick_period`` > 1 only) pulses every ``tick_period`` cycles; the deframer then
    counts the timeout in those (a frame counts as truncated after ``timeout`` to
    ``timeout + 2 * tick_period`` cycles).

    With ``params_bytes`` (the bytes of the engine's packed runtime parameters; 0: none, and a
    PARAMS frame is a ``bad_type``), PARAMS frames: a payload of exactly ``seq``, the switch's
    tuple number and ``params_bytes`` bytes (else ``bad_length``), numbered with the TUPLES
    frames. Its bytes after ``seq`` are shifted into ``o_params.payload`` (little-endian: the
    tuple number in the low 48 bits, the values above), not into the buffer. At the verdict, a
    PARAMS frame in sequence is accepted (``accepted``, ``ack``, ``seq`` moves on, and
    ``o_params.valid`` rises from the next cycle until taken) if ``o_params`` is ready and not
    still offering the last switch; else it is an ``overflow`` (and ``ack``). ``o_params.ready``
    is the engine's ``i_params.ready``: low while a switch waits for its tuple.

    Members
    -------
    i_stream : ``In(stream.Signature(8))``
    o_stream : ``Out(stream.Signature(8))``
    commit, rollback : ``Out(1)``
    overflow : ``In(1)``
    next_seq : ``Out(8)``
        The ``seq`` of the TUPLES frame the deframer accepts next (RESET sets it to 0).
    events : ``Out(...)``
        One ``Out(1)`` pulse per name in :data:`EVENTS`.
    tick : ``In(1)``
        With ``tick_period`` > 1.
    o_params : ``Out(stream.Signature(8 * (6 + params_bytes)))``
        With ``params_bytes``: the switches of the PARAMS frames accepted.
    """

    def __init__(
        self,
        tuple_bytes: int,
        capacity: int,
        timeout: int,
        tick_period: int = 1,
        params_bytes: int = 0,
    ):
        if tuple_bytes < 1:
            raise ValueError("tuples must take at least one byte")
        if capacity < tuple_bytes or capacity & (capacity - 1):
            raise ValueError(
                f"the capacity must be a power of 2 that holds a tuple, not {capacity}"
            )
        self._tuple_bytes = tuple_bytes
        self._capacity = capacity
        self._tick_period = max(int(tick_period), 1)
        self._ticks = max(-(-int(timeout) // self._tick_period), 2)
        self._params_bytes = int(params_bytes)
        if self._params_bytes and SWITCH_BYTES + self._params_bytes > capacity:
            raise ValueError(
                f"a PARAMS frame of {self._params_bytes} bytes of values is "
                f"longer than the buffer ({capacity} bytes)"
            )
        members = {
            "i_stream": In(stream.Signature(8)),
            "o_stream": Out(stream.Signature(8)),
            "commit": Out(1),
            "rollback": Out(1),
            "overflow": In(1),
            "next_seq": Out(8),
            "events": Out(wiring.Signature({name: Out(1) for name in EVENTS})),
        }
        if self._tick_period > 1:
            members["tick"] = In(1)
        if self._params_bytes:
            members["o_params"] = Out(stream.Signature(8 * (SWITCH_BYTES + self._params_bytes)))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        frame = _RxFrame(self._tuple_bytes, self._capacity)
        got, bit = self._pace(m)
        crc = self._crc(m, frame, got, bit)
        timed_out = self._timeout(m, got)
        self._tests(m, frame)
        self._sections(m, frame, got, timed_out)
        self._header(m, frame, got)
        self._payload(m, frame, got)
        self._verdict(m, frame, got, crc)
        return m

    def _pace(self, m):
        """A byte is taken in the eighth cycle it waits on ``i_stream``; returns that pulse
        (``got``) and the count of the byte's cycles, which is the bit the CRC takes."""
        got = Signal()
        bit = Signal(3)
        m.d.comb += [
            self.i_stream.ready.eq(bit == 7),
            got.eq(self.i_stream.valid & self.i_stream.ready),
        ]
        with m.If(self.i_stream.valid):
            m.d.sync += bit.eq(bit + 1)
        return got, bit

    def _crc(self, m, frame, got, bit):
        """Every byte goes through the CRC, one bit a cycle, MSB first (those of the sync word
        too); it starts afresh when SYNC1's byte is taken."""
        m.submodules.crc = crc = CRC.create()
        restart = frame.at(RxSection.SYNC1) & got
        m.d.comb += [
            crc.start.eq(restart),
            crc.valid.eq(self.i_stream.valid & ~restart),
            crc.data.eq(self.i_stream.payload.bit_select(~bit, 1)),
        ]
        return crc

    def _timeout(self, m, got):
        """``timed_out`` pulses when no byte came for the timeout: ``ticks`` whole ticks after
        the last byte (inside a frame or not)."""
        tick = self.tick if self._tick_period > 1 else Const(1)
        quiet = Signal(range(self._ticks + 2), reset_less=True)  # ticks without a byte
        timed_out = Signal()
        m.d.comb += timed_out.eq(~got & (quiet == self._ticks + (self._tick_period > 1)))
        with m.If(got):
            m.d.sync += quiet.eq(0)
        with m.Elif(tick & ~timed_out):
            m.d.sync += quiet.eq(quiet + 1)
        return timed_out

    def _tests(self, m, frame):
        """The tests on the byte waiting on ``i_stream``: a known type (at TYPE), a length the
        frame's type allows (at LEN1: a command has none, TUPLES has ``seq`` and at least one
        tuple, at most the buffer, PARAMS exactly ``seq``, the tuple number and the values),
        the last payload byte."""
        byte = self.i_stream.payload
        length = Cat(frame.remaining[:8], byte)
        tb, cap = self._tuple_bytes, self._capacity
        known = (
            (byte == FrameType.TUPLES) | (byte == FrameType.STATUS_REQ) | (byte == FrameType.RESET)
        )
        allowed = Mux(
            frame.wants(RxRequest.TUPLES),
            ~_at_most(length, tb) & _at_most(length, 1 + cap),
            length == 0,
        )
        if self._params_bytes:
            known |= byte == FrameType.PARAMS
            allowed = Mux(
                frame.wants(RxRequest.PARAMS),
                length == 1 + SWITCH_BYTES + self._params_bytes,
                allowed,
            )
        m.d.comb += [
            frame.known.eq(known),
            frame.length_ok.eq(allowed),
            frame.last.eq(frame.remaining == 1),
        ]

    def _sections(self, m, frame, got, timed_out):
        """Where the next byte goes: each byte taken moves the section on; a bad one sends the
        deframer back to hunting for the sync word, and so does the timeout inside a frame
        (``truncated``)."""
        at, byte = frame.at, self.i_stream.payload
        # a frame with `seq` and a payload
        tuples = frame.wants(RxRequest.TUPLES) | frame.wants(RxRequest.PARAMS)
        hunting = frame.section == RxSection.HUNT
        following = {
            RxSection.SYNC1: (hunting | at(RxSection.SYNC1)) & (byte == SYNC[0]),
            RxSection.TYPE: at(RxSection.SYNC1) & (byte == SYNC[1]),
            RxSection.LEN0: at(RxSection.TYPE) & frame.known,
            RxSection.LEN1: at(RxSection.LEN0),
            RxSection.SEQ: at(RxSection.LEN1) & tuples & frame.length_ok,
            RxSection.PAYLOAD: at(RxSection.SEQ) | (at(RxSection.PAYLOAD) & ~frame.last),
            RxSection.CRC0: (at(RxSection.LEN1) & ~tuples & frame.length_ok)
            | (at(RxSection.PAYLOAD) & frame.last),
            RxSection.CRC1: at(RxSection.CRC0),
        }
        with m.If(got):
            m.d.sync += [
                _one_hot(frame.section, section).eq(value) for section, value in following.items()
            ]
        in_frame = Cat(
            *(
                at(section)
                for section in RxSection
                if section not in (RxSection.HUNT, RxSection.SYNC1)
            )
        ).any()
        with m.Elif(timed_out & in_frame):
            m.d.sync += frame.section.eq(RxSection.HUNT)
            m.d.comb += [self.events.truncated.eq(1), self.rollback.eq(1)]

    def _header(self, m, frame, got):
        """The type and the length: kept for the rest of the frame; a bad one is an error at
        once."""
        byte = self.i_stream.payload
        with m.If(got & frame.at(RxSection.TYPE)):
            m.d.sync += [
                frame.wants(RxRequest.TUPLES).eq(byte == FrameType.TUPLES),
                frame.wants(RxRequest.STATUS_REQ).eq(byte == FrameType.STATUS_REQ),
                frame.wants(RxRequest.PARAMS).eq(byte == FrameType.PARAMS),
            ]
            with m.If(~frame.known):
                m.d.comb += [self.events.bad_type.eq(1), self.rollback.eq(1)]
        with m.If(got & frame.at(RxSection.LEN0)):
            m.d.sync += frame.remaining.eq(byte)
        with m.If(got & frame.at(RxSection.LEN1)):
            m.d.sync += frame.remaining[8:].eq(byte)
            with m.If(~frame.length_ok):
                m.d.comb += [self.events.bad_length.eq(1), self.rollback.eq(1)]

    def _payload(self, m, frame, got):
        """``seq``, then the tuple bytes: to ``o_stream`` when ``seq`` is the one expected; a
        PARAMS frame's into ``o_params``'s shift register."""
        byte = self.i_stream.payload
        tb = self._tuple_bytes
        m.d.comb += self.o_stream.payload.eq(byte)
        with m.If(got & frame.at(RxSection.SEQ)):
            m.d.sync += [frame.seq_ok.eq(byte == self.next_seq), frame.phase.eq(0)]
        with m.If(got & (frame.at(RxSection.SEQ) | frame.at(RxSection.PAYLOAD))):
            m.d.sync += frame.remaining.eq(frame.remaining - 1)
        with m.If(got & frame.at(RxSection.PAYLOAD)):
            m.d.comb += self.o_stream.valid.eq(frame.seq_ok & frame.wants(RxRequest.TUPLES))
            m.d.sync += frame.phase.eq(Mux(frame.phase == tb - 1, 0, frame.phase + 1))
        if self._params_bytes:
            shreg = self.o_params.payload
            with m.If(got & frame.at(RxSection.PAYLOAD) & frame.wants(RxRequest.PARAMS)):
                m.d.sync += shreg.eq(Cat(shreg[8:], byte))
            with m.If(self.o_params.ready):  # (before the verdict, which may set it again)
                m.d.sync += self.o_params.valid.eq(0)

    def _verdict(self, m, frame, got, crc):
        """The cycle after the frame's last byte, when the CRC has taken its last bit: commit
        or roll back, and the frame's events.

        Nothing else happens in that cycle: no byte is taken (the next one is seven cycles
        away), the deframer hunts (no timeout, no header error), and what the verdict reads
        (the request, ``phase``, ``seq_ok``, ``overflow``) last changed with a byte before.
        """
        ev = self.events
        ending = Signal()  # the frame's last byte was taken in the last cycle
        m.d.sync += ending.eq(got & frame.at(RxSection.CRC1))
        with m.If(ending):
            with m.If(~crc.match_detected):
                m.d.comb += [ev.bad_crc.eq(1), self.rollback.eq(1)]
            with m.Elif(frame.wants(RxRequest.TUPLES)):
                with m.If(frame.phase != 0):
                    m.d.comb += [ev.bad_length.eq(1), self.rollback.eq(1)]
                with m.Elif(~frame.seq_ok):
                    m.d.comb += [ev.out_of_seq.eq(1), ev.ack.eq(1), self.rollback.eq(1)]
                with m.Elif(self.overflow):
                    m.d.comb += [ev.overflow.eq(1), ev.ack.eq(1), self.rollback.eq(1)]
                with m.Else():
                    m.d.comb += [self.commit.eq(1), ev.accepted.eq(1), ev.ack.eq(1)]
                    m.d.sync += self.next_seq.eq(self.next_seq + 1)
            with m.Elif(frame.wants(RxRequest.STATUS_REQ)):
                m.d.comb += ev.status.eq(1)
            with m.Elif(frame.wants(RxRequest.PARAMS)):
                self._switch(m, frame)
            with m.Else():
                m.d.comb += [ev.reset.eq(1), ev.status.eq(1), self.rollback.eq(1)]
                m.d.sync += self.next_seq.eq(0)

    def _switch(self, m, frame):
        """The verdict on a PARAMS frame with a good CRC: accepted when in sequence and the
        engine takes a switch (``o_params`` ready and not offering one), else ``out_of_seq``
        or ``overflow``; acknowledged either way. (Nothing of it is in the buffer: it rolls
        back nothing.)"""
        ev = self.events
        if not self._params_bytes:  # (never: the type is unknown)
            return
        with m.If(~frame.seq_ok):
            m.d.comb += [ev.out_of_seq.eq(1), ev.ack.eq(1)]
        with m.Elif(self.o_params.valid | ~self.o_params.ready):
            m.d.comb += [ev.overflow.eq(1), ev.ack.eq(1)]
        with m.Else():
            m.d.comb += [ev.accepted.eq(1), ev.ack.eq(1)]
            m.d.sync += [self.next_seq.eq(self.next_seq + 1), self.o_params.valid.eq(1)]
