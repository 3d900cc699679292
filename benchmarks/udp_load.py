#!/usr/bin/env python3
"""How long loading a query into a programmable board over UDP takes (issue 28, item 3).

1. **On the board, in cycles** (Amaranth's simulator, the UDP board top
   :class:`nfacep.hdl.eth.top.UdpTop` with :class:`nfacep.hdl.programmable.ProgrammableEngine`,
   the receive clock 125 MHz, the engine on it or on a clock of its own): after RESET, the load
   of marathon's image (in force from tuple 0) goes either as one LOAD packet (as ``nfacep
   load`` sent it before 2026-11-28) or as ``nfacep load`` sends it now: the bulk back to back
   on GMII, then, once the board's answer to the bulk's last chunk left the board (the host
   taking no time), the last ``LOAD_TAIL`` bytes; counted from the last byte of the last LOAD
   frame on ``rxd`` (its FCS) to the cycle the engine's ``image`` output names the new image
   (the query in force).
2. **On the host, wall time** of ``nfacep load`` against the software board (``serve
   --engine programmable``'s model on 127.0.0.1, in a process of its own): the whole
   command in a new process (Python's start-up included), and the loader alone
   (:func:`nfacep.links.udp.load.load_image`, the same packets: a STATUS request, the chunks,
   STATUS until the image is in force), in this process, with the software board's share of
   it (its time answering the load's packets) and the rest (the host's and the loopback's).

    python benchmarks/udp_load.py             # both
    python benchmarks/udp_load.py --host      # the host's wall time only
    python benchmarks/udp_load.py --board     # the board's cycles only
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
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
#: (states, atoms, queries, the engine's clock in MHz: None, the line's 125 MHz clock)
CYCLE_CASES = ((16, 16, 4, None), (32, 32, 4, None), (16, 16, 4, 25.0), (32, 32, 4, 25.0))
#: how the load is sent: as one LOAD (before 2026-11-28), or as ``nfacep load`` sends it now,
#: the bulk, then the last LOAD_TAIL bytes once the bulk is answered: the host sending the tail
#: the moment the answer has left the board, or once the engine took the bulk in (a host whose
#: turnaround is longer than the ``wait`` column)
CUTTINGS = ("one LOAD", "bulk + tail at once", "bulk + tail, bulk in hand")


def _board(states: int, atoms: int, queries: int, engine_mhz: float | None):
    """The UDP board top with the programmable engine for marathon's stream (its own clock
    domain ``eng`` when ``engine_mhz``), in a bench whose ``sync`` clock is the receive clock;
    marathon's load (in force from tuple 0) and its image's number."""
    from amaranth.hdl import ClockDomain, ClockSignal, Elaboratable, Module

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
    engine = ProgrammableEngine(shape, params)
    top = UdpTop(
        engine, mac=BOARD.mac, ip=BOARD.ip, port=BOARD.port, engine_clock=engine_mhz is not None
    )

    class Bench(Elaboratable):
        def elaborate(self, platform):
            m = Module()
            m.submodules.top = top
            m.d.comb += top.rx_clk.eq(ClockSignal("sync"))
            if engine_mhz is not None:
                m.domains.eng = ClockDomain("eng")
                m.d.comb += top.engine_clk.eq(ClockSignal("eng"))
            return m

    named = int.from_bytes(bytes.fromhex(img.fingerprint), "little")
    return Bench(), top, engine, load(img, 0), named


async def _send(ctx, top, payload: bytes, gap: int) -> None:
    """One frame of ``payload`` from the host on GMII, then ``gap`` idle cycles."""
    frame = udp.udp_frame(HOST, BOARD, payload)
    for byte in b"\x55" * 7 + b"\xd5" + frame + udp.ethernet_fcs(frame):
        ctx.set(top.rxd, byte)
        ctx.set(top.rx_dv, 1)
        await ctx.tick()
    ctx.set(top.rx_dv, 0)
    await ctx.tick().repeat(gap)


def _watch(top, engine, named: int, got: dict):
    """A background testbench that counts the cycles into ``got``: the last cycle a byte came
    in (``last_byte``), the frames the board sent (``sent``), the first cycle ``named`` is in
    force (``in_force``)."""

    async def clock(ctx):
        cycle, sending = 0, False
        async for _, _, dv, tx, image_now in ctx.tick().sample(top.rx_dv, top.tx_en, engine.image):
            cycle += 1
            got["cycle"] = cycle
            if dv:
                got["last_byte"] = cycle
            if sending and not tx:
                got["sent"] += 1
            sending = bool(tx)
            if image_now == named and "in_force" not in got:
                got["in_force"] = cycle

    return clock


def cycles(states: int, atoms: int, queries: int, engine_mhz: float | None, cutting: str) -> dict:
    from amaranth.sim import Simulator

    bench, top, engine, data, named = _board(states, atoms, queries, engine_mhz)

    def frame(body):
        return udp.packet(udp.PacketType.LOAD, body, engine_id=top.engine_id, session=2)

    tail_at = len(data) - udp.LOAD_TAIL if cutting.startswith("bulk") else 0
    bulk = [frame(body) for body in udp.load_chunks(data, end=tail_at)] if tail_at else []
    tail = [frame(body) for body in udp.load_chunks(data, start=tail_at)]
    got = {"sent": 0}

    async def drive(ctx):
        await ctx.tick().repeat(20)
        await _send(ctx, top, udp.packet(udp.PacketType.RESET, session=1), 400)  # (RESET settles)
        for payload in bulk:
            await _send(ctx, top, payload, 12)  # (the minimum gap)
        # the tail leaves the host once the bulk's answer is in (no time for the host itself)
        for _ in range(20000):
            if got["sent"] >= 1 + len(bulk):  # (RESET's answer, then one per LOAD)
                break
            await ctx.tick()
        answered = got["cycle"]
        while cutting.endswith("in hand") and got["taken"] < tail_at:
            await ctx.tick()
        got["wait"] = got["cycle"] - answered
        for payload in tail:
            await _send(ctx, top, payload, 12)
        for _ in range(40000):
            if ctx.get(engine.image) == named:
                break
            await ctx.tick()
        got["refused"] = ctx.get(engine.refused)
        await ctx.tick().repeat(4)  # (the sampler sees the last edges)

    clock = _watch(top, engine, named, got)

    async def taken(ctx):  # the load's bytes the engine took, on its clock
        got["taken"] = 0
        port = engine.i_config
        async for _, _, valid, ready in ctx.tick("eng" if engine_mhz else "sync").sample(
            port.valid, port.ready
        ):
            got["taken"] += valid and ready

    sim = Simulator(bench)
    sim.add_clock(8e-9)
    if engine_mhz is not None:
        sim.add_clock(1e-6 / engine_mhz, domain="eng")
    sim.add_testbench(drive)
    sim.add_testbench(clock, background=True)
    sim.add_testbench(taken, background=True)
    sim.run()
    if "in_force" not in got:
        raise AssertionError(f"the image never came in force (refused {got['refused']})")
    return {
        "S": states,
        "A": atoms,
        "Q": queries,
        "engine_mhz": engine_mhz or 125.0,
        "cutting": cutting,
        "load_bytes": len(data),
        "packets": len(bulk) + len(tail),
        "last_chunk": len(data) - tail_at if tail_at else min(len(data), udp.LOAD_CHUNK),
        "cycles": got["in_force"] - got["last_byte"],
        "wait": got["wait"],
    }


def _timed(model) -> tuple[list[tuple[bool, float, float]], list[tuple[float, float]]]:
    """``model.feed`` timed (perf_counter seconds): for each LOAD with bytes, whether it ends
    the load, when it came in and when its answer was made, in the first list returned; for
    every packet, when it came in and when its answers were made, in the second."""
    chunks: list[tuple[bool, float, float]] = []
    feeds: list[tuple[float, float]] = []
    feed = model.feed

    def timed(data, sender):
        came = time.perf_counter()
        out = feed(data, sender)
        done = time.perf_counter()
        feeds.append((came, done))
        body = data[udp.HEADER_BYTES :]
        if data[1] == udp.PacketType.LOAD and len(body) > udp.LOAD_HEADER_BYTES:
            chunks.append((bool(body[4] & udp.LOAD_LAST), came, done))
        return out

    model.feed = timed
    return chunks, feeds


def _board_process(params, conn) -> None:
    """A process of its own: the software board of ``params`` for marathon's stream on
    127.0.0.1, its LOADs timed (:func:`_timed`); sends its address on ``conn``, serves until
    told to stop, then sends the chunks' times."""
    from nfacep.links.udp.model import UdpBoardModel, serve

    model = UdpBoardModel(compile_file(QUERY), params)
    timed = _timed(model)
    stop = threading.Event()
    thread, address = serve(model, stop=stop, spin=True)  # (as `nfacep serve`'s)
    conn.send(address)
    conn.recv()
    stop.set()
    thread.join(timeout=2)
    conn.send(timed)


def _other_query(folder: str) -> str:
    """Marathon's stream with another query (so that each load is a switch)."""
    with open(QUERY, encoding="utf-8") as f:
        text = f.read()
    other = text.replace("(checkpoint = 'Queens')", "(checkpoint = 'Queens' AND speed > 1.0)")
    assert other != text
    path = os.path.join(folder, "other.sql")
    with open(path, "w", encoding="utf-8") as f:
        f.write(other)
    return path


def host_wall(repeats: int) -> list[dict]:
    import multiprocessing
    import tempfile

    from nfacep.links.udp.load import load_image

    nfa = compile_file(QUERY)
    rows = []
    folder = tempfile.mkdtemp(prefix="udp_load_")
    queries = (nfa, compile_file(_other_query(folder)))
    fork = multiprocessing.get_context("fork")
    for s, a, q in ((16, 16, 4), (32, 32, 4), (64, 64, 8)):
        params = dataclasses.replace(
            default_engine(nfa), engine="programmable", states=s, atoms=a, queries=q
        )
        conn, child = fork.Pipe()
        board = fork.Process(target=_board_process, args=(params, child), daemon=True)
        board.start()
        host, port = conn.recv()
        try:
            spans, packets = [], []
            for k in range(repeats):  # the two queries in turn: each load a switch
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
                    sock.connect((host, port))
                    t0 = time.perf_counter()
                    loaded = load_image(sock, f"{host}:{port}", 5.0, queries[k % 2])
                    spans.append((t0, time.perf_counter()))
                    packets.append(loaded.packets)
            made = []  # the image alone, as the loader makes it
            shape = EngineShape(
                nfa.program.schema, nfa.program.partition_fields, Capacity.of(params)
            )
            for _ in range(repeats):
                t0 = time.perf_counter()
                image(nfa, shape)
                made.append(time.perf_counter() - t0)
            outer = []
            for k in range(max(3, repeats // 5)):
                t0 = time.perf_counter()
                subprocess.run(
                    [
                        os.path.join(os.path.dirname(sys.executable), "nfacep"),
                        "load",
                        (QUERY, os.path.join(folder, "other.sql"))[k % 2],
                        "--udp",
                        f"{host}:{port}",
                    ],
                    check=True,
                    capture_output=True,
                )
                outer.append(time.perf_counter() - t0)
        finally:
            conn.send("stop")
            chunks, feeds = conn.recv()
            board.join(timeout=5)
        inner = [t1 - t0 for t0, t1 in spans]
        # the software board's share of each load: its time in ``feed`` for the load's packets
        # (on a board, 0.24 µs from the last byte to the image in force: the cycles above);
        # the rest is the host's (Python, the image, the sockets) and the kernel's loopback
        board_s = [sum(d - c for c, d in feeds if t0 <= c <= t1) for t0, t1 in spans]
        host_s = [t - b for t, b in zip(inner, board_s, strict=True)]
        # the host's turnaround: from the answer to the bulk's last chunk leaving the board to
        # the tail's arrival (one clock for both processes: CLOCK_MONOTONIC)
        turns = [
            1e6 * (tail[1] - bulk[2])
            for bulk, tail in itertools.pairwise(chunks)
            if not bulk[0] and tail[0]
        ]
        rows.append(
            {
                "S": s,
                "A": a,
                "Q": q,
                "load_bytes": len(load(loaded.image, 0)),
                "packets": statistics.median(packets),
                "loader_ms": 1e3 * statistics.median(inner),
                "loader_min_ms": 1e3 * min(inner),
                "image_ms": 1e3 * statistics.median(made),
                "board_ms": 1e3 * statistics.median(board_s),
                "host_ms": 1e3 * statistics.median(host_s),
                "host_min_ms": 1e3 * min(host_s),
                "turn_us": statistics.median(turns),
                "turn_min_us": min(turns),
                "command_s": statistics.median(outer),
            }
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", action="store_true", help="the host's wall time only")
    parser.add_argument("--board", action="store_true", help="the board's cycles only")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    if not args.host:
        print(
            "| S | A | Q | engine clock | load bytes | LOAD packets | last one's bytes "
            "| tail sent, µs after the answer left | cycles of 8 ns, last byte to in force | µs |"
        )
        print("| ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |")
        for case in CYCLE_CASES:
            for cutting in CUTTINGS:
                r = cycles(*case, cutting)
                print(
                    f"| {r['S']} | {r['A']} | {r['Q']} | {r['engine_mhz']:g} MHz | "
                    f"{r['load_bytes']} | {r['packets']} ({cutting}) | {r['last_chunk']} | "
                    f"{r['wait'] * 8e-3:.3f} | {r['cycles']} | {r['cycles'] * 8e-3:.3f} |",
                    flush=True,
                )
        print()
    if args.board:
        return 0
    print(
        "| S | A | Q | load bytes | packets (STATUS requests included) | loader, median ms "
        "(least) | of which the software board, median ms | the rest: host and loopback, "
        "median ms (least) | the image alone, median ms | host's turnaround, median µs (least) "
        "| `nfacep load`, median s |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in host_wall(args.repeats):
        print(
            f"| {r['S']} | {r['A']} | {r['Q']} | {r['load_bytes']} | {r['packets']} | "
            f"{r['loader_ms']:.2f} ({r['loader_min_ms']:.2f}) | {r['board_ms']:.2f} | "
            f"{r['host_ms']:.2f} ({r['host_min_ms']:.2f}) | {r['image_ms']:.2f} | "
            f"{r['turn_us']:.0f} ({r['turn_min_us']:.0f}) | {r['command_s']:.2f} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
