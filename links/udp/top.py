"""The UDP link's board top (``nfacep build --link udp``) and the checks that a board can carry
it: the Colorlight 5A-75B's first RGMII port (:mod:`nfacep.boards.rgmii`) at 1000 Mb/s.

:class:`UdpBoardTop` puts :class:`nfacep.hdl.eth.link.UdpTop` (the engine behind the
UDP link) on the board, with a PLL for the line's 125 MHz and a :class:`StatusLed`;
:func:`check_board` says whether a board has the port; :func:`make_top` is the top ``build``
makes and what the report says of it.
"""

from __future__ import annotations

from amaranth.hdl import ClockDomain, ClockSignal, Elaboratable, Instance, Module, Mux, Signal
from amaranth.lib import io, wiring
from amaranth.lib.cdc import ResetSynchronizer
from amaranth.lib.wiring import In, Out

from nfacep.boards.rgmii import RgmiiRx, RgmiiTx
from nfacep.hdl.eth.link import UdpTop

from .protocol import Endpoint

__all__ = ["CLOCK_MHZ", "NoEthernetError", "StatusLed", "UdpBoardTop", "check_board", "make_top"]

#: The engine's and the transmit clock, from the board's 25 MHz oscillator.
CLOCK_MHZ = 125.0


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
        m = Module()
        beat = Signal(range(self._beat))
        m.d.sync += beat.eq(Mux(beat == self._beat - 1, 0, beat + 1))
        blink_count = Signal(range(self._blink))
        blink = Signal()
        with m.If(blink_count == self._blink - 1):
            m.d.sync += [blink_count.eq(0), blink.eq(~blink)]
        with m.Else():
            m.d.sync += blink_count.eq(blink_count + 1)
        busy = Signal(range(self._activity + 1))
        bad = Signal(range(self._trouble + 1))
        # (registered: the pulses come from the link's counters and sequence check; timing)
        activity, trouble = Signal(), Signal()
        m.d.sync += [activity.eq(self.activity), trouble.eq(self.trouble)]
        for hold, pulse, length in (
            (busy, activity, self._activity),
            (bad, trouble, self._trouble),
        ):
            with m.If(pulse):
                m.d.sync += hold.eq(length)
            with m.Elif(hold != 0):
                m.d.sync += hold.eq(hold - 1)
        with m.If(bad != 0):
            m.d.comb += self.led.eq(blink)
        with m.Elif(busy != 0):
            m.d.comb += self.led.eq(1)
        with m.Else():
            m.d.comb += self.led.eq(beat < self._beat // 10)
        return m


class UdpBoardTop(Elaboratable):
    """The bitstream's top level for ``--link udp``: a :class:`~nfacep.hdl.eth.link.UdpTop`
    on the board's
    first RGMII port, the engine and the transmit side at 125 MHz from an ``EHXPLLL`` on the
    25 MHz oscillator; the PHY held in reset for 2**20 cycles (8.4 ms) after the PLL locks; the
    LED (every LED of the board) shows the link's state (:class:`StatusLed`)."""

    def __init__(self, engine, *, mac: bytes, ip: bytes, port: int, capacity: int = 4096):
        self.engine = engine
        # (no ICMP echo responder in the bitstream yet: with it the engine's clock missed
        # 125 MHz, boards/UDP.md)
        self.top = UdpTop(engine, mac=mac, ip=ip, port=port, capacity=capacity, icmp=False)

    def elaborate(self, platform):
        from nfacep.boards.top import board_leds

        m = Module()
        check_board(platform)
        clk25 = platform.request(platform.default_clk, dir="-")
        m.submodules.clk25 = clk_in = io.Buffer("i", clk25)
        pll_out, locked = Signal(name="clk125"), Signal(name="pll_locked")
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
            o_CLKOP=pll_out,
            o_LOCK=locked,
            a_FREQUENCY_PIN_CLKI="25",
            a_FREQUENCY_PIN_CLKOP="125",
            a_ICP_CURRENT="12",
            a_LPF_RESISTOR="8",
            a_MFG_ENABLE_FILTEROPAMP="1",
            a_MFG_GMCREF_SEL="2",
        )
        m.domains.sync = ClockDomain("sync")
        m.d.comb += ClockSignal("sync").eq(pll_out)
        m.submodules.reset = ResetSynchronizer(~locked, domain="sync")
        platform.add_clock_constraint(pll_out, CLOCK_MHZ * 1e6)

        rgmii = platform.request("eth_rgmii", 0, dir="-")
        platform.add_clock_constraint(rgmii.rx_clk.io, CLOCK_MHZ * 1e6)
        m.submodules.rgmii_rx = rx = RgmiiRx(rgmii)
        m.submodules.rgmii_tx = tx = RgmiiTx(rgmii)
        m.submodules.udp = top = self.top
        m.d.comb += [
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

        m.submodules.status = status = StatusLed(CLOCK_MHZ * 1e6)
        m.d.comb += [status.activity.eq(top.activity), status.trouble.eq(top.trouble)]
        for i, port in enumerate(board_leds(platform)):
            m.submodules[f"led{i}"] = led = io.Buffer("o", port)
            m.d.comb += led.o.eq(status.led)
        return m


def make_top(engine, udp: Endpoint) -> tuple[dict, UdpBoardTop]:
    """The board top for ``engine`` at the board's addresses ``udp``, and the report's
    ``link`` fields."""
    top = UdpBoardTop(engine, mac=udp.mac, ip=udp.ip, port=udp.port)
    note = (
        f"UDP link on the first RGMII port at 1000 Mb/s, engine at {CLOCK_MHZ:g} MHz "
        f"(payload format: boards/UDP.md); the board is {udp}"
    )
    return {
        "kind": "udp",
        "mac": udp.mac.hex(":"),
        "ip": ".".join(map(str, udp.ip)),
        "port": udp.port,
        "engine_mhz": CLOCK_MHZ,
        "engine_id": f"{top.top.engine_id:08x}",
        "note": note,
    }, top
