"""A query file's errors are reported together, in file order (docs/language.md, "Errors and
warnings"): parsing goes on after a syntax error (at the next definition of DEFINE, else at the
next ';'), the checker checks every query, clause, DEFINE and measure on its own, and
``nfacep check`` prints the first SHOWN_ERRORS errors with place and caret, then how many more;
``check --json`` lists them all."""

from __future__ import annotations

import json
import re
import time

import pytest

from nfacep import QueryError, QueryErrors, compile_text
from nfacep.cli import main
from nfacep.errors import SHOWN_ERRORS
from nfacep.limits import MAX_ERRORS

STREAM = "CREATE STREAM ticker (t UINT(32), symbol UINT(8), price UINT(16), ok BOOL);\n"

#: A query ported from Flink: an unsupported MEASURES item on line 7, IS NULL on line 16.
FLINK = (
    STREAM
    + """SELECT *
FROM ticker
    MATCH_RECOGNIZE (
        PARTITION BY symbol
        ORDER BY t
        MEASURES AVG(B.price) AS avg_price
        AFTER MATCH SKIP PAST LAST ROW
        PATTERN (A B+ C)
        DEFINE
            -- as Flink's documentation writes it
            A AS price > 10,
            B AS
                price < 15 OR
                price = 20,
            C AS price IS NULL
    ) AS m;
"""
)


def _check(tmp_path, capsys, text: str, *extra: str) -> tuple[int, str, str]:
    path = tmp_path / "port.sql"
    path.write_text(text)
    code = main(["check", str(path), *extra])
    out, err = capsys.readouterr()
    return code, out, err.replace(str(path), "port.sql")


def _places(err: str) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for a, b in re.findall(r"^port\.sql:(\d+):(\d+): ", err, re.M)]


def _messages_say(err: str, words: list[str]) -> None:
    """The file's error and warning lines, in order, one for each of ``words``, each saying
    its words."""
    messages = [line for line in err.splitlines() if line.startswith("port.sql:")]
    for said, line in zip(words, messages, strict=True):
        assert said in line, (said, line)


def test_the_flink_port_reports_both_errors_line_7_first(tmp_path, capsys):
    assert FLINK.splitlines()[6].strip().startswith("MEASURES")
    assert "IS NULL" in FLINK.splitlines()[15]
    code, _, err = _check(tmp_path, capsys, FLINK)
    assert code == 2
    lines = [line for line in err.splitlines() if line.startswith("port.sql:")]
    assert [int(line.split(":")[1]) for line in lines] == [7, 16], err
    assert "MEASURES" in lines[0] or "AVG" in lines[0]
    assert "IS (NULL" in lines[1]
    # each with its line and caret
    assert err.count("^") == 2


#: Oracle's V-shape example as its documentation writes it: a bare field as a measure (line 6),
#: SKIP TO LAST (line 9), then an ORDER BY after MATCH_RECOGNIZE (line 15).
ORACLE = (
    STREAM
    + """SELECT *
FROM ticker MATCH_RECOGNIZE (
     PARTITION BY symbol
     ORDER BY t
     MEASURES  STRT.t AS start_t,
               LAST(UP.t) AS end_t
     ONE ROW PER MATCH
     AFTER MATCH SKIP TO LAST UP
     PATTERN (STRT DOWN+ UP+)
     DEFINE
        DOWN AS DOWN.price < PREV(DOWN.price),
        UP AS UP.price > PREV(UP.price)
     ) MR
ORDER BY MR.symbol, MR.start_t;
SELECT * FROM ticker MATCH_RECOGNIZE (
  PARTITION BY symbol PATTERN (A) DEFINE A AS price / 2 > 1
) AS m2 WHERE price > 1;
QUERY q3 PARTITION symbol PATTERN (A) DEFINE A AS nosuch > 1
"""
)


def test_errors_before_and_after_a_clause_around_match_recognize(tmp_path, capsys):
    """An ORDER BY or WHERE after MATCH_RECOGNIZE ( … ) ends its statement: the query before
    it is checked, and the statements after it are read, each error once, in file order (the
    clause was once read as a definition of DEFINE, and every word after it was an error)."""
    code, _, err = _check(tmp_path, capsys, ORACLE)
    assert code == 2
    assert _places(err) == [(6, 16), (9, 23), (15, 1), (17, 53), (18, 9), (19, 51)], err
    _messages_say(
        err, ["STRT.t", "SKIP TO LAST UP", "ORDER BY after", "'/'", "WHERE", "unknown field"]
    )
    assert "unexpected" not in err


def test_each_measure_is_checked_on_its_own(tmp_path, capsys):
    """Flink's Aggregations example: two measures refused (LAST(A.x) where a match ends with
    B, AVG) and an aggregate in DEFINE are three errors, not the first measure's alone."""
    text = STREAM + (
        "SELECT * FROM ticker MATCH_RECOGNIZE (\n"
        "  PARTITION BY symbol ORDER BY t\n"
        "  MEASURES FIRST(A.t) AS start_t, LAST(A.t) AS end_t,\n"  # line 4
        "           AVG(A.price) AS avgPrice, COUNT(*) AS seq, COUNT(*) AS END_T\n"
        "  AFTER MATCH SKIP PAST LAST ROW PATTERN (A+ B)\n"
        "  DEFINE A AS AVG(A.price) < 15\n"  # line 7
        ") AS m\n"
    )
    code, _, err = _check(tmp_path, capsys, text)
    assert code == 2
    assert _places(err) == [(4, 40), (5, 12), (5, 50), (5, 67), (7, 15)], err
    _messages_say(
        err, ["LAST(A.t)", "AVG(…)", "'seq' is a column", "'END_T' is given twice", "AVG()"]
    )


def test_oracle_s_measures_with_running_and_final_leave_the_query_checked(tmp_path, capsys):
    """RUNNING and FINAL before a measure (Oracle's examples with ALL ROWS PER MATCH) are
    each an error of the checker, so the query's other errors come with them (the parser
    stopped at the first, and the statement was not checked); a field may be named running
    or final."""
    text = (
        "CREATE STREAM ticker (t UINT(32), price UINT(16), running UINT(8), final UINT(8));\n"
        "SELECT * FROM ticker MATCH_RECOGNIZE (\n"
        "  MEASURES RUNNING LAST(price) AS rl, FINAL COUNT(*) AS n,\n"  # line 3
        "           LAST(running) AS r, FINAL FIRST(final) AS f, CLASSIFIER() AS c\n"
        "  ALL ROWS PER MATCH\n"  # line 5
        "  PATTERN (A B+)\n"
        "  DEFINE B AS price < PREV(price) AND running > final AND nosuch = 1\n"  # line 7
        ") AS m\n"
    )
    code, _, err = _check(tmp_path, capsys, text)
    assert code == 2
    assert _places(err) == [(3, 12), (3, 39), (4, 32), (4, 57), (5, 3), (7, 59)], err
    _messages_say(
        err, ["RUNNING", "FINAL", "FINAL", "CLASSIFIER", "ALL ROWS", "unknown field 'nosuch'"]
    )


def test_a_refused_clause_leaves_the_rest_of_its_query_checked(tmp_path, capsys):
    """ORDER BY … DESC, a quantifier's counts, an interval's unit and WITHIN's count are
    refused while the query is read into its AST; the query is still checked (it was
    dropped at the first of them, its other errors one round later)."""
    text = (
        "CREATE STREAM s (t UINT(32) TIME(SECOND), k UINT(8), v UINT(8));\n"
        "SELECT * FROM s MATCH_RECOGNIZE (\n"
        "  PARTITION BY k ORDER BY t DESC\n"  # line 3
        "  MEASURES AVG(v) AS a\n"
        "  PATTERN (A{3,2} B C{5000}) WITHIN INTERVAL '1' WEEK\n"  # line 5
        "  DEFINE A AS v = 1000, B AS nosuch = 1\n"
        ") AS q;\n"
        "QUERY r PARTITION k ORDER BY t PATTERN (A) WITHIN 1000000000000000000000000000000000000000"
        "0 DEFINE A AS v > 300\n"  # line 8
    )
    code, _, err = _check(tmp_path, capsys, text)
    assert code == 2
    want = [(3, 29), (4, 12), (5, 13), (5, 22), (5, 50), (6, 19), (6, 30), (8, 51), (8, 109)]
    assert _places(err) == want, err
    _messages_say(
        err, ["DESC", "AVG", "{3,2}", "{5000}", "WEEK", "1000", "nosuch", "too large", "300"]
    )


def test_a_measure_that_does_not_parse_leaves_the_others_checked(tmp_path, capsys):
    """Parsing goes on after a measure that does not parse, from the next one (or the clause
    after MEASURES), so the query's other errors come with it (it was dropped whole)."""
    text = STREAM + (
        "SELECT * FROM ticker MATCH_RECOGNIZE (\n"
        "  MEASURES CAST(LAST(price) AS INT) AS p, LAST(nosuch) AS q,\n"  # line 3
        "           LAST(price) last_price, SUM(price) AS total,\n"  # line 4
        "           FIRST(price)\n"  # line 5
        "  PATTERN (A B)\n"
        "  DEFINE A AS price > 100000\n"  # line 7
        ") AS m;\n"
        "QUERY q2 PATTERN (A) DEFINE A AS ok = 1\n"  # line 9
    )
    code, _, err = _check(tmp_path, capsys, text)
    assert code == 2
    want = [(3, 12), (3, 48), (4, 24), (4, 36), (6, 3), (7, 23), (9, 37)]
    assert _places(err) == want, err
    _messages_say(
        err, ["CAST", "nosuch", "AS last_price", "SUM", "AS name", "does not fit", "cannot compare"]
    )


def test_each_measure_that_does_not_parse_is_reported_at_its_place(tmp_path, capsys):
    """Each broken measure at its own place (the clause's generic error was at MEASURES, so
    several of them came out as one)."""
    text = (
        STREAM + "QUERY q MEASURES COUNT(*) AS n m, LAST(t) AS e, COUNT(*) AS c AS d PATTERN (A)\n"
    )
    code, _, err = _check(tmp_path, capsys, text)
    assert code == 2
    assert _places(err) == [(2, 18), (2, 49)], err
    assert err.count("MEASURES other than FIRST, LAST, COUNT(*) and MATCH_NUMBER()") == 2


def test_errors_of_several_statements_in_file_order(tmp_path, capsys):
    text = (
        STREAM
        + "QUERY fine PATTERN (A) DEFINE A AS ok;\n"  # line 2
        + "QUERY q2 PATTERN (A B) DEFINE A AS price LIKE 'x', B AS nosuch > 1;\n"  # line 3
        + "QUERY q3 ORDER BY t PARTITION symbol PATTERN (A);\n"  # line 4
        + "QUERY q4 PATTERN (A ^) DEFINE A AS price > 100000, B AS ok;\n"  # line 5
        + "QUERY q5 PATTERN (A) DEFINE A AS price % 2 = 1\n"  # line 6
    )
    code, _, err = _check(tmp_path, capsys, text)
    assert code == 2
    assert _places(err) == [(3, 42), (3, 57), (4, 21), (5, 21), (5, 44), (6, 40)], err
    _messages_say(
        err,
        ["string matching", "unknown field 'nosuch'", "PARTITION", "anchor", "does not fit", "'%'"],
    )


def test_one_condition_s_syntax_error_leaves_the_next_conditions_checked(tmp_path, capsys):
    text = STREAM + (
        "SELECT * FROM ticker MATCH_RECOGNIZE (\n"
        "  PATTERN (A B C D)\n"
        "  DEFINE A AS price IS NULL,\n"  # line 4: syntax
        "         B AS (price > 1 AND nosuch < 2),\n"  # line 5: checker
        "         C AS CASE WHEN ok THEN ok END,\n"  # line 6: syntax
        "         D AS price > 70000\n"  # line 7: checker
        ") AS m"
    )
    code, _, err = _check(tmp_path, capsys, text)
    assert code == 2
    assert [line for line, _ in _places(err)] == [4, 5, 6, 7], err


def test_more_than_shown_are_counted_and_json_lists_them_all(tmp_path, capsys):
    n = SHOWN_ERRORS + 5
    text = STREAM + "".join(
        f"QUERY q{i:02} PATTERN (A) DEFINE A AS f{i:02} > 1;\n" for i in range(n)
    )
    code, out, err = _check(tmp_path, capsys, text, "--json")
    assert code == 2
    assert _places(err) == [(2 + i, 35) for i in range(SHOWN_ERRORS)]
    assert err.splitlines()[-1] == (
        f"port.sql: and 5 more errors (the first {SHOWN_ERRORS} are shown; check --json lists "
        "them all)"
    )
    doc = json.loads(out)
    assert [(e["line"], e["column"]) for e in doc["errors"]] == [(2 + i, 35) for i in range(n)]
    assert all(e["severity"] == "error" for e in doc["errors"])
    assert doc["error"] == doc["errors"][0]
    assert f"unknown field 'f{n - 1:02}'" in doc["errors"][-1]["message"]


def test_reading_stops_after_max_errors(tmp_path, capsys):
    text = STREAM + "".join(
        f"QUERY q{i} PATTERN (A) DEFINE A AS price IS NULL;\n" for i in range(MAX_ERRORS + 30)
    )
    code, out, _ = _check(tmp_path, capsys, text, "--json")
    assert code == 2
    errors = json.loads(out)["errors"]
    assert len(errors) == MAX_ERRORS + 1
    assert [e["line"] for e in errors[:-1]] == list(range(2, MAX_ERRORS + 2))
    assert (
        errors[-1]["message"] == f"nfacep stopped reading the file here, after {MAX_ERRORS} errors"
    )


def test_checking_stops_after_max_errors(tmp_path, capsys):
    text = STREAM + "QUERY q PATTERN (A) DEFINE A AS nosuch > 1;\n" * (MAX_ERRORS + 30)
    code, out, _ = _check(tmp_path, capsys, text, "--json")
    assert code == 2
    errors = json.loads(out)["errors"]
    assert len(errors) == MAX_ERRORS + 1
    assert errors[-1]["line"] is None and "stopped checking" in errors[-1]["message"]


def test_a_broken_stream_is_not_echoed_by_its_queries(tmp_path, capsys):
    text = (
        "CREATE STREAM s (t INT, price UINT(8));\n"  # INT without its width
        "QUERY q PATTERN (A) DEFINE A AS price > 1 AND t IS NULL;\n"
    )
    code, _, err = _check(tmp_path, capsys, text)
    assert code == 2
    assert _places(err) == [(1, 20), (2, 49)], err  # no "unknown stream", no "unknown field"


def test_warnings_stay_warnings(tmp_path, capsys):
    text = STREAM + "QUERY q PATTERN (A) DEFINE A AS ok, B AS price > 1;\n"
    code, _, err = _check(tmp_path, capsys, text)
    assert code == 0
    assert "port.sql:2:37: warning: DEFINE B is never used" in err


def test_warnings_come_in_file_order(tmp_path, capsys):
    """Warnings are printed in file order, as errors are (the pattern's undefined variables
    came after the unused DEFINEs that follow them); each DEFINE named as it is written."""
    text = STREAM + (
        'QUERY q PATTERN (Up "down" Flat) DEFINE "Up" AS ok, down AS ok, flatt AS ok;\n'
        "QUERY r PATTERN (A) DEFINE A AS ok, B AS ok;\n"
    )
    code, _, err = _check(tmp_path, capsys, text, "--json")
    assert code == 0
    assert _places(err) == [(2, 18), (2, 21), (2, 28), (2, 41), (2, 53), (2, 65), (3, 37)], err
    assert 'port.sql:2:41: warning: DEFINE "Up" is never used' in err


def test_the_single_error_api_is_the_first_error():
    with pytest.raises(QueryError) as caught:
        compile_text(STREAM + "QUERY q PATTERN (A) DEFINE A AS nosuch = 1", "one.sql")
    assert type(caught.value) is QueryError
    assert caught.value.errors == (caught.value,)
    with pytest.raises(QueryErrors) as several:
        compile_text(FLINK, "flink.sql")
    err = several.value
    assert isinstance(err, QueryError)
    assert (err.line, err.filename) == (7, "flink.sql")
    assert [e.line for e in err.errors] == [7, 16]
    assert err.message == err.errors[0].message
    assert str(err).count("flink.sql:") == 2


@pytest.mark.parametrize(
    "body",
    [
        # many definitions, then errors in each of the last ones (recovered one by one)
        "".join(f"A{i} AS price > 1, " for i in range(1500))
        + "".join(f"B{i} AS price IS NULL, " for i in range(MAX_ERRORS + 10))
        + "C AS ok",
        # error after error in one condition, nothing to resume at in between
        "A AS ok AND " + "(((" * 30 + "price ~ 1 " * 2000,
        # the checker's errors in many definitions
        "".join(f"A{i} AS nosuch{i} > 1, " for i in range(1500)) + "C AS ok",
    ],
    ids=["syntax errors after 1500 definitions", "one broken condition", "checker errors"],
)
def test_many_errors_are_reported_in_bounded_time(tmp_path, capsys, body):
    """Reporting the errors of a hostile file takes about as long as checking a good one
    of its size: no message looks back over the whole statement, no search starts over."""
    text = STREAM + "QUERY q PATTERN (A0) DEFINE " + body
    start = time.process_time()
    code, out, _ = _check(tmp_path, capsys, text, "--json")
    assert time.process_time() - start < 2.0  # CPU seconds, as tests/lang/test_hardening_query.py
    assert code == 2
    errors = json.loads(out)["errors"]
    assert 1 <= len(errors) <= MAX_ERRORS + 1
    assert all(e["line"] == 2 for e in errors[:-1])
