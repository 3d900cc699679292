# amaranth: UnusedElaboratable=no
"""The stream partitioner against a sequential software model, in Amaranth's simulator."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest
from amaranth.back import rtlil
from amaranth.lib import data
from amaranth.sim import Simulator
from hypothesis import given, settings
from hypothesis import strategies as st
from streams import stream_get, stream_put

from nfacep.hdl import partitioner
from nfacep.hdl.partitioner import StreamPartitioner

KEY_WIDTH = 4
PAYLOAD_WIDTH = 4
STATE_WIDTH = 6


def mix(state, payload):
    """The test update function: any lost, extra or misrouted update changes the result."""
    return (state * 3 + payload) % (1 << STATE_WIDTH)


def mix_gateware(m, state, payload):
    new_state = (state * 3 + payload)[:STATE_WIDTH]
    return new_state, new_state


# --- the reference: the sequential semantics, written as plainly as possible ----------------


@dataclass(frozen=True)
class Record:
    key: int
    payload: int
    dropped: bool
    fresh: bool
    result: int | None  # None when dropped (don't care)


class PartitionerModel:
    """Up to ``depth`` elements {key: [state, timer]}; a tick after every ``tick_tuples``-th
    tuple decrements every timer and forgets the partitions whose timer reaches zero."""

    def __init__(self, *, depth, timer_bits, tick_tuples):
        self.depth = depth
        self.timer_max = (1 << timer_bits) - 1
        self.tick_tuples = tick_tuples
        self.elements = {}
        self.tuples = 0
        self.drops = 0

    def step(self, key, payload):
        if key in self.elements:
            state, fresh = self.elements[key][0], False
        elif len(self.elements) < self.depth:
            state, fresh = 0, True
        else:
            state, fresh = None, False
        if state is None:
            record = Record(key, payload, dropped=True, fresh=False, result=None)
            self.drops += 1
        else:
            new_state = mix(state, payload)
            self.elements[key] = [new_state, self.timer_max]
            record = Record(key, payload, dropped=False, fresh=fresh, result=new_state)
        self.tuples += 1
        if self.tick_tuples and self.tuples % self.tick_tuples == 0:
            for element_key in list(self.elements):
                self.elements[element_key][1] -= 1
                if self.elements[element_key][1] == 0:
                    del self.elements[element_key]
        return record

    def run(self, tuples):
        return [self.step(key, payload) for key, payload in tuples]


# --- stream helpers ----------------------------------------------------------------------------


@dataclass
class Run:
    records: list[Record]
    tuples: int
    drops: int
    accepted_at: list[int]
    emitted_at: list[int]
    dut: StreamPartitioner | None = None


def simulate(
    dut, tuples, *, seed=0, gap=0.0, stall=0.0, first_stall=0, cycle_limit=None, processes=()
):
    """Push ``tuples`` through ``dut``; return the records and the final counters.
    ``processes``: more simulator processes (such as the SDRAM model on the store's pins)."""
    rng_put, rng_get = random.Random(seed), random.Random(seed + 1)
    records, accepted_at, emitted_at = [], [], []
    cycle = 0
    counters = {}
    if cycle_limit is None:
        cycle_limit = (
            1000
            + first_stall
            + (dut.depth + 4) * len(tuples) * 4 // max(1e-3, (1 - gap) * (1 - stall))
        )

    async def clock_counter(ctx):
        nonlocal cycle
        while True:
            await ctx.tick()
            cycle += 1
            assert cycle < cycle_limit, "simulation timed out"

    async def producer(ctx):
        for key, payload in tuples:
            await stream_put(
                ctx, dut.i_stream, {"key": key, "payload": payload}, rng=rng_put, gap=gap
            )
            accepted_at.append(cycle)

    async def consumer(ctx):
        if first_stall:
            await ctx.tick().repeat(first_stall)
        for _ in tuples:
            out = await stream_get(ctx, dut.o_stream, rng=rng_get, stall=stall)
            emitted_at.append(cycle)
            records.append(
                Record(
                    key=out.key,
                    payload=out.payload,
                    dropped=bool(out.dropped),
                    fresh=bool(out.fresh),
                    result=out.result,
                )
            )
        counters["tuples"] = ctx.get(dut.tuples)
        counters["drops"] = ctx.get(dut.drops)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(clock_counter, background=True)
    for process in processes:
        sim.add_process(process)
    sim.add_testbench(producer)
    sim.add_testbench(consumer)
    sim.run()
    return Run(records, counters["tuples"], counters["drops"], accepted_at, emitted_at)


def make_partitioner(
    *,
    depth,
    timer_bits=4,
    tick_tuples=0,
    key_shape=KEY_WIDTH,
    payload_shape=PAYLOAD_WIDTH,
    update=mix_gateware,
):
    return StreamPartitioner(
        key_shape=key_shape,
        payload_shape=payload_shape,
        state_width=STATE_WIDTH,
        result_shape=STATE_WIDTH,
        depth=depth,
        timer_bits=timer_bits,
        tick_tuples=tick_tuples,
        update=update,
    )


def assert_matches_model(run, expected):
    assert len(run.records) == len(expected)
    for index, (got, want) in enumerate(zip(run.records, expected, strict=True)):
        assert (got.key, got.payload, got.dropped) == (want.key, want.payload, want.dropped), (
            f"tuple {index}: got {got}, want {want}"
        )
        if not want.dropped:
            assert (got.fresh, got.result) == (want.fresh, want.result), (
                f"tuple {index}: got {got}, want {want}"
            )
        else:
            assert not got.fresh, f"tuple {index}: dropped tuple marked fresh"


def check(tuples, *, depth, timer_bits=4, tick_tuples=0, key_shape=KEY_WIDTH, **kwargs):
    dut = make_partitioner(
        depth=depth, timer_bits=timer_bits, tick_tuples=tick_tuples, key_shape=key_shape
    )
    model = PartitionerModel(depth=depth, timer_bits=timer_bits, tick_tuples=tick_tuples)
    expected = model.run(tuples)
    run = simulate(dut, tuples, **kwargs)
    assert_matches_model(run, expected)
    assert run.tuples == len(tuples)
    assert run.drops == model.drops
    run.dut = dut
    return run, expected


def random_tuples(rng, count, alphabet):
    return [(rng.randrange(alphabet), rng.randrange(1 << PAYLOAD_WIDTH)) for _ in range(count)]


# --- random differential tests -----------------------------------------------------------------


def _random_case(seed, depth, timer_bits, tick_tuples, alphabet):
    """400 random tuples over ``alphabet`` keys, with gaps and stalls, checked against the
    model; the model's results."""
    tuples = random_tuples(random.Random(seed), 400, alphabet)
    _, expected = check(
        tuples,
        depth=depth,
        timer_bits=timer_bits,
        tick_tuples=tick_tuples,
        seed=seed,
        gap=0.3,
        stall=0.4,
    )
    return expected


@pytest.mark.parametrize(
    ("depth", "timer_bits", "tick_tuples", "alphabet"),
    [
        (1, 4, 0, 3),
        (1, 2, 1, 3),
        (1, 2, 2, 2),
        (2, 4, 0, 4),
        (2, 1, 3, 4),
        (2, 2, 1, 5),
        (3, 2, 2, 5),
        (3, 1, 4, 5),
        (4, 4, 0, 7),
        (4, 2, 3, 8),
        (4, 3, 1, 6),
        (8, 4, 0, 12),
        (8, 2, 4, 14),
        (8, 1, 16, 11),
    ],
)
def test_random_against_model(depth, timer_bits, tick_tuples, alphabet):
    seed = depth * 1000 + timer_bits * 100 + tick_tuples * 10 + alphabet
    expected = _random_case(seed, depth, timer_bits, tick_tuples, alphabet)
    # The cases are meant to exercise all three outcomes.
    assert any(r.dropped for r in expected)
    assert any(r.fresh for r in expected)
    assert any(not r.fresh and not r.dropped for r in expected)


@pytest.mark.parametrize("depth", [1, 2, 3, 8])
def test_random_full_speed(depth):
    # No gaps and no backpressure: tuples back to back at the maximum rate.
    rng = random.Random(depth)
    tuples = random_tuples(rng, 300, depth + 2)
    check(tuples, depth=depth, timer_bits=2, tick_tuples=3)


@pytest.mark.parametrize(
    ("depth", "timer_bits", "tick_tuples", "alphabet", "group_bits"),
    [(2, 2, 3, 4, 2), (3, 3, 2, 5, 4), (5, 2, 0, 7, 1), (8, 4, 5, 12, 5)],
)
def test_state_swapped_in_groups(monkeypatch, depth, timer_bits, tick_tuples, alphabet, group_bits):
    """A state wider than ``SWAP_SPLIT_BITS`` is swapped in groups, each by a decision from
    copies of the stage's hit registers: with the groups made small (the test's 6-bit state in
    two to six), every outcome, ticks and stalls included, is the model's."""
    monkeypatch.setattr(partitioner, "SWAP_GROUP_BITS", group_bits)
    monkeypatch.setattr(partitioner, "SWAP_SPLIT_BITS", group_bits)
    seed = depth * 1000 + group_bits
    expected = _random_case(seed, depth, timer_bits, tick_tuples, alphabet)
    assert any(r.dropped for r in expected)
    assert any(not r.fresh and not r.dropped for r in expected)


@pytest.mark.parametrize("group", range(STATE_WIDTH // 2))
def test_state_group_unloaded_is_caught(monkeypatch, group):
    """Any one group's copies of the hit registers never loaded (a broken path: the lowest
    bits', the middle ones', the highest ones') are caught."""
    monkeypatch.setattr(partitioner, "SWAP_GROUP_BITS", 2)
    monkeypatch.setattr(partitioner, "SWAP_SPLIT_BITS", 2)
    monkeypatch.setattr(partitioner, "BREAK_SWAP", "unloaded")
    monkeypatch.setattr(partitioner, "BREAK_SWAP_GROUP", group)
    tuples = random_tuples(random.Random(5), 200, 5)
    with pytest.raises(AssertionError, match="tuple"):
        check(tuples, depth=3, timer_bits=2, tick_tuples=3, seed=5, gap=0.3, stall=0.4)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(
    depth=st.integers(1, 3),
    timer_bits=st.integers(1, 3),
    tick_tuples=st.integers(0, 4),
    keys=st.lists(st.integers(0, 4), min_size=1, max_size=30),
    seed=st.integers(0, 2**16),
    gap=st.sampled_from([0.0, 0.5]),
    stall=st.sampled_from([0.0, 0.5]),
)
def test_hypothesis_against_model(depth, timer_bits, tick_tuples, keys, seed, gap, stall):
    tuples = [(key, (index * 7 + key) % (1 << PAYLOAD_WIDTH)) for index, key in enumerate(keys)]
    check(
        tuples,
        depth=depth,
        timer_bits=timer_bits,
        tick_tuples=tick_tuples,
        seed=seed,
        gap=gap,
        stall=stall,
    )


@pytest.mark.parametrize("depth", [2, 5])
def test_wide_keys(depth):
    # 16-bit keys that differ in single high bits, so a narrowed comparison would alias them.
    rng = random.Random(depth + 40)
    pool = [0x8000, 0x0000, 0x4000, 0x8001, 0x0100, 0xFFFF, 0x7FFF][: depth + 2]
    tuples = [(rng.choice(pool), rng.randrange(1 << PAYLOAD_WIDTH)) for _ in range(300)]
    check(
        tuples,
        depth=depth,
        timer_bits=2,
        tick_tuples=2,
        key_shape=16,
        seed=depth,
        gap=0.2,
        stall=0.3,
    )


# --- targeted tests ----------------------------------------------------------------------------


def test_drop_counter():
    # depth 2, no timers: 0 and 1 fill the pipeline; 2 is dropped twice, 0 hits, 3 is dropped.
    tuples = [(0, 1), (1, 2), (2, 3), (2, 4), (0, 5), (3, 6)]
    model = PartitionerModel(depth=2, timer_bits=4, tick_tuples=0)
    expected = model.run(tuples)
    assert [r.dropped for r in expected] == [False, False, True, True, False, True]
    assert model.drops == 3
    run, _ = check(tuples, depth=2, seed=5, stall=0.5)
    assert run.drops == 3
    assert run.tuples == 6

    # And on a long random stream with many drops.
    rng = random.Random(99)
    tuples = random_tuples(rng, 200, 9)
    model = PartitionerModel(depth=3, timer_bits=2, tick_tuples=2)
    model.run(tuples)
    run, _ = check(tuples, depth=3, timer_bits=2, tick_tuples=2, seed=99, gap=0.2, stall=0.2)
    assert model.drops > 20
    assert run.drops == model.drops


A, B, C = 5, 9, 12


@pytest.mark.parametrize(("gap", "stall"), [(0.0, 0.0), (0.5, 0.5)])
def test_timer_frees_single_element(gap, stall):
    # depth 1, B = 2 (M = 3), a tick after every tuple. A is allocated (3, ticked to 2); B is
    # dropped twice while A's timer goes 2 -> 1 -> 0; the tick after tuple 2 frees A, so B is
    # allocated by tuple 3 and A dropped by tuple 4. Tuple 5 refreshes B (a hit); B then runs out
    # after tuple 7, and A is allocated afresh by tuple 8.
    keys = [A, B, B, B, A, B, A, A, A]
    outcome = ["fresh", "drop", "drop", "fresh", "drop", "hit", "drop", "drop", "fresh"]
    tuples = [(key, index) for index, key in enumerate(keys)]
    model = PartitionerModel(depth=1, timer_bits=2, tick_tuples=1)
    expected = model.run(tuples)
    assert [("drop" if r.dropped else "fresh" if r.fresh else "hit") for r in expected] == outcome
    run, _ = check(tuples, depth=1, timer_bits=2, tick_tuples=1, seed=3, gap=gap, stall=stall)
    assert [
        ("drop" if r.dropped else "fresh" if r.fresh else "hit") for r in run.records
    ] == outcome
    assert run.drops == 5


@pytest.mark.parametrize(("gap", "stall"), [(0.0, 0.0), (0.5, 0.5)])
def test_timer_frees_at_exact_tick(gap, stall):
    # depth 2, B = 2 (M = 3), a tick after every tuple, so tuples follow each other closely
    # through the pipeline. Timers after each tuple's tick, in brackets:
    #   0 A fresh [A2]        1 B fresh [A1 B2]   2 C drop [B1, A freed]
    #   3 C fresh [C2, B freed]                   4 A fresh [C1 A2]
    #   5 B drop [A1, C freed]                    6 B fresh [B2, A freed]
    #   7 A fresh [B1 A2]     8 B hit [A1 B2]     9 C drop [B1, A freed]   10 C fresh [B0..]
    keys = [A, B, C, C, A, B, B, A, B, C, C]
    outcome = [
        "fresh",
        "fresh",
        "drop",
        "fresh",
        "fresh",
        "drop",
        "fresh",
        "fresh",
        "hit",
        "drop",
        "fresh",
    ]
    tuples = [(key, index) for index, key in enumerate(keys)]
    model = PartitionerModel(depth=2, timer_bits=2, tick_tuples=1)
    expected = model.run(tuples)
    assert [("drop" if r.dropped else "fresh" if r.fresh else "hit") for r in expected] == outcome
    run, _ = check(tuples, depth=2, timer_bits=2, tick_tuples=1, seed=4, gap=gap, stall=stall)
    assert [
        ("drop" if r.dropped else "fresh" if r.fresh else "hit") for r in run.records
    ] == outcome
    assert run.drops == 3


def test_long_output_stall_loses_nothing():
    rng = random.Random(7)
    tuples = random_tuples(rng, 60, 6)
    dut = make_partitioner(depth=4, timer_bits=2, tick_tuples=5)
    model = PartitionerModel(depth=4, timer_bits=2, tick_tuples=5)
    expected = model.run(tuples)
    run = simulate(dut, tuples, seed=7, first_stall=300)
    assert_matches_model(run, expected)
    assert run.drops == model.drops
    # While the output was stalled, the partitioner took only what its pipeline holds.
    taken_during_stall = sum(1 for cycle in run.accepted_at if cycle < 300)
    assert 1 <= taken_during_stall <= dut.depth + 1
    assert min(run.emitted_at) >= 300


@pytest.mark.parametrize("depth", [1, 2, 4, 8])
def test_throughput_and_latency(depth):
    # Back-to-back input, output always ready: one tuple every other cycle (every cycle at
    # depth 1), each record valid depth + 2 cycles after its input transfer (2 at depth 1).
    rng = random.Random(depth)
    tuples = random_tuples(rng, 40, depth + 1)
    run, _ = check(tuples, depth=depth, timer_bits=3, tick_tuples=2)
    interval = 1 if depth == 1 else 2
    assert [b - a for a, b in zip(run.accepted_at, run.accepted_at[1:], strict=False)] == [
        interval
    ] * (len(tuples) - 1)
    # emitted_at is the cycle count after the output transfer's clock edge, accepted_at the
    # same for the input transfer; the record is valid (and taken) latency cycles later.
    assert [e - a for a, e in zip(run.accepted_at, run.emitted_at, strict=True)] == [
        run.dut.latency
    ] * len(tuples)
    assert run.dut.latency == (depth + 2 if depth > 1 else 2)


def test_layout_payload_reaches_update_as_view():
    payload_layout = data.StructLayout({"low": 2, "high": 2})
    seen = []

    def update(m, state, payload):
        seen.append(payload)
        return (state + payload.low + payload.high)[:STATE_WIDTH], state

    dut = make_partitioner(depth=2, payload_shape=payload_layout, update=update)
    rtlil.convert(dut)
    assert len(seen) == 1
    assert isinstance(seen[0], data.View)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"depth": 0},
        {"timer_bits": 0},
        {"tick_tuples": -1},
    ],
)
def test_bad_parameters(kwargs):
    with pytest.raises(ValueError):
        make_partitioner(**{"depth": 2, **kwargs})
