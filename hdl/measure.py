"""Cycle-accurate throughput and latency of an engine, measured in Amaranth's simulator."""

from __future__ import annotations

from amaranth.sim import Simulator

__all__ = ["cycle_profile"]


def cycle_profile(engine, payloads: list[int], *, expect_records: int, warmup: int = 0) -> dict:
    """Stream ``payloads`` back to back into ``engine`` with its output always ready, after
    ``warmup`` idle cycles (such as a block-RAM table's clearing sweep after reset).

    Returns ``latency`` (cycles from the edge that takes the first tuple to the first edge its
    record is valid at), ``cycles_per_tuple`` (between the first and last record, when every
    tuple yields one) and ``accepted_per_cycle`` (tuples taken per cycle while the input was
    offered). Deterministic: counts cycles, not seconds.
    """
    seen = {}

    async def bench(ctx):
        ctx.set(engine.o_stream.ready, 1)
        if warmup:
            await ctx.tick().repeat(warmup)
        cycle = sent = received = 0
        first_in = first_out = last_out = last_in = None
        while received < expect_records:
            ctx.set(engine.i_stream.valid, sent < len(payloads))
            if sent < len(payloads):
                ctx.set(engine.i_stream.payload.as_value(), payloads[sent])
            *_, valid, ready, out = await ctx.tick().sample(
                engine.i_stream.valid, engine.i_stream.ready, engine.o_stream.valid
            )
            if valid and ready:
                first_in = cycle if first_in is None else first_in
                last_in = cycle
                sent += 1
            if out:
                first_out = cycle if first_out is None else first_out
                last_out = cycle
                received += 1
            cycle += 1
        seen.update(
            latency=first_out - first_in,
            cycles_per_tuple=(last_out - first_out) / max(received - 1, 1),
            accepted_per_cycle=sent / (last_in - first_in + 1),
        )

    sim = Simulator(engine)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return seen
