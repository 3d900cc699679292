#!/usr/bin/env python3
"""How long a runtime parameter switch takes over the UART link (issue 14, item 2): clock
cycles from the end of a PARAMS frame on the board's ``rx`` pin to the switch being in the
engine, in Amaranth's simulator; and over the UDP link (``--udp``): from the end of a PARAMS
packet's Ethernet frame on GMII (``rx_dv`` falls) to the switch in the engine, the receive
clock and the engine's one 125 MHz clock here.

The design is the UART board top (:class:`nfacep.hdl.uart.link.UartTop`) with a small query
with two runtime parameters (``v > :lim``, ``hot = :hot``: 9 bits, 2 bytes of values, so a
PARAMS frame is 7 + 1 + 6 + 2 = 16 bytes). The bench drives ``rx`` with RESET, then a PARAMS
frame for tuple 0, then a TUPLES frame with one tuple, and counts, from the end of the stop bit
of each frame's last byte:

* ``written``: the cycle the switch is taken into the engine's shadow copy (``i_params``
  transfers; from then on the engine's ``i_params.ready`` is low until its tuple comes);
* ``ack``: the start bit of the ACK frame on ``tx``;
* ``in_force``: after the TUPLES frame that holds the switch's tuple, the cycle
  ``param_values`` shows the new values (the engine took the tuple, decoded with them).

The cycles depend on the UART's bit time (``divisor`` clock cycles a bit): the receiver hands
a byte over in the middle of its stop bit, the deframer then runs the CRC over it one bit a
cycle; with a long bit that is before the stop bit ends (a negative count). From the host's
first bit, add the frame's time on the line, ``10 * divisor`` cycles a byte.

    python benchmarks/link_switch.py                 # divisors 4 and 217 (115200 baud, 25 MHz)
    python benchmarks/link_switch.py --divisor 104   # 115200 baud at 12 MHz
    python benchmarks/link_switch.py --udp           # and over UDP
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from amaranth.hdl import ClockSignal, Elaboratable, Module
from amaranth.sim import Simulator

from nfacep import compile_file
from nfacep.hdl.engine import Engine
from nfacep.hdl.uart.link import UartTop
from nfacep.links.protocol import switch_body
from nfacep.links.uart.protocol import FrameType, encode, params_payload
from nfacep.links.udp import protocol as udp
from nfacep.params import EngineParams
from nfacep.settings import ParamValues

QUERY = """CREATE STREAM s (v UINT(8), hot BOOL, k UINT(4));
QUERY over FROM s
PATTERN ( A B )
DEFINE
  A AS (v > :lim)
  B AS (v <= :lim AND hot = :hot);
"""


def _query():
    """The query, the values its engine is built with, and the values a switch writes."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "limits.sql")
        with open(path, "w") as f:
            f.write(QUERY)
        nfa = compile_file(path)
    types = nfa.program.parameters
    return (
        nfa,
        ParamValues.parse(types, ["lim=100", "hot=true"]),
        ParamValues.parse(types, ["lim=7", "hot=false"]),
    )


def measure(divisor: int) -> dict:
    """The cycle counts of one switch with a UART bit of ``divisor`` cycles."""
    nfa, built, new = _query()
    engine = Engine(nfa, EngineParams(), values=built)
    top = UartTop(
        engine, clk_hz=divisor * 1e6, baud=1_000_000, timeout=400 * divisor, led_period=64
    )
    width = new.width()
    switch = encode(FrameType.PARAMS, params_payload(0, 0, new.packed(new.initial), width))
    tuples = encode(FrameType.TUPLES, bytes([1, 0x20, 0x00]))
    log: dict = {}

    async def bits(ctx, raw: bytes, *, whole: bool = True):
        """Drive ``raw`` on ``rx``; without ``whole``, return at the start of the last stop
        bit (the line stays high)."""
        for k, byte in enumerate(raw):
            for j, bit in enumerate([0, *((byte >> i) & 1 for i in range(8)), 1]):
                ctx.set(top.rx, bit)
                if whole or k < len(raw) - 1 or j < 9:
                    await ctx.tick().repeat(divisor)

    async def bench(ctx):
        async def wait_for(condition, limit=200 * divisor):
            """Cycles until ``condition``, minus the stop bit's: from the end of the frame
            (negative: before it ended)."""
            for n in range(limit):
                if condition():
                    return n - divisor
                await ctx.tick()
            raise AssertionError("the switch did not come")

        ctx.set(top.rx, 1)
        await ctx.tick().repeat(20)
        await bits(ctx, encode(FrameType.RESET))
        await ctx.tick().repeat(3000 * divisor)  # STATUS goes out meanwhile
        await bits(ctx, switch, whole=False)
        # the last stop bit started: count from here
        log["written"] = await wait_for(
            lambda: ctx.get(engine.i_params.valid) and ctx.get(engine.i_params.ready)
        )
        await ctx.tick()
        log["ready_low"] = not ctx.get(engine.i_params.ready)
        start = log["written"] + divisor + 1
        log["ack"] = start + await wait_for(lambda: ctx.get(top.tx) == 0)
        await ctx.tick().repeat(200 * divisor)  # the ACK goes out
        before = ctx.get(engine.param_values.as_value())
        await bits(ctx, tuples, whole=False)
        log["in_force"] = await wait_for(lambda: ctx.get(engine.param_values.as_value()) != before)
        log["values"] = ctx.get(engine.param_values.as_value())
        await ctx.tick()
        log["ready_again"] = bool(ctx.get(engine.i_params.ready))

    sim = Simulator(top)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert log["values"] == new.packed(new.initial) and log["ready_low"] and log["ready_again"]
    return {
        "divisor": divisor,
        "params_frame_bytes": len(switch),
        "frame_cycles": 10 * divisor * len(switch),
        "written": log["written"],
        "ack": log["ack"],
        "tuples_frame_bytes": len(tuples),
        "in_force": log["in_force"],
    }


def measure_udp() -> dict:
    """The cycles from the end of a PARAMS packet's frame on GMII to the switch in the
    engine, with the UDP top (:class:`nfacep.hdl.eth.top.UdpTop`)."""
    from nfacep.hdl.eth.top import UdpTop

    nfa, built, new = _query()
    engine = Engine(nfa, EngineParams(), values=built)
    board = udp.DEFAULT_ENDPOINT
    host = udp.Endpoint.parse("02:00:5e:00:00:01", "192.168.1.1", 40001)
    top = UdpTop(engine, mac=board.mac, ip=board.ip, port=board.port)

    class Bench(Elaboratable):  # the receive clock is the engine's
        def elaborate(self, platform):
            m = Module()
            m.submodules.top = top
            m.d.comb += top.rx_clk.eq(ClockSignal("sync"))
            return m

    def wire(payload: bytes) -> bytes:
        frame = udp.udp_frame(host, board, payload)
        return b"\x55" * 7 + b"\xd5" + frame + udp.ethernet_fcs(frame)

    switch = wire(
        udp.packet(
            udp.PacketType.PARAMS,
            switch_body(0, new.packed(new.initial), new.width()),
            engine_id=top.engine_id,
        )
    )
    log: dict = {}

    async def bench(ctx):
        await ctx.tick().repeat(50)
        for raw in (wire(udp.packet(udp.PacketType.RESET)), None, switch):
            if raw is None:
                await ctx.tick().repeat(2000)
                continue
            for byte in raw:
                ctx.set(top.rxd, byte)
                ctx.set(top.rx_dv, 1)
                await ctx.tick()
            ctx.set(top.rx_dv, 0)
        for n in range(1000):  # rx_dv fell at the last edge
            if ctx.get(engine.i_params.valid) and ctx.get(engine.i_params.ready):
                log["written"] = n
                break
            await ctx.tick()

    sim = Simulator(Bench())
    sim.add_clock(8e-9)
    sim.add_testbench(bench)
    sim.run()
    if "written" not in log:
        raise AssertionError("the switch did not come")
    return {"frame_bytes": len(switch), "written": log["written"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--divisor",
        type=int,
        nargs="+",
        default=[4, 217],
        help="clock cycles per UART bit (default: 4, and 217 = 115200 baud at 25 MHz)",
    )
    ap.add_argument("--udp", action="store_true", help="also over the UDP link")
    args = ap.parse_args()
    print(
        "PARAMS switch over the UART link, clock cycles from the end of the frame's last stop bit"
    )
    print(f"{'divisor':>8} {'frame':>7} {'written':>8} {'ACK':>6} {'in force':>9}")
    for d in args.divisor:
        r = measure(d)
        print(
            f"{r['divisor']:>8} {r['frame_cycles']:>7} {r['written']:>8} {r['ack']:>6} "
            f"{r['in_force']:>9}"
        )
    print(
        "frame: the PARAMS frame's own time on the line; written: the switch is in the "
        "engine's shadow copy (i_params taken); ACK: its start bit on tx; in force: from "
        "the end of the TUPLES frame with the switch's tuple to param_values changing"
    )
    if args.udp:
        r = measure_udp()
        print(
            f"UDP: a PARAMS packet's frame of {r['frame_bytes']} bytes on GMII (with "
            f"preamble and FCS); the switch is in the engine {r['written']} cycles after "
            "rx_dv falls (125 MHz, one clock for both domains)"
        )


if __name__ == "__main__":
    main()
