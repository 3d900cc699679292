"""One result type for every back-end: records in and out, the files, the report."""

from __future__ import annotations

import io
import json
import pathlib

import numpy as np
import pytest
from bundled import param_values
from hypothesis import given, settings
from hypothesis import strategies as st

import nfacep
from nfacep import wire
from nfacep.backend import run_files
from nfacep.errors import DataError, UsageError
from nfacep.io import reader
from nfacep.params import EngineParams
from nfacep.reference import matcher as reference
from nfacep.result import Result, report, write

QUERIES = pathlib.Path(__file__).resolve().parents[2] / "queries"


def bundled(name: str):
    nfa = nfacep.compile_file(str(QUERIES / f"{name}.sql"))
    return nfa, reader.read(str(QUERIES / f"{name}.csv"), nfa.program.schema)


@pytest.mark.parametrize(
    ("name", "partitions"), [("bruteforce", 3), ("supplychain", 12), ("fire", 12), ("vshape", 3)]
)
def test_records_round_trip_through_the_wire_format(name, partitions):
    """The reference's result as the engine's records, encoded and decoded on the wire, gives
    the same result back: the path every record-emitting back-end takes."""
    nfa, data = bundled(name)
    params = EngineParams(partitions=partitions, tick_tuples=4, timer_bits=3)  # with drops
    want = reference.run(nfa, data, params, values=param_values(name, nfa))
    assert len(want.drops) and len(want.seqs)
    records = want.records(nfa, data)
    assert [r.seq for r in records] == sorted({*want.seqs.tolist(), *want.drop_seqs})
    fmt = wire.record_format(nfa)
    received = [fmt.decode_bytes(fmt.encode_bytes(r)) for r in records]
    got = Result.from_records(nfa, data.n, received, params)
    assert got.matches == want.matches and got.drop_seqs == want.drop_seqs
    assert got.names == want.names and got.n == want.n


def test_matches_sort_by_seq_then_query_name():
    nfa = nfacep.compile_text(
        "CREATE STREAM s (a UINT(4)); QUERY zeta PATTERN (A) DEFINE A AS "
        "a = 1; QUERY alpha PATTERN (A) DEFINE A AS a = 1;"
    )
    got = Result.from_records(
        nfa, 3, [wire.Record(2, 0, 0b11, 0), wire.Record(0, 0, 0b01, 0)], EngineParams()
    )
    assert got.matches == [(0, "zeta", None), (2, "alpha", None), (2, "zeta", None)]
    assert got.names == ("zeta", "alpha") and got.count("zeta") == 2


def test_a_record_that_is_not_this_engines_is_refused():
    nfa, _ = bundled("marathon")  # partition key: UINT(16) runner
    with pytest.raises(ValueError, match="names tuple 10, but only 10 were sent"):
        Result.from_records(nfa, 10, [wire.Record(10, 1, 1, 0)], EngineParams())
    fire = nfacep.compile_text(
        "CREATE STREAM s (k ENUM('a', 'b'), x UINT(4)); "
        "QUERY q PARTITION k PATTERN (A) DEFINE A AS x = 1"
    )
    with pytest.raises(ValueError, match="2 is no label index"):
        Result.from_records(fire, 5, [wire.Record(1, 2, 1, 0)], EngineParams())


def test_counters_that_disagree_with_the_records_are_reported(capsys):
    nfa, data = bundled("vshape")
    res = reference.run(nfa, data)
    res.counters = {"tuples": data.n, "matched": len(set(res.seqs.tolist())), "drops": 0}
    assert res.counter_warnings() == []
    res.counters = {"tuples": data.n - 1, "matched": None, "drops": 3}
    warnings = res.counter_warnings()
    assert len(warnings) == 2
    assert f"counted {data.n - 1} tuples taken, but {data.n} were reported" in warnings[0]
    assert "counted 3 dropped tuples, but 0 were reported" in warnings[1]
    res.counters = {"tuples": (data.n + (1 << 32)) % (1 << 32)}  # 32-bit counters wrap
    assert res.counter_warnings() == []


def test_one_writer_and_one_report(tmp_path):
    nfa, data = bundled("bruteforce")
    res = reference.run(nfa, data, EngineParams(partitions=2))
    out = tmp_path / "m.csv"
    write(res, str(out), query_file="q.sql", input="t.csv")
    lines = out.read_text().splitlines()
    assert lines[0] == "seq,query,partition" and len(lines) == 1 + len(res.seqs)
    summary = json.loads((tmp_path / "m.summary.json").read_text())
    assert summary["backend"] == "reference" and summary["partitions"] == 2
    assert summary["drops"] == len(res.drops) > 10 and summary["query_file"] == "q.sql"
    stdout, stderr = io.StringIO(), io.StringIO()
    report(res, str(out), out=stdout, err=stderr)
    assert stdout.getvalue().startswith(f"{data.n} tuples, {len(res.seqs)} matches (")
    assert (
        f"{len(res.drops)} tuples dropped (partitioner full, --partitions 2)" in stderr.getvalue()
        and " …" in stderr.getvalue()
    )
    table = reference.run(nfa, data, EngineParams(store="table", partitions=4, ways=2))
    assert 0 < len(table.drops) < data.n  # bruteforce's keys are wider than 2 index bits
    stderr = io.StringIO()
    report(table, str(out), out=io.StringIO(), err=stderr)
    assert (
        f"{len(table.drops)} tuples dropped (a bucket full, --store table --partitions 4 "
        "--ways 2) at seq"
    ) in stderr.getvalue()
    assert table.summary(query_file="q.sql", input="t.csv")["store"] == "table"


def test_run_files_checks_before_it_works_and_writes_nothing_on_error(tmp_path):
    nfa, _ = bundled("vshape")

    class Refuse:
        def run(self, nfa, tuples, params, values=None):
            raise AssertionError("the back-end ran")

    with pytest.raises(UsageError, match="does not exist"):
        run_files(
            Refuse(),
            nfa,
            str(QUERIES / "vshape.csv"),
            str(tmp_path / "no" / "m.csv"),
            EngineParams(),
        )
    bad = tmp_path / "t.csv"
    bad.write_text("nothing,useful\n1,2\n")
    with pytest.raises(DataError):
        run_files(Refuse(), nfa, str(bad), str(tmp_path / "m.csv"), EngineParams())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]


def test_a_failed_result_is_written_then_raised(tmp_path):
    """A back-end that completed but reports something wrong (a simulation that differs from
    the reference) still leaves its files, then the failure stops the command."""
    nfa, data = bundled("vshape")

    class Differs:
        def run(self, nfa, tuples, params, values=None):
            result = reference.run(nfa, tuples, params)
            result.failure = nfacep.NfacepError("the records differ")
            return result

    with pytest.raises(nfacep.NfacepError, match="the records differ"):
        run_files(Differs(), nfa, data, str(tmp_path / "m.csv"), EngineParams())
    assert (tmp_path / "m.csv").is_file() and (tmp_path / "m.summary.json").is_file()


def test_matched_counts_tuples_not_matches():
    """The engine's ``matched`` counter counts tuples with a match: two queries matching one
    tuple count once; none, zero."""
    res = Result(
        n=10,
        names=("a", "b"),
        seqs=np.array([3, 3, 7]),
        queries=np.array([0, 1, 0]),
        partitions=[None] * 3,
        drops=np.zeros(0, dtype=np.int64),
        params=EngineParams(),
    )
    res.counters = {"matched": 2}
    assert res.counter_warnings() == []
    res.counters = {"matched": 3}
    assert res.counter_warnings() == [
        "warning: the engine counted 3 tuples with a match, but 2 were reported"
    ]
    none = Result(
        n=4,
        names=("a",),
        seqs=np.zeros(0, dtype=np.int64),
        queries=np.zeros(0, dtype=np.int64),
        partitions=[],
        drops=np.zeros(0, dtype=np.int64),
        params=EngineParams(),
        counters={"matched": 0},
    )
    assert none.counter_warnings() == []


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.integers(0, 2**40),
            st.sampled_from(["q", "cheat"]),
            st.one_of(st.none(), st.text(max_size=6)),
        ),
        max_size=12,
    ),
)
def test_match_rows_are_the_csv_modules(rows):
    """The rows are joined without the csv module when no field needs quoting; with any
    field that does (a comma, a quote, a line end), through it: either way, its text.
    (Measure columns go through the same join: test_measures.py quotes an ENUM label.)"""
    import csv

    from nfacep.result import MatchRows

    names = ("cheat", "q")
    result = Result(
        n=0,
        names=names,
        seqs=np.array([r[0] for r in rows], dtype=np.int64),
        queries=np.array([names.index(r[1]) for r in rows], dtype=np.int64),
        partitions=[r[2] for r in rows],
        drops=np.zeros(0, dtype=np.int64),
        params=EngineParams(),
    )
    got = io.StringIO()
    MatchRows(got).write(result)
    expected = io.StringIO()
    writer = csv.writer(expected, lineterminator="\n")
    writer.writerow(["seq", "query", "partition"])
    writer.writerows([s, q, "" if p is None else p] for s, q, p in rows)
    assert got.getvalue() == expected.getvalue()
