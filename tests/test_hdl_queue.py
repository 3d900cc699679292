"""The stream buffers of hdl/queue.py: a register stage and a FIFO, under random gaps and stalls.

Both must deliver every payload once, in order, whatever the producer's gaps and the
consumer's stalls, and take one payload per cycle when neither side waits.
"""

from __future__ import annotations

import random

import pytest
from amaranth.sim import Simulator
from streams import stream_through

from nfacep.hdl.queue import StreamBuffer, StreamQueue


@pytest.mark.parametrize(
    "make", [lambda: StreamBuffer(8), lambda: StreamQueue(8, 4)], ids=["buffer", "queue"]
)
@pytest.mark.parametrize(("gap", "stall"), [(0.0, 0.0), (0.5, 0.0), (0.0, 0.7), (0.4, 0.4)])
def test_every_payload_once_in_order(make, gap, stall):
    values = [random.Random(3).randrange(256) for _ in range(200)]
    assert (
        stream_through(make(), values, seed=int(gap * 10 + stall * 100), gap=gap, stall=stall)
        == values
    )


def test_buffer_takes_one_payload_per_cycle_and_holds_on_stall():
    dut = StreamBuffer(8)
    trace = []

    async def bench(ctx):
        ctx.set(dut.o_stream.ready, 1)
        ctx.set(dut.i_stream.valid, 1)
        for v in range(1, 6):  # a new payload every cycle, all taken at once
            ctx.set(dut.i_stream.payload, v)
            assert ctx.get(dut.i_stream.ready)
            await ctx.tick()
            trace.append((ctx.get(dut.o_stream.valid), ctx.get(dut.o_stream.payload)))
        ctx.set(dut.o_stream.ready, 0)  # the consumer stalls: 5 holds, 9 is not taken
        ctx.set(dut.i_stream.payload, 9)
        for _ in range(3):
            assert not ctx.get(dut.i_stream.ready)
            await ctx.tick()
            trace.append((ctx.get(dut.o_stream.valid), ctx.get(dut.o_stream.payload)))
        ctx.set(dut.i_stream.valid, 0)
        ctx.set(dut.o_stream.ready, 1)
        await ctx.tick()  # 5 leaves; 9, offered while stalled, was never taken
        trace.append((ctx.get(dut.o_stream.valid), ctx.get(dut.o_stream.payload)))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert trace == [(1, 1), (1, 2), (1, 3), (1, 4), (1, 5), (1, 5), (1, 5), (1, 5), (0, 5)]


def test_buffer_ready_does_not_wait_for_valid():
    """Amaranth's stream rules: ``ready`` may depend on the consumer, never on ``valid``."""
    dut = StreamBuffer(4)

    async def bench(ctx):
        ctx.set(dut.i_stream.valid, 0)
        ctx.set(dut.o_stream.ready, 0)
        await ctx.delay(1e-7)
        assert ctx.get(dut.i_stream.ready)  # empty: ready with no valid in sight

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
