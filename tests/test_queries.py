"""Every bundled query compiles, and `nfacep match` reproduces its checked-in matches.

The expected files (`queries/*.matches.csv`) are also what the gateware tiers are compared
with. They are cross-checked against the planted instances that `tools/generate_queries.py`
wrote: every planted match is reported, no near-miss is. That tool's own check, which decides
the matches with the independent oracle (`tests/oracle.py`), runs here too, and is shown to
catch a wrong planted row.
"""

import csv
import pathlib

import pytest

import nfacep
from nfacep.cli import main

QUERIES = pathlib.Path(__file__).parent.parent / "queries"
NAMES = sorted(p.stem for p in QUERIES.glob("*.sql"))


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_there_are_bundled_queries():
    assert {"marathon", "fire", "bruteforce", "vshape", "supplychain"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_query_compiles_without_warnings(name):
    nfa = nfacep.compile_file(str(QUERIES / f"{name}.sql"))
    assert nfa.queries and not nfa.program.warnings


@pytest.mark.parametrize("name", NAMES)
def test_match_reproduces_expected(name, tmp_path):
    out = tmp_path / "m.csv"
    assert main(["match", str(QUERIES / f"{name}.sql"), "--input", str(QUERIES / f"{name}.csv"),
                 "--output", str(out)]) == 0
    assert out.read_text() == (QUERIES / f"{name}.matches.csv").read_text()


@pytest.mark.parametrize("name", NAMES)
def test_expected_agrees_with_planted(name):
    expected = {(r["seq"], r["query"], r["partition"])
                for r in rows(QUERIES / f"{name}.matches.csv")}
    planted = rows(QUERIES / f"{name}.planted.csv")
    matches = {(r["seq"], r["query"], r["partition"]) for r in planted if r["kind"] == "match"}
    near = {(r["seq"], r["query"], r["partition"]) for r in planted if r["kind"] == "near_miss"}
    assert matches and near
    assert matches == expected  # the generator plants every match there is
    assert not near & expected
