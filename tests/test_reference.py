"""Reference matcher internals: its engines agree with each other on the same input.

The reference is compared with the independent oracle in test_oracle_differential.py; here
the DFA engine (with and without chunking of long runs) is compared with the bit-matrix NFA
engine, and small cases are checked by hand.
"""

import numpy as np
import pytest

import nfacep
from nfacep import capacity, reference
from nfacep.params import EngineParams
from nfacep.tuples import Tuples

STREAM = "CREATE STREAM s (k UINT(8), a UINT(4), c BOOL, e ENUM('x', 'y', 'z'));\n"


def tuples(**columns) -> Tuples:
    n = len(next(iter(columns.values())))
    cols = {"k": np.zeros(n, np.uint64), "a": np.zeros(n, np.uint64),
            "c": np.zeros(n, bool), "e": np.zeros(n, np.int64)}
    for name, values in columns.items():
        cols[name] = np.asarray(values, dtype=cols[name].dtype)
    return Tuples(cols, n)


def seqs(result, name=None):
    return [s for s, q, _ in result.matches if name is None or q == name]


def test_every_end_and_skip_past_last_row():
    nfa = nfacep.compile_text(STREAM + "QUERY every PATTERN (A B+) DEFINE A AS a = 1 B AS a = 2;"
                              "QUERY skip AFTER MATCH SKIP PAST LAST ROW PATTERN (A B+) "
                              "DEFINE A AS a = 1 B AS a = 2")
    t = tuples(a=[1, 2, 2, 2, 1, 1, 2])
    r = reference.run(nfa, t)
    assert seqs(r, "every") == [1, 2, 3, 6]
    assert seqs(r, "skip") == [1, 6]
    # one record per (tuple, query), sorted by seq then query name
    assert r.matches[:2] == [(1, "every", None), (1, "skip", None)]


def test_overlapping_predicates_one_record_per_tuple():
    nfa = nfacep.compile_text(STREAM + "QUERY q PATTERN (A | B | A B) "
                              "DEFINE A AS a >= 1 B AS a <= 1")
    r = reference.run(nfa, tuples(a=[1, 0, 2, 5]))
    assert seqs(r) == [0, 1, 2, 3]


def test_partitions_are_independent_and_keys_are_printed_as_written():
    nfa = nfacep.compile_text(
        "CREATE STREAM s (k ENUM('red', 'blue'), a UINT(4));"
        "QUERY q PARTITION k PATTERN (A B) DEFINE A AS a = 1 B AS a = 2")
    t = Tuples({"k": np.array([0, 1, 0, 1]), "a": np.array([1, 1, 2, 2], np.uint64)}, 4)
    assert reference.run(nfa, t).matches == [(2, "q", "red"), (3, "q", "blue")]


def test_capacity_drops_and_timer_restart():
    nfa = nfacep.compile_text(STREAM + "QUERY q PARTITION k PATTERN (A A) DEFINE A AS c")
    t = tuples(k=[1, 2, 1, 2, 1], c=[1, 1, 1, 1, 1])
    full = reference.run(nfa, t, EngineParams(partitions=1))
    assert full.drops.tolist() == [1, 3] and seqs(full) == [2, 4]
    # K=1, B=1: each tuple is followed by a tick that frees its element at once
    ticking = reference.run(nfa, t, EngineParams(partitions=1, tick_tuples=1, timer_bits=1))
    assert ticking.drops.tolist() == [] and seqs(ticking) == []
    # B=2 (timer 3), a tick after every tuple: key 3 finds both elements busy at seq 4 (key 2
    # at 1, key 1 at 2) and is dropped; that tick frees key 2, so key 3 starts at 5 and
    # matches at 6; key 1 was freed by the tick after 5 and restarts at 7 (no match)
    t2 = tuples(k=[1, 1, 2, 1, 3, 3, 3, 1], c=[1] * 8)
    r = reference.run(nfa, t2, EngineParams(partitions=2, tick_tuples=1, timer_bits=2))
    assert seqs(r) == [1, 3, 6] and r.drops.tolist() == [4]


PATTERNS = ["A B* C", "(A | B)+ C?", "A{2,4} B", "PERMUTE(A, B) C*", "(A B | B A)* C",
            "A . . B", "(A* B?)+ C", "A+ B+ C+"]


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("skip", [False, True])
def test_dfa_and_nfa_engines_agree(pattern, skip):
    clause = "AFTER MATCH SKIP PAST LAST ROW " if skip else ""
    nfa = nfacep.compile_text(STREAM + f"QUERY q PARTITION k {clause}PATTERN ({pattern}) "
                              "DEFINE A AS a < 6 B AS a > 3 AND c C AS e <> 'y'")
    rng = np.random.default_rng(len(pattern) + skip)
    n = 3000
    t = tuples(k=rng.integers(0, 40, n), a=rng.integers(0, 10, n), c=rng.integers(0, 2, n),
               e=rng.integers(0, 3, n))
    params = EngineParams(partitions=16, tick_tuples=7, timer_bits=2)
    dfa = reference.run(nfa, t, params, engine="dfa")
    assert dfa.engines == {"q": "dfa"}
    nfa_r = reference.run(nfa, t, params, engine="nfa")
    assert dfa.matches == nfa_r.matches and dfa.drops.tolist() == nfa_r.drops.tolist()
    assert len(dfa.drops) and len(dfa.matches)


def test_long_runs_are_chunked_without_changing_results():
    nfa = nfacep.compile_text(STREAM + "QUERY q PATTERN (A B{3,} C | C A+ B) "
                              "DEFINE A AS a < 6 B AS a > 3 C AS e <> 'y'")
    rng = np.random.default_rng(7)
    n = 40_000  # one run far longer than a chunk
    t = tuples(a=rng.integers(0, 10, n), e=rng.integers(0, 3, n))
    chunked = reference.run(nfa, t, engine="dfa")
    plain = reference.run(nfa, t, engine="nfa")
    assert chunked.matches == plain.matches and len(plain.matches) > 1000


def test_admission_fast_path_equals_sequential_model():
    rng = np.random.default_rng(3)
    for k, b in [(0, 1), (1, 1), (3, 2), (5, 4)]:
        codes = rng.integers(0, 30, 2000)
        fast = capacity.admit(codes, EngineParams(partitions=10_000, tick_tuples=k, timer_bits=b))
        slow = capacity.admit_sequential(
            codes, EngineParams(partitions=10_000, tick_tuples=k, timer_bits=b))
        assert fast.admitted.all() and slow.admitted.all()
        assert (fast.fresh == slow.fresh).all()
        # at capacity the model switches to the sequential pass; both must agree
        tight = capacity.admit(codes, EngineParams(partitions=8, tick_tuples=k, timer_bits=b))
        ref = capacity.admit_sequential(
            codes, EngineParams(partitions=8, tick_tuples=k, timer_bits=b))
        assert (tight.admitted == ref.admitted).all() and (tight.fresh == ref.fresh).all()


def test_wide_integer_arithmetic_is_exact():
    nfa = nfacep.compile_text("CREATE STREAM s (x UINT(64), y INT(64));"
                              "QUERY q PATTERN (A) DEFINE A AS x - y > 18446744073709551615")
    x = np.array([2**64 - 1, 2**64 - 1, 5], dtype=np.uint64)
    y = np.array([-1, 0, -(2**63)], dtype=np.int64)
    r = reference.run(nfa, Tuples({"x": x, "y": y}, 3))
    assert seqs(r) == [0]


def test_float_comparisons_follow_ieee():
    nfa = nfacep.compile_text("CREATE STREAM s (f FLOAT32);"
                              "QUERY lt PATTERN (A) DEFINE A AS f < 3.3;"
                              "QUERY ne PATTERN (A) DEFINE A AS f <> 0;"
                              "QUERY eq PATTERN (A) DEFINE A AS f = 0")
    f = np.array([np.float32(3.3), np.nan, -0.0, 3.2999], dtype=np.float32)
    r = reference.run(nfa, Tuples({"f": f}, 4))
    assert seqs(r, "lt") == [2, 3]  # f32(3.3) < 3.3f is false; NaN is never less
    assert seqs(r, "ne") == [0, 1, 3]  # NaN <> 0 holds
    assert seqs(r, "eq") == [2]  # -0 = 0
