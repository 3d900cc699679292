"""The cocotb benches of the UDP link (tests/links/udp/test_udp_link.py builds the Verilog, runs
one of them in Icarus Verilog through cocotb's runner and checks what it wrote): the receive
path (``udp_rx_bench``), the whole board top (``udp_top_bench``) and its runtime parameters
(``udp_params_bench``), each driven by the scenario in the file :data:`CONFIG_ENV` names."""

from __future__ import annotations

import json
import os
import pathlib

from nfacep.links.udp import protocol as udp
from nfacep.links.udp.protocol import PacketType

#: The environment variable naming the scenario's JSON file.
CONFIG_ENV = "NFACEP_UDP_BENCH"
#: The Ethernet preamble and start delimiter that precede every frame on GMII.
PREAMBLE = b"\x55" * 7 + b"\xd5"


def _status(payload: bytes, values_bytes: int = 0) -> dict:
    """A STATUS packet's fields, its header's ``seq`` and ``engine_id``, and the values in
    force (``values``) after the fields."""
    from nfacep.links.protocol import decode_fields, fields_size

    header = udp.decode_header(payload)
    assert header["type"] == PacketType.STATUS
    body = payload[udp.HEADER_BYTES :]
    size = fields_size(udp.STATUS_FIELDS)
    assert len(body) == size + values_bytes
    return {
        **decode_fields(udp.STATUS_FIELDS, body[:size]),
        "seq": header["seq"],
        "engine_id": header["engine_id"],
        "values": int.from_bytes(body[size:], "little"),
    }


try:
    import cocotb
    from cocotb.triggers import ClockCycles, RisingEdge
except ImportError:  # pragma: no cover
    cocotb = None

if cocotb is not None:

    @cocotb.test()
    async def udp_rx_bench(dut):
        from cocotb.clock import Clock
        from cocotb.utils import get_sim_time
        from cocotbext.eth import GmiiFrame, GmiiSource

        config = json.loads(pathlib.Path(os.environ[CONFIG_ENV]).read_text())
        steps = config["steps"]
        cocotb.start_soon(Clock(dut.clk, 7, unit="ns").start())
        cocotb.start_soon(Clock(dut.rx_clk, 8, unit="ns").start())  # 1000 Mb/s GMII
        dut.o_stream__ready.value = 0
        dut.i_stream__valid.value = 0
        source = GmiiSource(dut.rxd, dut.rx_er, dut.rx_dv, dut.rx_clk)  # ifg: 12 bytes
        dut.rst.value = 1
        await ClockCycles(dut.clk, 10)
        dut.rst.value = 0
        await ClockCycles(dut.rx_clk, 10)
        tuples = []
        state = {"ready": 1}

        async def take():
            while True:
                await RisingEdge(dut.clk)
                if int(dut.o_stream__valid.value) and int(dut.o_stream__ready.value):
                    tuples.append(int(dut.o_stream__payload.value))
                dut.o_stream__ready.value = state["ready"]

        cocotb.start_soon(take())
        pulses = {"activity": 0, "trouble": 0}

        async def leds():  # the pulses the board's LED shows
            while True:
                await RisingEdge(dut.clk)
                for name in pulses:
                    pulses[name] += int(getattr(dut, name).value)

        cocotb.start_soon(leds())
        fast_start = None
        for i, step in enumerate(steps):
            if step.get("stall") or step.get("resume"):
                await source.wait()
                await ClockCycles(dut.rx_clk, 40)  # the frame before it is through
                state["ready"] = 0 if step.get("stall") else 1
                if step.get("resume"):
                    await ClockCycles(dut.clk, 20)
            if i == len(steps) - 4:
                await source.wait()
                fast_start = get_sim_time("ns")
            error = None
            wire = bytes.fromhex(step["wire"])
            if "error" in step:
                error = [0] * len(wire)
                error[8 + step["error"]] = 1
            await source.send(GmiiFrame(wire, error))
            if step.get("stall"):
                await source.wait()
                await ClockCycles(dut.rx_clk, 40)
                state["ready"] = 0
        await source.wait()
        fast_ns = get_sim_time("ns") - fast_start
        await ClockCycles(dut.clk, 3000)
        counters = {
            name.split("__", 1)[1]: int(getattr(dut, name).value)
            for name in dir(dut)
            if name.startswith("counters__")
        }
        pathlib.Path(config["results"]).write_text(
            json.dumps(
                {
                    "tuples": tuples,
                    "counters": counters,
                    "pulses": pulses,
                    "line_rate_frames_per_s": 4 / (fast_ns * 1e-9),
                }
            )
        )

    @cocotb.test()
    async def udp_top_bench(dut):
        from cocotb.clock import Clock
        from cocotb.triggers import with_timeout
        from cocotbext.eth import GmiiFrame, GmiiSink, GmiiSource

        config = json.loads(pathlib.Path(os.environ[CONFIG_ENV]).read_text())
        cocotb.start_soon(Clock(dut.clk, 8, unit="ns").start())  # the transmit clock
        cocotb.start_soon(Clock(dut.rx_clk, 8, unit="ns").start())
        source = GmiiSource(dut.rxd, dut.rx_er, dut.rx_dv, dut.rx_clk)
        sink = GmiiSink(dut.txd, dut.tx_er, dut.tx_en, dut.clk)
        dut.rst.value = 1
        await ClockCycles(dut.clk, 10)
        dut.rst.value = 0
        await ClockCycles(dut.clk, 10)
        frames, bad_fcs, tx_er = [], 0, False

        async def receive(kind=None):
            nonlocal bad_fcs, tx_er
            while True:
                frame = await with_timeout(sink.recv(), 200, "us")
                bad_fcs += not frame.check_fcs()
                tx_er = tx_er or bool(frame.error and any(frame.error))
                payload = bytes(frame.get_payload())
                frames.append(payload.hex())
                parsed = udp.parse_frame(payload)
                if kind is None or (
                    parsed["kind"] == "udp" and udp.decode_header(parsed["payload"])["type"] == kind
                ):
                    return parsed

        async def send(hexed):
            await source.send(GmiiFrame(bytes.fromhex(hexed)))

        await send(config["reset"])
        await receive(PacketType.STATUS)
        await send(config["arp"])
        assert (await receive())["kind"] == "arp"
        for f in config["frames"]:
            await send(f)
        status_requests = 0
        for _ in range(50):  # (bounded: a broken board fails the test, not hangs it)
            await source.wait()
            await ClockCycles(dut.clk, 500)
            await send(config["status_req"])
            status_requests += 1
            status = _status((await receive(PacketType.STATUS))["payload"])
            if status["tuples"] == config["n"] and status["flags"] & 1:
                break
        pathlib.Path(config["results"]).write_text(
            json.dumps(
                {
                    "frames": frames,
                    "bad_fcs_from_board": bad_fcs,
                    "tx_er": tx_er,
                    "status_requests": status_requests,
                }
            )
        )

    @cocotb.test()
    async def udp_params_bench(dut):
        from cocotb.clock import Clock
        from cocotb.triggers import with_timeout
        from cocotbext.eth import GmiiFrame, GmiiSink, GmiiSource

        config = json.loads(pathlib.Path(os.environ[CONFIG_ENV]).read_text())
        vb = config["values_bytes"]
        cocotb.start_soon(Clock(dut.clk, 8, unit="ns").start())
        cocotb.start_soon(Clock(dut.rx_clk, 8, unit="ns").start())
        source = GmiiSource(dut.rxd, dut.rx_er, dut.rx_dv, dut.rx_clk)
        sink = GmiiSink(dut.txd, dut.tx_er, dut.tx_en, dut.clk)
        dut.rst.value = 1
        await ClockCycles(dut.clk, 10)
        dut.rst.value = 0
        await ClockCycles(dut.clk, 10)
        frames, bad_fcs, statuses, status_requests = [], 0, [], 0

        async def status():
            nonlocal bad_fcs, status_requests
            await source.send(GmiiFrame(bytes.fromhex(config["status_req"])))
            status_requests += 1
            while True:
                frame = await with_timeout(sink.recv(), 200, "us")
                bad_fcs += not frame.check_fcs()
                payload = bytes(frame.get_payload())
                frames.append(payload.hex())
                parsed = udp.parse_frame(payload)
                if (
                    parsed["kind"] == "udp"
                    and udp.decode_header(parsed["payload"])["type"] == PacketType.STATUS
                ):
                    return _status(parsed["payload"], vb)

        await source.send(GmiiFrame(bytes.fromhex(config["reset"])))
        frame = await with_timeout(sink.recv(), 200, "us")
        statuses.append(_status(udp.parse_frame(bytes(frame.get_payload()))["payload"], vb))
        for step in config["steps"]:
            if "wait_tuples" in step:
                for _ in range(50):  # (bounded)
                    await source.wait()
                    await ClockCycles(dut.clk, 200)
                    st = await status()
                    if st["tuples"] >= step["wait_tuples"]:
                        break
                statuses.append(st)
                continue
            await source.send(GmiiFrame(bytes.fromhex(step["send"])))
        for _ in range(50):
            await source.wait()
            await ClockCycles(dut.clk, 500)
            st = await status()
            if st["tuples"] == config["n"] and st["flags"] & 1:
                break
        statuses.append(st)
        pathlib.Path(config["results"]).write_text(
            json.dumps(
                {
                    "frames": frames,
                    "bad_fcs_from_board": bad_fcs,
                    "statuses": statuses,
                    "status_requests": status_requests,
                }
            )
        )
