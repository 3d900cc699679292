"""cocotb test of the batch harness (:mod:`nfacep.sim.harness`): Python once per batch.

Takes the same ``config.json`` as the per-cycle testbench (:mod:`nfacep.sim.testbench`) plus
``"depth"`` (the harness's batch memory) and ``"n"`` (the tuples), and leaves the same
outputs (``records.hex``, ``stats.json``, ``failure.json``), so the runner reads either alike.
Per batch of at most ``depth`` tuples, read from the tuples file as it goes (never the whole
file at once), it writes ``batch.hex``, pulses ``load``, sets ``count``, pulses ``go`` and
waits for ``done`` (or the timeout). The harness writes each record to ``records.hex`` as the
engine emits it. Only with a model to compare with (``"expected"``) does the test decode them,
at the end, and check them in order against the model's with the per-cycle testbench's
checker (``"checked"`` in ``stats.json``); otherwise the runner decodes them, a chunk at a
time.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import cocotb
from cocotb.triggers import ClockCycles, First, RisingEdge, Timer

from nfacep.sim.harness import counter_ports, drain_cycles
from nfacep.sim.records import RECORDS_HEX, check_hex, read_records
from nfacep.sim.testbench import CLOCK_PERIOD_NS, InOrderChecker, load_config, run_and_report
from nfacep.wire import RecordFormat

RESET_CYCLES = 4
BATCH_FILE = "batch.hex"


class BatchTB:
    """Clock, reset and the batch loop around the harness."""

    def __init__(self, dut, config: dict):
        self.dut = dut
        self.config = config
        self.folder = Path(config["folder"])
        side = config["sidecar"]
        self.layout = RecordFormat.from_description(side["record"]["fields"])
        self.n = int(config["n"])
        self.checker = None  #: with a model only
        if config.get("expected"):
            self.checker = InOrderChecker(read_records(self.folder / config["expected"]), self.n)
        self.depth = int(config["depth"])
        self.counter_names = list(counter_ports(side))
        self.drain = drain_cycles(side)
        self.timeout_cycles = config.get("timeout_cycles")

    def value(self, name: str) -> int | None:
        value = self.dut[name].value
        return value.to_unsigned() if value.is_resolvable else None

    async def run(self) -> None:
        dut = self.dut
        dut.load.value = 0
        dut.go.value = 0
        dut.count.value = 0
        dut.rst.value = 1
        await ClockCycles(dut.clk, RESET_CYCLES)
        dut.rst.value = 0
        with open(self.folder / self.config["tuples"], encoding="ascii") as lines:
            await self._batches(lines)
        await RisingEdge(dut.clk)
        if self.checker is None:
            return  # the records stay in records.hex, for the runner
        try:
            check_hex(self.folder / RECORDS_HEX, self.layout, self.checker)
        except ValueError as exc:
            raise AssertionError(str(exc)) from None

    async def _batches(self, lines) -> None:
        """Stream the tuple file's lines through the engine, ``depth`` at a time."""
        dut = self.dut
        start = 0
        while batch := [line for line in itertools.islice(lines, self.depth) if line.strip()]:
            with open(self.folder / BATCH_FILE, "w", encoding="ascii") as f:
                f.writelines(batch)
            await self._pulse("load")
            dut.count.value = len(batch)
            await self._pulse("go")
            # at most ~1/3 tuple per cycle with random traffic: far more is a stuck engine
            limit = self.timeout_cycles or (64 * len(batch) + 20 * self.drain + 10_000)
            done = RisingEdge(dut.done)
            fired = await First(done, Timer(limit * CLOCK_PERIOD_NS, unit="ns"))
            if fired is not done:
                raise AssertionError(
                    f"timeout: no completion after {limit} cycles of the batch of tuples "
                    f"{start} to {start + len(batch) - 1}; the harness sent "
                    f"{self.value('sent')} tuples and "
                    f"took {self.value('taken')} records; the engine's counters are "
                    f"{self.counters()}"
                )
            if self.config.get("progress"):  # one line per batch: the tuples done so far
                with open(self.folder / self.config["progress"], "a", encoding="ascii") as f:
                    f.write(f"{start + len(batch)}\n")
            start += len(batch)

    async def _pulse(self, name: str) -> None:
        self.dut[name].value = 1
        await RisingEdge(self.dut.clk)
        self.dut[name].value = 0
        await RisingEdge(self.dut.clk)

    def counters(self) -> dict[str, int | None]:
        return {name: self.value(name) for name in self.counter_names}

    def write_results(self) -> None:
        first, last_in, last_out = (self.value(n) for n in ("first_in", "last_in", "last_out"))
        sent = self.value("sent") or 0
        stats = {
            "cycles": max(last_in or 0, last_out or 0),
            "simulated_cycles": self.value("cycle"),
            "first_input_cycle": first if sent else None,
            "last_input_cycle": last_in if sent else None,
            "last_output_cycle": last_out if self.value("taken") else None,
            "sent": sent,
            "records": self.value("taken"),
            "counters": self.counters(),
            "checked": self.checker is not None,
        }
        with open(self.folder / self.config["stats"], "w", encoding="utf-8") as f:
            json.dump(stats, f, indent=2)


@cocotb.test()
async def engine_matches_in_batches(dut) -> None:
    """Stream every tuple through the engine in batches; with a model, check the records in
    order."""
    config = load_config()
    await run_and_report(BatchTB(dut, config), config)
