#!/usr/bin/env python3
"""The partition store in SDRAM (``--store sdram``, nfacep.hdl.sdram.store) against the
number of distinct keys, in Amaranth's simulator with the cycle-accurate SDRAM model on its
pins (every timing rule checked): sustained tuples per clock, row activations per tuple, and
what that is at 100 MHz.

The store is the engine's (the Colorlight 5A-75B's 1M x 32 SDRAM at 100 MHz, tREFI 15.625 us)
with 2^20 entries indexed directly by a 20-bit key, an entry of one word (a 6-bit state: the
NFA state of a small query). Keys: ``K`` distinct keys scattered at random over the 2^20
entries, drawn uniformly or with Zipf rank frequencies (s = 1). Tuples are offered every
clock and records always taken; the rate is tuples over the clocks from the first tuple taken
to the last record, after a warm-up of ``--warmup`` tuples (so the cache starts as a running
engine's would). Each result is checked against the table's semantics (a dictionary).

Clearing 2^20 entries after reset would take a million clocks (minutes in the simulator), so
the store is built with ``clear=False`` and the model's chip reads zero where never written:
the same as after the clearing, without simulating it.

Against Gigabit Ethernet's line, through the whole engine simulated natively and beside the
table store: ``sdram_throughput.py``.

With ``--build`` the store alone (2^20 entries, on the board's SDRAM pins, fed by an LFSR)
goes through Yosys and nextpnr for the Colorlight 5A-75B's LFE5U-25F instead: LUTs,
flip-flops, block RAMs, Fmax.

    python benchmarks/sdram_store.py                 # the table
    python benchmarks/sdram_store.py --tuples 1000   # quicker
    python benchmarks/sdram_store.py --build         # the store alone through nextpnr
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from amaranth.hdl import Elaboratable, Module, Signal
from amaranth.sim import Simulator
from sdram_controller import build, connect_pins, lfsr64

from nfacep.hdl.sdram.model import SDRAMModel
from nfacep.hdl.sdram.sim import sdram_process
from nfacep.hdl.sdram.store import BANK_QUEUE, QUEUE, SdramPartitioner
from nfacep.hdl.sdram.timing import ENGINE_SDRAM

KEY_BITS = 20
STATE_WIDTH = 6
PAYLOAD_WIDTH = 4


class ClearedChip(SDRAMModel):
    """The model of a chip whose every word reads zero until written (the store's clearing
    done)."""

    def peek(self, bank: int, row: int, column: int) -> int:
        return self.memory.get((bank, row, column), 0)


def update(m, state, payload):
    # 3 * state as a shift and an add (Yosys would spend a multiplier block on ``* 3``)
    new_state = ((state << 1) + state + payload)[:STATE_WIDTH]
    return new_state, new_state


def keys_for(kind: str, distinct: int, n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    pool = rng.sample(range(1 << KEY_BITS), distinct)
    if kind == "uniform":
        return [rng.choice(pool) for _ in range(n)]
    cdf = list(itertools.accumulate(1 / (k + 1) for k in range(distinct)))
    return [
        pool[min(bisect.bisect_left(cdf, rng.random() * cdf[-1]), distinct - 1)] for _ in range(n)
    ]


def measured_store(**options) -> SdramPartitioner:
    """The store measured here: 2^20 entries of 4 ways, ``options`` its others."""
    return SdramPartitioner(
        key_shape=KEY_BITS,
        payload_shape=PAYLOAD_WIDTH,
        state_width=STATE_WIDTH,
        result_shape=STATE_WIDTH,
        entries=1 << KEY_BITS,
        ways=4,
        update=update,
        **options,
    )


def run(keys: list[int], warmup: int, **store) -> dict:
    """Tuples/clock of the store on ``keys`` (the first ``warmup`` not counted)."""
    dut = measured_store(clear=False, **store)
    model = ClearedChip(ENGINE_SDRAM.geometry, ENGINE_SDRAM.cycles())
    rng = random.Random(len(keys))
    payloads = [rng.randrange(1 << PAYLOAD_WIDTH) for _ in keys]
    taken, emitted, results = [], [], []

    async def producer(ctx):
        ctx.set(dut.i_stream.valid, 1)
        for key, payload in zip(keys, payloads, strict=True):
            ctx.set(dut.i_stream.payload, {"key": key, "payload": payload})
            await ctx.tick().until(dut.i_stream.ready)
            taken.append(model.cycle)
        ctx.set(dut.i_stream.valid, 0)

    async def consumer(ctx):
        ctx.set(dut.o_stream.ready, 1)
        for _ in keys:
            (out,) = await ctx.tick().sample(dut.o_stream.payload).until(dut.o_stream.valid)
            emitted.append(model.cycle)
            results.append(out.result)

    sim = Simulator(dut)
    sim.add_clock(1 / ENGINE_SDRAM.clk_freq)
    sim.add_process(sdram_process(model, dut.sdram))
    sim.add_testbench(producer)
    sim.add_testbench(consumer)
    sim.run()
    state: dict[int, int] = {}
    for i, (key, payload) in enumerate(zip(keys, payloads, strict=True)):
        state[key] = (state.get(key, 0) * 3 + payload) % (1 << STATE_WIDTH)
        if results[i] != state[key]:
            raise AssertionError(f"tuple {i} (key {key}): {results[i]}, not {state[key]}")
    clocks = emitted[-1] - taken[warmup]
    return {
        "per_clock": (len(keys) - warmup) / clocks,
        "activates": model.counts["ACTIVE"] / len(keys),
    }


class _Top(Elaboratable):
    """The store (2^20 entries, as measured above) on the board's SDRAM pins, fed by an LFSR
    (a tuple offered every clock, records taken when an LFSR bit says so) and its results
    folded into the LED, so nothing is trimmed."""

    def elaborate(self, platform):
        m = Module()
        m.submodules.store = store = measured_store()
        connect_pins(m, platform, store.sdram)
        lfsr = lfsr64(m)
        folded = Signal(STATE_WIDTH)
        m.d.comb += [
            store.i_stream.valid.eq(1),
            store.i_stream.payload.key.eq(lfsr[:KEY_BITS]),
            store.i_stream.payload.payload.eq(lfsr[KEY_BITS : KEY_BITS + PAYLOAD_WIDTH]),
            store.o_stream.ready.eq(lfsr[60]),
        ]
        with m.If(store.o_stream.valid & store.o_stream.ready):
            m.d.sync += folded.eq(folded ^ store.o_stream.payload.result)
        m.d.comb += platform.request("led", 0).o.eq(folded.xor() ^ store.drops.xor())
        return m


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tuples", type=int, default=3000, help="tuples a point (after warm-up)")
    ap.add_argument("--warmup", type=int, default=500, help="tuples not counted, first")
    ap.add_argument(
        "--lines", type=int, default=None, help="the cache's lines (default: the store's)"
    )
    ap.add_argument("--queue", type=int, default=QUEUE, help="tuples waiting for their lines")
    ap.add_argument("--depth", type=int, default=BANK_QUEUE, help="the controller's bank queues")
    ap.add_argument(
        "--keys",
        default="1000,10000,100000,1000000",
        help="distinct keys of each point, comma-separated",
    )
    ap.add_argument("--kinds", default="uniform,zipf", help="key draws, comma-separated")
    ap.add_argument("--build", action="store_true", help="only Yosys/nextpnr on the LFE5U-25F")
    args = ap.parse_args()
    mhz = ENGINE_SDRAM.clk_freq / 1e6
    if args.build:
        print(f"the store alone on the LFE5U-25F, nextpnr constrained to {mhz:g} MHz:")
        print(build(mhz, _Top()))
        return
    print(
        f"SDRAM store, 2^{KEY_BITS} entries direct, {measured_store(lines=args.lines).lines} "
        f"cache lines, queue "
        f"{args.queue}, bank queues {args.depth}, {mhz:.0f} MHz; {args.tuples} tuples a point "
        f"after {args.warmup}"
    )
    print(
        f"{'keys':>9} {'keys drawn':>10} {'tuples/clock':>12} {'M tuples/s':>10} {'ACT/tuple':>9}"
    )
    for distinct in (int(k) for k in args.keys.split(",")):
        for kind in args.kinds.split(","):
            keys = keys_for(kind, distinct, args.warmup + args.tuples, seed=distinct)
            start = time.time()
            controller = {"queue_depth": args.depth}  # (a reorder buffer for them all full)
            r = run(keys, args.warmup, lines=args.lines, queue=args.queue, controller=controller)
            rate = r["per_clock"] * ENGINE_SDRAM.clk_freq
            print(
                f"{distinct:>9,} {kind:>10} {r['per_clock']:>12.3f} {rate / 1e6:>10.2f} "
                f"{r['activates']:>9.2f}   ({time.time() - start:.0f} s)",
                flush=True,
            )


if __name__ == "__main__":
    main()
