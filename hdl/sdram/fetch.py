"""The SDRAM store's traffic with the chip (:class:`SdramFetch`, a base of
:class:`~nfacep.hdl.sdram.store.SdramPartitioner`): a line's address in SDRAM, the clearing of
every line after reset, and the jobs: the victim line written back, the new bucket's words
requested and landed in the cache line."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Signal, Value
from amaranth.lib import data, fifo

from .controller import SDRAMController

__all__ = ["SdramFetch"]


class SdramFetch:
    """The chip's side of a :class:`~nfacep.hdl.sdram.store.SdramPartitioner` (which sets the
    geometry and settings these read)."""

    def _address(self, m: Module, bucket: Value, word: Value, request) -> None:
        """Drive ``request``'s bank, row and column for ``word`` of ``bucket``'s line (as
        :meth:`~nfacep.hdl.sdram.store.SdramTable.address`)."""
        banks, rows = self._bank_bits, self._row_bits
        span_bits = (self._line_span - 1).bit_length()
        column = Cat(word[:span_bits], bucket[banks + rows : banks + rows + self._slot_bits])
        m.d.comb += [
            request.bank.eq(bucket[:banks]),
            request.row.eq(bucket[banks : banks + rows]),
            request.column.eq(column),
        ]

    def _clear(self, m: Module, ctrl: SDRAMController) -> Signal:
        """Write every line the store uses to zero (all entries free); 1 until done."""
        clearing = Signal(init=1 if self._clear_after_reset else 0)
        if not self._clear_after_reset:
            return clearing
        total = self.clearing_words
        index = Signal(range(total + 1))
        # in the chip's order, a row's columns one after another (row hits), not the buckets'
        columns = self._slot_bits + (self._line_span - 1).bit_length()
        rows = columns + self._row_bits
        with m.If(clearing):
            req = ctrl.request.payload
            m.d.comb += [
                req.column.eq(index[:columns]),
                req.row.eq(index[columns:rows]),
                req.bank.eq(index[rows : rows + self._bank_bits]),
            ]
            m.d.comb += [req.write.eq(1), req.data.eq(0), ctrl.request.valid.eq(1)]
            with m.If(ctrl.request.ready):
                m.d.sync += index.eq(index + 1)
                with m.If(index == total - 1):
                    m.d.sync += clearing.eq(0)
        return clearing

    def _fetch(self, m, ctrl, jobs, job, victim_port, w_port, clearing):
        """The jobs, in order: read the victim line, write it back if dirty, request the new
        bucket's words; and the fill: the words read land in their line. Returns
        ``(line, filled)``: ``filled`` is 1 in the cycle the last word of ``line`` lands."""
        g = self.geometry
        width, words = g.width, self._line_words
        current = data.View(job, Signal(job.size, name="job"))
        victim = Signal(words * width, name="victim")
        word = Signal(range(words + 1), name="job_word")
        fills = fifo.SyncFIFOBuffered(width=len(current.line), depth=self._queue)
        m.submodules.fills = fills
        req = ctrl.request.payload
        with m.FSM(name="fetch"):
            with m.State("IDLE"):
                m.d.comb += [victim_port.addr.eq(data.View(job, jobs.r_data).line)]
                with m.If(jobs.r_rdy & ~clearing):
                    m.d.comb += [jobs.r_en.eq(1), victim_port.en.eq(1)]
                    m.d.sync += [current.eq(jobs.r_data), word.eq(0)]
                    m.next = "VICTIM"
            with m.State("VICTIM"):
                m.d.sync += victim.eq(victim_port.data)
                with m.If(current.write_back):
                    m.next = "WRITE"
                with m.Else():
                    m.next = "READ"
            with m.State("WRITE"):
                self._address(m, current.old, word, req)
                m.d.comb += [
                    req.write.eq(1),
                    req.data.eq(victim.word_select(word, width)),
                    ctrl.request.valid.eq(1),
                ]
                with m.If(ctrl.request.ready):
                    m.d.sync += word.eq(word + 1)
                    with m.If(word == words - 1):
                        m.d.sync += word.eq(0)
                        m.next = "READ"
            with m.State("READ"):
                self._address(m, current.new, word, req)
                # the line joins the fills with its first request (its first word may come
                # back before its last is requested)
                first = word == 0
                m.d.comb += [
                    req.write.eq(0),
                    fills.w_data.eq(current.line),
                    ctrl.request.valid.eq(~first | fills.w_rdy),
                ]
                with m.If(ctrl.request.valid & ctrl.request.ready):
                    m.d.comb += fills.w_en.eq(first)
                    m.d.sync += word.eq(word + 1)
                    with m.If(word == words - 1):
                        m.d.sync += word.eq(0)
                        m.next = "IDLE"
        return self._fill(m, ctrl, fills, w_port)

    def _fill(self, m, ctrl, fills, w_port):
        words = self._line_words
        landed = Signal(range(words + 1), name="fill_word")
        filled = Signal()
        # the head's write has the write port first: the words read wait while it may write
        head_writes = Signal(name="head_writes")
        self._head_writes = head_writes
        m.d.comb += ctrl.response.ready.eq(fills.r_rdy & ~head_writes)
        with m.If(ctrl.response.valid & ctrl.response.ready):
            m.d.comb += [
                w_port.addr.eq(fills.r_data),
                w_port.data.eq(ctrl.response.payload.replicate(words)),
                w_port.en.eq(Const(1, words) << landed),
            ]
            m.d.sync += landed.eq(landed + 1)
            with m.If(landed == words - 1):
                m.d.sync += landed.eq(0)
                m.d.comb += [fills.r_en.eq(1), filled.eq(1)]
        return fills.r_data, filled
