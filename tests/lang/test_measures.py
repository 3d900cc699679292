"""MEASURES: FIRST, LAST, COUNT(*), MATCH_NUMBER() (issue 27 item 5), through the commands.

The values are read on the host from the input (:mod:`nfacep.measures`), the one place every
back-end's result goes through (:class:`nfacep.result.MatchRows`). Here: a worked example by
hand, the stream in pieces of any size, what ``check`` and ``explain`` say, and the memory the
pieces carry. What the measures are, is judged against the oracle in
test_oracle_differential.py.
"""

import json

import numpy as np
import pytest

import nfacep
from nfacep.backend import read_input
from nfacep.cli import main
from nfacep.errors import QueryError
from nfacep.io.tuples import Tuples
from nfacep.reference.matcher import Reference

# fire: a run of F then OK (the latest F begins it); tag: an 'a,b' (its label needs quoting);
# span: a hot tuple, anything, then OK. `e` and `E` are one column (names compare as in SQL).
QUERY = """CREATE STREAM s (k UINT(8), ev ENUM('F', 'OK', 'a,b'), v FLOAT32, hot BOOL);
SELECT * FROM s MATCH_RECOGNIZE (
    PARTITION BY k
    MEASURES FIRST(v) AS v0, LAST(OK.ev) AS e, COUNT(*) AS n, MATCH_NUMBER() AS mn
    ONE ROW PER MATCH
    PATTERN (F+ OK)
    DEFINE F AS ev = 'F', OK AS ev = 'OK'
) AS fire;
QUERY tag FROM s
PARTITION k
MEASURES LAST(ev) AS E, LAST(hot) AS h
PATTERN ( X )
DEFINE X AS (ev = 'a,b');
QUERY span FROM s
PARTITION k
MEASURES COUNT(*) AS n, FIRST(H.seq) AS start_seq, LAST(seq) AS end_seq, MATCH_NUMBER() AS mn
AFTER MATCH SKIP PAST LAST ROW
PATTERN ( H .* OK )
DEFINE H AS (hot = TRUE) OK AS (ev = 'OK');
"""
TUPLES = """k,ev,v,hot
1,F,1.5,true
2,F,2.25,false
1,F,0.1,false
2,"a,b",3,true
1,OK,4,false
2,OK,5,true
1,F,6,true
1,OK,7,false
2,F,8,true
2,F,9,false
2,OK,10,true
"""
# k 1 is 0 2 4 6 7, k 2 is 1 3 5 8 9 10. fire: F F OK at 4 (latest start 2: v 0.1, two
# tuples of k 1), F OK at 7; in k 2, 'a,b' breaks F+ before 5, F F OK at 10 (start 9).
# span: 0..4 (three tuples of k 1), 6..7; 3..5 in k 2, then 8..10 (three tuples).
WANT = """seq,query,partition,v0,e,n,mn,h,start_seq,end_seq
3,tag,2,,"a,b",,,true,,
4,fire,1,0.1,OK,2,1,,,
4,span,1,,,3,1,,0,4
5,span,2,,,2,1,,3,5
7,fire,1,6.0,OK,2,2,,,
7,span,1,,,2,2,,6,7
10,fire,2,9.0,OK,2,1,,,
10,span,2,,,3,2,,8,10
"""


def files(tmp_path, query=QUERY, tuples=TUPLES):
    (tmp_path / "q.sql").write_text(query)
    (tmp_path / "t.csv").write_text(tuples)
    return str(tmp_path / "q.sql"), str(tmp_path / "t.csv")


@pytest.mark.parametrize("chunk", [None, 1, 2, 3, 4])
def test_match_writes_the_measures(tmp_path, chunk, capsys):
    q, t = files(tmp_path)
    out = tmp_path / "m.csv"
    more = [] if chunk is None else ["--chunk", str(chunk)]
    assert main(["match", q, "--input", t, "--output", str(out), *more]) == 0
    assert out.read_text() == WANT


def test_check_and_explain_show_the_measures(tmp_path, capsys):
    q, _ = files(tmp_path)
    assert main(["check", q]) == 0
    text = capsys.readouterr().out
    assert (
        "query fire: 2 NFA states, AFTER MATCH SKIP PAST LAST ROW, reports start_seq; MEASURES "
        "FIRST(v) AS v0, LAST(ev) AS e, COUNT(*) AS n, MATCH_NUMBER() AS mn\n" in text
    )
    # LAST needs no start: the engine does not keep one for tag
    assert "query tag: 1 NFA states, every match end; MEASURES LAST(ev) AS E, LAST(hot) AS h\n" in (
        text
    )
    assert main(["explain", q]) == 0
    assert "MEASURES COUNT(*) AS n, FIRST(seq) AS start_seq" in capsys.readouterr().out
    assert main(["check", "--json", q]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [x["start_seq"] for x in doc["queries"]] == [True, False, True]
    assert doc["queries"][1]["measures"] == [
        {"name": "E", "kind": "last", "field": "ev", "text": "LAST(ev) AS E"},
        {"name": "h", "kind": "last", "field": "hot", "text": "LAST(hot) AS h"},
    ]


def test_without_partition_count_is_the_span(tmp_path):
    """One sub-stream: COUNT(*) is end - start + 1, MATCH_NUMBER() counts every match."""
    query = """CREATE STREAM s (x INT(8));
QUERY up MEASURES COUNT(*) AS n, MATCH_NUMBER() AS m, FIRST(x) AS x0, LAST(x) AS x1
AFTER MATCH SKIP PAST LAST ROW
PATTERN ( N P+ N ) DEFINE N AS (x < 0) P AS (x >= 0);
"""
    # -2 ends the first match, so 3 -128 is not one; -4 0 -5 is
    q, t = files(tmp_path, query, "x\n-1\n5\n6\n-2\n3\n-128\n-3\n-4\n0\n-5\n")
    out = tmp_path / "m.csv"
    assert main(["match", q, "--input", t, "--output", str(out)]) == 0
    assert out.read_text() == ("seq,query,partition,n,m,x0,x1\n3,up,,4,1,-1,-2\n9,up,,3,2,-4,-5\n")


def test_timestamp_and_ipv4_measures_are_written_as_their_fields_are(tmp_path):
    """A TIMESTAMP measure is ISO 8601 text and an IPV4 one a dotted quad, as a tuple file
    writes them, not the counts and integers they are stored as."""
    query = """CREATE STREAM s (ts TIMESTAMP(MILLISECOND), ip IPV4, x UINT(8));
QUERY q MEASURES FIRST(ts) AS t0, LAST(ts) AS t1, LAST(ip) AS a
AFTER MATCH SKIP PAST LAST ROW PATTERN ( A B ) DEFINE A AS (x = 1) B AS (x = 2);
"""
    tuples = "ts,ip,x\n2011-04-01 10:00:00,10.0.0.1,1\n2011-04-01 10:00:01.5,10.1.2.3,2\n"
    q, t = files(tmp_path, query, tuples)
    out = tmp_path / "m.csv"
    assert main(["match", q, "--input", t, "--output", str(out)]) == 0
    assert out.read_text() == (
        "seq,query,partition,t0,t1,a\n"
        "1,q,,2011-04-01T10:00:00.000Z,2011-04-01T10:00:01.500Z,10.1.2.3\n"
    )


def test_a_file_without_measures_keeps_three_columns(tmp_path):
    q, t = files(
        tmp_path,
        QUERY.split("QUERY tag")[0].replace(
            "MEASURES FIRST(v) AS v0, LAST(OK.ev) AS e, COUNT(*) AS n, MATCH_NUMBER() AS mn\n", ""
        ),
    )
    out = tmp_path / "m.csv"
    assert main(["match", q, "--input", t, "--output", str(out)]) == 0
    assert out.read_text() == "seq,query,partition\n4,fire,1\n7,fire,1\n10,fire,2\n"


def test_pieces_carry_only_where_matches_may_begin():
    """In pieces, the measures keep the tuples where a run in progress began (the matcher's
    live starts: at most one per NFA state and partition), never the stream."""
    nfa = nfacep.compile_text(
        "CREATE STREAM s (k UINT(8), x UINT(8));\n"
        "QUERY q PARTITION k MEASURES FIRST(x) AS x0, COUNT(*) AS n "
        "PATTERN ( A B* C ) DEFINE A AS (x = 0) B AS (x = 1) C AS (x = 2);"
    )
    rng = np.random.default_rng(7)
    n, piece = 20_000, 500
    k = rng.integers(0, 5, n).astype(np.uint8)
    x = rng.choice(np.array([0, 1, 1, 1, 2], dtype=np.uint8), n)
    feed = Reference().pieces(nfa, nfacep.params.EngineParams())
    import io

    from nfacep.result import MatchRows

    rows = MatchRows(io.StringIO(), nfa.program)
    most = 0
    for at in range(0, n, piece):
        t = Tuples({"k": k[at : at + piece], "x": x[at : at + piece]}, piece)
        result = feed.feed(t, last=at + piece == n)
        rows.write(result, t)
        assert result.live is None or len(result.live) <= 5 * nfa.queries[0].count
        carry = rows.measurer._carry
        most = max(most, 0 if carry is None else len(carry.pos))
    assert 0 < most <= 5 * nfa.queries[0].count
    whole = MatchRows(io.StringIO(), nfa.program)
    t = Tuples({"k": k, "x": x}, n)
    whole.write(Reference().run(nfa, t, nfacep.params.EngineParams()), t)
    assert whole._f.getvalue() == rows._f.getvalue()


def test_a_start_the_engine_did_not_announce_is_an_error():
    """A result whose match begins at a tuple of an earlier piece that no live start kept:
    the measures cannot be read, and the writer says so rather than guessing."""
    nfa = nfacep.compile_text(
        "CREATE STREAM s (x UINT(8));\nQUERY q MEASURES FIRST(x) AS x0 PATTERN ( A B ) "
        "DEFINE A AS (x = 0) B AS (x = 1);"
    )
    import io

    from nfacep.result import MatchRows, Result

    rows = MatchRows(io.StringIO(), nfa.program)
    t = Tuples({"x": np.array([0], dtype=np.uint8)}, 1)
    empty = np.zeros(0, dtype=np.int64)
    params = nfacep.params.EngineParams()
    rows.write(Result(1, ("q",), empty, empty, [], empty, params, starts=empty), t)
    one = np.array([1], dtype=np.int64)
    with pytest.raises(RuntimeError, match="begins at tuple 0, which the measures no longer"):
        rows.write(Result(1, ("q",), one, one * 0, [None], empty, params, starts=one * 0), t)


def test_seq_is_the_position_unless_a_field_is_so_named():
    with pytest.raises(QueryError, match=r"LAST\(seq\) is the position of the tuple a match ends"):
        nfacep.compile_text(
            "CREATE STREAM s (seq UINT(8));\nQUERY q MEASURES LAST(seq) AS e PATTERN (A)"
        )
    nfa = nfacep.compile_text(
        'CREATE STREAM s (seq UINT(8));\nQUERY q MEASURES LAST("SEQ") AS e PATTERN (A)'
    )
    assert str(nfa.program.queries[0].measures[0]) == "LAST(seq) AS e"


def test_measure_names_differing_only_in_case_are_refused(tmp_path, capsys):
    """The match file names a column by a measure's spelling: start_seq and "start_seq" (two
    names in SQL) wrote the header start_seq twice, and so did n in one query and "n" in
    another; names in one case per file, as the file's other declarations. N and n, one
    name, share one column."""
    text = (
        "CREATE STREAM s (k UINT(8), x UINT(8));\n"
        'QUERY q PARTITION k MEASURES FIRST(seq) AS start_seq, LAST(seq) AS "start_seq",\n'
        "    COUNT(*) AS n PATTERN (A B);\n"
        'QUERY r PARTITION k MEASURES LAST(x) AS "n", LAST(x) AS "Last", COUNT(*) AS last\n'
        "    PATTERN (A B);\n"
        'QUERY t PARTITION k MEASURES LAST(x) AS "N" PATTERN (A B)\n'
    )
    q = tmp_path / "q.sql"
    q.write_text(text)
    assert main(["check", str(q)]) == 2
    err = capsys.readouterr().err
    places = [line.split(": ")[0] for line in err.splitlines() if line.startswith(str(q))]
    assert places == [f"{q}:2:68", f"{q}:4:41", f"{q}:4:77"], err
    assert 'measure "start_seq" differs only in case from start_seq at 2:44' in err
    assert 'measure "n" differs only in case from n at 3:17' in err
    assert 'measure last differs only in case from "Last" at 4:57' in err
    # one name, one column
    q.write_text(
        "CREATE STREAM s (k UINT(8), x UINT(8));\n"
        "QUERY q PARTITION k MEASURES FIRST(seq) AS start_seq, COUNT(*) AS n PATTERN (A B);\n"
        'QUERY t PARTITION k MEASURES LAST(x) AS "N", LAST(x) AS "Last" PATTERN (A B)\n'
    )
    (tmp_path / "t.csv").write_text("k,x\n1,5\n1,6\n")
    out = tmp_path / "m.csv"
    assert main(["match", str(q), "--input", str(tmp_path / "t.csv"), "--output", str(out)]) == 0
    assert out.read_text().splitlines() == [
        "seq,query,partition,start_seq,n,Last",
        "1,q,1,0,2,",
        "1,t,1,,6,6",
    ]


def test_qualified_first_and_last_where_they_mean_the_unqualified(tmp_path):
    """FIRST(X.f) where every match begins with X (through ?, *, | and PERMUTE), LAST(X.f)
    where every one ends with X; refused otherwise, with the variables that break it."""
    stream = "CREATE STREAM s (a UINT(8));\n"
    ok = [
        ("FIRST(A.a)", "A B* (C | D)"),
        ("FIRST(A.a)", "(A | A B) C?"),
        ("LAST(C.a)", "A B* (C | C{2})"),
        ("LAST(C.a)", "A (B | C) C"),
        ("FIRST(A.a)", "B{0} A"),
    ]
    for measure, pattern in ok:
        nfa = nfacep.compile_text(f"{stream}QUERY q MEASURES {measure} AS m PATTERN ({pattern})")
        assert nfa.program.queries[0].measures[0].field == "a", (measure, pattern)
    bad = [
        ("FIRST(A.a)", "B? A", "may begin with B"),
        ("FIRST(A.a)", "PERMUTE(A, B)", "may begin with B"),
        ("LAST(C.a)", "A C D*", "may end with D"),
        ("LAST(C.a)", "(A C)+ .?", "may end with ."),
    ]
    for measure, pattern, message in bad:
        with pytest.raises(QueryError, match=message):
            nfacep.compile_text(f"{stream}QUERY q MEASURES {measure} AS m PATTERN ({pattern})")


def test_sim_reads_the_same_measures(tmp_path):
    """`nfacep sim` (Icarus) writes the file through the same writer: the same measures."""
    pytest.importorskip("cocotb")
    q, t = files(tmp_path)
    out = tmp_path / "m.csv"
    assert main(["sim", q, "--input", t, "--output", str(out)]) == 0
    assert out.read_text() == WANT


def test_input_read_whole_or_in_pieces_is_the_same_file(tmp_path):
    """The package API: read_input and run_files with tuples already read."""
    from nfacep.backend import run_files

    q, t = files(tmp_path)
    nfa = nfacep.compile_file(q)
    data = read_input(t, nfa)
    out = tmp_path / "m.csv"
    run_files(Reference(), nfa, data, str(out), nfacep.params.EngineParams())
    assert out.read_text() == WANT


@pytest.mark.parametrize("link", ["uart", "udp"])
def test_run_reads_the_same_measures(tmp_path, link):
    """`nfacep run` against the software board of each link (the board reports starts and
    ends; the host reads the values) writes the file `match` writes."""
    import contextlib
    import os
    import threading
    import tty

    q, t = files(tmp_path)
    nfa = nfacep.compile_file(q)
    params = nfacep.params.default_engine(nfa)  # a board built with the defaults
    stop = threading.Event()
    with contextlib.ExitStack() as stack:  # on leaving: stop, join, then close
        if link == "uart":
            from nfacep.links.uart.model import UartBoardModel, serve

            master, slave = os.openpty()
            stack.callback(os.close, slave)
            stack.callback(os.close, master)
            tty.setraw(master)
            thread = serve(UartBoardModel(nfa, params), master, stop=stop)
            where = ["--port", os.ttyname(slave)]
        else:
            from nfacep.links.udp.model import UdpBoardModel
            from nfacep.links.udp.model import serve as serve_udp

            thread, (host, port) = serve_udp(UdpBoardModel(nfa, params), stop=stop)
            where = ["--udp", f"{host}:{port}"]
        stack.callback(thread.join, 2)
        stack.callback(stop.set)
        out = tmp_path / "board.csv"
        assert main(["run", q, *where, "--input", t, "--output", str(out)]) == 0
    assert out.read_text() == WANT
