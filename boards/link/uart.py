"""A UART receiver and transmitter (8 data bits, no parity, 1 stop bit) on ``lib.stream``.

amaranth-stdio, which held Amaranth's serial blocks, has no release for Amaranth 0.5 (its PyPI
name is a placeholder), so these are the link's own. Both count bit times in clock cycles:
``divisor`` is ``round(clock / baud)`` (:func:`divisor`).
"""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

__all__ = ["BaudError", "UartRx", "UartTx", "divisor"]

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
        raise BaudError(f"{baud} baud is too fast for a {clk_hz / 1e6:g} MHz clock (at most "
                        f"{int(clk_hz // 4)}: the receiver needs 4 clock cycles per bit)")
    actual = clk_hz / div
    if abs(actual - baud) / baud > MAX_BAUD_ERROR:
        raise BaudError(f"a {clk_hz / 1e6:g} MHz clock cannot make {baud} baud: the nearest is "
                        f"{actual:.0f} ({abs(actual - baud) / baud:.1%} off, more than "
                        f"{MAX_BAUD_ERROR:.0%}); choose another baud rate")
    return div


class UartRx(wiring.Component):
    """UART receiver.

    ``rx`` is synchronised to the clock (two flip-flops). A falling edge starts a byte; the
    start bit is sampled half a bit time later (a pulse shorter than that is ignored), then each
    data bit, LSB first, and the stop bit one bit time apart, in the middle of each bit. A byte
    whose stop bit is 0 is discarded and ``error`` pulses; the receiver then waits for the line
    to return to 1. A received byte is offered on ``o_stream`` until taken; a UART cannot wait,
    so a byte that arrives while the last one is still offered is lost and ``overrun`` pulses.

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

        with m.If(self.o_stream.ready):
            m.d.sync += self.o_stream.valid.eq(0)

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
                    m.d.sync += [timer.eq(div - 1), shreg.eq(Cat(shreg[1:], rx)),
                                 bit.eq(bit + 1)]
                    with m.If(bit == 7):
                        m.next = "STOP"
                with m.Else():
                    m.d.sync += timer.eq(timer - 1)
            with m.State("STOP"):
                with m.If(timer == 0):
                    with m.If(rx):
                        with m.If(self.o_stream.valid & ~self.o_stream.ready):
                            m.d.comb += self.overrun.eq(1)
                        with m.Else():
                            m.d.sync += [self.o_stream.payload.eq(shreg),
                                         self.o_stream.valid.eq(1)]
                        m.next = "IDLE"
                    with m.Else():
                        m.d.comb += self.error.eq(1)
                        m.next = "BREAK"
                with m.Else():
                    m.d.sync += timer.eq(timer - 1)
            with m.State("BREAK"), m.If(rx):
                m.next = "IDLE"
        return m


class UartTx(wiring.Component):
    """UART transmitter: each byte taken from ``i_stream`` goes out on ``tx`` as a start bit,
    eight data bits LSB first and a stop bit, ``divisor`` cycles each, back to back while
    bytes keep coming. ``tx`` is a register and idles at 1. (The link's
    :class:`~nfacep.boards.link.framing.Framer` sends its bytes itself, saving this one's register.)

    Members
    -------
    i_stream : ``In(stream.Signature(8))``
    tx : ``Out(1)``
    busy : ``Out(1)``
        A byte is being sent.
    """

    i_stream: In(stream.Signature(8))
    tx: Out(1, init=1)
    busy: Out(1)

    def __init__(self, divisor: int):
        if divisor < 1:
            raise ValueError(f"divisor must be at least 1, not {divisor}")
        self._divisor = divisor
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        div = self._divisor
        timer = Signal(range(div), reset_less=True)  # (loaded before use: needs no reset)
        bits = Signal(range(11))
        shreg = Signal(9, reset_less=True)
        m.d.comb += [self.busy.eq(bits != 0),
                     self.i_stream.ready.eq(bits == 0)]
        with m.If(self.i_stream.valid & self.i_stream.ready):
            m.d.sync += [self.tx.eq(0), shreg.eq(self.i_stream.payload | (1 << 8)),
                         bits.eq(10), timer.eq(div - 1)]
        with m.Elif(bits != 0):
            with m.If(timer == 0):
                m.d.sync += [timer.eq(div - 1), bits.eq(bits - 1)]
                with m.If(bits != 1):
                    m.d.sync += [self.tx.eq(shreg[0]), shreg.eq(shreg >> 1)]
            with m.Else():
                m.d.sync += timer.eq(timer - 1)
        return m
