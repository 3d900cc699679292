"""A fuzz campaign on the query language: mutated query files through ``nfacep check`` and
``nfacep explain --json``, each in a worker process with a time and memory bound.

    .venv/bin/python tests/fuzz_queries.py --inputs 100000 --workers 2 [--seed 1] [--out DIR]

Prints the number of inputs tried and the counts of outcomes: accepted, clean errors
(``file:line:col:`` and exit 2), crashes and hangs. The failing inputs are written to
``--out`` (default ``fuzz-failures/``) with what happened, and the exit status is 1 when
there are any. The mutator and the worker are ``tests/query_fuzz.py``'s, the same as the CI
test's (tests/lang/test_query_fuzz.py), so a failure found here can become a regression test.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import sys
import time
from pathlib import Path

import query_fuzz  # beside this script: its folder is on sys.path when it runs


def _shard(seed: int, count: int, timeout: float, memory: int) -> query_fuzz.Report:
    with query_fuzz.Runner(timeout=timeout, memory_bytes=memory) as runner:
        return query_fuzz.campaign(query_fuzz.mutants(seed, count), runner)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--inputs", type=int, default=10_000, help="inputs to try (default 10000)")
    p.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    p.add_argument("--seed", type=int, default=1, help="first seed; shard k uses seed + k")
    p.add_argument(
        "--shard-inputs",
        type=int,
        default=2_000,
        help="inputs per shard, one seed each (default 2000)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        help="seconds an input may take before it counts as a hang (default 10)",
    )
    p.add_argument(
        "--memory-mib",
        type=int,
        default=1024,
        help="address space a worker may add after start-up (default 1024 MiB)",
    )
    p.add_argument("--out", default="fuzz-failures", help="folder for failing inputs")
    args = p.parse_args(argv)

    shards = []
    left, seed = args.inputs, args.seed
    while left > 0:
        shards.append((seed, min(left, args.shard_inputs)))
        left -= args.shard_inputs
        seed += 1
    total = query_fuzz.Report()
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(args.workers) as pool:
        futures = [
            pool.submit(_shard, s, n, args.timeout, args.memory_mib << 20) for s, n in shards
        ]
        for done in concurrent.futures.as_completed(futures):
            total.merge(done.result())
            print(f"[{time.monotonic() - start:7.0f} s] {total.summary()}", flush=True)
    print(f"seeds {args.seed}..{seed - 1}: {total.summary()}")
    print(f"the slowest input: {total.slowest_input[:200]!r}")
    if total.failures:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        for i, (outcome, data, detail) in enumerate(total.failures):
            (out / f"{i:04d}-{outcome}.sql").write_bytes(data)
            (out / f"{i:04d}-{outcome}.txt").write_text(detail + "\n")
        print(f"{len(total.failures)} failing inputs written to {out}/")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
