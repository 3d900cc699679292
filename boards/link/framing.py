"""The link's framing blocks: bytes from the UART to tuples for the engine, records and status
back to bytes for the UART. The frame format is :mod:`boards.link.protocol`'s.

``UartRx ▸ Deframer ▸ FrameBuffer ▸ TupleAssembler ▸`` engine ``▸ Framer ▸ UartTx``
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .protocol import ACK_FIELDS, STATUS_FIELDS, SYNC, FrameType

__all__ = ["Deframer", "FrameBuffer", "Framer", "TupleAssembler", "crc16_byte",
           "status_layout"]

#: The deframer's event pulses, as members of its ``events`` port.
EVENTS = ("accepted", "ack", "status", "reset", "bad_type", "bad_length", "bad_crc",
          "truncated", "out_of_seq", "overflow")


def _crc16_terms() -> list[tuple[list[int], list[int]]]:
    """For each bit of the next CRC register: the register bits and byte bits it is the XOR
    of (the byte-wise CRC is linear over GF(2))."""
    # each bit as a pair of masks (register bits, byte bits), shifted through eight steps
    reg = [(1 << i, 0) for i in range(16)]
    for i in range(7, -1, -1):
        fb = (reg[15][0], reg[15][1] ^ (1 << i))
        shifted = [(0, 0), *reg[:15]]
        reg = [(a ^ fb[0], b ^ fb[1]) if 0x1021 >> k & 1 else (a, b)
               for k, (a, b) in enumerate(shifted)]
    return [([j for j in range(16) if a >> j & 1], [j for j in range(8) if b >> j & 1])
            for a, b in reg]


_CRC16_TERMS = _crc16_terms()


def crc16_byte(crc: Value, byte: Value) -> Value:
    """CRC-16/CCITT-FALSE register after shifting in ``byte`` MSB first (combinational: one
    XOR of at most a dozen bits per output bit)."""
    bits = []
    for regs, data_bits in _CRC16_TERMS:
        terms = [crc[j] for j in regs] + [byte[j] for j in data_bits]
        bits.append(Cat(*terms).xor() if terms else Const(0, 1))
    return Cat(*bits)


def status_layout() -> data.StructLayout:
    """The STATUS payload as a layout, fields in wire order (LSB first = first byte)."""
    return data.StructLayout({name: 8 * n for name, n in STATUS_FIELDS})


class Deframer(wiring.Component):
    """Parses host frames from a byte stream; puts the tuple bytes of TUPLES frames into a
    :class:`FrameBuffer` and commits them only when the whole frame is good.

    Always ready: one byte per cycle at most. ``o_stream`` carries the payload bytes after
    ``seq`` of a TUPLES frame that is in sequence and fits (``free`` is the buffer's free space,
    sampled at the length field); the buffer must always be ready. At the end of the frame one
    of ``commit`` or ``rollback`` pulses. Errors and commands pulse the members of ``events``
    (:data:`EVENTS`) for one cycle at the last byte of the frame, or when the error is seen:
    ``bad_type`` at the type byte, ``bad_length`` at the length (or at the end, when the
    payload is no whole number of tuples), ``truncated`` when no byte came for ``timeout``
    cycles inside a frame. After an error the deframer hunts for the next sync word.

    Members
    -------
    i_stream : ``In(stream.Signature(8))``
    o_stream : ``Out(stream.Signature(8))``
    commit, rollback : ``Out(1)``
    free : ``In(range(capacity + 1))``
    next_seq : ``Out(8)``
        The ``seq`` of the TUPLES frame the deframer accepts next (RESET sets it to 0).
    events : ``Out(...)``
        One ``Out(1)`` pulse per name in :data:`EVENTS`.
    """

    def __init__(self, tuple_bytes: int, capacity: int, timeout: int):
        if tuple_bytes < 1:
            raise ValueError("tuples must take at least one byte")
        if capacity < tuple_bytes:
            raise ValueError(f"a buffer of {capacity} bytes holds no {tuple_bytes}-byte tuple")
        self._tuple_bytes = tuple_bytes
        self._capacity = capacity
        self._timeout = max(int(timeout), 2)
        super().__init__({
            "i_stream": In(stream.Signature(8)),
            "o_stream": Out(stream.Signature(8)),
            "commit": Out(1),
            "rollback": Out(1),
            "free": In(range(capacity + 1)),
            "next_seq": Out(8),
            "events": Out(wiring.Signature({name: Out(1) for name in EVENTS})),
        })

    def elaborate(self, platform):
        m = Module()
        tb, cap = self._tuple_bytes, self._capacity
        ev = self.events
        byte = self.i_stream.payload
        got = self.i_stream.valid
        crc = Signal(16, init=0xFFFF)
        crc_next = Signal(16)
        ftype = Signal(8)
        length_lo = Signal(8)
        length = Cat(length_lo, byte)
        remaining = Signal(16)
        phase = Signal(range(tb))
        seq_ok = Signal()
        fits = Signal()
        quiet = Signal(range(self._timeout + 1))
        m.d.comb += [self.i_stream.ready.eq(1), crc_next.eq(crc16_byte(crc, byte)),
                     self.o_stream.payload.eq(byte)]
        with m.If(got):
            m.d.sync += quiet.eq(0)
        with m.Elif(quiet != self._timeout):
            m.d.sync += quiet.eq(quiet + 1)

        def step_crc():
            m.d.sync += crc.eq(crc_next)

        def fail(event):
            m.d.comb += [getattr(ev, event).eq(1), self.rollback.eq(1)]
            m.next = "SYNC0"

        def check_timeout():
            with m.If(~got & (quiet == self._timeout)):
                fail("truncated")

        with m.FSM(name="deframer"):
            with m.State("SYNC0"), m.If(got & (byte == SYNC[0])):
                m.next = "SYNC1"
            with m.State("SYNC1"), m.If(got):
                m.d.sync += crc.eq(0xFFFF)
                with m.If(byte == SYNC[1]):
                    m.next = "TYPE"
                with m.Elif(byte != SYNC[0]):
                    m.next = "SYNC0"
            with m.State("TYPE"):
                check_timeout()
                with m.If(got):
                    step_crc()
                    m.d.sync += ftype.eq(byte)
                    known = (byte == FrameType.TUPLES) | (byte == FrameType.STATUS_REQ) | \
                        (byte == FrameType.RESET)
                    with m.If(known):
                        m.next = "LEN0"
                    with m.Else():
                        fail("bad_type")
            with m.State("LEN0"):
                check_timeout()
                with m.If(got):
                    step_crc()
                    m.d.sync += length_lo.eq(byte)
                    m.next = "LEN1"
            with m.State("LEN1"):
                check_timeout()
                with m.If(got):
                    step_crc()
                    with m.If(ftype == FrameType.TUPLES):
                        with m.If((length >= 1 + tb) & (length <= 1 + cap)):
                            m.d.sync += [remaining.eq(length - 1),
                                         fits.eq(length - 1 <= self.free)]
                            m.next = "SEQ"
                        with m.Else():
                            fail("bad_length")
                    with m.Elif(length == 0):
                        m.next = "CRC0"
                    with m.Else():
                        fail("bad_length")
            with m.State("SEQ"):
                check_timeout()
                with m.If(got):
                    step_crc()
                    m.d.sync += [seq_ok.eq(byte == self.next_seq), phase.eq(0)]
                    m.next = "PAYLOAD"
            with m.State("PAYLOAD"):
                check_timeout()
                with m.If(got):
                    step_crc()
                    m.d.comb += self.o_stream.valid.eq(seq_ok & fits)
                    m.d.sync += [remaining.eq(remaining - 1),
                                 phase.eq(Mux(phase == tb - 1, 0, phase + 1))]
                    with m.If(remaining == 1):
                        m.next = "CRC0"
            with m.State("CRC0"):
                check_timeout()
                with m.If(got):
                    step_crc()
                    m.next = "CRC1"
            with m.State("CRC1"):
                check_timeout()
                with m.If(got):
                    m.next = "SYNC0"
                    with m.If(crc_next != 0):
                        fail("bad_crc")
                    with m.Elif(ftype == FrameType.TUPLES):
                        with m.If(phase != 0):
                            fail("bad_length")
                        with m.Elif(~seq_ok):
                            fail("out_of_seq")
                            m.d.comb += ev.ack.eq(1)
                        with m.Elif(~fits):
                            fail("overflow")
                            m.d.comb += ev.ack.eq(1)
                        with m.Else():
                            m.d.comb += [self.commit.eq(1), ev.accepted.eq(1), ev.ack.eq(1)]
                            m.d.sync += self.next_seq.eq(self.next_seq + 1)
                    with m.Elif(ftype == FrameType.STATUS_REQ):
                        m.d.comb += ev.status.eq(1)
                    with m.Else():
                        m.d.comb += [ev.reset.eq(1), ev.status.eq(1), self.rollback.eq(1)]
                        m.d.sync += self.next_seq.eq(0)
        return m


class FrameBuffer(wiring.Component):
    """A byte FIFO whose writes become visible only when committed.

    Bytes written on ``i_stream`` (always ready) are held until ``commit`` pulses, which makes
    every byte written so far readable on ``o_stream``, or ``rollback``, which forgets them.
    ``free`` is ``capacity`` minus the committed bytes not yet read; the writer must not write
    more than that between commits. The storage is a ``capacity``-deep memory with a
    synchronous read port (block RAM). ``o_stream`` offers a byte at most every other cycle.

    Members
    -------
    i_stream : ``In(stream.Signature(8))``
    commit, rollback : ``In(1)``
    o_stream : ``Out(stream.Signature(8))``
    free : ``Out(range(capacity + 1))``
    """

    def __init__(self, capacity: int):
        if capacity < 2 or capacity & (capacity - 1):
            raise ValueError(f"the capacity must be a power of 2, not {capacity}")
        self._capacity = capacity
        super().__init__({
            "i_stream": In(stream.Signature(8)),
            "commit": In(1),
            "rollback": In(1),
            "o_stream": Out(stream.Signature(8)),
            "free": Out(range(capacity + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        cap = self._capacity
        bits = cap.bit_length()  # one more than the address: tells full from empty
        m.submodules.memory = mem = Memory(shape=8, depth=cap, init=[])
        wp = mem.write_port()
        rp = mem.read_port(domain="sync")
        wptr = Signal(bits)  # tentative
        cptr = Signal(bits)  # committed
        rptr = Signal(bits)
        stale = Signal()  # rptr moved at the last edge: the read port shows the old byte
        used = Signal(bits)
        m.d.comb += [
            self.i_stream.ready.eq(1),
            wp.addr.eq(wptr[:bits - 1]),
            wp.data.eq(self.i_stream.payload),
            wp.en.eq(self.i_stream.valid),
            rp.addr.eq(rptr[:bits - 1]),
            used.eq(cptr - rptr),
            self.free.eq(cap - used),
            self.o_stream.payload.eq(rp.data),
            self.o_stream.valid.eq((rptr != cptr) & ~stale),
        ]
        with m.If(self.i_stream.valid):
            m.d.sync += wptr.eq(wptr + 1)
        with m.If(self.commit):
            m.d.sync += cptr.eq(wptr + self.i_stream.valid)
        with m.If(self.rollback):
            m.d.sync += wptr.eq(cptr)
        transfer = self.o_stream.valid & self.o_stream.ready
        m.d.sync += stale.eq(transfer)
        with m.If(transfer):
            m.d.sync += rptr.eq(rptr + 1)
        return m


class TupleAssembler(wiring.Component):
    """Gathers ``tuple_bytes`` bytes, little-endian, into one tuple of ``layout`` (the padding
    bits above ``layout.size`` are ignored) and offers it on ``o_stream`` until taken; takes no
    byte meanwhile.

    Members
    -------
    i_stream : ``In(stream.Signature(8))``
    o_stream : ``Out(stream.Signature(layout))``
    """

    def __init__(self, layout: data.StructLayout):
        self._layout = layout
        self._bytes = (layout.size + 7) // 8
        super().__init__({
            "i_stream": In(stream.Signature(8)),
            "o_stream": Out(stream.Signature(layout)),
        })

    def elaborate(self, platform):
        m = Module()
        n = self._bytes
        shreg = Signal(8 * n)
        count = Signal(range(n))
        m.d.comb += [self.i_stream.ready.eq(~self.o_stream.valid),
                     self.o_stream.payload.eq(shreg[:self._layout.size])]
        with m.If(self.o_stream.ready):
            m.d.sync += self.o_stream.valid.eq(0)
        with m.If(self.i_stream.valid & self.i_stream.ready):
            m.d.sync += shreg.eq(Cat(shreg[8:], self.i_stream.payload) if n > 1
                                 else self.i_stream.payload)
            with m.If(count == n - 1):
                m.d.sync += [count.eq(0), self.o_stream.valid.eq(1)]
            with m.Else():
                m.d.sync += count.eq(count + 1)
        return m


class Framer(wiring.Component):
    """Turns records, ACKs and STATUS into frames on a byte stream.

    ``send_ack`` and ``send_status`` pulses are remembered until their frame starts; between
    frames STATUS goes first, then ACK, then a record from ``i_stream``. A frame's payload is
    taken whole when it starts (``status`` is sampled then, so its counters are consistent),
    and its bytes then follow back to back on ``o_stream``. ``record_sent`` pulses when a
    RECORD frame's last byte is taken; ``busy_record`` is high while one is being sent.

    Members
    -------
    i_stream : ``In(stream.Signature(record_layout))``
    status : ``In(status_layout())``
    send_ack, send_status : ``In(1)``
    o_stream : ``Out(stream.Signature(8))``
    record_sent, busy_record : ``Out(1)``
    """

    def __init__(self, record_layout: data.StructLayout):
        self._record_layout = record_layout
        self._record_bytes = (record_layout.size + 7) // 8
        super().__init__({
            "i_stream": In(stream.Signature(record_layout)),
            "status": In(status_layout()),
            "send_ack": In(1),
            "send_status": In(1),
            "o_stream": Out(stream.Signature(8)),
            "record_sent": Out(1),
            "busy_record": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        status_bytes = sum(n for _, n in STATUS_FIELDS)
        ack_bytes = sum(n for _, n in ACK_FIELDS)
        width = 8 * max(status_bytes, ack_bytes, self._record_bytes)
        shreg = Signal(width)
        ftype = Signal(8)
        length = Signal(16)
        count = Signal(16)
        crc = Signal(16)
        is_record = Signal()
        want_ack = Signal()
        want_status = Signal()
        out = self.o_stream
        take = out.valid & out.ready
        m.d.comb += self.busy_record.eq(is_record)

        with m.FSM(name="framer"):
            with m.State("IDLE"):
                with m.If(want_status):
                    m.d.sync += [want_status.eq(0), ftype.eq(FrameType.STATUS),
                                 length.eq(status_bytes), shreg.eq(self.status.as_value())]
                    m.next = "SYNC0"
                with m.Elif(want_ack):
                    ack = Cat(self.status.next_seq, self.status.tuples)
                    m.d.sync += [want_ack.eq(0), ftype.eq(FrameType.ACK),
                                 length.eq(ack_bytes), shreg.eq(ack)]
                    m.next = "SYNC0"
                with m.Elif(self.i_stream.valid):
                    m.d.comb += self.i_stream.ready.eq(1)
                    m.d.sync += [ftype.eq(FrameType.RECORD), length.eq(self._record_bytes),
                                 shreg.eq(self.i_stream.payload.as_value()), is_record.eq(1)]
                    m.next = "SYNC0"
            for state, value, following in [("SYNC0", SYNC[0], "SYNC1"),
                                            ("SYNC1", SYNC[1], "TYPE")]:
                with m.State(state):
                    m.d.comb += [out.valid.eq(1), out.payload.eq(value)]
                    with m.If(take):
                        m.d.sync += crc.eq(0xFFFF)
                        m.next = following
            for state, value, following in [("TYPE", ftype, "LEN0"),
                                            ("LEN0", length[:8], "LEN1"),
                                            ("LEN1", length[8:], "PAYLOAD"),
                                            ("PAYLOAD", shreg[:8], "CRC0")]:
                with m.State(state):
                    m.d.comb += [out.valid.eq(1), out.payload.eq(value)]
                    with m.If(take):
                        m.d.sync += crc.eq(crc16_byte(crc, value))
                        if state == "LEN1":
                            m.d.sync += count.eq(length)
                            m.next = following
                        elif state == "PAYLOAD":
                            m.d.sync += [shreg.eq(shreg >> 8), count.eq(count - 1)]
                            with m.If(count == 1):
                                m.next = following
                        else:
                            m.next = following
            with m.State("CRC0"):
                m.d.comb += [out.valid.eq(1), out.payload.eq(crc[8:])]
                with m.If(take):
                    m.next = "CRC1"
            with m.State("CRC1"):
                m.d.comb += [out.valid.eq(1), out.payload.eq(crc[:8])]
                with m.If(take):
                    m.d.comb += self.record_sent.eq(is_record)
                    m.d.sync += is_record.eq(0)
                    m.next = "IDLE"
        # requests arriving while a frame is loaded are kept for the next one
        with m.If(self.send_ack):
            m.d.sync += want_ack.eq(1)
        with m.If(self.send_status):
            m.d.sync += want_status.eq(1)
        return m
