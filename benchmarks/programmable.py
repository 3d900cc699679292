#!/usr/bin/env python3
"""The programmable engine's size before synthesis, against the fixed engines of the bundled
queries that fit it: flip-flops of the elaborated design (Amaranth's RTLIL, ``$dff`` cells,
as ``nfacep check --board`` counts them; the table store's memories are not flip-flops),
configuration bits and image bytes, for a few capacities (S states, A atoms, Q queries).

Both engines use the block-RAM table store with the same entries and ways, so the difference
is the query logic: the fixed engine's NFA flip-flops and predicate decoder against the
programmable engine's configuration registers. No synthesis runs: LUTs and Fmax need
``nfacep build`` (not wired for the programmable engine yet).

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
from nfacep.params import EngineParams
from nfacep.settings import ParamValues

QUERIES = os.path.join(os.path.dirname(__file__), "..", "queries")
#: the bundled queries the programmable engine holds (the others use WITHIN), with values
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


if __name__ == "__main__":
    main()
