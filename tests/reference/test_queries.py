"""Every bundled query compiles, and `nfacep match` reproduces its checked-in matches.

The expected files (`queries/*.matches.csv`) are also what the gateware tiers are compared
with. They are cross-checked against the planted instances that `tools/generate_queries.py`
wrote: every planted match is reported, no near-miss is. The data's own check, which decides
the matches with the independent oracle (`tests/oracle.py`, through `tests/query_check.py`),
runs here too, and is shown to catch a wrong planted row.
"""

import csv
import dataclasses
import ipaddress
import pathlib
import shutil

import pytest
import query_check
from bundled import param_args, param_values

import nfacep
import nfacep.io.reader
import nfacep.io.tuples
from nfacep.cli import main
from nfacep.lang.evaluate import evaluate
from nfacep.lang.predicates import render

QUERIES = pathlib.Path(__file__).parents[2] / "queries"
NAMES = sorted(p.stem for p in QUERIES.glob("*.sql"))


def _ip(text: str) -> int:
    """A dotted quad as the 32-bit integer the stream carries."""
    return int(ipaddress.IPv4Address(text))


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
    assert (
        main(
            [
                "match",
                str(QUERIES / f"{name}.sql"),
                "--input",
                str(QUERIES / f"{name}.csv"),
                "--output",
                str(out),
                *param_args(name),
            ]
        )
        == 0
    )
    assert out.read_text() == (QUERIES / f"{name}.matches.csv").read_text()


@pytest.mark.parametrize("name", NAMES)
def test_expected_agrees_with_planted(name):
    expected = {
        (r["seq"], r["query"], r["partition"]) for r in rows(QUERIES / f"{name}.matches.csv")
    }
    planted = rows(QUERIES / f"{name}.planted.csv")
    matches = {(r["seq"], r["query"], r["partition"]) for r in planted if r["kind"] == "match"}
    near = {(r["seq"], r["query"], r["partition"]) for r in planted if r["kind"] == "near_miss"}
    assert matches and near
    assert matches == expected  # the generator plants every match there is
    assert not near & expected


# --- the data's check (tests/query_check.py: nfacep's front end and reader, tests/oracle.py) ----


@pytest.mark.parametrize("name", NAMES)
def test_generator_check_passes(name):
    planted = rows(QUERIES / f"{name}.planted.csv")
    summary = query_check.check(name)
    program = nfacep.compile_file(str(QUERIES / f"{name}.sql")).program
    assert [s[0] for s in summary] == [q.name for q in program.queries]
    for qname, matches, near_misses, _, _ in summary:
        mine = [r["kind"] for r in planted if r["query"] == qname]
        assert (matches, near_misses) == (mine.count("match"), mine.count("near_miss"))
        assert matches and near_misses


@pytest.mark.parametrize("name", NAMES)
def test_generator_converts_predicates_faithfully(name):
    """The oracle's reading of every converted DEFINE agrees with nfacep's own evaluation."""
    program = nfacep.compile_file(str(QUERIES / f"{name}.sql")).program
    tuples = nfacep.io.reader.read(str(QUERIES / f"{name}.csv"), program.schema)
    converter = query_check.PredicateConverter(program.schema)
    converted = [
        (converter.pred(e), e)
        for q in program.queries
        for e in q.predicates.values()
        if e is not None
    ]
    table = query_check.oracle_rows(
        tuples, program.schema, converter.derived, query_check.parameter_values(name, program)
    )
    values = param_values(name, nfacep.compile_file(str(QUERIES / f"{name}.sql")))
    columns = {**tuples.columns, **(values.columns(tuples.n) if values else {})}
    for pred, expr in converted:
        theirs = [query_check.oracle.eval_pred(pred, row) for row in table]
        ours = evaluate(expr, columns, tuples.n).tolist()
        assert theirs == ours, (name, render(expr), pred)
        assert any(ours), (name, render(expr))  # each predicate holds somewhere


def _planted_error(name, edit):
    """The check's error for the planted rows of ``name`` changed by ``edit(rows)``."""
    planted = rows(QUERIES / f"{name}.planted.csv")
    edit(planted)
    with pytest.raises(query_check.CheckError) as info:
        query_check.check(name, planted=planted)
    return str(info.value)


def _first(planted, query, kind):
    return next(r for r in planted if r["query"] == query and r["kind"] == kind)


def test_generator_check_reports_a_match_missing_from_planted():
    gone = {}

    def edit(planted):
        gone.update(_first(planted, "thaw", "match"))
        planted.remove(gone)

    message = _planted_error("fire", edit)
    assert message == (
        f"fire.sql: query thaw: a match that is not planted: seq {gone['seq']}, "
        f"partition {gone['partition']}"
    )


def test_generator_check_reports_a_near_miss_planted_as_match():
    row = {}

    def edit(planted):
        row.update(_first(planted, "portscan", "near_miss"))
        _first(planted, "portscan", "near_miss")["kind"] = "match"

    message = _planted_error("bruteforce", edit)
    assert message == (
        "bruteforce.sql: query portscan: a planted match that the oracle does "
        f"not report: seq {row['seq']}, partition {row['partition']}"
    )


def test_generator_check_reports_a_match_planted_as_near_miss():
    row = {}

    def edit(planted):
        row.update(_first(planted, "ato", "match"))
        _first(planted, "ato", "match")["kind"] = "near_miss"

    message = _planted_error("supplychain", edit)
    assert message == (
        f"supplychain.sql: query ato: a near_miss that is a match: seq "
        f"{row['seq']}, partition {row['partition']}"
    )


def test_generator_check_reports_a_wrong_partition():
    def edit(planted):
        _first(planted, "cheat", "match")["partition"] = "1"

    assert "partition 1, but the tuple's runner is" in _planted_error("marathon", edit)


def test_generator_check_reports_a_near_miss_the_data_make_a_match(tmp_path):
    """Turn a tuple of the data into one more failed login: the near-miss of four failures
    then success becomes a real brute force, which the check must report."""
    for suffix in (".sql", ".planted.csv"):
        shutil.copy(QUERIES / f"bruteforce{suffix}", tmp_path)
    data = rows(QUERIES / "bruteforce.csv")
    user = str(_ip("10.20.4.17"))  # a user mistyping four times, then logging in
    miss = next(
        r
        for r in rows(QUERIES / "bruteforce.planted.csv")
        if r["partition"] == user and r["query"] == "bruteforce"
    )
    assert miss["kind"] == "near_miss"
    before = [i for i, r in enumerate(data[: int(miss["seq"])]) if r["src_ip"] == user]
    assert [data[i]["event"] for i in before[-5:]] == ["HTTP_GET"] + ["LOGIN_FAIL"] * 4
    data[before[-5]]["event"] = "LOGIN_FAIL"
    with open(tmp_path / "bruteforce.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(data[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(data)
    with pytest.raises(query_check.CheckError) as info:
        query_check.check("bruteforce", folder=tmp_path)
    assert str(info.value) == (
        "bruteforce.sql: query bruteforce: a near_miss that is a match: "
        f"seq {miss['seq']}, partition {user}"
    )


@pytest.mark.parametrize(
    ("name", "fit", "miss", "window", "back"),
    [
        ("bruteforce", "203.0.113.61", "203.0.113.62", 60_000, 5),  # FAIL x5 OK
        ("fire", "116", "117", 300, 3),  # HOT x3 SMOKE
    ],
)
def test_windowed_queries_plant_both_sides_of_the_window(
    name, fit, miss, window, back, monkeypatch
):
    """bruteforce and fire carry a WITHIN window, and their data plant a match that just fits
    it and a near-miss that just misses it (first to last tuple n - 1 and exactly n apart).
    With the window stripped from what the check hands the oracle, that near-miss, and only
    it, becomes a match: the window decides it, and the check does pass the window on."""
    program = nfacep.compile_file(str(QUERIES / f"{name}.sql")).program
    query = next(q for q in program.queries if q.name == name)
    assert (query.window, query.order_field) == (window, "ts")
    (key,) = program.partition_fields
    fit, miss = (str(_ip(p)) if "." in p else p for p in (fit, miss))
    data = rows(QUERIES / f"{name}.csv")
    planted = {
        r["partition"]: r
        for r in rows(QUERIES / f"{name}.planted.csv")
        if r["query"] == name and r["partition"] in (fit, miss)
    }
    for part, kind, span in ((fit, "match", window - 1), (miss, "near_miss", window)):
        row = planted[part]
        times = [int(d["ts"]) for d in data[: int(row["seq"]) + 1] if d[key] == part]
        assert (row["kind"], times[-1] - times[-1 - back]) == (kind, span)
    query_of = query_check.PredicateConverter.query
    monkeypatch.setattr(
        query_check.PredicateConverter,
        "query",
        lambda self, q: dataclasses.replace(query_of(self, q), window=None),
    )
    with pytest.raises(query_check.CheckError) as info:
        query_check.check(name)
    assert str(info.value) == (
        f"{name}.sql: query {name}: a near_miss that is a match: seq "
        f"{planted[miss]['seq']}, partition {miss}"
    )
