"""The table partitioner: one state vector per partition key in block RAM, one tuple per clock.

The second partition store beside the swap pipeline (``hdl/partitioner.py``), chosen with
``--store table``: the same stream interface and counters as
:class:`~nfacep.hdl.partitioner.StreamPartitioner`, the same caller-supplied ``update``
function, but the partitions live in ``amaranth.lib.memory`` banks (block RAM on ECP5 and
iCE40) instead of a chain of registers. ``nfacep.reference.capacity`` (``table_slots``,
``key_crc32``) models which tuples it drops.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Mux, Shape, ShapeLike, Signal, Value, ValueLike
from amaranth.lib import crc, data, wiring
from amaranth.lib.memory import Memory

from .bram import RegisteredBank, dp16kd_blocks, register_copy
from .partitioner import check_store_arguments, store_signature
from .stream import StreamBuffer
from .table_stamps import StampStages

__all__ = ["BREAK_FORWARDING", "TableGeometry", "TablePartitioner"]


UpdateFunction = Callable[[Module, Value, "data.View | Value"], tuple[ValueLike, ValueLike]]

#: Test-only: a forwarding path broken on purpose, so that the tests show they catch it.
#: ``"oldest write"``: the oldest write in flight is not forwarded; ``"stale hint"``: stage 4's
#: ``update.prepare`` hint comes from the row read even when the operation just ahead wrote
#: the entry; ``"ahead hint"``: the hint of the state stage 4 forwards to stage 3's operation
#: is worked out against stage 4's payload, not stage 3's; ``"early hint"``: the hints of the
#: writes in flight, worked out two cycles before stage 3, are worked out for the operation a
#: stage ahead of the one they are for. ``None`` (always, outside those tests): nothing
#: broken.
BREAK_FORWARDING: str | None = None


class TableGeometry:
    """The geometry of a table of partitions, one definition for the stores that keep them as
    the table does (:class:`TablePartitioner` in block RAM,
    :class:`~nfacep.hdl.sdram.store.SdramPartitioner` in SDRAM): ``entries`` entries (a power
    of two) for keys of ``key_shape``, each with a state of ``state_width`` bits; **direct**
    when the key is narrow enough to index the entries (only the ``2**w`` it can address are
    kept), else **hashed**: ``entries / ways`` buckets of ``ways`` entries, a key's bucket
    the low bits of its CRC-32 (:attr:`crc_parameters`). A store sets ``_stamp_bits`` (0
    without timers), which the entry's layout includes. Raises ValueError for arguments out
    of range."""

    _stamp_bits = 0

    def __init__(self, *, key_shape: ShapeLike, state_width: int, entries: int, ways: int):
        key_width = Shape.cast(key_shape).width
        if not isinstance(state_width, int) or state_width < 0:
            raise ValueError(f"State width must be a non-negative integer, not {state_width!r}")
        for name, value in (("Entries", entries), ("Ways", ways)):
            if not isinstance(value, int) or value < 1 or value & (value - 1):
                raise ValueError(f"{name} must be a positive power of two, not {value!r}")
        if ways > entries:
            raise ValueError(f"Ways ({ways}) must not exceed entries ({entries})")
        if key_width < 1:
            raise ValueError("The key must be at least one bit wide")
        self._key_shape, self._key_width = key_shape, key_width
        self._state_width = state_width
        self._entries, self._ways = entries, ways
        self._direct = key_width <= (entries - 1).bit_length()

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def ways(self) -> int:
        return self._ways

    @property
    def direct(self) -> bool:
        """Whether keys index the table directly (no tags, no drops)."""
        return self._direct

    @property
    def addressed(self) -> int:
        """Entries a key can reach: ``2**w`` direct, else all of them."""
        return (1 << self._key_width) if self._direct else self._entries

    @property
    def buckets(self) -> int:
        """Hashed, the buckets of ``ways`` entries; direct, one per entry a key addresses."""
        return self.addressed if self._direct else self._entries // self._ways

    @property
    def stamp_bits(self) -> int:
        """Bits of each entry's tick stamp (0 without timers)."""
        return self._stamp_bits

    @property
    def entry_layout(self) -> data.StructLayout:
        """One entry: valid, the key as tag (hashed only), the state vector, the tick stamp
        (with timers only)."""
        return data.StructLayout(
            {
                "valid": 1,
                "tag": 0 if self._direct else self._key_width,
                "state": self._state_width,
                "stamp": self._stamp_bits,
            }
        )

    @property
    def crc_parameters(self) -> crc.Parameters:
        """The bucket hash: CRC-32 over the key's ``ceil(w / 8)`` bytes as one word."""
        return crc.catalog.CRC32_ISO_HDLC(data_width=8 * ((self._key_width + 7) // 8))


class TablePartitioner(TableGeometry, wiring.Component):
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
    later, one more write in flight to forward. And with five read registers
    the third is the table's: next to each block it compares the stamp read, part by part,
    with the tick of the operation it was read for (``_Stages.stamp_parts``), and the next
    cycle only combines those bits. A state wider than 48 bits (windows, start_seq) is chosen
    in stage 3 in groups of 48 bits, each from copies of its own of the registers the choice
    is made of, so that no register drives every bit's multiplexer.

    Latency: ``3 + read_stages`` cycles (3 without ``registered``), one more with ``copies``,
    one more with timers (the read row, the aging step's or the tuple's, is registered): 7 by
    default (8 for a table of more than 64 blocks), 10 with timers. A tuple
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
        :func:`~nfacep.hdl.nfa.window_hint`), and ``ahead`` holds the payloads of the
        operations in stage 3, in the stage before it and in the one before that, for which
        the update returns, as a third value, the hints of the state it makes, worked out from
        its own inputs (``gaps``: the ``gap`` of its payload and each of them, worked out a
        cycle before, or ``None``). So nothing of ``prepare`` waits for a choice made in the
        same cycle: each candidate's hint is worked out before stage 3 chooses the state found
        (the row read's the cycle before, from the registered row; each write in flight's two
        cycles before, from its registered entry or, for the write leaving stage 4 then, from
        the update; stage 4's write's, the cycle before, from the update), and stage 3 only
        chooses among them and the update's for its operation.
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
    registered : :class:`bool`
        Register the block RAM's read data and the write-back, and decide and update in
        separate stages (forwarding the writes in flight): more cycles of latency, no long
        path into or out of the block RAM, and the way decision apart from ``update``.
    read_stages : :class:`int`
        With ``registered``: registers on the read path, 3, 4 (the default without timers:
        a flip-flop after the block RAM's output register) or 5 (the default with timers: the
        row read is compared with the tuple's key and tick a cycle earlier, beside the writes
        in flight, one more of them to forward).
    copies : :class:`bool` or ``None``
        With ``registered``: the banks' ports through registers of their own beside each block
        (:class:`~nfacep.hdl.bram.RegisteredBank`): a cycle more of latency, one more write in
        flight to forward. ``None`` (the default): with timers, or when the table takes more
        than 64 DP16KD blocks.

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
        registered: bool = True,
        read_stages: int | None = None,
        counter_width: int = 32,
        copies: bool | None = None,
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
        self._registered = bool(registered)
        self._read_stages = read_stages if self._registered else 1
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

        self._port_copies(copies)

        wiring.Component.__init__(
            self, store_signature(key_shape, payload_shape, result_shape, counter_width)
        )

    def _port_copies(self, copies: bool | None) -> None:
        """Whether the banks' ports are copied beside each block, and whether the stamp is
        compared there."""
        if copies is None:
            # with timers (a stamp in every entry) or more than 64 blocks the blocks spread over
            # the device, and the banks' ports pass a register of their own beside each block:
            # a cycle more of latency, and a write lands an edge later, one more write in
            # flight to forward
            blocks = self._banks * dp16kd_blocks(self._rows, self.entry_layout.size)
            copies = self._tick_tuples > 0 or blocks > 64
        self._copies = self._registered and bool(copies)
        # with timers and five read registers the third is the table's, not the bank's: it
        # holds, beside the entry's other fields, the stamp already compared part by part with
        # the operation's tick (``_Stages.stamp_parts``) next to each block
        self._split_stamp = self._copies and self._tick_tuples > 0 and self._read_stages == 5

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
        return (3 + self._read_stages + self._copies if self._registered else 3) + self.timers

    @property
    def _missed(self) -> int:
        """Writes back (besides stage 4's) that the read for an operation in stage 3 cannot
        have seen: one per read register after the block RAM latches the address, one more
        with the banks' port copies (a write lands an edge later; the read address copy delays
        the read and the operation alike)."""
        return self._read_stages + self._copies - (BREAK_FORWARDING == "oldest write")

    def elaborate(self, platform):
        m = Module()
        m.submodules.out = out = StreamBuffer(self.o_stream.payload.shape())
        wiring.connect(m, out.o_stream, wiring.flipped(self.o_stream))
        advance = Signal()
        m.d.comb += advance.eq(out.i_stream.ready)
        clearing, sweep = self._clearing(m)
        chain, read_row = self._input(m, advance, clearing)
        read_data, write_ports = self._banks_read(m, advance, read_row)
        ctx = _Stages(self, m, advance, self.entry_layout, *self._index_bits)
        ctx.platform = platform
        if self._registered:
            tail = self._registered_writes(m, ctx, chain, read_data, write_ports, clearing, sweep)
        else:
            tail = self._simple_writes(m, ctx, chain[-1], read_data, write_ports, clearing, sweep)
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

    def _clearing(self, m: Module):
        """The clearing sweep after reset: ``(clearing, sweep)``, high while it writes row
        ``sweep`` of every bank empty."""
        rows = self._rows
        clearing = Signal(init=1)
        sweep = Signal(range(rows), name="sweep_row")
        with m.If(clearing):
            m.d.sync += sweep.eq(sweep + 1)
            with m.If(sweep == rows - 1):
                m.d.sync += [clearing.eq(0), sweep.eq(0)]
        return clearing, sweep

    def _input(self, m: Module, advance: Value, clearing: Value):
        """Stage 1 (the input register, the bucket hash, ticks and aging sweep steps) and the
        read registers after it: ``(chain, read_row)``, the operation after each read register
        (``(payload, valid, op, row, bank)``, the last the one before the tail) and the row
        the banks read."""
        row_bits, bank_bits = self._index_bits
        timers = self.timers
        accept = Signal()
        force = Const(0)
        if timers:
            now, back, sweep_at, step, force = self._aging(m, advance, clearing, accept)
        m.d.comb += self.i_stream.ready.eq(advance & ~clearing & ~force)
        m.d.comb += accept.eq(self.i_stream.valid & self.i_stream.ready)
        with m.If(accept):
            m.d.sync += self.tuples.eq(self.tuples + 1)

        # an operation: a tuple or an aging step, the ticks so far (``now``) and, for the
        # comparisons of ``_Stages.live``, ``now - 2**timer_bits`` (``back``)
        op = data.StructLayout({"sweep": 1, "now": self._stamp_bits, "back": self._stamp_bits})
        s1 = Signal(self.i_stream.payload.shape(), name="s1")
        s1_valid = Signal(name="s1_valid")
        s1_op = Signal(op, name="s1_op")
        s2 = Signal(self.i_stream.payload.shape(), name="s2")
        s2_valid = Signal(name="s2_valid")
        s2_op = Signal(op, name="s2_op")
        s2_row = Signal(row_bits, name="s2_row")
        s1_row = Signal(row_bits, name="s1_row")
        s1_bank = Signal(bank_bits, name="s1_bank")
        s2_bank = Signal(bank_bits, name="s2_bank")
        self._bucket(m, advance, s1, s1_row, s1_bank)
        if timers:
            # an aging step reads the row and checks the way it was given in s1_sweep_at
            s1_at = Signal(row_bits + bank_bits, name="s1_sweep_at")
            with m.If(s1_op.sweep):
                m.d.comb += [s1_bank.eq(s1_at[:bank_bits]), s1_row.eq(s1_at[bank_bits:])]
            with m.If(advance):
                m.d.sync += [
                    s1_op.sweep.eq(step),
                    s1_op.now.eq(now),
                    s1_op.back.eq(back),
                    s1_at.eq(sweep_at),
                ]
        head = (s1, s1_valid, s1_op, s1_row, s1_bank)
        if timers:
            # the read address from a register: with timers the row is chosen (the aging
            # step's or the tuple's) before it, a stage before the read, so nothing but
            # routing lies between it and the block RAMs
            at_read = (
                Signal.like(s1, name="s1a"),
                Signal(name="s1a_valid"),
                Signal.like(s1_op, name="s1a_op"),
                Signal.like(s1_row, name="s1a_row"),
                Signal.like(s1_bank, name="s1a_bank"),
            )
            with m.If(advance):
                m.d.sync += [d.eq(v) for d, v in zip(at_read, head, strict=True)]
            head = at_read
        with m.If(advance):
            m.d.sync += [
                s1_valid.eq(accept),
                s1.eq(self.i_stream.payload),
                *(
                    d.eq(v)
                    for d, v in zip((s2, s2_valid, s2_op, s2_row, s2_bank), head, strict=True)
                ),
            ]
        return self._read_registers(m, advance, (s2, s2_valid, s2_op, s2_row, s2_bank)), head[3]

    def _bucket(self, m: Module, advance: Value, s1, s1_row, s1_bank) -> None:
        """The row and bank of the tuple in stage 1: its key's bits (direct) or its bucket
        hash, computed as the tuple enters (hashed)."""
        row_bits, bank_bits = self._index_bits
        in_key = Value.cast(self.i_stream.payload.key).as_unsigned()
        s1_key = Value.cast(s1.key).as_unsigned()
        if self._direct:
            m.d.comb += [s1_bank.eq(s1_key[:bank_bits]), s1_row.eq(s1_key[bank_bits:])]
        else:
            m.submodules.hash = hasher = self.crc_parameters.create()
            m.d.comb += [
                # start and valid together: each word is hashed from the initial value; with
                # both low (a stall) the register holds (start alone would reinitialise it)
                hasher.start.eq(advance),
                hasher.valid.eq(advance),
                hasher.data.eq(in_key),
                # the row is the bucket complemented (a bijection: which keys share a row is
                # unchanged), which cancels the CRC's output inversion: the read address comes
                # straight from the hash register
                s1_row.eq(~hasher.crc[:row_bits]),
            ]

    def _read_registers(self, m: Module, advance: Value, first: tuple) -> list[tuple]:
        """With more read registers the operations wait as many stages more before stage 3;
        the last two (``prev``, then the one before stage 3) are the registered tail's."""
        chain = [first]
        s2, _, s2_op, s2_row, s2_bank = first
        for extra in "bcde"[: max(0, self._read_stages - 2 + self._copies)]:
            delayed = (
                Signal.like(s2, name=f"s2{extra}"),
                Signal(name=f"s2{extra}_valid"),
                Signal.like(s2_op, name=f"s2{extra}_op"),
                Signal.like(s2_row, name=f"s2{extra}_row"),
                Signal.like(s2_bank, name=f"s2{extra}_bank"),
            )
            with m.If(advance):
                m.d.sync += [d.eq(v) for d, v in zip(delayed, chain[-1], strict=True)]
            chain.append(delayed)
        return chain

    def _banks_read(self, m: Module, advance: Value, read_row: Value):
        """The banks, read in stage 1 at ``read_row``: ``(read_data, write_ports)``."""
        layout, rows = self.entry_layout, self._rows
        read_data = []
        write_ports = []
        for b in range(self._banks):
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
                )
                m.submodules[f"bank{b}"] = bank
                m.d.comb += [bank.r_addr.eq(read_row), bank.r_en.eq(advance)]
                read_data.append(data.View(layout, bank.r_data))
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
        for b, wp in enumerate(write_ports):
            m.d.comb += [wp.addr.eq(w_row), wp.data.eq(w_entry), wp.en.eq(w_en[b])]
        return t, t_valid, hit, dropped, result

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

    def _aging(self, m: Module, advance: Value, clearing: Value, accept: Value):
        """Ticks and aging sweep steps: ``(now, back, at, step, force)``.

        ``now`` counts ticks (mod ``2**stamp_bits``): the tuple taken at index ``i`` sees
        ``i // K``; ``back`` is ``now - 2**timer_bits``, counted beside it. In every advancing
        cycle after the clearing sweep in which no tuple is taken, an aging step enters instead
        (``step``) at ``at`` (way in the low bits, row above), which then moves on. After
        ``sweep_every`` tuples without a step, ``force`` holds the input for one advancing
        cycle so that a step enters."""
        period, every = self._tick_tuples, self._sweep_every
        width = self._stamp_bits
        now = Signal(width, name="now")
        back = Signal(
            width, name="now_back", init=((1 << width) - (1 << self._timer_bits)) % (1 << width)
        )
        at = Signal((self._rows * self._banks - 1).bit_length(), name="sweep_at")
        step = Signal(name="sweep_step")
        since = Signal(range(every + 1), name="since_step")
        force = Signal(name="force_step")
        # force == (since == every), kept in a register: it gates the input's ready
        m.d.comb += step.eq(advance & ~clearing & ~accept)
        if period > 1:
            tick_count = Signal(range(period), name="tick_count")
            with m.If(accept):
                with m.If(tick_count == period - 1):
                    m.d.sync += [tick_count.eq(0), now.eq(now + 1), back.eq(back + 1)]
                with m.Else():
                    m.d.sync += tick_count.eq(tick_count + 1)
        else:
            with m.If(accept):
                m.d.sync += [now.eq(now + 1), back.eq(back + 1)]
        with m.If(accept):
            m.d.sync += [since.eq(since + 1), force.eq(since == every - 1)]
        with m.If(step):
            m.d.sync += [since.eq(0), force.eq(0), at.eq(at + 1)]
        return now, back, at, step, force


class _Stages(StampStages):
    """The stages after the block-RAM read of a :class:`TablePartitioner`: the simple one
    (decide and update in the cycle after the read) or the registered ones.

    An operation is a tuple (``valid``) or, with timers, an aging step (``op.sweep``), or
    neither (a bubble). An aging step at (row, way ``bank``) writes that way's entry invalid
    if it holds an entry that has aged out (``(op.now - stamp) mod 2**S >= M``) and otherwise
    writes nothing; it passes through the same stages and forwarding as a tuple, so it sees
    every write before it and every operation after it sees its write."""

    def __init__(self, table: TablePartitioner, m: Module, advance, layout, row_bits, bank_bits):
        self.table, self.m, self.advance, self.layout = table, m, advance, layout
        self.row_bits, self.bank_bits = row_bits, bank_bits
        self.banks = table.banks
        self.direct = table.direct
        self.timers = table.timers
        self.max_age = (1 << table._timer_bits) - 1

    def decide(self, key, bank, matches, free, name):
        """hit, dropped, way from the ways' match and free bits (hashed) or the bank (direct;
        ``matches`` then holds each bank's live bit)."""
        m = self.m
        hit = Signal(name=f"{name}_hit")
        dropped = Signal(name=f"{name}_dropped")
        way = Signal(self.bank_bits, name=f"{name}_way")
        if self.direct:
            m.d.comb += [hit.eq(matches.bit_select(bank, 1)), way.eq(bank), dropped.eq(0)]
            return hit, dropped, way
        m.d.comb += [hit.eq(matches.any()), dropped.eq(~matches.any() & ~free.any())]
        for b in range(self.banks):  # one-hot when hit: the key is stored at most once
            with m.If(matches[b]):
                m.d.comb += way.eq(b)
        with m.If(~matches.any()):
            for b in reversed(range(self.banks)):  # the lowest free way wins
                with m.If(free[b]):
                    m.d.comb += way.eq(b)
        return hit, dropped, way

    def tag_equal(self, tag, key):
        """Whether an entry with ``tag`` holds ``key``: direct, an entry's address is its key,
        so any entry a tuple looks at (its row, its bank) is its own."""
        return Const(1) if self.direct else Value.cast(tag) == key

    def update(self, current, payload, name, hint=None, ahead=None, gaps=None):
        """``update``'s new state and result (and, given ``hint``, its hints for the payloads
        ``ahead``), as signals."""
        table, m = self.table, self.m
        if hint is None:
            out = table._update(m, current, payload)
        else:
            out = table._update(m, current, payload, hint=hint, ahead=ahead, gaps=gaps)
        new_state = Signal(table._state_width, name=f"{name}_new_state")
        result = Signal(table._result_shape, name=f"{name}_result")
        m.d.comb += [new_state.eq(out[0]), result.eq(out[1])]
        if hint is None:
            return new_state, result
        later = [
            Signal(table._update.hint_width, name=f"{name}_ahead{k}", attrs={"keep": 1})
            for k in range(3)
        ]
        m.d.comb += [h.eq(v) for h, v in zip(later, out[2], strict=True)]
        return new_state, result, later

    def entry(self, key, state, op, name):
        """What an operation writes: a tuple its entry, an aging step an invalid one."""
        written = Signal(self.layout, name=name)
        with self.m.If(~op.sweep):
            self.m.d.comb += [
                written.valid.eq(1),
                written.state.eq(state),
                written.stamp.eq(op.now),
            ]
            if not self.direct:
                self.m.d.comb += written.tag.eq(key)
        return written

    def operation(self, t_valid, op, bank, dropped, way, expired):
        """(store, way) of an operation decided now: a tuple stores unless dropped, an aging
        step stores (invalid) if its way has aged out."""
        store = Signal(name="op_store")
        chosen = Signal(self.bank_bits, name="op_way")
        m = self.m
        m.d.comb += [store.eq(t_valid & ~dropped), chosen.eq(way)]
        if self.timers:
            with m.If(op.sweep):
                m.d.comb += [store.eq(expired.bit_select(bank, 1)), chosen.eq(bank)]
        return store, chosen

    def simple_tail(self, t, t_valid, op, t_row, t_bank, seen):
        """Decide, update and write back in the cycle after the read (the read ports are
        transparent for the write ports)."""
        m = self.m
        key = Value.cast(t.key).as_unsigned()
        live = Cat(self.live(e.valid, e.stamp, op) for e in seen)
        matches = Cat(live[b] & self.tag_equal(e.tag, key) for b, e in enumerate(seen))
        expired = Cat(e.valid for e in seen) & ~live
        hit, dropped, way = self.decide(key, t_bank, matches, ~live, "last")
        current = Signal(self.table._state_width, name="last_state")
        for b in range(self.banks):
            with m.If(hit & (way == b)):
                m.d.comb += current.eq(seen[b].state)
        new_state, result = self.update(current, t.payload, "last")
        written = self.entry(key, new_state, op, "last_written")
        decided, chosen = self.operation(t_valid, op, t_bank, dropped, way, expired)
        store = Signal(name="last_store")
        m.d.comb += store.eq(self.advance & decided)
        return t, t_valid, hit, dropped, chosen, t_row, written, store, result

    def registered_tail(self, prev, s2, s2_valid, s2_op, s2_row, s2_bank, read):
        """The stages from the last read register on. ``read`` is each bank's data of the row
        read for the operation in ``s2`` (the cycle before stage 3), or with five read
        registers for the one in ``prev``, ``(key, row, op)`` of the operation a stage before.
        Stage 3 decides (hit, way, drop), stage 4 updates the state and hands the entry to
        ``hist[0]``, from where it is written.

        The read for an operation reaching stage 3 missed the writes decided in the last
        ``read_stages + 2`` advancing cycles: the operation in stage 4 (decided last cycle) and
        ``hist[0..read_stages]``. For each way the newest of those that went to the operation's
        row replaces what was read: whether it is in use at the operation's tick, whether its
        key is the tuple's, its state. This is worked out over three cycles, so that no cycle
        holds more than a comparison or a choice between registers:

        - two cycles before stage 3 each source's row, key and tick are compared with the
          operation's (``prev``), for the writes that will then be ``hist[0..read_stages]``;
        - the cycle before, with their decisions (store, way) now in registers, the newest
          source per way is chosen, or else the row read, whose tag and stamp are compared
          now (with five read registers, beside the writes in flight the cycle before); the
          result is registered per way (``pre_*``);
        - in stage 3 only the write decided in the cycle before, by the operation now in
          stage 4, can still replace it (its row, key and tick compared the cycle before).

        The state a hit finds is taken as the tuple enters stage 4, from the update being made
        there in that cycle when the operation ahead wrote the same entry."""
        table = self.table
        hist_layout = data.StructLayout(
            {"valid": 1, "row": self.row_bits, "way": self.bank_bits, "entry": self.layout}
        )
        stages = table._missed
        # hist[k] is the write handed on k + 1 advancing edges ago (hist[0] reaches its bank);
        # the oldest write an operation in stage 3 missed, hist[stages], is merged before it
        # gets there, as hist[stages - 1], so it is not kept
        self.hist = hist = [Signal(hist_layout, name=f"hist{i}") for i in range(stages)]
        s3, s4 = self._tail_registers(s2.shape(), s2_op.shape())
        t, t_valid, t_op, t_row, t_bank = s3
        u, u_valid, u_op, u_row, u_way, u_hit, u_dropped, u_state, u_store = s4

        key = Value.cast(t.key).as_unsigned()
        u_key = Value.cast(u.key).as_unsigned()

        # stage 4's update (its entry is the newest write of the cycle)
        new_state, result = self._stage4(t, u, u_state, s2, prev[3])
        written = self.entry(u_key, new_state, u_op, "s4_written")

        # two cycles before stage 3: row, key and tick of the writes that will be
        # hist[0..stages] then, as they stand now (newest first: stage 3's operation, stage
        # 4's, hist[0..stages - 2])
        ident = [(t_row, key, ~t_op.sweep, t_op.now), (u_row, u_key, ~u_op.sweep, u_op.now)]
        ident += [(h.row, h.entry.tag, h.entry.valid, h.entry.stamp) for h in hist[:-1]]
        # and the decisions (store, way) already made: all but stage 3's
        known = [None, (u_store, u_way)] + [(h.valid, h.way) for h in hist[:-1]]
        rel = self._relations(prev, ident, known, self._source_hints(hist))
        # the cycle before stage 3: their decisions are registers now (stage 4's,
        # hist[0..stages - 1])
        decided = [(u_store, u_way, written.state)]
        decided += [(h.valid, h.way, h.entry.state) for h in hist]
        pre = self._newest(prev, s2, s2_op, read, decided, rel)
        self.s2_bank = s2_bank
        hit, dropped, way3, store3, found = self._stage3(
            t, t_valid, t_op, t_row, t_bank, s2, s2_op, s2_row, pre, (u_store, u_way, new_state)
        )

        self._advance_tail(
            (s2, s2_valid, s2_op, s2_row, s2_bank),
            s3,
            s4,
            (way3, hit, dropped, found, store3),
            written,
        )
        return u, u_valid, u_hit, u_dropped, u_way, u_row, written, u_store, result

    def _stage4(self, t, u, u_state, s2, prev_payload):
        """Stage 4's update of the state found: ``(new_state, result)``. With
        ``update.prepare``, the update takes the hint worked out before stage 4 (``u_hint``),
        and makes the hints of its new state for the operations in stage 3 and the two stages
        before it (``ahead_hint``), beside itself; for stage 3's operation, with the ``gap``
        of the two payloads worked out a cycle before."""
        table, m = self.table, self.m
        self.prepare = getattr(table._update, "prepare", None)
        self.u_hint = self.ahead_hint = None
        if self.prepare is None:
            return self.update(u_state, u.payload, "s4")
        self.u_hint = Signal(table._update.hint_width, name="s4_hint")
        # the payload the hints of a write in flight are worked out for two cycles before
        # stage 3, the operation's then
        self.early = s2.payload if BREAK_FORWARDING == "early hint" else prev_payload
        self.prev_payload = prev_payload
        gap = Signal(table._update.gap_width, name="s3_gap")
        later = t.payload if BREAK_FORWARDING == "ahead hint" else s2.payload
        with m.If(self.advance):
            m.d.sync += gap.eq(table._update.gap(m, t.payload, later))
        now = u.payload if BREAK_FORWARDING == "ahead hint" else t.payload
        new_state, result, self.ahead_hint = self.update(
            u_state,
            u.payload,
            "s4",
            hint=self.u_hint,
            ahead=[now, s2.payload, self.early],
            gaps=[gap, None, None],
        )
        return new_state, result

    def _source_hints(self, hist):
        """With ``update.prepare``, the hint of each write in flight, in the order of
        ``_relations``' sources, for the operation two cycles before stage 3 (``None`` for
        stage 3's, whose state is not made yet): stage 4's from the update, the others from
        their entries. Without, ``None``."""
        if self.prepare is None:
            return None
        hints = [None, self.ahead_hint[2]]
        return hints + [self.prepare(self.m, h.entry.state, self.early) for h in hist[:-1]]

    def _tail_registers(self, in_layout, op_shape):
        """The registers of stage 3 (payload, valid, op, row, bank) and of stage 4 (payload,
        valid, op, row, way, hit, dropped, state found, store): stage 3's decision."""
        # stage 3
        t = Signal(in_layout, name="s3")
        t_valid = Signal(name="s3_valid")
        t_op = Signal(op_shape, name="s3_op")
        t_row = Signal(self.row_bits, name="s3_row")
        t_bank = Signal(self.bank_bits, name="s3_bank")
        # stage 4: the decision of stage 3, the state found
        u = Signal(in_layout, name="s4")
        u_valid = Signal(name="s4_valid")
        u_op = Signal(op_shape, name="s4_op")
        u_row = Signal(self.row_bits, name="s4_row")
        u_way = Signal(self.bank_bits, name="s4_way")
        u_hit = Signal(name="s4_hit")
        u_dropped = Signal(name="s4_dropped")
        u_state = Signal(self.table._state_width, name="s4_state")
        u_store = Signal(name="s4_store")  # stage 3's decision: write `written`
        return (
            (t, t_valid, t_op, t_row, t_bank),
            (u, u_valid, u_op, u_row, u_way, u_hit, u_dropped, u_state, u_store),
        )

    def _advance_tail(self, s2, s3, s4, decision, written):
        """On an advancing edge: stage 3 takes the operation in ``s2``, stage 4 stage 3's with
        its ``decision`` (way, hit, dropped, state found, store), and ``hist`` stage 4's
        write."""
        s2, s2_valid, s2_op, s2_row, s2_bank = s2
        t, t_valid, t_op, t_row, t_bank = s3
        u, u_valid, u_op, u_row, u_way, u_hit, u_dropped, u_state, u_store = s4
        way3, hit, dropped, found, store3 = decision
        hist = self.hist
        with self.m.If(self.advance):
            self.m.d.sync += [
                t_valid.eq(s2_valid),
                t.eq(s2),
                t_op.eq(s2_op),
                t_row.eq(s2_row),
                t_bank.eq(s2_bank),
                u_valid.eq(t_valid),
                u.eq(t),
                u_op.eq(t_op),
                u_row.eq(t_row),
                u_way.eq(way3),
                u_hit.eq(hit),
                u_dropped.eq(dropped),
                u_state.eq(found),
                u_store.eq(store3),
                hist[0].valid.eq(u_store),
                hist[0].row.eq(u_row),
                hist[0].way.eq(u_way),
                hist[0].entry.eq(written),
            ]
            self.m.d.sync += [h.eq(older) for h, older in zip(hist[1:], hist, strict=False)]

    def _relations(self, prev, ident, known, hints):
        """Two cycles before stage 3: each source's (``ident``: row, key, whether it writes a
        valid entry, tick) row, key and tick against the operation in ``prev``, registered:
        ``(rel_row, rel_key, rel_live, rel_valid, rel_way, rel_hint)``, a bit per source;
        ``rel_way``, for the sources whose decision (``known``: store, way) is made already, a
        bit per way: it writes that way of the operation's row (None for the others);
        ``rel_hint``, the ``hints`` of the sources that have one (``None``: no hints)."""
        m = self.m
        stages = self.table._missed
        prev_key, prev_row, prev_op, _ = prev
        n = len(ident)  # stages + 1
        rel_row = Signal(n, name="s1_rel_row")
        rel_key = Signal(n, name="s1_rel_key")
        rel_live = Signal(n, name="s1_rel_live")
        rel_valid = Signal(n, name="s1_rel_valid")
        with m.If(self.advance):
            for j, (row, src_key, entry_valid, stamp) in enumerate(ident):
                m.d.sync += [
                    rel_row[j].eq(row == prev_row),
                    rel_key[j].eq(self.tag_equal(src_key, prev_key)),
                    rel_live[j].eq(self.live(entry_valid, stamp, prev_op, ahead=stages + 2)),
                    rel_valid[j].eq(entry_valid),
                ]
        rel_way = []
        for j, decision in enumerate(known):
            if decision is None:
                rel_way.append(None)
                continue
            store, way = decision
            bits = Signal(self.banks, name=f"s1_rel_way{j}")
            with m.If(self.advance):
                m.d.sync += bits.eq(
                    Cat(store & (ident[j][0] == prev_row) & (way == b) for b in range(self.banks))
                )
            rel_way.append(bits)
        rel_hint = None
        if hints is not None:
            rel_hint = []
            for j, hint in enumerate(hints):
                if hint is None:
                    rel_hint.append(None)
                    continue
                reg = Signal(self.table._update.hint_width, name=f"s1_rel_hint{j}")
                with m.If(self.advance):
                    m.d.sync += reg.eq(hint)
                rel_hint.append(reg)
        return rel_row, rel_key, rel_live, rel_valid, rel_way, rel_hint

    def _read_bits(self, prev, s2, s2_op, read):
        """Per way of the row read: (match, live, valid, state). With five read registers the
        row arrives with ``prev`` and is compared beside the writes in flight (registered
        here); otherwise in this cycle."""
        m, width = self.m, self.table._state_width
        prev_key, _, prev_op, _ = prev
        s2_key = Value.cast(s2.key).as_unsigned()
        seen = []
        for b, e in enumerate(read):
            if self.table._split_stamp:
                e = self._split_read(e, b)
            if self.table._read_stages == 5:
                bits = (
                    Signal(name=f"s1_read_match{b}"),
                    Signal(name=f"s1_read_live{b}"),
                    Signal(name=f"s1_read_valid{b}"),
                    Signal(width, name=f"s1_read_state{b}"),
                )
                if self.table._split_stamp:
                    here = self.live_parts(e.valid, e.stamp)
                else:
                    here = self.live(e.valid, e.stamp, prev_op)
                with m.If(self.advance):
                    m.d.sync += [
                        c.eq(v)
                        for c, v in zip(
                            bits,
                            (here & self.tag_equal(e.tag, prev_key), here, e.valid, e.state),
                            strict=True,
                        )
                    ]
                seen.append(bits)
            else:
                here = self.live(e.valid, e.stamp, s2_op)
                seen.append((here & self.tag_equal(e.tag, s2_key), here, e.valid, e.state))
        return seen

    def _stage3_hint(self, s2, mine, newest):
        """``update.prepare`` of the state the tuple in stage 3 finds, for stage 4: chosen as
        that state is, among hints worked out before: each way's candidate's
        (:meth:`_newest_hint`), the update's for the state being made in stage 4
        (``ahead_hint``) and the all-zero state's of a fresh entry (from the payload, the cycle
        before), so that stage 3 only chooses."""
        m, table = self.m, self.table
        zero = Signal(table._update.hint_width, name="s3_zero_hint")
        with m.If(self.advance):
            m.d.sync += zero.eq(self.prepare(m, Const(0, table._state_width), s2.payload))
        if BREAK_FORWARDING == "stale hint":
            newest = [0] * len(newest)
        # the update's hint, the last to be known, enters the last gate: whether the way found
        # is the newest write's, and the hint otherwise, are worked out beside it from
        # registers (kept, so that synthesis does not fold them back into one cone with it)
        new = Signal(name="s3_hint_new", attrs={"keep": 1})
        other = Signal(table._update.hint_width, name="s3_hint_other", attrs={"keep": 1})
        parts = [Mux(~_or_all(mine), zero, 0)]
        for b in range(self.banks):
            z, from_read, read_hint, pre_hint = self.pre_hint[b]
            before = Mux(z, self.z_hint, Mux(from_read, read_hint, pre_hint))
            parts.append(Mux(mine[b] & ~newest[b], before, 0))
        m.d.comb += [
            new.eq(_or_all([mine[b] & newest[b] for b in range(self.banks)])),
            other.eq(_or_all(parts)),
        ]
        hint = Signal(table._update.hint_width, name="s3_hint")
        m.d.comb += hint.eq(Mux(new, self.ahead_hint[0], other))
        with m.If(self.advance):
            m.d.sync += self.u_hint.eq(hint)

    def _newest(self, prev, s2, s2_op, read, decided, rel):
        """The cycle before stage 3: per way the newest of the ``decided`` writes (store, way,
        state) to the operation's row, else the row read, registered: ``(pre_match, pre_live,
        pre_valid, pre_state)``; with ``update.prepare`` also its hint (:meth:`_newest_hint`)."""
        m, banks, width = self.m, self.banks, self.table._state_width
        rel_row, rel_key, rel_live, rel_valid, rel_way, rel_hint = rel
        pre_match = Signal(banks, name="s2_pre_match")
        pre_live = Signal(banks, name="s2_pre_live")
        pre_valid = Signal(banks, name="s2_pre_valid")
        pre_state = [Signal(width, name=f"s2_pre_state{b}") for b in range(banks)]
        pre = [pre_match, pre_live, pre_valid, pre_state]
        if self.prepare is not None:
            self.pre_hint = []
            self.z_hint = Signal(self.table._update.hint_width, name="s2_z_hint")
            with m.If(self.advance):
                m.d.sync += self.z_hint.eq(self.ahead_hint[1])
        self.pre_match_next = []  # what pre_match is loaded with, for the copies of stage 3
        for b, read_bits in enumerate(self._read_bits(prev, s2, s2_op, read)):
            cand = [
                Signal(name=f"s2_cand_match{b}"),
                Signal(name=f"s2_cand_live{b}"),
                Signal(name=f"s2_cand_valid{b}"),
                Signal(width, name=f"s2_cand_state{b}"),
            ]
            chosen = []
            for j, (store, src_way, state) in enumerate(decided):
                # the sources but the newest were compared a cycle before (rel_way), so this
                # priority chain starts from registers
                if rel_way[j] is not None:
                    chosen.append(rel_way[j][b])
                else:
                    chosen.append(store & rel_row[j] & (src_way == b))
                values = (rel_live[j] & rel_key[j], rel_live[j], rel_valid[j], state)
                with (m.If if j == 0 else m.Elif)(chosen[j]):
                    m.d.comb += [c.eq(v) for c, v in zip(cand, values, strict=True)]
            with m.Else():
                m.d.comb += [c.eq(v) for c, v in zip(cand, read_bits, strict=True)]
            self.pre_match_next.append(cand[0])
            with m.If(self.advance):
                m.d.sync += [reg[b].eq(c) for reg, c in zip(pre, cand, strict=True)]
            if self.prepare is not None:
                self.pre_hint.append(self._newest_hint(b, s2, chosen, read_bits[3], rel_hint))
        return pre_match, pre_live, pre_valid, pre_state

    def payload_copy(self, b, payload):
        """A copy of its own, beside bank ``b``'s blocks, of the ``payload`` of the operation
        before stage 3 (loaded as it is, a stage before), so that the row read is compared
        with it where both are (:func:`~nfacep.hdl.bram.register_copy`)."""
        q = register_copy(
            self.m, self.platform, Value.cast(self.prev_payload), self.advance, f"s2_payload{b}"
        )
        shape = payload.shape()
        return data.View(shape, q) if isinstance(shape, data.Layout) else q

    def _newest_hint(self, b, s2, chosen, read_state, rel_hint):
        """The hint of way ``b``'s candidate for the operation in ``s2``, in registers that
        stage 3 chooses among (no comparison before a choice in one cycle): ``(z, from_read,
        read_hint, hint)``: whether stage 4's write is the newest to the way (its hint is
        ``z_hint``, the update's), else whether none is (the row read's, worked out now from
        the registered row), else the newest of the others' (``rel_hint``, registers)."""
        m, width = self.m, self.table._update.hint_width
        regs = (
            Signal(name=f"s2_hint_z{b}"),
            Signal(name=f"s2_hint_read{b}"),
            Signal(width, name=f"s2_read_hint{b}"),
            Signal(width, name=f"s2_pre_hint{b}"),
        )
        hint = Signal(width, name=f"s2_cand_hint{b}")
        for j in range(1, len(chosen)):
            with (m.If if j == 1 else m.Elif)(chosen[j]):
                m.d.comb += hint.eq(rel_hint[j])
        with m.If(self.advance):
            m.d.sync += [
                regs[0].eq(chosen[0]),
                regs[1].eq(~_or_all(chosen)),
                regs[2].eq(self.prepare(m, read_state, self.payload_copy(b, s2.payload))),
                regs[3].eq(hint),
            ]
        return regs

    def _stage3(self, t, t_valid, t_op, t_row, t_bank, s2, s2_op, s2_row, pre, last):
        """Stage 3: the write decided last cycle (``last``: stage 4's store, way and new
        state) may still replace what ``pre`` holds; decide. Returns ``(hit, dropped, way,
        store, found)``, ``found`` the state the tuple finds."""
        m, width = self.m, self.table._state_width
        pre_match, pre_live, pre_valid, pre_state = pre
        u_store, u_way, new_state = last
        key = Value.cast(t.key).as_unsigned()
        s2_key = Value.cast(s2.key).as_unsigned()
        row_same0 = Signal(name="s3_row_same0")
        same_key0 = Signal(name="s3_same_key0")
        live0 = Signal(name="s3_live0")
        valid0 = Signal(name="s3_valid0")
        with m.If(self.advance):
            m.d.sync += [
                row_same0.eq(t_row == s2_row),
                same_key0.eq(self.tag_equal(key, s2_key)),
                live0.eq(self.live(~t_op.sweep, t_op.now, s2_op, ahead=1)),
                valid0.eq(~t_op.sweep),
            ]
        matches = Signal(self.banks, name="s3_matches")
        live = Signal(self.banks, name="s3_live")
        valid = Signal(self.banks, name="s3_entry_valid")
        newest_ways = Signal(self.banks, name="s3_newest")  # row_same0 & u_store & (u_way == b)
        ways_found, ways_mine, ways_newest = [], [], []
        for b in range(self.banks):
            newest = newest_ways[b]
            m.d.comb += [
                matches[b].eq(Mux(newest, live0 & same_key0, pre_match[b])),
                live[b].eq(Mux(newest, live0, pre_live[b])),
                valid[b].eq(Mux(newest, valid0, pre_valid[b])),
            ]
            # the state the tuple finds: an AND-OR over the ways, as at most one way matches
            # (it does not wait for `way`)
            mine = matches[b] & (t_bank == b) if self.direct else matches[b]
            ways_found.append(Mux(mine, Mux(newest, new_state, pre_state[b]), 0))
            ways_mine.append(mine)
            ways_newest.append(newest)
        if self.prepare is not None:
            self._stage3_hint(s2, ways_mine, ways_newest)
        hit, dropped, way = self.decide(key, t_bank, matches, ~live, "s3")
        store3, way3 = self.operation(t_valid, t_op, t_bank, dropped, way, valid & ~live)
        newest_now = Cat((t_row == s2_row) & store3 & (way3 == b) for b in range(self.banks))
        with m.If(self.advance):  # from stage 3's decision, a register of its own
            m.d.sync += newest_ways.eq(newest_now)
        found = Signal(width, name="s3_found")
        if width <= _STATE_CHUNK:
            m.d.comb += found.eq(_or_all(ways_found))
            return hit, dropped, way3, store3, found
        # a wide state: each group of its bits chooses from copies of its own of the registers
        # the choice is made of (the same inputs, loaded on the same edges), so that no one
        # register drives the multiplexers of every bit
        sources = (
            (row_same0, t_row == s2_row),
            (same_key0, self.tag_equal(key, s2_key)),
            (live0, self.live(~t_op.sweep, t_op.now, s2_op, ahead=1)),
            (u_store, store3),
            (u_way, way3),
            (pre_match, Cat(self.pre_match_next)),
            (t_bank, self.s2_bank),
        )
        for k, lo in enumerate(range(0, width, _STATE_CHUNK)):
            hi = min(width, lo + _STATE_CHUNK)
            d = Cat(v for _, v in sources)
            q = register_copy(m, self.platform, d, self.advance, f"s3_choice{k}")
            parts, at = [], 0
            for reg, _ in sources:
                parts.append(q[at : at + len(Value.cast(reg))])
                at += len(Value.cast(reg))
            rs, sk, lv, us, uw, pm, tb = parts
            chunk = []
            for b in range(self.banks):
                newest = rs & us & (uw == b)
                mine = Mux(newest, lv & sk, pm[b])
                if self.direct:
                    mine = mine & (tb == b)
                chunk.append(Mux(mine, Mux(newest, new_state[lo:hi], pre_state[b][lo:hi]), 0))
            m.d.comb += found[lo:hi].eq(_or_all(chunk))
        return hit, dropped, way3, store3, found


#: Stage 3 of a state wider than this chooses the state found in groups of this many bits, each
#: from its own copies of the registers the choice is made of.
_STATE_CHUNK = 48


@dataclass
class _WritePort:
    addr: Value
    data: Value
    en: Value


def _or_all(values):
    result = values[0]
    for value in values[1:]:
        result = result | value
    return result
