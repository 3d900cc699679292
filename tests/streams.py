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
