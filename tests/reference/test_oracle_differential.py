"""The reference matcher (``nfacep match``) against the independent oracle in ``oracle.py``.

Three layers:

* the oracle itself, on hand-computed cases and against its own second engine, so that it can
  be trusted;
* Hypothesis differential tests: random patterns over every operator, random streams with
  overlapping predicates, both query forms, both AFTER MATCH modes, several queries per file;
* an exhaustive small-scope test: every pattern of up to 3 atoms over 2 variables built with
  concatenation, ``|``, ``*`` and ``?`` against every stream of up to 4 tuples.

Everything goes through the command line as a user would run it; ``test_capacity.py`` reuses
the helpers here for the partitioner's capacity and timers.
"""

from __future__ import annotations

import csv
import itertools
import json
import os
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import (
    ANY,
    EMPTY,
    Query,
    alt,
    char_class,
    eval_pred,
    every_end,
    group,
    match_positions,
    measure_columns,
    only_empty,
    parse_quantifier,
    pattern_atoms,
    pattern_vars,
    permute,
    render_pattern,
    render_pred,
    render_query,
    rep,
    run,
    seq,
    skip_past_last_row,
    starts_re,
    starts_sets,
    to_regex,
    var,
    with_parameters,
    within,
)
from strategies import (
    PREV_ADDRESSES,
    PREV_STREAM,
    PREV_TIMES,
    STREAM,
    prev_predicates,
    quantifiers,
    queries,
    scenarios,
    streams,
)

FIELDS = ("k", "p0", "p1", "p2")
P0 = ("cmp", "p0", "=", True)
P1 = ("cmp", "p1", "=", True)
P2 = ("cmp", "p2", "=", True)
ABC = (("A", P0), ("B", P1), ("C", P2))

# --------------------------------------------------------------------------------------------
# Running `nfacep match`


@dataclass
class Outcome:
    rc: int
    matches: list[tuple]  #: (seq, query, partition, *measure cells), as the oracle's
    summary: dict
    columns: list[str] | None = None  #: the measure columns, as the header names them


def write_tuples(
    path: Path,
    rows: Sequence[Mapping[str, object]],
    bools: str = "word",
    fields: Sequence[str] = FIELDS,
) -> None:
    true, false = ("true", "false") if bools == "word" else ("1", "0")
    lines = [",".join(fields)]
    for row in rows:
        cells = []
        for f in fields:
            v = row[f]
            cells.append((true if v else false) if isinstance(v, bool) else str(v))
        lines.append(",".join(cells))
    path.write_text("\n".join(lines) + "\n")


_runs = itertools.count()


def nfacep_match(
    tmp: Path,
    query_text: str,
    rows: Sequence[Mapping[str, object]],
    options: Sequence[str] = (),
    bools: str = "word",
    fields: Sequence[str] = FIELDS,
) -> Outcome:
    """Write the query and tuple files into a fresh directory under ``tmp`` and run the CLI."""
    from nfacep.cli import main  # here, so the oracle's own tests run without the compiler

    d = tmp / f"run{next(_runs)}"
    d.mkdir()
    (d / "q.sql").write_text(query_text)
    write_tuples(d / "t.csv", rows, bools, fields)
    argv = ["match", str(d / "q.sql"), "--input", str(d / "t.csv"), "--output", str(d / "m.csv")]
    try:
        rc = main([*argv, *options])
    except SystemExit as e:  # tolerate argparse-style exits; the contract is a return value
        rc = e.code if isinstance(e.code, int) else 1
    if rc != 0:
        return Outcome(rc, [], {})
    with open(d / "m.csv", newline="") as f:
        table = list(csv.reader(f))
    head = table[0]
    keys = [i for i, name in enumerate(head) if name.startswith("partition_")]
    if keys:  # several partition fields: a column each, as the oracle's tuple of texts
        assert head[:2] == ["seq", "query"] and keys == list(range(2, 2 + len(keys))), head
        table = [[*r[:2], tuple(r[i] for i in keys), *r[2 + len(keys) :]] for r in table]
        head = ["seq", "query", "partition", *head[2 + len(keys) :]]
    assert head[:3] == ["seq", "query", "partition"], head
    columns = head[3:]

    def cell(column: str, text: str) -> object:
        if not text:
            return None
        return int(text) if column == "start_seq" else text

    matches = [
        (int(r[0]), r[1], r[2], *(cell(c, t) for c, t in zip(columns, r[3:], strict=True)))
        for r in table[1:]
    ]
    summary = json.loads((d / "m.summary.json").read_text())
    return Outcome(rc, matches, summary, columns)


def check_against_oracle(
    tmp: Path,
    queries: Sequence[Query],
    query_text: str,
    rows: Sequence[Mapping[str, object]],
    partitioned: bool,
    options: Sequence[str] = (),
    hardware: tuple[int, int, int] = (256, 0, 4),
    bools: str = "word",
    engine: str = "sets",
    table: tuple | None = None,
    fields: Sequence[str] = FIELDS,
    key: str | tuple[str, ...] = "k",
) -> None:
    """``nfacep match`` must report exactly what the oracle reports: matches, drops, counts.
    ``table = (key_bits, ways)`` models ``--store table`` (give its options too); ``key``:
    the partition field, or several (:func:`oracle.run`)."""
    partitions, tick_tuples, timer_bits = hardware
    want = run(
        queries,
        rows,
        key if partitioned else None,
        partitions=partitions,
        tick_tuples=tick_tuples,
        timer_bits=timer_bits,
        engine=engine,
        table=table,
    )
    got = nfacep_match(tmp, query_text, rows, options, bools, fields)
    context = (
        f"\n--- query file\n{query_text}--- options {list(options)}\n--- tuples (k, p0, p1, p2)\n"
        + "\n".join(
            f"{n:3}: {r['k']} {int(r['p0'])}{int(r['p1'])}{int(r['p2'])} {r.get('ts', '')}"
            f"{r.get('j', '')}"
            for n, r in enumerate(rows)
        )
    )
    assert got.rc == 0, f"nfacep match exited {got.rc}{context}"
    assert got.columns == measure_columns(queries), context
    missing = sorted(set(want.matches) - set(got.matches))
    extra = sorted(set(got.matches) - set(want.matches))
    assert got.matches == want.matches, (
        f"matches differ: missing (oracle only) {missing}, extra (nfacep only) {extra}{context}"
    )
    assert got.summary["drop_seqs"] == want.drop_seqs, context
    assert got.summary["drops"] == len(want.drop_seqs), context
    assert got.summary["tuples"] == len(rows), context
    assert got.summary["matches"] == want.counts(q.name for q in queries), context


# --------------------------------------------------------------------------------------------
# The oracle itself, on cases worked out by hand


def rows_of(*cells: str, key: int = 0) -> list[dict[str, object]]:
    """``rows_of("a", "bc", "")``: letters a, b, c set p0, p1, p2."""
    return [{"k": key, "p0": "a" in c, "p1": "b" in c, "p2": "c" in c} for c in cells]


def positions(pattern: tuple, cells: str, skip: bool = False, defines=ABC) -> list[int]:
    """Oracle match positions of one query on one stream, checked to agree across engines."""
    q = Query("q", pattern, defines, skip)
    rows = rows_of(*cells.split(" ")) if cells else []
    found = {e: run([q], rows, engine=e) for e in ("re", "sets")}
    assert found["re"] == found["sets"]
    return [m[0] for m in found["re"].matches]


A, B, C, X = var("A"), var("B"), var("C"), var("X")


@pytest.mark.parametrize(
    ("pattern", "cells", "skip", "expected"),
    [
        # A B* C, the paper's shape
        (seq(A, rep(B, "*"), C), "a b b c c a c", False, [3, 6]),
        (seq(A, rep(B, "*"), C), "a b b c c a c", True, [3, 6]),
        (seq(A, rep(B, "*"), C), "ab c", False, [1]),  # one tuple, two variables
        (seq(A, rep(B, "*"), C), "ac", False, []),  # a single tuple cannot be both A and C
        (seq(A, rep(B, "*"), C), "a ac", False, [1]),
        (seq(A, rep(B, "*"), C), "", False, []),
        # overlapping runs: every end reports them all, SKIP PAST LAST ROW restarts after one
        (seq(A, A), "a a a a", False, [1, 2, 3]),
        (seq(A, A), "a a a a", True, [1, 3]),
        (seq(A, rep(B, "+")), "a b b b", False, [1, 2, 3]),
        (seq(A, rep(B, "+")), "a b b b", True, [1]),
        (seq(A, rep(B, "+")), "ab ab ab", True, [1]),
        (seq(A, rep(B, "+")), "ab ab ab ab", True, [1, 3]),
        (rep(A, "{2,3}"), "a a a a", False, [1, 2, 3]),
        (rep(A, "{2,3}"), "a a a a", True, [1, 3]),
        (rep(A, "{2,3}?"), "a a a a", True, [1, 3]),
        # counted repetition
        (seq(rep(A, "{2}"), B), "a a a b", False, [3]),
        (seq(rep(A, "{2}"), B), "a b", False, []),
        (seq(rep(A, "{2,}"), B), "a b a a b", False, [4]),
        (seq(rep(A, "{,2}"), B), "a a a b", False, [3]),
        (seq(rep(A, "{,2}"), B), "b", False, [0]),
        (seq(rep(A, "{0}"), B), "a b", False, [1]),
        (rep(A, "{0}"), "a a", False, []),  # only the empty match
        (seq(A, EMPTY, B), "a b", False, [1]),
        (seq(A, rep(EMPTY, "+"), B), "a b", False, [1]),
        (EMPTY, "a b", False, []),
        # empty matches never count
        (rep(A, "*"), "a - a", False, [0, 2]),
        (seq(rep(A, "?"), rep(B, "?")), "- c -", False, []),
        (seq(rep(A, "?"), rep(B, "?")), "b", False, [0]),
        # reluctant quantifiers give the same reports
        (seq(rep(A, "+?"), B), "a a b", False, [2]),
        (seq(rep(A, "??"), B), "a b b", False, [1, 2]),
        (seq(rep(A, "*?"), B), "a b b", True, [1, 2]),
        # wildcard and undefined variables hold for every tuple
        (seq(A, ANY, A), "a - a", False, [2]),
        (seq(A, X, A), "a - a", False, [2]),
        (seq(A, X, A), "a a a a a", False, [2, 3, 4]),
        (seq(A, X, A), "a a a a a", True, [2]),
        (X, "- -", False, [0, 1]),
        # precedence is the tree's, and alternatives are independent
        (alt(seq(A, B), C), "c", False, [0]),
        (alt(seq(A, B), C), "a b", False, [1]),
        (alt(seq(A, B), C), "a c", False, [1]),
        (seq(alt(A, B), C), "b c", False, [1]),
        (seq(group(alt(A, B)), C), "c", False, []),
        # PERMUTE: every order
        (permute(A, B, C), "c a b", False, [2]),
        (permute(A, B, C), "a b", False, []),
        (permute(A, B, C), "b c a b", False, [2, 3]),
        (permute(A, B, C), "b c a b", True, [2]),
        (permute(A, seq(B, B)), "b b a b b", False, [2, 4]),
        (permute(A, rep(B, "?")), "b a", False, [1]),
        (permute(A, rep(B, "?")), "a b", False, [0, 1]),
    ],
)
def test_oracle_hand_cases(pattern, cells, skip, expected):
    assert positions(pattern, cells, skip) == expected


def test_oracle_partitions_are_separate_sub_streams():
    q = Query("q", seq(A, A), ABC)
    rows = rows_of("a", "a", "a", "a")
    for r, k in zip(rows, [0, 1, 0, 1], strict=True):
        r["k"] = k
    assert run([q], rows).matches == [(1, "q", ""), (2, "q", ""), (3, "q", "")]
    assert run([q], rows, "k").matches == [(2, "q", "0"), (3, "q", "1")]


def test_oracle_several_queries_report_the_same_tuple():
    qs = [Query("x", A, ABC), Query("w", seq(A, B), ABC), Query("v", B, ABC, skip=True)]
    assert run(qs, rows_of("a", "ab")).matches == [
        (0, "x", ""),
        (1, "v", ""),
        (1, "w", ""),
        (1, "x", ""),
    ]


def test_oracle_predicates():
    defines = (
        ("A", ("and", P0, ("not", P1))),
        ("B", ("or", ("cmpf", "p0", "<>", "p1"), ("cmp", "k", ">=", 3))),
        ("C", ("in", "k", (1, 2))),
        ("D", ("between", "k", 1, 2)),
    )
    rows = rows_of("a", "ab", "b", "")
    for r, k in zip(rows, [0, 1, 2, 3], strict=True):
        r["k"] = k
    assert match_positions(Query("q", A, defines), "") == []
    got = {v: [m[0] for m in run([Query(v, var(v), defines)], rows).matches] for v in "ABCD"}
    assert got == {"A": [0], "B": [0, 2, 3], "C": [1, 2], "D": [1, 2]}


def test_oracle_only_empty():
    assert only_empty(EMPTY)
    assert only_empty(rep(A, "{0}"))
    assert only_empty(alt(rep(A, "{,0}"), rep(EMPTY, "*")))
    assert only_empty(permute(EMPTY, rep(seq(A, B), "{0,0}?")))
    assert not only_empty(alt(rep(A, "{0}"), B))
    assert not only_empty(rep(A, "?"))


def test_oracle_quantifier_text():
    assert parse_quantifier("*") == (0, None, False)
    assert parse_quantifier("+?") == (1, None, True)
    assert parse_quantifier("??") == (0, 1, True)
    assert parse_quantifier("{3}") == (3, 3, False)
    assert parse_quantifier("{3,}?") == (3, None, True)
    assert parse_quantifier("{,3}") == (0, 3, False)
    assert parse_quantifier("{1,3}") == (1, 3, False)
    for bad in ("{}", "{,}", "{3,1}", "{a}", "**", "{1}??"):
        with pytest.raises(ValueError):
            parse_quantifier(bad)


def test_oracle_rendering():
    p = seq(alt(A, B), rep(seq(A, B), "{2,}?"), rep(rep(A, "*"), "?"), group(C), ANY)
    assert render_pattern(p) == "(A | B) (A B){2,}? (A*)? (C) ."
    assert render_pattern(alt(seq(A, B), permute(A, alt(B, C)))) == "A B | PERMUTE(A, B | C)"
    q = Query("cheat", seq(A, rep(B, "*"), C), ABC)
    assert render_query(q, "s", "k", form="concise") == (
        "QUERY cheat FROM s\nPARTITION k\nPATTERN ( A B* C )\n"
        "DEFINE\n  A AS (p0 = TRUE)\n  B AS (p1 = TRUE)\n  C AS (p2 = TRUE);\n"
    )
    assert render_query(Query("q", A, ABC[:1], skip=True), "s", None, qualify=True) == (
        "SELECT * FROM s\nMATCH_RECOGNIZE (\n    AFTER MATCH SKIP PAST LAST ROW\n"
        "    PATTERN (A)\n    DEFINE\n        A AS A.p0 = TRUE\n) AS q;\n"
    )


def test_oracle_names_are_compared_as_sql_compares_them():
    """R, r and "R" are one variable, "r" another (undefined: every tuple); fields, the
    partition field and query names alike; a query is reported without its quotes."""
    defines = (("r", ("cmp", "P0", "=", True)), ("hot", ("cmp", '"P1"', "=", True)))
    rows = rows_of("a", "a", "b", "b")
    q = Query("Q", seq(rep(var("R"), "{2}"), var("Hot")), defines)
    assert run([q], rows, "K").matches == [(2, "Q", "0")]
    q = Query('"q"', seq(var('"r"'), var('"HOT"')), defines)
    assert run([q], rows).matches == [(2, "q", ""), (3, "q", "")]
    assert run([q], rows).counts(['"q"']) == {"q": 2}


def test_oracle_renders_after_match_as_asked():
    """``after``: "explicit" writes the clause always, "default" only when the query does not
    want its form's default (SQL: SKIP PAST LAST ROW; the paper's: every end)."""
    for form in ("sql", "concise"):
        for skip in (False, True):
            q = Query("q", A, ABC[:1], skip=skip)
            clause = "AFTER MATCH SKIP PAST LAST ROW" if skip else "AFTER MATCH REPORT EVERY END"
            assert clause in render_query(q, "s", None, form, after="explicit")
            default = render_query(q, "s", None, form, after="default")
            assert ("AFTER MATCH" in default) == (skip != (form == "sql"))
            assert (clause in render_query(q, "s", None, form)) == (skip or form == "sql")


def test_oracle_skip_and_every_end_from_starts():
    starts = [set(), {0}, {0, 1}, {2}, {1}]
    assert every_end(starts) == [1, 2, 3, 4]
    assert skip_past_last_row(starts) == [1, 3]  # 2 starts before 2; 4 before 4


def test_oracle_within_keeps_runs_shorter_than_the_window():
    starts = [{0}, {0, 1}, {0, 1, 2}, {3}]
    times = [0, 3, 5, 5]
    assert within(starts, times, 3) == [{0}, {1}, {1, 2}, {3}]  # 3 - 0 = 3 is not < 3
    assert within(starts, times, 1) == [{0}, {1}, {2}, {3}]
    assert within(starts, times, 6) == starts


def test_oracle_within_with_partitions_and_skip():
    # A B within 3: partition 1's B at ts 4 is 4 after its A; partition 2's is 2 after.
    q = Query("w", seq(var("A"), var("B")), (("A", P0), ("B", P1)), window=3, order="ts")
    rows = [
        dict(r, ts=t)
        for r, t in zip(
            rows_of("a", key=1) + rows_of("a", key=2) + rows_of("b", key=2) + rows_of("b", key=1),
            [0, 2, 4, 4],
            strict=True,
        )
    ]
    assert run([q], rows, "k").matches == [(2, "w", "2")]
    # every end: the run from 1 ends at 2 (2 - 1 < 5), not at 3 (9 - 1 >= 5); skip past
    # last row: after the match at 1, the A at 1 cannot start another
    q = Query("w", seq(var("A"), rep(var("B"), "*")), (("A", P0), ("B", P1)), False, 5, "ts")
    rows = [dict(r, ts=t) for r, t in zip(rows_of("ab", "ab", "b", "b"), [0, 1, 2, 9], strict=True)]
    assert run([q], rows).matches == [(0, "w", ""), (1, "w", ""), (2, "w", "")]
    q = Query("w", q.pattern, q.defines, True, 5, "ts")
    assert run([q], rows).matches == [(0, "w", ""), (1, "w", "")]
    assert render_query(q, "s", None, "concise").splitlines()[1:3] == [
        "ORDER BY ts",
        "AFTER MATCH SKIP PAST LAST ROW",
    ]
    assert "PATTERN (A B*) WITHIN 5" in render_query(q, "s", "k")


# --------------------------------------------------------------------------------------------
# The oracle against itself


def _tokens_to_python(text: str, q: Query) -> str:
    """Translate nfacep PATTERN text (no PERMUTE) into a Python regex token by token.

    Python's own parser then decides what the text means, which checks that the renderer's
    parentheses and quantifier spellings say what the tree says.
    """
    out = []
    for tok in re.findall(r"[A-Z]+|\{[0-9,]*\}|\S", text):
        if tok.isalpha():
            out.append(char_class(q, tok))
        elif tok == ".":
            out.append(char_class(q, None))
        else:
            out.append(tok)
    return "".join(out)


def _has_permute(p: tuple) -> bool:
    return "PERMUTE" in render_pattern(p)


@settings(max_examples=150)
@given(q=queries("q"), codes=st.lists(st.integers(0, 7), max_size=8))
def test_oracle_engines_and_renderer_agree(q, codes):
    """Brute-force ``re`` and the set semantics agree; so does Python parsing our text."""
    width = len([v for v in pattern_vars(q.pattern) if v in dict(q.defines)])
    s = "".join(chr(0x100 + (c & ((1 << width) - 1))) for c in codes)
    by_re = starts_re(q, s)
    assert by_re == starts_sets(q, s), (render_pattern(q.pattern), to_regex(q))
    if not _has_permute(q.pattern):
        rx = re.compile(_tokens_to_python(render_pattern(q.pattern), q))
        assert by_re == [
            {j for j in range(i + 1) if rx.fullmatch(s, j, i + 1)} for i in range(len(s))
        ], render_pattern(q.pattern)


# --------------------------------------------------------------------------------------------
# nfacep match against the oracle


def cli_settings(max_examples: int) -> settings:
    """Settings of a test that runs the CLI per example in pytest's ``tmp_path``.

    Every example works in its own fresh directory under ``tmp_path``, so sharing the fixture
    across examples is safe. ``NFACEP_EXAMPLES=10`` runs ten times as many examples, for a
    deeper search than the default budget (about a minute in all) allows.
    """
    return settings(
        max_examples=max_examples * int(os.environ.get("NFACEP_EXAMPLES", "1")),
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


@pytest.mark.slow
@cli_settings(120)
@given(sc=scenarios(), rows=streams(), data=st.data())
def test_match_random(tmp_path, sc, rows, data):
    """Random patterns and predicates, with and without PARTITION, one to three queries."""
    options: list[str] = []
    if sc.partitioned:
        if data.draw(st.booleans(), label="explicit defaults"):
            options = [
                "--store",
                "pipeline",
                "--partitions",
                "256",
                "--tick-tuples",
                "0",
                "--timer-bits",
                "4",
            ]
    elif data.draw(st.booleans(), label="hardware options without PARTITION"):
        # without PARTITION there is one sub-stream: capacity and timers do not apply
        options = ["--partitions", "1", "--tick-tuples", "1", "--timer-bits", "1"]
    bools = data.draw(st.sampled_from(["word", "digit"]), label="bools")
    check_against_oracle(tmp_path, sc.queries, sc.text, rows, sc.partitioned, options, bools=bools)


@cli_settings(60)
@given(q=queries("q"), rows=streams(max_len=12, keys=1), form=st.sampled_from(["sql", "concise"]))
def test_match_single_query_re_engine(tmp_path, q, rows, form):
    """One query, one sub-stream, judged by the brute-force ``re`` engine."""
    text = STREAM + render_query(q, "s", None, form)
    check_against_oracle(tmp_path, [q], text, rows, False, engine="re")


@cli_settings(40)
@given(sc=scenarios(partitioned=True, max_queries=2), rows=streams(max_len=40, keys=6))
def test_match_many_partitions_interleaved(tmp_path, sc, rows):
    """Longer streams spread over more partitions than the other tests."""
    check_against_oracle(tmp_path, sc.queries, sc.text, rows, True)


@pytest.mark.parametrize("pattern", ["A{0}", "()", "(A{,0} | ()*) B{0,0}?", "PERMUTE((), A{0})"])
def test_match_only_empty(tmp_path, pattern):
    """A pattern matching nothing but the empty sequence never reports anything.

    docs/language.md lists it among the rejected queries (exit 2, "the pattern only matches
    the empty sequence"); accepting it and reporting nothing would be as right. Either is
    accepted here: never a crash, never a report.
    """
    text = STREAM + f"SELECT * FROM s MATCH_RECOGNIZE (PATTERN ({pattern}) DEFINE A AS p0) AS q;"
    got = nfacep_match(tmp_path, text, rows_of("a", "ab", ""))
    assert got.rc in (0, 2)
    assert got.matches == []


@pytest.mark.slow
@cli_settings(40)
@given(
    q=queries("q"),
    seed=st.integers(0, 2**32 - 1),
    length=st.integers(30, 60),
    partitioned=st.booleans(),
    form=st.sampled_from(["sql", "concise"]),
)
def test_match_beyond_dfa_limit(tmp_path, q, seed, length, partitioned, form):
    """Random patterns in alternation with ``Y .{16} Z``, whose every-end automaton has more
    than 2**16 subset states: a matcher that determinizes must fall back to simulating the
    NFA here (nfacep's does beyond 2**14 states), so this covers that path too. The tuples
    are uniformly random so that every combination of predicates occurs."""
    rng = random.Random(seed)
    rows = [
        {
            "k": rng.randrange(2),
            "p0": rng.random() < 0.5,
            "p1": rng.random() < 0.5,
            "p2": rng.random() < 0.5,
        }
        for _ in range(length)
    ]
    big = seq(var("Y"), rep(ANY, "{16}"), var("Z"))
    defines = (*q.defines, ("Y", P0), ("Z", P2))
    q = Query("q", alt(q.pattern, big), defines, q.skip)
    text = STREAM + render_query(q, "s", "k" if partitioned else None, form)
    check_against_oracle(tmp_path, [q], text, rows, partitioned)


@pytest.mark.parametrize("partitioned", [False, True])
def test_match_long_sub_stream(tmp_path, partitioned):
    """10,000 tuples with one sub-stream of about 9,000: long enough that a matcher splitting
    long runs into chunks (nfacep's does beyond 8,192 tuples) must join them exactly."""
    patterns = [
        seq(A, rep(B, "*"), C),
        rep(alt(A, seq(B, C)), "{2,3}"),
        seq(permute(A, B, C), rep(X, "?"), A),
        seq(A, rep(ANY, "{3,5}?"), rep(C, "+")),
    ]
    qs = [Query(f"e{i}", p, ABC) for i, p in enumerate(patterns)]
    qs += [Query(f"s{i}", p, ABC, skip=True) for i, p in enumerate(patterns)]
    rng = random.Random(7)
    rows = [
        {
            "k": 0 if rng.random() < 0.9 else rng.randrange(1, 4),
            "p0": rng.random() < 0.4,
            "p1": rng.random() < 0.5,
            "p2": rng.random() < 0.3,
        }
        for _ in range(10_000)
    ]
    key = "k" if partitioned else None
    text = STREAM + "".join(render_query(q, "s", key) for q in qs)
    check_against_oracle(tmp_path, qs, text, rows, partitioned)


# --------------------------------------------------------------------------------------------
# Exhaustive small scope, as RE2's exhaustive tester: every pattern up to a few atoms and
# operators against every stream of <= 4 tuples over (p0, p1).
#
# SMALL: <= 3 atoms and <= 3 operators over A, B from concatenation, |, * and ?.
# SMALL_MORE: <= 2 atoms and <= 2 operators over A, B, . from concatenation, |, PERMUTE and
# the quantifiers +, {2}, {1,2}?, {,1}, {2,}.


@cache
def _small_patterns(atoms: int, ops: int, leaves: tuple, binary: tuple, unary: tuple) -> frozenset:
    out = set(leaves) if atoms == 1 else set()
    for left_atoms in range(1, atoms):
        for left_ops in range(ops):
            for left in _small_patterns(left_atoms, left_ops, leaves, binary, unary):
                for right in _small_patterns(
                    atoms - left_atoms, ops - 1 - left_ops, leaves, binary, unary
                ):
                    out |= {make(left, right) for make in binary}
    if ops:
        for child in _small_patterns(atoms, ops - 1, leaves, binary, unary):
            out |= {rep(child, q) for q in unary}
    return frozenset(out)


def small_patterns(atoms: int, ops: int, leaves, binary, unary) -> list[tuple]:
    """Distinct by their text (concatenation and | are associative), in text order."""
    by_text: dict[str, tuple] = {}
    for n in range(1, atoms + 1):
        for p in _small_patterns(n, ops, tuple(leaves), tuple(binary), tuple(unary)):
            by_text.setdefault(render_pattern(p), p)
    return [by_text[t] for t in sorted(by_text)]


SMALL = small_patterns(3, 3, (var("A"), var("B")), (seq, alt), ("*", "?"))
SMALL_MORE = small_patterns(
    2, 2, (var("A"), var("B"), ANY), (seq, alt, permute), ("+", "{2}", "{1,2}?", "{,1}", "{2,}")
)
BATCHES = 8


def all_short_streams() -> list[dict[str, object]]:
    """Partition key n holds the 4 tuples spelling n in base 4 (p0 = low bit, p1 = high bit).

    Every stream of length <= 4 is a prefix of one of them and a report at a tuple depends only
    on the prefix ending there, so the 256 keys cover every stream up to length 4. The tuples
    are interleaved, so all 256 partition elements are in use at once.
    """
    return [
        {"k": key, "p0": bool(key >> 2 * i & 1), "p1": bool(key >> 2 * i & 2), "p2": False}
        for i in range(4)
        for key in range(256)
    ]


def test_small_scope_size():
    assert len(SMALL) == 838
    assert {pattern_atoms(p) for p in SMALL} == {1, 2, 3}
    assert len(SMALL_MORE) == 525
    assert {pattern_atoms(p) for p in SMALL_MORE} == {1, 2}


EXHAUSTIVE = [("small", b) for b in range(BATCHES)] + [("more", b) for b in range(BATCHES // 2)]


@pytest.mark.slow
@pytest.mark.parametrize(("scope", "batch"), EXHAUSTIVE)
def test_match_exhaustive_small_scope(tmp_path, scope, batch):
    """Each batch is one query file, every pattern in it twice: every end (concise form) and
    SKIP PAST LAST ROW (SQL form), each its form's default (no AFTER MATCH clause), judged by
    the brute-force ``re`` engine."""
    defines = (("A", P0), ("B", P1))
    patterns, batches = (SMALL, BATCHES) if scope == "small" else (SMALL_MORE, BATCHES // 2)
    qs, parts = [], [STREAM]
    for n, p in enumerate(patterns[batch::batches]):
        every = Query(f"e{n}", p, defines)
        skip = Query(f"s{n}", p, defines, skip=True)
        qs += [every, skip]
        parts += [
            render_query(every, "s", "k", "concise", after="default"),
            render_query(skip, "s", "k", after="default"),
        ]
    check_against_oracle(tmp_path, qs, "".join(parts), all_short_streams(), True, engine="re")


def test_match_exhaustive_oracle_engines_agree():
    """The exhaustive test judges with ``re``; the set engine must say the same there."""
    defines = (("A", P0), ("B", P1))
    words = ["".join(chr(0x100 + c) for c in w) for w in itertools.product(range(4), repeat=4)]
    for p in SMALL[::7] + SMALL_MORE[::5]:
        q = Query("q", p, defines)
        for w in words[::5]:
            assert starts_re(q, w) == starts_sets(q, w), render_pattern(p)


def test_quantifier_strategy_is_valid():
    @given(quantifiers())
    def check(text):
        lo, hi, _ = parse_quantifier(text)
        assert hi is None or lo <= hi

    check()


# --------------------------------------------------------------------------------------------
# Time windows (WITHIN)

WINDOW_STREAMS = {
    "UINT(16)": "CREATE STREAM s (k UINT(8), p0 BOOL, p1 BOOL, p2 BOOL, ts UINT(16));\n",
    "INT(16)": "CREATE STREAM s (k UINT(8), p0 BOOL, p1 BOOL, p2 BOOL, ts INT(16));\n",
}


@st.composite
def timed(draw, rows: list[dict[str, object]], ty: str) -> list[dict[str, object]]:
    """``rows`` with an ascending ``ts``: gaps of 0 (equal times) to 6, from a random first."""
    t = draw(st.integers(-60, 60) if ty.startswith("INT") else st.integers(0, 60))
    out = []
    for row in rows:
        t += draw(st.sampled_from([0, 0, 1, 1, 2, 3, 6]))
        out.append(dict(row, ts=t))
    return out


@st.composite
def windowed(
    draw, partitioned: bool, max_queries: int = 2, starts: bool = False, measures: bool = False
) -> tuple[list[Query], str]:
    """1-2 queries with ORDER BY ts WITHIN n, in either form, over a stream with ``ts``.
    With ``starts``, each query may also report start_seq and may have no window; with
    ``measures``, it may have other measures too (:func:`measure_lists`)."""
    ty = draw(st.sampled_from(sorted(WINDOW_STREAMS)))
    qs, parts = [], [WINDOW_STREAMS[ty]]
    for i in range(draw(st.integers(1, max_queries))):
        q = draw(queries(f"w{i}"))
        window = draw(st.integers(1, 12) | st.none()) if starts else draw(st.integers(1, 12))
        q = Query(
            q.name,
            q.pattern,
            q.defines,
            q.skip,
            window,
            "ts",
            start=starts and draw(st.booleans()),
            measures=draw(measure_lists()) if measures else (),
        )
        qs.append(q)
        parts.append(
            render_query(
                q, "s", "k" if partitioned else None, draw(st.sampled_from(["sql", "concise"]))
            )
        )
    return qs, "".join(parts), ty


#: measure names: ``n`` and ``N`` are one column, as SQL compares names
MEASURE_NAMES = ("n", "N", "x", "first_k", "last_ts")


@st.composite
def measure_lists(draw) -> tuple[tuple[str, str, str | None], ...]:
    """0-4 measures of every kind over the window stream's fields (None: seq), names drawn
    so that queries share some columns and not others."""
    kinds = st.sampled_from(["first", "last", "count", "number"])
    fields = st.sampled_from([None, "k", "p0", "p2", "ts"])
    out, seen = [], set()
    for _ in range(draw(st.integers(0, 4))):
        name = draw(st.sampled_from(MEASURE_NAMES))
        if name.upper() in seen:
            continue
        seen.add(name.upper())
        kind = draw(kinds)
        out.append((name, kind, draw(fields) if kind in ("first", "last") else None))
    return tuple(out)


def capacity_and_timers(data, partitioned: bool) -> tuple[tuple[int, int, int], list[str]]:
    """Hardware ``(partitions, tick_tuples, timer_bits)`` and their options: the defaults, or
    (partitioned, when drawn) a small partitioner with timers that matter."""
    if not (partitioned and data.draw(st.booleans(), label="capacity and timers")):
        return (256, 0, 4), []
    hardware = (
        data.draw(st.sampled_from([1, 2, 3])),
        data.draw(st.sampled_from([0, 1, 2, 5])),
        data.draw(st.sampled_from([1, 2, 4])),
    )
    return hardware, [
        "--store",
        "pipeline",
        "--partitions",
        str(hardware[0]),
        "--tick-tuples",
        str(hardware[1]),
        "--timer-bits",
        str(hardware[2]),
    ]


@cli_settings(100)
@given(partitioned=st.booleans(), data=st.data())
def test_match_within_random(tmp_path, partitioned, data):
    """Random patterns with windows over timestamps with gaps and repeats, both AFTER MATCH
    modes, with and without PARTITION, and with capacity and timers."""
    qs, text, ty = data.draw(windowed(partitioned), label="queries")
    rows = data.draw(timed(data.draw(streams(max_len=30, keys=4)), ty), label="rows")
    hardware, options = capacity_and_timers(data, partitioned)
    check_against_oracle(
        tmp_path, qs, text, rows, partitioned, options, hardware, fields=(*FIELDS, "ts")
    )


@cli_settings(40)
@given(q=queries("w"), window=st.integers(1, 6), data=st.data())
def test_match_within_re_engine(tmp_path, q, window, data):
    """One windowed query, one sub-stream, judged by the brute-force ``re`` engine."""
    q = Query(q.name, q.pattern, q.defines, q.skip, window, "ts")
    rows = data.draw(timed(data.draw(streams(max_len=12, keys=1)), "UINT(16)"))
    text = WINDOW_STREAMS["UINT(16)"] + render_query(q, "s", None, "sql")
    check_against_oracle(tmp_path, [q], text, rows, False, engine="re", fields=(*FIELDS, "ts"))


@cli_settings(100)
@given(partitioned=st.booleans(), data=st.data())
def test_match_start_seq_random(tmp_path, partitioned, data):
    """start_seq: where each match begins, with and without windows, both AFTER MATCH modes,
    capacity and timers, beside queries that do not report it."""
    qs, text, ty = data.draw(windowed(partitioned, starts=True), label="queries")
    rows = data.draw(timed(data.draw(streams(max_len=30, keys=4)), ty), label="rows")
    hardware, options = capacity_and_timers(data, partitioned)
    check_against_oracle(
        tmp_path, qs, text, rows, partitioned, options, hardware, fields=(*FIELDS, "ts")
    )


@cli_settings(100)
@given(partitioned=st.booleans(), data=st.data())
def test_match_measures_random(tmp_path, partitioned, data):
    """MEASURES FIRST, LAST, COUNT(*), MATCH_NUMBER() and start_seq, several queries sharing
    some columns, with and without windows, both AFTER MATCH modes, capacity and timers (a
    partition evicted and back keeps its MATCH_NUMBER() count), in one piece or several."""
    qs, text, ty = data.draw(windowed(partitioned, starts=True, measures=True), label="queries")
    rows = data.draw(timed(data.draw(streams(max_len=30, keys=4)), ty), label="rows")
    hardware, options = capacity_and_timers(data, partitioned)
    chunk = data.draw(st.sampled_from([[], ["--chunk", "1"], ["--chunk", "4"]]), label="chunk")
    check_against_oracle(
        tmp_path, qs, text, rows, partitioned, [*options, *chunk], hardware, fields=(*FIELDS, "ts")
    )


def test_oracle_measures_by_hand():
    """COUNT(*) counts the partition's tuples between the first and the last, MATCH_NUMBER()
    numbers a query's matches per partition, FIRST and LAST read the two tuples."""
    q = Query(
        "q",
        seq(var("A"), rep(ANY, "*"), var("B")),
        (("A", P0), ("B", P1)),
        skip=True,
        measures=(("n", "count", None), ("m", "number", None), ("x", "first", "k")),
    )
    r = Query("r", var("B"), (("B", P1),), measures=(("N", "last", "p0"), ("e", "last", None)))
    rows = rows_of("a", "b", "", "b", "b")
    for n, k in enumerate([0, 1, 0, 0, 1]):
        rows[n]["k"] = k
    got = run([q, r], rows, "k")
    # k 0 is 0 2 3: A at 0, B at 3; k 1 is 1 4, no A. r's N is the column n, as SQL's names
    assert got.matches == [
        (1, "r", "1", "false", None, None, "1"),
        (3, "q", "0", "3", "1", "0", None),
        (3, "r", "0", "false", None, None, "3"),
        (4, "r", "1", "false", None, None, "4"),
    ]
    assert measure_columns([q, r]) == ["n", "m", "x", "e"]


@cli_settings(40)
@given(q=queries("s"), window=st.integers(1, 6) | st.none(), data=st.data())
def test_match_start_seq_re_engine(tmp_path, q, window, data):
    """One query reporting start_seq, judged by the brute-force ``re`` engine."""
    q = Query(q.name, q.pattern, q.defines, q.skip, window, "ts", start=True)
    rows = data.draw(timed(data.draw(streams(max_len=12, keys=1)), "UINT(16)"))
    text = WINDOW_STREAMS["UINT(16)"] + render_query(
        q, "s", None, data.draw(st.sampled_from(["sql", "concise"]))
    )
    check_against_oracle(tmp_path, [q], text, rows, False, engine="re", fields=(*FIELDS, "ts"))


def test_oracle_start_seq_by_hand():
    """The latest start of the runs that end at a match; after a skip, of those after it."""
    rows = rows_of("a", "a", "b", "b")
    q = Query("q", seq(rep(var("A"), "+"), rep(var("B"), "+")), (("A", P0), ("B", P1)), start=True)
    assert run([q], rows).matches == [(2, "q", "", 1), (3, "q", "", 1)]
    q = Query(q.name, q.pattern, q.defines, skip=True, start=True)
    assert run([q], rows).matches == [(2, "q", "", 1)]
    plain = Query("p", var("B"), (("B", P1),))
    assert run([q, plain], rows).matches == [
        (2, "p", "", None),
        (2, "q", "", 1),
        (3, "p", "", None),
    ]


START_CASES = [  # several accepting states set at once, with different starts
    (alt(var("A"), seq(var("B"), var("A"))), False, None),
    (seq(rep(alt(var("A"), var("B")), "+"), var("C")), False, None),
    (seq(var("A"), rep(ANY, "*"), var("B")), True, None),
    (seq(var("A"), rep(var("B"), "*"), alt(var("C"), seq(var("A"), var("C")))), False, 4),
]


@pytest.mark.parametrize("pattern, skip, window", START_CASES)
@pytest.mark.parametrize("partitioned", [False, True])
def test_reference_start_seq_both_loops(pattern, skip, window, partitioned):
    """start_seq from both loops of the reference against the oracle, on 400 seeded tuples
    whose predicates overlap."""
    import numpy as np

    import nfacep
    from nfacep.io.tuples import Tuples
    from nfacep.reference import matcher as reference

    rng = random.Random(7)
    t, rows = 0, []
    for _ in range(400):
        t += rng.choice([0, 1, 1, 2])
        rows.append(
            {
                "k": rng.randrange(3),
                "p0": rng.random() < 0.5,
                "p1": rng.random() < 0.5,
                "p2": rng.random() < 0.3,
                "ts": t,
            }
        )
    q = Query(
        "s",
        pattern,
        (("A", P0), ("B", P1), ("C", ("cmp", "p2", "=", True))),
        skip,
        window,
        "ts",
        start=True,
    )
    text = WINDOW_STREAMS["UINT(16)"] + render_query(q, "s", "k" if partitioned else None)
    nfa = nfacep.compile_text(text)
    columns = {f: np.array([r[f] for r in rows], dtype=bool) for f in ("p0", "p1", "p2")}
    columns["k"] = np.array([r["k"] for r in rows], dtype=np.uint8)
    columns["ts"] = np.array([r["ts"] for r in rows], dtype=np.uint16)
    want = run([q], rows, "k" if partitioned else None).matches
    assert len({m[3] for m in want}) > 10
    for compiled in (True, False):
        got = reference.run(nfa, Tuples(columns, len(rows)), compiled=compiled)
        assert [(m[0], m[1], m[2] or "", m[3]) for m in got.matches] == want, compiled


@settings(max_examples=40, deadline=None)
@given(partitioned=st.booleans(), starts=st.booleans(), data=st.data())
def test_reference_within_both_loops(partitioned, starts, data):
    """The compiled stream-order loop and the array operations of the reference matcher, on
    longer streams than the command line's tests run, against the oracle (Python API)."""
    import numpy as np

    import nfacep
    from nfacep.io.tuples import Tuples
    from nfacep.reference import matcher as reference

    qs, text, ty = data.draw(windowed(partitioned, starts=starts), label="queries")
    rows = data.draw(timed(data.draw(streams(max_len=200, keys=6)), ty), label="rows")
    nfa = nfacep.compile_text(text)
    columns = {f: np.array([r[f] for r in rows], dtype=bool) for f in ("p0", "p1", "p2")}
    columns["k"] = np.array([r["k"] for r in rows], dtype=np.uint8)
    columns["ts"] = np.array(
        [r["ts"] for r in rows], dtype=np.int16 if ty.startswith("INT") else np.uint16
    )
    want = run(qs, rows, "k" if partitioned else None).matches
    for compiled in (True, False):
        got = reference.run(nfa, Tuples(columns, len(rows)), compiled=compiled)
        matches = [(m[0], m[1], m[2] or "", *m[3:]) for m in got.matches]
        assert matches == want, (compiled, text)


# --------------------------------------------------------------------------------------------
# Runtime parameters (:name, --param name=value[@seq])

PARAM_STREAM = (
    "CREATE STREAM s (k UINT(8), p0 BOOL, p1 BOOL, p2 BOOL, v UINT(8), w INT(8), "
    "e ENUM('x', 'y', 'z'));\n"
)
PARAM_FIELDS = (*FIELDS, "v", "w", "e")
PARAM_PREDICATES = [
    ("cmpp", "v", ">", "lo"),
    ("cmpp", "v", "<=", "hi"),
    ("cmpp", "w", "<", "lo2"),
    ("cmpp", "e", "=", "tag"),
    ("cmpp", "e", "<>", "tag"),
    P0,
    ("and", ("cmpp", "v", ">=", "lo"), ("cmpp", "w", "<>", "lo2")),
]
PARAM_DRAW = {
    "lo": st.integers(0, 9),
    "hi": st.integers(0, 9),
    "lo2": st.integers(-5, 5),
    "tag": st.sampled_from(["x", "y", "z"]),
}


@pytest.mark.slow
@cli_settings(100)
@given(partitioned=st.booleans(), data=st.data())
def test_match_with_parameter_switches(tmp_path, partitioned, data):
    """Queries whose conditions compare fields with runtime parameters, their values switched
    at random tuples (several at once, or one, or none), both forms and skip modes: ``nfacep
    match --param`` reports what the oracle does with the value in force at each tuple."""
    qs, parts = [], [PARAM_STREAM]
    for i in range(data.draw(st.integers(1, 2), label="queries")):
        q = data.draw(queries(f"q{i}"))
        defines = tuple((v, data.draw(st.sampled_from(PARAM_PREDICATES))) for v, _ in q.defines)
        q = Query(q.name, q.pattern, defines, q.skip)
        qs.append(q)
        parts.append(
            render_query(
                q, "s", "k" if partitioned else None, data.draw(st.sampled_from(["sql", "concise"]))
            )
        )
    text = "".join(parts)
    used = sorted(
        {
            p[3]
            for q in qs
            for _, pred in q.defines
            for p in (pred, *pred[1:])
            if isinstance(p, tuple) and p[0] == "cmpp"
        }
    )
    rows = data.draw(streams(max_len=30, keys=4), label="rows")
    rows = [
        dict(
            r,
            v=data.draw(st.integers(0, 9)),
            w=data.draw(st.integers(-6, 6)),
            e=data.draw(st.sampled_from(["x", "y", "z"])),
        )
        for r in rows
    ]
    initial = {name: data.draw(PARAM_DRAW[name], label=name) for name in used}
    switches = []
    for _ in range(data.draw(st.integers(0, 3), label="switches") if used else 0):
        at = data.draw(st.integers(1, len(rows) + 1), label="at")
        if any(at == s for s, _ in switches):
            continue
        names = data.draw(st.lists(st.sampled_from(used), min_size=1, unique=True))
        switches.append((at, {n: data.draw(PARAM_DRAW[n]) for n in names}))
    options = [f"--param={n}={v}" for n, v in initial.items()]
    options += [f"--param={n}={v}@{at}" for at, c in switches for n, v in c.items()]
    want = run(qs, with_parameters(rows, initial, switches), "k" if partitioned else None)
    got = nfacep_match(tmp_path, text, rows, options, fields=PARAM_FIELDS)
    context = f"\n--- query file\n{text}--- {options}\n--- rows {rows}"
    assert got.rc == 0, context
    assert got.matches == want.matches, context
    if used:
        assert got.summary["runtime_parameters"]["initial"] == initial


# --------------------------------------------------------------------------------------------
# `*` by an integer constant, exact on the widest fields

MUL_STREAM = "CREATE STREAM s (k UINT(8), p0 BOOL, p1 BOOL, p2 BOOL, u UINT(64), i INT(64));\n"
MUL_FIELDS = (*FIELDS, "u", "i")
_U64, _I64 = (0, (1 << 64) - 1), (-(1 << 63), (1 << 63) - 1)


def _wide(lo: int, hi: int) -> st.SearchStrategy[int]:
    """Values of a 64-bit field, often at its ends, where a product overflows 64 bits."""
    ends = [lo, lo + 1, hi - 1, hi, 0, 1, -1 if lo < 0 else 2]
    return st.one_of(st.sampled_from(ends), st.integers(lo, hi), st.integers(-20, 20).map(abs))


_FACTORS = st.one_of(
    st.integers(-12, 12), st.sampled_from([1 << 32, -(1 << 40), 1 << 62, -(1 << 62)])
)


@st.composite
def products(draw) -> tuple:
    """``c * field + … op d * other + k`` over u, i and k."""
    terms = tuple(
        (draw(_FACTORS), draw(st.sampled_from(["u", "i", "k"])))
        for _ in range(draw(st.integers(1, 2)))
    )
    other = draw(st.none() | st.tuples(_FACTORS, st.sampled_from(["u", "i"])))
    op = draw(st.sampled_from(["=", "<>", "<", "<=", ">", ">="]))
    return ("lin", terms, op, other, draw(st.integers(-(1 << 70), 1 << 70)))


def test_oracle_products_by_hand():
    row = {"u": (1 << 64) - 1, "i": -(1 << 63), "k": 3}
    assert eval_pred(("lin", ((10, "u"),), ">", (11, "i"), 0), row)
    assert eval_pred(("lin", ((2, "u"), (-1, "u")), "=", None, (1 << 64) - 1), row)
    assert not eval_pred(("lin", ((-3, "k"),), ">=", (1, "k"), -11), row)
    assert render_pred(("lin", ((2, "u"), (-3, "k")), "<", (-4, "i"), -5)) == (
        "u * 2 + -3 * k < (-4) * i + -5"
    )


@pytest.mark.slow
@cli_settings(80)
@given(partitioned=st.booleans(), data=st.data())
def test_match_products_random(tmp_path, partitioned, data):
    """DEFINEs with ``*`` by constants (both orders, negative, up to 2**63) on UINT(64) and
    INT(64) fields whose values sit at their ends: ``nfacep match`` is exact, as the oracle's
    Python integers are."""
    qs, parts = [], [MUL_STREAM]
    for i in range(data.draw(st.integers(1, 2), label="queries")):
        q = data.draw(queries(f"q{i}"))
        defines = tuple(
            (v, data.draw(st.sampled_from([p, data.draw(products())]))) for v, p in q.defines
        )
        q = Query(q.name, q.pattern, defines, q.skip)
        qs.append(q)
        form = data.draw(st.sampled_from(["sql", "concise"]))
        parts.append(render_query(q, "s", "k" if partitioned else None, form))
    text = "".join(parts)
    rows = data.draw(streams(max_len=20, keys=3), label="rows")
    rows = [dict(r, u=data.draw(_wide(*_U64)), i=data.draw(_wide(*_I64))) for r in rows]
    check_against_oracle(tmp_path, qs, text, rows, partitioned, fields=MUL_FIELDS)


# --------------------------------------------------------------------------------------------
# IPV4 and TIMESTAMP fields

IP_STREAM = "CREATE STREAM s (k UINT(8), p0 BOOL, p1 BOOL, p2 BOOL, src IPV4, dst IPV4);\n"
IP_FIELDS = (*FIELDS, "src", "dst")
ADDRESSES = (
    "10.0.0.1",
    "10.1.2.3",
    "10.255.255.255",
    "11.0.0.0",
    "192.168.1.1",
    "192.168.1.200",
    "0.0.0.0",
    "255.255.255.255",
)
NETWORKS = (
    "10.0.0.0/8",
    "10.0.0.0/7",
    "192.168.1.0/24",
    "192.168.1.128/25",
    "0.0.0.0/0",
    "10.1.2.3/32",
    "255.255.255.254/31",
)


@st.composite
def ip_predicates(draw) -> tuple:
    kind = draw(st.sampled_from(["in_net", "not_in_net", "eq", "field", "list"]))
    f = draw(st.sampled_from(["src", "dst"]))
    if kind in ("in_net", "not_in_net"):
        pred = ("ipin", f, draw(st.sampled_from(NETWORKS)))
        return pred if kind == "in_net" else ("not", pred)
    if kind == "eq":
        return ("cmp", f, draw(st.sampled_from(["=", "<>"])), draw(st.sampled_from(ADDRESSES)))
    if kind == "field":
        return ("cmpf", "src", draw(st.sampled_from(["=", "<>", "!="])), "dst")
    return ("in", f, tuple(draw(st.lists(st.sampled_from(ADDRESSES), min_size=1, max_size=3))))


def test_oracle_ipv4_by_hand():
    row = {"src": "10.1.2.3", "dst": "192.168.1.200"}
    assert eval_pred(("ipin", "src", "10.0.0.0/8"), row)
    assert not eval_pred(("ipin", "dst", "192.168.1.0/25"), row)
    assert eval_pred(("ipin", "dst", "192.168.1.128/25"), row)
    assert render_pred(("ipin", "src", "10.0.0.0/8")) == "src IN '10.0.0.0/8'"
    assert render_pred(("cmp", "src", "=", "10.1.2.3")) == "src = '10.1.2.3'"


@pytest.mark.slow
@cli_settings(60)
@given(by=st.sampled_from([None, "k", "src"]), data=st.data())
def test_match_ipv4_random(tmp_path, by, data):
    """IPV4 fields against addresses, networks (IN 'a.b.c.d/n'), lists and each other,
    partitioned by nothing, an integer or an IPV4 field (written back as a dotted quad)."""
    qs, parts = [], [IP_STREAM]
    for i in range(data.draw(st.integers(1, 2), label="queries")):
        q = data.draw(queries(f"q{i}"))
        defines = tuple((v, data.draw(ip_predicates())) for v, _ in q.defines)
        q = Query(q.name, q.pattern, defines, q.skip)
        qs.append(q)
        parts.append(render_query(q, "s", by, data.draw(st.sampled_from(["sql", "concise"]))))
    text = "".join(parts)
    rows = data.draw(streams(max_len=25, keys=3), label="rows")
    address = st.sampled_from(ADDRESSES)
    rows = [dict(r, src=data.draw(address), dst=data.draw(address)) for r in rows]
    want = run(qs, rows, by)
    got = nfacep_match(tmp_path, text, rows, fields=IP_FIELDS)
    context = f"\n--- query file\n{text}--- rows {rows}"
    assert got.rc == 0, context
    assert got.matches == want.matches, context


TS_UNITS = {"SECOND": 10**9, "MILLISECOND": 10**6, "MICROSECOND": 10**3}
_BASE_NS = 1_704_067_200 * 10**9  # 2024-01-01T00:00:00Z


def spell_time(ns: int, digits: int, draw) -> str:
    """An ISO 8601 spelling of the instant ``ns`` (whole microseconds): ``T`` or a space,
    ``Z``, an offset or nothing (UTC), the fraction to ``digits`` digits or fewer when its
    trailing digits are zeros."""
    import datetime

    offset = draw(st.sampled_from([None, 0, 60, -330]))  # minutes
    zone = datetime.timezone(datetime.timedelta(minutes=offset or 0))
    t = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC) + datetime.timedelta(
        microseconds=ns // 1000
    )
    t = t.astimezone(zone)
    text = t.strftime("%Y-%m-%d") + draw(st.sampled_from(["T", " "])) + t.strftime("%H:%M:%S")
    fraction = f"{t.microsecond:06d}"[:digits]
    if fraction.strip("0") or (digits and draw(st.booleans())):
        text += "." + fraction
    if offset is None:
        return text
    return text + (
        "Z"
        if offset == 0 and draw(st.booleans())
        else t.strftime("%z")[:3] + ":" + t.strftime("%z")[3:]
    )


@pytest.mark.slow
@cli_settings(60)
@given(partitioned=st.booleans(), unit=st.sampled_from(sorted(TS_UNITS)), data=st.data())
def test_match_timestamps_random(tmp_path, partitioned, unit, data):
    """A TIMESTAMP(unit) field written in every ISO 8601 spelling (T or space, Z, offsets,
    none), ORDER BY it, WITHIN INTERVAL 'n' SECOND or MILLISECOND, and DEFINEs against
    TIMESTAMP literals."""
    per = TS_UNITS[unit]
    digits = {10**9: 0, 10**6: 3, 10**3: 6}[per]
    stream = f"CREATE STREAM s (k UINT(8), p0 BOOL, p1 BOOL, p2 BOOL, ts TIMESTAMP({unit}));\n"
    rows = data.draw(streams(max_len=25, keys=3), label="rows")
    ns, times = _BASE_NS, []
    for _ in rows:
        ns += data.draw(st.sampled_from([0, 1, 2, 5, 20])) * per * (1 if per == 10**9 else 100)
        times.append(ns)
    rows = [dict(r, ts=spell_time(t, digits, data.draw)) for r, t in zip(rows, times, strict=True)]
    qs, parts = [], [stream]
    for i in range(data.draw(st.integers(1, 2), label="queries")):
        q = data.draw(queries(f"t{i}"))
        span = _BASE_NS + data.draw(st.integers(0, 60)) * per * (1 if per == 10**9 else 100)
        defines = tuple(
            (
                v,
                data.draw(
                    st.sampled_from(
                        [
                            p,
                            (
                                "cmpt",
                                "ts",
                                data.draw(st.sampled_from(["<", ">=", "="])),
                                spell_time(span, digits, data.draw),
                            ),
                        ]
                    )
                ),
            )
            for v, p in q.defines
        )
        seconds = data.draw(st.sampled_from([None, 1, 3, 10]))
        window = None if seconds is None else seconds * 10**9
        q = Query(q.name, q.pattern, defines, q.skip, window, "ts")
        qs.append(q)
        text = render_query(
            q, "s", "k" if partitioned else None, data.draw(st.sampled_from(["sql", "concise"]))
        )
        if window is not None:
            text = text.replace(f" WITHIN {window}", f" WITHIN INTERVAL '{seconds}' SECOND")
        parts.append(text)
    text = "".join(parts)
    want = run(qs, rows, "k" if partitioned else None)
    got = nfacep_match(tmp_path, text, rows, fields=(*FIELDS, "ts"))
    context = f"\n--- query file\n{text}--- rows {rows}"
    assert got.rc == 0, context
    assert got.matches == want.matches, context


# PREV: earlier tuples of the partition, NULL before them


@st.composite
def valued(draw, rows: list[dict[str, object]]) -> list[dict[str, object]]:
    """``rows`` with a ``v`` (UINT(3)), an ``ip`` (one of :data:`PREV_ADDRESSES`) and a ``t``
    (one of :data:`PREV_TIMES`) each."""
    return [
        dict(
            row,
            v=draw(st.integers(0, 7)),
            ip=draw(st.sampled_from(PREV_ADDRESSES)),
            t=draw(st.sampled_from(PREV_TIMES)),
        )
        for row in rows
    ]


@cli_settings(100)
@given(partitioned=st.booleans(), data=st.data())
def test_match_prev_random(tmp_path, partitioned, data):
    """Random queries whose conditions read PREV (of several depths, in sums, compared with
    fields, constants and each other, BOOL ones as conditions, under NOT, AND and OR), in
    either form, qualified or not, with and without PARTITION, capacity, drops and timers
    (which forget a partition's history), in pieces of a few tuples or whole."""
    qs = [
        data.draw(queries(f"r{i}", preds=prev_predicates), label="query")
        for i in range(data.draw(st.integers(1, 2)))
    ]
    text = PREV_STREAM + "".join(
        render_query(
            q,
            "s",
            "k" if partitioned else None,
            data.draw(st.sampled_from(["sql", "concise"])),
            qualify=data.draw(st.booleans()),
        )
        for q in qs
    )
    rows = data.draw(valued(data.draw(streams(max_len=30, keys=4))), label="rows")
    hardware, options = capacity_and_timers(data, partitioned)
    options += data.draw(st.sampled_from([[], ["--chunk", "1"], ["--chunk", "3"]]))
    check_against_oracle(
        tmp_path, qs, text, rows, partitioned, options, hardware, fields=(*FIELDS, "v", "ip", "t")
    )
