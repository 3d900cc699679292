"""The wiring algorithm against the paper's own figures, and NFA invariants."""

import re

import pytest

import nfacep
from nfacep.reference import dfa

STREAM = "CREATE STREAM s (a UINT(8), c ENUM('A', 'B', 'C', 'D', 'E'));\n"


def wiring(pattern: str, defines: str = "") -> str:
    nfa = nfacep.compile_text(STREAM + f"QUERY q PATTERN ({pattern}) {defines}")
    return "\n".join(nfa.dump().splitlines()[len(nfa.predicates) + 1 :])


def test_figure_6_ab_star_c():
    # Figure 6: A gets {'1'}, B gets {A, B}, C gets {A, B}; C accepts.
    assert (
        wiring("A B* C")
        == """\
  st0_A [true] <- {1}
  st1_B [true] <- {st0_A, st1_B}
  st2_C [true] <- {st0_A, st1_B} accept"""
    )


def test_figure_3_ab_or_ba():
    # Automaton 1 / Figure 3: two branches, each two states; both second states accept.
    assert (
        wiring("A B | B A")
        == """\
  st0_A [true] <- {1}
  st1_B [true] <- {st0_A} accept
  st2_B [true] <- {1}
  st3_A [true] <- {st2_B} accept"""
    )


def test_marathon_wiring():
    defs = (
        "DEFINE A AS (c = 'A') NOTB AS (c != 'B') C AS (c = 'C') NOTC AS (c != 'C') "
        "D AS (c = 'D') NOTD AS (c != 'D') E AS (c = 'E')"
    )
    nfa = nfacep.compile_text(
        STREAM + f"QUERY cheat PARTITION a PATTERN ( A NOTB* C | A NOTC* D | A NOTD* E ) {defs}"
    )
    assert (
        nfa.dump()
        == """\
p0: c = 'A'
p1: c <> 'B'
p2: c = 'C'
p3: c <> 'C'
p4: c = 'D'
p5: c <> 'D'
p6: c = 'E'
query cheat: states 0..8
  st0_A [p0] <- {1}
  st1_NOTB [p1] <- {st0_A, st1_NOTB}
  st2_C [p2] <- {st0_A, st1_NOTB} accept
  st3_A [p0] <- {1}
  st4_NOTC [p3] <- {st3_A, st4_NOTC}
  st5_D [p4] <- {st3_A, st4_NOTC} accept
  st6_A [p0] <- {1}
  st7_NOTD [p5] <- {st6_A, st7_NOTD}
  st8_E [p6] <- {st6_A, st7_NOTD} accept"""
    )


WIRINGS = [
    ("A+ B", ["A <- {1, st0_A}", "B <- {st0_A} accept"]),
    ("A? B", ["A <- {1}", "B <- {1, st0_A} accept"]),
    ("(A B)* C", ["A <- {1, st1_B}", "B <- {st0_A}", "C <- {1, st1_B} accept"]),
    ("A (B C)+", ["A <- {1}", "B <- {st0_A, st2_C}", "C <- {st1_B} accept"]),
    ("A{2,3}", ["A <- {1}", "A <- {st0_A} accept", "A <- {st1_A} accept"]),
    ("A{2,}", ["A <- {1}", "A <- {st0_A, st1_A} accept"]),
    ("PERMUTE(A, B)", ["A <- {1}", "B <- {st0_A} accept", "B <- {1}", "A <- {st2_B} accept"]),
    (". A", ["any <- {1}", "A <- {st0_any} accept"]),
    ("A? B? C", ["A <- {1}", "B <- {1, st0_A}", "C <- {1, st0_A, st1_B} accept"]),
    ("A*? B+?", ["A <- {1, st0_A}", "B <- {1, st0_A, st1_B} accept"]),
    ("((A*)*)* B", ["A <- {1, st0_A}", "B <- {1, st0_A} accept"]),
]


@pytest.mark.parametrize(("pattern", "expected"), WIRINGS)
def test_wiring_table(pattern, expected):
    lines = [
        re.sub(r"^\s*st\d+_(\S+) \[[^\]]*\] ", r"\1 ", line)
        for line in wiring(pattern).splitlines()
    ]
    assert lines == expected


def test_deep_nesting_is_linear():
    # each closure used to be wired twice; 90 nested stars must not take 2**90 steps
    nfa = nfacep.compile_text(STREAM + "QUERY q PATTERN (" + "(" * 90 + "A*" + ")*" * 90 + " B)")
    assert len(nfa.states) == 2


def test_state_explosion_counts():
    # (0|1)*1(0|1)^i: the NFA grows linearly, the DFA exponentially (paper §4.4)
    counts = []
    for i in range(1, 7):
        nfa = nfacep.compile_text(
            STREAM + f"QUERY q PATTERN ((Z | O)* O (Z | O){{{i}}}) DEFINE Z AS a = 0 O AS a = 1"
        )
        (q,) = nfa.queries
        symbols = dfa.all_symbols(nfa, q)
        d = dfa.build(nfa, q, dfa.true_masks(nfa, q, symbols))
        counts.append((q.count, dfa.minimize(d)))
    assert [n for n, _ in counts] == [3 + 2 * i for i in range(1, 7)]
    assert [m for _, m in counts] == [2 ** (i + 1) for i in range(1, 7)]
