"""cocotb testbench of the generated engine (``nfacep_engine``, docs/formats.md: its ports).

The structure is cocotb's matrix_multiplier example: a :class:`TB` owns a
:class:`StreamDriver` that puts packed tuples on ``i_stream`` (with seeded random gaps in
``valid``), a :class:`StreamMonitor` that takes match records from ``o_stream`` (with seeded
random low ``ready``, the backpressure), and an :class:`InOrderChecker` that compares each
record with the model's (the reference matcher's) as it arrives, when the model is given.

This module runs inside the simulator. :class:`nfacep.sim.Simulation` writes its inputs to a
run folder and names the folder's ``config.json`` in the environment variable
``NFACEP_SIM_CONFIG``::

    {"sidecar": {...engine.json...}, "tuples": "tuples.hex", "expected": "expected.txt" | null,
     "results": "records.hex", "stats": "stats.json", "failure": "failure.json",
     "seed": 0, "traffic": "random" | "full", "timeout_cycles": null | int,
     "drain_cycles": null | int}

``tuples.hex`` holds one packed tuple per line (hexadecimal); ``expected.txt`` one record per
line, ``seq partition matches dropped`` in decimal (``matches`` the query bit mask);
``records.hex`` the records taken, one hexadecimal word a line, as the batch harness writes
them. The test writes the records it took, ``stats.json`` (cycles, counters)
and, when it fails, ``failure.json``: ``{"kind": "mismatch" | "error", "message": …}``
(``mismatch``: the engine ran to the end but its records differ from the model's), so the
runner can report it without parsing cocotb's log. Records are decoded with the sidecar's
record layout (:class:`nfacep.wire.RecordFormat`).
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge

from nfacep.sim.harness import counter_ports, drain_cycles
from nfacep.sim.records import CONFIG_ENV, InOrderChecker, read_records, write_hex
from nfacep.wire import RecordFormat

CLOCK_PERIOD_NS = 10


@dataclass
class Traffic:
    """How the environment behaves: seeded random gaps and stalls, or always ready."""

    gap_prob: float = 0.3  #: probability that idle cycles precede a tuple
    max_gap: int = 4  #: at most this many idle cycles
    ready_prob: float = 0.7  #: probability that ``o_stream.ready`` is high in a cycle
    stall_prob: float = 0.01  #: probability that a long stall (``ready`` low) starts
    max_stall: int = 40  #: at most this many cycles of stall

    @classmethod
    def named(cls, name: str) -> Traffic:
        if name == "full":
            return cls(gap_prob=0.0, ready_prob=1.0, stall_prob=0.0)
        if name == "random":
            return cls()
        raise ValueError(f"unknown traffic {name!r} (random or full)")


class StreamDriver:
    """Puts words on a valid/ready stream, one transfer each, in order.

    ``valid`` never waits for ``ready`` (amaranth.lib.stream rules): once a word is offered it
    stays until taken. Between words ``valid`` may go low for a few random cycles. The driver
    is stepped once per rising edge by :class:`TB`: :meth:`sample` sees whether a transfer
    happened at that edge (``valid`` and ``ready`` were both high), :meth:`drive` sets the
    stream for the next edge.
    """

    def __init__(self, valid, ready, payload, rng: random.Random, traffic: Traffic, gate=None):
        self.valid, self.ready, self.payload = valid, ready, payload
        self.rng, self.traffic = rng, traffic
        #: ``gate(i)``: whether word ``i`` may be offered now (None: always)
        self.gate = gate
        self.words: list[int] = []
        self.sent = 0  #: words transferred
        self.first_cycle: int | None = None  #: cycle of the first transfer
        self.last_cycle: int | None = None  #: cycle of the last transfer
        self._offering = False  #: valid is high with words[sent]
        self._gap = 0  #: idle cycles still to insert before the next word

    @property
    def done(self) -> bool:
        return self.sent == len(self.words)

    def start(self, words: list[int]) -> None:
        self.words = words
        self.valid.value = 0

    def sample(self, cycle: int) -> None:
        if self._offering and self.ready.value:
            self._offering = False
            if self.first_cycle is None:
                self.first_cycle = cycle
            self.last_cycle = cycle
            self.sent += 1

    def drive(self) -> None:
        if self._offering:
            return
        if self._gap:
            self._gap -= 1
            if self._gap:
                return
        elif (
            self.sent < len(self.words)
            and self.traffic.gap_prob
            and self.rng.random() < self.traffic.gap_prob
        ):
            self._gap = self.rng.randint(1, self.traffic.max_gap)
            self.valid.value = 0
            return
        if self.sent < len(self.words) and (self.gate is None or self.gate(self.sent)):
            self.payload.value = self.words[self.sent]
            self.valid.value = 1
            self._offering = True
        else:
            self.valid.value = 0


def _hex_words(path: Path) -> list[int]:
    """The words of a file of one hexadecimal word a line."""
    with open(path, encoding="ascii") as f:
        return [int(line, 16) for line in f if line.strip()]


def _full_driver(dut, port: str, words: list[int], seed: str) -> StreamDriver:
    """A driver sending ``words`` on the stream ``i_PORT`` as fast as the engine takes them."""
    driver = StreamDriver(
        dut[f"i_{port}__valid"],
        dut[f"i_{port}__ready"],
        dut[f"i_{port}__payload"],
        random.Random(seed),
        Traffic.named("full"),
    )
    driver.start(words)
    return driver


class StreamMonitor:
    """Takes words from a valid/ready stream, driving ``ready`` with random backpressure.

    Stepped once per rising edge like :class:`StreamDriver`; calls ``callback(word)`` for
    every transfer. Counts ``quiet``: consecutive cycles in which ``ready`` was high and
    ``valid`` low (the producer had room and nothing to send); a cycle with ``valid`` high
    resets it.
    """

    def __init__(self, valid, ready, payload, rng: random.Random, traffic: Traffic, callback):
        self.valid, self.ready, self.payload = valid, ready, payload
        self.rng, self.traffic, self.callback = rng, traffic, callback
        self.received = 0  #: words transferred
        self.quiet = 0
        self.last_cycle: int | None = None  #: cycle of the last transfer
        self._always = traffic.ready_prob >= 1.0 and not traffic.stall_prob
        self._ready = False  #: what ready was at the edge just past
        self._stall = 0

    def start(self) -> None:
        self._ready = self._always
        self.ready.value = int(self._ready)

    def sample(self, cycle: int) -> None:
        if self.valid.value:
            self.quiet = 0
            if self._ready:
                self.received += 1
                self.last_cycle = cycle
                self.callback(self.payload.value.to_unsigned())
        elif self._ready:
            self.quiet += 1

    def drive(self) -> None:
        if self._always:
            return
        t, rng = self.traffic, self.rng
        if self._stall:
            self._stall -= 1
            new = False
        elif t.stall_prob and rng.random() < t.stall_prob:
            self._stall = rng.randint(1, t.max_stall) - 1
            new = False
        else:
            new = rng.random() < t.ready_prob
        if new != self._ready:
            self.ready.value = int(new)
            self._ready = new


class TB:
    """The testbench: clock, reset, driver, monitor and checker around one engine."""

    RESET_CYCLES = 4
    POLL_CYCLES = 32

    def __init__(self, dut, config: dict):
        self.dut = dut
        self.config = config
        side = config["sidecar"]
        self.side = side
        self.clk = dut[side.get("clock", "clk")]
        self.rst = dut[side.get("reset", "rst")]
        folder = Path(config["folder"])
        self.folder = folder
        with open(folder / config["tuples"], encoding="ascii") as f:
            self.words = [int(line, 16) for line in f if line.strip()]
        expected = None
        if config.get("expected"):
            expected = read_records(folder / config["expected"])
        self.checker = InOrderChecker(expected, len(self.words))
        self.layout = RecordFormat.from_description(side["record"]["fields"])
        traffic = Traffic.named(config.get("traffic", "random"))
        seed = int(config.get("seed", 0))
        gate = self._side_streams(seed)
        self.driver = StreamDriver(
            dut["i_stream__valid"],
            dut["i_stream__ready"],
            dut["i_stream__payload"],
            random.Random(f"driver-{seed}"),
            traffic,
            gate,
        )
        self.monitor = StreamMonitor(
            dut["o_stream__valid"],
            dut["o_stream__ready"],
            dut["o_stream__payload"],
            random.Random(f"monitor-{seed}"),
            traffic,
            lambda word: self.checker(self.layout.decode(word)),
        )
        self.cycle = 0  #: rising edges since the end of reset
        n = len(self.words)
        self.counter_names = list(counter_ports(side))
        # the longest a record can take after its tuple
        self.drain_cycles = config.get("drain_cycles") or drain_cycles(side)
        # the slowest the environment lets the engine go is about ready_prob * 1/2 tuple per
        # cycle; allow far more, so a timeout means a stuck engine, never a slow one
        self.timeout_cycles = config.get("timeout_cycles") or (
            64 * n + 20 * self.drain_cycles + 10_000
        )

    def _side_streams(self, seed: int):
        """The drivers of the parameter switches (each written before the tuple it applies
        to) and of a programmable engine's configuration image (whole before the first
        tuple), if the engine has those ports; returns the tuple driver's gate (None: none)."""
        dut, side, config, folder = self.dut, self.side, self.config, self.folder
        self.switches = None
        gate = None
        if "i_params__valid" in side["ports"]:
            words = _hex_words(folder / config["switches"]) if config.get("switch_count") else []
            width = side["runtime_parameters"]["width"]
            starts = [w >> width for w in words]
            self.switches = switches = _full_driver(dut, "params", words, f"switches-{seed}")

            def gate(i: int) -> bool:  # every switch up to tuple i is taken
                return switches.sent == len(starts) or starts[switches.sent] > i

        # a programmable engine's configuration image, whole before the first tuple
        self.image = None
        if "i_config__valid" in side["ports"]:
            body = _hex_words(folder / config["image"])
            self.image = image = _full_driver(dut, "config", body, f"image-{seed}")
            switched = gate

            def gate(i: int) -> bool:
                return image.done and (switched is None or switched(i))

        return gate

    def counter(self, name: str) -> int | None:
        try:
            value = self.dut[name].value
        except (AttributeError, KeyError):
            return None
        return value.to_unsigned() if value.is_resolvable else None

    def counters(self) -> dict[str, int | None]:
        """The engine's counter outputs (every output port besides the two streams)."""
        return {name: self.counter(name) for name in self.counter_names}

    async def reset(self) -> None:
        d = self.dut
        d["i_stream__valid"].value = 0
        d["i_stream__payload"].value = 0
        d["o_stream__ready"].value = 0
        if self.switches is not None:
            d["i_params__valid"].value = 0
            d["i_params__payload"].value = 0
        if self.image is not None:
            d["i_config__valid"].value = 0
            d["i_config__payload"].value = 0
        self.rst.value = 1
        await ClockCycles(self.clk, self.RESET_CYCLES)
        self.rst.value = 0

    def _state(self) -> str:
        c = self.counters()
        return (
            f"the driver sent {self.driver.sent} of {len(self.words)} tuples, the engine's "
            f"counters are {c}, the monitor took {self.monitor.received} "
            f"records (last at cycle {self.monitor.last_cycle}), o_stream quiet for "
            f"{self.monitor.quiet} ready cycles"
        )

    async def run(self) -> None:
        """Reset, then step the driver and the monitor at every rising edge until every tuple
        is in, the engine counted them all and ``o_stream`` stayed quiet for longer than any
        record can take (``drain_cycles``); fail after ``timeout_cycles``."""
        cocotb.start_soon(Clock(self.clk, CLOCK_PERIOD_NS, unit="ns").start())
        await self.reset()
        drv, mon = self.driver, self.monitor
        drv.start(self.words)
        mon.start()
        if self.switches is not None:
            self.switches.drive()
        if self.image is not None:
            self.image.drive()
        drv.drive()
        edge = RisingEdge(self.clk)
        n = len(self.words)
        poll, timeout = self.POLL_CYCLES, self.timeout_cycles
        while True:
            await edge
            self.cycle += 1
            # both sample before either drives: i_stream.ready may depend on o_stream.ready
            drv.sample(self.cycle)
            mon.sample(self.cycle)
            if self.switches is not None:
                self.switches.sample(self.cycle)
                self.switches.drive()
            if self.image is not None:
                self.image.sample(self.cycle)
                self.image.drive()
            drv.drive()
            mon.drive()
            if self.cycle % poll:
                continue
            if drv.done and mon.quiet >= self.drain_cycles:
                tuples = self.counter("tuples")
                if tuples is None or tuples >= n % (1 << 32):
                    break
            if self.cycle > timeout:
                raise AssertionError(
                    f"timeout: no completion after {self.cycle} cycles; {self._state()}"
                )
        self.checker.finish()

    def write_results(self) -> None:
        write_hex(self.folder / self.config["results"], self.layout, self.checker.records)
        drv, mon = self.driver, self.monitor
        last = max(drv.last_cycle or 0, mon.last_cycle or 0)
        stats = {
            "cycles": last,  # from reset to the last transfer on either stream
            "simulated_cycles": self.cycle,
            "first_input_cycle": drv.first_cycle,
            "last_input_cycle": drv.last_cycle,
            "last_output_cycle": mon.last_cycle,
            "sent": drv.sent,
            "records": mon.received,
            "counters": self.counters(),
            "checked": True,  # (every record, as it came)
        }
        with open(self.folder / self.config["stats"], "w", encoding="utf-8") as f:
            json.dump(stats, f, indent=2)


def load_config() -> dict:
    path = os.environ.get(CONFIG_ENV)
    if not path:
        raise RuntimeError(
            f"{CONFIG_ENV} is not set: run this testbench through nfacep.sim.Simulation"
        )
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    config["folder"] = str(Path(path).parent)
    return config


async def run_and_report(tb, config: dict) -> None:
    """Run a testbench (``tb.run()``, then ``tb.write_results()`` whatever happened) and
    write ``failure.json`` when it failed: ``error`` when it did not run to the end,
    ``mismatch`` when ``tb.checker`` found records that differ from the model's."""
    failure = Path(config["folder"]) / config["failure"]
    try:
        await tb.run()
    except BaseException as err:
        _write_failure(failure, "error", str(err))
        raise
    finally:
        tb.write_results()
    if tb.checker is not None and tb.checker.error_count:
        message = f"{tb.checker.error_count} record(s) differ:\n{tb.checker.report()}"
        _write_failure(failure, "mismatch", message)
        raise AssertionError(message)


@cocotb.test()
async def engine_matches(dut) -> None:
    """Stream every tuple through the engine and take every record; check them in order."""
    config = load_config()
    await run_and_report(TB(dut, config), config)


def _write_failure(path: Path, kind: str, message: str) -> None:
    path.write_text(json.dumps({"kind": kind, "message": message}), encoding="utf-8")
