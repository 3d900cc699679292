"""A UART receiver (8 data bits, no parity, 1 stop bit) on ``lib.stream``, and the bit time.

amaranth-stdio, which held Amaranth's serial blocks, has no release for Amaranth 0.5 (its PyPI
name is a placeholder), so this is the link's own. It counts bit times in clock cycles:
``divisor`` is ``round(clock / baud)`` (:func:`divisor`). The link needs no transmitter block:
its :class:`~nfacep.hdl.uart.framer.Framer` drives the line itself.
"""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

from ..stream import StreamBuffer

__all__ = ["BaudError", "UartRx", "divisor"]

#: How far the baud rate made from the clock may be from the one asked for.
MAX_BAUD_ERROR = 0.02


class BaudError(ValueError):
    """A baud rate the clock cannot make closely enough."""


def divisor(clk_hz: float, baud: int) -> int:
    """Clock cycles per bit for ``baud`` from ``clk_hz``; :class:`BaudError` when that is under
    4 cycles or more than 2 % off."""
    if baud <= 0:
        raise BaudError(f"the baud rate must be positive, not {baud}")
    div = round(clk_hz / baud)
    if div < 4:
        raise BaudError(
            f"{baud} baud is too fast for a {clk_hz / 1e6:g} MHz clock (at most "
            f"{int(clk_hz // 4)}: the receiver needs 4 clock cycles per bit)"
        )
    actual = clk_hz / div
    if abs(actual - baud) / baud > MAX_BAUD_ERROR:
        raise BaudError(
            f"a {clk_hz / 1e6:g} MHz clock cannot make {baud} baud: the nearest is "
            f"{actual:.0f} ({abs(actual - baud) / baud:.1%} off, more than "
            f"{MAX_BAUD_ERROR:.0%}); choose another baud rate"
        )
    return div


class UartRx(wiring.Component):
    """UART receiver.

    ``rx`` is synchronised to the clock (two flip-flops). A falling edge starts a byte; the
    start bit is sampled half a bit time later (a pulse shorter than that is ignored), then each
    data bit, LSB first, and the stop bit one bit time apart, in the middle of each bit. A byte
    whose stop bit is 0 is discarded and ``error`` pulses; the receiver then waits for the line
    to return to 1.

    A received byte is offered on ``o_stream`` from the cycle after its stop bit was sampled
    until taken (a :class:`~nfacep.hdl.stream.StreamBuffer` holds it). A UART cannot wait: a byte
    that arrives while the last one is still offered and not taken in that cycle is lost, and
    ``overrun`` pulses. The consumer has about a byte time (``10 * divisor`` cycles) to take
    each byte.

    Members
    -------
    rx : ``In(1)``
    o_stream : ``Out(stream.Signature(8))``
    error, overrun : ``Out(1)``
        One-cycle pulses.
    """

    rx: In(1, init=1)
    o_stream: Out(stream.Signature(8))
    error: Out(1)
    overrun: Out(1)

    def __init__(self, divisor: int):
        if divisor < 4:
            raise ValueError(f"divisor must be at least 4, not {divisor}")
        self._divisor = divisor
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        div = self._divisor
        rx = Signal(init=1)
        m.submodules.sync_rx = FFSynchronizer(self.rx, rx, init=1)
        # (no reset for what is loaded before use: the domain's reset would cost logic)
        timer = Signal(range(div), reset_less=True)
        bit = Signal(range(10), reset_less=True)
        shreg = Signal(8, reset_less=True)
        m.submodules.buffer = buffer = StreamBuffer(8)
        received = buffer.i_stream  # valid for the cycle the stop bit is sampled
        wiring.connect(m, buffer.o_stream, wiring.flipped(self.o_stream))
        m.d.comb += [received.payload.eq(shreg), self.overrun.eq(received.valid & ~received.ready)]

        with m.FSM(name="uart_rx"):
            with m.State("IDLE"), m.If(~rx):
                m.d.sync += timer.eq(div // 2 - 1)
                m.next = "START"
            with m.State("START"):
                with m.If(timer == 0):
                    with m.If(rx):
                        m.next = "IDLE"  # a glitch, not a start bit
                    with m.Else():
                        m.d.sync += [timer.eq(div - 1), bit.eq(0)]
                        m.next = "DATA"
                with m.Else():
                    m.d.sync += timer.eq(timer - 1)
            with m.State("DATA"):
                with m.If(timer == 0):
                    m.d.sync += [timer.eq(div - 1), shreg.eq(Cat(shreg[1:], rx)), bit.eq(bit + 1)]
                    with m.If(bit == 7):
                        m.next = "STOP"
                with m.Else():
                    m.d.sync += timer.eq(timer - 1)
            with m.State("STOP"):
                with m.If(timer == 0):
                    with m.If(rx):
                        m.d.comb += received.valid.eq(1)
                        m.next = "IDLE"
                    with m.Else():
                        m.d.comb += self.error.eq(1)
                        m.next = "BREAK"
                with m.Else():
                    m.d.sync += timer.eq(timer - 1)
            with m.State("BREAK"), m.If(rx):
                m.next = "IDLE"
        return m
