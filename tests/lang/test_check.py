"""Semantic checks: every error names the place and the reason; warnings do not stop."""

import pytest

import nfacep
from nfacep.errors import QueryError
from nfacep.lang import ast
from nfacep.lang import predicates as P

STREAM = "CREATE STREAM s (a UINT(8), b INT(8), c BOOL, d FLOAT32, e ENUM('x', 'y'), w UINT(64));\n"

ERRORS = [
    ("QUERY q FROM t PATTERN (A)", "unknown stream 't'", "t"),
    ("QUERY q PATTERN (A) DEFINE A AS f = 1", "unknown field 'f'", "f"),
    ('QUERY q PATTERN (A) DEFINE A AS "a" = 1', "unknown field \"a\" in stream 's'", '"a"'),
    ("QUERY q PATTERN (A) DEFINE A AS e = 'z'", "'z' is not a label", "'z'"),
    ("QUERY q PATTERN (A) DEFINE A AS e < 'x'", "can only be compared with = or <>", "<"),
    ("QUERY q PATTERN (A) DEFINE A AS a = 256", "does not fit field 'a' UINT(8) (0..255)", "256"),
    ("QUERY q PATTERN (A) DEFINE A AS b > -129", "does not fit field 'b' INT(8)", "-"),
    ("QUERY q PATTERN (A) DEFINE A AS a = 'x'", "cannot compare", "="),
    ("QUERY q PATTERN (A) DEFINE A AS a > 2.5", "cannot compare", ">"),
    ("QUERY q PATTERN (A) DEFINE A AS a = d", "cannot compare", "="),
    ("QUERY q PATTERN (A) DEFINE A AS c < TRUE", "only be compared with = or <>", "<"),
    ("QUERY q PATTERN (A) DEFINE A AS a", "not a condition", "a"),
    ("QUERY q PATTERN (A) DEFINE A AS d + 1 > 2", "integer fields and integer literals", "d"),
    ("QUERY q PATTERN (A) DEFINE A AS PREV(a, 9) > 1", "integer constant from 1 to 8", "9"),
    ("QUERY q PATTERN (A) DEFINE A AS PREV(a, 0) > 1", "integer constant from 1 to 8", "0"),
    ("QUERY q PATTERN (A) DEFINE A AS PREV(a, a) > 1", "integer constant from 1 to 8", "a)"),
    ("QUERY q PATTERN (A) DEFINE A AS PREV(a, -1) > 1", "integer constant from 1 to 8", "-1"),
    ("QUERY q PATTERN (A) DEFINE A AS PREV(a, 1 + 1) > 1", "integer constant from 1", "+"),
    ("QUERY q PATTERN (A) DEFINE A AS PREV(a, 1, 2) > 1", "not 3 arguments", "PREV"),
    ("QUERY q PATTERN (A) DEFINE A AS PREV() > 1", "not 0 arguments", "PREV"),
    ("QUERY q PATTERN (A) DEFINE A AS PREV(a + 1) > 1", "not an expression", "+"),
    ("QUERY q PATTERN (A) DEFINE A AS PREV(2) > 1", "not an expression", "2"),
    ("QUERY q PATTERN (A) DEFINE A AS PREV(PREV(a)) > 1", "not an expression", "PREV(a)"),
    ("QUERY q PATTERN (A) DEFINE A AS PREV(*) > 1", "not an expression", "PREV"),
    ("QUERY q PATTERN (A B) DEFINE A AS PREV(B.a) > 1", "last one mapped to B", "B.a"),
    ("QUERY q PATTERN (A) DEFINE A AS PREV(f) > 1", "unknown field 'f'", "f"),
    ("QUERY q PATTERN (A) DEFINE A AS PREV(a) = 256", "does not fit PREV(a) UINT(8)", "256"),
    ("QUERY q PATTERN (A) DEFINE A AS PREV(a)", "PREV(a) is UINT(8), not a condition", "PREV"),
    ("QUERY q PATTERN (A) DEFINE A AS PREV(e) < 'x'", "can only be compared with = or <>", "<"),
    ("QUERY q PATTERN (A) DEFINE A AS PREV(d) + 1 > 2", "not on a FLOAT32 value", "PREV"),
    ("QUERY q PATTERN (A) DEFINE A AS PREV(a) = PREV(d)", "cannot compare UINT(8) PREV(a)", "="),
    ("QUERY q PATTERN (A) DEFINE A AS PREV(a x) > 1", "PREV is written PREV(field)", "PREV"),
    ("QUERY q PATTERN (A) DEFINE A AS NEXT(a) > 1", "NEXT() is not supported", "NEXT"),
    ("QUERY q PATTERN (A) DEFINE A AS FIRST(a) > 1", "FIRST() is not supported", "FIRST"),
    ("QUERY q PATTERN (A) DEFINE A AS LAST(a) > 1", "LAST() is not supported", "LAST"),
    ("QUERY q PATTERN (A) DEFINE A AS SUM(a) > 1", "aggregate", "SUM"),
    ("QUERY q PATTERN (A) DEFINE A AS COUNT(*) > 1", "aggregate", "COUNT"),
    ("QUERY q PATTERN (A B) DEFINE A AS B.a > 1", "another variable's row", "B"),
    ("QUERY q PARTITION s.a PATTERN (A)", "name fields of the stream, unqualified: write a", "s"),
    ("QUERY q ORDER BY q.a PATTERN (A)", "PARTITION BY and ORDER BY name fields", "q.a"),
    ("QUERY q PATTERN (A) DEFINE A AS s.a > 1", "'s.a' qualifies a field by its stream", "s.a"),
    ("QUERY q PATTERN (A $)", "'$' anchor is not supported", "$"),
    ("QUERY q PATTERN (^ A)", "'^' anchor is not supported", "^"),
    ("QUERY q PATTERN (A {- B -})", "exclusion is not supported", "{"),
    ("QUERY q PATTERN (A) DEFINE A AS a = 1 A AS a = 2", "defined twice", "A"),
    ("QUERY q PATTERN (A{0} B{,0})", "only matches the empty sequence", "A"),
    ("QUERY q PATTERN ()", "only matches the empty sequence", "P"),
    ("QUERY q PARTITION d PATTERN (A)", "cannot partition by FLOAT32", "d"),
    ("QUERY q PARTITION a, w PATTERN (A)", "72 bits wide, more than the engine's limit of 64", "w"),
    ("QUERY q PARTITION a, A PATTERN (A)", "lists field 'a' twice", "A"),
    ("QUERY q PARTITION a, d PATTERN (A)", "FLOAT32", "d"),
    ("QUERY q PARTITION a, b PATTERN (A); QUERY r PARTITION b, a PATTERN (B)", "by b, a", "b"),
    ("QUERY q; QUERY q PATTERN (A)", "unexpected", ";"),
    ("QUERY q PATTERN (A); QUERY q PATTERN (B)", "already defined", "q"),
    ("QUERY q PARTITION a PATTERN (A); QUERY r PARTITION b PATTERN (B)", "same partition", "b"),
    (
        "SELECT * FROM s MATCH_RECOGNIZE (MEASURES A.a AS x PATTERN (A)) AS q",
        "the measure 'A.a' is not supported",
        "A.a",
    ),
    (
        "SELECT * FROM s MATCH_RECOGNIZE (MEASURES SUM(a) AS total PATTERN (A)) AS q",
        "the measure SUM(…) is not supported",
        "SUM",
    ),
    (
        "SELECT * FROM s MATCH_RECOGNIZE (MEASURES LAST(a) + 1 AS x PATTERN (A)) AS q",
        "this measure is not supported: the measures are FIRST(field), LAST(field)",
        "LAST",
    ),
    (
        "SELECT * FROM s MATCH_RECOGNIZE (MEASURES FIRST(B.a) AS b0 PATTERN (A? B)) AS q",
        "FIRST(B.a) is accepted only where every match begins with a tuple of B, but a "
        "match may begin with A",
        "B.a",
    ),
    (
        "QUERY q MEASURES LAST(A.a) AS a1 PATTERN (A B*)",
        "LAST(A.a) is accepted only where every match ends with a tuple of A, but a "
        "match may end with B",
        "A.a",
    ),
    (
        "QUERY q MEASURES FIRST(A.a) AS a1 PATTERN (. A)",
        "but a match may begin with .",
        "A.a",
    ),
    (
        "SELECT * FROM s MATCH_RECOGNIZE (MEASURES FIRST(seq) AS start_seq, FIRST(seq) AS "
        "START_SEQ PATTERN (A)) AS q",
        "measure name 'START_SEQ' is given twice",
        "START_SEQ",
    ),
    ("QUERY q MEASURES COUNT(a) AS n PATTERN (A)", "COUNT of a field", "COUNT"),
    ("QUERY q MEASURES MATCH_NUMBER(a) AS n PATTERN (A)", "takes no arguments", "MATCH"),
    ("QUERY q MEASURES FIRST(a, 2) AS n PATTERN (A)", "FIRST takes one field", "FIRST"),
    ("QUERY q MEASURES FIRST(zz) AS n PATTERN (A)", "unknown field 'zz'", "zz"),
    ("QUERY q MEASURES LAST(a) AS partition PATTERN (A)", "already has", "partition"),
    ("QUERY q MEASURES COUNT(*) AS Seq PATTERN (A)", "already has", "Seq"),
    ('QUERY q MEASURES COUNT(*) AS "query" PATTERN (A)', "already has", '"query"'),
    ("QUERY q PARTITION a, b MEASURES COUNT(*) AS partition_b PATTERN (A)", "already has", "par"),
    ('QUERY q PARTITION b, e MEASURES LAST(a) AS "PARTITION_E" PATTERN (A)', "partition_e", '"P'),
    (
        "SELECT * FROM s MATCH_RECOGNIZE (ALL ROWS PER MATCH PATTERN (A)) AS q",
        "ALL ROWS PER MATCH is not supported",
        "A",
    ),
    (
        "SELECT * FROM s MATCH_RECOGNIZE (AFTER MATCH SKIP TO NEXT ROW PATTERN (A)) AS q",
        "SKIP TO NEXT ROW is not supported",
        "T",
    ),
    ("SELECT a FROM s MATCH_RECOGNIZE (PATTERN (A)) AS q", "SELECT list", "a"),
    ("QUERY q PATTERN (A{5000})", "more than the limit", "{5000}"),
    ("QUERY q PATTERN (PERMUTE(A, B, C, D, E, F, G))", "more than the limit", "P"),
]


@pytest.mark.parametrize(("text", "message", "at"), ERRORS)
def test_semantic_errors(text, message, at):
    source = STREAM + text
    with pytest.raises(QueryError) as info:
        nfacep.compile_text(source, "q.sql")
    err = info.value
    assert message in err.message
    assert err.line == 2
    # the caret points at the offending text
    assert source.splitlines()[1][err.column - 1 :].startswith(at), err.render()
    assert err.render().startswith(f"q.sql:2:{err.column}: ")


def test_a_field_named_as_a_literal_must_be_quoted():
    """A field declared true, false or null (unquoted) is refused: a condition reads the word
    as the literal, so `A AS true` held for every tuple, silently; "true" is a field."""
    with pytest.raises(QueryError) as info:
        nfacep.compile_text(
            "CREATE STREAM s (k UINT(8), true BOOL);\nQUERY q PATTERN (A) DEFINE A AS true"
        )
    assert info.value.render().startswith("<query>:1:29: field true is named as SQL's literal TRUE")
    nfa = nfacep.compile_text(
        'CREATE STREAM s (k UINT(8), "true" BOOL);\nQUERY q PATTERN (A) DEFINE A AS "true"'
    )
    assert [p.text for p in nfa.predicates] == ["true"]


def test_stream_must_be_named_when_several():
    src = "CREATE STREAM s (a UINT(8)); CREATE STREAM t (a UINT(8)); QUERY q PATTERN (A)"
    with pytest.raises(QueryError, match="does not say which stream"):
        nfacep.compile_text(src)
    assert nfacep.compile_text(src.replace("QUERY q", "QUERY q FROM t")).program.schema.name == "t"


def test_no_stream_and_no_query():
    with pytest.raises(QueryError, match="declares no stream"):
        nfacep.compile_text("QUERY q PATTERN (A)")
    with pytest.raises(QueryError, match="holds no query"):
        nfacep.compile_text(STREAM)


def test_unused_define_is_a_warning():
    nfa = nfacep.compile_text(STREAM + "QUERY q PATTERN (A) DEFINE A AS c, Z AS a = 1", "q.sql")
    (w,) = nfa.program.warnings
    assert w.severity == "warning" and "DEFINE Z is never used" in w.message
    assert w.render().startswith("q.sql:2:")


def test_default_names_and_undefined_variables():
    nfa = nfacep.compile_text(
        STREAM + "PATTERN (A B); SELECT * FROM s MATCH_RECOGNIZE (PATTERN (C) DEFINE C AS c)"
    )
    assert [q.name for q in nfa.program.queries] == ["q1", "q2"]
    assert nfa.program.queries[0].predicates == {"A": None, "B": None}


def test_names_ignore_case_unless_quoted():
    """SQL's rule: an unquoted name stands for its upper case, a quoted one for itself; what
    is handed on is spelled as declared (parameters as first written)."""
    nfa = nfacep.compile_text(
        'CREATE STREAM Sensors (Temp UINT(16), dtemp INT(8), "Zone" UINT(8));\n'
        'SELECT * FROM SENSORS MATCH_RECOGNIZE (PARTITION BY "Zone" '
        'PATTERN (R{2} Hot "HOT") DEFINE r AS DTEMP > 0, hot AS temp > :Lim AND '
        '"TEMP" < :LIM) AS Q1;'
    )
    (q,) = nfa.program.queries
    assert q.name == "Q1" and nfa.program.schema.name == "Sensors"
    assert nfa.program.partition_fields == ("Zone",)
    assert ast.dump(q.pattern) == "seq{rep{2,2}{r},hot,hot}"
    assert sorted(q.predicates) == ["hot", "r"]
    assert P.render(q.predicates["r"]) == "dtemp > 0"
    assert P.render(q.predicates["hot"]) == "(Temp > :Lim) AND (Temp < :Lim)"
    assert list(nfa.program.parameters) == ["Lim"]
    assert not nfa.program.warnings


def test_a_quoted_variable_beside_its_unquoted_spelling_is_another_variable():
    """ "r" is not r: undefined, true for every tuple, and kept apart from r by its quotes."""
    nfa = nfacep.compile_text(
        'CREATE STREAM s (a UINT(8)); QUERY q PATTERN ("r" r) DEFINE r AS a = 1'
    )
    (q,) = nfa.program.queries
    assert ast.dump(q.pattern) == 'seq{"r",r}'
    assert q.predicates['"r"'] is None and q.predicates["r"] is not None
    assert [s.var for s in nfa.states] == ['"r"', "r"]


@pytest.mark.parametrize(
    ("text", "message", "at"),
    [
        (
            "CREATE STREAM s (temp UINT(8), TEMP UINT(8)); QUERY q PATTERN (A)",
            "field 'TEMP' is declared twice in stream 's' (first as temp at 1:18; unquoted "
            "names ignore case)",
            "TEMP",
        ),
        (
            'CREATE STREAM s ("Temp" UINT(8), "temp" UINT(8)); QUERY q PATTERN (A)',
            'field "temp" differs only in case from "Temp" at 1:18',
            '"temp"',
        ),
        (
            'CREATE STREAM s (a UINT(8)); CREATE STREAM "s" (b UINT(8)); QUERY q FROM s '
            "PATTERN (A)",
            'stream "s" differs only in case from s at 1:15',
            '"s"',
        ),
        (
            "CREATE STREAM s (a UINT(8)); QUERY q PATTERN (A) DEFINE A AS a = 1, a AS a = 2",
            "variable 'a' is defined twice (first as A at 1:57; unquoted names ignore case)",
            "a AS a = 2",
        ),
        (
            'CREATE STREAM s (a UINT(8)); QUERY q PATTERN (A) DEFINE "A" AS a = 1, "a" AS a = 2',
            'variable "a" differs only in case from "A" at 1:57',
            '"a" AS',
        ),
        (
            "CREATE STREAM s (a UINT(8)); QUERY Cheat PATTERN (A); QUERY CHEAT PATTERN (A)",
            "a query named 'CHEAT' is already defined (first as Cheat at 1:36",
            "CHEAT",
        ),
        (
            'CREATE STREAM s (a UINT(8)); QUERY q PATTERN (A) DEFINE A AS a > :lim AND a < :"lim"',
            'parameter :"lim" differs only in case from :lim at 1:66',
            ':"lim"',
        ),
        (
            'CREATE STREAM s ("Temp" UINT(8)); QUERY q PATTERN (A) DEFINE A AS temp > 1',
            "unknown field 'temp' in stream 's' (did you mean \"Temp\"? a double-quoted name "
            "keeps its case",
            "temp",
        ),
        (
            'CREATE STREAM s (a UINT(8)); QUERY q FROM "s" PATTERN (A)',
            'unknown stream "s" (did you mean s?',
            '"s"',
        ),
        (
            'CREATE STREAM s (a UINT(8)); QUERY q PATTERN (A) DEFINE A AS "a".a > 1',
            "'\"a\".a' refers to another variable's row",
            '"a".a',
        ),
    ],
)
def test_name_errors(text, message, at):
    with pytest.raises(QueryError) as info:
        nfacep.compile_text(text, "q.sql")
    assert message in info.value.message
    assert text[info.value.column - 1 :].startswith(at), info.value.render()


@pytest.mark.parametrize(
    ("pattern", "defines", "warning", "at"),
    [
        # a quoted name keeps its case: "r" is not r, and is undefined
        ('"r" B', "r AS a = 1, B AS a = 2", "\"r\" of 'q' has no DEFINE", '"r"'),
        ('"r" B', "r AS a = 1, B AS a = 2", "(did you mean r? a double-quoted name", '"r"'),
        ("Rise B", "Rse AS a = 1, B AS a = 2", "(did you mean Rse?)", "Rise"),
    ],
)
def test_undefined_variable_beside_an_unused_define_is_a_warning(pattern, defines, warning, at):
    text = f"CREATE STREAM s (a UINT(8));\nQUERY q PATTERN ({pattern}) DEFINE {defines}"
    nfa = nfacep.compile_text(text, "q.sql")
    found = [w for w in nfa.program.warnings if "has no DEFINE" in w.message]
    assert len(found) == 1 and warning in found[0].message, found
    assert "holds for every tuple" in found[0].message and "never used" in found[0].message
    assert text.splitlines()[1][found[0].column - 1 :].startswith(at)
    (q,) = nfa.program.queries
    undefined = [v for v, p in q.predicates.items() if p is None]
    assert undefined == [at.strip('"')]  # true for every tuple, as in SQL


def test_predicates_are_typed_normalised_and_shared():
    nfa = nfacep.compile_text(
        STREAM
        + """
        QUERY one PATTERN (A B) DEFINE A AS (5 < a) B AS (e != 'y');
        QUERY two PATTERN (C D) DEFINE C AS (a > 5) D AS (d >= 0.1 AND w - a > 3 AND c = TRUE);
    """
    )
    texts = [p.text for p in nfa.predicates]
    assert texts == ["a > 5", "e <> 'y'", "(d >= 0.1) AND (w - a > 3) AND (c = TRUE)"]
    a_gt_5 = nfa.predicates[0].expr
    assert a_gt_5 == P.Cmp(">", P.FieldRef("a", a_gt_5.left.type), P.Const(5, "int"), "int")


def test_prev_is_typed_as_its_field():
    nfa = nfacep.compile_text(
        STREAM + "QUERY q PARTITION a PATTERN (A B C D) DEFINE A AS b > PREV(b) "
        "B AS PREV(B.b, 3) + 1 < b - prev(b, 2) C AS PREV(d, 8) <= d AND PREV(e) = 'y' "
        "D AS PREV(c) OR b < :lo AND PREV(b) >= :lo"
    )
    texts = [p.text for p in nfa.predicates]
    assert texts == [
        "b > PREV(b)",
        "PREV(b, 3) + 1 < b - PREV(b, 2)",
        "(PREV(d, 8) <= d) AND (PREV(e) = 'y')",
        "PREV(c) OR ((b < :lo) AND (PREV(b) >= :lo))",
    ]
    b = nfa.program.schema.field("b").type
    assert nfa.predicates[0].expr == P.Cmp(">", P.FieldRef("b", b), P.Prev("b", b, 1), "int")
    assert nfa.history == {"b": 3, "d": 8, "e": 1, "c": 1}
    assert nfa.program.parameters == {"lo": b}


def test_enum_and_bool_and_constant_folding():
    nfa = nfacep.compile_text(
        STREAM + "QUERY q PATTERN (A B C) DEFINE A AS e IN ('x', 'y') "
        "B AS a NOT BETWEEN 1 AND 3 - 1 C AS 1 + 1 = 2"
    )
    texts = [p.text for p in nfa.predicates]
    assert texts == ["(e = 'x') OR (e = 'y')", "NOT ((a >= 1) AND (a <= 2))"]
    # C AS 1 + 1 = 2 folds to TRUE: no decoder bit, like an undefined variable
    assert nfa.states[2].predicate is None


def test_start_seq_in_both_forms():
    """MEASURES FIRST(seq) AS start_seq (names in any case) marks the query; others do not."""
    nfa = nfacep.compile_text(
        STREAM + "SELECT * FROM s MATCH_RECOGNIZE (MEASURES first(SEQ) AS Start_Seq "
        "PATTERN (A B)) AS q;\nQUERY r MEASURES FIRST(seq) AS start_seq PATTERN (A);\n"
        "QUERY p PATTERN (A);",
        "q.sql",
    )
    assert [q.start_seq for q in nfa.queries] == [True, True, False]
    assert [q.start_seq for q in nfa.program.queries] == [True, True, False]


def test_start_seq_needs_seq_free():
    """FIRST(seq) names the position in the stream: a field named seq would be ambiguous."""
    source = (
        "CREATE STREAM s (seq UINT(8), a UINT(8));\n"
        "QUERY q MEASURES FIRST(seq) AS start_seq PATTERN (A)"
    )
    with pytest.raises(QueryError) as info:
        nfacep.compile_text(source, "q.sql")
    assert "has a field named seq" in str(info.value)
    assert info.value.pos.line == 2 and info.value.pos.column == 24
