#!/usr/bin/env python3
"""How long loading a query into a programmable board over UDP takes (issue 28, item 3).

1. **On the board, in cycles** (Amaranth's simulator, the UDP board top
   :class:`nfacep.hdl.eth.top.UdpTop` with :class:`nfacep.hdl.programmable.ProgrammableEngine`,
   the receive clock the engine's 125 MHz one): after RESET, the load of marathon's image (in
   force from tuple 0) goes in LOAD packets of at most ``chunk`` bytes of it, back to back on
   GMII; counted from the last byte of the last LOAD frame on ``rxd`` (its FCS) to the cycle
   the engine's ``image`` output names the new image (the query in force).
2. **On the host, wall time** of ``nfacep load`` against the software board (``serve
   --engine programmable``'s model on 127.0.0.1, in a thread of this process): the whole
   command in a new process (Python's start-up included), and the loader alone
   (:func:`nfacep.links.udp.load.load_image`, the same packets: a STATUS request, the chunks,
   STATUS until the image is in force), in this process.

    python benchmarks/udp_load.py             # both
    python benchmarks/udp_load.py --host      # the host's wall time only
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from nfacep import compile_file
from nfacep.image import Capacity, EngineShape, image, load
from nfacep.links.udp import protocol as udp
from nfacep.params import EngineParams, default_engine

ROOT = os.path.join(os.path.dirname(__file__), "..")
QUERY = os.path.join(ROOT, "queries", "marathon.sql")
BOARD = udp.Endpoint.parse("02:00:5e:00:00:02", "10.0.0.2", 5000)
HOST = udp.Endpoint.parse("02:00:5e:00:00:01", "10.0.0.1", 40001)
#: (states, atoms, queries, LOAD chunk bytes)
CYCLE_CASES = ((16, 16, 4, 1024), (16, 16, 4, 64), (32, 32, 4, 1024), (32, 32, 4, 128))


def cycles(states: int, atoms: int, queries: int, chunk: int) -> dict:
    from amaranth.hdl import ClockSignal, Elaboratable, Module
    from amaranth.sim import Simulator

    from nfacep.hdl.eth.top import UdpTop
    from nfacep.hdl.programmable import ProgrammableEngine

    nfa = compile_file(QUERY)
    params = EngineParams(
        partitions=64,
        store="pipeline",
        engine="programmable",
        states=states,
        atoms=atoms,
        queries=queries,
    )
    program = nfa.program
    shape = EngineShape(program.schema, program.partition_fields, Capacity.of(params))
    img = image(nfa, shape)
    data = load(img, 0)
    engine = ProgrammableEngine(shape, params)
    top = UdpTop(engine, mac=BOARD.mac, ip=BOARD.ip, port=BOARD.port)
    named = int.from_bytes(bytes.fromhex(img.fingerprint), "little")

    class Bench(Elaboratable):
        def elaborate(self, platform):
            m = Module()
            m.submodules.top = top
            m.d.comb += top.rx_clk.eq(ClockSignal("sync"))
            return m

    frames = [udp.packet(udp.PacketType.RESET, session=1)]
    frames += [
        udp.packet(udp.PacketType.LOAD, body, engine_id=top.engine_id, session=2)
        for body in udp.load_chunks(data, chunk)
    ]
    got = {}

    async def drive(ctx):
        await ctx.tick().repeat(20)
        for k, payload in enumerate(frames):
            frame = udp.udp_frame(HOST, BOARD, payload)
            for byte in b"\x55" * 7 + b"\xd5" + frame + udp.ethernet_fcs(frame):
                ctx.set(top.rxd, byte)
                ctx.set(top.rx_dv, 1)
                await ctx.tick()
            ctx.set(top.rx_dv, 0)
            await ctx.tick().repeat(12 if k else 400)  # (the minimum gap; RESET settles)
        for _ in range(20000):
            if ctx.get(engine.image) == named:
                break
            await ctx.tick()
        got["refused"] = ctx.get(engine.refused)
        await ctx.tick().repeat(4)  # (the sampler sees the last edges)

    async def clock(ctx):
        cycle = 0
        async for _, _, dv, image_now in ctx.tick().sample(top.rx_dv, engine.image):
            cycle += 1
            if dv:
                got["last_byte"] = cycle
            if image_now == named and "in_force" not in got:
                got["in_force"] = cycle

    sim = Simulator(Bench())
    sim.add_clock(8e-9)
    sim.add_testbench(drive)
    sim.add_testbench(clock, background=True)
    sim.run()
    if "in_force" not in got:
        raise AssertionError(f"the image never came in force (refused {got['refused']})")
    return {
        "S": states,
        "A": atoms,
        "Q": queries,
        "load_bytes": len(data),
        "chunk": chunk,
        "packets": len(frames) - 1,
        "cycles": got["in_force"] - got["last_byte"],
    }


def host_wall(repeats: int) -> list[dict]:
    from nfacep.links.udp.load import load_image
    from nfacep.links.udp.model import UdpBoardModel, serve

    nfa = compile_file(QUERY)
    rows = []
    for s, a, q in ((16, 16, 4), (32, 32, 4), (64, 64, 8)):
        params = dataclasses.replace(
            default_engine(nfa), engine="programmable", states=s, atoms=a, queries=q
        )
        model = UdpBoardModel(nfa, params)
        stop = threading.Event()
        thread, (host, port) = serve(model, stop=stop)
        try:
            inner = []
            for _ in range(repeats):
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
                    sock.connect((host, port))
                    t0 = time.perf_counter()
                    loaded = load_image(sock, f"{host}:{port}", 5.0, nfa, always=True)
                    inner.append(time.perf_counter() - t0)
            outer = []
            for _ in range(max(3, repeats // 5)):
                t0 = time.perf_counter()
                subprocess.run(
                    [
                        os.path.join(os.path.dirname(sys.executable), "nfacep"),
                        "load",
                        QUERY,
                        "--udp",
                        f"{host}:{port}",
                    ],
                    check=True,
                    capture_output=True,
                )
                outer.append(time.perf_counter() - t0)
        finally:
            stop.set()
            thread.join(timeout=2)
        rows.append(
            {
                "S": s,
                "A": a,
                "Q": q,
                "load_bytes": len(load(loaded.image, 0)),
                "packets": loaded.packets,
                "loader_ms": 1e3 * statistics.median(inner),
                "command_s": statistics.median(outer),
            }
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", action="store_true", help="the host's wall time only")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    if not args.host:
        print("| S | A | Q | load bytes | chunk | LOAD packets | cycles, last byte to in force |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for case in CYCLE_CASES:
            r = cycles(*case)
            print(
                f"| {r['S']} | {r['A']} | {r['Q']} | {r['load_bytes']} | {r['chunk']} | "
                f"{r['packets']} | {r['cycles']} ({r['cycles'] * 8} ns at 125 MHz) |",
                flush=True,
            )
        print()
    print(
        "| S | A | Q | load bytes | packets (STATUS requests included) | loader, median ms "
        "| `nfacep load`, median s |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in host_wall(args.repeats):
        print(
            f"| {r['S']} | {r['A']} | {r['Q']} | {r['load_bytes']} | {r['packets']} | "
            f"{r['loader_ms']:.2f} | {r['command_s']:.2f} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
