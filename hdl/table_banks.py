"""The table store's banks' copies of their rows (:class:`TableBanks`, a part of
:class:`~nfacep.hdl.table.TablePartitioner`): in a table spread over the device, each bank's
read and write rows from registers of their own, per group of its blocks, and each bank's
spare copy of its row read for the windows' hint."""

from __future__ import annotations

from amaranth.hdl import Const, Module, Signal, Value

from . import table_forwarding
from .bram import dp16kd_tiling, register_copy

__all__ = ["BANK_ROW_GROUPS", "TableBanks"]

#: In a direct table spread over the device, without timers, each bank's read row and write
#: row are registers of their own (``TablePartitioner._bank_copies``), and this many copies of
#: each (at most one per block side by side), each loading the address copies beside one
#: group of the bank's blocks (``RegisteredBank(groups=...)``), so that no one register
#: reaches every block of a bank (4 measured best for PREV at 65,536 entries, of 1 to 8 groups:
#: benchmarks/PAPER_FIGURES.md).
BANK_ROW_GROUPS = 4


class TableBanks:
    """The banks' row copies of :class:`~nfacep.hdl.table.TablePartitioner` (a mixin: its
    geometry, ``update`` and ``copies`` are the partitioner's)."""

    @property
    def _bank_copies(self) -> bool:
        """Whether each bank reads at a copy of its own of the read row
        (:func:`~nfacep.hdl.bram.register_copy`, loaded as stage 1's register is) and writes
        at one of the write row (:meth:`_bank_write_rows`), which its blocks' address copies
        are loaded from: in a direct table spread over the device, without timers, so that no
        register drives the address copies beside every block of every bank (each measured
        better for PREV at 65,536 entries; the write entry and enable copied per bank too
        measured worse: benchmarks/PAPER_FIGURES.md)."""
        return self._copies and self.spread and self._direct and not self.timers

    @property
    def _hint_spare(self) -> bool:
        """Whether each bank's row read reaches the comparisons of its windows' hint from a
        third read register of its own (``RegisteredBank(spare=...)``, the state's bits,
        loaded as ``r_data`` is), beside them, and the rest of the forwarding from ``r_data``:
        in a table spread over the device (:attr:`spread`) whose ``update`` has ``prepare``,
        with four read registers (the row read used as it leaves the third)."""
        return (
            self._registered
            and self._read_stages == 4
            and self.spread
            and getattr(self._update, "prepare", None) is not None
        )

    @staticmethod
    def _spare_state(m: Module, b: int, spare: Value, advance: Value) -> Value:
        """Bank ``b``'s spare copy of the state read (``BREAK_FORWARDING = "spare read"``:
        registered once more, a cycle late)."""
        if table_forwarding.BREAK_FORWARDING != "spare read":
            return spare
        late = Signal(len(spare), name=f"bank{b}_spare_late")
        with m.If(advance):
            m.d.sync += late.eq(spare)
        return late

    def _bank_write_rows(self, m, ctx, s2_row, clearing):
        """With :attr:`_bank_copies`, each bank's write rows (one per group of its blocks,
        :attr:`_row_groups`), registers of their own (:func:`~nfacep.hdl.bram.register_copy`)
        loaded as the one write row is, from copies of their own of stage 3's and stage 4's
        rows (loaded as those are), so that neither the register of stage 4's row (one with
        the output record's key) nor one register for every bank drives the write port's
        copies beside the blocks. While clearing, the copy of stage 4's row holds the sweep's
        row of the next edge (after a reset, the first), counted on its own, so that the
        banks' registers take it as it is, no multiplexer of their own, and the sweep's
        counter drives no copy (``BREAK_FORWARDING = "write row"``: the copies of the rows
        loaded at every edge, stalls included). A list per bank."""
        en = Const(1) if table_forwarding.BREAK_FORWARDING == "write row" else ctx.advance
        row3 = register_copy(m, ctx.platform, s2_row, en, "write_row3")
        row4 = Signal(len(row3), name="write_row4")
        with m.If(clearing):
            # the sweep's row of the next edge: counted on its own (the sweep and this copy
            # both start at the first row after a reset and step at every edge while clearing,
            # and the rows are a power of two), so that the sweep's counter drives no copy
            m.d.sync += row4.eq(row4 + 1)
        with m.Elif(en):
            m.d.sync += row4.eq(row3)
        return [
            [
                register_copy(m, ctx.platform, row4, clearing | g_en, f"bank{b}_write_row{g}")
                for g, g_en in enumerate(self._row_copy_enables(ctx.advance, None))
            ]
            for b in range(self._banks)
        ]

    @property
    def _row_groups(self) -> int:
        """Groups of each bank's blocks with read and write rows of their own with
        :attr:`_bank_copies` (:data:`BANK_ROW_GROUPS`, at most one per block side by side,
        :func:`~nfacep.hdl.bram.dp16kd_groups`); else 1."""
        if not self._bank_copies:
            return 1
        _, _, _, side = dp16kd_tiling(self._rows, self.entry_layout.size)
        return min(BANK_ROW_GROUPS, side)

    def _row_copy_enables(self, advance: Value, broken: str | None) -> list[Value]:
        """The enables of a bank's copies of a row, one per group (:attr:`_row_groups`):
        ``advance``, as the register they copy. Test-only: every edge (stalls included) for
        every group with ``BREAK_FORWARDING == broken``, and for every group but the first
        with ``"row groups"``."""
        mode = table_forwarding.BREAK_FORWARDING
        return [
            Const(1)
            if (mode is not None and mode == broken) or (mode == "row groups" and g)
            else advance
            for g in range(self._row_groups)
        ]
