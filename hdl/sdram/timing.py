"""The SDRAM's geometry and timing: one definition shared by the controller and the model.

Figures are written as the data sheet gives them (nanoseconds, or clocks where the data sheet
counts clocks) in :class:`SDRAMTiming`; :meth:`SDRAMTiming.cycles` turns them into whole clock
cycles at a given clock frequency (:class:`SDRAMCycles`), which is all the controller
(:mod:`nfacep.hdl.sdram.controller`) and the model (:mod:`nfacep.hdl.sdram.model`) use.

The Colorlight 5A-75B (amaranth-boards' ``colorlight_5a75b_r7_0``, ``SDRAMResource(0, ...)``)
carries two ESMT M12L16161A-5T (1M x 16 each, 2 banks x 2048 rows x 256 columns) side by side
as one 1M x 32 memory: 11 address pins (A0-A10), one bank-address pin, 32 data pins, and no
CKE, CS# or DQM pins (the chips are always selected and every write writes all 32 bits). Its
figures, :data:`M12L16161A`, are LiteDRAM's for this chip (``litedram.modules.M12L16161A``):
tRP = tRCD = tWR = 15 ns, tRAS = 40 ns, tRFC = 55 ns, tRRD = 10 ns, 4096 refreshes per 64 ms
(tREFI = 15.625 us); tRC = tRAS + tRP = 55 ns; tMRD = 2 clocks (the usual SDR figure); the
power-up wait (200 us, then precharge all, refreshes and the mode register) is the JEDEC SDR
sequence, here with 8 refreshes where the data sheet asks for at least 2. The -5T grade runs
at up to 200 MHz with CAS latency 3; CAS latency 2 (the default here, as LiteX's SDR PHY uses
on this board) holds at the lower clocks this design uses.

The ULX3S (amaranth-boards' ``ULX3S_*_Platform``, ``SDRAMResource(0, ...)``: 13 address pins,
two bank-address pins, 16 DQ, two DQM, CKE and CS#) carries one Alliance AS4C32M16SB-7TCN
(32M x 16: 4 banks x 8192 rows x 1024 columns, 64 MB). Its figures, :data:`AS4C32M16SB`, are
the -7 grade's in the data sheet's table 16 (Alliance Memory, AS4C32M16SB Rev. 1.0, June 2016):
tRC = tRFC = 63 ns, tRCD = tRP = 21 ns, tRRD = 14 ns, tRAS = 42 ns (at most 120 us), tWR =
14 ns, tMRD = 14 ns (2 clocks up to 143 MHz), tREFI = 7.8 us (8192 refreshes per 64 ms); CAS
latency 2 up to 100 MHz. LiteDRAM's ``litedram.modules.AS4C32M16`` (what LiteX's ULX3S target
uses) gives the -6 grade's tRP = tRCD = 18 ns, tWR = 12 ns, tRFC = 60 ns and the same tREFI;
the -7 figures here are the larger ones.

This module imports nothing from Amaranth, so a cocotb testbench can use it with the model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

__all__ = [
    "AS4C32M16SB",
    "COLORLIGHT_5A75B",
    "ENGINE_SDRAM",
    "ENGINE_SDRAMS",
    "M12L16161A",
    "ULX3S",
    "ULX3S_SDRAM",
    "SDRAMCycles",
    "SDRAMGeometry",
    "SDRAMSetup",
    "SDRAMTiming",
]


@dataclass(frozen=True)
class SDRAMGeometry:
    """How the memory is addressed: ``banks`` x ``rows`` x ``columns`` words of ``width`` bits.

    Rows are sent on A0..A(row_bits-1), columns on A0..A(column_bits-1); A10 is the precharge-
    all (and auto-precharge) flag, so there are at least 11 address pins.
    """

    banks: int = 2
    rows: int = 2048
    columns: int = 256
    width: int = 32

    def __post_init__(self) -> None:
        for name in ("banks", "rows", "columns"):
            n = getattr(self, name)
            if n < 1 or n & (n - 1):
                raise ValueError(f"SDRAM {name} must be a power of two, not {n}")
        if self.columns > 1024:
            raise ValueError("SDRAM columns must fit below A10 (at most 1024)")

    @property
    def bank_bits(self) -> int:
        return max(1, (self.banks - 1).bit_length())

    @property
    def row_bits(self) -> int:
        return (self.rows - 1).bit_length()

    @property
    def column_bits(self) -> int:
        return max(1, (self.columns - 1).bit_length())

    @property
    def address_bits(self) -> int:
        """Address pins: enough for a row, and always A10."""
        return max(11, self.row_bits)

    @property
    def words(self) -> int:
        return self.banks * self.rows * self.columns


@dataclass(frozen=True)
class SDRAMCycles:
    """The timing in whole clock cycles: each is the least number of clocks from one command
    to the next it constrains (``trcd = 2``: READ at least 2 clocks after ACTIVE)."""

    cas_latency: int
    trcd: int  # ACTIVE to READ/WRITE, same bank
    trp: int  # PRECHARGE to ACTIVE or REFRESH, same bank
    tras: int  # ACTIVE to PRECHARGE, same bank
    tras_max: int  # ACTIVE to PRECHARGE at most
    trc: int  # ACTIVE to ACTIVE or REFRESH, same bank
    trrd: int  # ACTIVE to ACTIVE, different banks
    twr: int  # WRITE to PRECHARGE, same bank (last data in to precharge)
    trfc: int  # REFRESH to any command
    tmrd: int  # MODE REGISTER SET to any command
    trefi: int  # at most this many clocks from one REFRESH to the next
    power_up: int  # clocks of NOP before the first command
    init_refreshes: int  # REFRESH commands of the initialisation sequence

    def with_(self, **changes: int) -> SDRAMCycles:
        """A copy with some figures changed (tests build deliberately wrong controllers)."""
        return replace(self, **changes)


@dataclass(frozen=True)
class SDRAMTiming:
    """A chip's timing as its data sheet gives it (nanoseconds unless the name says clocks)."""

    name: str
    cas_latency: int = 2
    trcd_ns: float = 15.0
    trp_ns: float = 15.0
    tras_ns: float = 40.0
    tras_max_ns: float = 100_000.0
    trc_ns: float = 55.0
    trrd_ns: float = 10.0
    twr_ns: float = 15.0
    trfc_ns: float = 55.0
    tmrd_clocks: int = 2
    trefi_ns: float = 64e6 / 4096
    power_up_ns: float = 200_000.0
    init_refreshes: int = 8

    def __post_init__(self) -> None:
        if self.cas_latency not in (2, 3):
            raise ValueError(f"CAS latency must be 2 or 3, not {self.cas_latency}")

    def cycles(self, clk_freq: float) -> SDRAMCycles:
        """The figures in clock cycles at ``clk_freq`` Hz: minimums rounded up (at least one
        clock), the maximums (tRAS max, tREFI) rounded down."""
        period_ns = 1e9 / clk_freq

        def at_least(ns: float) -> int:
            return max(1, math.ceil(ns / period_ns - 1e-9))

        def at_most(ns: float) -> int:
            return math.floor(ns / period_ns + 1e-9)

        return SDRAMCycles(
            cas_latency=self.cas_latency,
            trcd=at_least(self.trcd_ns),
            trp=at_least(self.trp_ns),
            tras=at_least(self.tras_ns),
            tras_max=at_most(self.tras_max_ns),
            trc=max(at_least(self.trc_ns), at_least(self.tras_ns) + at_least(self.trp_ns)),
            trrd=at_least(self.trrd_ns),
            twr=at_least(self.twr_ns),
            trfc=at_least(self.trfc_ns),
            tmrd=max(1, self.tmrd_clocks),
            trefi=at_most(self.trefi_ns),
            power_up=at_least(self.power_up_ns),
            init_refreshes=self.init_refreshes,
        )

    def with_(self, **changes: float) -> SDRAMTiming:
        return replace(self, **changes)  # type: ignore[arg-type]


#: ESMT M12L16161A-5T, as on the Colorlight 5A-75B (see the module's docstring).
M12L16161A = SDRAMTiming(name="M12L16161A")

#: The Colorlight 5A-75B's SDRAM: two M12L16161A as one 1M x 32 memory.
COLORLIGHT_5A75B = SDRAMGeometry(banks=2, rows=2048, columns=256, width=32)

#: Alliance AS4C32M16SB-7, as on the ULX3S (see the module's docstring).
AS4C32M16SB = SDRAMTiming(
    name="AS4C32M16SB",
    trcd_ns=21.0,
    trp_ns=21.0,
    tras_ns=42.0,
    tras_max_ns=120_000.0,
    trc_ns=63.0,
    trrd_ns=14.0,
    twr_ns=14.0,
    trfc_ns=63.0,
    trefi_ns=64e6 / 8192,
)

#: The ULX3S's SDRAM: one AS4C32M16SB, 32M x 16.
ULX3S = SDRAMGeometry(banks=4, rows=8192, columns=1024, width=16)


@dataclass(frozen=True)
class SDRAMSetup:
    """A chip (``geometry``, ``timing``) run at ``clk_freq`` Hz: what the store's controller
    is built for and what a simulation's model must check."""

    geometry: SDRAMGeometry
    timing: SDRAMTiming
    clk_freq: float

    def cycles(self) -> SDRAMCycles:
        return self.timing.cycles(self.clk_freq)


#: The engine's SDRAM (``--store sdram``): the 5A-75B's chips at 100 MHz, the clock the
#: simulations run (``nfacep.sim.testbench.CLOCK_PERIOD_NS``).
ENGINE_SDRAM = SDRAMSetup(COLORLIGHT_5A75B, M12L16161A, 100e6)

#: The ULX3S's chip at the simulations' clock (``nfacep build --board ulx3s-*`` builds the
#: controller for the board top's clock instead; the board registry names it).
ULX3S_SDRAM = SDRAMSetup(ULX3S, AS4C32M16SB, 100e6)

#: The chips an engine is built for without a board (``match``, ``sim``, ``vectors``,
#: ``regress``, ``verilog``), smallest first: the first whose words hold the table
#: (:func:`nfacep.hdl.sdram.fit.engine_sdram`). A board builds for its own
#: (:attr:`nfacep.boards.registry.Board.sdram`).
ENGINE_SDRAMS = (ENGINE_SDRAM, ULX3S_SDRAM)
