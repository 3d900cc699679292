# amaranth: UnusedElaboratable=no
"""The table partitioner (--store table) against a sequential software model, in Amaranth's
simulator: direct and hashed tables, same-key bursts, all-distinct keys, full buckets, random
input gaps and output stalls, throughput, latency, reset."""

from __future__ import annotations

import itertools
import random
import zlib

import numpy as np
import pytest
from amaranth.hdl import ResetInserter, Signal
from amaranth.sim import Simulator
from hypothesis import given, settings
from hypothesis import strategies as st
from test_hdl_partitioner import (
    PAYLOAD_WIDTH,
    STATE_WIDTH,
    Record,
    Run,
    assert_matches_model,
    mix,
    mix_gateware,
    simulate,
)

from nfacep.hdl import table_forwarding
from nfacep.hdl.table import TablePartitioner
from nfacep.params import EngineParams
from nfacep.reference.capacity import admit_sequential, key_crc32, table_slots

# --- the reference: written from the definition, sharing nothing with nfacep.reference.capacity


class TableModel:
    """Direct: {key: state}, never full. Hashed: one dict {key: state} per bucket (zlib's
    CRC-32 of the key's little-endian bytes, low bits), at most ``ways`` keys each. With
    ``tick_tuples`` K: every processed key's timer is set to ``2**timer_bits - 1``, and after
    every K-th tuple (dropped ones too) every timer counts down; at zero the key is forgotten."""

    def __init__(self, *, entries, ways, key_width, tick_tuples=0, timer_bits=4):
        self.direct = key_width <= (entries - 1).bit_length()
        self.ways = ways
        self.buckets = entries // ways
        self.nbytes = (key_width + 7) // 8
        self.table = {}
        self.timers = {}
        self.tick_tuples, self.top = tick_tuples, (1 << timer_bits) - 1
        self.seen = 0
        self.drops = 0

    def bucket(self, key):
        if self.direct:
            return key
        return zlib.crc32(key.to_bytes(self.nbytes, "little")) % self.buckets

    def step(self, key, payload):
        record = self._process(key, payload)
        self.seen += 1
        if self.tick_tuples and self.seen % self.tick_tuples == 0:
            for k in list(self.timers):
                self.timers[k] -= 1
                if self.timers[k] == 0:
                    del self.timers[k]
                    del self.table[self.bucket(k)][k]
        return record

    def _process(self, key, payload):
        entries = self.table.setdefault(self.bucket(key), {})
        if key in entries:
            state, fresh = entries[key], False
        elif self.direct or len(entries) < self.ways:
            state, fresh = 0, True
        else:
            self.drops += 1
            return Record(key, payload, dropped=True, fresh=False, result=None)
        entries[key] = mix(state, payload)
        self.timers[key] = self.top
        return Record(key, payload, dropped=False, fresh=fresh, result=entries[key])

    def run(self, tuples):
        return [self.step(key, payload) for key, payload in tuples]


def make_table(*, entries, ways, key_width, registered=True, **timers):
    return TablePartitioner(
        key_shape=key_width,
        payload_shape=PAYLOAD_WIDTH,
        state_width=STATE_WIDTH,
        result_shape=STATE_WIDTH,
        entries=entries,
        ways=ways,
        update=mix_gateware,
        registered=registered,
        **timers,
    )


#: the table's arguments that change its structure, not what it computes (not the model's)
STRUCTURE = ("sweep_every", "read_stages", "copies", "result_stage")


def check(tuples, *, entries, ways, key_width, registered=True, timers=None, **kwargs):
    """``timers``: the table's tick_tuples, timer_bits and sweep_every (and the ``STRUCTURE``
    arguments), given to the model too (but the ``STRUCTURE`` ones)."""
    timers = timers or {}
    dut = make_table(
        entries=entries, ways=ways, key_width=key_width, registered=registered, **timers
    )
    model = TableModel(
        entries=entries,
        ways=ways,
        key_width=key_width,
        **{k: v for k, v in timers.items() if k not in STRUCTURE},
    )
    expected = model.run(tuples)
    run = simulate(dut, tuples, cycle_limit=2000 + dut.rows + 200 * len(tuples), **kwargs)
    assert_matches_model(run, expected)
    assert run.tuples == len(tuples)
    assert run.drops == model.drops
    run.dut = dut
    return run, expected


def random_tuples(rng, keys):
    return [(key, rng.randrange(1 << PAYLOAD_WIDTH)) for key in keys]


def bursty_keys(rng, count, pool):
    """Runs of one key (same-key bursts), single keys and pairs alternating, from ``pool``."""
    keys = []
    while len(keys) < count:
        kind = rng.randrange(3)
        if kind == 0:
            keys += [rng.choice(pool)] * rng.randrange(2, 6)
        elif kind == 1:
            a, b = rng.choice(pool), rng.choice(pool)
            keys += [a, b] * rng.randrange(1, 4)
        else:
            keys.append(rng.choice(pool))
    return keys[:count]


# --- the hash ------------------------------------------------------------------------------


@pytest.mark.parametrize("key_width", [1, 7, 8, 9, 16, 17, 32, 40, 64])
def test_crc_is_zlibs_over_little_endian_bytes(key_width):
    rng = random.Random(key_width)
    keys = [0, (1 << key_width) - 1] + [rng.randrange(1 << key_width) for _ in range(50)]
    nbytes = (key_width + 7) // 8
    want = [zlib.crc32(k.to_bytes(nbytes, "little")) for k in keys]
    assert key_crc32(np.array(keys, dtype=np.uint64), key_width).tolist() == want
    dut = make_table(entries=2, ways=1, key_width=key_width)
    parameters = dut.crc_parameters
    assert [parameters.compute([k]) for k in keys] == want


def test_crc_gateware_gives_the_bucket():
    # The hash register in the gateware (not just the Parameters' software model).
    dut = make_table(entries=16, ways=2, key_width=24).crc_parameters.create()
    rng = random.Random(1)
    keys = [rng.randrange(1 << 24) for _ in range(20)]
    got = []

    async def bench(ctx):
        ctx.set(dut.start, 1)
        ctx.set(dut.valid, 1)
        for k in keys:
            ctx.set(dut.data, k)
            await ctx.tick()
            got.append(ctx.get(dut.crc))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert got == [zlib.crc32(k.to_bytes(3, "little")) for k in keys]


# --- random differential tests -----------------------------------------------------------------

# (entries, ways, key width, key pool size): hashed with small tables and wide keys fill buckets
HASHED = [
    (2, 1, 16, 5),
    (4, 2, 16, 9),
    (8, 4, 16, 14),
    (8, 2, 32, 12),
    (16, 4, 12, 30),
    (4, 4, 20, 7),
    (16, 1, 8, 24),
]


@pytest.mark.parametrize("registered", [True, False])
@pytest.mark.parametrize(("entries", "ways", "key_width", "pool"), HASHED)
def test_hashed_against_model(entries, ways, key_width, pool, registered):
    seed = entries * 100 + ways * 10 + key_width
    rng = random.Random(seed)
    keys = [rng.randrange(1 << key_width) for _ in range(pool)]
    tuples = random_tuples(rng, bursty_keys(rng, 300, keys))
    _, expected = check(
        tuples,
        entries=entries,
        ways=ways,
        key_width=key_width,
        seed=seed,
        gap=0.3,
        stall=0.3,
        registered=registered,
    )
    assert any(r.dropped for r in expected)
    assert any(r.fresh for r in expected)
    assert any(not r.fresh and not r.dropped for r in expected)


@pytest.mark.parametrize(
    ("entries", "ways", "key_width"),
    [(16, 4, 4), (16, 4, 3), (16, 2, 1), (8, 8, 3), (256, 4, 8), (4, 1, 2)],
)
@pytest.mark.parametrize("registered", [True, False])
def test_direct_against_model(entries, ways, key_width, registered):
    seed = entries + ways + key_width
    rng = random.Random(seed)
    pool = list(range(1 << key_width))
    tuples = random_tuples(rng, bursty_keys(rng, 250, pool))
    dut_rows = make_table(entries=entries, ways=ways, key_width=key_width).rows
    assert dut_rows == (1 << key_width) // min(ways, 1 << key_width)
    _, expected = check(
        tuples,
        entries=entries,
        ways=ways,
        key_width=key_width,
        seed=seed,
        gap=0.3,
        stall=0.3,
        registered=registered,
    )
    assert not any(r.dropped for r in expected)
    assert any(r.fresh for r in expected) and any(not r.fresh for r in expected)


@pytest.mark.parametrize("registered", [True, False])
@pytest.mark.parametrize(("entries", "ways", "key_width"), [(8, 2, 16), (16, 4, 4), (4, 1, 32)])
def test_full_speed_bursts(entries, ways, key_width, registered):
    # Back to back, output always ready: same-key runs and alternating pairs in flight together.
    rng = random.Random(entries + key_width)
    keys = [rng.randrange(1 << key_width) for _ in range(entries + 3)]
    check(
        random_tuples(rng, bursty_keys(rng, 300, keys)),
        entries=entries,
        ways=ways,
        key_width=key_width,
        registered=registered,
    )


def test_all_distinct_keys():
    # Every key new: the first `ways` keys of each bucket stay, every later one is dropped.
    rng = random.Random(5)
    keys = rng.sample(range(1 << 16), 200)
    _, expected = check(
        random_tuples(rng, keys), entries=16, ways=4, key_width=16, seed=5, gap=0.2, stall=0.2
    )
    assert sum(not r.dropped for r in expected) == 16
    assert all(r.fresh for r in expected if not r.dropped)


def test_full_buckets_equal_nfacep_capacity():
    # The model above and nfacep.reference.capacity's (the reference matcher's) agree on drops
    # and fresh.
    rng = random.Random(8)
    key_width, entries, ways = 24, 16, 2
    pool = [rng.randrange(1 << key_width) for _ in range(40)]
    keys = bursty_keys(rng, 400, pool)
    params = EngineParams(store="table", partitions=entries, ways=ways)
    raw, codes = np.unique(np.array(keys, dtype=np.uint64), return_inverse=True)
    admission = admit_sequential(codes.ravel(), params, table_slots(raw, key_width, params))
    run, _ = check(
        random_tuples(rng, keys),
        entries=entries,
        ways=ways,
        key_width=key_width,
        seed=8,
        gap=0.1,
        stall=0.5,
    )
    assert [not r.dropped for r in run.records] == admission.admitted.tolist()
    assert [r.fresh for r in run.records] == admission.fresh.tolist()
    assert (~admission.admitted).sum() > 50


@pytest.mark.slow
@settings(max_examples=50, deadline=None)
@given(
    shape=st.sampled_from([(2, 1, 8), (4, 2, 8), (4, 4, 9), (8, 2, 3), (2, 2, 1), (4, 1, 2)]),
    keys=st.lists(st.integers(0, 7), min_size=1, max_size=40),
    seed=st.integers(0, 2**16),
    gap=st.sampled_from([0.0, 0.5]),
    stall=st.sampled_from([0.0, 0.5]),
)
def test_hypothesis_against_model(shape, keys, seed, gap, stall):
    entries, ways, key_width = shape
    # spread the small key indices over the key space so that they share and fill buckets
    mask = (1 << key_width) - 1
    spread = [(k * 0x9E37) & mask for k in keys]
    tuples = [(k, (i * 7 + k) % (1 << PAYLOAD_WIDTH)) for i, k in enumerate(spread)]
    check(tuples, entries=entries, ways=ways, key_width=key_width, seed=seed, gap=gap, stall=stall)


# --- timers: a tick stamp per entry, the aging sweep ---------------------------------------

# (entries, ways, key width, pool, tick_tuples, timer_bits, sweep_every)
TIMED = [
    (8, 2, 16, 14, 1, 1, 1),
    (8, 2, 16, 14, 1, 2, 4),
    (16, 4, 12, 30, 3, 2, 2),
    (4, 4, 20, 9, 2, 1, 1024),
    (16, 4, 4, 16, 1, 2, 3),
    (16, 2, 3, 8, 2, 1, 1),
    (8, 1, 16, 12, 5, 3, 7),
    (8, 2, 16, 14, 1, 3, 4),
]


@pytest.mark.parametrize("registered", [True, False])
@pytest.mark.parametrize(("entries", "ways", "key_width", "pool", "tick", "bits", "every"), TIMED)
def test_timers_against_model(entries, ways, key_width, pool, tick, bits, every, registered):
    # Entries age out between and during same-key bursts (tick_tuples 1: every tuple ticks,
    # so entries in flight age too), buckets fill and empty, input gaps and output stalls.
    seed = entries * 1000 + tick * 100 + bits * 10 + every
    rng = random.Random(seed)
    keys = rng.sample(range(1 << key_width), pool)
    tuples = random_tuples(rng, bursty_keys(rng, 400, keys))
    timers = {"tick_tuples": tick, "timer_bits": bits, "sweep_every": every}
    run, expected = check(
        tuples,
        entries=entries,
        ways=ways,
        key_width=key_width,
        seed=seed,
        gap=0.2,
        stall=0.3,
        registered=registered,
        timers=timers,
    )
    assert run.dut.stamp_bits > 0
    fresh = [r.fresh for r in expected if not r.dropped]
    # with one tick per tuple and M = 1 every entry ages out before the next tuple comes
    assert all(fresh) if (tick, bits) == (1, 1) else any(fresh) and not all(fresh)
    # an entry aged out and came back fresh: a fresh tuple of a key processed before
    assert any(
        r.fresh and any(p.key == r.key and not p.dropped for p in expected[:i])
        for i, r in enumerate(expected)
    )


@pytest.mark.parametrize("registered", [True, False])
@pytest.mark.parametrize(("entries", "ways", "key_width"), [(8, 2, 16), (16, 4, 4)])
def test_stamps_wrap_many_times(entries, ways, key_width, registered):
    # Small stamps (a sweep step at least after every tuple) and one tick per tuple: the
    # stamps wrap every 2**S tuples. Keys come back after exactly a multiple of 2**S ticks and
    # just before and after they age out; back to back, so that only forced steps sweep.
    dut = make_table(
        entries=entries, ways=ways, key_width=key_width, tick_tuples=1, timer_bits=2, sweep_every=1
    )
    period = 1 << dut.stamp_bits
    assert period <= 64
    rng = random.Random(period)
    pool = rng.sample(range(1 << key_width), min(2 * entries, 1 << key_width))
    keys, tracked = [], pool[0]
    for gap in [period - 1, 2 * period - 1, 2, 3, 4, period, period + 1, 3 * period - 1, 1]:
        keys.append(tracked)
        keys += [rng.choice(pool[1:]) for _ in range(gap)]
    keys.append(tracked)
    tuples = random_tuples(rng, keys)
    timers = {"tick_tuples": 1, "timer_bits": 2, "sweep_every": 1}
    _, expected = check(
        tuples,
        entries=entries,
        ways=ways,
        key_width=key_width,
        registered=registered,
        timers=timers,
    )
    assert len(tuples) > 8 * period
    tracked_fresh = [r.fresh for r in expected if r.key == tracked and not r.dropped]
    assert tracked_fresh.count(False) >= 1 and tracked_fresh.count(True) >= 5


@pytest.mark.parametrize("every", [1, 8, 1024])
def test_aging_costs_one_cycle_per_sweep_every_tuples(every):
    # Back to back with the output always ready: the input waits one cycle after every
    # `sweep_every` tuples taken without an aging step, and never otherwise.
    rng = random.Random(every)
    keys = [rng.randrange(1 << 16) for _ in range(6)]
    tuples = random_tuples(rng, bursty_keys(rng, 300, keys))
    run, _ = check(
        tuples,
        entries=8,
        ways=2,
        key_width=16,
        timers={"tick_tuples": 2, "timer_bits": 2, "sweep_every": every},
    )
    steps = [b - a for a, b in zip(run.accepted_at, run.accepted_at[1:], strict=False)]
    assert set(steps) <= {1, 2}
    waits = [i for i, d in enumerate(steps) if d == 2]
    assert abs(len(waits) - (len(tuples) - 1) / every) <= 1
    assert all(b - a == every for a, b in itertools.pairwise(waits))
    assert [e - a for a, e in zip(run.accepted_at, run.emitted_at, strict=True)] == [
        run.dut.latency
    ] * len(tuples)


def test_stamp_width_covers_a_sweep_pass():
    # 2**S >= M + ceil(R * sweep_every / K) + 1, R = rows * banks sweep steps per pass
    for entries, ways, key_width, tick, bits, every in [
        (8, 2, 16, 1, 1, 1),
        (65536, 4, 32, 1, 4, 1024),
        (65536, 1, 16, 1000, 4, 1024),
        (16, 4, 3, 7, 8, 5),
    ]:
        dut = make_table(
            entries=entries,
            ways=ways,
            key_width=key_width,
            tick_tuples=tick,
            timer_bits=bits,
            sweep_every=every,
        )
        steps = dut.rows * dut.banks
        need = (1 << bits) - 1 + -(-steps * every // tick) + 1
        assert 1 << dut.stamp_bits >= need > 1 << (dut.stamp_bits - 1)
        assert (
            dut.entry_layout.size
            == 1 + (0 if dut.direct else key_width) + STATE_WIDTH + dut.stamp_bits
        )
    assert make_table(entries=8, ways=2, key_width=16).stamp_bits == 0


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(
    shape=st.sampled_from([(2, 1, 8), (4, 2, 8), (4, 4, 9), (8, 2, 3), (2, 2, 1), (4, 1, 2)]),
    keys=st.lists(st.integers(0, 7), min_size=1, max_size=40),
    tick=st.integers(1, 4),
    bits=st.integers(1, 3),
    every=st.sampled_from([1, 2, 5, 1024]),
    seed=st.integers(0, 2**16),
    gap=st.sampled_from([0.0, 0.5]),
    stall=st.sampled_from([0.0, 0.5]),
)
def test_hypothesis_timers_against_model(shape, keys, tick, bits, every, seed, gap, stall):
    entries, ways, key_width = shape
    mask = (1 << key_width) - 1
    spread = [(k * 0x9E37) & mask for k in keys]
    tuples = [(k, (i * 7 + k) % (1 << PAYLOAD_WIDTH)) for i, k in enumerate(spread)]
    check(
        tuples,
        entries=entries,
        ways=ways,
        key_width=key_width,
        seed=seed,
        gap=gap,
        stall=stall,
        timers={"tick_tuples": tick, "timer_bits": bits, "sweep_every": every},
    )


@pytest.mark.parametrize(("entries", "ways", "key_width"), [(16, 2, 24), (16, 4, 4)])
def test_timers_equal_nfacep_capacity(entries, ways, key_width):
    # The model above and nfacep.reference.capacity's (the reference matcher's, array and
    # sequential)     # agree on drops and fresh with timers.
    from nfacep.reference.capacity import admit

    rng = random.Random(entries + key_width)
    pool = rng.sample(range(1 << key_width), min(40, 1 << key_width))
    keys = bursty_keys(rng, 400, pool)
    params = EngineParams(store="table", partitions=entries, ways=ways, tick_tuples=3, timer_bits=2)
    raw, codes = np.unique(np.array(keys, dtype=np.uint64), return_inverse=True)
    slots = table_slots(raw, key_width, params)
    sequential = admit_sequential(codes.ravel(), params, slots)
    arrays = admit(codes.ravel(), params, slots)
    run, _ = check(
        random_tuples(rng, keys),
        entries=entries,
        ways=ways,
        key_width=key_width,
        seed=9,
        gap=0.1,
        stall=0.4,
        timers={"tick_tuples": 3, "timer_bits": 2},
    )
    for admission in (sequential, arrays):
        assert [not r.dropped for r in run.records] == admission.admitted.tolist()
        assert [r.fresh for r in run.records] == admission.fresh.tolist()
    assert sum(r.fresh for r in run.records) > len(pool)


@pytest.mark.parametrize(
    ("entries", "ways", "key_width", "timers"),
    [
        (8, 2, 16, {}),
        (16, 4, 4, {}),
        (8, 2, 16, {"tick_tuples": 1, "timer_bits": 2}),
        (16, 4, 12, {"tick_tuples": 3, "timer_bits": 2, "sweep_every": 2}),
        (16, 2, 3, {"tick_tuples": 1, "timer_bits": 1, "sweep_every": 1}),
    ],
)
@pytest.mark.parametrize(("gap", "stall"), [(0.0, 0.0), (0.3, 0.3)])
@pytest.mark.parametrize("read_stages", [3, 4, 5])
def test_read_stages_against_model(entries, ways, key_width, timers, gap, stall, read_stages):
    # Three, four or five registers on the block RAM's read path, whatever the timers (the
    # default is four without, five with): a write more in flight to forward and a cycle more
    # of latency for each; with three the tags are compared right after the block RAM's
    # output register, with five a cycle earlier than the choice.
    seed = entries + ways + key_width + len(timers)
    rng = random.Random(seed)
    pool = rng.sample(range(1 << key_width), min(entries + 6, 1 << key_width))
    tuples = random_tuples(rng, bursty_keys(rng, 300, pool))
    run, _ = check(
        tuples,
        entries=entries,
        ways=ways,
        key_width=key_width,
        seed=seed,
        gap=gap,
        stall=stall,
        timers={**timers, "read_stages": read_stages},
    )
    # timers: the row registered, and the banks' port copies (a read register more)
    latency = 3 + read_stages + 2 * bool(timers.get("tick_tuples"))
    assert run.dut.latency == latency
    if gap == stall == 0.0 and not timers:
        assert [e - a for a, e in zip(run.accepted_at, run.emitted_at, strict=True)] == [
            latency
        ] * len(tuples)
        assert run.accepted_at == list(range(run.accepted_at[0], run.accepted_at[0] + 300))


# --- targeted tests ----------------------------------------------------------------------------


@pytest.mark.parametrize(("registered", "copies"), [(True, False), (False, False), (True, True)])
@pytest.mark.parametrize(("entries", "ways", "key_width"), [(8, 2, 16), (16, 4, 4)])
def test_throughput_and_latency(entries, ways, key_width, registered, copies):
    # One tuple per cycle, back to back, whatever the keys (same-key runs included); each
    # record taken `latency` edges after its tuple.
    rng = random.Random(3)
    keys = [rng.randrange(1 << key_width) for _ in range(4)]
    tuples = random_tuples(rng, [keys[0]] * 10 + bursty_keys(rng, 50, keys))
    run, _ = check(
        tuples,
        entries=entries,
        ways=ways,
        key_width=key_width,
        registered=registered,
        timers={"copies": copies},
    )
    assert [b - a for a, b in zip(run.accepted_at, run.accepted_at[1:], strict=False)] == [1] * (
        len(tuples) - 1
    )
    assert [e - a for a, e in zip(run.accepted_at, run.emitted_at, strict=True)] == [
        run.dut.latency
    ] * len(tuples)
    assert run.dut.latency == (7 + copies if registered else 3)
    # the clearing sweep: nothing taken before the rows are cleared, and the first tuple at
    # the first edge after (the sweep's cycles are the first `rows`; the bench counts edges
    # from 1); with the banks' port copies the input's ready is a register of its own
    # (``opened``), set on the edge where the sweep ends
    assert run.accepted_at[0] == run.dut.rows + 1


def test_long_output_stall_loses_nothing():
    rng = random.Random(7)
    tuples = random_tuples(rng, bursty_keys(rng, 60, [rng.randrange(1 << 16) for _ in range(9)]))
    dut = make_table(entries=8, ways=2, key_width=16)
    model = TableModel(entries=8, ways=2, key_width=16)
    expected = model.run(tuples)
    run = simulate(dut, tuples, seed=7, first_stall=300, cycle_limit=5000)
    assert_matches_model(run, expected)
    assert run.drops == model.drops > 0
    # while the output was stalled the table took only what its pipeline holds
    taken_during_stall = sum(1 for cycle in run.accepted_at if cycle < 300)
    assert 1 <= taken_during_stall <= dut.latency
    assert min(run.emitted_at) >= 300


@pytest.mark.parametrize(
    ("entries", "ways", "key_width", "copies"),
    [(8, 2, 16, False), (16, 4, 4, False), (16, 4, 4, True), (16, 4, 4, "spread")],
)
def test_reset_empties_the_table(monkeypatch, entries, ways, key_width, copies):
    # Fill the table, reset it (as the board link's RESET does, with ResetInserter), run
    # again: the second run sees an empty table, and the counters start from zero (with the
    # banks' port copies, a direct table's input waits for the sweep on a register of its
    # own, ``opened``, which the reset clears too; spread over the device, its banks' write
    # rows take the sweep's row from the copy of stage 4's row, which the reset sets to the
    # first).
    from nfacep.hdl import table

    if copies == "spread":
        monkeypatch.setattr(table, "SPREAD_BLOCKS", 0)
    rng = random.Random(11)
    pool = [rng.randrange(1 << key_width) for _ in range(entries + 4)]
    batches = [random_tuples(rng, bursty_keys(rng, 60, pool)) for _ in range(2)]
    dut = make_table(entries=entries, ways=ways, key_width=key_width, copies=bool(copies))
    assert dut._bank_copies == (copies == "spread")
    reset = Signal(name="link_reset")
    collected, counters = [], []

    async def bench(ctx):
        ctx.set(dut.o_stream.ready, 1)
        for batch in batches:
            ctx.set(reset, 1)
            await ctx.tick()
            ctx.set(reset, 0)
            sent, records = 0, []
            while len(records) < len(batch):
                ctx.set(dut.i_stream.valid, sent < len(batch))
                if sent < len(batch):
                    key, payload = batch[sent]
                    ctx.set(dut.i_stream.payload, {"key": key, "payload": payload})
                *_, ready, valid, out = await ctx.tick().sample(
                    dut.i_stream.ready, dut.o_stream.valid, dut.o_stream.payload
                )
                sent += sent < len(batch) and ready
                if valid:
                    records.append(
                        Record(
                            key=out.key,
                            payload=out.payload,
                            dropped=bool(out.dropped),
                            fresh=bool(out.fresh),
                            result=out.result,
                        )
                    )
            ctx.set(dut.i_stream.valid, 0)
            collected.append(records)
            counters.append((ctx.get(dut.tuples), ctx.get(dut.drops)))

    sim = Simulator(ResetInserter(reset)(dut))
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    drops = []
    for batch, records in zip(batches, collected, strict=True):
        model = TableModel(entries=entries, ways=ways, key_width=key_width)
        expected = model.run(batch)
        assert_matches_model(Run(records, 0, 0, [], []), expected)
        drops.append(model.drops)
    assert counters == [(len(b), d) for b, d in zip(batches, drops, strict=True)]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"entries": 6},
        {"ways": 3},
        {"entries": 2, "ways": 4},
        {"entries": 0},
        {"timer_bits": 0},
        {"tick_tuples": -1},
        {"sweep_every": 0},
        {"read_stages": 2},
        {"read_stages": 6},
    ],
)
def test_bad_parameters(kwargs):
    with pytest.raises(ValueError):
        make_table(**{"entries": 8, "ways": 2, "key_width": 8, **kwargs})


@pytest.mark.parametrize(("entries", "ways", "key_width"), [(8, 2, 16), (16, 4, 4)])
@pytest.mark.parametrize(("gap", "stall"), [(0.0, 0.0), (0.3, 0.3)])
def test_port_copies_without_timers_against_model(entries, ways, key_width, gap, stall):
    # A table of more than 64 blocks has its banks' ports copied beside each block, timers or
    # not (a cycle more of latency, a write in flight more to forward); forced on a small one.
    rng = random.Random(entries + key_width)
    pool = rng.sample(range(1 << key_width), min(entries + 6, 1 << key_width))
    tuples = random_tuples(rng, bursty_keys(rng, 300, pool))
    run, _ = check(
        tuples,
        entries=entries,
        ways=ways,
        key_width=key_width,
        seed=entries,
        gap=gap,
        stall=stall,
        timers={"copies": True},
    )
    assert run.dut.latency == 8


@pytest.mark.parametrize(("entries", "ways", "key_width"), [(8, 2, 16), (16, 4, 4)])
@pytest.mark.parametrize(("gap", "stall"), [(0.0, 0.3), (0.3, 0.0)])
@pytest.mark.parametrize("broken", [None, "oldest write", "early row"])
def test_spread_table_against_model(monkeypatch, entries, ways, key_width, gap, stall, broken):
    # A table spread over the device (more than SPREAD_BLOCKS blocks; lowered here so that a
    # small one is) takes its row read through the last gate only, the newest write in flight
    # per way chosen apart, and compares the writes in flight's rows with the operation's a
    # cycle early: the records are the model's, and with the oldest write in flight not
    # forwarded, or those rows compared with the operation's a stage ahead, they are not.
    from nfacep.hdl import table

    monkeypatch.setattr(table, "SPREAD_BLOCKS", 0)
    monkeypatch.setattr(table_forwarding, "BREAK_FORWARDING", broken)
    assert make_table(entries=entries, ways=ways, key_width=key_width).spread
    rng = random.Random(entries + key_width)
    pool = rng.sample(range(1 << key_width), min(entries + 6, 1 << key_width))
    tuples = random_tuples(rng, bursty_keys(rng, 300, pool))
    kwargs = {"entries": entries, "ways": ways, "key_width": key_width, "seed": entries}
    if broken:
        with pytest.raises(AssertionError, match="tuple"):
            check(tuples, gap=gap, stall=stall, **kwargs)
        return
    run, _ = check(tuples, gap=gap, stall=stall, **kwargs)
    assert run.dut.latency == 8  # the banks' ports copied, as any spread table's


@pytest.mark.parametrize(("gap", "stall"), [(0.0, 0.3), (0.3, 0.0), (0.3, 0.3)])
@pytest.mark.parametrize("broken", [None, "bank row", "write row", "row groups"])
def test_spread_direct_table_bank_copies_against_model(monkeypatch, gap, stall, broken):
    # A direct table spread over the device, without timers, reads each bank at copies of
    # its own of the read row, loaded as stage 1's register is, and writes it at write rows
    # of its own, loaded from copies of stage 3's and stage 4's rows, one of each per group of
    # the bank's blocks (here 4,096 rows of 7 bits, two blocks of 4 bits side by side, each
    # group a memory of its own): the records are the model's, stalls included, and with the
    # read row's copies, the copies of those rows, or the copies of the second group loaded
    # at every edge (stalls included) they are not.
    from nfacep.hdl import table

    monkeypatch.setattr(table, "SPREAD_BLOCKS", 0)
    monkeypatch.setattr(table_forwarding, "BREAK_FORWARDING", broken)
    dut = make_table(entries=16384, ways=4, key_width=14)
    assert dut._bank_copies and dut._row_groups == 2
    rng = random.Random(int(10 * gap + 100 * stall))
    # four rows (the first, two more and the last), each in the four banks (the key's low
    # bits), so that operations share rows as in a small table
    pool = [(row << 2) | bank for row in (0, 1, 2, 4095) for bank in range(4)]
    rng.shuffle(pool)
    tuples = random_tuples(rng, bursty_keys(rng, 300, pool))
    kwargs = {"entries": 16384, "ways": 4, "key_width": 14, "seed": 3, "gap": gap, "stall": stall}
    if broken and stall:
        with pytest.raises(AssertionError, match="tuple"):
            check(tuples, **kwargs)
        return
    run, _ = check(tuples, **kwargs)
    assert run.dut.latency == 8


@pytest.mark.parametrize(
    ("key_width", "timers"), [(4, {}), (12, {"tick_tuples": 3, "timer_bits": 2, "copies": True})]
)
@pytest.mark.parametrize(("gap", "stall"), [(0.0, 0.0), (0.3, 0.3)])
def test_result_stage_against_model(key_width, timers, gap, stall):
    # The record registered once more after stage 4 (``result_stage``, the default for a
    # result wider than 32 bits): a cycle more of latency, nothing else changed, stalls
    # included.
    rng = random.Random(key_width)
    pool = rng.sample(range(1 << key_width), min(22, 1 << key_width))
    tuples = random_tuples(rng, bursty_keys(rng, 300, pool))
    run, _ = check(
        tuples,
        entries=16,
        ways=4,
        key_width=key_width,
        seed=key_width,
        gap=gap,
        stall=stall,
        timers={**timers, "result_stage": True},
    )
    # timers: five read registers (a more), the row registered, and the port copies
    latency = 8 + 3 * bool(timers)
    assert run.dut.latency == latency
    if gap == stall == 0.0:
        assert [e - a for a, e in zip(run.accepted_at, run.emitted_at, strict=True)] == [
            latency
        ] * len(tuples)


def test_result_stage_by_default_for_a_wide_result():
    shapes = {"key_shape": 8, "payload_shape": PAYLOAD_WIDTH, "state_width": STATE_WIDTH}
    kwargs = {"entries": 8, "ways": 2, "update": mix_gateware, **shapes}
    assert TablePartitioner(result_shape=32, **kwargs).latency == 7
    assert TablePartitioner(result_shape=33, **kwargs).latency == 8
    assert TablePartitioner(result_shape=33, registered=False, **kwargs).latency == 3


@pytest.mark.parametrize(
    ("entries", "ways", "key_width", "timers"),
    [
        (16, 4, 4, {}),
        (16, 4, 4, {"copies": True}),
        (16, 4, 4, {"result_stage": True}),
        (16, 4, 12, {"tick_tuples": 3, "timer_bits": 2, "sweep_every": 2}),
    ],
)
def test_forwarding_one_write_short_is_caught(monkeypatch, entries, ways, key_width, timers):
    # The tests above would see a forwarding path that misses the oldest write in flight
    # (with timers the one the banks' port copies delay): a broken table fails them.
    monkeypatch.setattr(table_forwarding, "BREAK_FORWARDING", "oldest write")
    rng = random.Random(1)
    pool = rng.sample(range(1 << key_width), min(entries + 6, 1 << key_width))
    tuples = random_tuples(rng, bursty_keys(rng, 300, pool))
    with pytest.raises(AssertionError, match="tuple"):
        check(tuples, entries=entries, ways=ways, key_width=key_width, seed=1, timers=timers)


@pytest.mark.parametrize("broken", ["newest relation", "next relation"])
@pytest.mark.parametrize(("key_width", "timers"), [(4, {}), (12, {"tick_tuples": 3})])
def test_forwarding_relation_of_the_wrong_operations_is_caught(
    monkeypatch, broken, key_width, timers
):
    # Two relations are registers loaded a cycle ahead: whether stage 4's write goes to the
    # row of the operation a cycle before stage 3 (from stage 3's decision, "newest
    # relation"), and whether stage 3's operation and the next one share a row and a key
    # (from the comparison of the two a stage before, "next relation"). Each loaded with the
    # relation of the operations a stage ahead instead (a broken forwarding path), the table
    # fails the tests above.
    monkeypatch.setattr(table_forwarding, "BREAK_FORWARDING", broken)
    rng = random.Random(1)
    pool = rng.sample(range(1 << key_width), min(22, 1 << key_width))
    tuples = random_tuples(rng, bursty_keys(rng, 300, pool))
    with pytest.raises(AssertionError, match="tuple"):
        check(tuples, entries=16, ways=4, key_width=key_width, seed=1, timers=timers)
