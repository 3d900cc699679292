"""The link's framing blocks: bytes from the UART to tuples for the engine, records and status
back to bytes for the UART. The frame format is :mod:`nfacep.boards.link.protocol`'s.

``UartRx ▸ Deframer ▸ FrameBuffer ▸ TupleAssembler ▸`` engine ``▸ Framer ▸`` tx

The blocks are built for a small FPGA (the link and a small engine fit an iCE40 HX1K). A UART
byte takes at least 40 clock cycles (:func:`nfacep.boards.link.uart.divisor` is at least 4), so the
CRCs go one bit per cycle, and the framer keeps the STATUS counters and constants in block RAM
instead of flip-flops, and sends the bytes of its frames on the UART line itself. The blocks
rely on that byte time where their docstrings say so. Registers that are loaded before they are
used have no reset (``reset_less``): on iCE40 the domain's reset would cost a LUT in front of
each one that also has a reset or set of its own.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .protocol import ACK_FIELDS, ERROR_COUNTERS, STATUS_FIELDS, SYNC, FrameType, encode_fields

__all__ = ["COUNTED", "COUNTERS", "DEFRAMED", "Deframer", "FrameBuffer", "Framer",
           "TupleAssembler", "crc16_bit"]

#: The deframer's event pulses, as members of its ``events`` port.
EVENTS = ("accepted", "ack", "status", "reset", "bad_type", "bad_length", "bad_crc",
          "truncated", "out_of_seq", "overflow")

#: The STATUS counters, kept by the :class:`Framer` (in STATUS order, one run of fields). It
#: counts ``matched``, ``drops`` and ``records`` from the records it sends; the others count the
#: pulses on its ``count`` port.
COUNTERS = ("tuples", "matched", "drops", "records", "frames", *ERROR_COUNTERS)
#: The counters that count pulses on the :class:`Framer`'s ``count`` port.
COUNTED = tuple(name for name in COUNTERS if name not in ("matched", "drops", "records"))
#: Those of them that count the deframer's events (it pulses one at a time).
DEFRAMED = ("frames", "bad_type", "bad_length", "bad_crc", "truncated", "out_of_seq",
            "overflow")
assert set(COUNTED) == {"tuples", "uart_errors", *DEFRAMED}


def _offsets(fields) -> dict[str, tuple[int, int]]:
    out, at = {}, 0
    for name, n in fields:
        out[name] = (at, n)
        at += n
    return out


_STATUS_AT = _offsets(STATUS_FIELDS)
_STATUS_BYTES = sum(n for _, n in STATUS_FIELDS)
# what the framer's layout relies on
assert [name for name, _ in STATUS_FIELDS[-len(COUNTERS):]] == list(COUNTERS)
assert ACK_FIELDS == (("next_seq", 1), ("tuples", 4)) and COUNTERS[0] == "tuples"
assert _STATUS_AT["flags"] == (1, 1) and _STATUS_AT["next_seq"] == (2, 1)


def crc16_bit(crc: Value, bit: Value) -> Value:
    """The CRC-16/CCITT-FALSE register (polynomial 0x1021) after shifting in one bit; a byte
    goes in MSB first, in eight steps."""
    fb = crc[15] ^ bit
    return Cat(fb, crc[0:4], crc[4] ^ fb, crc[5:11], crc[11] ^ fb, crc[12:15])


def _memory(m, name: str, depth: int, init=()):
    """A byte-wide memory for block RAM: its write port and the address and data of a read
    port with one cycle of latency.

    (The read port is asynchronous, its data registered outside: Yosys then merges the register
    into the block RAM without the logic that would make a same-address read and write in one
    cycle return the old byte, since ``no_rw_check`` says the design does not care. Where the
    blocks here read and write one address in the same cycle, they ignore what is read.)
    """
    m.submodules[name] = memory = Memory(shape=8, depth=depth, init=list(init),
                                          attrs={"no_rw_check": True, "ram_style": "block"})
    rp = memory.read_port(domain="comb")
    data = Signal(8, name=f"{name}_data", reset_less=True)
    m.d.sync += data.eq(rp.data)
    return memory.write_port(), rp.addr, data


def _at_most(value: Value, limit: int) -> Value:
    """``value <= limit`` for a constant ``limit``, as plain logic (no carry chain)."""
    result = Const(1)
    for i in range(len(value)):  # from the LSB: is value[:i + 1] <= limit[:i + 1]?
        result = (~value[i] | result) if limit >> i & 1 else (~value[i] & result)
    return result


class Deframer(wiring.Component):
    """Parses host frames from a byte stream; puts the tuple bytes of TUPLES frames into a
    :class:`FrameBuffer` and commits them only when the whole frame is good.

    Takes at most one byte in eight cycles: the CRC goes one bit per cycle while the byte waits
    on ``i_stream`` (a UART byte takes longer than that). ``o_stream`` carries the
    payload bytes after ``seq`` of a TUPLES frame that is in sequence; the buffer must always
    be ready, and raises ``overflow`` when one of them did not fit. At the end of the frame one
    of ``commit`` or ``rollback`` pulses. Errors and commands pulse the members of ``events``
    (:data:`EVENTS`) for one cycle at the last byte of the frame, or when the error is seen:
    ``bad_type`` at the type byte, ``bad_length`` at the length (or at the end, when the
    payload is no whole number of tuples), ``truncated`` when no byte came for ``timeout``
    cycles inside a frame. After an error the deframer hunts for the next sync word.

    ``tick`` (``tick_period`` > 1 only) pulses every ``tick_period`` cycles; the deframer then
    counts the timeout in those (a frame counts as truncated after ``timeout`` to
    ``timeout + 2 * tick_period`` cycles).

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
    """

    def __init__(self, tuple_bytes: int, capacity: int, timeout: int, tick_period: int = 1):
        if tuple_bytes < 1:
            raise ValueError("tuples must take at least one byte")
        if capacity < tuple_bytes or capacity & (capacity - 1):
            raise ValueError(f"the capacity must be a power of 2 that holds a tuple, not "
                             f"{capacity}")
        self._tuple_bytes = tuple_bytes
        self._capacity = capacity
        self._tick_period = max(int(tick_period), 1)
        self._ticks = max(-(-int(timeout) // self._tick_period), 2)
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
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        tb, cap = self._tuple_bytes, self._capacity
        ev = self.events
        byte = self.i_stream.payload
        got = Signal()
        # the CRC register inverted (it starts at 0xFFFF; flip-flops reset to 0 for free)
        crc_inv = Signal(16, reset_less=True)
        crc_next = Signal(16)  # after the bit of this cycle: after the whole byte when `got`
        bit = Signal(3)
        # (registers that need no reset: the domain's reset would cost logic in front of them)
        tuples = Signal(reset_less=True)  # the frame's type: TUPLES, STATUS_REQ or else RESET
        status_req = Signal(reset_less=True)
        # the payload's length, then the bytes of it left (seq and tuples); at LEN1 its low
        # byte and the high byte on `i_stream` are the length field
        remaining = Signal(range(max(cap + 2, 256)), reset_less=True)
        length = Cat(remaining[:8], byte)
        phase = Signal(range(tb), reset_less=True)
        seq_ok = Signal(reset_less=True)
        tick = self.tick if self._tick_period > 1 else Const(1)
        # ticks without a byte: the timeout is `ticks` whole ticks after a byte
        quiet = Signal(range(self._ticks + 2), reset_less=True)
        timed_out = Signal()
        m.d.comb += [
            self.i_stream.ready.eq(bit == 7),
            got.eq(self.i_stream.valid & self.i_stream.ready),
            crc_next.eq(crc16_bit(~crc_inv, byte.bit_select(~bit, 1))),  # MSB first
            self.o_stream.payload.eq(byte),
            timed_out.eq(~got & (quiet == self._ticks + (self._tick_period > 1))),
        ]
        with m.If(got):
            m.d.sync += quiet.eq(0)
        with m.Elif(tick & ~timed_out):
            m.d.sync += quiet.eq(quiet + 1)

        # where in a frame the next byte goes, one-hot (none: hunting for the sync word)
        at = {name: Signal(name=f"at_{name}") for name in ("sync1", "type", "len0", "len1",
                                                            "seq", "payload", "crc0", "crc1")}
        hunting = ~Cat(*at.values()).any()
        in_frame = Cat(*(at[name] for name in list(at)[1:])).any()
        known = (byte == FrameType.TUPLES) | (byte == FrameType.STATUS_REQ) | \
            (byte == FrameType.RESET)
        length_ok = Mux(tuples, ~_at_most(length, tb) & _at_most(length, 1 + cap),
                        length == 0)
        last = remaining == 1

        # every byte goes through the CRC (those of the sync word too: SYNC1 starts it afresh)
        with m.If(self.i_stream.valid):
            m.d.sync += [crc_inv.eq(Mux(at["sync1"] & got, 0, ~crc_next)), bit.eq(bit + 1)]
        with m.If(got):
            m.d.sync += [
                at["sync1"].eq((hunting | at["sync1"]) & (byte == SYNC[0])),
                at["type"].eq(at["sync1"] & (byte == SYNC[1])),
                at["len0"].eq(at["type"] & known),
                at["len1"].eq(at["len0"]),
                at["seq"].eq(at["len1"] & tuples & length_ok),
                at["payload"].eq(at["seq"] | (at["payload"] & ~last)),
                at["crc0"].eq((at["len1"] & ~tuples & length_ok) | (at["payload"] & last)),
                at["crc1"].eq(at["crc0"]),
            ]
        with m.Elif(timed_out & in_frame):
            m.d.sync += [flag.eq(0) for flag in at.values()]
            m.d.comb += [ev.truncated.eq(1), self.rollback.eq(1)]

        with m.If(got & at["type"]):
            m.d.sync += [tuples.eq(byte == FrameType.TUPLES),
                         status_req.eq(byte == FrameType.STATUS_REQ)]
            with m.If(~known):
                m.d.comb += [ev.bad_type.eq(1), self.rollback.eq(1)]
        with m.If(got & at["len0"]):
            m.d.sync += remaining.eq(byte)
        with m.If(got & at["len1"]):
            m.d.sync += remaining[8:].eq(byte)
            with m.If(~length_ok):
                m.d.comb += [ev.bad_length.eq(1), self.rollback.eq(1)]
        with m.If(got & at["seq"]):
            m.d.sync += [seq_ok.eq(byte == self.next_seq), phase.eq(0)]
        with m.If(got & (at["seq"] | at["payload"])):
            m.d.sync += remaining.eq(remaining - 1)
        with m.If(got & at["payload"]):
            m.d.comb += self.o_stream.valid.eq(seq_ok)
            m.d.sync += phase.eq(Mux(phase == tb - 1, 0, phase + 1))
        with m.If(got & at["crc1"]):
            with m.If(crc_next != 0):
                m.d.comb += [ev.bad_crc.eq(1), self.rollback.eq(1)]
            with m.Elif(tuples):
                with m.If(phase != 0):
                    m.d.comb += [ev.bad_length.eq(1), self.rollback.eq(1)]
                with m.Elif(~seq_ok):
                    m.d.comb += [ev.out_of_seq.eq(1), ev.ack.eq(1), self.rollback.eq(1)]
                with m.Elif(self.overflow):
                    m.d.comb += [ev.overflow.eq(1), ev.ack.eq(1), self.rollback.eq(1)]
                with m.Else():
                    m.d.comb += [self.commit.eq(1), ev.accepted.eq(1), ev.ack.eq(1)]
                    m.d.sync += self.next_seq.eq(self.next_seq + 1)
            with m.Elif(status_req):
                m.d.comb += ev.status.eq(1)
            with m.Else():
                m.d.comb += [ev.reset.eq(1), ev.status.eq(1), self.rollback.eq(1)]
                m.d.sync += self.next_seq.eq(0)
        return m


class FrameBuffer(wiring.Component):
    """A byte FIFO whose writes become visible only when committed.

    Bytes written on ``i_stream`` (always ready) are held until ``commit`` pulses, which makes
    every byte written so far readable on ``o_stream``, or ``rollback``, which forgets them. A
    byte written while the buffer is full (``capacity`` bytes written and not read) is dropped
    and raises ``overflow`` until the next ``commit`` or ``rollback``; the writer must then roll
    back. No byte may be written in the cycle of a ``commit``. The storage is a
    ``capacity``-deep memory with a synchronous read port (block RAM). ``o_stream`` offers a
    byte at most every other cycle. ``empty``: nothing committed is left to read.

    Members
    -------
    i_stream : ``In(stream.Signature(8))``
    commit, rollback : ``In(1)``
    o_stream : ``Out(stream.Signature(8))``
    overflow, empty : ``Out(1)``
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
            "overflow": Out(1),
            "empty": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cap = self._capacity
        bits = cap.bit_length()  # one more than the address: tells full from empty
        wp, read_addr, read_data = _memory(m, "memory", cap)
        wptr = Signal(bits)  # tentative
        cptr = Signal(bits)  # committed
        rptr = Signal(bits)
        stale = Signal()  # rptr moved at the last edge: the read port shows the old byte
        full = Signal()
        write = Signal()
        m.d.comb += [
            self.i_stream.ready.eq(1),
            full.eq((wptr[:-1] == rptr[:-1]) & (wptr[-1] != rptr[-1])),
            write.eq(self.i_stream.valid & ~full),
            wp.addr.eq(wptr[:-1]),
            wp.data.eq(self.i_stream.payload),
            wp.en.eq(write),
            read_addr.eq(rptr[:-1]),
            self.empty.eq(rptr == cptr),
            self.o_stream.payload.eq(read_data),
            self.o_stream.valid.eq(~self.empty & ~stale),
        ]
        with m.If(write):
            m.d.sync += wptr.eq(wptr + 1)
        with m.If(self.i_stream.valid & full):
            m.d.sync += self.overflow.eq(1)
        with m.If(self.commit):
            m.d.sync += [cptr.eq(wptr), self.overflow.eq(0)]
        with m.If(self.rollback):
            m.d.sync += [wptr.eq(cptr), self.overflow.eq(0)]
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


# the framer's frame kinds and the sections of a frame, in order
_STATUS, _ACK, _RECORD = range(3)
_SYNC0, _SYNC1, _TYPE, _LEN0, _LEN1, _PAYLOAD, _CRC0, _CRC1 = range(8)


class Framer(wiring.Component):
    """Turns records, ACKs and STATUS into frames sent on ``tx`` (a UART transmitter: 8 data
    bits, no parity, 1 stop bit, ``divisor`` cycles a bit), and keeps the STATUS counters
    (:data:`COUNTERS`).

    ``send_ack`` and ``send_status`` pulses are remembered until their frame starts; between
    frames STATUS goes first, then ACK, then a record from ``i_stream``. A record is read from
    ``i_stream`` while its frame goes out and taken with its last payload byte (the stream
    holds it meanwhile); ``busy_record`` is high from the frame's start to its end. A byte goes
    through the CRC (one bit per cycle) before its start bit; ``sent`` pulses at the end of
    each stop bit.

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
    """

    def __init__(self, record_layout: data.StructLayout, constants: dict | None = None, *,
                 divisor: int):
        if divisor < 1:
            raise ValueError(f"divisor must be at least 1, not {divisor}")
        self._divisor = divisor
        self._record_layout = record_layout
        self._record_bytes = (record_layout.size + 7) // 8
        if self._record_bytes > 255:
            raise ValueError(f"a record of {self._record_bytes} bytes is too long for the "
                             "framer (at most 255)")
        constants = dict(constants or {})
        unknown = set(constants) - {"version", "engine_id", "tuple_bytes", "record_bytes",
                                    "capacity", "reserved"}
        if unknown:
            raise ValueError(f"not constant STATUS fields: {', '.join(sorted(unknown))}")
        self._image = encode_fields(STATUS_FIELDS, constants)
        super().__init__({
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
        })

    def elaborate(self, platform):
        m = Module()
        freeze = Signal()  # a STATUS or ACK frame starts
        frozen = Signal()  # one goes out: counts go to `live` only, `shown` stays
        thaw = Signal()  # it ends
        settled = Signal()  # `shown` equals `live` and may be frozen now
        pending = Signal()  # a count not yet in `live`
        taken = Signal()  # a record is taken
        shown = self._counters(m, freeze, frozen, thaw, settled, pending, taken)
        self._frames(m, freeze, frozen, thaw, settled, pending, taken, shown)
        return m

    def _counters(self, m, freeze, frozen, thaw, settled, any_pending, taken):
        """The counters' memories and their sweep; returns the read port of `shown`.

        Each cycle one byte of `live` is written back, to both copies, plus the counts that
        came since its counter's last turn (at its first byte) or the carry (at the others).
        `shown` is not written while a frame reads it: a frame starts only between two counters
        and when `shown` is whole, that is a whole sweep after the last frame (its counters were
        torn where that frame's counts went to `live` only). RESET zeroes one whole sweep.
        """
        depth = 1 << (_STATUS_BYTES - 1).bit_length()
        # `live` has twice the room: its upper half is never written, reads 0 when zeroing
        lw, live_addr, live_data = _memory(m, "live", 2 * depth)
        sw, shown_addr, shown_data = _memory(m, "shown", depth, self._image)
        lo, hi = _STATUS_AT[COUNTERS[0]][0], _STATUS_BYTES - 1  # the counters' bytes
        sweep = hi - lo + 1
        record = self.i_stream.payload
        addr = Signal(range(depth), init=lo)  # the byte written this cycle
        following = Signal.like(addr)
        m.d.comb += following.eq(Mux(addr == hi, lo, addr + 1))
        carry = Signal(reset_less=True)
        zeroing = Signal(range(sweep + 1), reset_less=True)  # cycles left zeroing (RESET)
        stale = Signal(2, reset_less=True)  # sweep ends before `shown` is whole again
        # the counts that wait for their counter's turn (at most a sweep)
        tuples = Signal(5, reset_less=True)
        recorded = {name: Signal(name=f"count_{name}", reset_less=True)
                    for name in ("matched", "drops", "records")}
        uart = Signal(reset_less=True)
        deframed = Signal(reset_less=True)  # one of DEFRAMED, `which`
        which = Signal(range(len(DEFRAMED)), reset_less=True)
        pulses = {"tuples": self.count.tuples, "matched": taken & record.matches.any(),
                  "drops": taken & record.dropped, "records": taken,
                  "uart_errors": self.count.uart_errors}
        bases = Array([Const(_STATUS_AT[name][0], range(depth)) for name in DEFRAMED])

        def turn(name):
            return addr == _STATUS_AT[name][0]

        head = Signal()  # `addr` is a counter's first byte
        amount = Signal(len(tuples))  # the counts added there
        m.d.comb += head.eq(Cat(*(turn(name) for name in COUNTERS)).any())
        with m.If(turn("tuples")):
            m.d.comb += amount.eq(tuples)
        for name, flag in [*recorded.items(), ("uart_errors", uart)]:
            with m.If(turn(name)):
                m.d.comb += amount.eq(flag)
        with m.If(addr == bases[which]):
            m.d.comb += amount.eq(deframed)
        # a turn takes the counts; RESET forgets them: what pulses then counts after it
        restart = self.clear
        m.d.sync += tuples.eq(Mux(restart | turn("tuples"), 0, tuples) + pulses["tuples"])
        for name, flag in [*recorded.items(), ("uart_errors", uart)]:
            m.d.sync += flag.eq(Mux(restart | turn(name), 0, flag) | pulses[name])
        with m.If(restart | (addr == bases[which])):
            m.d.sync += deframed.eq(0)
        for i, name in enumerate(DEFRAMED):
            with m.If(getattr(self.count, name)):
                m.d.sync += [deframed.eq(1), which.eq(i)]

        total = Signal(9)
        m.d.comb += [
            # (a byte is read the cycle before it is written: zeroing starts with that read)
            live_addr.eq(Cat(following, self.clear | (zeroing[1:] != 0))),
            total.eq(live_data + Mux(head, amount, carry)),
            lw.addr.eq(addr), lw.data.eq(total[:8]), lw.en.eq(1),
            sw.addr.eq(addr), sw.data.eq(total[:8]), sw.en.eq(~frozen & ~freeze),
            # (a STATUS frame after a RECORD frame counts it: wait for its counts)
            settled.eq(head & (zeroing == 0) & (stale == 0) & ~Cat(*recorded.values()).any()),
            any_pending.eq((tuples != 0) | Cat(*recorded.values()).any() | uart | deframed),
        ]
        m.d.sync += [addr.eq(following), carry.eq(total[8])]
        with m.If(zeroing != 0):
            m.d.sync += zeroing.eq(zeroing - 1)
        with m.If(self.clear):  # zero every byte, starting with the next one
            m.d.sync += [zeroing.eq(sweep), carry.eq(0)]
        with m.If((addr == hi) & (stale != 0)):
            m.d.sync += stale.eq(stale - 1)
        with m.If(thaw):  # a whole sweep from the next wrap
            m.d.sync += stale.eq(2)
        return shown_addr, shown_data

    def _frames(self, m, freeze, frozen, thaw, settled, pending, taken, shown):
        """The frames, byte after byte: a byte is loaded, goes through the CRC (one bit per
        cycle) and then out on ``tx`` (start bit, eight data bits LSB first, stop bit)."""
        shown_addr, shown_data = shown
        rb, div = self._record_bytes, self._divisor
        # (registers that need no reset: the domain's reset would cost logic in front of them)
        kind = Signal(range(3), reset_less=True)
        section = Signal(range(8), reset_less=True)
        # the payload byte: its offset in STATUS for STATUS and ACK (whose bytes are STATUS's
        # `next_seq` and `tuples`), in the record for RECORD
        index = Signal(range(max(_STATUS_BYTES, rb)), reset_less=True)
        done = Signal(reset_less=True)  # the payload byte being sent is the last one
        byte = Signal(8, reset_less=True)
        crc_inv = Signal(16, reset_less=True)  # inverted: it starts at 0xFFFF
        bit = Signal(range(10), reset_less=True)  # CRC steps, then UART bits
        timer = Signal(range(div), reset_less=True)
        idle = Signal(reset_less=True)
        want_ack = Signal()
        want_status = Signal()

        # ACK's index starts just before STATUS's `tuples`, the byte it sends `next_seq` in
        ack_at = _STATUS_AT["tuples"][0] - 1
        last = Signal()
        m.d.comb += [
            last.eq(index == Array([Const(_STATUS_BYTES - 1), Const(ack_at + 4),
                                    Const(rb - 1)])[kind]),
            shown_addr.eq(index),
        ]
        record = Value.cast(self.i_stream.payload)
        record_byte = Signal(8)
        with m.Switch(index):
            for i in range(rb):
                with m.Case(i):
                    m.d.comb += record_byte.eq(record[8 * i:8 * i + 8])
        payload = Signal(8)
        with m.If(kind == _RECORD):
            m.d.comb += payload.eq(record_byte)
        with m.Elif(index == Mux(kind == _ACK, ack_at, _STATUS_AT["next_seq"][0])):
            m.d.comb += payload.eq(self.next_seq)
        with m.Elif(index == _STATUS_AT["flags"][0]):
            m.d.comb += payload.eq(idle)
        with m.Else():
            m.d.comb += payload.eq(shown_data)
        header = Array([Array([Const(SYNC[0], 8), Const(SYNC[1], 8), Const(t, 8), Const(n, 8)])
                        for t, n in ((FrameType.STATUS, _STATUS_BYTES),
                                     (FrameType.ACK, sum(n for _, n in ACK_FIELDS)),
                                     (FrameType.RECORD, rb))])
        value = Signal(8)
        with m.Switch(section):
            with m.Case(_PAYLOAD):
                m.d.comb += value.eq(payload)
            with m.Case(_CRC0):
                m.d.comb += value.eq(~crc_inv[8:])
            with m.Case(_CRC1):
                m.d.comb += value.eq(~crc_inv[:8])
            with m.Case(_LEN1):
                m.d.comb += value.eq(0)
            with m.Default():
                m.d.comb += value.eq(header[kind][section[:2]])

        with m.FSM(name="framer") as fsm:
            with m.State("IDLE"):
                m.d.sync += [section.eq(_SYNC0), crc_inv.eq(0), idle.eq(self.idle & ~pending)]
                # (a record waits for STATUS and ACK, which wait until `shown` may freeze)
                with m.If((want_status | want_ack) & settled):
                    m.d.comb += freeze.eq(1)
                    m.d.sync += frozen.eq(1)
                    with m.If(want_status):
                        m.d.sync += [want_status.eq(0), kind.eq(_STATUS), index.eq(0)]
                    with m.Else():
                        m.d.sync += [want_ack.eq(0), kind.eq(_ACK), index.eq(ack_at)]
                    m.next = "LOAD"
                with m.Elif(~want_status & ~want_ack & self.i_stream.valid):
                    m.d.sync += [kind.eq(_RECORD), index.eq(0)]
                    m.next = "LOAD"
            with m.State("LOAD"):
                m.d.sync += [byte.eq(value), bit.eq(0), timer.eq(div - 1)]
                with m.If(section == _PAYLOAD):
                    m.d.sync += done.eq(last)
                    with m.If(~last):
                        m.d.sync += index.eq(index + 1)  # `shown` has the next byte by LOAD
                    with m.Elif(kind == _RECORD):
                        m.d.comb += [self.i_stream.ready.eq(1),
                                     taken.eq(self.i_stream.valid)]
                with m.If((section >= _TYPE) & (section <= _PAYLOAD)):
                    m.next = "CRC"
                with m.Else():
                    m.next = "SEND"
            with m.State("CRC"):
                m.d.sync += [crc_inv.eq(~crc16_bit(~crc_inv, byte.bit_select(~bit[:3], 1))),
                             bit.eq(bit + 1)]
                with m.If(bit == 7):
                    m.d.sync += bit.eq(0)
                    m.next = "SEND"
            with m.State("SEND"):
                # bit 0: the start bit; 1-8: data; 9: the stop bit
                with m.If(timer != 0):
                    m.d.sync += timer.eq(timer - 1)
                with m.Else():
                    m.d.sync += [timer.eq(div - 1), bit.eq(bit + 1)]
                    with m.If(bit == 9):
                        m.d.comb += self.sent.eq(1)
                        m.d.sync += bit.eq(0)
                        with m.If(section == _CRC1):
                            m.d.comb += thaw.eq(frozen)
                            m.d.sync += frozen.eq(0)
                            m.next = "IDLE"
                        with m.Else():
                            m.next = "LOAD"
                            with m.If((section != _PAYLOAD) | done):
                                m.d.sync += section.eq(section + 1)
                    with m.Elif(bit != 0):
                        m.d.sync += byte.eq(byte >> 1)
        with m.If(fsm.ongoing("SEND")):
            m.d.sync += self.tx.eq(Mux(bit == 0, 0, Mux(bit == 9, 1, byte[0])))
        with m.Else():
            m.d.sync += self.tx.eq(1)
        m.d.comb += self.busy_record.eq((kind == _RECORD) & ~fsm.ongoing("IDLE"))
        # requests arriving while a frame is under way are kept for the next one
        with m.If(self.send_ack):
            m.d.sync += want_ack.eq(1)
        with m.If(self.send_status):
            m.d.sync += want_status.eq(1)
