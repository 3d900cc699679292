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

from amaranth.hdl import Cat, Const, Module, Shape, ShapeLike, Signal, Value, ValueLike
from amaranth.lib import crc, data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

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
    data is registered once more, outside the block RAM's clock-to-output path, and the
    write-back is registered too (it reaches the bank a cycle later, from a register); the
    three writes decided at the last three advancing edges, which that read cannot have seen,
    are kept and the newest one to the tuple's row replaces the entry of the way it wrote
    (the choice is registered a cycle early). Either way each tuple sees everything before it,
    even back-to-back tuples of one key or one bucket.

    Latency: 4 cycles (3 without ``registered``). A tuple transferred on ``i_stream`` at clock
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
        Register the block RAM's read data before the last stage and the write-back after it
        (forwarding the writes in flight): one more cycle of latency, no long path into or
        out of the block RAM.

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

        self._input_layout = data.StructLayout({
            "key": key_shape,
            "payload": payload_shape,
        })
        self._output_layout = data.StructLayout({
            "key": key_shape,
            "payload": payload_shape,
            "result": result_shape,
            "dropped": 1,
            "fresh": 1,
        })
        super().__init__({
            "i_stream": In(stream.Signature(self._input_layout)),
            "o_stream": Out(stream.Signature(self._output_layout)),
            "tuples": Out(counter_width),
            "drops": Out(counter_width),
        })

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
        return 4 if self._registered else 3

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

        m.submodules.out = out = StreamBuffer(self._output_layout)
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
        s1 = Signal(self._input_layout, name="s1")
        s1_valid = Signal(name="s1_valid")
        s2 = Signal(self._input_layout, name="s2")
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

        # the last stage's decision
        way = Signal(bank_bits, name="last_way")
        written = Signal(layout, name="last_written")
        store = Signal(name="last_store")

        if registered:
            # --- stage 3: the read data registered, and the writes it may have missed -------
            # hist[0..2]: the writes decided by the last stage at the last three advancing
            # edges (updated only when the pipeline advances). hist[0] is written to its bank on
            # every cycle until the next advance (again and again while stalled: harmless), so
            # the memory holds every write decided before the edge before last. The read for
            # the tuple in stage 3 was made at the edge before last and saw none of the three;
            # the newest of them that hit the tuple's row in a way replaces that way's entry.
            # Which one does is decided a cycle early, into `sel`.
            t = Signal(self._input_layout, name="s3")
            t_valid = Signal(name="s3_valid")
            t_row = Signal(row_bits, name="s3_row")
            t_bank = Signal(bank_bits, name="s3_bank")
            hist_layout = data.StructLayout({"valid": 1, "row": row_bits, "way": bank_bits,
                                             "entry": layout})
            hist = [Signal(hist_layout, name=f"hist{i}") for i in range(3)]
            sel = [[Signal(name=f"s3_sel{i}_way{b}") for b in range(banks)] for i in range(3)]
            loaded = [Signal(layout, name=f"s3_read{b}") for b in range(banks)]
            newest = [(store, t_row, way)] + [(h.valid, h.row, h.way) for h in hist[:2]]
            with m.If(advance):
                m.d.sync += [
                    t_valid.eq(s2_valid), t.eq(s2), t_row.eq(s2_row), t_bank.eq(s2_bank),
                    hist[0].valid.eq(store), hist[0].row.eq(t_row), hist[0].way.eq(way),
                    hist[0].entry.eq(written), hist[1].eq(hist[0]), hist[2].eq(hist[1]),
                ]
                m.d.sync += [r.eq(d) for r, d in zip(loaded, read_data, strict=True)]
                for i, (valid, row, hist_way) in enumerate(newest):
                    m.d.sync += [sel[i][b].eq(valid & (row == s2_row) & (hist_way == b))
                                 for b in range(banks)]
            seen = []
            for b in range(banks):
                entry = Signal(layout, name=f"s3_entry{b}")
                with m.If(sel[0][b]):
                    m.d.comb += entry.eq(hist[0].entry)
                with m.Elif(sel[1][b]):
                    m.d.comb += entry.eq(hist[1].entry)
                with m.Elif(sel[2][b]):
                    m.d.comb += entry.eq(hist[2].entry)
                with m.Else():
                    m.d.comb += entry.eq(loaded[b])
                seen.append(entry)
            t_key = Value.cast(t.key).as_unsigned()
            if not self._direct:
                # A forwarded entry is valid and its tag is the key of the tuple that wrote it,
                # so its comparison with this tuple's key is made a cycle early too: then the
                # way decision, which the next tuple's `sel` depends on, is a few levels deep.
                same_key = [Signal(name=f"s3_same_key{i}") for i in range(3)]
                s2_key = Value.cast(s2.key).as_unsigned()
                with m.If(advance):
                    m.d.sync += [
                        same_key[0].eq(t_key == s2_key),
                        same_key[1].eq(hist[0].entry.tag == s2_key),
                        same_key[2].eq(hist[1].entry.tag == s2_key),
                    ]
                matches = Signal(banks, name="s3_matches")
                free = Signal(banks, name="s3_free")
                for b in range(banks):
                    with m.If(sel[0][b]):
                        m.d.comb += matches[b].eq(same_key[0])
                    with m.Elif(sel[1][b]):
                        m.d.comb += matches[b].eq(same_key[1])
                    with m.Elif(sel[2][b]):
                        m.d.comb += matches[b].eq(same_key[2])
                    with m.Else():
                        m.d.comb += [matches[b].eq(loaded[b].valid & (loaded[b].tag == t_key)),
                                     free[b].eq(~loaded[b].valid)]
        else:
            t, t_valid, t_row, t_bank, seen = s2, s2_valid, s2_row, s2_bank, read_data
            t_key = Value.cast(t.key).as_unsigned()
            if not self._direct:
                matches = Cat(e.valid & (e.tag == t_key) for e in seen)
                free = Cat(~e.valid for e in seen)

        # --- last stage: find the key's way, update, write back, emit -------------------------
        hit = Signal(name="last_hit")
        dropped = Signal(name="last_dropped")
        current = Signal(self._state_width, name="last_state")
        if self._direct:
            entry = Signal(layout, name="last_entry")
            with m.Switch(t_bank):
                for b in range(banks):
                    with m.Case(b):
                        m.d.comb += entry.eq(seen[b])
            m.d.comb += [hit.eq(entry.valid), way.eq(t_bank), dropped.eq(0)]
            with m.If(hit):
                m.d.comb += current.eq(entry.state)
        else:
            m.d.comb += [hit.eq(matches.any()), dropped.eq(~matches.any() & ~free.any())]
            for b in range(banks):  # one-hot when hit: the key is stored at most once
                with m.If(matches[b]):
                    m.d.comb += [current.eq(seen[b].state), way.eq(b)]
            with m.If(~matches.any()):
                for b in reversed(range(banks)):  # the lowest free way wins
                    with m.If(free[b]):
                        m.d.comb += way.eq(b)

        new_state_value, result_value = self._update(m, current, t.payload)
        new_state = Signal(self._state_width, name="last_new_state")
        result = Signal(self._result_shape, name="last_result")
        m.d.comb += [new_state.eq(new_state_value), result.eq(result_value)]

        m.d.comb += [written.valid.eq(1), written.state.eq(new_state)]
        if not self._direct:
            m.d.comb += written.tag.eq(t_key)
        m.d.comb += store.eq(advance & t_valid & ~dropped)
        for b, wp in enumerate(write_ports):
            with m.If(clearing):
                m.d.comb += [wp.addr.eq(sweep), wp.data.eq(Const(0, layout.size)), wp.en.eq(1)]
            with m.Else():
                if registered:  # from a register: nothing long ends at the block RAM
                    m.d.comb += [wp.addr.eq(hist[0].row), wp.data.eq(hist[0].entry),
                                 wp.en.eq(hist[0].valid & (hist[0].way == b))]
                else:
                    m.d.comb += [wp.addr.eq(t_row), wp.data.eq(written),
                                 wp.en.eq(store & (way == b))]

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
