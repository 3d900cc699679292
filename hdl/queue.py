"""Stream buffers: a FIFO (``amaranth.lib.fifo.SyncFIFOBuffered`` wrapped as a wiring Component)
and a one-payload output register."""

from __future__ import annotations

from amaranth.hdl import Module, Shape
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["StreamBuffer", "StreamQueue"]


class StreamQueue(wiring.Component):
    """First-in first-out buffer of ``depth`` payloads between two streams.

    Latency: a payload written at one edge can be read after the next; full throughput (one
    transfer per cycle in and out). ``i_stream.ready`` is low when full.

    Members
    -------
    i_stream : ``In(stream.Signature(shape))``
    o_stream : ``Out(stream.Signature(shape))``
    """

    def __init__(self, shape, depth: int):
        self._shape = shape
        self._depth = depth
        super().__init__(
            {
                "i_stream": In(stream.Signature(shape)),
                "o_stream": Out(stream.Signature(shape)),
            }
        )

    @property
    def depth(self) -> int:
        return self._depth

    def elaborate(self, platform):
        m = Module()
        width = Shape.cast(self._shape).width
        m.submodules.fifo = buf = fifo.SyncFIFOBuffered(width=width, depth=self._depth)
        m.d.comb += [
            buf.w_data.eq(self.i_stream.payload),
            buf.w_en.eq(self.i_stream.valid),
            self.i_stream.ready.eq(buf.w_rdy),
            self.o_stream.payload.eq(buf.r_data),
            self.o_stream.valid.eq(buf.r_rdy),
            buf.r_en.eq(self.o_stream.ready),
        ]
        return m


class StreamBuffer(wiring.Component):
    """One register stage between two streams (Glasgow's ``StreamBuffer``).

    The payload offered on ``i_stream`` appears on ``o_stream`` one cycle after it is taken.
    ``i_stream.ready`` is ``o_stream.ready | ~o_stream.valid`` (combinational from the output
    side, never from ``i_stream.valid``): full throughput, one transfer per cycle, while the
    consumer takes them; a stalled consumer holds the payload and stalls the producer. A block
    that computes its result combinationally from its input (and updates its own state on
    ``i_stream``'s transfer) gets its registered, stallable output from this.

    Members
    -------
    i_stream : ``In(stream.Signature(shape))``
    o_stream : ``Out(stream.Signature(shape))``
    """

    def __init__(self, shape):
        self._shape = shape
        super().__init__(
            {
                "i_stream": In(stream.Signature(shape)),
                "o_stream": Out(stream.Signature(shape)),
            }
        )

    def elaborate(self, platform):
        m = Module()
        with m.If(self.o_stream.ready | ~self.o_stream.valid):
            m.d.comb += self.i_stream.ready.eq(1)
            m.d.sync += self.o_stream.valid.eq(self.i_stream.valid)
            with m.If(self.i_stream.valid):
                m.d.sync += self.o_stream.payload.eq(self.i_stream.payload)
        return m
