"""The table partitioner: one state vector per partition key in block RAM, one tuple per clock.

The second partition store beside the swap pipeline (``hdl/partitioner.py``), chosen with
``--store table``: the same stream interface and counters as
:class:`~nfacep.hdl.partitioner.StreamPartitioner`, the same caller-supplied ``update``
function, but the partitions live in ``amaranth.lib.memory`` banks (block RAM on ECP5 and
iCE40) instead of a chain of registers. ``nfacep.reference.capacity`` (``table_slots``,
``key_crc32``) models which tuples it drops.

Its parts, each in a module of its own: the geometry shared with the SDRAM store
(:mod:`nfacep.hdl.table_geometry`), stage 1 with the read registers, the aging sweep and the
clearing after reset (:mod:`nfacep.hdl.table_input`), the stages after the read
(:mod:`nfacep.hdl.table_stages`), their forwarding of the writes in flight
(:mod:`nfacep.hdl.table_forwarding`) and tick stamps (:mod:`nfacep.hdl.table_stamps`); here the
banks, their writes and the component that joins them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Shape, ShapeLike, Signal, Value, ValueLike
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory

from . import table_forwarding
from .bram import RegisteredBank, dp16kd_blocks, register_copy
from .partitioner import check_store_arguments, store_signature
from .stream import StreamBuffer
from .table_banks import BANK_ROW_GROUPS, TableBanks
from .table_geometry import TableGeometry
from .table_input import TableInput
from .table_stages import _Stages

__all__ = ["BANK_ROW_GROUPS", "RESULT_STAGE_WIDTH", "SPREAD_BLOCKS", "TablePartitioner"]

#: A result wider than this (start positions, 48 bits each) leaves stage 4 through a register
#: of its own by default (``result_stage``): a cycle more of latency.
RESULT_STAGE_WIDTH = 32

#: A table of more DP16KD blocks than this spreads over the device: by default its banks'
#: ports pass copies beside each block (``copies``), and with ``registered=None`` it is the
#: registered table (the simple one's read, decision and write in one cycle would cross the
#: device).
SPREAD_BLOCKS = 64


UpdateFunction = Callable[[Module, Value, "data.View | Value"], tuple[ValueLike, ValueLike]]


class TablePartitioner(TableGeometry, TableInput, TableBanks, wiring.Component):
    """Stream partitioner over a table in block RAM (``--store table``), with timers.

    The table has ``entries`` entries (a power of two, ``E``) and for every input tuple produces
    one output record, in input order, exactly as this sequential model does. Let ``w`` be the
    key's width:

    - **Direct** (``w <= log2(E)``): the key is the address of its own entry. A tuple whose
      entry was written before finds its state there; otherwise it starts from the all-zero
      state (``fresh``). No tuple is ever dropped. Only the ``2**w`` entries a key can address
      are built, interleaved over ``min(W, 2**w)`` banks by the key's low bits (which only
      shortens the clearing sweep).
    - **Hashed** (``w > log2(E)``): the table is ``E / W`` buckets of ``W = ways`` entries; a
      key's bucket is the low ``log2(E / W)`` bits of the CRC-32 (ISO-HDLC: zlib's, Ethernet's,
      ``amaranth.lib.crc.catalog.CRC32_ISO_HDLC``) of the key taken as ``ceil(w / 8)``
      little-endian bytes, which is :func:`nfacep.reference.capacity.key_crc32`. Each entry holds
      (valid, the whole key as tag, state). A tuple whose key is stored in its bucket finds its
      state there; otherwise it takes the lowest-numbered free way of the bucket and starts
      from the all-zero state (``fresh``); if the bucket is full it is dropped (``dropped``,
      counted in ``drops``) and nothing changes.

    A processed tuple's entry then holds ``update(state, payload)``. Without ticks
    (``tick_tuples == 0``) entries are never freed, so in each bucket the first ``W`` keys stay.

    **Timers** (``tick_tuples = K > 0``, ``M = 2**timer_bits - 1``), exactly as the swap
    pipeline's: a tick happens right after every ``K``-th tuple (dropped ones included), and a
    partition with no tuple for ``M`` ticks is freed. Each entry stores the tick count its
    last tuple saw (``i // K`` for the tuple at index ``i``) modulo ``2**S``, ``S =
    stamp_bits``; a tuple at index ``j`` finds an entry in use only if it is valid and
    ``(j // K - stamp) mod 2**S < M``, so freeing needs no write. What keeps the stamps from
    wrapping unseen is the aging sweep: in every cycle the pipeline advances without taking a
    tuple an aging step checks the next entry (one way of one row, round robin) and writes it
    invalid if it has aged out. It flows through the same stages as a tuple (its read sees
    every write before it, its write is forwarded to every operation after it), so it never
    undoes a tuple's write. After ``sweep_every`` tuples taken without a step the input waits
    one cycle for one: on input that never pauses, one cycle in ``sweep_every + 1``. Any
    ``R = rows * banks`` consecutive steps then span at most ``R * sweep_every`` tuples, so an
    entry is checked at most ``D = ceil(R * sweep_every / K)`` ticks after it could first
    age out; ``S`` is the least width with ``2**S >= M + D + 1``.

    Pipeline: the input register (and, hashed, the CRC register) takes the tuple; the next
    cycle presents its row to every bank's read port. Without ``registered`` the read ports
    are transparent for their bank's write port (the read sees the write made at the same
    edge), and the cycle after the read compares the ways' tags, applies ``update``, writes
    the entry back and hands the record to the output register
    (:class:`~nfacep.hdl.stream.StreamBuffer`). With ``registered`` (the default) the read
    data passes ``read_stages`` registers (:class:`~nfacep.hdl.bram.RegisteredBank`: on
    ECP5 the block RAM's own output register, then, with ``read_stages`` 4 or 5, a flip-flop,
    which leaves a whole cycle to the route from a block RAM far away on the device; the
    others are the tail's, holding beside the row whether each way's entry is in use and the
    tuple's, compared in the cycle before). Stage 3 decides (hit, way, drop)
    from it and from the ``read_stages + 2`` writes it cannot have seen (those of the operation
    in stage 4 and of the last ``read_stages + 1`` written back, all but the newest merged into
    the registers before stage 3 over the two cycles before it), stage 4 applies ``update``,
    and the write-back reaches its banks from registers (``_Stages.registered_tail`` has the
    argument). Either way each tuple sees everything before it, even back-to-back tuples of one
    key or one bucket.

    With timers (``registered``), an entry carries a stamp, and a large table's blocks spread
    over the whole device (65,536 entries: 96 DP16KD on an LFE5U-85F), farther apart than one
    register can reach in a 150 MHz cycle. So (``copies``; also for any table of more than 64
    blocks) the banks' ports pass a register of their own beside each block
    (``RegisteredBank(copies=True)``): the read a cycle later, and a write landing an edge
    later, one more write in flight to forward. In a direct table spread over the device,
    without timers, the read and write address copies are loaded from registers of each
    bank's own (the read row, loaded as stage 1's register is; the write row, loaded from
    copies of stage 3's and stage 4's rows), one of each per group of the bank's blocks
    (:data:`BANK_ROW_GROUPS`), so that no register drives the copies of every block of a
    bank. And with five read registers the third is the table's: next to each block
    it compares the stamp read, part by part, with the tick of the operation it was read for
    (``_Stages.stamp_parts``), and the next cycle only combines those bits. Spread over the
    device with the windows' hints (``update.prepare``) and four read registers, each bank's
    third holds the state read twice, the second copy only for the row read's hint
    (:attr:`_hint_spare`), so that each can be placed beside what reads it. A state wider
    than 24 bits (windows, start_seq) is chosen in stage 3 in groups of 24 bits (16 for a
    state wider than 192 bits, start_seq's), each from copies of its own of the registers the
    choice is made of, so that no register drives every bit's multiplexer.

    Latency: ``3 + read_stages`` cycles (3 without ``registered``), one more with ``copies``,
    one more with ``result_stage``, one more with timers (the read row, the aging step's or
    the tuple's, is registered): 7 by default (8 for a table of more than 64 blocks or a
    result wider than 32 bits, 9 for both), 10 with timers. A tuple
    transferred on ``i_stream`` at clock edge ``n`` has its record valid on ``o_stream`` from
    edge ``n + latency - 1``, so with ``o_stream.ready`` high it is transferred at edge
    ``n + latency``.

    Throughput: one tuple per cycle, sustained, whatever the keys (with ticks, on input that
    never pauses, ``sweep_every`` tuples in ``sweep_every + 1`` cycles).

    Backpressure: the whole pipeline, block-RAM read enables and writes included, advances
    only when the output register is empty or ``o_stream.ready`` is high; otherwise everything
    holds, so nothing is lost however long the stall. ``i_stream.ready`` depends
    combinationally on ``o_stream.ready``; ``o_stream.valid`` is a register.

    Reset: block RAM is not reset, so after every reset a sweep writes all-invalid entries to
    every row of every bank, the banks in parallel: ``rows`` cycles (``E / W`` hashed,
    ``2**w / min(W, 2**w)`` direct) during which ``i_stream.ready`` is low. The table is then
    empty, as the model's is at the start.

    Parameters
    ----------
    key_shape, payload_shape, state_width, result_shape, update, counter_width
        As for :class:`~nfacep.hdl.partitioner.StreamPartitioner`. With ``registered``, an
        ``update`` that has the attributes ``prepare`` (``prepare(m, state, payload) ->
        hint``, combinational, of ``hint_width`` bits) and ``gap`` (``gap(m, earlier,
        later)``, of ``gap_width`` bits) is called as ``update(m, state, payload,
        hint=prepare(m, state, payload), ahead=[...], gaps=[...])``: the hint of the state
        found is registered before stage 4, so that what ``prepare`` does is not on stage 4's
        path (the engine's windows: which stored runs are still live,
        :func:`~nfacep.hdl.nfa_windows.window_hint`), and ``ahead`` holds the payload of the
        operation in stage 3, for which the update returns, as a third value, the hint of the
        state it makes, worked out from its own inputs (``gaps``: the ``gap`` of the two
        payloads, worked out a cycle before), in parts of ``ahead_width`` bits that are
        registered as they are and made a hint after the register (``update.settle(m,
        parts)``). So nothing of ``prepare`` waits for a choice made in the same cycle, and no
        choice follows a comparison in one: each candidate's hint is worked out before stage 3
        chooses the state found (the row read's the cycle before, from the registered row; the
        write handed on last's the cycle before, from its register; each older write in
        flight's two cycles before, from its registered entry), stage 3 only chooses among
        them, and when the operation just ahead wrote the entry stage 4 takes the update's
        hint for it from a register of its own instead, and when the one two ahead did, the
        hint of its entry, worked out in stage 3 from the register that holds it. An
        ``update`` with
        the attributes ``early`` (``early(m, state, payload)``, of ``early_width`` bits) is
        called with ``early=`` what ``early`` made of the state found and its payload in
        stage 3, registered (PREV's comparisons: the high bits compared in stage 3, for each
        state the tuple may find, the low bits in stage 4).
    entries : :class:`int`
        ``E``, the table's entries (a power of two).
    ways : :class:`int`
        ``W``, entries of a bucket (a power of two, at most ``entries``), one bank each.
    timer_bits : :class:`int`
        ``B``: a partition is freed after ``2**B - 1`` ticks without a tuple.
    tick_tuples : :class:`int`
        ``K``: a tick after every ``K``-th input tuple; 0, no ticks (no stamps, no sweep).
    sweep_every : :class:`int`
        With ticks: the most tuples taken between two aging steps (the stamp width grows with
        its logarithm).
    registered : :class:`bool` or ``None``
        Register the block RAM's read data and the write-back, and decide and update in
        separate stages (forwarding the writes in flight): more cycles of latency, no long
        path into or out of the block RAM, and the way decision apart from ``update``.
        ``None``: registered when the table takes more than :data:`SPREAD_BLOCKS` DP16KD
        blocks (:attr:`spread`), else the simple table.
    read_stages : :class:`int`
        With ``registered``: registers on the read path, 3, 4 (the default without timers:
        a flip-flop after the block RAM's output register) or 5 (the default with timers: the
        row read is compared with the tuple's key and tick a cycle earlier, beside the writes
        in flight, one more of them to forward).
    copies : :class:`bool` or ``None``
        With ``registered``: the banks' ports through registers of their own beside each block
        (:class:`~nfacep.hdl.bram.RegisteredBank`): a cycle more of latency, one more write in
        flight to forward. ``None`` (the default): with timers, or when the table takes more
        than :data:`SPREAD_BLOCKS` DP16KD blocks.
    result_stage : :class:`bool` or ``None``
        With ``registered``: the record leaving stage 4 (its key, payload, decision and
        ``update``'s result) passes one register more before the output register, a cycle
        more of latency, so that a result chosen from a wide state (start positions) has a
        cycle to itself, and the route to the output register another. ``None`` (the default):
        when the result is wider than :data:`RESULT_STAGE_WIDTH` bits. An ``update`` with the
        attributes ``finish`` and ``pending_width`` is then called with ``pending=True``: its
        result (of ``pending_width`` bits) is registered as it is, and ``finish(m, pending)``
        after the register makes the result (start_seq: stage 4 decides which stored start,
        the register holds the candidates, the choice is made after it).

    Members
    -------
    i_stream, o_stream, tuples, drops
        As for :class:`~nfacep.hdl.partitioner.StreamPartitioner`.
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
        update: UpdateFunction,
        timer_bits: int = 4,
        tick_tuples: int = 0,
        sweep_every: int = 1024,
        registered: bool | None = True,
        read_stages: int | None = None,
        counter_width: int = 32,
        copies: bool | None = None,
        result_stage: bool | None = None,
    ):
        TableGeometry.__init__(
            self, key_shape=key_shape, state_width=state_width, entries=entries, ways=ways
        )
        Shape.cast(payload_shape)
        Shape.cast(result_shape)
        check_store_arguments(counter_width, timer_bits, tick_tuples)
        if not isinstance(sweep_every, int) or sweep_every < 1:
            raise ValueError(f"Sweep period must be a positive integer, not {sweep_every!r}")
        if read_stages is None:
            read_stages = 5 if tick_tuples else 4
        if read_stages not in (3, 4, 5):
            raise ValueError(f"Read stages must be 3, 4 or 5, not {read_stages!r}")
        if not callable(update):
            raise TypeError(f"Update function must be callable, not {update!r}")

        self._payload_shape = payload_shape
        self._result_shape = result_shape
        self._update = update
        self._counter_width = counter_width
        self._timer_bits = timer_bits
        self._tick_tuples = tick_tuples
        self._sweep_every = sweep_every

        if self._direct:
            self._banks = min(ways, self.addressed)
            self._rows = self.addressed // self._banks
        else:
            self._banks = ways
            self._rows = self.buckets
        if tick_tuples:
            # any R = rows * banks consecutive sweep steps span at most R * sweep_every tuples,
            # so at most D ticks: a stamp of S bits with 2**S >= M + D never wraps unseen
            steps = self._rows * self._banks
            span = -(-steps * sweep_every // tick_tuples) + 1
            self._stamp_bits = ((1 << timer_bits) - 1 + span - 1).bit_length()

        self._registered = self.spread if registered is None else bool(registered)
        self._read_stages = read_stages if self._registered else 1
        self._port_copies(copies)
        if result_stage is None:
            # a wide result (start positions) is a multiplexer over the state stage 4 holds:
            # registered once beside it, the route to the output register is a cycle of its own
            result_stage = Shape.cast(result_shape).width > RESULT_STAGE_WIDTH
        self._result_stage = self._registered and bool(result_stage)
        # an update that can hand its result on before the last choice (start_seq: which
        # stored start) makes that choice after the register, so that the register is loaded
        # with copies of stage 4's and a few gates' decision
        self._finish = getattr(update, "finish", None) if self._result_stage else None

        wiring.Component.__init__(
            self, store_signature(key_shape, payload_shape, result_shape, counter_width)
        )

    def _port_copies(self, copies: bool | None) -> None:
        """Whether the banks' ports are copied beside each block, and whether the stamp is
        compared there."""
        if copies is None:
            # with timers (a stamp in every entry) or when the blocks spread over the device,
            # the banks' ports pass a register of their own beside each block: a cycle more of
            # latency, and a write lands an edge later, one more write in flight to forward
            copies = self._tick_tuples > 0 or self.spread
        self._copies = self._registered and bool(copies)
        # with timers and five read registers the third is the table's, not the bank's: it
        # holds, beside the entry's other fields, the stamp already compared part by part with
        # the operation's tick (``_Stages.stamp_parts``) next to each block
        self._split_stamp = self._copies and self._tick_tuples > 0 and self._read_stages == 5

    @property
    def spread(self) -> bool:
        """Whether the banks take more than :data:`SPREAD_BLOCKS` DP16KD blocks (on ECP5,
        :func:`~nfacep.hdl.bram.dp16kd_blocks`): blocks spread over the device, farther apart
        than one register reaches in a cycle."""
        return self._banks * dp16kd_blocks(self._rows, self.entry_layout.size) > SPREAD_BLOCKS

    @property
    def registered(self) -> bool:
        """Whether the table is the registered one (``registered``), not the simple one."""
        return self._registered

    @property
    def banks(self) -> int:
        """Block-RAM banks (memories) built: the ways, or the direct table's interleave."""
        return self._banks

    @property
    def rows(self) -> int:
        """Rows of each bank, and cycles of the clearing sweep after reset."""
        return self._rows

    @property
    def timers(self) -> bool:
        """Whether entries age (``tick_tuples > 0``): a stamp per entry and the aging sweep."""
        return self._tick_tuples > 0

    @property
    def sweep_every(self) -> int:
        """With timers: at most this many tuples are taken between two aging sweep steps."""
        return self._sweep_every

    @property
    def latency(self) -> int:
        """Clock edges from a tuple's input transfer to its record's output transfer, unstalled."""
        registered = 3 + self._read_stages + self._copies + self._result_stage
        return (registered if self._registered else 3) + self.timers

    @property
    def _missed(self) -> int:
        """Writes back (besides stage 4's) that the read for an operation in stage 3 cannot
        have seen: one per read register after the block RAM latches the address, one more
        with the banks' port copies (a write lands an edge later; the read address copy delays
        the read and the operation alike)."""
        return (
            self._read_stages + self._copies - (table_forwarding.BREAK_FORWARDING == "oldest write")
        )

    def elaborate(self, platform):
        m = Module()
        m.submodules.out = out = StreamBuffer(self.o_stream.payload.shape())
        wiring.connect(m, out.o_stream, wiring.flipped(self.o_stream))
        advance = Signal()
        m.d.comb += advance.eq(out.i_stream.ready)
        clearing, sweep = self._clearing(m)
        chain, read_row, row_next = self._input(m, advance, clearing, sweep)
        read_data, write_ports = self._banks_read(m, platform, advance, read_row, row_next)
        ctx = _Stages(self, m, advance, self.entry_layout, *self._index_bits)
        ctx.platform = platform
        ctx.read_spare = self._read_spare
        if self._registered:
            tail = self._registered_writes(m, ctx, chain, read_data, write_ports, clearing, sweep)
        else:
            tail = self._simple_writes(m, ctx, chain[-1], read_data, write_ports, clearing, sweep)
        if self._result_stage:
            tail = self._result_register(m, advance, *tail)
            if self._finish is not None:
                tail = (*tail[:4], self._finish(m, tail[4]))
        t, t_valid, hit, dropped, result = tail
        m.d.comb += [
            out.i_stream.valid.eq(t_valid),
            out.i_stream.payload.key.eq(t.key),
            out.i_stream.payload.payload.eq(t.payload),
            out.i_stream.payload.result.eq(result),
            out.i_stream.payload.dropped.eq(dropped),
            out.i_stream.payload.fresh.eq(~hit & ~dropped),
        ]
        with m.If(advance & t_valid & dropped):
            m.d.sync += self.drops.eq(self.drops + 1)
        return m

    @property
    def _index_bits(self) -> tuple[int, int]:
        """(row bits, bank bits) of an entry's address."""
        return (self._rows - 1).bit_length(), (self._banks - 1).bit_length()

    def _banks_read(self, m: Module, platform, advance: Value, read_row: Value, row_next):
        """The banks, read in stage 1 at ``read_row`` (with :attr:`_bank_copies`, each at its
        own copy of it, loaded with ``row_next``): ``(read_data, write_ports)``."""
        layout, rows = self.entry_layout, self._rows
        read_data = []
        write_ports = []
        # the row read's state for its windows' hint from a third register of its own
        self._read_spare: list[Value] | None = [] if self._hint_spare else None
        state = layout["state"]
        spare = (state.offset, state.offset + state.width) if self._hint_spare else None
        for b in range(self._banks):
            if self._bank_copies:
                read_row = [
                    register_copy(m, platform, row_next, en, f"bank{b}_read_row{g}")
                    for g, en in enumerate(self._row_copy_enables(advance, "bank row"))
                ]
            if self._registered:
                # read data registered in the bank (on ECP5 in the block RAM's output register,
                # with 4 stages a flip-flop after it) and once more in the tail, beside what is
                # decided from it; the forwarding replaces transparency (which Yosys would
                # build in logic)
                bank = RegisteredBank(
                    width=layout.size,
                    depth=rows,
                    stages=2 if self._read_stages == 3 or self._split_stamp else 3,
                    copies=self._copies,
                    groups=self._row_groups,
                    spare=spare,
                )
                m.submodules[f"bank{b}"] = bank
                m.d.comb += [*_addresses(bank.r_addr, read_row), bank.r_en.eq(advance)]
                read_data.append(data.View(layout, bank.r_data))
                if self._read_spare is not None:
                    self._read_spare.append(self._spare_state(m, b, bank.r_spare, advance))
                write_ports.append(_WritePort(bank.w_addr, bank.w_data, bank.w_en))
                continue
            mem = Memory(shape=layout, depth=rows, init=[])
            m.submodules[f"bank{b}"] = mem
            wp = mem.write_port()
            rp = mem.read_port(transparent_for=(wp,))
            m.d.comb += [rp.addr.eq(read_row), rp.en.eq(advance)]
            read_data.append(rp.data)
            write_ports.append(_WritePort(wp.addr, wp.data, wp.en))
        return read_data, write_ports

    def _registered_writes(self, m, ctx, chain, read_data, write_ports, clearing, sweep):
        """The registered tail and its writes: ``(t, t_valid, hit, dropped, result)`` of the
        operation leaving it."""
        layout, banks = self.entry_layout, self._banks
        row_bits, _ = self._index_bits
        advance = ctx.advance
        before = chain[-2]
        prev = (Value.cast(before[0].key).as_unsigned(), before[3], before[2], before[0].payload)
        # the operation whose row leaves the block RAMs' output registers (split stamps only)
        # (and the one a stage before it, whose tick is copied beside each block meanwhile)
        ctx.early_op = chain[-4][2] if self._split_stamp else None
        # the row of the operation a stage before ``prev`` (when a read register holds it)
        ctx.early_row = chain[-3][3] if len(chain) >= 3 else None
        ctx.early_payload = chain[-3][0].payload if len(chain) >= 3 else None
        t, t_valid, hit, dropped, way, row, written, store, result = ctx.registered_tail(
            prev, *chain[-1], read_data
        )
        # the write port is driven by registers and nothing else (a large table's blocks
        # are spread over the device): loaded as hist[0] is, with the write that leaves
        # stage 4, or with the clearing sweep's row. Their write lands an edge after the
        # sweep's step, still before any tuple's read. (Written again and again while
        # stalled, which is harmless.)
        w_row = Signal(row_bits, name="write_row")
        w_entry = Signal(layout, name="write_entry")
        w_en = Signal(banks, name="write_en")
        with m.If(clearing):
            m.d.sync += [
                w_row.eq(sweep),
                w_entry.eq(Const(0, layout.size)),
                w_en.eq(Const(-1, banks)),
            ]
        with m.Elif(advance):
            m.d.sync += [
                w_row.eq(row),
                w_entry.eq(written),
                w_en.eq(Cat(store & (way == b) for b in range(banks))),
            ]
        rows = [w_row] * banks
        if self._bank_copies:
            rows = self._bank_write_rows(m, ctx, chain[-1][3], clearing)
        for b, wp in enumerate(write_ports):
            m.d.comb += [*_addresses(wp.addr, rows[b]), wp.data.eq(w_entry), wp.en.eq(w_en[b])]
        return t, t_valid, hit, dropped, result

    def _result_register(self, m, advance, t, t_valid, hit, dropped, result):
        """With ``result_stage``: the record leaving stage 4 registered once more (``s5``)
        before the output register, as everything else advances: ``(t, t_valid, hit,
        dropped, result)`` of the operation leaving it."""
        late = (
            Signal(t.shape(), name="s5"),
            Signal(name="s5_valid"),
            Signal(name="s5_hit"),
            Signal(name="s5_dropped"),
            Signal(result.shape(), name="s5_result"),
        )
        with m.If(advance):
            m.d.sync += [
                r.eq(v) for r, v in zip(late, (t, t_valid, hit, dropped, result), strict=True)
            ]
        return late

    def _simple_writes(self, m, ctx, s2, read_data, write_ports, clearing, sweep):
        """The simple tail and its writes (the cycle after the read): ``(t, t_valid, hit,
        dropped, result)`` of the operation leaving it."""
        layout = self.entry_layout
        t, t_valid, hit, dropped, way, row, written, store, result = ctx.simple_tail(*s2, read_data)
        for b, wp in enumerate(write_ports):
            with m.If(clearing):
                m.d.comb += [wp.addr.eq(sweep), wp.data.eq(Const(0, layout.size)), wp.en.eq(1)]
            with m.Else():
                m.d.comb += [wp.addr.eq(row), wp.data.eq(written), wp.en.eq(store & (way == b))]
        return t, t_valid, hit, dropped, result


def _addresses(port, rows) -> list:
    """``port`` (a bank's address member) loaded from ``rows``: a value, or with the bank's
    ``groups`` one per group."""
    if not isinstance(rows, list):
        return [port.eq(rows)]
    if len(rows) == 1:
        return [port.eq(rows[0])]
    return [a.eq(r) for a, r in zip(port, rows, strict=True)]


@dataclass
class _WritePort:
    addr: Value
    data: Value
    en: Value
