"""The cocotb bench of the UART board top (tests/links/uart/test_uart_link.py builds the top's
Verilog, runs this module in Icarus Verilog through cocotb's runner and checks what it wrote):
the host's side of the UART, driven by the scenario in the file :data:`CONFIG_ENV` names."""

from __future__ import annotations

import json
import os
import pathlib

from nfacep.links.protocol import decode_fields
from nfacep.links.uart import protocol
from nfacep.links.uart.protocol import FrameType, encode

#: The environment variable naming the scenario's JSON file.
CONFIG_ENV = "NFACEP_UART_BENCH"

# The cocotb bench (runs inside the simulator; not a pytest test).
try:
    import cocotb
    from cocotb.triggers import ClockCycles, Event, FallingEdge, with_timeout
except ImportError:  # pragma: no cover
    cocotb = None

if cocotb is not None:

    class UartLinkTB:
        """The host's side of the UART: a bit-banged transmitter and receiver on the DUT's
        ``rx``/``tx`` at ``div`` clock cycles a bit, the frames received, and the flow control
        of a scenario's steps (the board's room, the tuples sent and consumed)."""

        def __init__(self, dut, scenario: dict):
            self.dut = dut
            self.scenario = scenario
            self.div = scenario["divisor"]
            self.values_bytes = scenario.get("values_bytes", 0)
            self.reader = protocol.FrameReader(
                [FrameType.RECORD, FrameType.STATUS, FrameType.ACK], max_payload=64
            )
            self.frames: list = []
            self.arrived = Event()
            self.statuses: list[dict] = []  # those the steps ask to keep
            self.room: int | None = None
            self.sent_tuples = 0
            self.consumed = 0

        async def reset(self) -> None:
            from cocotb.clock import Clock

            dut = self.dut
            dut.rx.value = 1
            cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
            dut.rst.value = 1
            await ClockCycles(dut.clk, 5)
            dut.rst.value = 0

        async def receive(self) -> None:
            dut, div = self.dut, self.div
            while True:
                await FallingEdge(dut.tx)
                await ClockCycles(dut.clk, div // 2)
                byte = 0
                for i in range(8):
                    await ClockCycles(dut.clk, div)
                    byte |= int(dut.tx.value) << i
                await ClockCycles(dut.clk, div)
                assert int(dut.tx.value) == 1, "stop bit"
                got = self.reader.feed(bytes([byte]))
                if got:
                    self.frames.extend(got)
                    self.arrived.set()

        async def send(self, raw: bytes) -> None:
            for byte in raw:
                for bit in [0, *((byte >> i) & 1 for i in range(8)), 1]:
                    self.dut.rx.value = bit
                    await ClockCycles(self.dut.clk, self.div)

        async def expect(self, kind):
            while True:
                for i, f in enumerate(self.frames):
                    if f.type == kind:
                        del self.frames[i]
                        return f
                self.arrived.clear()
                await with_timeout(self.arrived.wait(), 200_000, "ns")

        async def status(self) -> dict:
            await self.send(encode(FrameType.STATUS_REQ))
            return self.decode_status(await self.expect(FrameType.STATUS))

        def decode_status(self, frame) -> dict:
            return protocol.decode_status(frame.payload, self.values_bytes)

        async def step(self, step: dict) -> None:
            """One step of the scenario: wait for the engine, or send a frame and take the
            answer it asks for."""
            if "tuples" in step and self.room is not None:
                while self.sent_tuples + step["tuples"] - self.consumed > self.room:
                    self.consumed = (await self.status())["tuples"]
            if "wait_tuples" in step:  # until the engine took that many tuples (bounded)
                for _ in range(200):
                    st = await self.status()
                    if st["tuples"] >= step["wait_tuples"]:
                        break
                    await ClockCycles(self.dut.clk, 200)
                self.statuses.append(st)
                return
            await self.send(bytes.fromhex(step["send"]))
            if step.get("quiet"):
                await ClockCycles(self.dut.clk, step["quiet"])
            if step.get("expect") == "status":
                st = self.decode_status(await self.expect(FrameType.STATUS))
                self.statuses.append(st)
                self.room = st["capacity"] // st["tuple_bytes"]
                self.frames[:] = []  # anything before the answer to RESET is stale
            elif step.get("expect") == "ack":
                ack = decode_fields(protocol.ACK_FIELDS, (await self.expect(FrameType.ACK)).payload)
                self.consumed = ack["tuples"]
                self.sent_tuples += step.get("tuples", 0)

        async def finish(self) -> dict:
            """The board's status once it took every tuple and finished (bounded: a broken
            board must fail the test, not hang it)."""
            for _ in range(100):
                await ClockCycles(self.dut.clk, 200)
                st = await self.status()
                if st["tuples"] == self.scenario["n"] and st["flags"] & 1:
                    break
            return st

    @cocotb.test()
    async def uart_link_bench(dut):
        scenario = json.loads(pathlib.Path(os.environ[CONFIG_ENV]).read_text())
        tb = UartLinkTB(dut, scenario)
        await tb.reset()
        cocotb.start_soon(tb.receive())
        for step in scenario["steps"]:
            await tb.step(step)
        st = await tb.finish()
        records = [f.payload.hex() for f in tb.frames if f.type == FrameType.RECORD]
        results = {
            "records": records,
            "status": st,
            "statuses": tb.statuses,
            "bad_frames_from_board": sum(tb.reader.errors.values()),
        }
        if hasattr(dut, "sdram_errors"):  # --store sdram: the chip's model beside the top
            results["sdram_errors"] = int(dut.sdram_errors.value)
            results["sdram_error_cycle"] = int(dut.sdram_error_cycle.value)
        pathlib.Path(scenario["results"]).write_text(json.dumps(results))
