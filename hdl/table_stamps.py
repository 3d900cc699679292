"""The table store's tick stamps (:class:`~nfacep.hdl.table.TablePartitioner` with timers):
whether an entry read is still in use at an operation's tick, compared at once or, beside the
blocks of a large table, in parts over two cycles."""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Mux, Signal, Value

from .bram import register_copy


class StampStages:
    """The stamp comparisons of the table's stages (a base of ``_Stages`` in
    :mod:`nfacep.hdl.table_stages`, which sets ``table``, ``m``, ``advance``, ``timers``,
    ``max_age``, ``platform`` and, with split stamps, ``early_op``)."""

    def live(self, valid, stamp, op, *, ahead: int | None = None):
        """Whether an entry is in use at tick ``now``: written, and (with timers) not aged out:
        fewer than ``M = 2**B - 1`` ticks since the tick it was stamped with, that is
        ``d = (now - stamp) mod 2**S < M``.

        Without a full subtraction on the block RAM's output: split at bit ``B``, ``d``'s high
        part is zero iff ``stamp_hi`` equals ``now_hi`` (no borrow from the low parts) or
        ``now_hi - 1`` (a borrow; the high part of ``op.back``, counted beside ``now``), and
        then ``d < M`` iff its low ``B`` bits are not all ones.

        ``ahead``: the entry was written by an operation at most this many operations ahead
        of ``op``'s. A tick comes after a tuple, so ``d <= ahead``: with ``M > ahead`` the
        entry is in use iff it is valid, and nothing is compared."""
        if not self.timers or (ahead is not None and self.max_age > ahead):
            return valid
        now = op.now
        b = min(self.table._timer_bits, len(stamp))
        now_lo, stamp_lo = now[:b], stamp[:b]
        borrow = now_lo < stamp_lo
        low_ok = (now_lo - stamp_lo)[:b] != self.max_age
        if b == len(stamp):  # (not built: S > B always) no high part, d is its low part
            return valid & low_ok
        now_hi, stamp_hi = now[b:], stamp[b:]
        high_zero = Mux(borrow, stamp_hi == op.back[b:], stamp_hi == now_hi)
        return valid & high_zero & low_ok

    def stamp_parts(self, stamp, ticks):
        """:meth:`live`'s comparisons of ``stamp`` with an operation's tick, bit by bit, each
        a gate of the stamp's bit and the tick's (``ticks``: per bit of the stamp, the bit of
        ``now`` and, for the low ``B`` bits, of ``now + 1``, for the others of ``back``):
        ``(low_eq, low_lt, low_next, same_now, same_back)``, the first three a bit per low bit
        (the stamp's bit equals ``now``'s; is 0 where ``now``'s is 1; equals that of ``now +
        1``), the last two a bit per high bit (equals ``now``'s; ``back``'s). Registered
        beside the blocks, :meth:`live_parts` ends the comparison in the next cycle."""
        b = self.table._timer_bits
        now = Cat(n for n, _ in ticks)
        other = Cat(o for _, o in ticks)
        return (
            ~(stamp[:b] ^ now[:b]),
            ~stamp[:b] & now[:b],
            ~(stamp[:b] ^ other[:b]),
            ~(stamp[b:] ^ now[b:]),
            ~(stamp[b:] ^ other[b:]),
        )

    def tick_copies(self, bank):
        """For :meth:`stamp_parts` beside bank ``bank``'s blocks: per stamp bit, a register of
        its own (:func:`~nfacep.hdl.bram.register_copy`) loaded on advancing edges with the
        bits of ``now`` and ``now + 1`` or ``back`` of the operation a stage before the one
        whose row leaves the block RAMs, so that they hold its tick when the row does."""
        op, b = self.early_op, self.table._timer_bits
        after = (op.now[:b] + 1)[:b]
        ticks = []
        for i in range(self.table._stamp_bits):
            other = after[i] if i < b else op.back[i]
            q = register_copy(
                self.m, self.platform, Cat(op.now[i], other), self.advance, f"tick{bank}_{i}"
            )
            ticks.append((q[0], q[1]))
        return ticks

    def live_parts(self, valid, parts):
        """:meth:`live` from :meth:`stamp_parts`' registered ``parts``: no borrow from the low
        part (``stamp_lo <= now_lo``) iff they are equal or, at the highest bit where they
        differ, the stamp's is 0; the low part of ``d`` is all ones iff ``stamp_lo`` is
        ``now_lo + 1``."""
        low_eq, low_lt, low_next, same_now, same_back = parts
        b = len(low_eq)
        no_borrow = low_eq.all()
        for i in range(b):
            no_borrow = no_borrow | (low_lt[i] & low_eq[i + 1 :].all())
        low_ok = ~low_next.all()
        return valid & low_ok & Mux(no_borrow, same_now.all(), same_back.all())

    def _split_read(self, e, b):
        """The third read register of bank ``b`` (split stamps): the entry's fields but its
        stamp, and :meth:`stamp_parts` of its stamp with the tick of the operation it was read
        for, computed from the block RAMs' output registers."""
        m, layout = self.m, self.table.entry_layout
        parts = self.stamp_parts(e.stamp, self.tick_copies(b))
        bits = self.table._timer_bits
        high = self.table._stamp_bits - bits
        held = (
            Signal(1, name=f"s0_read_valid{b}"),
            Signal(layout.members["tag"], name=f"s0_read_tag{b}"),
            Signal(layout.members["state"], name=f"s0_read_state{b}"),
            (
                Signal(bits, name=f"s0_read_low_eq{b}"),
                Signal(bits, name=f"s0_read_low_lt{b}"),
                Signal(bits, name=f"s0_read_low_next{b}"),
                Signal(high, name=f"s0_read_same_now{b}"),
                Signal(high, name=f"s0_read_same_back{b}"),
            ),
        )
        with m.If(self.advance):
            m.d.sync += [
                held[0].eq(e.valid),
                held[1].eq(e.tag),
                held[2].eq(e.state),
                *(r.eq(v) for r, v in zip(held[3], parts, strict=True)),
            ]
        return _Read(*held)


@dataclass
class _Read:
    """A row read with its stamp compared in parts (:meth:`_Stages._split_read`)."""

    valid: Value
    tag: Value
    state: Value
    stamp: tuple
