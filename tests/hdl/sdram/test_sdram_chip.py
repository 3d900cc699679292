"""The SDRAM model as gateware (nfacep.hdl.sdram.chip), the one every Verilog simulation runs,
against the Python model (nfacep.hdl.sdram.model): tests/hdl/sdram/test_sdram_model.py's
hand-written command sequences, replayed on the gateware in Amaranth's simulator, flag the same
rule at the same edge when they break one, and drive the same read data (and nothing else) when
they do not."""

from __future__ import annotations

import pytest
from amaranth.sim import Simulator
from test_sdram_model import BROKEN, Chip, T

from nfacep.hdl.sdram.chip import RULES, SDRAMChip, chip_verilog, rules_in
from nfacep.hdl.sdram.model import SDRAMTimingError
from nfacep.hdl.sdram.sim import FLOATING
from nfacep.hdl.sdram.timing import COLORLIGHT_5A75B

PINS = ("ras", "cas", "we", "ba", "a", "dq_o", "dq_oe")


class Recorder(Chip):
    """The Python model's ``Chip``, remembering every edge's pins and the first rule broken."""

    def __init__(self, cycles=T):
        super().__init__(cycles)
        self.edges: list[tuple] = []
        self.broken: SDRAMTimingError | None = None

    def _edge(self, ras=0, cas=0, we=0, ba=0, a=0, dq=0, oe=0):
        self.edges.append((ras, cas, we, ba, a, dq, oe))
        if self.broken is None:
            try:
                super()._edge(ras, cas, we, ba, a, dq, oe)
            except SDRAMTimingError as e:
                self.broken = e


def replay(edges, cycles, geometry=COLORLIGHT_5A75B):
    """The gateware chip driven with ``edges``: (errors, error_cycle, {edge: dq_i driven for
    it})."""
    chip = SDRAMChip(geometry, cycles)
    driven: dict[int, int] = {}
    got = {}

    async def bench(ctx):
        for i, edge in enumerate(edges):
            for name, value in zip(PINS, edge, strict=True):
                ctx.set(getattr(chip.pins, name), value)
            ctx.set(chip.pins.cs, 1)
            await ctx.tick()
            driven[i + 1] = ctx.get(chip.pins.dq_i)
        got["errors"], got["cycle"] = ctx.get(chip.errors), ctx.get(chip.error_cycle)

    sim = Simulator(chip)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return got["errors"], got["cycle"], driven


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_each_broken_rule_is_flagged_at_its_edge(name):
    steps, _ = BROKEN[name]
    cycles = T.with_(trc=T.tras + T.trp + 1) if name == "tRC" else T
    c = Recorder(cycles).init()
    steps(c)
    assert c.broken is not None and c.broken.rule == name.split()[0]
    errors, cycle, _ = replay(c.edges, cycles)
    assert c.broken.rule in rules_in(errors)
    assert cycle == c.broken.cycle


def test_legal_sequences_read_the_same_words_and_flag_nothing():
    c = Recorder().init()
    c.act(0, 5)
    c.act(1, 7)
    c.nop(T.trcd - 1)
    c.write(0, 3, 0xDEADBEEF)
    c.write(1, 3, 0x12345678)
    c.read(0, 3)
    c.read(1, 3)
    c.read(1, 4)  # never written: the model's pattern
    c.nop(T.cas_latency + 1)
    c.pre(0, all_banks=True)
    c.nop(T.trp - 1)
    c.refresh()
    c.nop(T.trfc - 1)
    c.act(0, 5)
    c.nop(T.trcd - 1)
    c.read(0, 3)
    c.nop(4)
    assert c.broken is None and len(c.reads) == 4
    errors, _, driven = replay(c.edges, T)
    assert errors == 0
    for edge, value in driven.items():
        assert value == c.reads.get(edge, FLOATING), edge


def test_late_refresh_and_cas_latency_three():
    c = Recorder(T.with_(cas_latency=3))
    c.nop(T.power_up)
    c.pre(0, True)
    c.nop(T.trp)
    c.mode(2 << 4)  # CL 2 where the clock needs 3
    c.nop(T.trefi + 2)
    errors, _, _ = replay(c.edges, T.with_(cas_latency=3))
    assert set(rules_in(errors)) == {"CL"}  # no REFRESH yet: no deadline
    c = Recorder().init()
    c.refresh()
    c.nop(T.trefi + 1)
    assert c.broken is not None and c.broken.rule == "tREFI"
    errors, cycle, _ = replay(c.edges, T)
    assert rules_in(errors) == ["tREFI"] and cycle == c.broken.cycle


@pytest.mark.slow
def test_verilog_has_the_chip_and_its_array():
    text = chip_verilog(COLORLIGHT_5A75B, T)
    assert "module nfacep_sdram_chip" in text and "module nfacep_sdram_array" in text
    assert "pins__dq_i" in text and f"[{len(RULES) - 1}:0] errors" in text
