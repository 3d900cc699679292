# amaranth: UnusedElaboratable=no
"""The SDRAM controller (nfacep.hdl.sdram.controller) against the cycle-accurate model under
Amaranth's simulator: random reads and writes over uniform and Zipf addresses return what a
Python dictionary holds, refresh keeps up under load, the model's timing assertions never
fire, and a controller built with one timing figure short makes the model raise."""

from __future__ import annotations

import bisect
import random

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from nfacep.hdl.sdram.controller import SDRAMController, refresh_margin
from nfacep.hdl.sdram.model import SDRAMModel, SDRAMTimingError, unwritten
from nfacep.hdl.sdram.sim import run_requests
from nfacep.hdl.sdram.timing import COLORLIGHT_5A75B, M12L16161A, SDRAMGeometry

CLK = 100e6  # tRCD 2, tRP 2, tRAS 4, tRC 6, tWR 2, tRFC 6 clocks
# the chip's figures with a short power-up and, so that a test sees many refreshes, tREFI 1.5 us
TIMING = M12L16161A.with_(power_up_ns=300.0, init_refreshes=2, trefi_ns=1500.0)
GEOMETRY = COLORLIGHT_5A75B
ULX3S = SDRAMGeometry(banks=4, rows=8192, columns=512, width=16)


def build(geometry=GEOMETRY, timing=TIMING, **kwargs):
    dut = SDRAMController(geometry, timing, CLK, **kwargs)
    model = SDRAMModel(geometry, timing.cycles(CLK))
    return dut, model


def expected(ops, geometry=GEOMETRY):
    """The words the reads of ``ops`` return, from a dictionary."""
    memory, out = {}, []
    for write, address, value in ops:
        if write:
            memory[address] = value
        else:
            out.append(memory.get(address, unwritten(*address, geometry.width)))
    return out


def requests(ops):
    return [
        {"write": w, "bank": b, "row": r, "column": c, "data": v if w else 0}
        for w, (b, r, c), v in ops
    ]


# --- addresses ---------------------------------------------------------------------------------

ZIPF_KEYS = 4096
_ZIPF_CDF = list(__import__("itertools").accumulate(1 / (k + 1) for k in range(ZIPF_KEYS)))
_SCATTER = random.Random(7).sample(range(GEOMETRY.words), ZIPF_KEYS)


def address_of(word: int, geometry=GEOMETRY) -> tuple[int, int, int]:
    column = word % geometry.columns
    row = word // geometry.columns % geometry.rows
    return word // (geometry.columns * geometry.rows), row, column


def zipf(u: float) -> tuple[int, int, int]:
    """The key of rank k (Zipf, s = 1, over 4,096 keys) at a fixed random word."""
    k = min(bisect.bisect_left(_ZIPF_CDF, u * _ZIPF_CDF[-1]), ZIPF_KEYS - 1)
    return address_of(_SCATTER[k])


uniform_addresses = st.builds(lambda w: address_of(w), st.integers(0, GEOMETRY.words - 1))
# few rows: row hits, row misses in one bank and same-word read-after-write hazards
narrow_addresses = st.tuples(st.integers(0, 1), st.integers(0, 2), st.integers(0, 3))
zipf_addresses = st.floats(0, 1).map(zipf)


def op_lists(addresses):
    return st.lists(
        st.tuples(st.booleans(), addresses, st.integers(0, 2**32 - 1)), min_size=1, max_size=120
    )


@pytest.mark.slow
@settings(max_examples=12, phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target])
@given(
    ops=st.one_of(
        op_lists(uniform_addresses), op_lists(narrow_addresses), op_lists(zipf_addresses)
    ),
    seed=st.integers(0, 2**16),
    gap=st.sampled_from([0.0, 0.3]),
    stall=st.sampled_from([0.0, 0.5]),
)
def test_random_reads_and_writes_equal_a_dictionary(ops, seed, gap, stall):
    dut, model = build()
    run = run_requests(dut, model, requests(ops), seed=seed, gap=gap, stall=stall, limit=20_000)
    assert run.responses == expected(ops)
    # the memory ends holding the last write of each word
    last = {a: v for w, a, v in ops if w}
    assert all(model.peek(*a) == v for a, v in last.items())


@pytest.mark.slow
def test_refresh_under_load_loses_and_reorders_nothing():
    """Back-to-back requests for many refresh periods, responses always ready, then stalled."""
    rng = random.Random(3)
    ops = [
        (
            rng.random() < 0.5,
            zipf(rng.random()) if i % 2 else address_of(rng.randrange(GEOMETRY.words)),
            rng.getrandbits(32),
        )
        for i in range(1500)
    ]
    dut, model = build()
    t = TIMING.cycles(CLK)
    run = run_requests(dut, model, requests(ops), limit=50_000)
    assert run.responses == expected(ops)
    busy = run.accepted[-1] - run.accepted[0]
    assert model.counts["REFRESH"] - t.init_refreshes >= busy // t.trefi
    # with the output stalled half the time the input backs up, and still nothing is lost
    dut, model = build()
    run = run_requests(dut, model, requests(ops[:400]), stall=0.5, seed=1, limit=50_000)
    assert run.responses == expected(ops[:400])


@pytest.mark.slow
def test_the_real_refresh_interval_and_the_ulx3s_geometry():
    """The chip's own tREFI (15.625 us, 1,562 clocks): refreshes come at least that often;
    and a 4-bank, 16-bit geometry works the same way."""
    timing = M12L16161A.with_(power_up_ns=300.0, init_refreshes=2)
    t = timing.cycles(CLK)
    dut, model = build(timing=timing)
    rng = random.Random(5)
    ops = []
    while len(ops) < 400:
        ops.append((1, address_of(rng.randrange(GEOMETRY.words)), rng.getrandbits(32)))
        ops.append((0, ops[-1][1], 0))
    run_requests(dut, model, requests(ops), gap=0.9, seed=2, limit=50_000)
    assert model.cycle > 2 * t.trefi and model.counts["REFRESH"] >= t.init_refreshes + 2
    dut, model = build(geometry=ULX3S)
    ops = [
        (rng.random() < 0.5, address_of(rng.randrange(ULX3S.words), ULX3S), rng.getrandbits(16))
        for _ in range(300)
    ]
    run = run_requests(dut, model, requests(ops), limit=50_000)
    assert run.responses == expected(ops, ULX3S)


def test_a_request_to_another_banks_open_row_does_not_wait():
    """Bank 1's row is open; a row miss in bank 0 then a hit in bank 1: the hit's READ goes out
    while bank 0 precharges and activates, and the responses still come back in order."""
    ops = [
        (1, (0, 1, 0), 10),
        (1, (1, 1, 0), 11),
        (0, (0, 2, 0), 0),  # row miss in bank 0: PRECHARGE, ACTIVE, READ
        (0, (1, 1, 0), 0),  # hit in bank 1
    ]
    dut, model = build()
    model.trace = []
    run = run_requests(dut, model, requests(ops), limit=5_000)
    assert run.responses == expected(ops)
    reads = [(cycle, bank) for cycle, command, bank, _ in model.trace if command == "READ"]
    precharges = [
        cycle for cycle, command, bank, _ in model.trace if command == "PRECHARGE" and bank == 0
    ]
    assert reads[0][1] == 1 and reads[1][1] == 0  # bank 1's read first
    assert reads[0][0] < precharges[-1] + TIMING.cycles(CLK).trp  # before bank 0 could read


def test_a_full_reorder_buffer_holds_ready_low():
    """With the output never taken, the controller accepts ``reorder`` reads and then waits."""
    from amaranth.sim import Simulator

    from nfacep.hdl.sdram.sim import sdram_process

    dut, model = build(reorder=4)
    accepted = []

    async def producer(ctx):
        ctx.set(dut.request.valid, 1)
        ctx.set(dut.request.payload, {"write": 0, "bank": 0, "row": 0, "column": 0, "data": 0})
        for _ in range(400):
            await ctx.tick()
            accepted.append(ctx.get(dut.request.ready))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_process(sdram_process(model, dut.sdram))
    sim.add_testbench(producer)
    sim.run()
    assert sum(accepted) == 4 and model.counts["READ"] == 4


BROKEN = ["trcd", "trp", "tras", "twr", "trfc", "trefi"]


@pytest.mark.parametrize("figure", BROKEN)
def test_a_controller_with_a_figure_short_makes_the_model_raise(figure):
    t = TIMING.cycles(CLK)
    if figure == "trefi":  # refreshing half as often as the chip needs
        broken = t.with_(trefi=2 * t.trefi)
    else:
        broken = t.with_(**{figure: getattr(t, figure) - 1})
    rule = {
        "trcd": "tRCD",
        "trp": "tRP",
        "tras": "tRAS",
        "twr": "tWR",
        "trfc": "tRFC",
        "trefi": "tREFI",
    }
    dut, model = build(cycles_override=broken)
    rng = random.Random(11)
    ops = [
        (rng.random() < 0.5, (rng.randrange(2), rng.randrange(3), rng.randrange(4)), 5)
        for _ in range(600)
    ]
    with pytest.raises(SDRAMTimingError) as caught:
        run_requests(dut, model, requests(ops), gap=0.2 if figure == "trfc" else 0.0, limit=20_000)
    assert caught.value.rule == rule[figure]
    # and the same workload with the right figures passes
    dut, model = build()
    run = run_requests(dut, model, requests(ops), limit=20_000)
    assert run.responses == expected(ops)


def test_refresh_margin_keeps_refreshes_within_trefi():
    t = TIMING.cycles(CLK)
    dut = SDRAMController(GEOMETRY, TIMING, CLK)
    assert dut.refresh_period == t.trefi - refresh_margin(t, GEOMETRY.banks) > 0
    with pytest.raises(ValueError, match="tREFI"):
        SDRAMController(GEOMETRY, TIMING.with_(trefi_ns=100.0), CLK)


@pytest.mark.parametrize("settle", ["kept", "none", "power-up"])
def test_a_reset_while_running_starts_again_without_the_power_up_wait(settle, monkeypatch):
    """The controller's domain reset (the board's RESET) just after an ACTIVE reached the chip,
    a read in flight: the controller waits out the commands in flight, not the chip's
    power-up (longer than tREFI here, so waiting it again would break tREFI), precharges,
    refreshes and sets the mode again, and the words written before the reset read back
    after it (the read in flight is forgotten with the reset). Settling for no clock breaks
    tRAS; waiting power-up again breaks tREFI."""
    from amaranth.hdl import ClockDomain, Module
    from amaranth.sim import Simulator

    from nfacep.hdl.sdram.sim import sdram_process

    timing = TIMING.with_(power_up_ns=3000.0)  # 300 clocks; tREFI is 150
    if settle == "none":
        monkeypatch.setattr(SDRAMController, "settle", lambda self: 0)
    elif settle == "power-up":
        monkeypatch.setattr(SDRAMController, "settle", lambda self: self.cycles.power_up)
    dut, model = build(timing=timing)
    words = [address_of(w) for w in (3, 70_000, 300_000, 700_000)]
    written = {a: 1000 + i for i, a in enumerate(words)}
    read: list[int] = []

    async def request(ctx, **payload):
        ctx.set(dut.request.valid, 1)
        ctx.set(dut.request.payload, {"data": 0, **payload})
        await ctx.tick().until(dut.request.ready)
        ctx.set(dut.request.valid, 0)

    async def bench(ctx):
        await ctx.tick().until(dut.initialised)
        for (bank, row, column), value in written.items():
            await request(ctx, write=1, bank=bank, row=row, column=column, data=value)
        await ctx.tick().until(dut.idle)
        # a read of another row, the domain reset as soon as its ACTIVE reached the chip
        actives = model.counts["ACTIVE"]
        await request(ctx, write=0, bank=0, row=781, column=0)
        while model.counts["ACTIVE"] == actives:
            await ctx.tick()
        ctx.set(sync.rst, 1)
        await ctx.tick()
        ctx.set(sync.rst, 0)
        await ctx.tick().until(dut.initialised)
        ctx.set(dut.response.ready, 1)
        for bank, row, column in written:
            await request(ctx, write=0, bank=bank, row=row, column=column)
            valid = 0
            while not valid:
                _, _, valid, payload = await ctx.tick().sample(
                    dut.response.valid, dut.response.payload
                )
            read.append(payload)
        for _ in range(2 * model.t.trefi):  # refreshes go on after it
            await ctx.tick()

    top = Module()
    top.domains.sync = sync = ClockDomain("sync")
    top.submodules.dut = dut
    sim = Simulator(top)
    sim.add_clock(1e-8)
    failures: list[AssertionError] = []  # (the model stops at the first; the bench goes on)
    sim.add_process(sdram_process(model, dut.sdram, limit=20_000, failures=failures))
    sim.add_testbench(bench)
    sim.run()
    if settle == "kept":
        assert not failures
        assert read == list(written.values())
        assert model.counts["MODE"] == 2
    else:
        assert isinstance(failures[0], SDRAMTimingError)
        assert failures[0].rule == {"none": "tRAS", "power-up": "tREFI"}[settle]
