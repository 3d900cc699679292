"""The SDRAM chip as gateware, for simulation only: the model every simulator mode can run.

:class:`SDRAMChip` is :class:`~nfacep.hdl.sdram.model.SDRAMModel` written in Amaranth, so
that a Verilog simulation (Icarus, Verilator; ``nfacep sim`` and ``nfacep regress`` in every
``--mode``) runs the chip beside the engine with no Python per clock. It takes the
controller's pins (:func:`~nfacep.hdl.sdram.controller.pins_signature`, flipped), stores the
words, drives ``dq_i`` with read data ``CL`` clocks after a READ (the mode register's CAS
latency, 2 or 3) and a pattern (``floating``) when it drives nothing, and checks the rules the
Python model checks, named alike (:data:`RULES`): a broken rule sets its bit of ``errors``,
which stays set (the model raises instead), and ``error_cycle`` keeps the edge of the first
(edges counted from the first after reset, as the model counts them). Words never written
read as :func:`~nfacep.hdl.sdram.model.unwritten`'s pattern, not zero.

It is not synthesisable in any useful sense (64-bit time stamps, a memory of the whole chip):
it is a testbench part. Its memory is an Amaranth ``Memory`` in Amaranth's simulator and a
plain Verilog array (:data:`ARRAY_VERILOG`, module :data:`ARRAY_MODULE`) in emitted Verilog,
where a million-word ``Memory`` would be written out word by word. :func:`chip_verilog`
emits it (module :data:`CHIP_MODULE`).

``tests/hdl/sdram/test_sdram_chip.py`` runs the model's hand-written sequences through both
and checks that each broken rule is the one flagged.
"""

from __future__ import annotations

from amaranth.hdl import Cat, ClockSignal, Const, Instance, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .controller import pins_signature
from .sim import FLOATING
from .timing import SDRAMCycles, SDRAMGeometry

__all__ = ["ARRAY_MODULE", "CHIP_MODULE", "RULES", "SDRAMChip", "chip_verilog", "rules_in"]

#: The rules, in the order of ``errors``' bits (the names the model's errors carry).
RULES = (
    "power-up",
    "init",
    "state",
    "address",
    "unsupported",
    "bus",
    "CL",
    "tRCD",
    "tRP",
    "tRAS",
    "tRAS max",
    "tRC",
    "tRRD",
    "tWR",
    "tRFC",
    "tMRD",
    "tREFI",
)

CHIP_MODULE = "nfacep_sdram_chip"
ARRAY_MODULE = "nfacep_sdram_array"
ARRAY_VERILOG = f"""
// the SDRAM model's words (nfacep.hdl.sdram.chip): a plain array, read synchronously
module {ARRAY_MODULE} #(parameter WIDTH = 33, parameter ABITS = 20) (
    input wire clk,
    input wire we,
    input wire [ABITS-1:0] waddr,
    input wire [WIDTH-1:0] wdata,
    input wire [ABITS-1:0] raddr,
    output reg [WIDTH-1:0] rdata
);
    reg [WIDTH-1:0] mem [0:(1 << ABITS) - 1];
    always @(posedge clk) begin
        if (we) mem[waddr] <= wdata;
        rdata <= mem[raddr];
    end
endmodule
"""

STAMP = 64


def rules_in(errors: int) -> list[str]:
    """The rules whose bits ``errors`` has set."""
    return [rule for i, rule in enumerate(RULES) if errors >> i & 1]


class SDRAMChip(wiring.Component):
    """The chip of ``geometry`` with ``cycles`` on the controller's pins (see the module's
    docstring). ``verilog_array``: keep the words in :data:`ARRAY_MODULE` (for emitted
    Verilog) rather than an Amaranth ``Memory`` (for Amaranth's simulator)."""

    def __init__(
        self,
        geometry: SDRAMGeometry,
        cycles: SDRAMCycles,
        *,
        verilog_array: bool = False,
        floating: int = FLOATING,
    ):
        self.geometry, self.t = geometry, cycles
        self._verilog_array, self._floating = verilog_array, floating
        super().__init__(
            {
                "pins": In(pins_signature(geometry)),
                "errors": Out(len(RULES)),
                "error_cycle": Out(STAMP),
            }
        )

    def elaborate(self, platform) -> Module:
        m = Module()
        g = self.geometry
        self._cycle = cycle = Signal(STAMP, name="cycle")
        m.d.sync += cycle.eq(cycle + 1)
        self._conds: dict[str, list] = {rule: [] for rule in RULES}
        c = self._decode(m)
        banks = [self._bank(m, b) for b in range(g.banks)]
        self._common(m, c)
        self._deadlines(m, banks)
        self._activate(m, c, banks)
        self._precharge(m, c, banks)
        self._refresh_and_mode(m, c, banks)
        self._access(m, c, banks)
        fail = Cat(_any(self._conds[rule]) for rule in RULES)
        m.d.sync += self.errors.eq(self.errors | fail)
        with m.If((self.errors == 0) & fail.any()):
            m.d.sync += self.error_cycle.eq(cycle)
        return m

    # --- pieces --------------------------------------------------------------------------------

    def _fail(self, rule: str, cond) -> None:
        self._conds[rule].append(cond)

    def _since(self, rule: str, seen, then, need: int, when) -> None:
        """``rule`` broken when ``when``, ``seen`` and fewer than ``need`` clocks since
        ``then``."""
        self._fail(rule, when & seen & ((self._cycle - then)[:STAMP] < need))

    def _stamp(self, m: Module, name: str) -> tuple[Signal, Signal]:
        return Signal(STAMP, name=name), Signal(name=f"{name}_seen")

    def _decode(self, m: Module) -> dict:
        p = self.pins
        ras, cas, we = p.ras, p.cas, p.we
        c = {
            "active": p.cs & ras & ~cas & ~we,
            "read": p.cs & ~ras & cas & ~we,
            "write": p.cs & ~ras & cas & we,
            "precharge": p.cs & ras & ~cas & we,
            "refresh": p.cs & ras & cas & ~we,
            "mode": p.cs & ras & cas & we,
            "any": p.cs & (ras | cas | we),
            "a10": p.a[10],
        }
        named = {}
        for k, v in c.items():
            named[k] = Signal(name=f"cmd_{k}")
            m.d.comb += named[k].eq(v)
        return named

    def _bank(self, m: Module, b: int) -> dict:
        s = {
            "open": Signal(name=f"bank{b}_open"),
            "row": Signal(len(self.pins.a), name=f"bank{b}_row"),
        }
        for k in ("activated", "precharged", "written"):
            s[k] = self._stamp(m, f"bank{b}_{k}")
        s["here"] = self.pins.ba == b
        return s

    def _common(self, m: Module, c: dict) -> None:
        t, p = self.t, self.pins
        self._precharged_all = Signal(name="precharged_all")
        self._refresh = self._stamp(m, "last_refresh")
        self._mode = self._stamp(m, "last_mode")
        self._fail("power-up", c["any"] & (self._cycle < t.power_up))
        self._fail("init", c["any"] & ~self._precharged_all & ~(c["precharge"] & c["a10"]))
        self._since("tRFC", self._refresh[1], self._refresh[0], t.trfc, c["any"])
        self._since("tMRD", self._mode[1], self._mode[0], t.tmrd, c["any"])
        if (1 << len(p.ba)) > self.geometry.banks:
            self._fail("address", c["any"] & (p.ba >= self.geometry.banks))

    def _deadlines(self, m: Module, banks: list) -> None:
        t = self.t
        last, seen = self._refresh
        self._fail("tREFI", seen & ((self._cycle - last)[:STAMP] > t.trefi))
        for s in banks:
            when, _ = s["activated"]
            self._fail("tRAS max", s["open"] & ((self._cycle - when)[:STAMP] > t.tras_max))

    def _activate(self, m: Module, c: dict, banks: list) -> None:
        t, p, cycle = self.t, self.pins, self._cycle
        cl_set = self._cl_set = Signal(name="cl_set")
        refreshes = self._refreshes = Signal(range(t.init_refreshes + 1), name="refreshes")
        last_act, last_act_seen = self._stamp(m, "last_activate")
        last_bank = Signal.like(p.ba, name="last_activate_bank")
        act = c["active"]
        self._fail("init", act & (~cl_set | (refreshes < t.init_refreshes)))
        self._fail("address", act & (p.a >= self.geometry.rows))
        self._since("tRRD", last_act_seen & (last_bank != p.ba), last_act, t.trrd, act)
        for s in banks:
            here = act & s["here"]
            self._fail("state", here & s["open"])
            self._since("tRP", s["precharged"][1], s["precharged"][0], t.trp, here)
            self._since("tRC", s["activated"][1], s["activated"][0], t.trc, here)
            with m.If(here):
                m.d.sync += [
                    s["open"].eq(1),
                    s["row"].eq(p.a),
                    s["activated"][0].eq(cycle),
                    s["activated"][1].eq(1),
                ]
        with m.If(act):
            m.d.sync += [last_act.eq(cycle), last_act_seen.eq(1), last_bank.eq(p.ba)]

    def _precharge(self, m: Module, c: dict, banks: list) -> None:
        t = self.t
        pre = c["precharge"]
        for s in banks:
            closes = pre & (c["a10"] | s["here"]) & s["open"]
            self._since("tRAS", 1, s["activated"][0], t.tras, closes)
            self._since("tWR", s["written"][1], s["written"][0], t.twr, closes)
            with m.If(closes):
                m.d.sync += [
                    s["open"].eq(0),
                    s["precharged"][0].eq(self._cycle),
                    s["precharged"][1].eq(1),
                ]
        with m.If(pre & c["a10"]):
            m.d.sync += self._precharged_all.eq(1)

    def _refresh_and_mode(self, m: Module, c: dict, banks: list) -> None:
        t, a, cycle = self.t, self.pins.a, self._cycle
        idle = c["refresh"] | c["mode"]
        for s in banks:
            self._fail("state", idle & s["open"])
            self._since("tRP", s["precharged"][1], s["precharged"][0], t.trp, idle)
            self._since("tRC", s["activated"][1], s["activated"][0], t.trc, idle)
        with m.If(c["refresh"]):
            m.d.sync += [self._refresh[0].eq(cycle), self._refresh[1].eq(1)]
            with m.If(self._refreshes != t.init_refreshes):
                m.d.sync += self._refreshes.eq(self._refreshes + 1)
        mode = c["mode"]
        latency = a[4:7]
        self._fail("unsupported", mode & ((a[0:3] != 0) | (a[7:9] != 0) | (a[10:] != 0)))
        bad = ((latency != 2) & (latency != 3)) | (latency < t.cas_latency)
        self._fail("CL", mode & bad)
        self._cl = Signal(range(4), name="cas_latency")
        with m.If(mode):
            m.d.sync += [
                self._cl.eq(latency),
                self._cl_set.eq(1),
                self._mode[0].eq(cycle),
                self._mode[1].eq(1),
            ]

    def _access(self, m: Module, c: dict, banks: list) -> None:
        g, t, p = self.geometry, self.t, self.pins
        rw = c["read"] | c["write"]
        row = Signal(g.row_bits, name="access_row")
        for s in banks:
            here = rw & s["here"]
            self._fail("state", here & ~s["open"])
            self._since("tRCD", 1, s["activated"][0], t.trcd, here)
            with m.If(s["here"]):
                m.d.comb += row.eq(s["row"])
            with m.If(c["write"] & s["here"]):
                m.d.sync += [s["written"][0].eq(self._cycle), s["written"][1].eq(1)]
        self._fail("unsupported", rw & c["a10"])
        column = Cat(p.a[:10], Const(0, 1), p.a[11:])
        self._fail("address", rw & (column >= g.columns))
        self._fail("bus", c["write"] & ~p.dq_oe)
        bank_bits = (g.banks - 1).bit_length()
        address = Cat(p.a[: (g.columns - 1).bit_length()], row, p.ba[:bank_bits])
        self._words(m, c, address)

    def _words(self, m: Module, c: dict, address: Value) -> None:
        """The memory, the read pipeline to ``dq_i`` and the data bus rule."""
        g, p = self.geometry, self.pins
        width = g.width
        abits = len(address)
        written, data = Signal(width + 1, name="word_read"), Signal(width + 1, name="word_in")
        m.d.comb += data.eq(Cat(p.dq_o, Const(1, 1)))
        if self._verilog_array:
            m.submodules.array = Instance(
                ARRAY_MODULE,
                p_WIDTH=width + 1,
                p_ABITS=abits,
                i_clk=ClockSignal(),
                i_we=c["write"],
                i_waddr=address,
                i_wdata=data,
                i_raddr=address,
                o_rdata=written,
            )
        else:
            m.submodules.array = mem = Memory(shape=width + 1, depth=1 << abits, init=[])
            w, r = mem.write_port(), mem.read_port(transparent_for=())
            m.d.comb += [
                w.addr.eq(address),
                w.data.eq(data),
                w.en.eq(c["write"]),
                r.addr.eq(address),
                written.eq(r.data),
            ]
        # what a READ at edge e returns: valid after e (r0), one clock later (r1)
        r0, a0 = Signal(name="read0"), Signal(abits, name="read0_address")
        r1, w1 = Signal(name="read1"), Signal(width, name="read1_word")
        m.d.sync += [r0.eq(c["read"]), a0.eq(address), r1.eq(r0)]
        column_bits = (g.columns - 1).bit_length()
        bank_bits = (g.banks - 1).bit_length()
        col, row = a0[:column_bits], a0[column_bits : column_bits + g.row_bits]
        bank = a0[column_bits + g.row_bits :] if bank_bits else Const(0, 1)
        word0 = Mux(written[width], written[:width], _unwritten(bank, row, col, width))
        m.d.sync += w1.eq(word0)
        valid = Signal(name="dq_valid")  # the chip drives dq_i for this edge
        was = Signal(name="dq_valid_before")  # ... and did for the edge before
        floating = self._floating & ((1 << width) - 1)
        late = self._cl == 3
        drive, value = Mux(late, r1, r0), Mux(late, w1, word0)
        m.d.sync += [
            valid.eq(drive),
            was.eq(valid),
            p.dq_i.eq(Mux(drive, value, floating)),
        ]
        self._fail("bus", p.dq_oe & (valid | was))


def _unwritten(bank, row, column, width: int) -> Value:
    """:func:`nfacep.hdl.sdram.model.unwritten` in gateware."""
    x = (bank * 0x9E3779B1 + row * 0x85EBCA77 + column * 0xC2B2AE3D + 0x5A5A5A5A)[:32]
    x = x ^ (x >> 15)
    return (x * 0x2C1B3C6D)[:width]


def _any(conds: list):
    return Cat(*conds).any() if conds else Const(0, 1)


def chip_verilog(geometry: SDRAMGeometry, cycles: SDRAMCycles) -> str:
    """The chip as Verilog: module :data:`CHIP_MODULE` (ports ``clk``, ``rst``,
    ``pins__*``, ``errors``, ``error_cycle``) and the array it keeps its words in."""
    from ..emit import verilog

    chip = SDRAMChip(geometry, cycles, verilog_array=True)
    return verilog(chip, CHIP_MODULE) + ARRAY_VERILOG
