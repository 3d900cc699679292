"""Shared async helpers for driving and collecting amaranth.lib.stream interfaces in tests."""

from amaranth.lib import data


async def stream_put(ctx, stream, payload, *, rng=None, gap=0.0):
    """Offer ``payload`` on ``stream`` until it is taken, after a random idle gap."""
    while rng is not None and rng.random() < gap:
        await ctx.tick()
    ctx.set(stream.valid, 1)
    if isinstance(payload, int) and isinstance(stream.payload, data.View):
        ctx.set(stream.payload.as_value(), payload)  # an already packed payload
    else:
        ctx.set(stream.payload, payload)
    await ctx.tick().until(stream.ready)
    ctx.set(stream.valid, 0)


async def stream_get(ctx, stream, *, rng=None, stall=0.0):
    """Take one payload from ``stream``, holding ``ready`` low for a random time first."""
    while rng is not None and rng.random() < stall:
        await ctx.tick()
    ctx.set(stream.ready, 1)
    (payload,) = await ctx.tick().sample(stream.payload).until(stream.valid)
    ctx.set(stream.ready, 0)
    return payload


def stream_through(dut, payloads, *, seed, gap=0.3, stall=0.3, count=None):
    """Offer ``payloads`` on ``dut.i_stream`` with random gaps and take ``count`` (default: as
    many) payloads from ``dut.o_stream`` with random stalls; return those taken, in order."""
    import random

    from amaranth.sim import Simulator

    rng_in, rng_out = random.Random(seed), random.Random(seed + 1)
    got = []

    async def producer(ctx):
        for payload in payloads:
            await stream_put(ctx, dut.i_stream, payload, rng=rng_in, gap=gap)

    async def consumer(ctx):
        for _ in range(len(payloads) if count is None else count):
            got.append(await stream_get(ctx, dut.o_stream, rng=rng_out, stall=stall))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(producer)
    sim.add_testbench(consumer)
    sim.run()
    return got


def run_matcher(dut, words, *, seed, gap=0.3, stall=0.3):
    """Stream predicate vectors ``words`` through a matcher (``i_stream`` {predicates, payload},
    ``o_stream`` {payload, matches}) with random gaps and stalls; return [(seq, matches)]."""
    got = stream_through(
        dut,
        [{"predicates": w, "payload": seq} for seq, w in enumerate(words)],
        seed=seed,
        gap=gap,
        stall=stall,
    )
    return [(rec.payload, rec.matches) for rec in got]


def engine_drain(store: str, partitions: int, ways: int) -> int:
    """Idle cycles after which an engine has no record left to emit: records lag the last
    input by at most the partition store's latency (and the table's clearing sweep after
    reset, at most partitions / ways cycles, while the FIFO takes tuples), plus the tuples
    its input FIFO still holds (8, one every other cycle through the swap pipeline: input
    without gaps fills it); with ``store="sdram"`` a refresh and a line's write-back and
    fetch more (tests/hdl/sdram/test_hdl_sdram_store.py's chip: 100 cycles cover them)."""
    extra = 100 if store == "sdram" else 0
    return (partitions if store == "pipeline" else 5 + partitions // ways) + 16 + 2 * 8 + extra


async def drain_engine(ctx, dut, cycles: int, done: dict) -> None:
    """Tick until ``dut.o_stream`` has been idle for ``cycles``, then put the engine's
    counters in ``done`` (which ends :func:`collect_records`)."""
    idle = 0
    while idle < cycles:
        await ctx.tick()
        idle = 0 if ctx.get(dut.o_stream.valid) else idle + 1
    done.update(tuples=ctx.get(dut.tuples), matched=ctx.get(dut.matched), drops=ctx.get(dut.drops))


def collect_records(dut, records: list, done: dict, *, rng, stall: float):
    """A testbench taking the engine's match records, with ``ready`` low at random, until
    ``done`` is filled: ``(seq, partition, matches, dropped, starts)`` each (starts 0 for an
    engine without them)."""

    async def consumer(ctx):
        while not done:
            ready = rng.random() >= stall
            ctx.set(dut.o_stream.ready, ready)
            *_, valid, rec = await ctx.tick().sample(dut.o_stream.valid, dut.o_stream.payload)
            if valid and ready:
                starts = rec.starts if "starts" in rec.shape().members else 0
                records.append((rec.seq, rec.partition, rec.matches, rec.dropped, starts))

    return consumer
