"""The table partitioner: one state vector per partition key in block RAM, one tuple per clock.

The second partition store beside the swap pipeline (``hdl/partitioner.py``), chosen with
``--store table``: the same stream interface and counters as
:class:`~nfacep.hdl.partitioner.StreamPartitioner`, the same caller-supplied ``update``
function, but the partitions live in ``amaranth.lib.memory`` banks (block RAM on ECP5 and
iCE40) instead of a chain of registers. ``nfacep.capacity`` (``table_slots``, ``key_crc32``)
models which tuples it drops.
"""

from __future__ import annotations

from collections.abc import Callable

from amaranth.hdl import Cat, Const, Module, Mux, Shape, ShapeLike, Signal, Value, ValueLike
from amaranth.lib import crc, data, wiring
from amaranth.lib.memory import Memory

from .partitioner import store_signature
from .queue import StreamBuffer

__all__ = ["TablePartitioner"]


UpdateFunction = Callable[[Module, Value, "data.View | Value"], tuple[ValueLike, ValueLike]]


class TablePartitioner(wiring.Component):
    """Stream partitioner over a table in block RAM (``--store table``, no timers).

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
      little-endian bytes, which is :func:`nfacep.capacity.key_crc32`. Each entry holds
      (valid, the whole key as tag, state). A tuple whose key is stored in its bucket finds its
      state there; otherwise it takes the lowest-numbered free way of the bucket and starts
      from the all-zero state (``fresh``); if the bucket is full it is dropped (``dropped``,
      counted in ``drops``) and nothing changes.

    A processed tuple's entry then holds ``update(state, payload)``. Entries are never freed
    (there are no timers yet), so in each bucket the first ``W`` keys stay.

    Pipeline: the input register (and, hashed, the CRC register) takes the tuple; the next
    cycle presents its row to every bank's read port. Without ``registered`` the read ports
    are transparent for their bank's write port (the read sees the write made at the same
    edge), and the cycle after the read compares the ways' tags, applies ``update``, writes
    the entry back and hands the record to the output register
    (:class:`~nfacep.hdl.queue.StreamBuffer`). With ``registered`` (the default) the read
    data is registered once more, outside the block RAM's clock-to-output path; stage 3
    decides (hit, way, drop) from it and from the four writes it cannot have seen (those of
    the tuple in stage 4 and of the last three written back), stage 4 applies ``update``, and
    the write-back reaches its bank from a register (``_Stages.registered_tail`` has the
    argument). Either way each tuple sees everything before it, even back-to-back tuples of
    one key or one bucket.

    Latency: 5 cycles (3 without ``registered``). A tuple transferred on ``i_stream`` at clock
    edge ``n`` has its record valid on ``o_stream`` from edge ``n + latency - 1``, so with
    ``o_stream.ready`` high it is transferred at edge ``n + latency``.

    Throughput: one tuple per cycle, sustained, whatever the keys.

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
        As for :class:`~nfacep.hdl.partitioner.StreamPartitioner`.
    entries : :class:`int`
        ``E``, the table's entries (a power of two).
    ways : :class:`int`
        ``W``, entries of a bucket (a power of two, at most ``entries``), one bank each.
    registered : :class:`bool`
        Register the block RAM's read data and the write-back, and decide and update in
        separate stages (forwarding the writes in flight): two more cycles of latency, no long
        path into or out of the block RAM, and the way decision apart from ``update``.

    Members
    -------
    i_stream, o_stream, tuples, drops
        As for :class:`~nfacep.hdl.partitioner.StreamPartitioner`.
    """

    def __init__(self, *, key_shape: ShapeLike, payload_shape: ShapeLike, state_width: int,
                 result_shape: ShapeLike, entries: int, ways: int, update: UpdateFunction,
                 registered: bool = True, counter_width: int = 32):
        key_width = Shape.cast(key_shape).width
        Shape.cast(payload_shape)
        Shape.cast(result_shape)
        if not isinstance(state_width, int) or state_width < 0:
            raise ValueError(f"State width must be a non-negative integer, not {state_width!r}")
        for name, value in (("Entries", entries), ("Ways", ways)):
            if not isinstance(value, int) or value < 1 or value & (value - 1):
                raise ValueError(f"{name} must be a positive power of two, not {value!r}")
        if ways > entries:
            raise ValueError(f"Ways ({ways}) must not exceed entries ({entries})")
        if key_width < 1:
            raise ValueError("The key must be at least one bit wide")
        if not isinstance(counter_width, int) or counter_width < 1:
            raise ValueError(f"Counter width must be a positive integer, not {counter_width!r}")
        if not callable(update):
            raise TypeError(f"Update function must be callable, not {update!r}")

        self._key_shape = key_shape
        self._key_width = key_width
        self._payload_shape = payload_shape
        self._state_width = state_width
        self._result_shape = result_shape
        self._entries = entries
        self._ways = ways
        self._update = update
        self._registered = bool(registered)
        self._counter_width = counter_width

        index_bits = (entries - 1).bit_length()
        self._direct = key_width <= index_bits
        if self._direct:
            used = 1 << key_width
            self._banks = min(ways, used)
            self._rows = used // self._banks
        else:
            self._banks = ways
            self._rows = entries // ways

        super().__init__(store_signature(key_shape, payload_shape, result_shape,
                                         counter_width))

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
    def banks(self) -> int:
        """Block-RAM banks (memories) built: the ways, or the direct table's interleave."""
        return self._banks

    @property
    def rows(self) -> int:
        """Rows of each bank, and cycles of the clearing sweep after reset."""
        return self._rows

    @property
    def latency(self) -> int:
        """Clock edges from a tuple's input transfer to its record's output transfer, unstalled."""
        return 5 if self._registered else 3

    @property
    def entry_layout(self) -> data.StructLayout:
        """One entry of a bank: valid, the key as tag (hashed only), the state vector."""
        return data.StructLayout({
            "valid": 1,
            "tag": 0 if self._direct else self._key_width,
            "state": self._state_width,
        })

    @property
    def crc_parameters(self) -> crc.Parameters:
        """The bucket hash: CRC-32 over the key's ``ceil(w / 8)`` bytes as one word."""
        return crc.catalog.CRC32_ISO_HDLC(data_width=8 * ((self._key_width + 7) // 8))

    def elaborate(self, platform):
        m = Module()
        banks, rows = self._banks, self._rows
        row_bits = (rows - 1).bit_length()
        bank_bits = (banks - 1).bit_length()
        layout = self.entry_layout

        m.submodules.out = out = StreamBuffer(self.o_stream.payload.shape())
        wiring.connect(m, out.o_stream, wiring.flipped(self.o_stream))
        advance = Signal()
        m.d.comb += advance.eq(out.i_stream.ready)

        # --- clearing sweep after reset ---------------------------------------------------
        clearing = Signal(init=1)
        sweep = Signal(range(rows), name="sweep_row")
        with m.If(clearing):
            m.d.sync += sweep.eq(sweep + 1)
            with m.If(sweep == rows - 1):
                m.d.sync += [clearing.eq(0), sweep.eq(0)]

        # --- stage 1: input register (and the bucket hash) -----------------------------------
        m.d.comb += self.i_stream.ready.eq(advance & ~clearing)
        accept = Signal()
        m.d.comb += accept.eq(self.i_stream.valid & self.i_stream.ready)
        with m.If(accept):
            m.d.sync += self.tuples.eq(self.tuples + 1)

        in_key = Value.cast(self.i_stream.payload.key).as_unsigned()
        s1 = Signal(self.i_stream.payload.shape(), name="s1")
        s1_valid = Signal(name="s1_valid")
        s2 = Signal(self.i_stream.payload.shape(), name="s2")
        s2_valid = Signal(name="s2_valid")
        s2_row = Signal(row_bits, name="s2_row")
        s1_row = Signal(row_bits, name="s1_row")
        s1_bank = Signal(bank_bits, name="s1_bank")
        s2_bank = Signal(bank_bits, name="s2_bank")
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
                s1_row.eq(hasher.crc[:row_bits]),
            ]
        with m.If(advance):
            m.d.sync += [
                s1_valid.eq(accept),
                s1.eq(self.i_stream.payload),
                s2_valid.eq(s1_valid),
                s2.eq(s1),
                s2_row.eq(s1_row),
                s2_bank.eq(s1_bank),
            ]

        # --- the banks: read in stage 1 ---------------------------------------------------------
        registered = self._registered
        read_data = []
        write_ports = []
        for b in range(banks):
            mem = Memory(shape=layout, depth=rows, init=[])
            m.submodules[f"bank{b}"] = mem
            wp = mem.write_port()
            # registered: the forwarding below replaces the port's transparency (which Yosys
            # would build in logic after the block RAM's output)
            rp = mem.read_port(transparent_for=() if registered else (wp,))
            m.d.comb += [rp.addr.eq(s1_row), rp.en.eq(advance)]
            read_data.append(rp.data)
            write_ports.append(wp)

        ctx = _Stages(self, m, advance, layout, row_bits, bank_bits)
        if registered:
            t, t_valid, hit, dropped, way, row, written, store, result = ctx.registered_tail(
                s2, s2_valid, s2_row, s2_bank, read_data)
            # from registers: nothing long ends at the block RAM (written again and again while
            # stalled, which is harmless)
            w_valid, w_row, w_way, w_entry = ctx.hist[0].valid, ctx.hist[0].row, \
                ctx.hist[0].way, ctx.hist[0].entry
        else:
            t, t_valid, hit, dropped, way, row, written, store, result = ctx.simple_tail(
                s2, s2_valid, s2_row, s2_bank, read_data)
            w_valid, w_row, w_way, w_entry = store, row, way, written
        for b, wp in enumerate(write_ports):
            with m.If(clearing):
                m.d.comb += [wp.addr.eq(sweep), wp.data.eq(Const(0, layout.size)), wp.en.eq(1)]
            with m.Else():
                m.d.comb += [wp.addr.eq(w_row), wp.data.eq(w_entry),
                             wp.en.eq(w_valid & (w_way == b))]

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


class _Stages:
    """The stages after the block-RAM read of a :class:`TablePartitioner`: the simple one
    (decide and update in the cycle after the read) or the registered ones."""

    def __init__(self, table: TablePartitioner, m: Module, advance, layout, row_bits,
                 bank_bits):
        self.table, self.m, self.advance, self.layout = table, m, advance, layout
        self.row_bits, self.bank_bits = row_bits, bank_bits
        self.banks = table.banks
        self.direct = table.direct

    def decide(self, key, bank, matches, free, name):
        """hit, dropped, way from the ways' match and free bits (hashed) or the bank (direct;
        ``matches`` then holds each bank's valid bit)."""
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

    def update(self, current, payload, name):
        table, m = self.table, self.m
        new_state_value, result_value = table._update(m, current, payload)
        new_state = Signal(table._state_width, name=f"{name}_new_state")
        result = Signal(table._result_shape, name=f"{name}_result")
        m.d.comb += [new_state.eq(new_state_value), result.eq(result_value)]
        return new_state, result

    def entry(self, key, state, name):
        written = Signal(self.layout, name=name)
        self.m.d.comb += [written.valid.eq(1), written.state.eq(state)]
        if not self.direct:
            self.m.d.comb += written.tag.eq(key)
        return written

    def simple_tail(self, t, t_valid, t_row, t_bank, seen):
        """Decide, update and write back in the cycle after the read (the read ports are
        transparent for the write ports)."""
        m = self.m
        key = Value.cast(t.key).as_unsigned()
        matches = Cat(e.valid & self.tag_equal(e.tag, key) for e in seen)
        free = Cat(~e.valid for e in seen)
        hit, dropped, way = self.decide(key, t_bank, matches, free, "last")
        current = Signal(self.table._state_width, name="last_state")
        for b in range(self.banks):
            with m.If(hit & (way == b)):
                m.d.comb += current.eq(seen[b].state)
        new_state, result = self.update(current, t.payload, "last")
        written = self.entry(key, new_state, "last_written")
        store = Signal(name="last_store")
        m.d.comb += store.eq(self.advance & t_valid & ~dropped)
        return t, t_valid, hit, dropped, way, t_row, written, store, result

    def registered_tail(self, s2, s2_valid, s2_row, s2_bank, read_data):
        """Stage 3 registers the read data and decides (hit, way, drop) from it and from the
        decisions it cannot have seen; stage 4 updates the state and hands the entry to
        ``hist[0]``, from where it is written.

        The read for a tuple reaching stage 3 was made at the edge before last. It saw every
        write decided before the last four advancing edges: not the decisions of the tuple in
        stage 4 now nor of ``hist[0..2]`` (the writes handed on at the last three advancing
        edges; ``hist[0]`` reaches its bank at every edge until the next advance). For each
        way, the newest of those four that went to the tuple's row replaces what was read;
        which one does, and whether its key is the tuple's, is decided a cycle early. The
        state a hit finds is taken when the tuple enters stage 4, from the update being made
        there in that cycle if the tuple ahead wrote the same entry."""
        m, banks, layout, advance = self.m, self.banks, self.layout, self.advance
        table = self.table
        in_layout = s2.shape()
        hist_layout = data.StructLayout({"valid": 1, "row": self.row_bits,
                                         "way": self.bank_bits, "entry": layout})
        self.hist = hist = [Signal(hist_layout, name=f"hist{i}") for i in range(3)]

        # stage 3
        t = Signal(in_layout, name="s3")
        t_valid = Signal(name="s3_valid")
        t_row = Signal(self.row_bits, name="s3_row")
        t_bank = Signal(self.bank_bits, name="s3_bank")
        loaded = [Signal(layout, name=f"s3_read{b}") for b in range(banks)]
        # stage 4: the decision of stage 3, the state found
        u = Signal(in_layout, name="s4")
        u_valid = Signal(name="s4_valid")
        u_row = Signal(self.row_bits, name="s4_row")
        u_way = Signal(self.bank_bits, name="s4_way")
        u_hit = Signal(name="s4_hit")
        u_dropped = Signal(name="s4_dropped")
        u_state = Signal(table._state_width, name="s4_state")

        key = Value.cast(t.key).as_unsigned()
        u_key = Value.cast(u.key).as_unsigned()
        s2_key = Value.cast(s2.key).as_unsigned()
        sources = 4  # the tuple in stage 4, hist[0], hist[1], hist[2]: newest first
        sel = [[Signal(name=f"s3_sel{i}_way{b}") for b in range(banks)] for i in range(sources)]
        same_key = [Signal(name=f"s3_same_key{i}") for i in range(sources)]

        matches = Signal(banks, name="s3_matches")
        free = Signal(banks, name="s3_free")
        for b in range(banks):
            with m.If(sel[0][b]):
                m.d.comb += matches[b].eq(same_key[0])
            for i in range(1, sources):
                with m.Elif(sel[i][b]):
                    m.d.comb += matches[b].eq(same_key[i])
            with m.Else():
                m.d.comb += [matches[b].eq(loaded[b].valid & self.tag_equal(loaded[b].tag, key)),
                             free[b].eq(~loaded[b].valid)]
        hit, dropped, way = self.decide(key, t_bank, matches, free, "s3")
        store3 = Signal(name="s3_store")
        m.d.comb += store3.eq(t_valid & ~dropped)

        # stage 4
        new_state, result = self.update(u_state, u.payload, "s4")
        written = self.entry(u_key, new_state, "s4_written")
        store4 = Signal(name="s4_store")
        m.d.comb += store4.eq(u_valid & ~u_dropped)

        # the state the tuple in stage 3 finds, taken as it enters stage 4
        # (an AND-OR over the ways, as at most one way matches: it does not wait for `way`)
        found = Signal(table._state_width, name="s3_found")
        ways_found = []
        for b in range(banks):
            state_b = Signal(table._state_width, name=f"s3_state{b}")
            with m.If(sel[0][b]):
                m.d.comb += state_b.eq(new_state)
            for i in range(1, sources):
                with m.Elif(sel[i][b]):
                    m.d.comb += state_b.eq(hist[i - 1].entry.state)
            with m.Else():
                m.d.comb += state_b.eq(loaded[b].state)
            mine = matches[b] & (t_bank == b) if self.direct else matches[b]
            ways_found.append(Mux(mine, state_b, 0))
        m.d.comb += found.eq(_or_all(ways_found))

        # the decisions newest first, as they stand before the edge: they become stage 4's
        # and hist[0..2] for the tuple entering stage 3
        newest = [(store3, t_row, way, key), (store4, u_row, u_way, u_key),
                  (hist[0].valid, hist[0].row, hist[0].way, hist[0].entry.tag),
                  (hist[1].valid, hist[1].row, hist[1].way, hist[1].entry.tag)]
        with m.If(advance):
            m.d.sync += [
                t_valid.eq(s2_valid), t.eq(s2), t_row.eq(s2_row), t_bank.eq(s2_bank),
                u_valid.eq(t_valid), u.eq(t), u_row.eq(t_row), u_way.eq(way),
                u_hit.eq(hit), u_dropped.eq(dropped), u_state.eq(found),
                hist[0].valid.eq(store4), hist[0].row.eq(u_row), hist[0].way.eq(u_way),
                hist[0].entry.eq(written), hist[1].eq(hist[0]), hist[2].eq(hist[1]),
            ]
            m.d.sync += [r.eq(d) for r, d in zip(loaded, read_data, strict=True)]
            for i, (valid, row, src_way, src_key) in enumerate(newest):
                m.d.sync += [sel[i][b].eq(valid & (row == s2_row) & (src_way == b))
                             for b in range(banks)]
                m.d.sync += same_key[i].eq(self.tag_equal(src_key, s2_key))
        return u, u_valid, u_hit, u_dropped, u_way, u_row, written, store4, result


def _or_all(values):
    result = values[0]
    for value in values[1:]:
        result = result | value
    return result
