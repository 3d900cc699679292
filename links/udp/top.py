"""The UDP link's board top (``nfacep build --link udp``) and the checks that a board can carry
it: the Colorlight 5A-75B's first RGMII port (:mod:`nfacep.boards.rgmii`) at 1000 Mb/s.

:class:`UdpBoardTop` puts :class:`nfacep.hdl.eth.top.UdpTop` (the engine behind the
UDP link) on the board, with a PLL for the line's 125 MHz and a :class:`StatusLed`;
:func:`check_board` says whether a board has the port; :func:`make_top` is the top ``build``
makes and what the report says of it.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import (
    ClockDomain,
    ClockSignal,
    Elaboratable,
    Instance,
    Module,
    Mux,
    Signal,
    Value,
)
from amaranth.lib import io, wiring
from amaranth.lib.cdc import ResetSynchronizer
from amaranth.lib.wiring import In, Out

from nfacep.boards.rgmii import RgmiiRx, RgmiiTx
from nfacep.errors import UsageError
from nfacep.hdl.eth.top import UdpTop

from .protocol import Endpoint, line_tuples_limit

__all__ = [
    "BOARD",
    "CLOCK_MHZ",
    "ENGINE_MARGIN",
    "EngineClock",
    "NoEthernetError",
    "StatusLed",
    "UdpBoardTop",
    "check_board",
    "clock_engine",
    "engine_clock",
    "make_top",
]

#: The board the UDP top is built for (``check_board``): whose SDRAM chip its simulation's
#: engine takes with ``--store sdram`` (``nfacep.sim.udp.board_engine``).
BOARD = "colorlight-5a75b"
#: The link's (transmit) clock, from the board's 25 MHz oscillator.
CLOCK_MHZ = 125.0
#: The PLL's oscillator: 25 MHz * 25, which the link's clock divides by 5 and the engine's
#: by ``divider``.
VCO_MHZ = 625.0
#: The engine's clock the build chooses runs this much faster than the line needs.
ENGINE_MARGIN = 1.5
#: The slowest engine clock the PLL gives (its largest output divider).
MAX_DIVIDER = 128
#: The SDRAM store's tuples per clock in its worst case, uniform keys over 10^6 partitions
#: (``benchmarks/sdram_throughput.py``, hdl/sdram/README.md: 0.230 at the chip's timing at
#: 100 MHz, which is the same in clocks from 78.125 MHz up; the row-shared cache): with
#: ``--store sdram`` the build chooses the engine's clock for it, without
#: :data:`ENGINE_MARGIN` (a measured worst case, where ``cycles_per_tuple`` is a best case).
SDRAM_TUPLES_PER_CLOCK = 0.230
#: The same for the programmable engine's store, whose entries are wider (its state slots,
#: epoch and timed slots: 6 words of 32 bits for marathon's stream at the default capacity,
#: against the fixed engine's one): 0.060, uniform keys over 65,536 partitions at 25 MHz
#: (``benchmarks/sdram_throughput.py --stores sdram-programmable``, 2026-11-28).
PROGRAMMABLE_SDRAM_TUPLES_PER_CLOCK = 0.060
#: The fastest engine clock the build chooses for a programmable engine: its engine clock
#: routed at 35.69 MHz with the SDRAM store and 24.71 to 26.20 with the 4,096-entry table
#: beside the UDP link on the Colorlight (2026-11-28, benchmarks/README.md), so that a clock
#: the line would ask for and the engine cannot reach is not chosen (``--engine-mhz`` states
#: another).
PROGRAMMABLE_MHZ = 25.0


@dataclass(frozen=True)
class EngineClock:
    """The engine's clock beside the link: the PLL's output ``divider`` of :data:`VCO_MHZ`,
    its frequency ``mhz``; the engine's tuples per second at that clock (``tuples_per_s``,
    one tuple every ``cycles_per_tuple`` cycles) against the most tuples per second the line
    can bring (``line_tuples_per_s``, TUPLES packets of ``line_packet`` tuples, the largest,
    back to back); ``chosen``: the build chose it (else the user stated it)."""

    divider: int
    mhz: float
    cycles_per_tuple: float
    tuples_per_s: float
    line_tuples_per_s: float
    line_packet: int
    chosen: bool

    @property
    def keeps_up(self) -> bool:
        return self.tuples_per_s >= self.line_tuples_per_s

    def as_dict(self) -> dict:
        return {
            "engine_mhz": round(self.mhz, 3),
            "engine_mhz_from": "chosen by the build" if self.chosen else "--engine-mhz",
            "engine_cycles_per_tuple": round(self.cycles_per_tuple, 3),
            "engine_tuples_per_s": round(self.tuples_per_s),
            "line_tuples_per_s": round(self.line_tuples_per_s),
            "line_tuples_per_packet": self.line_packet,
            "keeps_up": self.keeps_up,
        }


def engine_clock(engine, mhz: float | None = None) -> EngineClock:
    """The engine's clock for ``engine`` beside the link: at ``mhz`` when given (the PLL's
    nearest frequency at or below it, a UsageError when none is or above 125 MHz), else the
    slowest the PLL gives at or above :data:`ENGINE_MARGIN` times what the engine needs to
    take the line's worst case (:func:`~nfacep.links.udp.protocol.line_tuples_limit`); with
    the SDRAM store, the slowest at or above what its measured worst case needs
    (:data:`SDRAM_TUPLES_PER_CLOCK`) at which the board's pads capture the chip's read data
    (:func:`nfacep.boards.sdram.read_window`). A programmable engine's clock is at most
    :data:`PROGRAMMABLE_MHZ` (its rate in the chip :data:`PROGRAMMABLE_SDRAM_TUPLES_PER_CLOCK`):
    where the line needs more, the clock is that and the engine is slower than the line."""
    import math

    line, per = line_tuples_limit((engine.tuple_layout.size + 7) // 8)
    sdram = "sdram" in engine.signature.members
    programmable = engine.params.engine == "programmable"
    if sdram:
        per_clock = PROGRAMMABLE_SDRAM_TUPLES_PER_CLOCK if programmable else SDRAM_TUPLES_PER_CLOCK
        cycles = 1 / per_clock
    else:
        cycles = engine.cycles_per_tuple
    if mhz is None:
        need = line * cycles * (1 if sdram else ENGINE_MARGIN) / 1e6
        slowest = math.ceil(VCO_MHZ / PROGRAMMABLE_MHZ - 1e-9) if programmable else 5
        divider = min(max(math.floor(VCO_MHZ / need), slowest), MAX_DIVIDER)
        if sdram:  # and one at which the pads capture the chip's read data
            from nfacep.boards.sdram import choose_window

            latency = engine.sdram_setup[0].timing.cas_latency
            step = 1 if programmable else -1  # (slower, or faster, until the pads capture)
            while not choose_window(VCO_MHZ / divider, latency).met:
                if not slowest <= divider + step <= MAX_DIVIDER:
                    break
                divider += step
    else:
        if not VCO_MHZ / MAX_DIVIDER <= mhz <= CLOCK_MHZ:
            raise UsageError(
                f"--engine-mhz {mhz:g}: the PLL gives the engine {VCO_MHZ / MAX_DIVIDER:g} "
                f"to {CLOCK_MHZ:g} MHz"
            )
        divider = math.ceil(VCO_MHZ / mhz - 1e-9)
    f = VCO_MHZ / divider
    return EngineClock(divider, f, cycles, f * 1e6 / cycles, line, per, mhz is None)


def clock_engine(engine, mhz: float | None = None) -> EngineClock:
    """:func:`engine_clock`, and with ``--store sdram`` the engine's SDRAM controller built
    for that clock and the board's pads (:func:`nfacep.boards.sdram.use_board_sdram`); a
    UsageError when the pads cannot capture the chip's read data at that clock."""
    clock = engine_clock(engine, mhz)
    if "sdram" in engine.signature.members:
        from nfacep.boards.sdram import use_board_sdram

        use_board_sdram(engine, clock.mhz)
    return clock


class NoEthernetError(ValueError):
    """A board without an RGMII Ethernet port the link can use."""


def check_board(platform) -> None:
    """Raise :class:`NoEthernetError` unless ``platform`` has an RGMII port the link supports."""
    if (
        ("eth_rgmii", 0) not in platform.resources
        or platform.family != "ecp5"
        or platform.default_clk_frequency != 25e6
    ):
        raise NoEthernetError(
            f"{type(platform).__name__} has no RGMII port the UDP link supports: --link udp "
            "builds for the Colorlight 5A-75B (ECP5, 25 MHz oscillator, eth_rgmii)"
        )


class StatusLed(wiring.Component):
    """One LED that tells a person at the board how the link goes, clocked at ``clk_hz``:

    - **fast flashing** (``blink_hz``) for ``trouble_s`` seconds after a ``trouble`` pulse (a
      frame refused, a packet lost upstream, a tuple dropped): look at STATUS;
    - else **steady on** while frames are accepted (within ``activity_s`` of an
      ``activity`` pulse);
    - else a short **heartbeat** flash (a tenth of each period) every ``1 / beat_hz``
      seconds: configured and waiting.

    Members
    -------
    activity, trouble : ``In(1)``
    led : ``Out(1)``
    """

    def __init__(
        self,
        clk_hz: float,
        *,
        beat_hz: float = 1.0,
        blink_hz: float = 8.0,
        activity_s: float = 0.05,
        trouble_s: float = 2.0,
    ):
        self._beat = max(int(clk_hz / beat_hz), 10)
        self._blink = max(int(clk_hz / blink_hz / 2), 1)
        self._activity = max(int(clk_hz * activity_s), 1)
        self._trouble = max(int(clk_hz * trouble_s), 1)
        super().__init__({"activity": In(1), "trouble": In(1), "led": Out(1)})

    def elaborate(self, platform):
        # The LED is driven from a flip-flop, and so is every term of its input (timing: the
        # pin is far from everything, and a 27-bit compare of the heartbeat's count was the
        # link clock's slowest path beside the programmable engine). Each counter counts down
        # and reloads when it passes zero: its sign bit, the carry out of its subtraction, is
        # the event, so that no count is compared with anything.
        m = Module()

        def down_counter(name: str, reload: Value, first: int) -> Signal:
            """A counter whose sign bit is set for one cycle in each ``reload + 2``, first
            after ``first + 2`` cycles."""
            count = Signal(range(-1, max(self._beat, self._blink)), name=name, init=first)
            m.d.sync += count.eq(Mux(count[-1], reload, count - 1))
            return count[-1]

        # the heartbeat: on for beat // 10 cycles, off for the rest of each period
        on_cycles = self._beat // 10
        beat_on = Signal(init=1)
        off_cycles = self._beat - on_cycles
        beat_turns = down_counter(
            "beat", Mux(beat_on, off_cycles - 2, on_cycles - 2), first=on_cycles - 2
        )
        with m.If(beat_turns):
            m.d.sync += beat_on.eq(~beat_on)
        blink = Signal()
        with m.If(down_counter("blink", self._blink - 2, first=self._blink - 2)):
            m.d.sync += blink.eq(~blink)
        # (registered: the pulses come from the link's counters and sequence check; timing)
        activity, trouble = Signal(), Signal()
        m.d.sync += [activity.eq(self.activity), trouble.eq(self.trouble)]
        held = []  # whether a pulse came within each hold's length of cycles
        for name, pulse, length in (
            ("busy", activity, self._activity),
            ("bad", trouble, self._trouble),
        ):
            # counts down from length - 2 after a pulse, and stops at -1: its sign bit
            hold = Signal(range(-1, length), name=name, init=-1)
            with m.If(pulse):
                m.d.sync += hold.eq(length - 2)
            with m.Elif(~hold[-1]):
                m.d.sync += hold.eq(hold - 1)
            on = Signal(name=f"{name}_on")
            m.d.sync += on.eq(pulse | ~hold[-1])
            held.append(on)
        busy, bad = held
        led = Signal(init=1)  # (beat_on's)
        m.d.sync += led.eq(Mux(bad, blink, busy | beat_on))
        m.d.comb += self.led.eq(led)
        return m


class UdpBoardTop(Elaboratable):
    """The bitstream's top level for ``--link udp``: a :class:`~nfacep.hdl.eth.top.UdpTop`
    on the board's first RGMII port, the link's transmit side at 125 MHz and the engine in its
    own clock domain at ``engine_mhz`` (:func:`engine_clock`: given, or chosen for the line),
    both from one ``EHXPLLL`` on the 25 MHz oscillator; the PHY held in reset for 2**20
    cycles (8.4 ms) after the PLL locks; the LED (every LED of the
    board) shows the link's state (:class:`StatusLed`)."""

    def __init__(
        self,
        engine,
        *,
        mac: bytes,
        ip: bytes,
        port: int,
        capacity: int = 4096,
        engine_mhz: float | None = None,
    ):
        self.engine = engine
        try:
            self.clock = clock_engine(engine, engine_mhz)
        except UsageError:
            self._MustUse__silence = True  # (never elaborated: the error says why)
            raise
        self.top = UdpTop(engine, mac=mac, ip=ip, port=port, capacity=capacity, engine_clock=True)

    def _pll(self, m, platform):
        """The ``EHXPLLL`` on the 25 MHz oscillator: the link's 125 MHz (``CLKOP``), the
        engine's clock (``CLKOS``, :attr:`clock`) and the lock."""
        clk25 = platform.request(platform.default_clk, dir="-")
        m.submodules.clk25 = clk_in = io.Buffer("i", clk25)
        pll_out, locked = Signal(name="clk125"), Signal(name="pll_locked")
        engine_clk = Signal(name="engine_clk")
        m.submodules.pll = Instance(
            "EHXPLLL",
            p_PLLRST_ENA="DISABLED",
            p_INTFB_WAKE="DISABLED",
            p_STDBY_ENABLE="DISABLED",
            p_DPHASE_SOURCE="DISABLED",
            p_OUTDIVIDER_MUXA="DIVA",
            p_CLKOP_ENABLE="ENABLED",
            p_CLKI_DIV=1,
            p_CLKOP_DIV=5,
            p_CLKOP_CPHASE=2,
            p_CLKOP_FPHASE=0,
            p_CLKOS_ENABLE="ENABLED",
            p_CLKOS_DIV=self.clock.divider,
            p_CLKOS_CPHASE=2,
            p_CLKOS_FPHASE=0,
            p_FEEDBK_PATH="CLKOP",
            p_CLKFB_DIV=5,  # 25 MHz * 5 = 125 MHz, VCO 625 MHz
            i_CLKI=clk_in.i,
            i_CLKFB=pll_out,
            i_RST=0,
            i_STDBY=0,
            i_PHASESEL0=0,
            i_PHASESEL1=0,
            i_PHASEDIR=1,
            i_PHASESTEP=1,
            i_PHASELOADREG=1,
            i_PLLWAKESYNC=0,
            i_ENCLKOP=0,
            i_ENCLKOS=0,
            o_CLKOP=pll_out,
            o_CLKOS=engine_clk,
            o_LOCK=locked,
            a_FREQUENCY_PIN_CLKI="25",
            a_FREQUENCY_PIN_CLKOP="125",
            a_FREQUENCY_PIN_CLKOS=f"{self.clock.mhz:.4f}",
            a_ICP_CURRENT="12",
            a_LPF_RESISTOR="8",
            a_MFG_ENABLE_FILTEROPAMP="1",
            a_MFG_GMCREF_SEL="2",
        )
        return pll_out, engine_clk, locked

    def elaborate(self, platform):
        from nfacep.boards.top import board_leds

        m = Module()
        check_board(platform)
        pll_out, engine_clk, locked = self._pll(m, platform)
        m.domains.sync = ClockDomain("sync")
        m.d.comb += ClockSignal("sync").eq(pll_out)
        m.submodules.reset = ResetSynchronizer(~locked, domain="sync")
        platform.add_clock_constraint(pll_out, CLOCK_MHZ * 1e6)
        platform.add_clock_constraint(engine_clk, self.clock.mhz * 1e6)

        rgmii = platform.request("eth_rgmii", 0, dir="-")
        platform.add_clock_constraint(rgmii.rx_clk.io, CLOCK_MHZ * 1e6)
        m.submodules.rgmii_rx = rx = RgmiiRx(rgmii)
        m.submodules.rgmii_tx = tx = RgmiiTx(rgmii)
        m.submodules.udp = top = self.top
        m.d.comb += [
            top.engine_clk.eq(engine_clk),
            top.rx_clk.eq(rx.rx_clk),
            top.rxd.eq(rx.rxd),
            top.rx_dv.eq(rx.rx_dv),
            top.rx_er.eq(rx.rx_er),
            tx.txd.eq(top.txd),
            tx.tx_en.eq(top.tx_en),
            tx.tx_er.eq(top.tx_er),
        ]

        phy_wait = Signal(21)  # until its top bit: 2**20 cycles, 8.4 ms
        m.submodules.phy_rst = phy_rst = io.Buffer("o", rgmii.rst)
        with m.If(~phy_wait[-1]):
            m.d.sync += phy_wait.eq(phy_wait + 1)
        m.d.comb += phy_rst.o.eq(~phy_wait[-1])

        if "sdram" in top.signature.members:  # --store sdram: the chip on the board's pins
            from nfacep.boards.sdram import attach

            attach(m, platform, top.sdram, self.engine, engine_clk)

        m.submodules.status = status = StatusLed(CLOCK_MHZ * 1e6)
        m.d.comb += [status.activity.eq(top.activity), status.trouble.eq(top.trouble)]
        for i, port in enumerate(board_leds(platform)):
            m.submodules[f"led{i}"] = led = io.Buffer("o", port)
            m.d.comb += led.o.eq(status.led)
        return m


def make_top(engine, udp: Endpoint, engine_mhz: float | None = None) -> tuple[dict, UdpBoardTop]:
    """The board top for ``engine`` at the board's addresses ``udp``, its engine's clock at
    ``engine_mhz`` (default: chosen, :func:`engine_clock`), and the report's ``link``
    fields."""
    top = UdpBoardTop(engine, mac=udp.mac, ip=udp.ip, port=udp.port, engine_mhz=engine_mhz)
    clock = top.clock
    note = (
        f"UDP link on the first RGMII port at 1000 Mb/s (link clock {CLOCK_MHZ:g} MHz), "
        f"engine at {clock.mhz:.2f} MHz ({clock.as_dict()['engine_mhz_from']}): "
        f"{clock.tuples_per_s / 1e6:.2f}M tuples/s against the line's "
        f"{clock.line_tuples_per_s / 1e6:.2f}M at {clock.line_packet} tuples a packet, "
        f"{'keeps up' if clock.keeps_up else 'SLOWER THAN THE LINE'} "
        f"(payload format: boards/UDP.md); the board is {udp}"
    )
    sdram = {}
    if "sdram" in engine.signature.members:
        from nfacep.boards.sdram import report

        fields, text = report(engine, clock.mhz)
        sdram = {"sdram": fields}
        note += f"; {text}"
    return {
        "kind": "udp",
        "mac": udp.mac.hex(":"),
        "ip": ".".join(map(str, udp.ip)),
        "port": udp.port,
        "link_mhz": CLOCK_MHZ,
        **clock.as_dict(),
        "engine_id": f"{top.top.engine_id:08x}",
        **sdram,
        "note": note,
    }, top
