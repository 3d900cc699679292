"""A stream FIFO: ``amaranth.lib.fifo.SyncFIFOBuffered`` wrapped as a wiring Component."""

from __future__ import annotations

from amaranth.hdl import Module, Shape
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["StreamQueue"]


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
        super().__init__({
            "i_stream": In(stream.Signature(shape)),
            "o_stream": Out(stream.Signature(shape)),
        })

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
