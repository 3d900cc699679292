#!/usr/bin/env python3
"""NFA vs DFA state counts for (0|1)*1(0|1)^i, i = 1..14: the shape of the paper's Figure 4.

The NFA comes from nfacep's wiring algorithm (one state per pattern leaf); the DFA by subset
construction over all predicate vectors (overlapping predicates included, paper §4.2), then
minimised as a Moore machine (the paper's count, 1 + (2^(i+1) - 1)). Prints a table and, with
`--plot F`, draws both on a log scale. Counts, not timings: deterministic.
"""

from __future__ import annotations

import argparse

import plots

import nfacep
from nfacep.reference import dfa

STREAM = "CREATE STREAM bits (b UINT(1));\n"


def counts(i: int) -> tuple[int, int, int]:
    """NFA states, reachable DFA subsets, minimal DFA states."""
    nfa = nfacep.compile_text(
        STREAM + f"QUERY q PATTERN ((Z | O)* O (Z | O){{{i}}}) DEFINE Z AS b = 0 O AS b = 1"
    )
    (q,) = nfa.queries
    d = dfa.build(nfa, q, dfa.true_masks(nfa, q, dfa.all_symbols(nfa, q)), max_states=1 << 20)
    return q.count, len(d.sets), dfa.minimize(d)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-i", type=int, default=14)
    ap.add_argument("--plot", metavar="PNG")
    args = ap.parse_args()
    print("pattern (Z|O)* O (Z|O){i}; Z: b = 0, O: b = 1")
    print(
        f"{'i':>3} {'NFA':>5} {'DFA subsets':>12} {'DFA minimal':>12} {'paper 1+(2^(i+1)-1)':>20}"
    )
    rows = []
    for i in range(1, args.max_i + 1):
        n, subsets, minimal = counts(i)
        rows.append((i, n, subsets, minimal))
        print(f"{i:>3} {n:>5} {subsets:>12} {minimal:>12} {2 ** (i + 1):>20}")
    if args.plot:
        fig, ax = plots.figure(figsize=(6, 4))
        xs = [r[0] for r in rows]
        ax.plot(xs, [r[1] for r in rows], "o-", label="NFA (nfacep wiring)")
        ax.plot(xs, [r[3] for r in rows], "s-", label="DFA (minimal)")
        ax.set_yscale("log")
        ax.set_xlabel("i")
        ax.set_ylabel("states")
        ax.set_title("(0|1)*1(0|1)^i: state explosion")
        ax.legend()
        plots.save(fig, args.plot)


if __name__ == "__main__":
    main()
