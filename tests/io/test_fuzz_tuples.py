"""Fuzzing the tuple readers: seeded mutants of the bundled tuple files (``queries/*.csv``) and
of their Parquet conversions are read (and, when accepted, matched); the only outcomes allowed
are "accepted" and nfacep's own error naming the file and, in a CSV file, the line, each
within a time bound. ``tests/tuple_fuzz.py`` holds the mutator.

The suite runs ``NFACEP_FUZZ_INPUTS`` inputs (default 2000, about 20 s of CPU) of the fixed seed
``NFACEP_FUZZ_SEED`` (default 0); under ``HYPOTHESIS_PROFILE=nightly`` the default is 50,000.
Nightly, run more with another seed each night (the same variables as
``tests/lang/test_query_fuzz.py``), e.g.

    NFACEP_FUZZ_SEED=$(date +%Y%m%d) HYPOTHESIS_PROFILE=nightly \\
        .venv/bin/python -m pytest -q tests/io/test_fuzz_tuples.py

or the campaign script, which also bounds memory and survives crashes and hangs of a worker:
``.venv/bin/python tests/fuzz_tuples.py --inputs 200000 --seed $(date +%Y%m%d)``.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
from tuple_fuzz import check, corpus, mutant

NIGHTLY = os.environ.get("HYPOTHESIS_PROFILE") == "nightly"
INPUTS = int(os.environ.get("NFACEP_FUZZ_INPUTS", "50000" if NIGHTLY else "2000"))
SEED = int(os.environ.get("NFACEP_FUZZ_SEED", "0"))
#: CPU seconds one input may take (this process's, every thread's: a machine's other load does
#: not count): the slowest of a 100,000-input campaign took well under one. Four times as many
#: seconds on the clock end the input as a hang.
BOUND = 5.0


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


def test_the_corpus_is_read():
    assert len(corpus()) >= 5


@pytest.mark.slow
@pytest.mark.parametrize("block", range(10))
def test_mutants_are_accepted_or_refused_with_a_position(tmp_path, block):
    previous = signal.signal(signal.SIGALRM, _alarm)
    outcomes = {"accepted": 0, "error": 0}
    try:
        for i in range(block * INPUTS // 10, (block + 1) * INPUTS // 10):
            base, kind, data = mutant(SEED, i)
            where = (
                f"input {i} of seed {SEED} ({kind} from {base.name}.csv; "
                f"tests/fuzz_tuples.py --seed {SEED} --show {i})"
            )
            start = time.process_time()
            signal.setitimer(signal.ITIMER_REAL, 4 * BOUND)
            try:
                outcome, _ = check(base, kind, data, str(tmp_path))
            except Hang:
                pytest.fail(f"{where}: no answer within {4 * BOUND} s")
            except Exception as err:
                raise AssertionError(f"{where}: {type(err).__name__}: {err}") from err
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            seconds = time.process_time() - start
            assert seconds < BOUND, f"{where}: took {seconds:.1f} s of CPU"
            outcomes[outcome] += 1
    finally:
        signal.signal(signal.SIGALRM, previous)
    # the mutants reach both sides of the reader
    assert outcomes["accepted"] > 0 and outcomes["error"] > 0, outcomes
