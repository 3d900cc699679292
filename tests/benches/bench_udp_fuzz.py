"""The cocotb bench of the UDP fuzz (tests/links/udp/test_udp_fuzz.py makes the bursts, runs
this module in Icarus Verilog through cocotb's runner and checks what it wrote): the bursts on
GMII at line rate and the board's replies, read back as the file :data:`CONFIG_ENV` names says."""

from __future__ import annotations

import json
import logging
import os
import pathlib

from bench_udp_link import PREAMBLE, _status

from nfacep.links.udp import protocol as udp
from nfacep.links.udp.protocol import PacketType

#: The environment variable naming the fuzz's JSON file.
CONFIG_ENV = "NFACEP_UDP_FUZZ"

try:
    import cocotb
    from cocotb.triggers import ClockCycles
except ImportError:  # pragma: no cover
    cocotb = None

if cocotb is not None:

    @cocotb.test()
    async def udp_fuzz_bench(dut):
        from cocotb.triggers import with_timeout
        from cocotb.utils import get_sim_time
        from cocotbext.eth import GmiiFrame, GmiiSink, GmiiSource

        config = json.loads(pathlib.Path(os.environ[CONFIG_ENV]).read_text())
        source = GmiiSource(dut.rxd, dut.rx_er, dut.rx_dv, dut.rx_clk)  # ifg: 12 bytes
        sink = GmiiSink(dut.txd, dut.tx_er, dut.tx_en, dut.clk)
        for model in (source, sink):
            model.log.setLevel(logging.WARNING)  # (a line per frame otherwise)
        dut.rst.value = 1
        await ClockCycles(dut.clk, 10)
        dut.rst.value = 0
        await ClockCycles(dut.clk, 10)
        frames, bad = [], []

        async def collect():
            while True:
                frame = await sink.recv()
                data = bytes(frame.data)
                # (GmiiSink keeps the preamble from its second byte: 6 of 7 0x55 bytes)
                if (
                    not frame.check_fcs()
                    or (frame.error and any(frame.error))
                    or data[:7] != PREAMBLE[1:]
                ):
                    bad.append(data.hex())
                frames.append(bytes(frame.get_payload()))

        cocotb.start_soon(collect())
        await source.send(GmiiFrame(bytes.fromhex(config["reset"])))  # the session
        await source.wait()
        await ClockCycles(dut.clk, 500)
        assert len(frames) == 1  # RESET's STATUS
        total = 0
        start = get_sim_time("ns")
        for wire_hex, error in config["frames"]:
            wire = bytes.fromhex(wire_hex)
            total += len(wire) + 12
            source.send_nowait(GmiiFrame(wire, None if error is None else [0] * error + [1, 0]))
        await with_timeout(source.wait(), 8 * total + 100_000, "ns")
        fuzz_us = (get_sim_time("ns") - start) / 1000
        assert fuzz_us * 1000 <= 8 * total + 200  # back to back
        requests = 0

        async def status():
            """Ask for STATUS until the board is idle with ``tuples`` taken (bounded)."""
            nonlocal requests
            for _ in range(20):
                await ClockCycles(dut.clk, 2000)
                mark = len(frames)
                await source.send(GmiiFrame(bytes.fromhex(config["status_req"])))
                requests += 1
                for _ in range(100):
                    await ClockCycles(dut.clk, 20)
                    answers = [
                        _status(udp.parse_frame(f)["payload"])
                        for f in frames[mark:]
                        if udp.parse_frame(f)["kind"] == "udp"
                        and udp.decode_header(udp.parse_frame(f)["payload"])["type"]
                        == PacketType.STATUS
                    ]
                    if answers:
                        break
                else:
                    raise AssertionError("no STATUS")
                st = answers[0]
                if st["flags"] & 1 and st["tuples"] >= tuples:
                    return st
            raise AssertionError(f"not idle, or tuples missing: {st}")

        tuples = config["tuples"]
        after = await with_timeout(status(), 2, "ms")
        requests_after_fuzz = requests
        await source.send(GmiiFrame(bytes.fromhex(config["last"])))
        tuples += config["last_k"]
        final = await with_timeout(status(), 2, "ms")
        pathlib.Path(config["results"]).write_text(
            json.dumps(
                {
                    "frames": [f.hex() for f in frames],
                    "bad_from_board": bad,
                    "status_requests": requests,
                    "requests_after_fuzz": requests_after_fuzz,
                    "after_fuzz": after,
                    "final": final,
                    "fuzz_us": fuzz_us,
                }
            )
        )
