"""An SDR SDRAM controller: one 32-bit word per request, open rows per bank, bank interleaving.

:class:`SDRAMController` takes requests (read or write one word at (bank, row, column)) on an
``amaranth.lib.stream`` and returns the words read on another, in request order. It drives the
chip's pins directly (:func:`pins_signature`, the signals of amaranth-boards'
``SDRAMResource``, active-high); the board top puts them through the FPGA's I/O registers and
says how many clocks those add to a read (``read_delay``).

How it works:

- **Initialisation**: ``power_up`` clocks of NOP, PRECHARGE all, ``init_refreshes`` REFRESH,
  MODE REGISTER SET (burst length 1, sequential, CAS latency of the timing), tMRD; until then
  ``request.ready`` is low and ``initialised`` is low. A reset of the controller's domain
  later (the board's RESET) runs the same sequence without the power-up wait, which only
  the chip's power-up needs: a few clocks for the commands in flight
  (:meth:`SDRAMController.settle`), so refreshes stay within tREFI across it.
- **Queues per bank**: an accepted request takes the next tag of a reorder buffer of
  ``reorder`` entries and waits in its bank's queue (``queue_depth`` entries). Within a bank,
  requests are served in order (so a read after a write to the same word sees it); across
  banks they are not: each cycle the controller issues one command, a READ/WRITE of a bank
  whose queue head hits its open row first, else a PRECHARGE (head misses the open row) or an
  ACTIVE (bank closed) that the timing allows, banks taken round robin from the one after the
  last served. So a request to another bank's open row does not wait behind a row miss, and
  one bank's ACTIVE and PRECHARGE overlap another's reads and writes.
- **Responses in order**: read data arrives ``CL + 1 + read_delay`` clocks after the READ is
  registered and lands in its tag's entry; the oldest entry retires when done (a write is done
  the clock after it is issued, a read when its data arrived, and then only when
  ``response.ready``). A full reorder buffer or bank queue holds ``request.ready`` low:
  nothing is dropped (``ready`` looks at the offered request's bank, combinationally: its
  source must not derive the payload from ``ready``). ``idle`` is 1 when no request is in
  flight (every write accepted has been issued to the chip).
- **Refresh**: a counter raises a refresh request every ``trefi - margin`` clocks; from then no
  new ACTIVE or READ/WRITE is issued, open banks are precharged when tRAS/tWR allow, and
  REFRESH is issued once every bank is idle (tRP, tRC). ``margin`` is the longest that can take,
  so REFRESH commands are never more than tREFI apart. Requests keep queueing meanwhile, and
  then back up through ``ready``.
- **Timing**: every rule is a down counter (per bank: tRCD, tRAS, tRC, tRP, tWR; shared: tRRD,
  tRFC/tMRD, and the read-to-write bus turnaround: a WRITE at least ``CL + 2`` clocks after a
  READ, so the controller never drives DQ while the chip does, nor the clock after). The figures
  are :class:`~nfacep.hdl.sdram.timing.SDRAMTiming`'s at ``clk_freq``, the same the model checks.

Why an Amaranth controller rather than LiteDRAM's generated core: the store needs exactly this
interface (a word per request at a bank/row/column it chooses, so that it can schedule by bank)
and its tests need every signal visible to Amaranth's simulator beside the SDRAM model; LiteDRAM
is Migen, would enter as a Verilog ``Instance`` opaque to that simulator, and brings a
crossbar, a port per user and bursts for a cache line that a single-word store does not use.
``benchmarks/sdram_controller.py`` measures what this controller sustains: 0.100 random
read-modify-writes per clock in one bank, 0.147-0.167 over the 5A-75B's two banks, 0.20 over
four (the row cycle of a random access, ~10 clocks at 100 MHz, is the chip's, and would bind
LiteDRAM's bank machines alike), in 999 LUTs and 642 flip-flops at 116.7 MHz on the LFE5U-25F
(about 4% of its LUTs). With the throughput bound by the chip and the cost this small, there
is nothing for LiteDRAM to win back that would pay for losing the simulator; it was not
generated or measured here.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from .timing import SDRAMCycles, SDRAMGeometry, SDRAMTiming

__all__ = ["SDRAMController", "pins_signature", "request_layout"]


def pins_signature(geometry: SDRAMGeometry) -> wiring.Signature:
    """The chip's pins as the controller drives them (active-high: 1 asserts the command line);
    ``dq_o``/``dq_oe``/``dq_i`` are the data pins' output, output enable and input."""
    return wiring.Signature(
        {
            "cs": Out(1),
            "ras": Out(1),
            "cas": Out(1),
            "we": Out(1),
            "ba": Out(geometry.bank_bits),
            "a": Out(geometry.address_bits),
            "dq_o": Out(geometry.width),
            "dq_oe": Out(1),
            "dq_i": In(geometry.width),
        }
    )


def request_layout(geometry: SDRAMGeometry) -> data.StructLayout:
    """One request: read (``write`` = 0) or write ``data`` at (bank, row, column)."""
    return data.StructLayout(
        {
            "write": 1,
            "bank": geometry.bank_bits,
            "row": geometry.row_bits,
            "column": geometry.column_bits,
            "data": geometry.width,
        }
    )


def refresh_margin(t: SDRAMCycles, banks: int) -> int:
    """The most clocks from a refresh request to its REFRESH, plus the end of initialisation
    (the refresh counter starts at the last REFRESH of init; running starts tRFC + tMRD later)."""
    return t.tras + t.trcd + t.twr + t.trp + t.trc + banks + t.trfc + t.tmrd + 4


class SDRAMController(wiring.Component):
    """Single-word SDRAM controller (see the module's docstring).

    Parameters: ``geometry`` and ``timing`` of the chip, ``clk_freq`` in Hz, ``queue_depth``
    requests per bank, ``reorder`` requests in flight at most, ``read_delay`` clocks the board's
    I/O registers add to a read. ``cycles_override`` is for tests only: the controller then
    keeps that timing instead of ``timing``'s (to show that the model catches a wrong one).
    """

    def __init__(
        self,
        geometry: SDRAMGeometry,
        timing: SDRAMTiming,
        clk_freq: float,
        *,
        queue_depth: int = 4,
        reorder: int = 8,
        read_delay: int = 0,
        cycles_override: SDRAMCycles | None = None,
    ):
        if reorder < 2 or reorder & (reorder - 1):
            raise ValueError(f"reorder must be a power of two of at least 2, not {reorder}")
        self.geometry, self.timing = geometry, timing
        self.cycles = cycles_override or timing.cycles(clk_freq)
        self.queue_depth, self.reorder, self.read_delay = queue_depth, reorder, read_delay
        self.refresh_period = self.cycles.trefi - refresh_margin(self.cycles, geometry.banks)
        if self.refresh_period < 1:
            raise ValueError(
                f"tREFI of {self.cycles.trefi} clocks leaves no time between refreshes"
            )
        super().__init__(
            {
                "request": In(stream.Signature(request_layout(geometry))),
                "response": Out(stream.Signature(geometry.width)),
                "sdram": Out(pins_signature(geometry)),
                "initialised": Out(1),
                "idle": Out(1),
            }
        )

    # --- helpers -------------------------------------------------------------------------------

    def _command(self, m: Module, ras: int, cas: int, we: int, ba=0, a=0) -> None:
        p = self.sdram
        m.d.sync += [p.ras.eq(ras), p.cas.eq(cas), p.we.eq(we), p.ba.eq(ba), p.a.eq(a)]

    @staticmethod
    def _timer(m: Module, limit: int, name: str) -> Signal:
        """A down counter that stops at 0: ``timer.eq(n - 1)`` lets the next command ``n``
        clocks later."""
        timer = Signal(range(max(2, limit)), name=name)
        with m.If(timer != 0):
            m.d.sync += timer.eq(timer - 1)
        return timer

    def mode_register(self) -> int:
        """Burst length 1 (A2:0 = 0), sequential, CAS latency (A6:4), burst writes."""
        return self.cycles.cas_latency << 4

    # --- the parts -----------------------------------------------------------------------------

    def settle(self) -> int:
        """Clocks a reset of the controller's domain waits, once the chip has powered up,
        before PRECHARGE all: whatever command left just before the reset (an ACTIVE, a WRITE,
        a REFRESH, a MODE REGISTER SET, through the board's I/O registers) has then had its
        time."""
        t = self.cycles
        return max(t.tras, t.twr, t.trfc, t.trc, t.tmrd) + self.read_delay + 1

    def _initialise(self, m: Module, quiet: Signal, refreshed: Signal) -> Signal:
        """The power-up sequence; returns the signal that is 1 once it is over. A reset of the
        domain after it (a RESET of the board's engine) starts it again without the chip's
        power-up wait (``powered``, which no reset clears: the chip stayed powered, and waiting
        power-up again without refreshing would break tREFI), after :meth:`settle` clocks."""
        t = self.cycles
        wait = Signal(range(max(t.power_up, t.trfc, t.trp, t.tmrd) + 1), init=t.power_up)
        powered = Signal(reset_less=True)
        count = Signal(range(t.init_refreshes + 1))
        running = Signal()
        with m.If(wait != 0):
            m.d.sync += wait.eq(wait - 1)
        settled = (wait == 0) | (powered & (wait <= max(0, t.power_up - self.settle())))
        with m.FSM():
            with m.State("POWER-UP"), m.If(settled):
                self._command(m, 1, 0, 1, a=1 << 10)  # PRECHARGE all
                m.d.sync += wait.eq(t.trp - 1)
                m.next = "REFRESH" if t.init_refreshes else "MODE"
            with m.State("REFRESH"), m.If(wait == 0):
                self._command(m, 1, 1, 0)
                m.d.comb += refreshed.eq(1)
                m.d.sync += [wait.eq(t.trfc - 1), count.eq(count + 1)]
                with m.If(count == t.init_refreshes - 1):
                    m.next = "MODE"
            with m.State("MODE"), m.If(wait == 0):
                self._command(m, 1, 1, 1, a=self.mode_register())
                m.d.sync += quiet.eq(t.tmrd - 1)
                m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += running.eq(1)
                m.d.sync += powered.eq(1)
        m.d.comb += self.initialised.eq(running)
        return running

    def _queues(self, m: Module, running: Signal, tag: Signal, room: Signal) -> list:
        """A queue per bank; the input goes to its bank's queue with the next tag."""
        g = self.geometry
        entry = data.StructLayout(
            {
                "tag": len(tag),
                "write": 1,
                "row": g.row_bits,
                "column": g.column_bits,
                "data": g.width,
            }
        )
        queues = []
        for b in range(g.banks):
            q = fifo.SyncFIFOBuffered(width=entry.size, depth=self.queue_depth)
            m.submodules[f"queue{b}"] = q
            queues.append(q)
        req = self.request.payload
        w_rdy = Array(q.w_rdy for q in queues)[req.bank]
        m.d.comb += self.request.ready.eq(running & room & w_rdy)
        for b, q in enumerate(queues):
            item = data.View(entry, q.w_data)
            m.d.comb += [
                item.tag.eq(tag),
                item.write.eq(req.write),
                item.row.eq(req.row),
                item.column.eq(req.column),
                item.data.eq(req.data),
                q.w_en.eq(self.request.valid & self.request.ready & (req.bank == b)),
            ]
        return [(q, data.View(entry, q.r_data)) for q in queues]

    def _reorder(self, m: Module, done_write, read_back) -> tuple[Signal, Signal]:
        """The reorder buffer: returns (tag of the next accepted request, room for one)."""
        n, width = self.reorder, self.geometry.width
        bits = (n - 1).bit_length()
        alloc, retire = Signal(bits + 1), Signal(bits + 1)
        done = Array(Signal(name=f"done{i}") for i in range(n))
        is_read = Array(Signal(name=f"is_read{i}") for i in range(n))
        words = Array(Signal(width, name=f"word{i}") for i in range(n))
        room = Signal()
        m.d.comb += [room.eq((alloc - retire)[: bits + 1] != n), self.idle.eq(alloc == retire)]
        with m.If(self.request.valid & self.request.ready):
            m.d.sync += [alloc.eq(alloc + 1), is_read[alloc[:bits]].eq(~self.request.payload.write)]
        head = retire[:bits]
        # the oldest entry's flags and word through a tree of multiplexers on ``head``'s bits
        # (``word_select``), not a comparison of ``head`` with every index
        head_done = Cat(*done).word_select(head, 1)
        head_read = Cat(*is_read).word_select(head, 1)
        m.d.comb += [
            self.response.valid.eq(head_done & head_read),
            self.response.payload.eq(Cat(*words).word_select(head, width)),
        ]
        retiring = head_done & (~head_read | self.response.ready)
        # a write is marked done the clock after its WRITE: the command choice ends in the
        # WRITE's registers, not in the reorder buffer's flags
        write_valid, write_tag = Signal(name="write_done"), Signal(bits, name="write_done_tag")
        m.d.sync += [write_valid.eq(done_write[0]), write_tag.eq(done_write[1])]
        read_valid, read_tag, read_word = read_back
        for i in range(n):
            with m.If(retiring & (head == i)):
                m.d.sync += done[i].eq(0)
            with m.If((write_valid & (write_tag == i)) | (read_valid & (read_tag == i))):
                m.d.sync += done[i].eq(1)
        with m.If(read_valid):
            m.d.sync += words[read_tag].eq(read_word)
        with m.If(retiring):
            m.d.sync += retire.eq(retire + 1)
        return alloc[:bits], room

    def _read_pipe(self, m: Module, issue: Signal, tag: Signal):
        """Where each READ's tag waits for its data: ``CL + 1 + read_delay`` registers."""
        stages = self.cycles.cas_latency + 1 + self.read_delay
        valid = [Signal(name=f"rd_valid{i}") for i in range(stages)]
        tags = [Signal(len(tag), name=f"rd_tag{i}") for i in range(stages)]
        m.d.sync += [valid[0].eq(issue), tags[0].eq(tag)]
        for i in range(1, stages):
            m.d.sync += [valid[i].eq(valid[i - 1]), tags[i].eq(tags[i - 1])]
        return valid[-1], tags[-1], self.sdram.dq_i

    def _bank_state(self, m: Module, b: int) -> dict:
        t, g = self.cycles, self.geometry
        return {
            "open": Signal(name=f"open{b}"),
            "row": Signal(g.row_bits, name=f"row{b}"),
            "rcd": self._timer(m, t.trcd, f"rcd{b}"),
            "ras": self._timer(m, t.tras, f"ras{b}"),
            "rc": self._timer(m, t.trc, f"rc{b}"),
            "rp": self._timer(m, t.trp, f"rp{b}"),
            "wr": self._timer(m, t.twr, f"wr{b}"),
        }

    def _choose(self, m: Module, column_ok: list, row_ok: list, pointer: Signal) -> tuple:
        """One grant: a column command first, else a row command; round robin from
        ``pointer``."""
        banks = len(column_ok)
        grant_column = [Signal(name=f"grant_column{b}") for b in range(banks)]
        grant_row = [Signal(name=f"grant_row{b}") for b in range(banks)]
        with m.Switch(pointer):
            for p in range(banks):
                with m.Case(p):
                    order = [(p + i) % banks for i in range(banks)]
                    with m.If(Cat(column_ok) != 0):
                        self._first(
                            m, [column_ok[b] for b in order], [grant_column[b] for b in order]
                        )
                    with m.Else():
                        self._first(m, [row_ok[b] for b in order], [grant_row[b] for b in order])
        return grant_column, grant_row

    @staticmethod
    def _first(m: Module, wants: list, grants: list) -> None:
        with m.If(wants[0]):
            m.d.comb += grants[0].eq(1)
        for want, grant in zip(wants[1:], grants[1:], strict=True):
            with m.Elif(want):
                m.d.comb += grant.eq(1)

    # --- the whole -----------------------------------------------------------------------------

    def elaborate(self, platform) -> Module:
        m = Module()
        t, g = self.cycles, self.geometry
        p = self.sdram
        m.d.sync += [p.ras.eq(0), p.cas.eq(0), p.we.eq(0), p.dq_oe.eq(0)]  # NOP unless issued
        quiet = self._timer(m, max(t.trfc, t.tmrd), "quiet")  # tRFC / tMRD: no command at all
        rrd = self._timer(m, t.trrd, "rrd")
        turnaround = self._timer(m, t.cas_latency + 2, "turnaround")  # READ to WRITE
        refreshed = Signal()
        running = self._initialise(m, quiet, refreshed)
        write_done = (Signal(), Signal(range(self.reorder)))
        read_issue, read_tag = Signal(), Signal(range(self.reorder))
        read_back = self._read_pipe(m, read_issue, read_tag)
        tag, room = self._reorder(m, write_done, read_back)
        queues = self._queues(m, running, tag, room)
        banks = [self._bank_state(m, b) for b in range(g.banks)]
        pending = self._refresh_timer(m, running, refreshed)
        free = running & (quiet == 0)
        column_ok, row_ok = [], []
        for (q, head), s in zip(queues, banks, strict=True):
            hit = s["open"] & (s["row"] == head.row)
            column_ok.append(
                free
                & ~pending
                & q.r_rdy
                & hit
                & (s["rcd"] == 0)
                & (~head.write | (turnaround == 0))
            )
            can_precharge = s["open"] & (s["ras"] == 0) & (s["wr"] == 0)
            can_activate = ~s["open"] & (s["rp"] == 0) & (s["rc"] == 0) & (rrd == 0) & ~pending
            row_ok.append(
                free & ((can_precharge & ((q.r_rdy & ~hit) | pending)) | (q.r_rdy & can_activate))
            )
        pointer = Signal(range(g.banks))
        grant_column, grant_row = self._choose(m, column_ok, row_ok, pointer)
        all_idle = Const(1)
        for s in banks:
            all_idle &= ~s["open"] & (s["rp"] == 0) & (s["rc"] == 0)
        with m.If(free & pending & all_idle):
            self._command(m, 1, 1, 0)  # REFRESH
            m.d.comb += refreshed.eq(1)
            m.d.sync += quiet.eq(t.trfc - 1)
        for b, ((q, head), s) in enumerate(zip(queues, banks, strict=True)):
            with m.If(grant_column[b] | grant_row[b]):
                m.d.sync += pointer.eq((b + 1) % g.banks)
            self._issue_column(
                m, b, q, head, s, grant_column[b], turnaround, write_done, read_issue, read_tag
            )
            self._issue_row(m, b, head, s, grant_row[b], rrd)
        m.d.comb += p.cs.eq(1)
        return m

    def _refresh_timer(self, m: Module, running: Signal, refreshed: Signal) -> Signal:
        """1 from when a refresh is due until REFRESH is issued: a register, one clock after
        the counter's end (``refresh_margin`` counts it), so no comparison of the counter lies
        on the path to the command."""
        count = Signal(range(self.refresh_period), init=self.refresh_period - 1)
        pending = Signal()
        with m.If(refreshed):
            m.d.sync += [count.eq(self.refresh_period - 1), pending.eq(0)]
        with m.Elif(running & (count == 0)):
            m.d.sync += pending.eq(1)
        with m.Elif(running):
            m.d.sync += count.eq(count - 1)
        return pending

    def _issue_column(self, m, b, q, head, s, grant, turnaround, write_done, read_issue, read_tag):
        t, p = self.cycles, self.sdram
        with m.If(grant):
            m.d.comb += q.r_en.eq(1)
            self._command(m, 0, 1, head.write, ba=b, a=head.column)
            with m.If(head.write):
                m.d.sync += [p.dq_o.eq(head.data), p.dq_oe.eq(1), s["wr"].eq(t.twr - 1)]
                m.d.comb += [write_done[0].eq(1), write_done[1].eq(head.tag)]
            with m.Else():
                m.d.sync += turnaround.eq(t.cas_latency + 1)
                m.d.comb += [read_issue.eq(1), read_tag.eq(head.tag)]

    def _issue_row(self, m, b, head, s, grant, rrd):
        t = self.cycles
        with m.If(grant):
            with m.If(s["open"]):
                self._command(m, 1, 0, 1, ba=b)  # PRECHARGE this bank
                m.d.sync += [s["open"].eq(0), s["rp"].eq(t.trp - 1)]
            with m.Else():
                self._command(m, 1, 0, 0, ba=b, a=head.row)  # ACTIVE
                m.d.sync += [
                    s["open"].eq(1),
                    s["row"].eq(head.row),
                    s["rcd"].eq(t.trcd - 1),
                    s["ras"].eq(t.tras - 1),
                    s["rc"].eq(t.trc - 1),
                    rrd.eq(t.trrd - 1),
                ]
