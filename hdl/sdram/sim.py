"""The SDRAM model (:class:`~nfacep.hdl.sdram.model.SDRAMModel`) on Amaranth's simulator.

:func:`sdram_process` returns a process for ``Simulator.add_process`` that, at every rising
edge of the clock, gives the model the controller's pins (:func:`~nfacep.hdl.sdram.controller.
pins_signature`) as they are at the edge and then drives ``dq_i`` with what the chip drives for
the next edge. When the chip drives nothing, ``dq_i`` holds ``floating`` (a pattern, so that a
controller sampling read data on the wrong clock reads a wrong word rather than a plausible
one). A timing violation raises :class:`~nfacep.hdl.sdram.model.SDRAMTimingError` out of
``Simulator.run``.

:func:`run_requests` drives a controller with a list of requests against the model, with
optional random gaps on the input and stalls on the output, and returns what came back and
when: what the tests and ``benchmarks/sdram_controller.py`` share.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from .model import SDRAMModel

__all__ = ["FLOATING", "Run", "run_requests", "sdram_process"]

#: What ``dq_i`` reads when neither side drives DQ.
FLOATING = 0xBADC0FFE


def sdram_process(
    model: SDRAMModel,
    pins,
    *,
    floating: int = FLOATING,
    limit: int | None = None,
    failures: list | None = None,
):
    """A simulator process connecting ``model`` to ``pins`` (the controller's ``sdram``);
    with ``limit``, the simulation fails after that many clocks (a controller that hangs).
    A failure raises, or with ``failures`` is appended to it and the model stops (so that
    testbenches can end cleanly, see :func:`run_requests`)."""
    mask = (1 << len(pins.dq_i)) - 1
    watched = (pins.cs, pins.ras, pins.cas, pins.we, pins.ba, pins.a, pins.dq_o, pins.dq_oe)

    async def process(ctx):
        ctx.set(pins.dq_i, floating & mask)
        async for _, _, cs, ras, cas, we, ba, a, dq_o, dq_oe in ctx.tick().sample(*watched):
            try:
                out = model.clock(ras, cas, we, ba, a, dq_o, dq_oe, cs=cs)
                if limit is not None and model.cycle > limit:
                    raise AssertionError(f"the simulation ran past {limit} clocks")
            except AssertionError as e:
                if failures is None:
                    raise
                failures.append(e)
                return
            ctx.set(pins.dq_i, (floating if out is None else out) & mask)

    return process


@dataclass
class Run:
    """What :func:`run_requests` saw: the words read, in order, and the clock (the model's edge
    count) at which each request was accepted and each response taken."""

    responses: list[int] = field(default_factory=list)
    accepted: list[int] = field(default_factory=list)
    answered: list[int] = field(default_factory=list)


def run_requests(
    dut,
    model: SDRAMModel,
    requests: list[dict],
    *,
    seed: int = 0,
    gap: float = 0.0,
    stall: float = 0.0,
    limit: int = 10**6,
) -> Run:
    """Offer ``requests`` (dicts of the request layout, and optionally ``wait``: idle clocks
    before it) on ``dut.request``, each after a random idle gap (probability ``gap`` per
    clock), and take every response, holding ``ready`` low with probability ``stall`` per
    clock, with ``model`` on the pins; return once every response is taken and the controller
    is ``idle``."""
    from amaranth.sim import Simulator

    rng_in, rng_out = random.Random(seed), random.Random(seed + 1)
    reads = sum(1 for r in requests if not r["write"])
    run = Run()
    failures: list[AssertionError] = []

    async def until(ctx, *signals):
        """The sampled values of ``signals`` at the first edge where the first is 1 (or
        ``None`` once the model has failed): ``tick().until`` that can stop."""
        while not failures:
            _, _, *values = await ctx.tick().sample(*signals)
            if values[0]:
                return values
        return None

    async def producer(ctx):
        for r in requests:
            for _ in range(r.get("wait", 0)):
                await ctx.tick()
            while rng_in.random() < gap:
                await ctx.tick()
            ctx.set(dut.request.valid, 1)
            ctx.set(dut.request.payload, {k: v for k, v in r.items() if k != "wait"})
            if await until(ctx, dut.request.ready) is None:
                return
            run.accepted.append(model.cycle)
            ctx.set(dut.request.valid, 0)
        await until(ctx, dut.idle)  # every write has reached the chip

    async def consumer(ctx):
        while len(run.responses) < reads:
            while rng_out.random() < stall:
                ctx.set(dut.response.ready, 0)
                await ctx.tick()
            ctx.set(dut.response.ready, 1)
            got = await until(ctx, dut.response.valid, dut.response.payload)
            if got is None:
                return
            run.responses.append(got[1])
            run.answered.append(model.cycle)
        ctx.set(dut.response.ready, 0)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_process(sdram_process(model, dut.sdram, limit=limit, failures=failures))
    sim.add_testbench(producer)
    sim.add_testbench(consumer)
    sim.run()
    if failures:
        raise failures[0]
    return run
