"""The partitioner's capacity, timers and drops: ``nfacep match`` against the oracle.

docs/language.md ('Partitions, capacity and timers'): at most ``--partitions N`` partitions
are stored; a tuple of an unstored partition takes a free element or is dropped (and counted);
an element's timer is set to ``2**B - 1`` by each tuple of its partition and decremented by a
tick after every K-th input tuple, dropped ones included; the tick that brings it to zero
frees the element and its history.
"""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from oracle import ANY, Query, alt, partition, render_query, rep, run, seq, var
from test_oracle_differential import (
    ABC,
    P0,
    P1,
    P2,
    STREAM,
    check_against_oracle,
    cli_settings,
    nfacep_match,
    queries,
    rows_of,
)

A, B = var("A"), var("B")
AA = Query("q", seq(A, A), ABC[:1])  # reports a tuple iff its partition's previous one was A


@st.composite
def key_lists(draw, max_len: int = 40, keys: int = 6) -> list[int]:
    n = draw(st.integers(1, max_len))  # uniform lengths: lists alone stay mostly short
    return draw(st.lists(st.integers(0, keys - 1), min_size=n, max_size=n))


def lives(keys, n, k=0, b=4):
    found = partition(keys, n, k, b)
    return found.lives, found.drop_seqs


# --------------------------------------------------------------------------------------------
# The oracle's model, on cases worked out by hand


def test_oracle_drop_when_full():
    assert lives([0, 1, 0, 2, 1], 1) == ([(0, [0, 2])], [1, 3, 4])
    assert lives([0, 1, 0, 2, 1], 2) == ([(0, [0, 2]), (1, [1, 4])], [3])


def test_oracle_timer_expires_at_exact_tick():
    # B=2: timers start at 3; K=1: a tick after every tuple. Partition 0's timer reads 2, 1
    # after tuples 0, 1 and reaches 0 (freed) on the tick after tuple 2.
    assert lives([0, 1, 0], 2, 1, 2) == ([(0, [0, 2]), (1, [1])], [])
    assert lives([0, 1, 1, 0], 2, 1, 2) == ([(0, [0]), (1, [1, 2]), (0, [3])], [])
    assert lives([0, 1, 1, 1, 0], 2, 1, 2) == ([(0, [0]), (1, [1, 2, 3]), (0, [4])], [])


def test_oracle_every_tuple_restarts_its_timer():
    # B=1: a timer reads 1 after any tuple of its partition, so every tick frees every element.
    assert lives([0, 0, 0, 0], 1, 2, 1) == ([(0, [0, 1]), (0, [2, 3])], [])
    assert lives([0, 0, 0], 1, 1, 1) == ([(0, [0]), (0, [1]), (0, [2])], [])
    # B=2, K=1: a partition seen every other tuple never expires
    assert lives([0, 1, 0, 1, 0, 1], 2, 1, 2) == ([(0, [0, 2, 4]), (1, [1, 3, 5])], [])


def test_oracle_dropped_tuples_count_toward_ticks():
    # N=1, K=2, B=1: tuple 1 is dropped, yet the tick after it frees partition 0; tuple 2
    # takes the element, tuple 3 is dropped, and its tick frees partition 1.
    assert lives([0, 1, 1, 0], 1, 2, 1) == ([(0, [0]), (1, [2])], [1, 3])


def test_oracle_no_ticks_means_no_expiry():
    assert lives([0, 1, 2, 0, 1, 2], 2, 0, 1) == ([(0, [0, 3]), (1, [1, 4])], [2, 5])


def test_oracle_freed_history_is_forgotten():
    rows = rows_of("a", "a", "a")
    assert [m[0] for m in run([AA], rows, "k").matches] == [1, 2]
    assert run([AA], rows, "k", partitions=1, tick_tuples=1, timer_bits=1).matches == []
    assert [m[0] for m in run([AA], rows, "k", 1, 2, 1).matches] == [1]  # lives [0,1], [2]


def test_oracle_without_partition_capacity_does_not_apply():
    rows = rows_of("a", "a", "a")
    for r, k in zip(rows, [0, 1, 2], strict=True):
        r["k"] = k
    got = run([AA], rows, None, partitions=1, tick_tuples=1, timer_bits=1)
    assert (got.matches, got.drop_seqs) == ([(1, "q", ""), (2, "q", "")], [])


# --------------------------------------------------------------------------------------------
# nfacep match against the oracle


def keyed(keys, cells=None):
    rows = rows_of(*(cells or ["a"] * len(keys)))
    for r, k in zip(rows, keys, strict=True):
        r["k"] = k
    return rows


def options(n, k, b):
    return [
        "--store",
        "pipeline",
        "--partitions",
        str(n),
        "--tick-tuples",
        str(k),
        "--timer-bits",
        str(b),
    ]


@pytest.mark.parametrize(
    ("keys", "hardware"),
    [
        ([0, 1, 0, 2, 1], (1, 0, 4)),
        ([0, 1, 0, 2, 1], (2, 0, 4)),
        ([0, 1, 0], (2, 1, 2)),
        ([0, 1, 1, 0], (2, 1, 2)),
        ([0, 1, 1, 1, 0], (2, 1, 2)),
        ([0, 0, 0, 0], (1, 2, 1)),
        ([0, 0, 0], (1, 1, 1)),
        ([0, 1, 0, 1, 0, 1], (2, 1, 2)),
        ([0, 1, 1, 0], (1, 2, 1)),
        ([0, 1, 2, 0, 1, 2], (2, 0, 1)),
    ],
)
def test_match_hand_cases(tmp_path, keys, hardware):
    text = STREAM + render_query(AA, "s", "k")
    check_against_oracle(tmp_path, [AA], text, keyed(keys), True, options(*hardware), hardware)


def test_match_default_capacity_is_256(tmp_path):
    """The pipeline without a size: 256 elements, no ticks; the 257th partition is dropped,
    always."""
    keys = [*range(300), *range(300)]
    stream = STREAM.replace("UINT(8)", "UINT(16)")
    text = stream + render_query(AA, "s", "k")
    got = nfacep_match(tmp_path, text, keyed(keys), ["--store", "pipeline"])
    assert got.rc == 0
    want = [*range(256, 300), *range(556, 600)]
    assert (got.summary["drops"], got.summary["drop_seqs"]) == (len(want), want)
    assert [m[0] for m in got.matches] == list(range(300, 556))
    # the default engine: a table the 16-bit key indexes directly, which never drops
    got = nfacep_match(tmp_path, text, keyed(keys))
    assert got.rc == 0 and got.summary["drops"] == 0
    assert [m[0] for m in got.matches] == list(range(300, 600))
    p = got.summary
    assert (p["store"], p["partitions"], p["ways"]) == ("table", 65536, 4)


@pytest.mark.slow
@cli_settings(100)
@given(
    keys=key_lists(),
    cells=st.data(),
    n=st.integers(1, 4),
    k=st.integers(0, 5),
    b=st.integers(1, 3),
)
def test_match_capacity_and_timers(tmp_path, keys, cells, n, k, b):
    """A A on random keys: every report says the partition's history survived."""
    mostly_a = st.sampled_from(["a", "a", "a", ""])
    rows = keyed(keys, cells.draw(st.lists(mostly_a, min_size=len(keys), max_size=len(keys))))
    text = STREAM + render_query(AA, "s", "k")
    check_against_oracle(tmp_path, [AA], text, rows, True, options(n, k, b), (n, k, b))


@pytest.mark.slow
@cli_settings(80)
@given(
    q1=queries("x"),
    q2=queries("y"),
    keys=key_lists(),
    data=st.data(),
    n=st.integers(1, 4),
    k=st.integers(0, 5),
    b=st.integers(1, 3),
)
def test_match_capacity_random_queries(tmp_path, q1, q2, keys, data, n, k, b):
    """Random queries (both AFTER MATCH modes) under random capacity and timers."""
    bits = st.fixed_dictionaries({"p0": st.booleans(), "p1": st.booleans(), "p2": st.booleans()})
    rows = [{"k": key, **data.draw(bits)} for key in keys]
    text = STREAM + render_query(q1, "s", "k") + render_query(q2, "s", "k")
    check_against_oracle(tmp_path, [q1, q2], text, rows, True, options(n, k, b), (n, k, b))


@pytest.mark.parametrize("hardware", [(1, 0, 4), (1, 1, 1), (4, 5, 3)])
def test_match_empty_input(tmp_path, hardware):
    """A header and no tuples: nothing matched, nothing dropped, whatever the hardware."""
    text = STREAM + render_query(AA, "s", "k")
    check_against_oracle(tmp_path, [AA], text, [], True, options(*hardware), hardware)


@pytest.mark.slow
@cli_settings(40)
@given(
    seed=st.integers(0, 2**32 - 1),
    length=st.integers(30, 60),
    skip=st.booleans(),
    n=st.integers(1, 4),
    k=st.integers(0, 5),
    b=st.integers(1, 3),
)
def test_match_capacity_beyond_dfa_limit(tmp_path, seed, length, skip, n, k, b):
    """As above with ``A A | Y .{16} Z``: too many subset states to determinize, so a matcher
    simulating the NFA must restart it exactly where the oracle starts a new life."""
    rng = random.Random(seed)
    rows = [
        {
            "k": rng.randrange(6),
            "p0": rng.random() < 0.5,
            "p1": rng.random() < 0.7,
            "p2": rng.random() < 0.5,
        }
        for _ in range(length)
    ]
    big = seq(var("Y"), rep(ANY, "{16}"), var("Z"))
    q = Query("q", alt(seq(B, B), big), (("B", P1), ("Y", P0), ("Z", P2)), skip)
    text = STREAM + render_query(q, "s", "k")
    check_against_oracle(tmp_path, [q], text, rows, True, options(n, k, b), (n, k, b))


def test_match_drops_are_per_tuple_not_per_query(tmp_path):
    qs = [Query("x", A, ABC[:1]), Query("y", seq(A, A), ABC[:1], skip=True)]
    text = STREAM + "".join(render_query(q, "s", "k") for q in qs)
    rows = keyed([0, 1, 0, 1, 2, 0])
    check_against_oracle(tmp_path, qs, text, rows, True, options(1, 0, 4), (1, 0, 4))


# --------------------------------------------------------------------------------------------
# --store table: a key that fits the index has an entry of its own; a wider one goes to bucket
# CRC-32(key) mod (entries / ways), which holds `ways` partitions


def test_oracle_crc32_is_the_standard_one():
    from oracle import crc32

    assert crc32(b"123456789") == 0xCBF43926  # the catalogue's check value


def table_options(n: int, ways: int, tick: int = 0, bits: int = 4) -> list[str]:
    return [
        "--store",
        "table",
        "--partitions",
        str(n),
        "--ways",
        str(ways),
        "--tick-tuples",
        str(tick),
        "--timer-bits",
        str(bits),
    ]


def test_oracle_table_buckets_by_hand():
    from oracle import table_bucket

    # 8-bit keys in 4 entries of 2 ways: two buckets; CRC-32 of one byte, mod 2
    buckets = [table_bucket(k, 8, 4, 2)[0][1] for k in range(8)]
    assert buckets == [1, 1, 1, 1, 0, 0, 0, 0]
    # in 8 entries of one way, CRC-32 mod 8 spreads the first 8 keys over all 8
    assert sorted(table_bucket(k, 8, 8, 1)[0][1] for k in range(8)) == list(range(8))
    # bucket 1 takes keys 0 and 1 and has no room for 2 and 3; bucket 0 takes 4 and 5
    found = partition([0, 1, 2, 3, 4, 5, 0], 4, table=(8, 2))
    assert found.lives == [(0, [0, 6]), (1, [1]), (4, [4]), (5, [5])]
    assert found.drop_seqs == [2, 3]
    # 256 entries index 8-bit keys directly: nothing is ever dropped
    assert partition(list(range(256)) * 2, 256, table=(8, 4)).drop_seqs == []


@pytest.mark.parametrize(
    ("keys", "n", "ways"),
    [
        ([0, 1, 2, 3, 4, 5, 0], 4, 2),
        ([0, 1, 2, 3, 4, 5, 0, 5, 4], 4, 4),  # one bucket of 4: the first four keys stay
        ([5, 5, 4, 4, 3, 2, 1, 0], 8, 1),
        ([0, 2, 5, 0, 2, 5], 2, 1),
    ],
)
def test_match_table_hand_cases(tmp_path, keys, n, ways):
    text = STREAM + render_query(AA, "s", "k")
    check_against_oracle(
        tmp_path, [AA], text, keyed(keys), True, table_options(n, ways), (n, 0, 4), table=(8, ways)
    )


def test_match_table_direct_never_drops(tmp_path):
    """256 entries hold every 8-bit key: 300 distinct-key-heavy tuples, no drop."""
    rng = random.Random(5)
    keys = [rng.randrange(256) for _ in range(300)]
    cells = [rng.choice(["a", "", "ab"]) for _ in keys]
    text = STREAM + render_query(AA, "s", "k")
    check_against_oracle(
        tmp_path,
        [AA],
        text,
        keyed(keys, cells),
        True,
        table_options(256, 4),
        (256, 0, 4),
        table=(8, 4),
    )


@cli_settings(40)
@given(
    keys=key_lists(max_len=40, keys=40),
    log_n=st.integers(0, 9),
    log_ways=st.integers(0, 4),
    data=st.data(),
)
def test_match_table_random(tmp_path, keys, log_n, log_ways, data):
    """Random keys (8-bit: hashed below 256 entries, direct from 256), entries, ways and
    timers, two queries: matches and drops as the oracle's table."""
    n = 1 << log_n
    ways = 1 << min(log_ways, log_n)
    tick = data.draw(st.sampled_from([0, 0, 1, 2, 3, 5]), label="tick_tuples")
    bits = data.draw(st.integers(1, 3), label="timer_bits")
    cells = data.draw(
        st.lists(st.sampled_from(["a", "b", "ab", ""]), min_size=len(keys), max_size=len(keys)),
        label="cells",
    )
    q2 = Query("r", seq(A, B), ABC[:2], skip=True)
    text = STREAM + render_query(AA, "s", "k") + render_query(q2, "s", "k")
    check_against_oracle(
        tmp_path,
        [AA, q2],
        text,
        keyed(keys, cells),
        True,
        table_options(n, ways, tick, bits),
        (n, tick, bits),
        table=(8, ways),
    )


@pytest.mark.parametrize(
    ("keys", "n", "ways", "tick", "bits"),
    [
        # one bucket of 2 (8-bit keys, 2 entries): keys 0 and 1 fill it; after 3 ticks without
        # them (one per tuple, M = 3) both are free again and 2 and 3 are stored
        ([0, 1, 2, 3, 2, 3, 2, 3, 0], 2, 2, 1, 2),
        ([0, 0, 0, 1, 1, 0, 2, 2, 2, 2, 2, 0], 4, 4, 2, 1),
        # direct (256 entries): nothing is dropped, an idle key starts again from nothing
        ([7, 7, 9, 9, 9, 9, 7, 7], 256, 4, 1, 2),
    ],
)
def test_match_table_timers_by_hand(tmp_path, keys, n, ways, tick, bits):
    text = STREAM + render_query(AA, "s", "k")
    cells = ["a"] * len(keys)
    check_against_oracle(
        tmp_path,
        [AA],
        text,
        keyed(keys, cells),
        True,
        table_options(n, ways, tick, bits),
        (n, tick, bits),
        table=(8, ways),
    )


@given(keys=st.lists(st.integers(0, 2**64 - 1), max_size=50), bits=st.integers(1, 64))
def test_key_crc32_is_zlibs_on_the_little_endian_key_bytes(keys, bits):
    import binascii

    import numpy as np

    from nfacep.reference.capacity import key_crc32

    keys = [k & ((1 << bits) - 1) for k in keys]
    got = key_crc32(np.array(keys, dtype=np.uint64), bits).tolist()
    assert got == [binascii.crc32(k.to_bytes((bits + 7) // 8, "little")) for k in keys]


@given(
    codes=key_lists(max_len=60, keys=30),
    log_n=st.integers(0, 6),
    log_ways=st.integers(0, 3),
    bits=st.sampled_from([4, 5, 16, 64]),
    tick=st.sampled_from([0, 1, 2, 7]),
    timer_bits=st.integers(1, 3),
)
def test_table_admission_equals_the_sequential_definition(
    codes, log_n, log_ways, bits, tick, timer_bits
):
    """The array model of the table (without timers: the first `ways` keys of a bucket stay;
    with timers: the per-bucket count of elements in use) against the one-tuple-at-a-time
    pass, over raw keys of several widths (direct and hashed)."""
    import numpy as np

    from nfacep.params import EngineParams
    from nfacep.reference.capacity import admit, admit_sequential, table_slots

    params = EngineParams(
        store="table",
        partitions=1 << log_n,
        ways=1 << min(log_ways, log_n),
        tick_tuples=tick,
        timer_bits=timer_bits,
    )
    rng = random.Random(bits)
    raw = np.array([rng.randrange(1 << bits) for _ in range(30)], dtype=np.uint64)
    raw = np.unique(raw)
    codes = np.array([c % len(raw) for c in codes], dtype=np.int64)
    slots = table_slots(raw, bits, params)
    fast, slow = admit(codes, params, slots), admit_sequential(codes, params, slots)
    assert fast.admitted.tolist() == slow.admitted.tolist()
    assert fast.fresh.tolist() == slow.fresh.tolist()
    if bits <= params.index_bits:
        assert fast.admitted.all()


@given(
    codes=key_lists(max_len=60, keys=8),
    table=st.booleans(),
    partitions=st.integers(1, 5),
    tick=st.sampled_from([0, 1, 2, 3, 5]),
    timer_bits=st.integers(1, 3),
    cuts=st.lists(st.integers(0, 60), max_size=5),
    data=st.data(),
)
def test_admission_in_pieces_equals_one_pass(
    codes, table, partitions, tick, timer_bits, cuts, data
):
    """The stream cut into pieces, each admitted from where the earlier ones left the store
    (``admit(offset=, last=)``, then ``carry``): the same drops and fresh starts as the
    one-tuple-at-a-time definition over the whole stream, whichever way each piece goes
    (array operations, or the sequential pass when it fills)."""
    import numpy as np

    from nfacep.params import EngineParams
    from nfacep.reference.capacity import Slots, admit, admit_sequential, carry

    codes = np.array(codes, dtype=np.uint16)
    slots = None
    if table:
        params = EngineParams(
            store="table",
            partitions=4,
            ways=1 + (partitions > 2),
            tick_tuples=tick,
            timer_bits=timer_bits,
        )
        buckets = 4 // params.ways
        slots = Slots(
            np.array([data.draw(st.integers(0, buckets - 1)) for _ in range(8)]), params.ways
        )
    else:
        params = EngineParams(partitions=partitions, tick_tuples=tick, timer_bits=timer_bits)
    whole = admit_sequential(codes, params, slots)
    last = np.full(8, -1, dtype=np.int64)
    admitted, fresh = [], []
    bounds = [0, *sorted(c for c in set(cuts) if c < len(codes)), len(codes)]
    for a, b in itertools.pairwise(bounds):
        piece = admit(codes[a:b], params, slots, offset=a, last=last)
        carry(last, piece, a)
        admitted += piece.admitted.tolist()
        fresh += piece.fresh.tolist()
    assert admitted == whole.admitted.tolist()
    assert fresh == whole.fresh.tolist()


# several partition fields: the key is the fields' values together; in the table, their bits
# concatenated (the first field listed in the most significant bits) index it or are hashed

KEYS_STREAM = "CREATE STREAM s (k UINT(2), p0 BOOL, p1 BOOL, p2 BOOL, j INT(3));\n"
KEYS_FIELDS = ("k", "p0", "p1", "p2", "j")


def test_oracle_concat_key_by_hand():
    from oracle import concat_key

    assert concat_key((2, -1), (2, 3)) == 0b10_111
    assert concat_key((-1, 2), (3, 2)) == 0b111_10
    assert concat_key((True, 0, 5), (1, 8, 4)) == 1 << 12 | 5


@cli_settings(60)
@given(
    n_rows=st.integers(1, 40),
    log_n=st.integers(0, 6),
    log_ways=st.integers(0, 3),
    data=st.data(),
)
def test_match_several_key_fields_random(tmp_path, n_rows, log_n, log_ways, data):
    """PARTITION BY k, j (or j, k) in either form, both stores, capacity and timers, AA and a
    random query: the matches (a column per key field), drops and counts are the oracle's,
    which keys on the pair of values and hashes their concatenation (5 bits: direct from 32
    entries on)."""
    rows = data.draw(
        st.lists(
            st.fixed_dictionaries(
                {
                    "k": st.integers(0, 3),
                    "j": st.integers(-4, 3),
                    "p0": st.booleans(),
                    "p1": st.booleans(),
                    "p2": st.booleans(),
                }
            ),
            min_size=n_rows,
            max_size=n_rows,
        ),
        label="rows",
    )
    order = data.draw(st.sampled_from([("k", "j"), ("j", "k")]), label="key")
    form = data.draw(st.sampled_from(["sql", "concise"]), label="form")
    store = data.draw(st.sampled_from(["pipeline", "table"]), label="store")
    n = 1 << log_n
    ways = 1 << min(log_ways, log_n)
    tick = data.draw(st.sampled_from([0, 0, 1, 2, 3]), label="tick_tuples")
    bits = data.draw(st.integers(1, 3), label="timer_bits")
    q2 = data.draw(queries("r"), label="query r")  # a random pattern beside AA
    key = ", ".join(order)
    text = KEYS_STREAM + render_query(AA, "s", key, form) + render_query(q2, "s", key, form)
    widths = {"k": 2, "j": 3}
    table = None
    opts = options(n, tick, bits)
    if store == "table":
        table = (5, ways, tuple(widths[f] for f in order))
        opts = table_options(n, ways, tick, bits)
    check_against_oracle(
        tmp_path,
        [AA, q2],
        text,
        rows,
        True,
        opts,
        (n, tick, bits),
        table=table,
        fields=KEYS_FIELDS,
        key=order,
    )
