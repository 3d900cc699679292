# amaranth: UnusedElaboratable=no
"""The whole engine (decoder ▸ FIFO ▸ partitioner ▸ NFA ▸ filter) against the reference matcher,
in Amaranth's simulator: bundled queries and random ones, partitioner full or not, timers on
or off, random input gaps and output stalls. The cocotb runs of the emitted Verilog are in
test_sim.py."""

import datetime
import ipaddress
import pathlib
import random

import numpy as np
import pytest
import window_cases
from amaranth.sim import Simulator
from bundled import param_values
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import (
    PREV_ADDRESSES,
    PREV_STREAM,
    PREV_TIMES,
    prev_predicates,
    queries,
    scenarios,
    streams,
)
from streams import collect_records, drain_engine, engine_drain, stream_put

import nfacep
from nfacep import wire
from nfacep.hdl.engine import Engine, HardwareLimitError
from nfacep.hdl.measure import cycle_profile
from nfacep.io import reader, tuples
from nfacep.params import EngineParams
from nfacep.reference import matcher as reference

QUERIES = pathlib.Path(__file__).parents[2] / "queries"


def simulate(
    nfa,
    data,
    *,
    partitions,
    tick_tuples=0,
    timer_bits=4,
    store="pipeline",
    ways=4,
    seed=0,
    gap=0.3,
    stall=0.3,
    values=None,
    back_to_back=0,
):
    """Run the engine; return ({seq: match bits}, [dropped seq], counters, cycles). With
    runtime parameters' ``values``, each switch is written to ``i_params`` before its tuple
    is offered; with ``back_to_back`` (``n``), tuples are offered without gaps and each
    switch is written in the cycle the ``n``-th tuple before its own is taken (switches more
    than ``n`` + 1 tuples apart, none before tuple ``n``): with 1, its own is offered the
    cycle after."""
    dut = Engine(
        nfa,
        EngineParams(
            partitions=partitions,
            tick_tuples=tick_tuples,
            timer_bits=timer_bits,
            store=store,
            ways=ways,
        ),
        values=values,
    )
    switches = []
    if values:
        width = dut.param_values.shape().size
        for at, _ in values.switches:
            switches.append((at, values.packed(values.in_force(at)) | at << width))
    drain = engine_drain(store, partitions, ways)
    payloads = wire.pack(nfa.program.schema, data)
    rng_in, rng_out = random.Random(seed), random.Random(seed + 1)
    records = []
    done = {}

    async def together(ctx):
        pending = list(switches)
        ctx.set(dut.i_stream.valid, 1)
        for i, p in enumerate(payloads):
            ctx.set(dut.i_stream.payload.as_value(), p)
            taken = False
            while not taken:
                taken = ctx.get(dut.i_stream.ready)
                write = bool(taken and pending and pending[0][0] == i + back_to_back)
                if write:
                    assert ctx.get(dut.i_params.ready), f"switch {pending[0][0]} not taken"
                    ctx.set(dut.i_params.valid, 1)
                    ctx.set(dut.i_params.payload.as_value(), pending.pop(0)[1])
                await ctx.tick()
                ctx.set(dut.i_params.valid, 0)
        ctx.set(dut.i_stream.valid, 0)
        assert not pending
        await drain_engine(ctx, dut, drain, done)

    async def producer(ctx):
        pending = list(switches)
        for i, p in enumerate(payloads):
            while pending and pending[0][0] <= i:
                for _ in range(drain):  # the switch before is applied: ready (no deadlock)
                    if ctx.get(dut.i_params.ready):
                        break
                    await ctx.tick()
                assert ctx.get(dut.i_params.ready), f"no switch taken before tuple {i}"
                await stream_put(ctx, dut.i_params, pending.pop(0)[1], rng=rng_in, gap=gap)
            await stream_put(ctx, dut.i_stream, p, rng=rng_in, gap=gap)
        await drain_engine(ctx, dut, drain, done)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(together if back_to_back else producer)
    sim.add_testbench(collect_records(dut, records, done, rng=rng_out, stall=stall))
    sim.run()
    return records, done


def expected(nfa, data, values=None, **params):
    r = reference.run(nfa, data, EngineParams(**params), values=values)
    bits = {}
    for seq, q in zip(r.seqs.tolist(), r.queries.tolist(), strict=True):
        bits[seq] = bits.get(seq, 0) | 1 << q
    return bits, r.drops.tolist()


def check(nfa, data, values=None, **params):
    records, counters = simulate(nfa, data, values=values, **params)
    seqs = [r[0] for r in records]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)  # in order, once each
    hw_matches = {seq: m for seq, _, m, d, _ in records if not d}
    hw_drops = [seq for seq, _, m, d, _ in records if d]
    assert all(m == 0 for _, _, m, d, _ in records if d)
    sw = {
        k: v
        for k, v in params.items()
        if k in ("partitions", "tick_tuples", "timer_bits", "store", "ways")
    }
    bits, drops = expected(nfa, data, values, **sw)
    assert hw_matches == bits
    assert hw_drops == drops
    assert counters == {"tuples": data.n, "matched": len(bits), "drops": len(drops)}
    if nfa.program.partition_fields:  # the record carries the key's bits
        col = wire.key_raw(nfa.program.key, data)
        for seq, part, _, _, _ in records:
            assert part == int(col[seq])
    if wire.start_queries(nfa):  # where the matches begin, as the reference's records say
        r = reference.run(nfa, data, EngineParams(**sw), values=values)
        want = {rec.seq: rec.starts for rec in r.records(nfa, data)}
        assert {seq: b for seq, _, _, _, b in records} == want
    return bits, drops


@pytest.mark.parametrize("name", ["marathon", "fire", "bruteforce", "vshape", "supplychain"])
def test_bundled_query(name):
    nfa = nfacep.compile_file(str(QUERIES / f"{name}.sql"))
    data = reader.read(str(QUERIES / f"{name}.csv"), nfa.program.schema)
    bits, _ = check(nfa, data, param_values(name, nfa), partitions=64, seed=len(name))
    assert bits


STREAM = "CREATE STREAM s (k UINT(5), a INT(6), c BOOL, e ENUM('x', 'y', 'z'));\n"
DEFINE = "DEFINE A AS a < 6 B AS a > -3 AND c C AS e <> 'y'"
PATTERNS = ["A B* C", "(A | B)+ C?", "A{2,3} B", "PERMUTE(A, B) C*", "A . B"]


def random_data(rng, n, keys):
    return tuples.Tuples(
        {
            "k": rng.integers(0, keys, n).astype(np.uint64),
            "a": rng.integers(-32, 32, n),
            "c": rng.integers(0, 2, n) > 0,
            "e": rng.integers(0, 3, n),
        },
        n,
    )


@pytest.mark.parametrize(
    ("partitions", "tick_tuples", "timer_bits"),
    [(4, 0, 4), (3, 2, 2), (5, 3, 2), (6, 1, 3), (1, 0, 1)],
)
def test_random_queries_with_capacity_and_timers(partitions, tick_tuples, timer_bits):
    text = STREAM + "".join(
        f"QUERY q{i} PARTITION k {'AFTER MATCH SKIP PAST LAST ROW ' if i % 2 else ''}"
        f"PATTERN ({p}) {DEFINE};"
        for i, p in enumerate(PATTERNS)
    )
    nfa = nfacep.compile_text(text)
    rng = np.random.default_rng(partitions * 7 + tick_tuples)
    data = random_data(rng, 250, keys=10)
    bits, drops = check(
        nfa,
        data,
        partitions=partitions,
        tick_tuples=tick_tuples,
        timer_bits=timer_bits,
        seed=partitions,
    )
    assert bits and drops


def test_unpartitioned_engine():
    text = STREAM + "".join(f"QUERY q{i} PATTERN ({p}) {DEFINE};" for i, p in enumerate(PATTERNS))
    nfa = nfacep.compile_text(text)
    data = random_data(np.random.default_rng(5), 300, keys=10)
    bits, drops = check(nfa, data, partitions=1, seed=3)
    assert bits and not drops


def test_stalled_output_loses_nothing():
    nfa = nfacep.compile_file(str(QUERIES / "marathon.sql"))
    data = reader.read(str(QUERIES / "marathon.csv"), nfa.program.schema)
    check(nfa, data, partitions=64, seed=9, gap=0.0, stall=0.9)


def test_limits_fail_at_compile_time():
    nfa = nfacep.compile_text(STREAM + "QUERY q PARTITION k PATTERN (A)")
    with pytest.raises(HardwareLimitError, match="--partitions is 70000, more than"):
        Engine(nfa, EngineParams(partitions=70000))


def test_verilog_ports_are_pinned(tmp_path):
    """The port names are an API: the cocotb testbench and board top-levels depend on them."""
    from nfacep.cli import main

    out = tmp_path / "engine.v"
    assert (
        main(
            [
                "verilog",
                str(QUERIES / "marathon.sql"),
                "-o",
                str(out),
                "--store",
                "pipeline",
                "--partitions",
                "4",
            ]
        )
        == 0
    )
    text = out.read_text()
    start = text.index("module nfacep_engine(")
    head = text[start + len("module nfacep_engine(") : text.index(");", start)]
    ports = sorted(p.strip() for p in head.replace("\n", "").split(","))
    assert ports == sorted(
        [
            "clk",
            "rst",
            "i_stream__payload",
            "i_stream__valid",
            "i_stream__ready",
            "o_stream__payload",
            "o_stream__valid",
            "o_stream__ready",
            "tuples",
            "matched",
            "drops",
        ]
    )
    import json

    sidecar = json.loads((tmp_path / "engine.json").read_text())
    assert sidecar["ports"]["i_stream__payload"] == {"dir": "in", "width": 83}
    assert [f["name"] for f in sidecar["record"]["fields"]] == [
        "seq",
        "partition",
        "matches",
        "dropped",
    ]
    assert sidecar["queries"] == [
        {"name": "cheat", "bit": 0, "skip_past_last_row": False, "states": 9}
    ]


@pytest.mark.parametrize(
    ("partitions", "latency", "cycles_per_tuple"), [(None, 4, 1), (1, 5, 1), (4, 9, 2), (16, 21, 2)]
)
def test_latency_and_throughput(partitions, latency, cycles_per_tuple):
    """The docstring's contract, in cycles (deterministic, not a timing)."""
    part = "PARTITION k " if partitions else ""
    nfa = nfacep.compile_text(
        f"CREATE STREAM s (k UINT(4), a UINT(4)); QUERY q {part}PATTERN (A) DEFINE A AS a = 1"
    )
    n = 40
    data = tuples.Tuples({"k": (np.arange(n) % 3).astype(np.uint64), "a": np.ones(n, np.uint64)}, n)
    dut = Engine(nfa, EngineParams(partitions=partitions or 1))
    seen = cycle_profile(dut, wire.pack(nfa.program.schema, data), expect_records=n)
    assert seen["latency"] == latency
    assert seen["cycles_per_tuple"] == cycles_per_tuple


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(
    sc=scenarios(),
    rows=streams(max_len=40, keys=6),
    partitions=st.integers(1, 4),
    tick_tuples=st.integers(0, 4),
    timer_bits=st.integers(1, 3),
    seed=st.integers(0, 1000),
)
def test_random_scenarios(sc, rows, partitions, tick_tuples, timer_bits, seed):
    """Random query files (every pattern operator, both forms, both skip modes, with and
    without PARTITION) and streams, through the gateware, equal the reference exactly."""
    nfa = nfacep.compile_text(sc.text)
    n = len(rows)
    data = tuples.Tuples(
        {
            "k": np.array([r["k"] for r in rows], dtype=np.uint64),
            **{p: np.array([bool(r[p]) for r in rows], dtype=bool) for p in ("p0", "p1", "p2")},
        },
        n,
    )
    check(
        nfa, data, partitions=partitions, tick_tuples=tick_tuples, timer_bits=timer_bits, seed=seed
    )


# --- the block-RAM table (--store table) -------------------------------------------------------

TABLE_STREAM = "CREATE STREAM s (k UINT({bits}), a INT(6), c BOOL, e ENUM('x', 'y', 'z'));\n"


def table_queries(key_bits):
    return nfacep.compile_text(
        TABLE_STREAM.format(bits=key_bits)
        + "".join(
            f"QUERY q{i} PARTITION k {'AFTER MATCH SKIP PAST LAST ROW ' if i % 2 else ''}"
            f"PATTERN ({p}) {DEFINE};"
            for i, p in enumerate(PATTERNS)
        )
    )


def table_data(rng, n, pool):
    """Random tuples over the keys ``pool``, in same-key bursts and interleaved."""
    keys = []
    while len(keys) < n:
        keys += [int(rng.choice(pool))] * int(rng.integers(1, 5))
    data = random_data(rng, n, keys=1)
    data.columns["k"] = np.array(keys[:n], dtype=np.uint64)
    return data


# (key bits, partitions, ways, distinct keys): direct (key fits the index) and hashed with
# buckets that fill up
@pytest.mark.parametrize(
    ("key_bits", "partitions", "ways", "keys"),
    [(4, 16, 4, 16), (3, 16, 2, 8), (16, 8, 2, 14), (32, 16, 4, 40), (12, 4, 1, 9), (64, 8, 8, 12)],
)
def test_table_store_against_reference(key_bits, partitions, ways, keys):
    nfa = table_queries(key_bits)
    rng = np.random.default_rng(key_bits * 100 + partitions + ways)
    pool = rng.choice(1 << min(key_bits, 62), size=keys, replace=False)
    if key_bits == 64:
        pool = pool.astype(np.uint64) | np.uint64(1 << 63)
    data = table_data(rng, 250, pool)
    bits, drops = check(nfa, data, partitions=partitions, store="table", ways=ways, seed=key_bits)
    assert bits
    direct = key_bits <= (partitions - 1).bit_length()
    assert bool(drops) != direct


@pytest.mark.parametrize(
    ("key_bits", "partitions", "ways", "keys", "tick", "bits"),
    [
        (4, 16, 4, 16, 1, 2),
        (16, 8, 2, 14, 4, 2),
        (32, 16, 4, 40, 4, 3),
        (12, 4, 1, 9, 2, 2),
        (12, 4, 1, 9, 1, 1),
    ],
)
def test_table_store_with_timers_against_reference(key_bits, partitions, ways, keys, tick, bits):
    # entries age out (idle keys start again; full buckets empty) while tuples are in flight
    nfa = table_queries(key_bits)
    rng = np.random.default_rng(key_bits * 100 + partitions + ways + tick)
    pool = rng.choice(1 << min(key_bits, 62), size=keys, replace=False)
    data = table_data(rng, 250, pool)
    found, drops = check(
        nfa,
        data,
        partitions=partitions,
        store="table",
        ways=ways,
        tick_tuples=tick,
        timer_bits=bits,
        seed=key_bits,
    )
    assert found
    direct = key_bits <= (partitions - 1).bit_length()
    # hashed, buckets fill, except with one tick per tuple and M = 1 (nothing stays)
    assert bool(drops) == (not direct and (tick, bits) != (1, 1))


KEYS_STREAM = (
    "CREATE STREAM s (k UINT({k}), a INT(6), c BOOL, e ENUM('x', 'y', 'z'), j INT({j}));\n"
)


# (store, k bits, j bits, partitions, ways, tick_tuples, timer_bits): the key (e, k, j) of 2 +
# k + j bits indexes the table directly, or is hashed into buckets that fill up; the pipeline
# store full, with and without timers
@pytest.mark.parametrize(
    ("store", "k", "j", "partitions", "ways", "tick", "bits"),
    [
        ("table", 1, 2, 32, 4, 0, 4),
        ("table", 8, 4, 16, 2, 0, 4),
        ("table", 8, 4, 16, 2, 4, 2),
        ("pipeline", 3, 3, 5, 1, 0, 4),
        ("pipeline", 3, 3, 5, 1, 3, 2),
    ],
)
def test_several_key_fields_against_reference(store, k, j, partitions, ways, tick, bits):
    """PARTITION BY e, k, j: the engine compares (and hashes) the fields' bits concatenated,
    the record carries them, and matches and drops are the reference's."""
    nfa = nfacep.compile_text(
        KEYS_STREAM.format(k=k, j=j)
        + "".join(
            f"QUERY q{i} PARTITION BY e, k, j {'AFTER MATCH SKIP PAST LAST ROW ' if i % 2 else ''}"
            f"PATTERN ({p}) {DEFINE};"
            for i, p in enumerate(PATTERNS[:3])
        )
    )
    assert nfa.program.key.width == 2 + k + j
    rng = np.random.default_rng(k * 100 + j + partitions + tick)
    combos = sorted(
        {
            (int(rng.integers(3)), int(rng.integers(1 << k)), int(rng.integers(-(1 << j - 1), 1)))
            for _ in range(24)
        }
    )
    picks = []
    while len(picks) < 250:
        picks += [combos[int(rng.integers(len(combos)))]] * int(rng.integers(1, 4))
    e_col, k_col, j_col = zip(*picks[:250], strict=True)
    data = random_data(rng, 250, keys=1)
    data.columns.update(
        e=np.array(e_col, dtype=np.int64),
        k=np.array(k_col, dtype=np.uint64),
        j=np.array(j_col, dtype=np.int64),
    )
    found, drops = check(
        nfa,
        data,
        partitions=partitions,
        store=store,
        ways=ways,
        tick_tuples=tick,
        timer_bits=bits,
        seed=k + j,
    )
    assert found
    direct = store == "table" and 2 + k + j <= (partitions - 1).bit_length()
    assert bool(drops) == (not direct)


@pytest.mark.slow
def test_table_bundled_query_stalled():
    nfa = nfacep.compile_file(str(QUERIES / "bruteforce.sql"))
    data = reader.read(str(QUERIES / "bruteforce.csv"), nfa.program.schema)
    bits, drops = check(nfa, data, partitions=16, store="table", ways=2, seed=4, gap=0.0, stall=0.7)
    assert bits and drops


@pytest.mark.parametrize(
    ("partitions", "ways", "key_bits", "ticks"), [(16, 4, 4, 0), (8, 2, 16, 0), (8, 2, 16, 3)]
)
def test_table_latency_and_throughput(partitions, ways, key_bits, ticks):
    """One tuple per cycle with the table, same-key runs included; the docstring's latency
    (three cycles more with timers: the registered read row, a fifth read register and the
    banks' port copies)."""
    nfa = nfacep.compile_text(
        f"CREATE STREAM s (k UINT({key_bits}), a UINT(4)); QUERY q "
        "PARTITION k PATTERN (A) DEFINE A AS a = 1"
    )
    n = 40
    keys = np.array([5] * 10 + [k % 3 for k in range(n - 10)], dtype=np.uint64)
    data = tuples.Tuples({"k": keys, "a": np.ones(n, np.uint64)}, n)
    dut = Engine(
        nfa, EngineParams(partitions=partitions, store="table", ways=ways, tick_tuples=ticks)
    )
    # the first tuples are offered once the table's clearing sweep (4 rows) is over
    seen = cycle_profile(dut, wire.pack(nfa.program.schema, data), expect_records=n, warmup=8)
    assert seen["latency"] == (13 if ticks else 10)
    assert seen["cycles_per_tuple"] == 1
    assert seen["accepted_per_cycle"] == 1


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(
    sc=scenarios(partitioned=True),
    rows=streams(max_len=40, keys=6),
    shape=st.sampled_from([(2, 1), (2, 2), (4, 2), (4, 1), (256, 4)]),
    timers=st.sampled_from([(0, 4), (0, 4), (1, 1), (1, 2), (3, 1)]),
    seed=st.integers(0, 1000),
)
def test_random_scenarios_table(sc, rows, shape, timers, seed):
    """Random partitioned query files through the table store (8-bit keys: hashed into small
    tables that fill up, or direct with 256 entries), with and without timers, equal the
    reference exactly."""
    partitions, ways = shape
    tick, bits = timers
    nfa = nfacep.compile_text(sc.text)
    n = len(rows)
    data = tuples.Tuples(
        {
            "k": np.array([r["k"] for r in rows], dtype=np.uint64),
            **{p: np.array([bool(r[p]) for r in rows], dtype=bool) for p in ("p0", "p1", "p2")},
        },
        n,
    )
    check(
        nfa,
        data,
        partitions=partitions,
        store="table",
        ways=ways,
        tick_tuples=tick,
        timer_bits=bits,
        seed=seed,
    )


# --- time windows (WITHIN) ---------------------------------------------------------------------

WINDOW_STREAM = (
    "CREATE STREAM s (k UINT(4), a INT(6), c BOOL, e ENUM('x', 'y', 'z'), t UINT(16), u INT(12));\n"
)
# windows of 1, a power of two, just above one, and two queries without a window beside them
WINDOWED = [
    ("A B* C", "t", 8),
    ("(A | B)+ C?", "t", 1),
    ("A{2,3} B", "u", 9),
    ("PERMUTE(A, B) C*", None, None),
    ("A . B", "t", 33),
    ("A+ B", None, None),
]


def window_queries(partitioned=True):
    part = "PARTITION k " if partitioned else ""
    text = WINDOW_STREAM
    for i, (pattern, field, n) in enumerate(WINDOWED):
        order = f"ORDER BY {field} " if field else ""
        within = f"WITHIN {n} " if n else ""
        skip = "AFTER MATCH SKIP PAST LAST ROW " if i % 2 else ""
        text += f"QUERY q{i} {part}{order}{skip}PATTERN ({pattern}) {within}{DEFINE};"
    return nfacep.compile_text(text)


def window_data(rng, n, keys):
    """Random tuples whose times ascend in steps of 0 to 5, with now and then a jump of a
    multiple of 64 or 1024 (gaps a stored age cannot span, landing on the same low bits)."""
    data = random_data(rng, n, keys)
    steps = rng.integers(0, 6, n)
    jumps = rng.random(n) < 0.04
    steps[jumps] = rng.choice([64, 128, 1024, 2048], jumps.sum())
    t = np.cumsum(steps)
    data.columns["t"] = t.astype(np.uint64)
    data.columns["u"] = (t // 8 - 1000).astype(np.int64)  # signed, several tuples 0 apart
    assert t[-1] < 1 << 16 and data.columns["u"][-1] < 2048
    return data


@pytest.mark.parametrize(
    ("store", "partitions", "ways", "tick_tuples", "seed"),
    [
        ("pipeline", 8, 4, 0, 1),
        ("pipeline", 4, 4, 3, 2),
        ("table", 16, 4, 0, 3),
        ("table", 8, 2, 2, 4),
    ],
)
def test_windows_against_reference(store, partitions, ways, tick_tuples, seed):
    """WITHIN in the gateware: every query's matches and drops equal the reference's, in both
    partition stores, with capacity drops and timers, across gaps longer than an age holds."""
    nfa = window_queries()
    data = window_data(np.random.default_rng(seed), 300, keys=10)
    bits, _ = check(
        nfa,
        data,
        partitions=partitions,
        store=store,
        ways=ways,
        tick_tuples=tick_tuples,
        timer_bits=2,
        seed=seed,
    )
    assert bits


def test_windows_unpartitioned():
    nfa = window_queries(partitioned=False)
    data = window_data(np.random.default_rng(11), 300, keys=1)
    bits, drops = check(nfa, data, partitions=1, seed=5)
    assert bits and not drops


@pytest.mark.slow
@settings(max_examples=20, deadline=None)
@given(
    picks=st.lists(
        st.tuples(
            st.sampled_from(PATTERNS),
            st.sampled_from(["t", "u"]),
            st.integers(1, 70) | st.none(),
            st.booleans(),
            st.booleans(),
        ),
        min_size=1,
        max_size=3,
    ),
    shape=st.sampled_from(
        [("pipeline", 3, 4), ("pipeline", 16, 4), ("table", 4, 2), ("table", 16, 4)]
    ),
    timers=st.sampled_from([(0, 4), (2, 2), (1, 1)]),
    seed=st.integers(0, 1000),
)
def test_random_windows(picks, shape, timers, seed):
    """Random queries with windows (of 1 to 70 in an unsigned or a signed field) or not, that
    report start_seq or not, both skip modes, in both stores, full or not, with and without
    timers, equal the reference."""
    store, partitions, ways = shape
    text = WINDOW_STREAM + "".join(
        f"QUERY q{i} PARTITION k ORDER BY {f} "
        f"{'MEASURES FIRST(seq) AS start_seq ' if starts else ''}"
        f"{'AFTER MATCH SKIP PAST LAST ROW ' if skip else ''}"
        f"PATTERN ({p}) {'' if n is None else f'WITHIN {n} '}{DEFINE};"
        for i, (p, f, n, skip, starts) in enumerate(picks)
    )
    nfa = nfacep.compile_text(text)
    data = window_data(np.random.default_rng(seed), 120, keys=6)
    check(
        nfa,
        data,
        partitions=partitions,
        store=store,
        ways=ways,
        tick_tuples=timers[0],
        timer_bits=timers[1],
        seed=seed,
    )


# --- where matches begin (start_seq) ------------------------------------------------------


def start_queries_text(partitioned=True, windows=True):
    """Queries that report start_seq (with and without windows, both skip modes, several
    accepting states with different starts) beside ones that do not."""
    part = "PARTITION k " if partitioned else ""
    measure = "MEASURES FIRST(seq) AS start_seq "
    text = WINDOW_STREAM
    picks = [
        ("A | B A", None, True),
        ("(A | B)+ C", "t" if windows else None, True),
        ("A B* C", None, False),
        ("A .* (B | C A)", "u" if windows else None, True),
        ("A{2,3} B?", None, True),
    ]
    for i, (pattern, field, starts) in enumerate(picks):
        order = f"ORDER BY {field} " if field else ""
        within = f"WITHIN {9 if field == 't' else 3} " if field else ""
        skip = "AFTER MATCH SKIP PAST LAST ROW " if i % 2 else ""
        text += (
            f"QUERY q{i} {part}{order}{measure if starts else ''}{skip}PATTERN ({pattern}) "
            f"{within}{DEFINE};"
        )
    return nfacep.compile_text(text)


@pytest.mark.parametrize(
    ("store", "partitions", "ways", "tick_tuples", "seed"),
    [
        ("pipeline", 8, 4, 0, 1),
        ("pipeline", 4, 4, 3, 2),
        ("table", 16, 4, 0, 3),
        ("table", 8, 2, 2, 4),
    ],
)
def test_start_seq_against_reference(store, partitions, ways, tick_tuples, seed):
    """start_seq in the gateware: matches, drops and where each match begins equal the
    reference's, in both stores, with capacity drops, timers and windows."""
    nfa = start_queries_text()
    data = window_data(np.random.default_rng(seed), 300, keys=10)
    bits, _ = check(
        nfa,
        data,
        partitions=partitions,
        store=store,
        ways=ways,
        tick_tuples=tick_tuples,
        timer_bits=2,
        seed=seed,
    )
    assert bits
    got = reference.run(
        nfa,
        data,
        EngineParams(
            partitions=partitions, store=store, ways=ways, tick_tuples=tick_tuples, timer_bits=2
        ),
    )
    assert len(set(got.starts[got.starts > 0].tolist())) > 20  # many distinct starts


def test_start_seq_chosen_after_the_result_register():
    """In the table store a result with starts passes a register of its own after stage 4
    (``result_stage``), holding each candidate start and whether it is the one, and the choice
    is made after it: a cycle more of latency; the tests above check the records."""
    import gc
    import warnings

    from amaranth.hdl import UnusedElaboratable

    from nfacep.hdl.engine_shared import partition_store
    from nfacep.hdl.engine_update import store_update
    from nfacep.hdl.nfa_layout import pending_layout, result_layout

    nfa = start_queries_text()
    payload_shape, state_width, update = store_update(nfa)
    shapes = {"key_shape": 4, "payload_shape": payload_shape, "state_width": state_width}
    params = EngineParams(store="table", partitions=16, ways=4)
    store = partition_store(params, result_shape=result_layout(nfa).size, update=update, **shapes)
    plain = partition_store(params, result_shape=len(nfa.queries), update=update, **shapes)
    latencies = (store.latency, plain.latency)
    with warnings.catch_warnings():  # built to read their latency, never elaborated
        warnings.simplefilter("ignore", UnusedElaboratable)
        del store, plain
        gc.collect()
    assert latencies[0] == latencies[1] + 1
    assert update.pending_width == pending_layout(nfa).size > result_layout(nfa).size


def test_start_seq_unpartitioned():
    nfa = start_queries_text(partitioned=False, windows=False)
    data = window_data(np.random.default_rng(12), 300, keys=1)
    bits, drops = check(nfa, data, partitions=1, seed=6)
    assert bits and not drops


# --- runtime parameters (:name) --------------------------------------------------------------

PARAM_STREAM = "CREATE STREAM s (k UINT(4), a INT(6), c BOOL, e ENUM('x', 'y', 'z'), f FLOAT32);\n"
PARAM_DEFINE = "DEFINE A AS a < :lo, B AS a > :hi AND c = :on, C AS e <> :tag OR f >= :lim"


def param_data(rng, n, keys):
    data = random_data(rng, n, keys)
    data.columns["f"] = rng.choice([-1.5, -0.0, 0.0, 0.25, 2.0, np.inf, np.nan], n).astype(
        np.float32
    )
    return data


@pytest.mark.parametrize(
    ("store", "partitioned", "seed"),
    [("pipeline", True, 1), ("table", True, 2), ("pipeline", False, 3)],
)
def test_parameters_switch_exactly(store, partitioned, seed):
    """The decoder compares with the parameter registers; switches written on ``i_params``
    take effect exactly at their tuples, one after the next, several parameters at once."""
    from nfacep.settings import ParamValues

    part = "PARTITION k " if partitioned else ""
    nfa = nfacep.compile_text(
        PARAM_STREAM
        + "".join(f"QUERY q{i} {part}PATTERN ({p}) {PARAM_DEFINE};" for i, p in enumerate(PATTERNS))
    )
    rng = np.random.default_rng(seed)
    data = param_data(rng, 300, keys=8 if partitioned else 1)
    texts = [
        "lo=6",
        "hi=-3",
        "on=true",
        "tag=y",
        "lim=0.5",
        "lo=0@1",
        "hi=10@40",
        "tag=x@40",
        "on=false@41",
        "lim=-0.0@100",
        "lo=20@150",
        "hi=-20@150",
        "lim=3e38@230",
        "tag=z@299",
    ]
    values = ParamValues.parse(nfa.program.parameters, texts)
    bits, _ = check(
        nfa, data, values=values, partitions=16 if partitioned else 1, store=store, seed=seed
    )
    fixed = ParamValues.parse(nfa.program.parameters, texts[:5])
    assert (
        bits != expected(nfa, data, fixed, partitions=16 if partitioned else 1, store=store)[0]
    )  # the switches change what matches


@pytest.mark.parametrize(("store", "partitioned"), [("table", True), ("pipeline", False)])
def test_parameters_switch_written_with_the_tuple_before(store, partitioned, monkeypatch):
    """A switch written in the same cycle as the tuple before its own is taken, its own
    offered the cycle after, applies exactly from its own: the engine takes no tuple the
    two cycles after a write, while it compares the written number (``BREAK_PARAMS = "no
    hold"`` takes the switch's own then, decoded with the old values, and fails)."""
    from nfacep.hdl import engine as engine_module
    from nfacep.settings import ParamValues

    part = "PARTITION k " if partitioned else ""
    nfa = nfacep.compile_text(PARAM_STREAM + f"QUERY q {part}PATTERN (A) DEFINE A AS a < :lo")
    data = param_data(np.random.default_rng(5), 80, keys=8 if partitioned else 1)
    # every tuple matches with lo=1 and none with lo=0: each switch changes its own tuple's
    data.columns["a"] = np.zeros_like(data.columns["a"])
    values = ParamValues.parse(
        nfa.program.parameters, ["lo=0", "lo=1@1", "lo=0@4", "lo=1@7", "lo=0@30", "lo=1@50"]
    )
    params = {"partitions": 16 if partitioned else 1, "store": store}
    bits, _ = check(nfa, data, values=values, back_to_back=1, **params)
    assert sorted(bits) == [*range(1, 4), *range(7, 30), *range(50, 80)]
    monkeypatch.setattr(engine_module, "BREAK_PARAMS", "no hold")
    with pytest.raises(AssertionError):
        check(nfa, data, values=values, back_to_back=1, **params)


@pytest.mark.parametrize(("store", "partitioned"), [("table", True), ("pipeline", False)])
def test_parameters_switch_written_tuples_ahead(store, partitioned):
    """A switch written in the same cycle as the third tuple before its own is taken, the
    tuples back to back, applies exactly from its own: the engine finds the tuple before it
    (``param_before_switch``, worked out a tuple ahead) as the tuples pass."""
    from nfacep.settings import ParamValues

    part = "PARTITION k " if partitioned else ""
    nfa = nfacep.compile_text(PARAM_STREAM + f"QUERY q {part}PATTERN (A) DEFINE A AS a < :lo")
    data = param_data(np.random.default_rng(6), 80, keys=8 if partitioned else 1)
    data.columns["a"] = np.zeros_like(data.columns["a"])  # matches iff lo=1
    values = ParamValues.parse(
        nfa.program.parameters, ["lo=0", "lo=1@4", "lo=0@8", "lo=1@12", "lo=0@30", "lo=1@50"]
    )
    params = {"partitions": 16 if partitioned else 1, "store": store}
    bits, _ = check(nfa, data, values=values, back_to_back=3, **params)
    assert sorted(bits) == [*range(4, 8), *range(12, 30), *range(50, 80)]


def test_parameter_values_after_reset_and_in_force():
    from nfacep.settings import ParamValues

    nfa = nfacep.compile_text(PARAM_STREAM + f"QUERY q PATTERN (A B C) {PARAM_DEFINE}")
    values = ParamValues.parse(
        nfa.program.parameters, ["lo=-7", "hi=3", "on=true", "tag=z", "lim=1.5"]
    )
    dut = Engine(nfa, values=values)
    seen = {}

    async def bench(ctx):
        seen["reset"] = ctx.get(dut.param_values.as_value())
        await stream_put(
            ctx,
            dut.i_params,
            values.packed({**values.initial, "lo": 5}) | 2 << dut.param_values.shape().size,
        )
        assert not ctx.get(dut.i_params.ready)  # waits for tuple 2
        for _ in range(3):
            await stream_put(ctx, dut.i_stream, 0)
        seen["after"] = ctx.get(dut.param_values.as_value())
        seen["ready"] = ctx.get(dut.i_params.ready)
        # a switch whose tuple (1) has passed takes effect at the next tuple taken (3)
        await stream_put(
            ctx,
            dut.i_params,
            values.packed({**values.initial, "lo": -2}) | 1 << dut.param_values.shape().size,
        )
        await ctx.tick().repeat(3)
        seen["idle"] = ctx.get(dut.param_values.as_value())
        await stream_put(ctx, dut.i_stream, 0)
        await ctx.tick()
        seen["late"] = ctx.get(dut.param_values.as_value())

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert seen["reset"] == values.packed(values.initial)
    assert seen["after"] == values.packed({**values.initial, "lo": 5}) and seen["ready"]
    assert seen["idle"] == seen["after"]  # no tuple yet: nothing switches
    assert seen["late"] == values.packed({**values.initial, "lo": -2})
    with pytest.raises(nfacep.errors.UsageError, match="need values: --param lo="):
        Engine(nfa)


# --- PREV: the partition's earlier tuples, kept in its entry ---------------------------------

PREV_FIELDS = "CREATE STREAM s (k UINT(4), a INT(6), c BOOL, e ENUM('x', 'y', 'z'), f FLOAT32);\n"
# every type PREV reads, several depths of one field (one history), NULLs under NOT, AND, OR,
# a parameter, beside a predicate without PREV; WITHIN and start_seq beside them
PREV_DEFINE = (
    "DEFINE A AS a > PREV(a) OR PREV(c), B AS PREV(a, 3) <= a - 1 AND NOT (PREV(f) < f), "
    "C AS e <> PREV(e, 2) AND (PREV(a, 2) + PREV(a) > a OR PREV(a) > :lo OR c)"
)
PREV_PATTERNS = ["A B+ C", "(A | C) B? A", "A{2} .* C", "B C | A"]


def prev_queries(partitioned=True):
    part = "PARTITION k " if partitioned else ""
    text = PREV_FIELDS
    for i, pattern in enumerate(PREV_PATTERNS):
        head = ["", "ORDER BY a ", "MEASURES FIRST(seq) AS start_seq ", ""][i]
        within = " WITHIN 9" if head.startswith("ORDER") else ""
        skip = "AFTER MATCH SKIP PAST LAST ROW " if i % 2 else ""
        text += f"QUERY q{i} {part}{head}{skip}PATTERN ({pattern}){within} {PREV_DEFINE};"
    return nfacep.compile_text(text)


def prev_data(rng, n, keys):
    """Random tuples of PREV_FIELDS, ``a`` ascending (the ORDER BY field of a window)."""
    data = param_data(rng, n, keys)
    data.columns["a"] = np.sort(data.columns["a"])
    return data


@pytest.mark.parametrize(
    ("store", "partitions", "ways", "tick_tuples", "timer_bits", "seed"),
    [
        ("pipeline", 16, 4, 0, 4, 1),
        ("pipeline", 3, 4, 2, 2, 2),
        ("table", 16, 4, 0, 4, 3),
        ("table", 4, 2, 0, 4, 4),
        ("table", 4, 2, 3, 2, 5),
    ],
)
def test_prev_against_reference(store, partitions, ways, tick_tuples, timer_bits, seed):
    """PREV in the gateware: each partition's entry keeps its history; matches, drops and
    starts equal the reference's in both stores, with a full store (drops are no rows) and
    timers (a freed partition forgets its history)."""
    from nfacep.settings import ParamValues

    nfa = prev_queries()
    assert nfa.history == {"a": 3, "c": 1, "f": 1, "e": 2}
    rng = np.random.default_rng(seed)
    data = prev_data(rng, 300, keys=10)
    values = ParamValues.parse(nfa.program.parameters, ["lo=-2", "lo=5@150"])
    bits, drops = check(
        nfa,
        data,
        values=values,
        partitions=partitions,
        store=store,
        ways=ways,
        tick_tuples=tick_tuples,
        timer_bits=timer_bits,
        seed=seed,
    )
    assert bits
    assert bool(drops) == (partitions < 10)


SPLIT_STREAM = "CREATE STREAM s (k UINT(4), t UINT(32), d INT(20));\n"
# wide comparisons that read PREV, which the table splits (their high bits a stage early)
SPLIT_DEFINE = (
    "DEFINE A AS t > PREV(t), B AS t <= PREV(t, 2) OR d - PREV(d) < -3, C AS d >= PREV(d)"
)


def split_data(rng, n, keys):
    """Times and values whose high and low 16 bits each decide some comparisons: a few high
    halves, low halves at their edges, keys in runs (a tuple often finds the entry the one
    just ahead wrote)."""
    hi = rng.choice([0, 1, 2, 0xFFFF], n).astype(np.uint64) << 16
    lo = rng.choice([0, 1, 0x7FFF, 0x8000, 0xFFFF], n).astype(np.uint64)
    d = rng.choice([-(1 << 19), -65536, -65533, -1, 0, 3, 65535, 65536, (1 << 19) - 1], n)
    return tuples.Tuples(
        {
            "k": np.repeat(rng.integers(0, keys, n), 3)[:n].astype(np.uint64),
            "t": hi | lo,
            "d": d,
        },
        n,
    )


@pytest.mark.parametrize(("partitions", "seed"), [(16, 1), (8, 2)])
def test_prev_wide_comparisons_split(partitions, seed):
    """The table compares the high bits of a wide comparison that reads PREV in stage 3, for
    each state the tuple may find (a way's, stage 4's new one, a fresh entry's), and the low
    16 bits in stage 4: exact, direct (16 entries) and hashed (8, with drops)."""
    from nfacep.hdl.engine_update import store_update

    patterns = ["A B+ C", "(A | C) B? A"]
    nfa = nfacep.compile_text(
        SPLIT_STREAM
        + "".join(
            f"QUERY q{i} PARTITION k PATTERN ({p}) {SPLIT_DEFINE};" for i, p in enumerate(patterns)
        )
    )
    assert store_update(nfa)[2].early_width == 2 * 4  # four comparisons split
    data = split_data(np.random.default_rng(seed), 240, keys=10)
    bits, _ = check(nfa, data, partitions=partitions, store="table", ways=4, seed=seed)
    assert bits


def test_prev_split_comparison_from_a_stale_state_is_caught(monkeypatch):
    """A version that works out the high bits of PREV's comparisons from the row read even
    when the tuple just ahead wrote the entry (a broken forwarding path) fails the comparison
    with the reference."""
    from nfacep.hdl import table_forwarding

    monkeypatch.setattr(table_forwarding, "BREAK_FORWARDING", "early newest")
    nfa = nfacep.compile_text(
        SPLIT_STREAM + f"QUERY q PARTITION k PATTERN (A B+ C) {SPLIT_DEFINE};"
    )
    data = split_data(np.random.default_rng(1), 240, keys=10)
    with pytest.raises(AssertionError, match=r"assert \{"):  # the matches differ
        check(nfa, data, partitions=16, store="table", ways=4, seed=1)


@pytest.mark.parametrize(("partitions", "seed"), [(16, 1), (8, 2)])
def test_prev_table_compares_the_rows_early(monkeypatch, partitions, seed):
    """A table with PREV's split comparisons, spread over the device or not, compares the
    rows of the writes in flight with the operation's a cycle early (as a spread table does):
    with those rows compared with the operation a stage ahead's (a broken forwarding path)
    the matches differ from the reference's, direct (16 entries) and hashed (8)."""
    from nfacep.hdl import table_forwarding

    monkeypatch.setattr(table_forwarding, "BREAK_FORWARDING", "early row")
    nfa = nfacep.compile_text(
        SPLIT_STREAM + f"QUERY q PARTITION k PATTERN (A B+ C) {SPLIT_DEFINE};"
    )
    data = split_data(np.random.default_rng(seed), 240, keys=10)
    with pytest.raises(AssertionError, match=r"assert \{"):  # the matches differ
        check(nfa, data, partitions=partitions, store="table", ways=4, seed=seed)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("store", "partitions", "ways", "tick_tuples", "seed"),
    [("table", 16, 4, 0, 3), ("table", 4, 2, 3, 5), ("pipeline", 4, 1, 3, 6)],
)
def test_prev_split_narrow_comparisons(monkeypatch, store, partitions, ways, tick_tuples, seed):
    """Every PREV comparison of :func:`test_prev_against_reference` split after its lowest 3
    bits (signed operands, sums, a parameter), in the table with and without timers, and in
    the pipeline (its halves compared side by side a stage before the last, with drops)."""
    from nfacep.hdl import decoder
    from nfacep.settings import ParamValues

    monkeypatch.setattr(decoder, "SPLIT_LOW", 3)
    nfa = prev_queries()
    data = prev_data(np.random.default_rng(seed), 150, keys=6)
    values = ParamValues.parse(nfa.program.parameters, ["lo=-2", "lo=5@75"])
    bits, _ = check(
        nfa,
        data,
        values=values,
        partitions=partitions,
        store=store,
        ways=ways,
        tick_tuples=tick_tuples,
        timer_bits=2,
        seed=seed,
    )
    assert bits


@pytest.mark.parametrize(("partitions", "seed"), [(16, 1), (8, 2)])
def test_prev_and_starts_in_a_spread_table(monkeypatch, partitions, seed):
    """A table spread over the device (every table here: ``SPREAD_BLOCKS`` lowered) takes its
    row read through the last gate only, the newest write in flight per way chosen apart:
    PREV's split comparisons and start_seq's starts equal the reference's, direct (16
    entries) and hashed (8, with drops)."""
    _prev_and_starts_in_a_spread_table(monkeypatch, partitions, seed)


@pytest.mark.parametrize(
    "broken", ["found overwritten", "found bubble", "match any", "way groups", "read halves"]
)
def test_starts_chosen_by_key_broken_is_caught(monkeypatch, broken):
    """The same, hashed (a wide state without timers, chosen by key), with a broken choice:
    the state found the ways' even when stage 4 writes the tuple's entry, or stage 4's new
    state even when stage 4 holds a bubble; a way's match bit without the older writes in
    flight; the copies of their relations that each group of a way's candidate state is
    chosen by loaded a cycle late; the groups' copies of the row read's match from half its
    tag. The matches or their starts differ from the reference's."""
    from nfacep.hdl import table_forwarding

    monkeypatch.setattr(table_forwarding, "BREAK_FORWARDING", broken)
    with pytest.raises(AssertionError, match=r"assert \{"):
        _prev_and_starts_in_a_spread_table(monkeypatch, 8, 2)


def _prev_and_starts_in_a_spread_table(monkeypatch, partitions, seed):
    from nfacep.hdl import table

    monkeypatch.setattr(table, "SPREAD_BLOCKS", 0)
    patterns = ["A B+ C", "(A | C) B? A"]
    nfa = nfacep.compile_text(
        SPLIT_STREAM
        + "".join(
            f"QUERY q{i} PARTITION k MEASURES FIRST(seq) AS start_seq PATTERN ({p}) {SPLIT_DEFINE};"
            for i, p in enumerate(patterns)
        )
    )
    rng = np.random.default_rng(seed)
    data = split_data(rng, 240, keys=10)
    # each key's first tuples as k, another key, k: the third finds the entry the first wrote
    # (stage 4's write when it was a cycle before stage 3)
    firsts = np.array([[k, (k + 5) % 16, k] for k in rng.permutation(16)]).ravel()
    data.columns["k"][: len(firsts)] = firsts
    bits, _ = check(nfa, data, partitions=partitions, store="table", ways=4, seed=seed)
    assert bits


@pytest.mark.parametrize(
    "broken", ["prev following", "prev fresh", "prev early unswapped", "prev early unwritten"]
)
def test_prev_pipeline_bits_of_the_wrong_element_are_caught(monkeypatch, broken):
    """The pipeline store works out the bits of the predicates that read PREV a stage before
    the update, for both elements its swap chooses from and for a new partition's empty
    history, and the high bits of their wide comparisons a stage before that; a version that
    always takes the element at the last stage before the swap, or an element's history for
    a new partition, or the high bits of the element ahead of the candidate whatever the
    swap, or of the last stage's element before it is written back (broken paths), changes
    a match."""
    from nfacep.hdl import partitioner_hints

    monkeypatch.setattr(partitioner_hints, "BREAK_HINT", broken)
    nfa = nfacep.compile_text(
        SPLIT_STREAM + f"QUERY q PARTITION k PATTERN (A B+ C) {SPLIT_DEFINE};"
    )
    data = split_data(np.random.default_rng(1), 240, keys=10)
    with pytest.raises(AssertionError, match=r"assert \{"):  # the matches differ
        check(nfa, data, partitions=16, store="pipeline", seed=1)


@pytest.mark.parametrize(("partitions", "seed"), [(16, 1), (8, 2), (3, 3), (2, 4)])
def test_prev_pipeline_bits_ahead(partitions, seed):
    """The same wide comparisons through the pipeline store, which works out PREV's bits a
    stage before its last and their high bits a stage before that: exact with every
    partition stored (16) and with drops (8; 3, the first stage the high bits' stage; 2, no
    stage before but the head register, so both halves a stage before the last)."""
    nfa = nfacep.compile_text(
        SPLIT_STREAM + f"QUERY q PARTITION k PATTERN (A B+ C) {SPLIT_DEFINE};"
    )
    data = split_data(np.random.default_rng(seed), 240, keys=10)
    bits, drops = check(nfa, data, partitions=partitions, store="pipeline", seed=seed)
    assert bits and bool(drops) == (partitions < 10)


def test_prev_unpartitioned():
    """Without PARTITION the engine keeps one history, in front of the decoder."""
    from nfacep.settings import ParamValues

    nfa = prev_queries(partitioned=False)
    data = prev_data(np.random.default_rng(7), 300, keys=1)
    values = ParamValues.parse(nfa.program.parameters, ["lo=1"])
    bits, drops = check(nfa, data, values=values, partitions=1, seed=7)
    assert bits and not drops


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(
    q=queries("q", preds=prev_predicates),
    rows=streams(max_len=40, keys=6),
    partitioned=st.booleans(),
    shape=st.sampled_from(
        [("pipeline", 2, 4), ("pipeline", 8, 4), ("table", 4, 2), ("table", 256, 4)]
    ),
    timers=st.sampled_from([(0, 4), (1, 2), (3, 1)]),
    data=st.data(),
)
def test_random_prev_queries(q, rows, partitioned, shape, timers, data):
    """Random PREV conditions (the differential test's) through either store, with capacity
    and timers, or without PARTITION, equal the reference exactly."""
    from oracle import render_query

    store, partitions, ways = shape
    nfa = nfacep.compile_text(PREV_STREAM + render_query(q, "s", "k" if partitioned else None))
    n = len(rows)
    columns = {
        "k": np.array([r["k"] for r in rows], dtype=np.uint64),
        **{p: np.array([bool(r[p]) for r in rows], dtype=bool) for p in ("p0", "p1", "p2")},
        "v": np.array(data.draw(st.lists(st.integers(0, 7), min_size=n, max_size=n)), np.uint8),
        "ip": np.array(
            [
                int(ipaddress.IPv4Address(a))
                for a in data.draw(
                    st.lists(st.sampled_from(PREV_ADDRESSES), min_size=n, max_size=n)
                )
            ],
            np.uint32,
        ),
        "t": np.array(  # (seconds since the epoch, as the stream stores a TIMESTAMP(SECOND))
            [
                int(datetime.datetime.fromisoformat(t).timestamp())
                for t in data.draw(st.lists(st.sampled_from(PREV_TIMES), min_size=n, max_size=n))
            ],
            np.int64,
        ),
    }
    check(
        nfa,
        tuples.Tuples(columns, n),
        partitions=partitions,
        store=store,
        ways=ways,
        tick_tuples=timers[0],
        timer_bits=timers[1],
        seed=n,
    )


def test_windows_gaps_from_a_stale_state_are_caught(monkeypatch):
    """The table works out the windows' hint (which stored runs are live) a stage before the
    update, from the state the tuple finds; a version that takes it from the row read even
    when the tuple just ahead wrote the entry (a broken forwarding path) fails the comparison
    with the reference."""
    from nfacep.hdl import table_forwarding

    monkeypatch.setattr(table_forwarding, "BREAK_FORWARDING", "stale hint")
    nfa = window_queries()
    data = window_data(np.random.default_rng(3), 100, keys=4)
    with pytest.raises(AssertionError, match="Differing items"):
        check(nfa, data, partitions=16, store="table", ways=4, seed=3)


def test_windows_hints_of_writes_in_flight_for_the_wrong_tuple_are_caught(monkeypatch):
    """The table works out the windows' hint of each write in flight two cycles before the
    tuple that finds it reaches stage 3; a version that works them out for the tuple a stage
    ahead (a broken forwarding path) fails the comparison with the reference."""
    from nfacep.hdl import table_forwarding

    monkeypatch.setattr(table_forwarding, "BREAK_FORWARDING", "early hint")
    nfa = window_queries()
    data = window_data(np.random.default_rng(3), 100, keys=4)
    with pytest.raises(AssertionError, match="Differing items"):
        check(nfa, data, partitions=16, store="table", ways=4, seed=3)


WRAP_STREAM = "CREATE STREAM s (k UINT(2), p ENUM('a', 'b', 'c'), t UINT(16));\n"
# (key, predicate, time); within each key the times ascend
WRAP_TUPLES = [
    # the run's start, 13, is stored as 13 mod 16; at 20 its age is (4 - 13) mod 16 = 7
    (1, "a", 13),
    (1, "b", 17),
    (1, "c", 20),
    # 29 mod 16 = 13 again, 37 mod 16 = 5: (5 - 13) mod 16 = 8, the window: no match
    (1, "a", 29),
    (1, "b", 33),
    (1, "c", 37),
    # 14 old at 14 though 7 after the last tuple: 4 bits tell it from 6 (3 would not)
    (2, "a", 0),
    (2, "b", 7),
    (2, "c", 14),
    # the run began at 30 (14 mod 16); at 38 (6 mod 16) it is 8 old: over
    (2, "a", 30),
    (2, "b", 31),
    (2, "b", 38),
    (2, "c", 39),
    # keys alternating, so that a tuple finds its state two operations behind the tuple
    # before it in its key: key 1's run of 100 is 9 old at 109, key 2's 2 at 102
    (1, "a", 100),
    (2, "a", 100),
    (1, "b", 104),
    (2, "b", 101),
    (1, "c", 109),
    (2, "c", 102),
    # at the top of the field: 65528 to 65535 is 7
    (3, "a", 65528),
    (3, "b", 65531),
    (3, "c", 65535),
    # the last tuple's time split at bit 4: 14 to 21 is 7 (a borrow from the low bits), 30
    # to 47 is 17, though their low bits are 1 apart
    (0, "a", 14),
    (0, "c", 21),
    (0, "a", 30),
    (0, "c", 47),
]


@pytest.mark.parametrize(("store", "partitions"), [("pipeline", 4), ("table", 4)])
def test_windows_stored_starts_wrap(store, partitions):
    """Under WITHIN a state keeps the low bits of the time its latest run began at
    (:func:`nfacep.hdl.nfa_layout.start_bits`: 4 for a window of 8), which wrap: runs whose
    start and end lie on either side of a wrap, exactly the window long, and older than the stored
    bits span are judged as the reference judges them, tuples of a key back to back."""
    from nfacep.hdl.nfa_layout import start_bits

    assert start_bits(8) == 4 and start_bits(9) == 5 and start_bits(1) == 2
    bits, drops = check(
        wrap_query(), wrap_data(), partitions=partitions, store=store, gap=0, stall=0
    )
    assert bits == {2: 1, 18: 1, 21: 1, 23: 1} and not drops


def wrap_query():
    return nfacep.compile_text(
        WRAP_STREAM + "QUERY q PARTITION k ORDER BY t PATTERN (A B* C) WITHIN 8 "
        "DEFINE A AS p = 'a', B AS p = 'b', C AS p = 'c';"
    )


def wrap_data():
    return wrap_tuples(WRAP_TUPLES)


def wrap_tuples(rows) -> tuples.Tuples:
    """Rows ``(k, p, t)`` as tuples of :func:`wrap_query`'s stream (``p`` one of a, b, c)."""
    columns = {
        "k": np.array([k for k, _, _ in rows], dtype=np.uint64),
        "p": np.array([["a", "b", "c"].index(p) for _, p, _ in rows], dtype=np.uint64),
        "t": np.array([t for _, _, t in rows], dtype=np.uint64),
    }
    return tuples.Tuples(columns, len(rows))


@pytest.mark.parametrize(("store", "partitions"), [("pipeline", 4), ("table", 4)])
def test_windows_at_their_boundary_at_every_distance(store, partitions):
    """A run exactly a window minus one old matches and one a window old does not, whatever
    path the tuple that ends it finds its state by (fillers of other keys between), with the
    tuples beside it on the other side of the boundary: a hint worked out for the wrong tuple
    anywhere on those paths changes a match."""
    data, matching = distance_data()
    bits, drops = check(wrap_query(), data, partitions=partitions, store=store, gap=0, stall=0)
    assert set(bits) == matching and not drops


def distance_data():
    """:func:`window_cases.distance_tuples` as tuples of :func:`wrap_query`'s stream, with the
    seqs that match."""
    rows, matching = window_cases.distance_tuples()
    return wrap_tuples(rows), matching


@pytest.mark.parametrize("broken", ["late hint", "written hint"])
def test_windows_hints_of_the_last_writes_for_the_wrong_tuple_are_caught(monkeypatch, broken):
    """The hint of the entry written two operations ahead (taken by stage 4 from a register of
    its own, "late hint") and of the write handed on last (for the operation a cycle before
    stage 3, "written hint") are worked out from the register that holds the entry; each
    worked out against another tuple's times (a broken forwarding path) changes a match of
    the tuples at the window's boundary."""
    from nfacep.hdl import table_forwarding

    monkeypatch.setattr(table_forwarding, "BREAK_FORWARDING", broken)
    with pytest.raises(AssertionError):
        check(wrap_query(), distance_data()[0], partitions=4, store="table", gap=0, stall=0)


def test_windows_pipeline_hint_of_the_wrong_element_is_caught(monkeypatch):
    """The pipeline store works out the windows' hint of the element that moves into its last
    stage a stage before the update, for both elements its swap chooses from; a version that
    always takes the one at the last stage before the swap (a broken path) changes a match of
    the tuples at the window's boundary."""
    from nfacep.hdl import partitioner_hints

    monkeypatch.setattr(partitioner_hints, "BREAK_HINT", "unswapped")
    with pytest.raises(AssertionError):
        check(wrap_query(), distance_data()[0], partitions=4, store="pipeline", gap=0, stall=0)


@pytest.mark.parametrize(("group_bits", "partitions"), [(2, 4), (5, 4), (3, 2)])
def test_windows_pipeline_swap_groups(monkeypatch, group_bits, partitions):
    """A state wider than ``SWAP_SPLIT_BITS`` is swapped in groups of at most
    ``SWAP_GROUP_BITS``, each by a decision of its own from copies of the stage's hit
    registers (the marathon window's 119 bits in four); with the groups made small, the
    window's state split in several, the runs at the window's boundary match as the reference
    says, with every partition stored (4) and with drops (2)."""
    from amaranth.hdl import Fragment

    from nfacep.hdl import partitioner

    monkeypatch.setattr(partitioner, "SWAP_GROUP_BITS", group_bits)
    monkeypatch.setattr(partitioner, "SWAP_SPLIT_BITS", group_bits)
    nfa = wrap_query()
    dut = Engine(nfa, EngineParams(partitions=partitions, store="pipeline"))
    Fragment.get(dut, None)
    assert dut.store is not None and dut.store.state_width > 2 * group_bits
    data, matching = distance_data()
    bits, drops = check(nfa, data, partitions=partitions, store="pipeline", gap=0, stall=0)
    assert bits and bool(drops) == (partitions < 4)
    if partitions == 4:
        assert set(bits) == matching


def test_windows_pipeline_swap_group_unloaded_is_caught(monkeypatch):
    """The first group's copies of the hit registers never loaded (a broken path: the
    state's low bits swap as if the token found no element) change a match."""
    from nfacep.hdl import partitioner

    monkeypatch.setattr(partitioner, "SWAP_GROUP_BITS", 2)
    monkeypatch.setattr(partitioner, "SWAP_SPLIT_BITS", 2)
    monkeypatch.setattr(partitioner, "BREAK_SWAP", "unloaded")
    with pytest.raises(AssertionError):
        check(wrap_query(), distance_data()[0], partitions=4, store="pipeline", gap=0, stall=0)


def test_windows_hint_ahead_from_the_wrong_times_is_caught(monkeypatch):
    """The update works out, beside itself, which runs of the state it forwards are still live
    for the next tuple of the partition; a version that judges them at the forwarding tuple's
    time instead of the next one's (a broken forwarding path: key 2's run of 0 is live at 7,
    not at 14) fails the comparison."""
    from nfacep.hdl import table_forwarding

    monkeypatch.setattr(table_forwarding, "BREAK_FORWARDING", "ahead hint")
    with pytest.raises(AssertionError):
        check(wrap_query(), wrap_data(), partitions=4, store="table", gap=0, stall=0)


def follow_data():
    """:func:`window_cases.follow_tuples` as tuples of :func:`wrap_query`'s stream, with the
    seqs that match."""
    rows, matching = window_cases.follow_tuples()
    return wrap_tuples(rows), matching


@pytest.mark.parametrize("timers", [False, True])
def test_windows_hint_ahead_at_the_boundary_behind_each_path(timers):
    """A run ended a window after it began, right behind a tuple of its key at which it was
    still live, does not match, and one ended a window minus one after does, whatever path
    that tuple found its state by: the update's hint for the tuple behind it judges the
    starts of the state found at the later tuple's time."""
    data, matching = follow_data()
    timed = {"tick_tuples": 100, "timer_bits": 4} if timers else {}
    bits, drops = check(wrap_query(), data, partitions=4, store="table", gap=0, stall=0, **timed)
    assert set(bits) == matching and not drops


@pytest.mark.parametrize("timers", [False, True])
def test_windows_at_their_boundary_in_a_spread_table(monkeypatch, timers):
    """A table spread over the device (every table here: ``SPREAD_BLOCKS`` lowered; the
    window's at 16,384 entries on the 85F is one) puts the windows at their boundary exactly
    as a small one: at every distance, and right behind a tuple of the run's key."""
    from nfacep.hdl import table

    monkeypatch.setattr(table, "SPREAD_BLOCKS", 0)
    timed = {"tick_tuples": 100, "timer_bits": 4} if timers else {}
    for data, matching in (distance_data(), follow_data()):
        bits, drops = check(
            wrap_query(), data, partitions=4, store="table", gap=0, stall=0, **timed
        )
        assert set(bits) == matching and not drops


def test_windows_row_read_hint_from_a_stale_spare_copy_is_caught(monkeypatch):
    """Without timers, a table spread over the device (``SPREAD_BLOCKS`` lowered) works out the
    row read's windows' hint from a spare copy of each bank's third read register, beside the
    comparisons; the boundary comes out exact through it (the test above), and a copy a cycle
    late (a broken path) changes a match."""
    from nfacep.hdl import table, table_forwarding

    monkeypatch.setattr(table, "SPREAD_BLOCKS", 0)
    monkeypatch.setattr(table_forwarding, "BREAK_FORWARDING", "spare read")
    for data, _ in (distance_data(), follow_data()):
        with pytest.raises(AssertionError):
            check(wrap_query(), data, partitions=4, store="table", gap=0, stall=0)


@pytest.mark.parametrize("broken", [None, "way groups"])
def test_windows_with_timers_candidate_state_groups(monkeypatch, broken):
    """With timers and the windows' hints, the table chooses each way's candidate state (the
    newest write in flight to it, else the row read) in groups of bits, each from copies of
    its own of the writes' relations to the row (the queries' state is 88 bits: four
    groups); the matches are the reference's, stalls included, and with the copies a cycle
    late (a broken path) they are not."""
    from nfacep.hdl import table_forwarding

    monkeypatch.setattr(table_forwarding, "BREAK_FORWARDING", broken)
    nfa = window_queries()
    data = window_data(np.random.default_rng(4), 300, keys=10)
    params = {"partitions": 8, "store": "table", "ways": 2, "tick_tuples": 2, "timer_bits": 2}
    if broken:
        with pytest.raises(AssertionError):
            check(nfa, data, seed=4, **params)
        return
    bits, _ = check(nfa, data, seed=4, **params)
    assert bits


def test_windows_hint_ahead_from_a_stale_copy_of_the_state_is_caught(monkeypatch):
    """With timers the update's hint for the next tuple of the partition is worked out from a
    copy of the state found of its own (loaded as stage 4's register is); the boundary's
    matches come out exact through it, and a copy loaded with the state the operation a stage
    ahead found (a broken path) changes one."""
    from nfacep.hdl import table_forwarding

    timers = {"tick_tuples": 100, "timer_bits": 4}
    params = {"partitions": 4, "store": "table", "gap": 0, "stall": 0, **timers}
    bits, drops = check(wrap_query(), wrap_data(), **params)
    assert bits == {2: 1, 18: 1, 21: 1, 23: 1} and not drops
    monkeypatch.setattr(table_forwarding, "BREAK_FORWARDING", "ahead state")
    with pytest.raises(AssertionError):
        check(wrap_query(), wrap_data(), **params)
