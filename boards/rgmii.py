"""RGMII pins at 1000 Mb/s on Lattice ECP5, for the UDP link's board top
(:class:`nfacep.links.udp.top.UdpBoardTop`).

RGMII carries GMII's byte a nibble per clock edge: ``rx_ctl``/``tx_ctl`` are ``dv``/``en`` at
the rising edge and ``dv ^ er`` at the falling one, the low nibble rises, the high one falls.

Delays (the Broadcom B50612D of the 5A-75B as it comes out of reset, the setting LiteX's
Colorlight targets rely on: no RX clock skew, the GTX clock delay on; nothing here talks MDIO):

- **Receive.** The PHY sends ``rx_clk`` edge-aligned with the data. Each ``rx_ctl`` and
  ``rx_data`` pin goes through an ECP5 ``DELAYG`` of :data:`RX_DELAY_TAPS` taps (about 25 ps
  each: 2 ns, a quarter of the 8 ns period) before its ``IDDRX1F``, so the rising and falling
  edges of ``rx_clk`` sample in the middle of each half-bit. :class:`amaranth.lib.io.DDRBuffer`
  has no delay element between the pad and the DDR register, so the receive side instantiates
  ``IB``-less ``DELAYG`` and ``IDDRX1F`` itself (Amaranth's ``io.Buffer`` makes the ``IB``).
- **Transmit.** ``tx_clk``, ``tx_ctl`` and ``tx_data`` leave through ``ODDRX1F`` registers
  (:class:`amaranth.lib.io.DDRBuffer`), clock edge-aligned with the data (``tx_clk`` is the DDR
  pattern 1, 0); the PHY's internal GTX clock delay (2 ns) centres it.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Elaboratable, Instance, Module, Signal
from amaranth.lib import io

__all__ = ["RX_DELAY_TAPS", "RgmiiRx", "RgmiiTx"]

#: ``DELAYG`` taps on the receive pins: 2 ns at about 25 ps a tap.
RX_DELAY_TAPS = 80


class RgmiiRx(Elaboratable):
    """RGMII receive pins to GMII in the receive clock's domain: ``rx_clk`` (the pin, as a
    signal for the domain's clock), ``rxd``, ``rx_dv``, ``rx_er``."""

    def __init__(self, pins):
        self._pins = pins
        self.rx_clk = Signal()
        self.rxd = Signal(8)
        self.rx_dv = Signal()
        self.rx_er = Signal()

    def elaborate(self, platform):
        m = Module()
        pins = self._pins
        m.submodules.rx_clk = clk = io.Buffer("i", pins.rx_clk)
        m.d.comb += self.rx_clk.eq(clk.i)
        rise, fall = Signal(5), Signal(5)
        for k, (port, bit) in enumerate([(pins.rx_data, b) for b in range(4)] + [(pins.rx_ctl, 0)]):
            m.submodules[f"rx_buf{k}"] = buf = io.Buffer("i", port[bit])
            delayed = Signal(name=f"rx_delayed{k}")
            m.submodules[f"rx_delay{k}"] = Instance(
                "DELAYG",
                p_DEL_MODE="USER_DEFINED",
                p_DEL_VALUE=RX_DELAY_TAPS,
                i_A=buf.i,
                o_Z=delayed,
            )
            m.submodules[f"rx_ddr{k}"] = Instance(
                "IDDRX1F", i_D=delayed, i_SCLK=self.rx_clk, i_RST=0, o_Q0=rise[k], o_Q1=fall[k]
            )
        m.d.comb += [
            self.rxd.eq(Cat(rise[:4], fall[:4])),
            self.rx_dv.eq(rise[4]),
            self.rx_er.eq(rise[4] ^ fall[4]),
        ]
        return m


class RgmiiTx(Elaboratable):
    """GMII from the ``sync`` domain to RGMII transmit pins (``txd``, ``tx_en``, ``tx_er``)."""

    def __init__(self, pins):
        self._pins = pins
        self.txd = Signal(8)
        self.tx_en = Signal()
        self.tx_er = Signal()

    def elaborate(self, platform):
        m = Module()
        pins = self._pins
        m.submodules.tx_clk = clk = io.DDRBuffer("o", pins.tx_clk)
        m.submodules.tx_data = data = io.DDRBuffer("o", pins.tx_data)
        m.submodules.tx_ctl = ctl = io.DDRBuffer("o", pins.tx_ctl)
        m.d.comb += [
            clk.o[0].eq(1),
            clk.o[1].eq(0),
            data.o[0].eq(self.txd[:4]),
            data.o[1].eq(self.txd[4:]),
            ctl.o[0].eq(self.tx_en),
            ctl.o[1].eq(self.tx_en ^ self.tx_er),
        ]
        return m
