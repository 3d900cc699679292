#!/usr/bin/env python3
"""Regenerate the tuple files of the example queries, with planted matches and near-misses.

    python tools/generate_queries.py           # rewrites queries/*.csv and *.planted.csv, checks
    python tools/generate_queries.py --check   # only checks the files in queries/

Deterministic: every data set draws from its own ``random.Random(seed)`` (the generators use
the standard library only), so the CSV files come out byte for byte the same on every run.

For each query file ``queries/<name>.sql`` the script writes

* ``<name>.csv``: the tuples, with a header of the stream's field names in declaration order,
  sorted by the time field (non-decreasing, so every ``ORDER BY`` holds);
* ``<name>.planted.csv``: ``seq,query,partition,kind``, one row per planted instance: the
  0-based row index of the tuple where it ends, the query, the partition value and
  ``match`` (the engine must report a match of that query at that tuple) or ``near_miss``
  (the engine must NOT report a match of that query at that tuple).

The background traffic is built so that it can neither create nor destroy a match: every
reported match of every query is a planted one. After writing, the script runs the check of
``tests/query_check.py`` on every file, which decides the matches with the independent oracle
``tests/oracle.py`` (it lives beside the oracle, in the tests).

Each data set is one module of ``tools/querydata/`` (``marathon.py``, ``fire.py``, ...), beside
what they share (``common.py``); this script runs them in turn, then the check.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from querydata.bruteforce import gen_bruteforce
from querydata.common import ROOT
from querydata.fire import gen_fire
from querydata.marathon import gen_marathon
from querydata.supplychain import gen_supplychain
from querydata.vshape import gen_vshape

#: the check of the data against the independent oracle
CHECK = ROOT / "tests" / "query_check.py"


GENERATORS = {
    "marathon": gen_marathon,
    "fire": gen_fire,
    "bruteforce": gen_bruteforce,
    "vshape": gen_vshape,
    "supplychain": gen_supplychain,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="only check the data files in queries/, do not rewrite them",
    )
    args = parser.parse_args(argv)
    if not args.check:
        for generate in GENERATORS.values():
            generate()
    # the check is the tests' (it needs the oracle, which lives there)
    return subprocess.run([sys.executable, str(CHECK), *GENERATORS]).returncode


if __name__ == "__main__":
    sys.exit(main())
