#!/usr/bin/env python3
"""Reference matcher and match file with and without MEASURES (issue 27 item 5).

The race of ``reference_throughput.py`` (one reading per time unit, runners interleaved) and
the query of ``queries/marathon.sql`` as it is; with ``MEASURES FIRST(seq) AS start_seq``
(the engine reports starts, no value is read); and with every kind of measure
(``FIRST(speed)``, ``LAST(time)``, ``COUNT(*)``, ``MATCH_NUMBER()``, ``FIRST(seq)``, read on
the host). Each run is what ``nfacep match`` does after reading: the stream in pieces of
``--chunk`` tuples through the reference matcher and the match file's writer (into memory),
partitioner with one element per runner. Each rate is the best of ``--repeat`` runs, compiled
loops loaded beforehand. Wall-clock on a shared machine: read ratios, not single values.

    python benchmarks/reference_measures.py --tuples 4000000 --runners 1000 10000
"""

from __future__ import annotations

import argparse
import io
import time

from reference_throughput import QUERY, race

import nfacep
from nfacep.io.tuples import Tuples
from nfacep.params import EngineParams
from nfacep.reference.matcher import Reference
from nfacep.result import MatchRows

PATTERN = "PARTITION runner\nPATTERN"
MEASURES = {
    "no measures": "",
    "start_seq": "MEASURES FIRST(seq) AS start_seq\n",
    "all kinds": (
        "MEASURES FIRST(speed) AS v0, LAST(time) AS t1, COUNT(*) AS n, MATCH_NUMBER() AS m, "
        "FIRST(seq) AS start_seq\n"
    ),
}


def run(nfa, tuples: Tuples, params: EngineParams, chunk: int) -> tuple[float, int, int]:
    """Seconds to match and write ``tuples`` in pieces, the matches, the file's size."""
    out = io.StringIO()
    start = time.perf_counter()
    feed = Reference().pieces(nfa, params)
    rows = MatchRows(out, nfa.program)
    matches = 0
    for at in range(0, tuples.n, chunk):
        piece = Tuples({k: v[at : at + chunk] for k, v in tuples.columns.items()}, 0)
        piece.n = len(piece.columns["time"])
        result = feed.feed(piece, last=at + chunk >= tuples.n)
        rows.write(result, piece)
        matches += len(result.seqs)
    return time.perf_counter() - start, matches, len(out.getvalue())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tuples", type=int, default=4_000_000)
    ap.add_argument("--runners", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--chunk", type=int, default=1 << 20, help="tuples a piece (match's default)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    text = QUERY.read_text()
    assert PATTERN in text
    print(f"{'runners':>7} | {'measures':>11} | {'M tuples/s':>10} | {'matches':>8} | file bytes")
    print(f"{'-' * 7}-|-{'-' * 11}-|-{'-' * 10}-|-{'-' * 8}-|-{'-' * 10}")
    for runners in args.runners:
        tuples = race(args.tuples, runners, 1)
        params = EngineParams(partitions=runners)
        for name, measures in MEASURES.items():
            nfa = nfacep.compile_text(
                text.replace(PATTERN, PATTERN.replace("PATTERN", measures + "PATTERN"))
            )
            run(nfa, race(50_000, runners, 2), params, 20_000)  # load the compiled loops
            best, matches, size = min(
                run(nfa, tuples, params, args.chunk) for _ in range(args.repeat)
            )
            print(
                f"{runners:>7} | {name:>11} | {args.tuples / best / 1e6:10.2f} | "
                f"{matches:>8} | {size}"
            )


if __name__ == "__main__":
    main()
