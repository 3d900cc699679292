"""The partition store in SDRAM (``--store sdram``): the table's semantics, its entries in the
board's SDRAM behind :class:`~nfacep.hdl.sdram.controller.SDRAMController`, a write-back cache
of recent buckets in block RAM in front.

:class:`SdramPartitioner` has the interface of the other partition stores
(:func:`~nfacep.hdl.partitioner.store_signature`, plus ``sdram``, the chip's pins) and the
semantics of :class:`~nfacep.hdl.table.TablePartitioner`, so ``nfacep.reference.capacity``
models it as it models the table:

- **Direct** (key width ``w <= log2(entries)``): the key is its entry's index; no drops.
- **Hashed**: ``entries / ways`` buckets of ``ways`` entries; a key's bucket is the low bits
  of the CRC-32 of its ``ceil(w / 8)`` little-endian bytes
  (:func:`nfacep.reference.capacity.key_crc32`); a hit updates the key's entry, else the
  lowest-numbered free way is taken (``fresh``), else the tuple is ``dropped`` and counted.
- **Timers** (``tick_tuples = K > 0``): a tick after every ``K``-th tuple; an entry stores the
  tick count of its last tuple (``i // K``) modulo ``2**S`` (``stamp_bits``, at least 48) and is
  in use at tuple ``j`` iff valid and ``(j // K - stamp) mod 2**S < 2**timer_bits - 1``. With
  48 bits there is no aging sweep (the table's needs one for its narrow stamps): a stamp is
  misread only after ``2**48`` ticks without a tuple of its key, more than 2.8e14 tuples
  (six years at 1.5 M tuples/s).

How it works (one clock domain, the controller's):

- **Entries in SDRAM.** An entry (valid, tag when hashed, state, stamp with timers) takes
  ``entry_words`` words of the chip's width; a bucket's ``ways`` entries are one *line* of
  ``line_words`` consecutive words in one row of one bank. The bucket's low bits choose the
  bank, the next its row, the high bits its place in the row (:meth:`SdramTable.address`):
  buckets equal modulo ``row_lines`` share a row. After reset the store writes every line it
  uses to zero (all entries free) before it takes a tuple: SDRAM powers up with anything in it.
- **The cache** (``lines`` lines, direct-mapped by the bucket's low bits, in block RAM, with
  write-back; by default as many as :data:`CACHE_BITS` hold): per line, in block RAM, the
  bucket it holds and whether that is ``valid``. With at least ``row_lines`` lines (the
  default, for one-word buckets on the 5A-75B) the bucket a line gives up and the one it takes
  lie in one row: the write-back and the fetch are one row activation, a WRITE and a READ.
- **Input and hazard tracking.** The tag check takes three stages: stage 1 (the tuple's
  bucket, after the CRC) reads its line's tag (the bucket the line holds, and whether it is
  valid) from the tag memory, stage 2r has the memory's output and registers it, stage 2
  compares it with the tuple's bucket into stage 3. (A line holds buckets whose low bits are
  its index, so a tag is the bucket's other bits.) Only stage 3 changes tags, so a tag read
  stays true while its tuple waits; a line stage 3 gives away in the clock of the read or of
  the move into stage 2 is registered beside it, and one it gives away in the clock stage 2
  hands its tuple on is forwarded into the comparison, made for both cases before the
  allocation chooses. Stage 3 keeps the tag it found: the bucket a job writes
  back. Beside the tuple queue, in its order, registers hold each queued tuple's line and
  whether its words have arrived (:class:`~nfacep.hdl.sdram.lookup.LineTags`): a line has
  users while a queued tuple names it (a comparison per queued tuple, registered). In stage 3,
  if the line holds the bucket (filled or still being fetched) the tuple joins the queue for
  it. Otherwise, if the line has no users, it is given to the bucket at once (so a later
  tuple of the same bucket finds it and never fetches it again) and a *job* is queued: write
  the old bucket back if the line was valid, then read the new one. If the line has users
  the input waits (``i_stream.ready`` low) until they are done: a line is never taken from
  under a queued tuple. The tuple queue holds ``queue`` tuples, so up to that many buckets
  are fetched at once, and the controller's per-bank queues overlap them over the banks.
- **Fetch.** Jobs are done in order: the victim line is read from block RAM, its words are
  written to SDRAM, then the new bucket's words are requested; the controller answers reads in
  request order and keeps order within a bank (a bucket's write-back and its later fetch are
  in one bank), so a fetch always reads what the write-back wrote. The words read land in the
  line (a write port with word enables); when the last has landed, the queued tuples of that
  line are marked filled.
- **Update, in input order.** The queue's head waits until its line is filled, reads the line
  (into a register: two clocks), decides hit, free way or drop, applies ``update`` and writes
  the line back and hands the record to the output register: three clocks
  per tuple. Records
  leave in input order: the queue is first in, first out, and the head is its only reader.
- **Refresh and back-pressure** are the controller's: refresh stalls the requests, which stall
  the jobs, which fill the queue, which holds ``i_stream.ready`` low; nothing is dropped. A
  stalled output holds the head.

``hazard_tracking=False`` (tests only) lets the input take a line that still has users: the
queued tuples then find another bucket's entries, and the tests see it.

Here the table's place in SDRAM (:class:`SdramTable`), the input, the queue's head and the
whole; the tag check and the users' counts are :mod:`~nfacep.hdl.sdram.lookup`'s, the traffic
with the chip (clearing, write-backs and fetches) :mod:`~nfacep.hdl.sdram.fetch`'s.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Shape, ShapeLike, Signal, Value
from amaranth.lib import data, fifo, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import Out

from ..partitioner import check_store_arguments, store_signature
from ..stream import StreamBuffer
from ..table_geometry import TableGeometry
from .controller import SDRAMController, pins_signature
from .fetch import SdramFetch
from .lookup import CacheLookup, LineTags
from .timing import ENGINE_SDRAM, SDRAMCycles, SDRAMGeometry, SDRAMTiming

__all__ = ["BANK_QUEUE", "CACHE_BITS", "QUEUE", "STAMP_BITS", "SdramPartitioner", "SdramTable"]

#: The least width of a stamp: ticks stored modulo 2**48 (see the module's docstring).
STAMP_BITS = 48

#: The store's default ``queue`` (tuples waiting for their lines) and its controller's bank
#: queues (``queue_depth``; the reorder buffer holds them all full): deeper than the
#: controller's own defaults, so that more buckets are fetched at once over the two banks
#: (``benchmarks/sdram_store.py``; hdl/sdram/README.md, "Against the line").
QUEUE = 16
BANK_QUEUE = 8

#: The default cache's size in bits of block RAM (its lines' words): 4,096 lines of one
#: 32-bit word, 8 of the LFE5U-25F's 56 DP16KD blocks; enough lines for the 5A-75B's
#: ``row_lines`` (2 banks x 2,048 rows) with one-word buckets.
CACHE_BITS = 4096 * 32


class SdramTable(TableGeometry):
    """Where a table of partitions lies in SDRAM: the table's geometry
    (:class:`~nfacep.hdl.table_geometry.TableGeometry`), each bucket one line of consecutive
    words in one row of ``geometry``. What :class:`SdramPartitioner` builds, and all a command
    needs to know whether a table fits the chip: raises ValueError when it does not (or for
    arguments out of range), naming the words it needs.

    Parameters
    ----------
    key_shape, state_width, entries, ways, timer_bits, tick_tuples
        As for :class:`SdramPartitioner`.
    geometry : :class:`~nfacep.hdl.sdram.timing.SDRAMGeometry`
        The chip.
    """

    def __init__(
        self,
        *,
        key_shape: ShapeLike,
        state_width: int,
        entries: int,
        ways: int,
        timer_bits: int = 4,
        tick_tuples: int = 0,
        geometry: SDRAMGeometry = ENGINE_SDRAM.geometry,
    ):
        super().__init__(key_shape=key_shape, state_width=state_width, entries=entries, ways=ways)
        self.geometry = geometry
        # direct: one entry per bucket, the key its index; only the 2**w a key can address
        self._line_entries = 1 if self._direct else ways
        self._stamp_bits = max(STAMP_BITS, timer_bits + 1) if tick_tuples else 0
        self._entry_words = max(1, -(-self.entry_layout.size // geometry.width))
        self._line_words = self._line_entries * self._entry_words
        self._line_span = 1 << (self._line_words - 1).bit_length()  # words a line's address takes
        if self._line_span > geometry.columns:
            raise ValueError(
                f"a bucket of {self._line_words} words does not fit a row of "
                f"{geometry.columns} columns"
            )
        if self.clearing_words > geometry.words:
            raise ValueError(
                f"{self.buckets} buckets of {self._line_span} words need "
                f"{self.clearing_words} words of SDRAM, more than its {geometry.words}"
            )
        # a bucket's bits, low to high: its bank, its row, its line's place in the row
        bucket_bits = (self.buckets - 1).bit_length()
        slot_bits = (geometry.columns - 1).bit_length() - (self._line_span - 1).bit_length()
        self._bank_bits = min((geometry.banks - 1).bit_length(), bucket_bits)
        self._row_bits = max(0, bucket_bits - self._bank_bits - slot_bits)
        self._slot_bits = bucket_bits - self._bank_bits - self._row_bits

    @property
    def entry_words(self) -> int:
        """SDRAM words of one entry."""
        return self._entry_words

    @property
    def line_words(self) -> int:
        """SDRAM words of one bucket (all its ways)."""
        return self._line_words

    @property
    def clearing_words(self) -> int:
        """Words the table takes in SDRAM (every bucket's line, rounded up to a power of two):
        what the store writes after reset before it takes the first tuple."""
        return self.buckets * self._line_span

    @property
    def row_lines(self) -> int:
        """Buckets that share no row: the bucket's low bits choose its bank and then its row
        (the high bits its place in the row), so buckets equal modulo ``row_lines`` lie in one
        row of one bank. A cache of at least this many lines, direct-mapped by the low bits,
        writes a line back to the row it fetches the new bucket from: one row activation for
        both."""
        return 1 << (self._bank_bits + self._row_bits)

    def address(self, bucket: int, word: int) -> tuple[int, int, int]:
        """(bank, row, column) of ``word`` of ``bucket``'s line (what the store's
        ``_address`` builds)."""
        bank = bucket & ((1 << self._bank_bits) - 1)
        row = bucket >> self._bank_bits & ((1 << self._row_bits) - 1)
        slot = bucket >> (self._bank_bits + self._row_bits)
        return bank, row, slot * self._line_span + word


class SdramPartitioner(SdramTable, CacheLookup, SdramFetch, wiring.Component):
    """Stream partitioner over a table in SDRAM (``--store sdram``); see the module docstring.

    Parameters
    ----------
    key_shape, payload_shape, state_width, result_shape, update, counter_width
        As for :class:`~nfacep.hdl.table.TablePartitioner`.
    entries, ways, timer_bits, tick_tuples
        As for :class:`~nfacep.hdl.table.TablePartitioner` (no aging sweep: wide stamps).
    geometry, timing, clk_freq
        The SDRAM chip and the clock (Hz) the controller's timing is computed for (by default
        :data:`~nfacep.hdl.sdram.timing.ENGINE_SDRAM`'s, the engine's).
    lines : :class:`int`
        Lines (buckets) of the block-RAM cache, a power of two; by default as many as
        :data:`CACHE_BITS` hold (at most the buckets).
    queue : :class:`int`
        Tuples waiting for their line at most (and so buckets fetched at once).
    controller : :class:`dict`
        Further arguments of :class:`SDRAMController` (``queue_depth``, by default
        :data:`BANK_QUEUE`; ``reorder``, by default room for every bank queue full;
        ``read_delay``, and, for tests only, ``cycles_override``).
    hazard_tracking : :class:`bool`
        Tests only: ``False`` breaks it (see the module docstring).
    clear : :class:`bool`
        Write every entry empty after reset (``clearing_words`` writes). ``False`` only for
        benchmarks that simulate a chip whose words all read zero already (clearing a
        million entries takes a million clocks, minutes in the simulator).

    Members
    -------
    i_stream, o_stream, tuples, drops
        As for the other stores.
    sdram
        The chip's pins (:func:`~nfacep.hdl.sdram.controller.pins_signature`).
    """

    def __init__(
        self,
        *,
        key_shape: ShapeLike,
        payload_shape: ShapeLike,
        state_width: int,
        result_shape: ShapeLike,
        entries: int,
        ways: int,
        update,
        timer_bits: int = 4,
        tick_tuples: int = 0,
        counter_width: int = 32,
        geometry: SDRAMGeometry = ENGINE_SDRAM.geometry,
        timing: SDRAMTiming = ENGINE_SDRAM.timing,
        clk_freq: float = ENGINE_SDRAM.clk_freq,
        lines: int | None = None,
        queue: int = QUEUE,
        controller: dict | None = None,
        hazard_tracking: bool = True,
        clear: bool = True,
    ):
        Shape.cast(payload_shape)
        Shape.cast(result_shape)
        if lines is not None and (not isinstance(lines, int) or lines < 1 or lines & (lines - 1)):
            raise ValueError(f"Lines must be a positive power of two, not {lines!r}")
        if not isinstance(queue, int) or queue < 1:
            raise ValueError(f"Queue must be a positive integer, not {queue!r}")
        check_store_arguments(counter_width, timer_bits, tick_tuples)
        if not callable(update):
            raise TypeError(f"Update function must be callable, not {update!r}")
        SdramTable.__init__(
            self,
            key_shape=key_shape,
            state_width=state_width,
            entries=entries,
            ways=ways,
            timer_bits=timer_bits,
            tick_tuples=tick_tuples,
            geometry=geometry,
        )
        self._payload_shape, self._result_shape = payload_shape, result_shape
        self._update = update
        self._timer_bits, self._tick_tuples = timer_bits, tick_tuples
        self._counter_width = counter_width
        self.timing, self.clk_freq = timing, clk_freq
        self._controller_args = dict(controller or {})
        depth = self._controller_args.setdefault("queue_depth", BANK_QUEUE)
        self._controller_args.setdefault("reorder", 1 << (geometry.banks * depth - 1).bit_length())
        self._queue = queue
        self._hazard_tracking = hazard_tracking
        self._clear_after_reset = clear
        if lines is None:  # as many as CACHE_BITS of block RAM hold
            lines = 1 << (CACHE_BITS // (self._line_words * geometry.width)).bit_length() - 1
        self._lines = max(1, min(lines, self.buckets))
        signature = store_signature(key_shape, payload_shape, result_shape, counter_width)
        signature["sdram"] = Out(pins_signature(geometry))
        wiring.Component.__init__(self, signature)

    @property
    def lines(self) -> int:
        """Lines of the block-RAM cache."""
        return self._lines

    @property
    def cycles(self) -> SDRAMCycles:
        """The controller's timing in clocks."""
        return self._controller_args.get("cycles_override") or self.timing.cycles(self.clk_freq)

    # --- the whole -------------------------------------------------------------------------------

    def elaborate(self, platform):
        m = Module()
        g = self.geometry
        m.submodules.controller = ctrl = SDRAMController(
            g, self.timing, self.clk_freq, **self._controller_args
        )
        wiring.connect(m, ctrl.sdram, wiring.flipped(self.sdram))
        m.submodules.out = out = StreamBuffer(self.o_stream.payload.shape())
        wiring.connect(m, out.o_stream, wiring.flipped(self.o_stream))

        lines = self._lines
        line_bits = max(1, (lines - 1).bit_length())
        bucket_bits = max(1, (self.buckets - 1).bit_length())
        cache = Memory(shape=self._line_words * g.width, depth=lines, init=[])
        m.submodules.cache = cache
        w_port = cache.write_port(granularity=g.width)
        head_port = cache.read_port()
        victim_port = cache.read_port()
        tags = LineTags(m, lines, bucket_bits, self._queue)

        clearing = self._clear(m, ctrl)
        s1, s1_valid, s1_bucket, s1_now, take = self._input(m, clearing, bucket_bits)
        queued = self._queue_layout(line_bits)
        m.submodules.queue = q = fifo.SyncFIFOBuffered(width=queued.size, depth=self._queue)
        job = data.StructLayout(
            {"line": line_bits, "new": bucket_bits, "old": bucket_bits, "write_back": 1}
        )
        m.submodules.jobs = jobs = fifo.SyncFIFOBuffered(width=job.size, depth=self._queue)

        # stages 2 and 3: the tag check, then the allocation
        s3, go, allocate = self._lookup(m, tags, (s1, s1_valid, s1_bucket, s1_now), take, line_bits)
        t, t_valid, t_bucket, t_now, t_line, t_holds, old, old_valid = s3
        free = Signal(name="s3_free")  # stage 3's line has no users (a register)
        m.d.comb += [
            go.eq(t_valid & q.w_rdy & (t_holds | (free & jobs.w_rdy))),
            allocate.eq(go & ~t_holds),
        ]
        entry = data.View(queued, q.w_data)
        new_job = data.View(job, jobs.w_data)
        m.d.comb += [
            entry.key.eq(t.key),
            entry.payload.eq(t.payload),
            entry.now.eq(t_now),
            entry.line.eq(t_line),
            q.w_en.eq(go),
            new_job.line.eq(t_line),
            new_job.new.eq(t_bucket),
            new_job.old.eq(old),
            # every valid line is written back: in the row its new bucket is read from
            # (``row_lines``), so that costs a WRITE, not a row activation
            new_job.write_back.eq(old_valid),
            jobs.w_en.eq(allocate),
        ]
        filled_line, filled = self._fetch(m, ctrl, jobs, job, victim_port, w_port, clearing)
        done = self._head(m, q, queued, head_port, w_port, out, tags)
        if self._hazard_tracking:
            self._free(m, tags, free, go)
        else:
            m.d.comb += free.eq(1)
        tags.drive(m, (go, t_line, allocate, t_bucket), done, (filled_line, filled), clearing)
        return m

    def _queue_layout(self, line_bits: int) -> data.StructLayout:
        return data.StructLayout(
            {
                "key": self._key_shape,
                "payload": self._payload_shape,
                "now": self._stamp_bits,
                "line": line_bits,
            }
        )

    def _input(self, m: Module, clearing: Signal, bucket_bits: int):
        """Stage 1: the input register, its bucket and tick count. Returns ``(s1, s1_valid,
        s1_bucket, s1_now, take)``; ``take`` (driven by the caller) says stage 1 may take a
        tuple (it is empty or hands its tuple on)."""
        shape = self.i_stream.payload.shape()
        s1 = Signal(shape, name="s1")
        s1_valid = Signal(name="s1_valid")
        s1_now = Signal(max(1, self._stamp_bits), name="s1_now")
        s1_bucket = Signal(bucket_bits, name="s1_bucket")
        take = Signal()
        accept = Signal()
        m.d.comb += [
            self.i_stream.ready.eq(take & ~clearing),
            accept.eq(self.i_stream.valid & self.i_stream.ready),
        ]
        with m.If(accept):
            m.d.sync += [s1.eq(self.i_stream.payload), self.tuples.eq(self.tuples + 1)]
        with m.If(take):
            m.d.sync += s1_valid.eq(accept)
        key = Value.cast(s1.key).as_unsigned()
        if self._direct:
            m.d.comb += s1_bucket.eq(key)
        else:
            m.submodules.hash = hasher = self.crc_parameters.create()
            m.d.comb += [
                hasher.start.eq(accept),
                hasher.valid.eq(accept),
                hasher.data.eq(Value.cast(self.i_stream.payload.key).as_unsigned()),
                s1_bucket.eq(hasher.crc[:bucket_bits]),
            ]
        if self._tick_tuples:
            now = Signal(self._stamp_bits, name="now")
            count = Signal(range(self._tick_tuples), name="tick_count")
            with m.If(accept):
                m.d.sync += s1_now.eq(now)
                if self._tick_tuples == 1:
                    m.d.sync += now.eq(now + 1)
                else:
                    with m.If(count == self._tick_tuples - 1):
                        m.d.sync += [count.eq(0), now.eq(now + 1)]
                    with m.Else():
                        m.d.sync += count.eq(count + 1)
        return s1, s1_valid, s1_bucket, s1_now, take

    def _head(self, m, q, queued, head_port, w_port, out, tags):
        """The queue's head: wait for its line, read it, decide, update, write it back, hand
        the record on. Returns ``done``: 1 in the cycle the head's tuple leaves."""
        width = self.geometry.width
        head = data.View(queued, q.r_data)
        done = Signal(name="head_done")
        m.d.comb += head_port.addr.eq(head.line)
        # the line read, registered (no path from the block RAM's output to its input)
        read = Signal(len(head_port.data), name="head_read")
        layout = self.entry_layout
        span = self._entry_words * width
        ways = [
            data.View(layout, read[i * span : i * span + layout.size])
            for i in range(self._line_entries)
        ]
        key = Value.cast(head.key).as_unsigned()
        hit, dropped, way, current = self._decide(m, ways, key, head.now)
        new_state, result = self._update(m, current, head.payload)
        written = Signal(layout, name="head_entry")
        m.d.comb += [
            written.valid.eq(1),
            written.state.eq(new_state),
        ]
        if self._stamp_bits:
            m.d.comb += written.stamp.eq(head.now)
        if not self._direct:
            m.d.comb += written.tag.eq(key)
        line_data = Signal(len(head_port.data), name="head_line")
        m.d.comb += line_data.eq(read)
        for i in range(self._line_entries):
            with m.If(way == i):
                m.d.comb += line_data.word_select(i, span).eq(written.as_value())
        pay = out.i_stream.payload
        m.d.comb += [
            pay.key.eq(head.key),
            pay.payload.eq(head.payload),
            pay.result.eq(result),
            pay.dropped.eq(dropped),
            pay.fresh.eq(~hit & ~dropped),
        ]
        with m.FSM(name="head"):
            with m.State("WAIT"), m.If(q.r_rdy & tags.head_filled()):
                m.d.comb += head_port.en.eq(1)
                m.next = "LOAD"
            with m.State("LOAD"):
                m.d.sync += read.eq(head_port.data)
                m.next = "UPDATE"
            with m.State("UPDATE"):
                # the head may write the line now: the words read wait (a register decides)
                m.d.comb += [out.i_stream.valid.eq(1), self._head_writes.eq(1)]
                with m.If(out.i_stream.ready):
                    m.d.comb += [done.eq(1), q.r_en.eq(1)]
                    with m.If(~dropped):
                        m.d.comb += [
                            w_port.addr.eq(head.line),
                            w_port.data.eq(line_data),
                            w_port.en.eq(-1),
                        ]
                    with m.Else():
                        m.d.sync += self.drops.eq(self.drops + 1)
                    m.next = "WAIT"
        return done

    def _decide(self, m: Module, ways: list, key: Value, now: Value):
        """The table's rule over the line's entries ``ways``: ``(hit, dropped, way, state)``,
        the way the tuple updates (its key's, else the lowest free one) and the state it
        finds there (0 when fresh)."""
        live = Cat(self._live(e, now) for e in ways)
        matches = Cat(
            live[i] & (Const(1) if self._direct else e.tag == key) for i, e in enumerate(ways)
        )
        hit = matches.any()
        dropped = Signal(name="head_dropped")
        way = Signal(range(max(2, self._line_entries)), name="head_way")
        m.d.comb += dropped.eq(~hit & live.all())
        for i in reversed(range(self._line_entries)):
            with m.If(~live[i]):
                m.d.comb += way.eq(i)
        for i in range(self._line_entries):
            with m.If(matches[i]):
                m.d.comb += way.eq(i)
        current = Signal(self._state_width, name="head_state")
        for i, e in enumerate(ways):
            with m.If(matches[i]):
                m.d.comb += current.eq(e.state)
        return hit, dropped, way, current

    def _live(self, e, now):
        """An entry in use at tick ``now``: valid and (timers) fewer than ``2**B - 1`` ticks
        since its stamp, modulo ``2**S``."""
        if not self._tick_tuples:
            return e.valid
        age = (now - e.stamp)[: self._stamp_bits]
        return e.valid & (age < (1 << self._timer_bits) - 1)
