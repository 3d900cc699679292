"""A UART transmitter for the tests: it drives :class:`~nfacep.hdl.uart.rx.UartRx` in the
loopback test. The link itself needs none: its :class:`~nfacep.hdl.uart.framer.Framer` sends
the bytes of its frames on the line itself (which saves this block's registers).
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out


class UartTx(wiring.Component):
    """UART transmitter (8 data bits, no parity, 1 stop bit): each byte taken from ``i_stream``
    goes out on ``tx`` as a start bit, eight data bits LSB first and a stop bit, ``divisor``
    cycles each, back to back while bytes keep coming. ``tx`` is a register and idles at 1.

    Members
    -------
    i_stream : ``In(stream.Signature(8))``
        Ready while no byte is being sent.
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
        m.d.comb += [self.busy.eq(bits != 0), self.i_stream.ready.eq(bits == 0)]
        with m.If(self.i_stream.valid & self.i_stream.ready):
            m.d.sync += [
                self.tx.eq(0),
                shreg.eq(self.i_stream.payload | (1 << 8)),
                bits.eq(10),
                timer.eq(div - 1),
            ]
        with m.Elif(bits != 0):
            with m.If(timer == 0):
                m.d.sync += [timer.eq(div - 1), bits.eq(bits - 1)]
                with m.If(bits != 1):
                    m.d.sync += [self.tx.eq(shreg[0]), shreg.eq(shreg >> 1)]
            with m.Else():
                m.d.sync += timer.eq(timer - 1)
        return m
