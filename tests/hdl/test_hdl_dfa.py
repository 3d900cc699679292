"""DFA gateware: both encodings report exactly what the reference matcher and NfaMatcher do."""

import numpy as np
import pytest
from amaranth.back import rtlil
from streams import run_matcher

import nfacep
from nfacep.hdl.dfa import DfaMatcher, Encoding, moore_dfa
from nfacep.hdl.nfa import NfaMatcher
from nfacep.io.tuples import Tuples
from nfacep.reference import dfa
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
BITS = "CREATE STREAM bits (b UINT(1));\n"


def bits_query(i: int) -> str:
    """The paper's (0|1)* 1 (0|1)^i."""
    return BITS + f"QUERY q PATTERN ((Z | O)* O (Z | O){{{i}}}) DEFINE Z AS b = 0 O AS b = 1"


def predicate_words(nfa, tuples):
    preds = reference.predicate_matrix(nfa, tuples)
    return [int(sum(int(b) << i for i, b in enumerate(row))) for row in preds]


def random_tuples(rng, n):
    return Tuples(
        {
            "a": rng.integers(0, 16, n).astype(np.uint64),
            "c": rng.integers(0, 2, n).astype(bool),
            "e": rng.integers(0, 3, n),
        },
        n,
    )


@pytest.mark.parametrize("shuffle", [None, 7])
@pytest.mark.parametrize("encoding", list(Encoding))
@pytest.mark.parametrize("skip", [False, True])
def test_dfa_matcher_equals_reference(encoding, skip, shuffle):
    clause = "AFTER MATCH SKIP PAST LAST ROW " if skip else ""
    text = STREAM + "".join(
        f"QUERY q{i} {clause}PATTERN ({p}) {DEFINE};" for i, p in enumerate(PATTERNS)
    )
    nfa = nfacep.compile_text(text)
    tuples = random_tuples(np.random.default_rng(10 + int(skip)), 300)
    got = run_matcher(
        DfaMatcher(nfa, 16, encoding, shuffle=shuffle), predicate_words(nfa, tuples), seed=int(skip)
    )
    assert [seq for seq, _ in got] == list(range(tuples.n))  # in order, none lost
    expected = reference.run(nfa, tuples)
    bits = {}
    for seq, q in zip(expected.seqs.tolist(), expected.queries.tolist(), strict=True):
        bits[seq] = bits.get(seq, 0) | 1 << q
    assert {seq: m for seq, m in got if m} == bits
    assert len(bits) > 100


@pytest.mark.parametrize("i", [1, 2, 4])
def test_dfa_encodings_equal_nfa_matcher_on_the_paper_pattern(i):
    nfa = nfacep.compile_text(bits_query(i))
    rng = np.random.default_rng(i)
    tuples = Tuples({"b": rng.integers(0, 2, 200).astype(np.uint64)}, 200)
    words = predicate_words(nfa, tuples)
    want = run_matcher(NfaMatcher(nfa, 16), words, seed=i, gap=0.0, stall=0.2)
    assert sum(m for _, m in want) > 40
    for encoding in Encoding:
        for shuffle in (None, i):
            dut = DfaMatcher(nfa, 16, encoding, shuffle=shuffle)
            assert run_matcher(dut, words, seed=i) == want


@pytest.mark.parametrize("i", range(1, 9))
def test_paper_state_count(i):
    """1 + (2^(i+1) - 1) states, as the paper counts them and nfacep.reference.dfa.minimize does."""
    nfa = nfacep.compile_text(bits_query(i))
    (q,) = nfa.queries
    d = moore_dfa(nfa, q)
    assert d.states == 2 ** (i + 1)
    subsets = dfa.build(nfa, q, dfa.true_masks(nfa, q, dfa.all_symbols(nfa, q)))
    assert d.states == dfa.minimize(subsets)
    assert d.table[0].tolist() != []  # state 0 is the initial state
    assert not d.output[0]
    assert list(d.output) == [s >= d.first_match for s in range(d.states)]


def test_shuffled_keeps_initial_and_matching_states():
    nfa = nfacep.compile_text(bits_query(4))
    d = moore_dfa(nfa, nfa.queries[0])
    s = d.shuffled(3)
    assert s.states == d.states and s.first_match == d.first_match
    assert not np.array_equal(s.table, d.table)
    assert list(s.output) == list(d.output)
    assert sorted(np.bincount(s.table.ravel(), minlength=s.states)) == sorted(
        np.bincount(d.table.ravel(), minlength=d.states)
    )


def test_flip_flops_per_encoding():
    nfa = nfacep.compile_text(bits_query(3))
    one_hot = DfaMatcher(nfa, 1, Encoding.ONE_HOT)
    compressed = DfaMatcher(nfa, 1, Encoding.COMPRESSED)
    assert one_hot.flipflops == 16
    assert compressed.flipflops == 4
    text = rtlil.convert(compressed)
    assert "fsm_encoding" in text  # Yosys must not re-encode the binary state
    assert "\\q_state " in text or "\\q_state\n" in text
    assert "\\q_onehot" in rtlil.convert(one_hot)


def test_too_large():
    nfa = nfacep.compile_text(bits_query(6))
    with pytest.raises(dfa.TooLarge):
        moore_dfa(nfa, nfa.queries[0], max_states=64)
