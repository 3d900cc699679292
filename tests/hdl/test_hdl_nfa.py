"""NFA gateware: the stand-alone matcher (one flip-flop per state) against the reference."""

import numpy as np
import pytest
from streams import run_matcher

import nfacep
from nfacep.hdl.nfa import NfaMatcher
from nfacep.io.tuples import Tuples
from nfacep.reference import matcher as reference

STREAM = "CREATE STREAM s (a UINT(4), c BOOL, e ENUM('x', 'y', 'z'));\n"
DEFINE = "DEFINE A AS a < 6 B AS a > 3 AND c C AS e <> 'y'"
PATTERNS = [
    "A B* C",
    "(A | B)+ C?",
    "A{2,4} B",
    "PERMUTE(A, B) C*",
    "(A B | B A)* C",
    "A . . B",
    "(A* B?)+ C",
    "A+ B+ C+",
    "A | B | C",
]


def simulate(nfa, tuples, *, seed, gap=0.3, stall=0.3):
    preds = reference.predicate_matrix(nfa, tuples)
    words = [int(sum(int(b) << i for i, b in enumerate(row))) for row in preds]
    return run_matcher(NfaMatcher(nfa, 16), words, seed=seed, gap=gap, stall=stall)


def random_tuples(rng, n):
    return Tuples(
        {
            "a": rng.integers(0, 16, n).astype(np.uint64),
            "c": rng.integers(0, 2, n).astype(bool),
            "e": rng.integers(0, 3, n),
        },
        n,
    )


@pytest.mark.parametrize("skip", [False, True])
def test_standalone_nfa_equals_reference(skip):
    clause = "AFTER MATCH SKIP PAST LAST ROW " if skip else ""
    text = STREAM + "".join(
        f"QUERY q{i} {clause}PATTERN ({p}) {DEFINE};" for i, p in enumerate(PATTERNS)
    )
    nfa = nfacep.compile_text(text)
    tuples = random_tuples(np.random.default_rng(int(skip)), 300)
    got = simulate(nfa, tuples, seed=int(skip))
    assert [seq for seq, _ in got] == list(range(tuples.n))  # in order, none lost
    expected = reference.run(nfa, tuples)
    bits = {}
    for seq, q in zip(expected.seqs.tolist(), expected.queries.tolist(), strict=True):
        bits[seq] = bits.get(seq, 0) | 1 << q
    assert {seq: m for seq, m in got if m} == bits
    assert len(bits) > 100


def test_one_flip_flop_per_state_named_after_the_query():
    from amaranth.back import rtlil

    nfa = nfacep.compile_text(STREAM + "QUERY cheat PATTERN (A B* C) " + DEFINE)
    text = rtlil.convert(NfaMatcher(nfa, 1))
    for name in ("st0_A", "st1_B", "st2_C"):
        assert f"\\{name}" in text
