#!/usr/bin/env python3
"""Reference matcher on the marathon query with and without a time window and start_seq
(issue 14).

The race of ``reference_throughput.py`` (one reading per time unit, runners interleaved), the
query of ``queries/marathon.sql`` as it is (a DFA), with ``ORDER BY time … WITHIN n``, with
``MEASURES FIRST(seq) AS start_seq`` and with both (the NFA with per-state starts, in the
compiled loop), from columns in memory, partitioner
with one element per runner. Each rate is the best of ``--repeat`` runs, compiled loops
loaded beforehand. Wall-clock on a shared machine: read ratios, not single values.

    python benchmarks/reference_within.py --tuples 10000000 --runners 1000 10000 --within 20000
"""

from __future__ import annotations

import argparse
import time

from reference_throughput import QUERY, race

import nfacep
from nfacep.params import EngineParams
from nfacep.reference import matcher as reference

PATTERN = "PARTITION runner\nPATTERN ( A NOTB* C | A NOTC* D | A NOTD* E )"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tuples", type=int, default=10_000_000)
    ap.add_argument("--runners", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--within", type=int, default=20_000, help="the window, in time units")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    text = QUERY.read_text()
    assert PATTERN in text
    windowed = text.replace(
        PATTERN, PATTERN.replace("\n", "\nORDER BY time\n") + f" WITHIN {args.within}"
    )
    measure = "\nMEASURES FIRST(seq) AS start_seq\n"
    starts = text.replace(PATTERN, PATTERN.replace("\n", measure))
    both = text.replace(
        PATTERN, PATTERN.replace("\n", "\nORDER BY time" + measure) + f" WITHIN {args.within}"
    )
    for runners in args.runners:
        tuples = race(args.tuples, runners, 1)
        params = EngineParams(partitions=runners)
        for name, query in (
            ("no window", text),
            (f"WITHIN {args.within}", windowed),
            ("start_seq", starts),
            ("both", both),
        ):
            nfa = nfacep.compile_text(query)
            reference.run(nfa, race(50_000, runners, 2), params, compiled=True)  # load loops
            best = float("inf")
            for _ in range(args.repeat):
                start = time.perf_counter()
                result = reference.run(nfa, tuples, params)
                best = min(best, time.perf_counter() - start)
            print(
                f"{runners:>6} runners, {name:>14}: {args.tuples / best / 1e6:6.1f} M tuples/s, "
                f"{len(result.seqs)} matches ({result.engines['cheat']})"
            )


if __name__ == "__main__":
    main()
