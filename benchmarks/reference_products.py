#!/usr/bin/env python3
"""Predicate evaluation in the reference matcher with ``*`` by constants (issue 27 item 4).

Times :func:`nfacep.lang.evaluate.evaluate` on random columns for a comparison without and
with products: 32-bit fields (every value fits int64: numpy's int64 arithmetic) and 64-bit
fields (``u64 * 10`` leaves int64 and uint64: exact Python integers in object arrays). Each
rate is the best of ``--repeat`` runs; wall-clock on a shared machine, read ratios.

    python benchmarks/reference_products.py --tuples 1000000
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import nfacep
from nfacep.lang.evaluate import evaluate

STREAM = "CREATE STREAM s (a UINT(32), b UINT(32), u UINT(64), i INT(64));\n"
CONDITIONS = {
    "a > b (UINT(32))": "a > b",
    "a * 10 > b * 11 (UINT(32))": "a * 10 > b * 11",
    "u > i (64-bit)": "u > i",
    "u * 10 > i * 11 (64-bit)": "u * 10 > i * 11",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tuples", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    n = args.tuples
    rng = np.random.default_rng(1)
    columns = {
        "a": rng.integers(0, 1 << 32, n, dtype=np.uint64),
        "b": rng.integers(0, 1 << 32, n, dtype=np.uint64),
        "u": rng.integers(0, 1 << 64, n, dtype=np.uint64, endpoint=False),
        "i": rng.integers(-(1 << 63), (1 << 63) - 1, n, dtype=np.int64),
    }
    print(f"{'condition':32} {'tuples/s':>14}")
    for name, condition in CONDITIONS.items():
        nfa = nfacep.compile_text(STREAM + f"QUERY q PATTERN (A) DEFINE A AS {condition};")
        expr = nfa.predicates[0].expr
        best = float("inf")
        for _ in range(args.repeat):
            start = time.perf_counter()
            evaluate(expr, columns, n)
            best = min(best, time.perf_counter() - start)
        print(f"{name:32} {n / best:14,.0f}")


if __name__ == "__main__":
    main()
