"""Fuzzing the query language: mutated and generated query files through ``nfacep check`` and
``nfacep explain --json``; the only outcomes allowed are "accepted" and nfacep's own error at
``file:line:col`` with exit 2, each input within a time bound and a memory bound (a worker
process, ``tests/query_fuzz.py``).

The suite runs ``NFACEP_FUZZ_INPUTS`` mutants (default 1000, with the Hypothesis test about
half a minute) of the seed ``NFACEP_FUZZ_SEED`` (default 0), and 200 Hypothesis examples.
Nightly, run more with another seed each night:

    NFACEP_FUZZ_INPUTS=50000 NFACEP_FUZZ_SEED=$(date +%Y%m%d) HYPOTHESIS_PROFILE=nightly \\
        .venv/bin/python -m pytest -q tests/lang/test_query_fuzz.py

(the ``nightly`` profile, tests/conftest.py, is randomised and runs 25 times the examples), or
the campaign script: ``.venv/bin/python tests/fuzz_queries.py --inputs 200000 --seed
$(date +%Y%m%d)``.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from query_fuzz import RUNS, SEEDS, TOKENS, Report, Runner, campaign, corpus, mutants

INPUTS = int(os.environ.get("NFACEP_FUZZ_INPUTS", "1000"))
SEED = int(os.environ.get("NFACEP_FUZZ_SEED", "0"))
NIGHTLY = os.environ.get("HYPOTHESIS_PROFILE") == "nightly"
#: Seconds an input may take before it is a hang. Every input of a 100,000-input campaign took
#: well under a second; the margin is for a loaded machine.
HANG = 10.0


@pytest.fixture(scope="module")
def runner():
    with Runner(timeout=HANG, memory_bytes=1 << 30) as r:
        yield r


def _failures(report: Report, how: str) -> str:
    lines = [f"{report.summary()} ({how})"]
    for outcome, data, detail in report.failures[:5]:
        lines.append(f"  {outcome}: {detail}\n    input: {data[:300]!r}")
    return "\n".join(lines)


def test_the_corpus_holds_the_bundled_queries():
    assert len(corpus()) >= 5 + len(SEEDS)


def test_the_worker_reports_every_outcome(runner):
    """The classification the fuzz tests rely on: accepted, a clean error, a crash (here an
    invalid UTF-8 query that has a position is clean, an explain that fails is not)."""
    assert runner.run(SEEDS[0].encode())[0] == "accepted"
    outcome, detail, _ = runner.run(b"QUERY q PATTERN (A)")
    assert outcome == "error" and detail.startswith("1:1: the file declares no stream")
    assert runner.run(b"\xff")[0] == "error"


@pytest.mark.slow
def test_mutants_are_accepted_or_refused_with_a_position(runner):
    report = campaign(mutants(SEED, INPUTS), runner)
    how = f"seed {SEED}: tests/fuzz_queries.py --seed {SEED} reproduces them"
    assert report.counts["crash"] == report.counts["hang"] == 0, _failures(report, how)
    # the mutants reach both outcomes, in proportions that show they are not trivial
    assert report.counts["accepted"] > INPUTS // 20 and report.counts["error"] > INPUTS // 2


_pieces = st.sampled_from(TOKENS) | st.builds(
    lambda run, n: run * n, st.sampled_from(RUNS), st.sampled_from([1, 3, 101, 700])
)


@settings(max_examples=5000 if NIGHTLY else 200)
@given(
    head=st.sampled_from(["", SEEDS[0].split("QUERY")[0], SEEDS[3]]),
    pieces=st.lists(_pieces, max_size=12),
    glue=st.sampled_from([" ", "", "\n"]),
)
def test_generated_files_are_accepted_or_refused_with_a_position(runner, head, pieces, glue):
    """Token soup after a stream declaration (or a whole query): Hypothesis shrinks a failure
    to the fewest pieces."""
    data = (head + glue.join(pieces)).encode("utf-8")
    outcome, detail, _ = runner.run(data)
    assert outcome in ("accepted", "error"), f"{outcome}: {detail}\n  input: {data[:500]!r}"
