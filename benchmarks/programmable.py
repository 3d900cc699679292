#!/usr/bin/env python3
"""The programmable engine's size before synthesis, against the fixed engines of the bundled
queries that fit it: flip-flops of the elaborated design (Amaranth's RTLIL, ``$dff`` cells,
as ``nfacep check --board`` counts them; the table store's memories are not flip-flops),
configuration bits and image bytes, for a few capacities (S states, A atoms, Q queries).

Both engines use the block-RAM table store with the same entries and ways (the programmable
engine its simple form, without the registered one's forwarding), so the difference is
mostly the query logic: the fixed engine's NFA flip-flops and predicate decoder against the
programmable engine's configuration registers. No synthesis runs: LUTs and Fmax are
``programmable_fmax.py``'s (``nfacep build --engine programmable``). Then the cycles a switch to
another image costs, in Amaranth's simulator (:func:`switch_cycles`).

    python benchmarks/programmable.py
    python benchmarks/programmable.py --partitions 4096 --capacities 16x16x4 32x32x4
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from amaranth.back import rtlil

import nfacep
from boards.resources import count_flipflops
from nfacep.hdl.engine import Engine
from nfacep.hdl.programmable import ProgrammableEngine
from nfacep.image import Capacity, EngineShape, body_size, config_fields, image
from nfacep.io import reader
from nfacep.params import EngineParams
from nfacep.settings import ParamValues

QUERIES = os.path.join(os.path.dirname(__file__), "..", "queries")
#: the bundled queries without WITHIN (programmable_windows.py measures the windows), with values
BUNDLED = {"marathon": [], "vshape": [], "supplychain": ["big=1000"]}


def flipflops(top) -> tuple[int, float]:
    t0 = time.monotonic()
    text = rtlil.convert(top, name="top", emit_src=False)
    return count_flipflops(text), time.monotonic() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=1024)
    parser.add_argument("--ways", type=int, default=4)
    parser.add_argument(
        "--capacities", nargs="+", default=["8x8x2", "16x16x4", "32x32x4", "64x64x8"]
    )
    parser.add_argument(
        "--switch", default="16x16x4", help="the capacity of the switch cost table (SxAxQ)"
    )
    args = parser.parse_args()
    params = EngineParams(partitions=args.partitions, store="table", ways=args.ways)
    print(f"table store, {args.partitions} entries, {args.ways} ways; flip-flops before synthesis")
    print()
    print("| engine | S | A | Q | config bits | image bytes | flip-flops | RTLIL s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    nfas = {}
    for name, texts in BUNDLED.items():
        nfa = nfacep.compile_file(os.path.join(QUERIES, f"{name}.sql"))
        values = ParamValues.parse(nfa.program.parameters, texts) if texts else None
        nfas[name] = (nfa, values)
        ffs, secs = flipflops(Engine(nfa, params, values=values))
        states = len(nfa.states)
        print(f"| fixed {name} | {states} | | {len(nfa.queries)} | | | {ffs:,} | {secs:.1f} |")
    for text in args.capacities:
        s, a, q = (int(x) for x in text.split("x"))
        capacity = Capacity(s, a, q)
        for name, (nfa, values) in nfas.items():
            shape = EngineShape(nfa.program.schema, nfa.program.partition_fields, capacity)
            try:
                size = len(image(nfa, shape, values).to_bytes())
            except nfacep.errors.UsageError:
                size = None  # does not fit: the engine is still measured
            bits = sum(w for _, w in config_fields(shape))
            assert body_size(shape) == (bits + 7) // 8
            ffs, secs = flipflops(ProgrammableEngine(shape, params))
            shown = "does not fit" if size is None else f"{size:,}"
            print(
                f"| programmable ({name}'s stream) | {s} | {a} | {q} | {bits:,} | {shown} "
                f"| {ffs:,} | {secs:.1f} |"
            )
    switches(Capacity(*(int(x) for x in args.switch.split("x"))))


def switch_cycles(nfa, values, params: EngineParams, capacity: Capacity, at: int = 64):
    """Cycles a switch costs in Amaranth's simulator, tuples always offered and records
    always taken: from the last byte of a load to its image in force with nothing in flight
    (the first load), and the stall of the tuple stream at a switch at tuple ``at`` (the
    cycles between tuple ``at - 1`` and tuple ``at`` taken, less the one they take anyway),
    which is the time the tuples already taken need to get through."""
    from amaranth.sim import Simulator

    from nfacep import wire
    from nfacep.image import load, port_words

    program = nfa.program
    shape = EngineShape(program.schema, program.partition_fields, capacity)
    img = image(nfa, shape, values)
    data = reader.read(os.path.join(QUERIES, f"{BUNDLE_OF[id(nfa)]}.csv"), program.schema)
    words = wire.pack(program.schema, data)[: 2 * at]
    dut = ProgrammableEngine(shape, params)
    out = {}

    async def bench(ctx):
        ctx.set(dut.o_stream.ready, 1)
        cycle = 0
        for w in port_words(load(img, 0)):
            ctx.set(dut.i_config.valid, 1)
            ctx.set(dut.i_config.payload.as_value(), w)
            await ctx.tick().until(dut.i_config.ready)
            cycle += 1
        ctx.set(dut.i_config.valid, 0)
        last = cycle
        while not ctx.get(dut.configured):
            await ctx.tick()
            cycle += 1
        out["in_force"] = cycle - last
        # the second load whole before the tuples: it waits (pending) for tuple `at`
        for w in port_words(load(img, at)):
            ctx.set(dut.i_config.valid, 1)
            ctx.set(dut.i_config.payload.as_value(), w)
            await ctx.tick().until(dut.i_config.ready)
        ctx.set(dut.i_config.valid, 0)
        await ctx.tick().repeat(4)
        taken = {}
        i = 0
        ctx.set(dut.i_stream.valid, 1)
        while i < len(words):
            ctx.set(dut.i_stream.payload.as_value(), words[i])
            *_, took = await ctx.tick().sample(dut.i_stream.ready)
            cycle += 1
            if took:
                taken[i] = cycle
                i += 1
        out["stall"] = taken[at] - taken[at - 1] - 1

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return out["in_force"], out["stall"]


def switches(capacity: Capacity) -> None:
    """The switch cost table (:func:`switch_cycles`) for vshape's stream and file."""
    nfa = nfacep.compile_file(os.path.join(QUERIES, "vshape.sql"))
    BUNDLE_OF[id(nfa)] = "vshape"
    c = capacity
    print()
    print(f"switch cost, vshape's image in a {c.states}x{c.atoms}x{c.queries} engine, cycles")
    print()
    print("| store | partitions | last byte to in force (idle) | tuple stall at a switch |")
    print("| --- | ---: | ---: | ---: |")
    for store, partitions in (("table", 64), ("table", 1024), ("pipeline", 16), ("pipeline", 64)):
        params = EngineParams(partitions=partitions, store=store, ways=4)
        idle, stall = switch_cycles(nfa, None, params, capacity)
        print(f"| {store} | {partitions:,} | {idle} | {stall} |")


#: the bundled file each compiled query file is (for its data)
BUNDLE_OF: dict[int, str] = {}


if __name__ == "__main__":
    main()
