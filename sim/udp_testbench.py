"""cocotb test of the UDP board top (:class:`nfacep.hdl.eth.top.UdpTop`): the whole
board as Verilog, its GMII pins driven by cocotbext-eth at 1 Gb/s (``nfacep sim --link udp``).

The runner (:mod:`nfacep.sim.udp`) writes the Ethernet frames to send (``frames.bin``, without
preamble and FCS) and their index in ``config.json``; this test

1. resets the board over the wire (a RESET packet) and takes the STATUS that answers it;
2. sends every frame back to back with the minimum inter-frame gap (GmiiSource), except that a
   PARAMS packet waits, as the host does, until STATUS shows the engine took the tuple of the
   switch before it;
3. asks for STATUS until the engine took every tuple and the board is idle;
4. writes what came back (``udp_results.json``): every frame the board sent, with the time its
   first byte went on the wire, and when each frame it received started and ended (and the
   requests' bytes: the runner's capture holds them).

It judges nothing: the runner decodes the records, the counters and the times. Whatever goes
wrong (no answer, a hang) is written to ``failure.json`` as the engine testbenches do.
"""

from __future__ import annotations

import json
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.queue import Queue
from cocotb.triggers import ClockCycles, Timer, with_timeout
from cocotb.utils import get_time_from_sim_steps

from nfacep.links.udp import protocol as udp
from nfacep.links.udp.protocol import PacketType
from nfacep.sim.testbench import load_config, run_and_report

#: GMII at 1000 Mb/s: a byte every 8 ns.
BYTE_NS = 8
#: The engine's (and transmit) clock: 125 MHz, as on the board (a PLL from 25 MHz).
CLOCK_NS = 8
#: Where the receive clock's edges fall between the engine clock's (the two are independent
#: on the board; here they share the frequency, not the phase).
RX_PHASE_NS = 3
RESET_CYCLES = 10
#: STATUS requests a wait may send before it gives up.
MAX_ASKS = 200


class UdpBoardTB:
    def __init__(self, dut, config: dict):
        self.dut = dut
        self.config = config
        self.folder = Path(config["folder"])
        self.frames = (self.folder / config["frames"]).read_bytes()
        self.index = config["index"]
        self.results: dict = {"sent": [], "received": [], "statuses": []}
        self.statuses: Queue = Queue()
        self.source = None
        self.sink = None
        self.checker = None  #: (the runner compares the records)

    def frame(self, at: int) -> bytes:
        offset, length = self.index[at][:2]
        return self.frames[offset : offset + length]

    async def run(self) -> None:
        from cocotbext.eth import GmiiFrame, GmiiSink, GmiiSource

        dut = self.dut
        cocotb.start_soon(Clock(dut.clk, CLOCK_NS, unit="ns").start())
        # the engine's own clock (the board's PLL gives it at the frequency the build chose)
        cocotb.start_soon(Clock(dut.engine_clk, self.config["engine_ps"], unit="ps").start())
        await Timer(RX_PHASE_NS, unit="ns")
        cocotb.start_soon(Clock(dut.rx_clk, BYTE_NS, unit="ns").start())
        self.source = GmiiSource(dut.rxd, dut.rx_er, dut.rx_dv, dut.rx_clk)  # ifg 12 bytes
        self.source.queue_occupancy_limit_frames = 8  # (memory: the frames wait in the file)
        self.sink = GmiiSink(dut.txd, dut.tx_er, dut.tx_en, dut.clk)
        dut.rst.value = 1
        await ClockCycles(dut.clk, RESET_CYCLES)
        dut.rst.value = 0
        await ClockCycles(dut.clk, RESET_CYCLES)
        cocotb.start_soon(self._receive())
        sent = self.results["sent"]

        def done(tag: int, data: bytes):
            def record(frame):  # (cocotbext-eth calls it with the frame it put on the wire)
                times = [tag, _ns(frame.sim_time_start), _ns(frame.sim_time_end)]
                sent.append(times if tag >= 0 else [*times, data.hex()])

            return record

        async def send(data: bytes, tag: int = -1) -> None:
            """Queue a frame (``tag``: its index in the run's frames; -1 for a request, whose
            bytes are kept too)."""
            await self.source.send(GmiiFrame.from_payload(data, tx_complete=done(tag, data)))

        self.send = send
        first = await self.ask(PacketType.RESET, lambda s: s["tuples"] == 0 and s["next_seq"] == 0)
        self.results["reset"] = first
        if self.config.get("settle_ns"):  # (the store's clearing; the SDRAM chip's power-up)
            await Timer(round(self.config["settle_ns"]), unit="ns")
        for at in range(len(self.index)):
            wait = self.index[at][2]
            if wait is not None:
                await self.ask(PacketType.STATUS_REQ, lambda s, w=wait: s["tuples"] > w)
            await send(self.frame(at), at)
        await self.source.wait()
        n = self.config["n"]
        # the last records wait up to the flush time for company, then the quiet time
        spacing = self.config["flush"] + self.config["quiet"] + 64
        # (or, when the board refused packets, until it is idle: the runner says what it lost)
        refused = [c for c in udp.FRAME_CLASSES if c != "accepted"]
        final = await self.ask(
            PacketType.STATUS_REQ,
            lambda s: s["flags"] & 1 and (s["tuples"] == n % 2**32 or any(s[c] for c in refused)),
            spacing=spacing,
        )
        self.results["final"] = final
        await ClockCycles(dut.clk, 64)
        if hasattr(dut, "sdram_errors"):  # the chip's model beside the board top
            self.results["sdram"] = {
                "sdram_errors": int(dut.sdram_errors.value),
                "sdram_error_cycle": int(dut.sdram_error_cycle.value),
            }

    async def ask(self, ptype: int, want, spacing: int = 256) -> dict:
        """Send ``ptype`` until a STATUS that ``want`` accepts comes back; that STATUS."""
        frame = bytes.fromhex(self.config["requests"][str(ptype)])
        for _ in range(MAX_ASKS):
            await self.source.wait()
            await self.send(frame)
            status = await with_timeout(self.statuses.get(), 1000 * spacing * CLOCK_NS, "ns")
            if want(status):
                return status
            await ClockCycles(self.dut.clk, spacing)
        raise AssertionError(f"no STATUS as expected after {MAX_ASKS} requests; the last: {status}")

    async def _receive(self) -> None:
        """Every frame the board sends: its bytes and when its first byte went out; STATUS
        packets also to :attr:`statuses`."""
        from nfacep.links.protocol import decode_fields, fields_size

        size = fields_size(udp.STATUS_FIELDS)
        received = self.results["received"]
        while True:
            frame = await self.sink.recv()
            data = bytes(frame.get_payload(strip_fcs=False))
            error = bool(frame.error and any(frame.error))
            received.append([_ns(frame.sim_time_start), data.hex(), error])
            try:
                parsed = udp.parse_frame(data[:-4])
                head = udp.decode_header(parsed["payload"])
            except (ValueError, KeyError):
                continue
            if head["type"] == PacketType.STATUS:
                body = parsed["payload"][udp.HEADER_BYTES :]
                status = {
                    **decode_fields(udp.STATUS_FIELDS, body[:size]),
                    "seq": head["seq"],
                    "engine_id": head["engine_id"],
                    "values": int.from_bytes(body[size:], "little"),
                }
                self.results["statuses"].append(status)
                self.statuses.put_nowait(status)

    def write_results(self) -> None:
        path = self.folder / self.config["results"]
        path.write_text(json.dumps(self.results), encoding="utf-8")


def _ns(steps: int) -> float:
    return get_time_from_sim_steps(steps, "ns")


@cocotb.test()
async def udp_board(dut) -> None:
    """Send the run's frames to the board at line rate and collect what it sends back."""
    config = load_config()
    await run_and_report(UdpBoardTB(dut, config), config)
