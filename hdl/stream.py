"""Stream blocks shared by the engine and the links: a FIFO (``amaranth.lib.fifo.SyncFIFOBuffered``
wrapped as a wiring Component), a one-payload output register, a skid buffer (:class:`SkidBuffer`,
its ready from a register), a byte queue whose packets are committed or discarded whole
(:class:`PacketQueue`, Glasgow's name) and a byte-to-tuple gatherer (:class:`TupleGatherer`).
The UART and UDP links both put a :class:`PacketQueue` and a :class:`TupleGatherer` between
their parser and the engine. :func:`cross` passes a stream from one clock domain to another;
:class:`ReadAheadAsyncFIFO` is an asynchronous FIFO whose read side is registers only (the UDP
top's records crossing)."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Elaboratable, Module, ResetSignal, Shape, Signal, Value
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.cdc import AsyncFFSynchronizer, FFSynchronizer
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .bram import RegisteredBank

#: Test-only: :func:`cross`'s room register broken on purpose, so that a test shows that an
#: unchecked write into a full crossing is caught. ``"late"``: room is given while the level
#: is up to 4 entries above the crossing's depth. ``None`` (always, outside that test):
#: nothing broken.
BREAK_ROOM: str | None = None

#: Test-only: :class:`PacketQueue`'s registered write port broken on purpose, so that a test
#: shows that a byte read too early is caught. ``"late"``: a byte reaches the memory two
#: edges after it is written, not one (the block RAM's write a cycle after the first read of
#: a byte committed right after it). ``"past full"``: the bytes after an overflow are written
#: whenever the queue does not look full, though the write pointer ran on past the bytes not
#: yet taken (they are overwritten). ``None`` (always, outside those tests): nothing broken.
BREAK_QUEUE_WRITE: str | None = None

__all__ = [
    "BREAK_QUEUE_WRITE",
    "BREAK_ROOM",
    "PacketQueue",
    "ReadAheadAsyncFIFO",
    "SkidBuffer",
    "StreamBuffer",
    "StreamQueue",
    "TupleGatherer",
    "cross",
    "gray",
]


class StreamQueue(wiring.Component):
    """First-in first-out buffer of ``depth`` payloads between two streams.

    Latency: a payload written at one edge can be read after the next; full throughput (one
    transfer per cycle in and out). ``i_stream.ready`` is low when full.

    Members
    -------
    i_stream : ``In(stream.Signature(shape))``
    o_stream : ``Out(stream.Signature(shape))``
    """

    def __init__(self, shape, depth: int):
        self._shape = shape
        self._depth = depth
        super().__init__(
            {
                "i_stream": In(stream.Signature(shape)),
                "o_stream": Out(stream.Signature(shape)),
            }
        )

    @property
    def depth(self) -> int:
        return self._depth

    def elaborate(self, platform):
        m = Module()
        width = Shape.cast(self._shape).width
        m.submodules.fifo = buf = fifo.SyncFIFOBuffered(width=width, depth=self._depth)
        m.d.comb += [
            buf.w_data.eq(self.i_stream.payload),
            buf.w_en.eq(self.i_stream.valid),
            self.i_stream.ready.eq(buf.w_rdy),
            self.o_stream.payload.eq(buf.r_data),
            self.o_stream.valid.eq(buf.r_rdy),
            buf.r_en.eq(self.o_stream.ready),
        ]
        return m


class _Stage(wiring.Component):
    """A register stage between two streams of one ``shape``: what :class:`StreamBuffer` and
    :class:`SkidBuffer` share (their ports)."""

    def __init__(self, shape):
        self._shape = shape
        super().__init__(
            {
                "i_stream": In(stream.Signature(shape)),
                "o_stream": Out(stream.Signature(shape)),
            }
        )


class StreamBuffer(_Stage):
    """One register stage between two streams (Glasgow's ``StreamBuffer``).

    The payload offered on ``i_stream`` appears on ``o_stream`` one cycle after it is taken.
    ``i_stream.ready`` is ``o_stream.ready | ~o_stream.valid`` (combinational from the output
    side, never from ``i_stream.valid``): full throughput, one transfer per cycle, while the
    consumer takes them; a stalled consumer holds the payload and stalls the producer. A block
    that computes its result combinationally from its input (and updates its own state on
    ``i_stream``'s transfer) gets its registered, stallable output from this.

    Members
    -------
    i_stream : ``In(stream.Signature(shape))``
    o_stream : ``Out(stream.Signature(shape))``
    """

    def elaborate(self, platform):
        m = Module()
        with m.If(self.o_stream.ready | ~self.o_stream.valid):
            m.d.comb += self.i_stream.ready.eq(1)
            m.d.sync += self.o_stream.valid.eq(self.i_stream.valid)
            with m.If(self.i_stream.valid):
                m.d.sync += self.o_stream.payload.eq(self.i_stream.payload)
        return m


class SkidBuffer(_Stage):
    """A register stage whose ``i_stream.ready`` is a register of its own (a skid buffer):
    the payload taken sits in the output register, or, when the consumer stalled, in a second
    register beside it, and ``ready`` is low while that second register is full.

    Unlike :class:`StreamBuffer`, ``ready`` depends on nothing in the same cycle: a producer
    that enables wide registers on its payload's transfer (a shift register's ``valid &
    ready``) sees a flip-flop there, not the consumer's logic (timing). The payload appears on
    ``o_stream`` one cycle after it is taken; one transfer per cycle in and out while the
    consumer takes them; after a stall the producer waits one cycle more than the consumer.

    Members
    -------
    i_stream : ``In(stream.Signature(shape))``
    o_stream : ``Out(stream.Signature(shape))``
    """

    def elaborate(self, platform):
        m = Module()
        i, o = self.i_stream, self.o_stream
        skid_valid = Signal()
        skid = Signal.like(i.payload, name="skid")
        m.d.comb += i.ready.eq(~skid_valid)
        with m.If(o.ready | ~o.valid):  # the output register takes a payload
            with m.If(skid_valid):  # (i.ready is low: nothing is taken from i_stream)
                m.d.sync += [o.payload.eq(skid), skid_valid.eq(0)]
            with m.Else():
                m.d.sync += [o.valid.eq(i.valid), o.payload.eq(i.payload)]
        with m.Elif(i.valid & ~skid_valid):  # the consumer stalls: into the second register
            m.d.sync += [skid.eq(i.payload), skid_valid.eq(1)]
        return m


class PacketQueue(wiring.Component):
    """A byte FIFO whose writes become visible only when committed: the bytes of a packet are
    written as they arrive and the packet is kept or discarded whole once its end is checked.

    ``i_stream`` is always ready; a byte written while the queue is full (``capacity`` bytes
    written and not taken from ``o_stream``) is dropped and raises ``overflow`` until the next
    ``commit`` or ``rollback`` (the writer must then roll back), and so is every byte after it
    until then. The write pointer moves with every byte written, kept or dropped (its enable
    is the writer's ``valid``, not the fullness compare: timing, the receive clock's slowest
    path beside the programmable engine); after an overflow it runs past the bytes not yet
    taken, so those later bytes are dropped on ``overflow`` itself, and the rollback puts it
    back. ``commit`` makes every byte
    written so far readable on ``o_stream``; ``rollback`` forgets them (discards the packet).
    No byte may be written in the cycle of either.

    Latency and throughput: a byte a cycle in and out. A byte written reaches the memory at the
    next edge through a register of the write port (address, byte and enable), so that the
    block RAM's write enable is a flip-flop, not the queue's fullness compare and the writer's
    ``valid`` (timing); the earliest read of a byte, after a commit in the cycle after its
    write, is an edge later still. A committed byte is offered on
    ``o_stream`` from the third cycle after the commit: the storage is a
    :class:`~nfacep.hdl.bram.RegisteredBank` (on ECP5 DP16KD blocks read through their own
    output register, whose clock-to-output is short: timing), read through two registers, the
    block RAM's address register and its output register, which is ``o_stream``'s payload.
    Both move together whenever ``o_stream`` is free or being taken, so a low
    ``o_stream.ready`` holds the two bytes in them and nothing is lost or repeated. ``empty``:
    nothing committed is left to read, nor is in the read registers or on ``o_stream``.

    Members
    -------
    i_stream : ``In(stream.Signature(width))``
    commit, rollback : ``In(1)``
    overflow : ``Out(1)``
    o_stream : ``Out(stream.Signature(width))``
    empty : ``Out(1)``

    ``width`` is the bits of an entry: 8 (a byte) unless told (the UDP link's load bytes carry
    a ``last`` flag beside).
    """

    def __init__(self, capacity: int, width: int = 8):
        if capacity < 2 or capacity & (capacity - 1):
            raise ValueError(f"the capacity must be a power of 2, not {capacity}")
        self._capacity = capacity
        self._width = width
        super().__init__(
            {
                "i_stream": In(stream.Signature(width)),
                "commit": In(1),
                "rollback": In(1),
                "overflow": Out(1),
                "o_stream": Out(stream.Signature(width)),
                "empty": Out(1),
            }
        )

    @property
    def capacity(self) -> int:
        return self._capacity

    def elaborate(self, platform):
        m = Module()
        bits = self._capacity.bit_length()  # one more than the address: full or empty
        m.submodules.memory = memory = RegisteredBank(width=self._width, depth=self._capacity)
        o = self.o_stream
        # written (tentative), committed, read from the memory, taken from o_stream
        wptr, cptr, rptr, tptr = (Signal(bits, name=n) for n in ("wptr", "cptr", "rptr", "tptr"))
        full, write = Signal(), Signal()
        # the read pipeline: a byte in the block RAM's address register (``read``), one in its
        # output register (``o_stream.valid``); both move when the output register is free
        read = Signal()
        advance = Signal()
        load = Signal()
        # (after an overflow the write pointer has run on: nothing is written until it is put
        # back)
        keeping = Const(1) if BREAK_QUEUE_WRITE == "past full" else ~self.overflow
        m.d.comb += [
            self.i_stream.ready.eq(1),
            full.eq((wptr[:-1] == tptr[:-1]) & (wptr[-1] != tptr[-1])),
            write.eq(self.i_stream.valid & ~full & keeping),
            advance.eq(~o.valid | o.ready),
            load.eq(advance & (rptr != cptr)),
            memory.r_addr.eq(rptr[:-1]),
            memory.r_en.eq(advance),
            o.payload.eq(memory.r_data),
            self.empty.eq((rptr == cptr) & ~read & ~o.valid),
        ]
        # the write port from a register: the memory writes a byte at the edge after it came
        incoming = Cat(wptr[:-1], self.i_stream.payload, write)
        if BREAK_QUEUE_WRITE == "late":  # a second register: the byte lands an edge late
            late = Signal(len(incoming), name="late_write")
            m.d.sync += late.eq(incoming)
            incoming = late
        m.d.sync += Cat(memory.w_addr, memory.w_data, memory.w_en).eq(incoming)
        with m.If(self.i_stream.valid):  # (kept or dropped: no fullness compare, timing)
            m.d.sync += wptr.eq(wptr + 1)
        with m.If(self.i_stream.valid & full):
            m.d.sync += self.overflow.eq(1)
        with m.If(self.commit):
            m.d.sync += [cptr.eq(wptr), self.overflow.eq(0)]
        with m.If(self.rollback):
            m.d.sync += [wptr.eq(cptr), self.overflow.eq(0)]
        with m.If(o.valid & o.ready):
            m.d.sync += tptr.eq(tptr + 1)
        with m.If(advance):
            m.d.sync += [read.eq(load), o.valid.eq(read)]
        with m.If(load):
            m.d.sync += rptr.eq(rptr + 1)
        return m


class TupleGatherer(wiring.Component):
    """Gathers ``ceil(width / 8)`` bytes, little-endian, into one payload of ``shape`` (the
    padding bits above its width dropped) and offers it on ``o_stream`` until taken.

    Latency: a tuple is offered from the cycle after its last byte is taken. With ``overlap``
    (the default) the tuple waits in an output register of its own: the gatherer takes a byte
    every cycle, the next tuple's bytes while this one waits, all but the last; full
    throughput at a byte a cycle. Without, the shift register that gathers the bytes is the
    output register (a tuple's width fewer flip-flops, for the smallest FPGAs):
    ``i_stream.ready`` is ``~o_stream.valid``, so no byte is taken while a tuple is offered
    nor in the cycle it is taken, and a tuple takes at least one cycle more than its bytes.

    Members
    -------
    i_stream : ``In(stream.Signature(8))``
    o_stream : ``Out(stream.Signature(shape))``
    """

    def __init__(self, shape, *, overlap: bool = True):
        self._width = Shape.cast(shape).width
        self._bytes = (self._width + 7) // 8
        self._overlap = bool(overlap)
        super().__init__(
            {"i_stream": In(stream.Signature(8)), "o_stream": Out(stream.Signature(shape))}
        )

    def elaborate(self, platform):
        m = Module()
        n = self._bytes
        i, o = self.i_stream, self.o_stream
        shreg = Signal(8 * n, reset_less=self._overlap)
        count = Signal(range(n))
        last = count == n - 1
        taken = i.valid & i.ready
        gathered = Cat(shreg[8:], i.payload) if n > 1 else i.payload
        with m.If(o.ready):
            m.d.sync += o.valid.eq(0)
        with m.If(taken):
            m.d.sync += shreg.eq(gathered)
            with m.If(last):
                m.d.sync += [count.eq(0), o.valid.eq(1)]
            with m.Else():
                m.d.sync += count.eq(count + 1)
        if self._overlap:
            m.d.comb += i.ready.eq(~last | ~o.valid | o.ready)
            with m.If(taken & last):
                m.d.sync += o.payload.eq(gathered[: self._width])
        else:
            m.d.comb += [i.ready.eq(~o.valid), o.payload.eq(shreg[: self._width])]
        return m


def gray(value: Value, width: int) -> Value:
    """``value`` (its ``width`` low bits) in Gray code."""
    value = value[:width]
    return value ^ value[1:]


def _binary(gray: Value) -> Value:
    bits = [gray[-1]]
    for i in reversed(range(len(gray) - 1)):
        bits.insert(0, bits[0] ^ gray[i])
    return Cat(*bits)


class ReadAheadAsyncFIFO(Elaboratable, fifo.FIFOInterface):
    """An asynchronous FIFO (Gray-code pointers, as :class:`~amaranth.lib.fifo.AsyncFIFO`,
    Cummings' style #2) whose read side is registers only: ``r_data`` is a register, filled
    from the memory whenever it is empty or being taken and the memory is not empty, and the
    memory's read address is a register of its own (the next entry's, advanced when one is
    read). So no read address follows the empty compare or ``r_en`` in the same cycle (in
    ``AsyncFIFO`` it comes from the empty compare through the read pointer's adder, one
    cycle for the whole path); ``r_en`` and the empty compare drive only the registers'
    enables. The memory (``2 ** ceil_log2(depth - 1)`` entries, read asynchronously: LUT
    memory) and the output register together hold ``depth`` entries, as
    :class:`~amaranth.lib.fifo.AsyncFIFOBuffered` (a power of 2 plus one).

    The interface is :class:`~amaranth.lib.fifo.FIFOInterface`'s (``w_data``, ``w_en``,
    ``w_rdy``, ``w_level``; ``r_data``, ``r_en``, ``r_rdy``, ``r_level``), ``r_rst`` as
    ``AsyncFIFO``'s, and so is the reset: the write domain's reset empties the FIFO (the read
    side follows it through an asynchronous-set synchroniser, and ``r_rst`` tells it); the read
    domain's reset leaves the entries in it, the one in ``r_data`` too. ``w_level`` counts the
    entries in the memory (not the one in ``r_data``), a cycle late, as ``AsyncFIFO``'s.
    Latency: a written entry is offered on ``r_data`` from the third read-domain edge after
    the write's (two in the synchroniser, one for the read into ``r_data``); full throughput,
    one entry a cycle in and out, while neither side waits.

    With ``checked=False`` the writer promises never to write while the memory is full (as
    :func:`cross`'s room register does), and a write is ``w_en`` alone, not ``w_en & w_rdy``:
    the write pointer's adder then follows no Gray-code compare of the synchronised read
    pointer in the same cycle (timing). ``w_rdy`` still says whether there is room.
    """

    def __init__(
        self,
        *,
        width: int,
        depth: int,
        r_domain: str = "read",
        w_domain: str = "write",
        checked: bool = True,
    ):
        if depth < 3:
            raise ValueError(f"the depth must be at least 3, not {depth}")
        bits = (depth - 2).bit_length()  # the memory's address bits
        super().__init__(width=width, depth=(1 << bits) + 1)
        self.r_rst = Signal()
        self._bits = bits
        self._checked = bool(checked)
        self._r_domain = r_domain
        self._w_domain = w_domain

    def elaborate(self, platform):
        m = Module()
        bits = self._bits
        w, r = m.d[self._w_domain], m.d[self._r_domain]
        memory = m.submodules.storage = Memory(shape=self.width, depth=1 << bits, init=[])
        wp = memory.write_port(domain=self._w_domain)
        rp = memory.read_port(domain="comb")

        # the write side, as AsyncFIFO's
        produce, produce_gray = Signal(bits + 1), Signal(bits + 1)
        consume_w_gray, consume_w = Signal(bits + 1), Signal(bits + 1)
        write = self.w_en & self.w_rdy if self._checked else self.w_en
        w += [
            produce.eq(produce + write),
            produce_gray.eq(gray(produce + write, bits + 1)),
            consume_w.eq(_binary(consume_w_gray)),
            self.w_level.eq(produce - consume_w),
        ]
        m.d.comb += [
            self.w_rdy.eq(
                (produce_gray[-1] == consume_w_gray[-1])
                | (produce_gray[-2] == consume_w_gray[-2])
                | (produce_gray[:-2] != consume_w_gray[:-2])
            ),
            wp.addr.eq(produce[:-1]),
            wp.data.eq(self.w_data),
            wp.en.eq(write),
        ]

        # the read side: every register reset_less, emptied by the write domain's reset only
        consume = Signal(bits + 1, reset_less=True)  # the next entry the memory gives
        consume_gray = Signal(bits + 1, reset_less=True)
        produce_r_gray = Signal(bits + 1)
        m.submodules.produce_cdc = FFSynchronizer(
            produce_gray, produce_r_gray, o_domain=self._r_domain
        )
        m.submodules.consume_cdc = FFSynchronizer(
            consume_gray, consume_w_gray, o_domain=self._w_domain
        )
        valid = Signal(reset_less=True)
        data = Signal(self.width, reset_less=True)
        r_rst = Signal()
        m.submodules.rst_cdc = AsyncFFSynchronizer(
            ResetSignal(self._w_domain, allow_reset_less=True), r_rst, o_domain=self._r_domain
        )
        load = (consume_gray != produce_r_gray) & (~valid | self.r_en)
        m.d.comb += [
            rp.addr.eq(consume[:-1]),
            self.r_rdy.eq(valid),
            self.r_data.eq(data),
            self.r_level.eq(_binary(produce_r_gray) - consume + valid),
        ]
        with m.If(r_rst):
            r += [
                consume.eq(_binary(produce_r_gray)),
                consume_gray.eq(produce_r_gray),
                valid.eq(0),
                self.r_rst.eq(1),
            ]
        with m.Else():
            r += self.r_rst.eq(0)
            with m.If(load):
                r += [
                    data.eq(rp.data),
                    valid.eq(1),
                    consume.eq(consume + 1),
                    consume_gray.eq(gray(consume + 1, bits + 1)),
                ]
            with m.Elif(self.r_en):
                r += valid.eq(0)
        return m


def cross(
    m: Module,
    name: str,
    source,
    sink,
    *,
    depth: int,
    w_domain: str,
    r_domain: str,
    room_domain: str | None = None,
    hold=None,
) -> ReadAheadAsyncFIFO:
    """The transfers of the stream ``source`` (written in ``w_domain``) to the stream ``sink``
    (read in ``r_domain``) through a :class:`ReadAheadAsyncFIFO` of ``depth`` entries in its
    memory (and one in its output register), the submodule ``name``, which it returns.
    ``source``'s ready comes from a register in ``room_domain`` (default ``w_domain``), not
    from the FIFO's fullness, a Gray-code compare (timing): the level a cycle ago left room
    for this cycle's write and the last one's. ``hold`` (a signal of ``room_domain``) keeps it
    low, while the crossing is emptied. ``sink``'s valid and payload are registers, and its
    ready drives no read address (timing). With the room register in the write domain, that
    promise is the FIFO's: its writes are not checked again against its fullness
    (``checked=False``). Room is given when the level, which lags the writes by two cycles
    and counts reads late, is at most ``depth - 3``, so at most three more writes come
    before room is taken back: the memory, of at least ``depth`` entries, never holds more
    than ``depth`` (:data:`BREAK_ROOM` breaks it for the test that shows it)."""
    same_domain = room_domain in (None, w_domain)
    crossing = ReadAheadAsyncFIFO(
        width=len(Value.cast(source.payload)),
        depth=depth + 1,
        w_domain=w_domain,
        r_domain=r_domain,
        checked=not same_domain,
    )
    m.submodules[name] = crossing
    room = Signal()
    fits = crossing.w_level < (depth + 4 if BREAK_ROOM == "late" else depth - 2)
    m.d[room_domain or w_domain] += room.eq(fits if hold is None else fits & ~hold)
    m.d.comb += [
        crossing.w_en.eq(source.valid & room),
        crossing.w_data.eq(source.payload),
        source.ready.eq(room),
        sink.valid.eq(crossing.r_rdy),
        sink.payload.eq(crossing.r_data),
        crossing.r_en.eq(sink.ready),
    ]
    return crossing
