"""The UART link's transmit framing: records, ACKs and STATUS as frames, sent on the UART line
by the :class:`Framer` itself, and the STATUS counters (kept by its base
:class:`~nfacep.hdl.uart.status.StatusCounters`). The frame format is
:mod:`nfacep.links.uart.protocol`'s.

engine ``▸ Framer ▸`` tx

The framer is built for a small FPGA (the link and a small engine fit an iCE40 HX1K): a UART
byte takes at least 40 clock cycles, so the CRC goes one bit per cycle (:data:`~.crc.CRC`), and
the counters and STATUS's constants live in block RAM instead of flip-flops. Registers that
are loaded before they are used have no reset (``reset_less``). What kind of frame it sends and
where in it it is are :mod:`amaranth.lib.enum` shapes (:class:`TxKind`, :class:`TxSection`).
"""

from __future__ import annotations

from amaranth.hdl import Array, Const, Module, Mux, Signal, Value
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from nfacep.links.protocol import ENGINE_FIELDS, encode_fields
from nfacep.links.uart.protocol import ACK_FIELDS, STATUS_FIELDS, SYNC, FrameType

from .crc import CRC
from .status import (
    _ACK_AT,
    _STATUS_AT,
    _STATUS_BYTES,
    COUNTED,
    StatusCounters,
    _Snapshot,
)

__all__ = ["Framer", "TxKind", "TxSection"]


class TxKind(enum.IntEnum, shape=2):
    """The frame the :class:`Framer` sends."""

    STATUS = 0
    ACK = 1
    RECORD = 2


class TxSection(enum.IntEnum, shape=3):
    """The part of a frame the :class:`Framer` sends, in order."""

    SYNC0 = 0
    SYNC1 = 1
    TYPE = 2
    LEN0 = 3
    LEN1 = 4
    PAYLOAD = 5
    CRC0 = 6
    CRC1 = 7


class _TxFrame:
    """The :class:`Framer`'s registers for the frame being sent. (None needs a reset: the
    domain's reset would cost logic in front of them.)"""

    def __init__(self, record_bytes: int, divisor: int, status_bytes: int = _STATUS_BYTES):
        self.kind = Signal(TxKind, reset_less=True)
        self.section = Signal(TxSection, reset_less=True)
        # the payload byte: its offset in STATUS for STATUS and ACK (whose bytes are STATUS's
        # `next_seq` and `tuples`), in the record for RECORD
        self.index = Signal(range(max(status_bytes, record_bytes)), reset_less=True)
        self.last = Signal()  # (combinational) `index` is the frame's last payload byte
        self.done = Signal(reset_less=True)  # the payload byte being sent is the last one
        self.byte = Signal(8, reset_less=True)  # the byte being sent
        self.bit = Signal(range(10), reset_less=True)  # CRC steps, then UART bits
        self.timer = Signal(range(divisor), reset_less=True)  # cycles left of the UART bit
        self.idle = Signal(reset_less=True)  # STATUS's `flags`, taken at the frame's start
        # requests that wait for their frame
        self.want_ack = Signal()
        self.want_status = Signal()


class Framer(StatusCounters, wiring.Component):
    """Turns records, ACKs and STATUS into frames sent on ``tx`` (a UART transmitter: 8 data
    bits, no parity, 1 stop bit, ``divisor`` cycles a bit), and keeps the STATUS counters
    (:data:`COUNTERS`).

    Order and backpressure: ``send_ack`` and ``send_status`` pulses are remembered until their
    frame starts; between frames STATUS goes first, then ACK, then a record from ``i_stream``.
    A record is read from ``i_stream`` while its frame goes out and taken with its last payload
    byte (the stream holds it meanwhile); ``busy_record`` is high from the frame's start to its
    end. Throughput is the line's: each byte takes ``10 * divisor`` cycles on ``tx``, after a
    cycle that loads it and, for the type, length and payload bytes, eight cycles of CRC (one
    bit a cycle) before its start bit; ``sent`` pulses at the end of each stop bit. A frame
    follows the last one a cycle or two after its stop bit.

    The counters count ``records`` (records taken), ``matched`` and ``drops`` (those with a
    match, those dropped: ``record_layout`` has the engine's ``matches`` and ``dropped``) and
    the pulses on ``count`` (one member per name in :data:`COUNTED`); ``clear`` zeroes them all
    (RESET: the STATUS asked for with it reports the zeros; pulses in the same cycle count after
    it). They live in block RAM: ``live`` takes every count and ``shown``, which also holds the
    constant fields of STATUS, is what STATUS and ACK send. The counters' bytes are swept round,
    one a cycle (34 cycles a sweep): each is read from ``live`` and written back to both, plus
    the pulses that came since its counter's last turn. So a count shows within a sweep or two,
    and ``count.tuples`` may pulse at most every other cycle, ``count.uart_errors`` at most once
    a sweep, and the deframer's members (:data:`DEFRAMED`) one at a time, at most once a sweep
    (the UART receiver pulses at most once a byte, the deframer once in three bytes).

    A STATUS or ACK frame starts only when ``shown`` is whole (no counter half updated) and
    RECORD frames sent are counted, and ``shown`` keeps its values until the frame ends: every
    counter is read whole, as of the frame's start (give or take the pulses of the last
    sweep). ``flags`` (``idle``, and no pulse waiting) is taken at the start too; ``next_seq``
    when its byte goes out (a TUPLES frame is longer than the few bytes in between).

    Parameters
    ----------
    record_layout : :class:`~amaranth.lib.data.StructLayout`
        The engine's records.
    constants : :class:`dict`
        The constant STATUS fields (``version``, ``engine_id``, ``tuple_bytes``,
        ``record_bytes``, ``capacity``); missing ones are 0.
    params_bits : :class:`int`
        Bits of the engine's runtime parameters' values (0: none). STATUS then ends with
        ``params``, padded to whole bytes, little-endian, as it was when the frame started.

    Members
    -------
    i_stream : ``In(stream.Signature(record_layout))``
    send_ack, send_status, clear : ``In(1)``
    count : ``In(...)``
        One ``In(1)`` pulse per name in :data:`COUNTED`.
    idle : ``In(1)``
        Reported in STATUS's ``flags`` (bit 0).
    next_seq : ``In(8)``
    tx : ``Out(1)``
    sent, busy_record : ``Out(1)``
    params : ``In(params_bits)``
        With ``params_bits``: the values in force (the engine's ``param_values``).
    """

    def __init__(
        self,
        record_layout: data.StructLayout,
        constants: dict | None = None,
        *,
        divisor: int,
        params_bits: int = 0,
    ):
        if divisor < 1:
            raise ValueError(f"divisor must be at least 1, not {divisor}")
        self._divisor = divisor
        self._record_layout = record_layout
        self._record_bytes = (record_layout.size + 7) // 8
        if self._record_bytes > 255:
            raise ValueError(
                f"a record of {self._record_bytes} bytes is too long for the framer (at most 255)"
            )
        constants = dict(constants or {})
        unknown = set(constants) - {
            "version",
            "engine_id",
            "tuple_bytes",
            "record_bytes",
            "capacity",
            "reserved",
            *(name for name, _ in ENGINE_FIELDS),
        }
        if unknown:
            raise ValueError(f"not constant STATUS fields: {', '.join(sorted(unknown))}")
        self._image = encode_fields(STATUS_FIELDS, constants)
        self._params_bits = int(params_bits)
        self._status_bytes = _STATUS_BYTES + (self._params_bits + 7) // 8
        if self._status_bytes > 255:
            raise ValueError(
                f"runtime parameters of {self._params_bits} bits are too many for "
                "STATUS (at most 207 bytes)"
            )
        members = {
            "i_stream": In(stream.Signature(record_layout)),
            "send_ack": In(1),
            "send_status": In(1),
            "clear": In(1),
            "count": In(wiring.Signature({name: Out(1) for name in COUNTED})),
            "idle": In(1),
            "next_seq": In(8),
            "tx": Out(1, init=1),
            "sent": Out(1),
            "busy_record": Out(1),
        }
        if self._params_bits:
            members["params"] = In(self._params_bits)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        snapshot = _Snapshot()
        shown = self._counters(m, snapshot)
        self._frames(m, snapshot, shown)
        return m

    def _frames(self, m, snapshot, shown):
        """The frames, byte after byte: a byte is loaded, goes through the CRC (one bit per
        cycle) and then out on ``tx`` (start bit, eight data bits LSB first, stop bit)."""
        shown_addr, shown_data = shown
        frame = _TxFrame(self._record_bytes, self._divisor, self._status_bytes)
        m.submodules.crc = crc = CRC.create()
        m.d.comb += shown_addr.eq(frame.index)
        payload = self._payload_byte(m, frame, shown_data)
        value = self._section_byte(m, frame, crc, payload)
        fsm = self._sequence(m, snapshot, frame, crc, value)
        with m.If(fsm.ongoing("SEND")):
            m.d.sync += self.tx.eq(Mux(frame.bit == 0, 0, Mux(frame.bit == 9, 1, frame.byte[0])))
        with m.Else():
            m.d.sync += self.tx.eq(1)
        m.d.comb += self.busy_record.eq((frame.kind == TxKind.RECORD) & ~fsm.ongoing("IDLE"))
        # requests arriving while a frame is under way are kept for the next one
        with m.If(self.send_ack):
            m.d.sync += frame.want_ack.eq(1)
        with m.If(self.send_status):
            m.d.sync += frame.want_status.eq(1)

    def _payload_byte(self, m, frame, shown_data):
        """The payload byte at ``index``: the record's for RECORD; for STATUS and ACK the byte
        of ``shown``, except ``next_seq`` and ``flags``, which are the framer's, and the values
        in force after STATUS's counters (taken when the frame started). Drives ``last``."""
        rb = self._record_bytes
        ends = {
            TxKind.STATUS: self._status_bytes - 1,
            TxKind.ACK: _ACK_AT + 4,
            TxKind.RECORD: rb - 1,
        }
        m.d.comb += frame.last.eq(
            frame.index == Array([Const(ends[kind]) for kind in sorted(TxKind)])[frame.kind]
        )
        record = Value.cast(self.i_stream.payload)
        record_byte = Signal(8)
        with m.Switch(frame.index):
            for i in range(rb):
                with m.Case(i):
                    m.d.comb += record_byte.eq(record[8 * i : 8 * i + 8])
        payload = Signal(8)
        if self._params_bits:
            values = Signal(8 * (self._status_bytes - _STATUS_BYTES), reset_less=True)
            values_byte = Signal(8)
            # (while its first byte goes out; values sent last)
            with m.If((frame.kind == TxKind.STATUS) & (frame.section == TxSection.SYNC0)):
                m.d.sync += values.eq(self.params)
            with m.Switch(frame.index):
                for i in range(self._status_bytes - _STATUS_BYTES):
                    with m.Case(_STATUS_BYTES + i):
                        m.d.comb += values_byte.eq(values[8 * i : 8 * i + 8])
        with m.If(frame.kind == TxKind.RECORD):
            m.d.comb += payload.eq(record_byte)
        with m.Elif((frame.kind == TxKind.STATUS) & (frame.index >= _STATUS_BYTES)):
            m.d.comb += payload.eq(values_byte if self._params_bits else 0)
        with m.Elif(
            frame.index == Mux(frame.kind == TxKind.ACK, _ACK_AT, _STATUS_AT["next_seq"][0])
        ):
            m.d.comb += payload.eq(self.next_seq)
        with m.Elif(frame.index == _STATUS_AT["flags"][0]):
            m.d.comb += payload.eq(frame.idle)
        with m.Else():
            m.d.comb += payload.eq(shown_data)
        return payload

    def _section_byte(self, m, frame, crc, payload):
        """The byte the frame's section sends: the header's, the payload's or the CRC's."""
        types = {
            TxKind.STATUS: FrameType.STATUS,
            TxKind.ACK: FrameType.ACK,
            TxKind.RECORD: FrameType.RECORD,
        }
        lengths = {
            TxKind.STATUS: self._status_bytes,
            TxKind.ACK: sum(n for _, n in ACK_FIELDS),
            TxKind.RECORD: self._record_bytes,
        }
        # SYNC0 to LEN0, by kind (LEN1, the length's high byte, is 0)
        header = Array(
            [
                Array(
                    [
                        Const(SYNC[0], 8),
                        Const(SYNC[1], 8),
                        Const(types[kind], 8),
                        Const(lengths[kind], 8),
                    ]
                )
                for kind in sorted(TxKind)
            ]
        )
        value = Signal(8)
        with m.Switch(frame.section):
            with m.Case(TxSection.PAYLOAD):
                m.d.comb += value.eq(payload)
            with m.Case(TxSection.CRC0):
                m.d.comb += value.eq(crc.crc[8:])
            with m.Case(TxSection.CRC1):
                m.d.comb += value.eq(crc.crc[:8])
            with m.Case(TxSection.LEN1):
                m.d.comb += value.eq(0)
            with m.Default():
                m.d.comb += value.eq(header[frame.kind][frame.section[:2]])
        return value

    def _sequence(self, m, snapshot, frame, crc, value):
        """The framer's states: IDLE until a frame is wanted; then, for each byte, LOAD it,
        run it through the CRC (type, length and payload bytes), SEND it. Returns the FSM."""
        div = self._divisor
        with m.FSM(name="framer") as fsm:
            with m.State("IDLE"):
                self._start(m, snapshot, frame, crc)
            with m.State("LOAD"):
                m.d.sync += [frame.byte.eq(value), frame.bit.eq(0), frame.timer.eq(div - 1)]
                with m.If(frame.section == TxSection.PAYLOAD):
                    m.d.sync += frame.done.eq(frame.last)
                    with m.If(~frame.last):
                        # (`shown`'s read port has the next byte by the next LOAD)
                        m.d.sync += frame.index.eq(frame.index + 1)
                    with m.Elif(frame.kind == TxKind.RECORD):
                        m.d.comb += [
                            self.i_stream.ready.eq(1),
                            snapshot.taken.eq(self.i_stream.valid),
                        ]
                with m.If((frame.section >= TxSection.TYPE) & (frame.section <= TxSection.PAYLOAD)):
                    m.next = "CRC"
                with m.Else():
                    m.next = "SEND"
            with m.State("CRC"):
                m.d.comb += [
                    crc.valid.eq(1),
                    crc.data.eq(frame.byte.bit_select(~frame.bit[:3], 1)),
                ]  # MSB first
                m.d.sync += frame.bit.eq(frame.bit + 1)
                with m.If(frame.bit == 7):
                    m.d.sync += frame.bit.eq(0)
                    m.next = "SEND"
            with m.State("SEND"):
                self._send(m, snapshot, frame)
        return fsm

    def _start(self, m, snapshot, frame, crc):
        """IDLE: start the frame wanted first (STATUS, ACK, a record), with a fresh CRC. STATUS
        and ACK wait until ``shown`` may freeze; a record waits for them."""
        m.d.comb += crc.start.eq(1)
        m.d.sync += [
            frame.section.eq(TxSection.SYNC0),
            frame.idle.eq(self.idle & ~snapshot.pending),
        ]
        with m.If((frame.want_status | frame.want_ack) & snapshot.settled):
            m.d.comb += snapshot.freeze.eq(1)
            m.d.sync += snapshot.frozen.eq(1)
            with m.If(frame.want_status):
                m.d.sync += [
                    frame.want_status.eq(0),
                    frame.kind.eq(TxKind.STATUS),
                    frame.index.eq(0),
                ]
            with m.Else():
                m.d.sync += [
                    frame.want_ack.eq(0),
                    frame.kind.eq(TxKind.ACK),
                    frame.index.eq(_ACK_AT),
                ]
            m.next = "LOAD"
        with m.Elif(~frame.want_status & ~frame.want_ack & self.i_stream.valid):
            m.d.sync += [frame.kind.eq(TxKind.RECORD), frame.index.eq(0)]
            m.next = "LOAD"

    def _send(self, m, snapshot, frame):
        """SEND: the byte's ten bits, ``divisor`` cycles each (bit 0 the start bit, 1-8 the
        data, LSB first, 9 the stop bit); then the next byte, or IDLE after the CRC."""
        with m.If(frame.timer != 0):
            m.d.sync += frame.timer.eq(frame.timer - 1)
        with m.Else():
            m.d.sync += [frame.timer.eq(self._divisor - 1), frame.bit.eq(frame.bit + 1)]
            with m.If(frame.bit == 9):
                m.d.comb += self.sent.eq(1)
                m.d.sync += frame.bit.eq(0)
                with m.If(frame.section == TxSection.CRC1):
                    m.d.comb += snapshot.thaw.eq(snapshot.frozen)
                    m.d.sync += snapshot.frozen.eq(0)
                    m.next = "IDLE"
                with m.Else():
                    m.next = "LOAD"
                    with m.If((frame.section != TxSection.PAYLOAD) | frame.done):
                        m.d.sync += frame.section.eq(frame.section + 1)
            with m.Elif(frame.bit != 0):
                m.d.sync += frame.byte.eq(frame.byte >> 1)
