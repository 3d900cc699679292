"""The UART link's board top (``nfacep build --link uart``) and the checks that a board can
carry it.

:class:`UartBoardTop` puts :class:`nfacep.hdl.uart.link.UartTop` (the engine behind the UART
link) on a board's USB UART and LEDs; :func:`check_board` says whether a board has a USB UART
the link can use; :func:`make_top` is the top ``build`` makes and what the report says of it.
"""

from __future__ import annotations

from amaranth.hdl import Elaboratable, Module
from amaranth.lib import io

from nfacep.hdl.engine import Engine
from nfacep.hdl.uart.link import UartTop
from nfacep.hdl.uart.rx import divisor

from ..protocol import engine_id

__all__ = ["NoUartError", "UartBoardTop", "check_board", "make_top"]


class NoUartError(ValueError):
    """A board without a USB UART the link can use."""


#: Boards whose ``uart`` resource is not a USB UART, and why.
_NOT_USB = {
    "Colorlight_5A75B_R70Platform": (
        "the Colorlight 5A-75B has no USB UART: amaranth-boards' 'uart' resource for it "
        "reuses the status LED (P11) and the button (M13) pins of header J19 for an external 3.3 V "
        "USB-serial adapter, and the board top needs the LED. Build it with --link harness, or "
        "use a ULX3S, an iCEBreaker or an iCEstick for --link uart"
    ),
}


def check_board(platform) -> None:
    """Raise :class:`NoUartError` unless ``platform`` has a USB UART for the link."""
    name = type(platform).__name__
    if name in _NOT_USB:
        raise NoUartError(_NOT_USB[name])
    if ("uart", 0) not in platform.resources:
        raise NoUartError(f"{name} defines no 'uart' resource; build it with --link harness")


class UartBoardTop(Elaboratable):
    """The bitstream's top level for ``--link uart``: a :class:`UartTop` on the board's USB UART
    (``uart`` resource 0) and LEDs, clocked by the board's default clock.

    ``clk_hz`` is the frequency the board's oscillator really runs at (not a tighter timing
    constraint) and sets the baud rate divisor. With ``--store sdram`` the engine's SDRAM
    controller is built for that clock and the board's pads
    (:func:`nfacep.boards.sdram.use_board_sdram`: at the ULX3S's 25 MHz the pads take the read
    data at the first edge after the CAS latency) and its pins go to the board's SDRAM
    (:func:`nfacep.boards.sdram.attach`), in the one clock domain.
    """

    def __init__(self, engine: Engine, *, clk_hz: float, baud: int = 115200):
        self.engine = engine
        self.clk_hz = clk_hz
        self.baud = baud
        divisor(clk_hz, baud)  # a bad baud rate fails here, before elaboration
        if "sdram" in engine.signature.members:
            from nfacep.boards.sdram import use_board_sdram

            use_board_sdram(engine, clk_hz / 1e6)

    def elaborate(self, platform):
        from nfacep.boards.top import board_leds

        m = Module()
        check_board(platform)
        leds = board_leds(platform)
        m.submodules.top = top = UartTop(
            self.engine, clk_hz=self.clk_hz, baud=self.baud, leds=len(leds)
        )
        uart = platform.request("uart", 0, dir="-")
        m.submodules.rx_buffer = rx = io.Buffer("i", uart.rx)
        m.submodules.tx_buffer = tx = io.Buffer("o", uart.tx)
        m.d.comb += [top.rx.eq(rx.i), tx.o.eq(top.tx)]
        if "sdram" in top.signature.members:  # --store sdram: the chip on the board's pins
            from amaranth.hdl import ClockSignal

            from nfacep.boards.sdram import attach

            attach(m, platform, top.sdram, self.engine, ClockSignal("sync"))
        for i, port in enumerate(leds):
            m.submodules[f"led{i}"] = buf = io.Buffer("o", port)
            m.d.comb += buf.o.eq(top.leds[i])
        return m


def make_top(engine: Engine, board_mhz: float, baud: int) -> tuple[dict, UartBoardTop]:
    """The board top for ``engine`` on a board whose oscillator runs at ``board_mhz``, at
    ``baud``, and the report's ``link`` fields."""
    div = divisor(board_mhz * 1e6, baud)
    top = UartBoardTop(engine, clk_hz=board_mhz * 1e6, baud=baud)
    ident = engine_id(engine.nfa, engine.params)
    actual = board_mhz * 1e6 / div
    note = (
        f"UART link at {baud} baud on the board's USB serial port (frames: boards/LINK.md); "
        f"stream tuples with `nfacep run --port PORT --baud {baud}`"
    )
    sdram = {}
    if "sdram" in engine.signature.members:
        from nfacep.boards.sdram import report

        fields, text = report(engine, board_mhz)
        sdram = {"sdram": fields}
        note += f"; {text}"
    return {
        "kind": "uart",
        "baud": baud,
        "divisor": div,
        "actual_baud": round(actual),
        "engine_id": f"{ident:08x}",
        **sdram,
        "note": note,
    }, top
