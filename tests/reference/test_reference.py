"""Reference matcher internals: its engines agree with each other on the same input.

The reference is compared with the independent oracle in test_oracle_differential.py; here
the DFA engine (with and without chunking of long runs) is compared with the bit-matrix NFA
engine, and small cases are checked by hand. Every test runs both ways of stepping the
automata: the compiled stream-order loops (nfacep.reference.compiled) and the lock-step array
operations over the tuples grouped by partition, whichever run() would choose.
"""

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nfacep
from nfacep.io.tuples import Tuples
from nfacep.params import EngineParams
from nfacep.reference import capacity
from nfacep.reference import matcher as reference
from nfacep.reference import symbols as decoder

NUMBA = importlib.util.find_spec("numba") is not None
STREAM = "CREATE STREAM s (k UINT(8), a UINT(4), c BOOL, e ENUM('x', 'y', 'z'));\n"


@pytest.fixture(params=[True, False], ids=["compiled", "arrays"])
def run(request):
    """reference.run, compiled or with array operations."""
    if request.param and not NUMBA:
        pytest.skip("numba is not installed")

    def run(*args, **kwargs):
        return reference.run(*args, compiled=request.param, **kwargs)

    return run


def tuples(**columns) -> Tuples:
    n = len(next(iter(columns.values())))
    cols = {
        "k": np.zeros(n, np.uint64),
        "a": np.zeros(n, np.uint64),
        "c": np.zeros(n, bool),
        "e": np.zeros(n, np.int64),
    }
    for name, values in columns.items():
        cols[name] = np.asarray(values, dtype=cols[name].dtype)
    return Tuples(cols, n)


def seqs(result, name=None):
    return [s for s, q, _ in result.matches if name is None or q == name]


def test_every_end_and_skip_past_last_row(run):
    nfa = nfacep.compile_text(
        STREAM + "QUERY every PATTERN (A B+) DEFINE A AS a = 1 B AS a = 2;"
        "QUERY skip AFTER MATCH SKIP PAST LAST ROW PATTERN (A B+) "
        "DEFINE A AS a = 1 B AS a = 2"
    )
    t = tuples(a=[1, 2, 2, 2, 1, 1, 2])
    r = run(nfa, t)
    assert seqs(r, "every") == [1, 2, 3, 6]
    assert seqs(r, "skip") == [1, 6]
    # one record per (tuple, query), sorted by seq then query name
    assert r.matches[:2] == [(1, "every", None), (1, "skip", None)]


def test_overlapping_predicates_one_record_per_tuple(run):
    nfa = nfacep.compile_text(
        STREAM + "QUERY q PATTERN (A | B | A B) DEFINE A AS a >= 1 B AS a <= 1"
    )
    r = run(nfa, tuples(a=[1, 0, 2, 5]))
    assert seqs(r) == [0, 1, 2, 3]


def test_partitions_are_independent_and_keys_are_printed_as_written(run):
    nfa = nfacep.compile_text(
        "CREATE STREAM s (k ENUM('red', 'blue'), a UINT(4));"
        "QUERY q PARTITION k PATTERN (A B) DEFINE A AS a = 1 B AS a = 2"
    )
    t = Tuples({"k": np.array([0, 1, 0, 1]), "a": np.array([1, 1, 2, 2], np.uint64)}, 4)
    assert run(nfa, t).matches == [(2, "q", "red"), (3, "q", "blue")]


def test_capacity_drops_and_timer_restart(run):
    nfa = nfacep.compile_text(STREAM + "QUERY q PARTITION k PATTERN (A A) DEFINE A AS c")
    t = tuples(k=[1, 2, 1, 2, 1], c=[1, 1, 1, 1, 1])
    full = run(nfa, t, EngineParams(partitions=1))
    assert full.drops.tolist() == [1, 3] and seqs(full) == [2, 4]
    # K=1, B=1: each tuple is followed by a tick that frees its element at once
    ticking = run(nfa, t, EngineParams(partitions=1, tick_tuples=1, timer_bits=1))
    assert ticking.drops.tolist() == [] and seqs(ticking) == []
    # B=2 (timer 3), a tick after every tuple: key 3 finds both elements busy at seq 4 (key 2
    # at 1, key 1 at 2) and is dropped; that tick frees key 2, so key 3 starts at 5 and
    # matches at 6; key 1 was freed by the tick after 5 and restarts at 7 (no match)
    t2 = tuples(k=[1, 1, 2, 1, 3, 3, 3, 1], c=[1] * 8)
    r = run(nfa, t2, EngineParams(partitions=2, tick_tuples=1, timer_bits=2))
    assert seqs(r) == [1, 3, 6] and r.drops.tolist() == [4]


PATTERNS = [
    "A B* C",
    "(A | B)+ C?",
    "A{2,4} B",
    "PERMUTE(A, B) C*",
    "(A B | B A)* C",
    "A . . B",
    "(A* B?)+ C",
    "A+ B+ C+",
]


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("skip", [False, True])
def test_dfa_and_nfa_engines_agree(pattern, skip, run):
    clause = "AFTER MATCH SKIP PAST LAST ROW " if skip else ""
    nfa = nfacep.compile_text(
        STREAM + f"QUERY q PARTITION k {clause}PATTERN ({pattern}) "
        "DEFINE A AS a < 6 B AS a > 3 AND c C AS e <> 'y'"
    )
    rng = np.random.default_rng(len(pattern) + skip)
    n = 3000
    t = tuples(
        k=rng.integers(0, 40, n),
        a=rng.integers(0, 10, n),
        c=rng.integers(0, 2, n),
        e=rng.integers(0, 3, n),
    )
    params = EngineParams(partitions=16, tick_tuples=7, timer_bits=2)
    dfa = run(nfa, t, params, engine="dfa")
    assert dfa.engines == {"q": "dfa"}
    nfa_r = run(nfa, t, params, engine="nfa")
    assert dfa.matches == nfa_r.matches and dfa.drops.tolist() == nfa_r.drops.tolist()
    assert len(dfa.drops) and len(dfa.matches)


def test_long_runs_are_chunked_without_changing_results(run):
    nfa = nfacep.compile_text(
        STREAM + "QUERY q PATTERN (A B{3,} C | C A+ B) DEFINE A AS a < 6 B AS a > 3 C AS e <> 'y'"
    )
    rng = np.random.default_rng(7)
    n = 40_000  # one run far longer than a chunk
    t = tuples(a=rng.integers(0, 10, n), e=rng.integers(0, 3, n))
    chunked = run(nfa, t, engine="dfa")
    plain = run(nfa, t, engine="nfa")
    assert chunked.matches == plain.matches and len(plain.matches) > 1000


def test_admission_fast_path_equals_sequential_model():
    rng = np.random.default_rng(3)
    for k, b in [(0, 1), (1, 1), (3, 2), (5, 4)]:
        codes = rng.integers(0, 30, 2000)
        fast = capacity.admit(codes, EngineParams(partitions=10_000, tick_tuples=k, timer_bits=b))
        slow = capacity.admit_sequential(
            codes, EngineParams(partitions=10_000, tick_tuples=k, timer_bits=b)
        )
        assert fast.admitted.all() and slow.admitted.all()
        assert (fast.fresh == slow.fresh).all()
        # at capacity the model switches to the sequential pass; both must agree
        tight = capacity.admit(codes, EngineParams(partitions=8, tick_tuples=k, timer_bits=b))
        ref = capacity.admit_sequential(
            codes, EngineParams(partitions=8, tick_tuples=k, timer_bits=b)
        )
        assert (tight.admitted == ref.admitted).all() and (tight.fresh == ref.fresh).all()


def test_wide_integer_arithmetic_is_exact(run):
    nfa = nfacep.compile_text(
        "CREATE STREAM s (x UINT(64), y INT(64));"
        "QUERY q PATTERN (A) DEFINE A AS x - y > 18446744073709551615"
    )
    x = np.array([2**64 - 1, 2**64 - 1, 5], dtype=np.uint64)
    y = np.array([-1, 0, -(2**63)], dtype=np.int64)
    r = run(nfa, Tuples({"x": x, "y": y}, 3))
    assert seqs(r) == [0]


def test_float_comparisons_follow_ieee(run):
    nfa = nfacep.compile_text(
        "CREATE STREAM s (f FLOAT32);"
        "QUERY lt PATTERN (A) DEFINE A AS f < 3.3;"
        "QUERY ne PATTERN (A) DEFINE A AS f <> 0;"
        "QUERY eq PATTERN (A) DEFINE A AS f = 0"
    )
    f = np.array([np.float32(3.3), np.nan, -0.0, 3.2999], dtype=np.float32)
    r = run(nfa, Tuples({"f": f}, 4))
    assert seqs(r, "lt") == [2, 3]  # f32(3.3) < 3.3f is false; NaN is never less
    assert seqs(r, "ne") == [0, 1, 3]  # NaN <> 0 holds
    assert seqs(r, "eq") == [2]  # -0 = 0


@pytest.mark.skipif(not NUMBA, reason="numba is not installed")
@pytest.mark.parametrize("engine", ["dfa", "nfa"])
@pytest.mark.parametrize(
    "params",
    [
        EngineParams(partitions=16, tick_tuples=20, timer_bits=2),
        EngineParams(store="table", partitions=16, ways=2),
        EngineParams(store="table", partitions=16, ways=2, tick_tuples=20, timer_bits=2),
    ],
    ids=["pipeline", "table", "table-timers"],
)
def test_compiled_loops_equal_array_operations(engine, params):
    """Many partitions, restarts and drops: both ways of stepping give the same records."""
    nfa = nfacep.compile_text(
        "CREATE STREAM s (k UINT(16), a UINT(4), c BOOL, e ENUM('x', 'y', 'z'));\n"
        "QUERY one PARTITION k PATTERN (A B* C) DEFINE A AS a < 6 B AS a > 3 C AS e <> 'y';"
        "QUERY two PARTITION k AFTER MATCH SKIP PAST LAST ROW PATTERN ((A | B)+ C) "
        "DEFINE A AS c B AS a > 3 C AS e <> 'y'"
    )
    rng = np.random.default_rng(11)
    n = 20_000
    t = Tuples(
        {
            "k": rng.integers(0, 300, n).astype(np.uint64) * 211,
            "a": rng.integers(0, 16, n).astype(np.uint64),
            "c": rng.integers(0, 2, n).astype(bool),
            "e": rng.integers(0, 3, n),
        },
        n,
    )
    fast = reference.run(nfa, t, params, engine=engine, compiled=True)
    slow = reference.run(nfa, t, params, engine=engine, compiled=False)
    assert fast.matches == slow.matches and fast.drops.tolist() == slow.drops.tolist()
    assert len(fast.drops) > 100 and fast.count("one") > 100 and fast.count("two") > 100


def test_nfa_of_several_words(run):
    """An NFA of more than 128 states (three 64-bit words in the compiled loop), whose DFA is
    too large: the pattern counts 70 tuples, so a match is 72 tuples long."""
    nfa = nfacep.compile_text(
        STREAM + "QUERY q PARTITION k PATTERN (A (A | B){70} C) "
        "DEFINE A AS a < 8 B AS a >= 8 C AS c"
    )
    assert nfa.queries[0].count > 128
    rng = np.random.default_rng(5)
    n = 6000
    t = tuples(k=rng.integers(0, 3, n), a=rng.integers(0, 16, n), c=rng.random(n) < 0.05)
    by_nfa = run(nfa, t)
    assert by_nfa.engines == {"q": "nfa"}
    # every match: c at i, 70 tuples of the same key before it, and a < 8 on the one before
    a, c, k = (t.columns[f] for f in "ack")
    want = []
    for i in np.flatnonzero(c).tolist():
        before = np.flatnonzero(k[:i] == k[i])
        if len(before) >= 71 and a[before[-71]] < 8:
            want.append(i)
    assert seqs(by_nfa) == want and len(want) > 20


def test_more_predicates_than_packed_into_an_integer(run):
    """A query of 17 predicates numbers its predicate vectors by sorting them; as a query of
    the same predicates split in two, which packs them."""
    names = [f"P{i}" for i in range(18)]
    define = " ".join(f"P{i} AS a {'>=' if i % 2 else '<'} {i % 16}" for i in range(17))
    define += " P17 AS c"
    wide = nfacep.compile_text(
        STREAM + f"QUERY q PARTITION k PATTERN (({' | '.join(names)}) P17) DEFINE {define}"
    )
    assert len(wide.predicates) == 17  # P0 is P16; more than packed into an integer (16)
    rng = np.random.default_rng(9)
    n = 5000
    t = tuples(k=rng.integers(0, 20, n), a=rng.integers(0, 16, n), c=rng.random(n) < 0.3)
    params = EngineParams(partitions=12, tick_tuples=9, timer_bits=2)
    r = run(wide, t, params)
    # P17 after any tuple of the same partition: P1 (a >= 1) or P2 (a < 2) always holds
    a = run(
        nfacep.compile_text(
            STREAM + "QUERY q PARTITION k PATTERN (X P17) DEFINE X AS a <= 15 P17 AS c"
        ),
        t,
        params,
    )
    assert r.matches == a.matches and r.drops.tolist() == a.drops.tolist() and len(r.drops)


@pytest.mark.parametrize("way", ["narrow", "packed", "sorted"])
def test_symbols_number_the_admitted_predicate_vectors(way, monkeypatch):
    if way != "narrow":
        monkeypatch.setattr(decoder, "_narrow_field", lambda nfa, used: None)
    if way == "sorted":
        monkeypatch.setattr(decoder, "_PACKED_PREDICATES", 1)
    # all three read one UINT(4): narrow; a BOOL too, so the others for the second query
    nfa = nfacep.compile_text(
        STREAM + "QUERY q PATTERN (A B C) "
        "DEFINE A AS a < 6 B AS a > 3 C AS a <> 5;"
        "QUERY r PATTERN (A B C) "
        "DEFINE A AS a < 6 B AS a > 3 AND c C AS e <> 'y'"
    )
    rng = np.random.default_rng(2)
    n = 3000
    t = tuples(a=rng.integers(0, 16, n), c=rng.integers(0, 2, n), e=rng.integers(0, 3, n))
    preds = reference.predicate_matrix(nfa, t)
    admitted = rng.random(n) < 0.8
    for q, distinct in zip(nfa.queries, [4, 8], strict=True):
        used = nfa.predicates_of(q)
        vectors, packed, lut = reference.symbols(nfa, q, t, admitted)
        assert (vectors[lut[packed[admitted]]][:, used] == preds[admitted][:, used]).all()
        assert not vectors[:, [p for p in range(preds.shape[1]) if p not in used]].any()
        assert len(np.unique(vectors, axis=0)) == len(vectors) == distinct
        # only admitted tuples' vectors count
        few = np.zeros(n, dtype=bool)
        few[:2] = True
        vectors, _, _ = reference.symbols(nfa, q, t, few)
        assert len(vectors) == len(np.unique(preds[:2][:, used], axis=0))


@pytest.mark.parametrize("field", ["a", "c", "e"])
def test_predicates_of_one_narrow_field_match_as_vectors_do(field, run, monkeypatch):
    """A query whose predicates read one ENUM, BOOL or short UINT numbers its symbols by that
    field's values; the same query with symbols packed per tuple reports the same."""
    define = {
        "a": "A AS a < 6 B AS a > 3 C AS a = 9",
        "c": "A AS c B AS NOT c C AS c = TRUE",
        "e": "A AS e = 'x' B AS e <> 'z' C AS e = 'z'",
    }[field]
    nfa = nfacep.compile_text(STREAM + f"QUERY q PARTITION k PATTERN (A B* C) DEFINE {define}")
    rng = np.random.default_rng(4)
    n = 4000
    t = tuples(
        k=rng.integers(0, 30, n),
        a=rng.integers(0, 16, n),
        c=rng.integers(0, 2, n),
        e=rng.integers(0, 3, n),
    )
    # the symbols are the field's column itself
    _, packed, _ = reference.symbols(nfa, nfa.queries[0], t, np.ones(n, dtype=bool))
    assert np.shares_memory(packed, t.columns[field])
    params = EngineParams(partitions=20, tick_tuples=13, timer_bits=2)
    narrow = run(nfa, t, params)
    monkeypatch.setattr(decoder, "_narrow_field", lambda nfa, used: None)
    packed = run(nfa, t, params)
    assert narrow.matches == packed.matches and len(narrow.matches) > 50
    assert narrow.drops.tolist() == packed.drops.tolist() and len(narrow.drops)


@pytest.mark.parametrize(
    "column",
    [
        np.array([5, 3, 5, 9, 3], dtype=np.uint64),
        np.array([2**64 - 1, 0, 2**63, 0], dtype=np.uint64),  # too wide to index: sorted
        np.array([2**64 - 1, 2**64 - 5, 2**64 - 1], dtype=np.uint64),  # narrow, far from 0
        np.array([0, 7, 7, 2], dtype=np.uint64),
        np.array([-4, 7, -4, 0], dtype=np.int64),
        np.array([True, False, True]),
        np.array([1.5, -0.0, 1.5, 0.0], dtype=np.float32),
        np.array([2, 0, 2, 1], dtype=np.int64),
        np.arange(70_000, dtype=np.uint64)[::-1],  # more keys than uint16 codes
        np.zeros(0, dtype=np.uint64),
    ],
    ids=[
        "uint",
        "uint-wide",
        "uint-high",
        "uint-0",
        "int",
        "bool",
        "float",
        "enum",
        "many",
        "empty",
    ],
)
def test_factorise_is_unique_with_inverse(column):
    values, codes = reference.factorise(column)
    want_values, want_codes = np.unique(column, return_inverse=True)
    assert values.dtype == column.dtype and values.tolist() == want_values.tolist()
    assert codes.tolist() == want_codes.ravel().tolist()
    assert codes.dtype == (np.uint16 if len(values) <= 1 << 16 else np.int64)


def test_constants_are_broadcast_not_copied():
    """Constants in a predicate are 0-d arrays; every comparison still gives one bool per
    tuple, also between constants alone."""
    from nfacep.lang.evaluate import evaluate
    from nfacep.lang.predicates import Cmp, Const, FieldRef
    from nfacep.lang.types import UIntType

    x = np.array([1, 5, 9], dtype=np.uint64)
    assert evaluate(
        Cmp("<", FieldRef("x", UIntType(8)), Const(5, "int", None), "int"), {"x": x}, 3
    ).tolist() == [True, False, False]
    for kind, a, b in [("int", 1, 2), ("float", 1.5, 2.0), ("enum", 0, 1)]:
        got = evaluate(Cmp("<", Const(a, kind, None), Const(b, kind, None), kind), {}, 3)
        assert got.dtype == bool and got.tolist() == [True] * 3


def test_the_default_compiles_long_streams_only(monkeypatch):
    """Without ``compiled``, the loops are asked for on streams of ``_COMPILED_FROM`` tuples
    or more (per automaton), or when the automaton's loop has run in this process already;
    without numba (None), the array operations run instead."""
    loaded = []

    def spy():
        loaded.append(True)
        return None  # as without numba

    ran: set[str] = set()
    monkeypatch.setattr(reference, "_loops", spy)
    monkeypatch.setattr(reference, "ready", lambda name: name in ran)
    nfa = nfacep.compile_text(
        STREAM + "QUERY q PARTITION k PATTERN (A B* C) "
        "DEFINE A AS a < 6 B AS a > 3 AND c C AS e <> 'y'"
    )
    rng = np.random.default_rng(8)
    n = 2000
    t = tuples(
        k=rng.integers(0, 9, n),
        a=rng.integers(0, 16, n),
        c=rng.integers(0, 2, n),
        e=rng.integers(0, 3, n),
    )
    short = reference.run(nfa, t)
    assert not loaded and short.engines == {"q": "dfa"}
    ran.add("nfa_stream")  # another automaton's loop
    assert reference.run(nfa, t).matches == short.matches and not loaded
    ran.add("dfa_stream")
    assert reference.run(nfa, t).matches == short.matches and loaded == [True]
    ran.clear()
    monkeypatch.setattr(reference, "_COMPILED_FROM", {"dfa": n, "nfa": n})
    assert reference.run(nfa, t).matches == short.matches and len(short.matches) > 20
    assert loaded == [True, True]
    with pytest.raises(RuntimeError, match="needs numba"):
        reference.run(nfa, t, compiled=True)


@pytest.mark.skipif(not NUMBA, reason="numba is not installed")
def test_a_loop_is_ready_once_it_ran(monkeypatch):
    """``loops.ready``: a loop that ran in this process is ready; none is before numba's
    loops are imported (asking does not import them)."""
    from nfacep.reference import loops

    nfa = nfacep.compile_text(
        "CREATE STREAM s (a UINT(4)); QUERY q PATTERN (A B) DEFINE A AS a = 1 B AS a = 2"
    )
    t = tuples(a=np.array([1, 2, 2, 1, 2]))
    assert reference.run(nfa, t, compiled=True).seqs.tolist() == [1, 4]
    assert loops.ready("dfa_stream")
    monkeypatch.delitem(sys.modules, "nfacep.reference.compiled")
    assert not loops.ready("dfa_stream") and "nfacep.reference.compiled" not in sys.modules


@pytest.mark.skipif(not NUMBA, reason="numba is not installed")
def test_a_helper_below_loops_from_runs_its_loop_once_it_ran(monkeypatch):
    """``loops.loops(n, name)``: a partitioner's helper on fewer than ``LOOPS_FROM`` elements
    gets numpy's passes (None) until its own loop has run in the process, then the loop."""
    from nfacep.reference import loops

    compiled = loops.loops()
    ran = set()
    monkeypatch.setattr(loops, "ready", lambda name: name in ran)
    assert loops.loops(10, "carry_last") is None and loops.loops(10) is None
    ran.add("carry_last")
    assert loops.loops(10, "carry_last") is compiled and loops.loops(10, "first_index") is None
    assert loops.loops(loops.LOOPS_FROM, "first_index") is compiled


@pytest.mark.skipif(not NUMBA, reason="numba is not installed")
def test_compiled_loops_without_a_writable_cache():
    """With nowhere to cache them (no locator numba can use), the loops compile in every
    process instead of failing to load."""
    code = (
        "import numpy as np, nfacep\n"
        "from nfacep.reference import compiled, matcher as reference\n"
        "from nfacep.io.tuples import Tuples\n"
        "assert type(compiled.dfa_stream._cache).__name__ == 'NullCache'\n"
        "nfa = nfacep.compile_text('CREATE STREAM s (a UINT(4)); "
        "QUERY q PATTERN (A B) DEFINE A AS a = 1 B AS a = 2')\n"
        "t = Tuples({'a': np.array([1, 2, 2, 1, 2], np.uint64)}, 5)\n"
        "print(reference.run(nfa, t, compiled=True).seqs.tolist())\n"
    )
    env = {**os.environ, "NUMBA_CACHE_LOCATOR_CLASSES": "ZipCacheLocator"}
    out = subprocess.run(
        [sys.executable, "-W", "error", "-c", code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.split() == ["[1,", "4]"]


@pytest.mark.skipif(not NUMBA, reason="numba is not installed")
@settings(max_examples=60)
@given(
    pattern=st.sampled_from([*PATTERNS, "A (A | B){3} C"]),
    skip=st.booleans(),
    engine=st.sampled_from(["dfa", "nfa"]),
    n=st.integers(0, 300),
    keys=st.integers(1, 9),
    store=st.sampled_from(["pipeline", "table"]),
    exponent=st.integers(0, 3),
    tick=st.integers(0, 6),
    bits=st.integers(1, 3),
    seed=st.integers(0, 2**32 - 1),
)
def test_compiled_loops_equal_array_operations_on_random_streams(
    pattern, skip, engine, n, keys, store, exponent, tick, bits, seed
):
    """Hypothesis: whatever the pattern, stream, store and timers, both ways of stepping
    report the same (the oracle's differential tests run the array operations: their
    streams are short)."""
    clause = "AFTER MATCH SKIP PAST LAST ROW " if skip else ""
    nfa = nfacep.compile_text(
        STREAM + f"QUERY q PARTITION k {clause}PATTERN ({pattern}) "
        "DEFINE A AS a < 6 B AS a > 3 AND c C AS e <> 'y'"
    )
    rng = np.random.default_rng(seed)
    t = tuples(
        k=rng.integers(0, keys, n) * 31,
        a=rng.integers(0, 10, n),
        c=rng.integers(0, 2, n),
        e=rng.integers(0, 3, n),
    )
    params = EngineParams(
        store=store, partitions=1 << exponent, ways=1, tick_tuples=tick, timer_bits=bits
    )
    fast = reference.run(nfa, t, params, engine=engine, compiled=True)
    slow = reference.run(nfa, t, params, engine=engine, compiled=False)
    assert fast.matches == slow.matches and fast.drops.tolist() == slow.drops.tolist()
