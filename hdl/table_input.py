"""The table partitioner's front (:class:`TableInput`, a base of
:class:`~nfacep.hdl.table.TablePartitioner`): stage 1 (the input register, the bucket hash,
ticks and aging sweep steps), the read registers after it, and the clearing sweep after
reset."""

from __future__ import annotations

from amaranth.hdl import Const, Module, Signal, Value
from amaranth.lib import data

__all__ = ["TableInput"]


class TableInput:
    """Stage 1 and the read registers of a :class:`~nfacep.hdl.table.TablePartitioner` (which
    sets the geometry, ``_index_bits``, ``_rows``, ``_banks``, ``_direct``, ``_copies``, the
    timers' settings and the stream members these read)."""

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

    def _input(self, m: Module, advance: Value, clearing: Value, sweep: Value):
        """Stage 1 (the input register, the bucket hash, ticks and aging sweep steps) and the
        read registers after it: ``(chain, read_row, row_next)``, the operation after each read
        register (``(payload, valid, op, row, bank)``, the last the one before the tail), the
        row the banks read, and what that row's register is loaded with on edges where
        ``advance`` is high (``None`` when the row is not a register's bits: hashed, without
        timers, the CRC register's complement). ``clearing`` and ``sweep`` are the clearing
        sweep's (:meth:`_clearing`)."""
        row_bits, bank_bits = self._index_bits
        timers = self.timers
        accept = Signal()
        force = Const(0)
        if timers:
            now, back, sweep_at, step, force = self._aging(m, advance, clearing, accept)
        m.d.comb += self.i_stream.ready.eq(advance & self._taking(m, clearing, sweep) & ~force)
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
        # s1 is loaded with the input's payload: direct, its row is the key's high bits
        in_key = Value.cast(self.i_stream.payload.key).as_unsigned()
        row_next = in_key[bank_bits:] if self._direct and not timers else None
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
            row_next = s1_row
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
        chain = self._read_registers(m, advance, (s2, s2_valid, s2_op, s2_row, s2_bank))
        return chain, head[3], row_next

    def _taking(self, m: Module, clearing: Value, sweep: Value) -> Value:
        """Whether the input may take a tuple as far as the clearing sweep goes: ``~clearing``,
        or, in a direct table whose banks' ports are copied beside their blocks (blocks spread
        over the device) and without timers, a register of its own, ``opened``, set on the
        edge where ``clearing`` falls and reset with it (its complement at every edge), so that
        the flag that drives the write port's multiplexers is not also on the input FIFO's read
        path (measured better for PREV at 65,536 entries, not for ``start_seq`` at 4,096:
        benchmarks/PAPER_FIGURES.md)."""
        if not (self._direct and self._copies) or self.timers:
            return ~clearing
        opened = Signal(name="opened")
        with m.If(clearing & (sweep == self._rows - 1)):
            m.d.sync += opened.eq(1)
        return opened

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
