"""The stream blocks of hdl/stream.py.

The register stage and the FIFO must deliver every payload once, in order, whatever the
producer's gaps and the consumer's stalls, and take one payload per cycle when neither side
waits. The packet queue shows committed bytes only, forgets discarded ones, and drops what
does not fit until the packet is rolled back; the tuple gatherer packs bytes little-endian,
with and without overlap.
"""

from __future__ import annotations

import random

import pytest
from amaranth.sim import Simulator
from streams import stream_get, stream_put, stream_through

from nfacep.hdl import stream as stream_blocks
from nfacep.hdl.stream import (
    PacketQueue,
    SkidBuffer,
    StreamBuffer,
    StreamQueue,
    TupleGatherer,
)


@pytest.mark.parametrize(
    "make",
    [lambda: StreamBuffer(8), lambda: StreamQueue(8, 4), lambda: SkidBuffer(8)],
    ids=["buffer", "queue", "skid"],
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


def test_skid_buffer_ready_is_a_register_and_a_payload_a_cycle():
    """The skid buffer's ``ready`` does not follow the consumer within a cycle; it passes a
    payload a cycle, holds two on a stall, and takes again a cycle after the consumer."""
    dut = SkidBuffer(8)
    trace = []

    async def bench(ctx):
        ctx.set(dut.i_stream.valid, 1)
        ctx.set(dut.o_stream.ready, 1)
        for v in range(1, 4):  # a payload a cycle, each out the cycle after
            ctx.set(dut.i_stream.payload, v)
            assert ctx.get(dut.i_stream.ready)
            await ctx.tick()
            trace.append(ctx.get(dut.o_stream.payload))
        ctx.set(dut.o_stream.ready, 0)  # the consumer stalls: 4 is taken into the skid
        ctx.set(dut.i_stream.payload, 4)
        assert ctx.get(dut.i_stream.ready)  # (the same cycle: still ready, a register)
        await ctx.tick()
        ctx.set(dut.i_stream.payload, 5)
        assert not ctx.get(dut.i_stream.ready)  # full: 3 out, 4 in the skid
        ctx.set(dut.o_stream.ready, 1)  # (not seen by ready until the edge)
        await ctx.delay(1e-8)
        assert not ctx.get(dut.i_stream.ready)
        trace.append(ctx.get(dut.o_stream.payload))
        await ctx.tick()  # 3 out, 4 from the skid to the output; 5 not taken
        assert ctx.get(dut.i_stream.ready)
        trace.append(ctx.get(dut.o_stream.payload))
        await ctx.tick()  # 4 out, 5 taken
        ctx.set(dut.i_stream.valid, 0)
        trace.append(ctx.get(dut.o_stream.payload))
        await ctx.tick()
        assert not ctx.get(dut.o_stream.valid)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert trace == [1, 2, 3, 3, 4, 5]


def _queue_bench(capacity, script):
    """Run ``script(ctx, dut, write, pulse)`` on a :class:`PacketQueue` whose output is read
    into the returned list whenever ``dut.o_stream.ready`` is set by the script."""
    dut = PacketQueue(capacity)
    out = []

    async def write(ctx, data):
        for b in data:
            ctx.set(dut.i_stream.valid, 1)
            ctx.set(dut.i_stream.payload, b)
            assert ctx.get(dut.i_stream.ready)  # never waits
            await ctx.tick()
        ctx.set(dut.i_stream.valid, 0)

    async def pulse(ctx, signal):
        ctx.set(signal, 1)
        await ctx.tick()
        ctx.set(signal, 0)

    async def bench(ctx):
        await script(ctx, dut, write, pulse)

    async def reader(ctx):
        async for _, _, valid, ready, payload in ctx.tick().sample(
            dut.o_stream.valid, dut.o_stream.ready, dut.o_stream.payload
        ):
            if valid and ready:
                out.append(payload)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.add_testbench(reader, background=True)
    sim.run()
    return out


def test_packet_queue_shows_committed_bytes_and_forgets_discarded_ones():
    async def script(ctx, dut, write, pulse):
        ctx.set(dut.o_stream.ready, 1)
        await write(ctx, [1, 2, 3])
        await ctx.tick().repeat(4)
        assert not ctx.get(dut.o_stream.valid) and ctx.get(dut.empty)  # not committed yet
        await pulse(ctx, dut.commit)
        await write(ctx, [7, 8])  # discarded
        await pulse(ctx, dut.rollback)
        await write(ctx, [4, 5])
        await pulse(ctx, dut.commit)
        await ctx.tick().repeat(6)
        assert ctx.get(dut.empty) and not ctx.get(dut.overflow)

    assert _queue_bench(8, script) == [1, 2, 3, 4, 5]


def test_packet_queue_commit_latency_and_a_byte_per_cycle():
    dut = PacketQueue(16)
    seen = []

    async def bench(ctx):
        ctx.set(dut.o_stream.ready, 1)
        for b in range(10, 16):
            ctx.set(dut.i_stream.valid, 1)
            ctx.set(dut.i_stream.payload, b)
            await ctx.tick()
        ctx.set(dut.i_stream.valid, 0)
        ctx.set(dut.commit, 1)
        await ctx.tick()
        ctx.set(dut.commit, 0)
        for _ in range(10):
            seen.append(ctx.get(dut.o_stream.payload) if ctx.get(dut.o_stream.valid) else None)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    # offered from the third cycle after the commit, one byte a cycle
    assert seen == [None, None, 10, 11, 12, 13, 14, 15, None, None]


def test_packet_queue_full_overflows_until_rollback():
    """Capacity counts every byte not yet taken, the one offered on ``o_stream`` included:
    a packet that does not fit raises ``overflow`` and must be rolled back; room then comes
    back as bytes are taken."""

    async def script(ctx, dut, write, pulse):
        await write(ctx, [1, 2, 3])
        await pulse(ctx, dut.commit)
        await ctx.tick().repeat(3)  # the first byte is offered, not taken
        assert ctx.get(dut.o_stream.valid) and ctx.get(dut.o_stream.payload) == 1
        await write(ctx, [4, 5, 6, 7, 8])  # 3 + 5 = 8: full, no overflow yet
        assert not ctx.get(dut.overflow)
        await write(ctx, [9])  # does not fit
        assert ctx.get(dut.overflow)
        await write(ctx, [10])
        assert ctx.get(dut.overflow)  # until the rollback
        await pulse(ctx, dut.rollback)
        assert not ctx.get(dut.overflow)
        ctx.set(dut.o_stream.ready, 1)  # take the committed bytes
        await ctx.tick().repeat(6)
        ctx.set(dut.o_stream.ready, 0)
        await write(ctx, list(range(20, 28)))  # the whole capacity again
        assert not ctx.get(dut.overflow)
        await pulse(ctx, dut.commit)
        ctx.set(dut.o_stream.ready, 1)
        await ctx.tick().repeat(12)

    assert _queue_bench(8, script) == [1, 2, 3, *range(20, 28)]


def _one_byte_packets(capacity):
    """One-byte packets, each committed in the cycle after its write and read at once, over
    three laps of the memory (so that every address holds an older byte when it is read): the
    bytes out."""

    async def script(ctx, dut, write, pulse):
        ctx.set(dut.o_stream.ready, 1)
        for value in range(3 * capacity):
            await write(ctx, [value])
            await pulse(ctx, dut.commit)
            await ctx.tick().repeat(4)  # taken: the queue is empty again
            assert ctx.get(dut.empty)

    return _queue_bench(capacity, script)


def test_packet_queue_reads_a_byte_committed_right_after_its_write():
    """The write port is a register: a byte reaches the memory at the edge after its write,
    before the earliest read of it (a commit in the next cycle, an empty queue, ``o_stream``
    taking): each packet's own byte comes out, not the one its address held a lap before."""
    assert _one_byte_packets(8) == list(range(24))


def test_packet_queue_with_a_late_write_reads_stale_bytes(monkeypatch):
    """The test above fails when a byte reaches the memory an edge later (``BREAK_QUEUE_WRITE
    = "late"``): the read of a byte committed right after its write sees the address's byte of
    the lap before."""
    monkeypatch.setattr(stream_blocks, "BREAK_QUEUE_WRITE", "late")
    out = _one_byte_packets(8)
    assert len(out) == 24 and out != list(range(24))


def _bytes_after_an_overflow():
    """Three bytes committed and not taken, then a packet that overflows the queue (of 8) by
    four bytes and is rolled back: what comes out."""

    async def script(ctx, dut, write, pulse):
        await write(ctx, [1, 2, 3])
        await pulse(ctx, dut.commit)
        await ctx.tick().repeat(3)
        await write(ctx, [4, 5, 6, 7, 8, 9, 10, 11, 12])
        assert ctx.get(dut.overflow)
        await pulse(ctx, dut.rollback)
        ctx.set(dut.o_stream.ready, 1)
        await ctx.tick().repeat(8)

    return _queue_bench(8, script)


def test_packet_queue_drops_every_byte_after_an_overflow():
    """The write pointer moves with every byte, kept or dropped, so after an overflow it runs
    past the bytes not yet taken; the bytes after the overflow are dropped on ``overflow``
    itself and the committed bytes come out whole. Written whenever the queue does not look
    full (``BREAK_QUEUE_WRITE = "past full"``), they overwrite a committed byte."""
    assert _bytes_after_an_overflow() == [1, 2, 3]


def test_packet_queue_writing_past_an_overflow_is_caught(monkeypatch):
    """:func:`test_packet_queue_drops_every_byte_after_an_overflow` with ``BREAK_QUEUE_WRITE
    = "past full"``: a committed byte is overwritten."""
    monkeypatch.setattr(stream_blocks, "BREAK_QUEUE_WRITE", "past full")
    out = _bytes_after_an_overflow()
    assert len(out) == 3 and out != [1, 2, 3]


def test_packet_queue_holds_its_read_pipeline_while_ready_drops():
    """The two bytes in the read registers (the block RAM's address and output registers)
    stay there while ``o_stream.ready`` is low, the one offered unchanged, whatever the cycle
    it drops in: each byte comes out once, in order."""

    async def script(ctx, dut, write, pulse):
        await write(ctx, list(range(30, 40)))
        await pulse(ctx, dut.commit)
        for pattern in ([1, 0, 0, 0], [1, 1, 0], [0, 1, 0, 1, 0, 0], [1, 1, 1, 0, 0]):
            for ready in pattern:
                ctx.set(dut.o_stream.ready, ready)
                valid, payload = ctx.get(dut.o_stream.valid), ctx.get(dut.o_stream.payload)
                await ctx.tick()
                if valid and not ready:  # a stalled byte stays offered
                    assert ctx.get(dut.o_stream.valid)
                    assert ctx.get(dut.o_stream.payload) == payload
        ctx.set(dut.o_stream.ready, 1)
        await ctx.tick().repeat(12)
        assert ctx.get(dut.empty)

    assert _queue_bench(16, script) == list(range(30, 40))


def _overflow_monitor(dut, capacity, met):
    """A testbench that models a :class:`PacketQueue`'s three pointers edge by edge and checks
    ``overflow`` against them; ``met`` counts the writes into the last free place and the
    bytes that came while the queue was full."""

    async def monitor(ctx):
        written = committed = taken = 0
        overflow = False
        async for _, _, valid, o_valid, o_ready, commit, rollback, seen in ctx.tick().sample(
            dut.i_stream.valid,
            dut.o_stream.valid,
            dut.o_stream.ready,
            dut.commit,
            dut.rollback,
            dut.overflow,
        ):
            assert seen == overflow, (written, committed, taken)
            if valid and written - taken == capacity:
                overflow = True
                met["full"] += 1
            elif valid:
                met["last place"] += written - taken == capacity - 1
                written += 1
            if commit:
                committed, overflow = written, False
            if rollback:
                written, overflow = committed, False
            taken += o_valid and o_ready

    return monitor


@pytest.mark.parametrize("seed", range(6))
def test_packet_queue_against_a_model(seed):
    """Packets of random lengths written with random gaps, committed or rolled back (always
    rolled back when they overflowed) at every phase of the read pipeline, read with a
    random ``o_stream.ready``: the bytes out are those of the committed packets, once each, in
    order; a stalled byte stays offered; ``empty`` never hides a committed byte; ``overflow``
    rises exactly when a byte comes while ``capacity`` bytes are written and not taken (a
    model of the three pointers, edge by edge), and both the last free place and a full queue
    are met."""
    rng = random.Random(seed)
    capacity = 16
    dut = PacketQueue(capacity)
    want: list[int] = []
    out: list[int] = []
    done = []
    met = {"last place": 0, "full": 0}

    monitor = _overflow_monitor(dut, capacity, met)

    async def writer(ctx):
        value = 0
        for _ in range(60):
            packet = []
            for _ in range(rng.randrange(1, 20)):  # some longer than the queue
                for _ in range(rng.choice([0, 0, 0, 1, 2])):  # a gap
                    await ctx.tick()
                value = (value + 1) % 256
                packet.append(value)
                ctx.set(dut.i_stream.valid, 1)
                ctx.set(dut.i_stream.payload, value)
                await ctx.tick()
                ctx.set(dut.i_stream.valid, 0)
            for _ in range(rng.choice([0, 0, 1, 2, 3])):
                await ctx.tick()
            keep = not ctx.get(dut.overflow) and rng.random() < 0.8
            ctx.set(dut.commit if keep else dut.rollback, 1)
            await ctx.tick()
            ctx.set(dut.commit if keep else dut.rollback, 0)
            if keep:  # (readable from this edge on)
                want.extend(packet)
        done.append(True)

    async def reader(ctx):
        offered = None
        while not done or len(out) < len(want):
            ready = rng.random() < 0.6
            ctx.set(dut.o_stream.ready, ready)
            valid, payload = ctx.get(dut.o_stream.valid), ctx.get(dut.o_stream.payload)
            if offered is not None:  # offered and not taken last cycle: offered still
                assert valid and payload == offered
            if ctx.get(dut.empty):
                assert len(out) == len(want)  # every committed byte was taken
            await ctx.tick()
            if valid and ready:
                out.append(payload)
            offered = payload if valid and not ready else None
            assert len(out) < 10_000

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(writer)
    sim.add_testbench(reader)
    sim.add_testbench(monitor, background=True)
    sim.run()
    assert len(want) > 100
    assert out == want
    assert met["last place"] > 0 and met["full"] > 0, met


@pytest.mark.parametrize("overlap", [True, False])
@pytest.mark.parametrize("width", [8, 20, 33])
def test_tuple_gatherer_packs_little_endian(width, overlap):
    n = (width + 7) // 8
    rng = random.Random(width)
    tuples = [rng.getrandbits(width) for _ in range(30)]
    # the bytes of each tuple, with random bits in the padding above `width`
    data = []
    for t in tuples:
        data += list((t | rng.getrandbits(8 * n - width) << width).to_bytes(n, "little"))
    dut = TupleGatherer(width, overlap=overlap)
    got = []

    async def producer(ctx):
        for b in data:
            await stream_put(ctx, dut.i_stream, b, rng=rng, gap=0.3)

    async def consumer(ctx):
        for _ in tuples:
            got.append(await stream_get(ctx, dut.o_stream, rng=rng, stall=0.3))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(producer)
    sim.add_testbench(consumer)
    sim.run()
    assert got == tuples


@pytest.mark.parametrize(("overlap", "cycles"), [(True, 3 * 10), (False, 4 * 10 - 1)])
def test_tuple_gatherer_throughput(overlap, cycles):
    """With overlap, a tuple of three bytes every three cycles; without, every four."""
    dut = TupleGatherer(24, overlap=overlap)
    done = {}

    async def bench(ctx):
        ctx.set(dut.o_stream.ready, 1)
        ctx.set(dut.i_stream.valid, 1)
        taken = tuples = 0
        for cycle in range(100):
            taken += ctx.get(dut.i_stream.ready)
            tuples += ctx.get(dut.o_stream.valid)
            if tuples == 10:
                done["cycles"] = cycle
                return
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert done["cycles"] == cycles
