"""Parser: both query forms, the paper's listing verbatim, every operator, syntax errors."""

import pytest

from nfacep.errors import QueryError
from nfacep.lang import ast
from nfacep.lang.syntax import parse
from nfacep.limits import MAX_NESTING

STREAM = "CREATE STREAM s (a UINT(8), b INT(8), c BOOL, d FLOAT32, e ENUM('x', 'y'));\n"

PAPER = """\
PARTITION runner
PATTERN ( A NOTB* C | A NOTC* D | A NOTD* E )
DEFINE
  A    AS (checkpoint = 'Staten Island')
  NOTB AS (checkpoint != 'Brooklyn')
  C    AS (checkpoint = 'Queens')
  NOTC AS (checkpoint != 'Queens')
  D    AS (checkpoint = 'Bronx')
  NOTD AS (checkpoint != 'Bronx')
  E    AS (checkpoint = 'Manhattan')
"""


def pattern_of(text: str) -> str:
    f = parse(STREAM + f"QUERY q PATTERN ({text})")
    return ast.dump(f.queries[0].pattern)


# (pattern text, expected dump), in the spirit of RE2's {"a*", "star{lit{a}}"} tables
PATTERNS = [
    ("A", "A"),
    ("A B C", "seq{A,B,C}"),
    ("A | B", "alt{A,B}"),
    ("A B | C", "alt{seq{A,B},C}"),
    ("A*", "star{A}"),
    ("A+", "plus{A}"),
    ("A?", "opt{A}"),
    ("A*?", "star_lazy{A}"),
    ("A+?", "plus_lazy{A}"),
    ("A??", "opt_lazy{A}"),
    ("A{3}", "rep{3,3}{A}"),
    ("A{2,}", "rep{2,}{A}"),
    ("A{2,5}", "rep{2,5}{A}"),
    ("A{,4}", "rep{0,4}{A}"),
    ("A{ 1 , 2 }?", "rep{1,2}_lazy{A}"),
    ("(A B)*", "star{seq{A,B}}"),
    ("A (B | C)+ D", "seq{A,plus{alt{B,C}},D}"),
    (".", "any"),
    ("A . B", "seq{A,any,B}"),
    ("PERMUTE(A, B, C)", "permute{A,B,C}"),
    ("permute(A B, C*)", "permute{seq{A,B},star{C}}"),
    ("()", "empty"),
    ("A ()", "seq{A,empty}"),
    ("A B* C | D", "alt{seq{A,star{B},C},D}"),
    ("(A | B) C", "seq{alt{A,B},C}"),
    ("A $", "seq{A,anchor{$}}"),
    ("^ A", "seq{anchor{^},A}"),
]


@pytest.mark.parametrize(("text", "expected"), PATTERNS)
def test_pattern_dump(text, expected):
    assert pattern_of(text) == expected


EXPRESSIONS = [
    ("a = 1", "(= a 1)"),
    ("a != 1", "(<> a 1)"),
    ("a <> 1", "(<> a 1)"),
    ("a < 1 AND b >= -2", "(and (< a 1) (>= b (- 2)))"),
    ("a <= 1 OR b > 2 AND c", "(or (<= a 1) (and (> b 2) c))"),
    ("NOT c", "(not c)"),
    ("NOT (a = 1 OR c)", "(not (or (= a 1) c))"),
    ("a BETWEEN 1 AND 5", "(between a 1 5)"),
    ("a NOT BETWEEN 1 AND 5 AND c", "(and (not-between a 1 5) c)"),
    ("a IN (1, 2, 3)", "(in a 1 2 3)"),
    ("e NOT IN ('x')", "(not-in e 'x')"),
    ("a + 1 > b - 2", "(> (+ a 1) (- b 2))"),
    ("a - b + 3 = 0", "(= (+ (- a b) 3) 0)"),
    ("d > 2.5", "(> d 2.5)"),
    ("d < 1e3", "(< d 1e3)"),
    ("a = 0x1F", "(= a 31)"),
    ("e = 'it''s'", "(= e 'it''s')"),
    ("c = TRUE", "(= c TRUE)"),
    ("c = false", "(= c FALSE)"),
    ("A.a = 1", "(= A.a 1)"),
    ("PREV(a) > 1", "(> PREV(a) 1)"),
    ("count(*) > 1", "(> COUNT(*) 1)"),
]


@pytest.mark.parametrize(("text", "expected"), EXPRESSIONS)
def test_expression_dump(text, expected):
    f = parse(STREAM + f"QUERY q PATTERN (A) DEFINE A AS {text}")
    assert ast.dump(f.queries[0].defines[0].expr) == expected


def test_paper_listing_verbatim():
    text = (
        "CREATE STREAM marathon (time UINT(32), checkpoint ENUM('Staten Island', "
        "'Brooklyn', 'Queens', 'Bronx', 'Manhattan'), runner UINT(16), speed FLOAT32);\n" + PAPER
    )
    f = parse(text)
    (q,) = f.queries
    assert q.name is None and q.stream is None and q.form == "concise"
    assert [c.name for c in q.partition] == ["runner"]
    assert ast.dump(q.pattern) == (
        "alt{seq{A,star{NOTB},C},seq{A,star{NOTC},D},seq{A,star{NOTD},E}}"
    )
    assert [d.name for d in q.defines] == ["A", "NOTB", "C", "NOTC", "D", "NOTD", "E"]
    assert ast.dump(q.defines[1].expr) == "(<> checkpoint 'Brooklyn')"


def test_concise_head_and_sql_form_give_the_same_query():
    concise = parse(
        STREAM + "QUERY cheat FROM s PARTITION a ORDER BY b AFTER MATCH SKIP PAST "
        "LAST ROW PATTERN (A B*) DEFINE A AS (a = 1) B AS (c)"
    )
    sql = parse(
        STREAM + "SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY a ORDER BY b AFTER "
        "MATCH SKIP PAST LAST ROW PATTERN (A B*) DEFINE A AS a = 1, B AS c) AS cheat"
    )
    (c,), (s,) = concise.queries, sql.queries
    assert (c.name, c.stream, c.partition, c.order, c.skip_past_last_row, c.pattern, c.defines) == (
        s.name,
        s.stream,
        s.partition,
        s.order,
        s.skip_past_last_row,
        s.pattern,
        s.defines,
    )
    assert (c.form, s.form) == ("concise", "sql")


def test_keywords_are_case_insensitive_and_fields_may_look_like_keywords():
    f = parse(
        "create stream s (last UINT(4), match BOOL, time UINT(8));\n"
        "select * from s match_recognize (partition by last pattern (a b) "
        "define a as match, b as last > 2) as q1"
    )
    (q,) = f.queries
    assert ast.dump(q.defines[1].expr) == "(> last 2)"


def test_several_statements_and_comments():
    f = parse(
        "-- header\n" + STREAM + "QUERY one PATTERN (A); /* block */ QUERY two PATTERN (B);;\n"
    )
    assert [q.name for q in f.queries] == ["one", "two"]


def test_unsupported_clauses_are_kept_for_the_checker():
    f = parse(
        STREAM + "SELECT * FROM s MATCH_RECOGNIZE (MEASURES A.a AS x ALL ROWS PER MATCH "
        "AFTER MATCH SKIP TO NEXT ROW PATTERN (A) SUBSET U = (A)) AS q"
    )
    features = [u.feature for u in f.queries[0].unsupported]
    # MEASURES items are kept as written; the checker judges them (tests/lang/test_measures.py)
    assert [(m.alias, m.expr) for m in f.queries[0].measures] == [
        ("x", ast.Column("a", qualifier="A"))
    ]
    assert features == [
        "ALL ROWS PER MATCH",
        "AFTER MATCH SKIP TO NEXT ROW",
        "SUBSET",
    ]


SYNTAX_ERRORS = [
    # (text after STREAM, message fragment, line, column)
    ("QUERY q PATTERN (A B", "unexpected end of file", 2, 21),
    ("QUERY q PATTERN (A{3,1})", "maximum 1 is below the minimum 3", 2, 19),
    ("QUERY q PATTERN (A{})", "needs a count", 2, 19),
    ("QUERY q PATTERN (A) DEFINE A AS (a = )", "unexpected ')'", 2, 38),
    ("QUERY q PATTERN (A) DEFINE A AS a & 2", "'&' is not an operator", 2, 35),
    ("QUERY q PATTERN (A) DEFINE A AS a = 1 QUERY r PATTERN (B)", "';' missing", 2, 39),
    ("CREATE STREAM t (x UINT(0))", "between 1 and 64", 2, 25),
    ("CREATE STREAM t (x INT(65))", "between 1 and 64", 2, 24),
    ("CREATE STREAM t (x ENUM('a', 'a'))", "listed twice", 2, 30),
    ("QUERY q ORDER BY a DESC PATTERN (A)", "DESC is not supported", 2, 20),
    ("QUERY q PATTERN (A) DEFINE A AS 'open", "unexpected character", 2, 33),
    # double quotes around what is no name: a label written as Flink's docs never do, or a
    # name with a space; one left open; a letter beyond ASCII
    ('QUERY q PATTERN (A) DEFINE A AS a = "Queens Park"', "takes single quotes", 2, 37),
    ('CREATE STREAM t ("x y" UINT(8))', '"x y" is not a name', 2, 18),
    ('CREATE STREAM t ("x UINT(8))', "not closed on its line", 2, 18),
    ("QUERY q PATTERN (Ä)", "a name holds the letters A-Z and a-z", 2, 18),
]


@pytest.mark.parametrize(("text", "message", "line", "column"), SYNTAX_ERRORS)
def test_syntax_errors_carry_position(text, message, line, column):
    with pytest.raises(QueryError) as info:
        parse(STREAM + text, "q.sql")
    err = info.value
    assert message in err.message
    assert (err.line, err.column) == (line, column)
    rendered = err.render().splitlines()
    assert rendered[0].startswith(f"q.sql:{line}:{column}: ")
    assert rendered[1].strip() == text.strip()
    assert rendered[2].index("^") - 4 == column - 1


def test_nesting_limit():
    deep = "(" * (MAX_NESTING + 1) + "A" + ")" * (MAX_NESTING + 1)
    with pytest.raises(QueryError, match="nesting deeper"):
        parse(STREAM + f"QUERY q PATTERN {deep}")
    ok = "(" * (MAX_NESTING - 1) + "A" + ")" * (MAX_NESTING - 1)
    assert ast.dump(parse(STREAM + f"QUERY q PATTERN {ok}").queries[0].pattern) == "A"


def test_after_match_default_depends_on_the_form():
    """Without AFTER MATCH, the SQL form is SKIP PAST LAST ROW (SQL's default), the paper's
    form every end; AFTER MATCH REPORT EVERY END (any case) asks for every end in both."""
    f = parse(
        STREAM + "SELECT * FROM s MATCH_RECOGNIZE (PATTERN (A)) AS q1;\n"
        "SELECT * FROM s MATCH_RECOGNIZE (after match report every end PATTERN (A)) AS q2;\n"
        "QUERY q3 PATTERN (A);\n"
        "QUERY q4 AFTER MATCH REPORT EVERY END PATTERN (A);\n"
        "QUERY q5 AFTER MATCH SKIP PAST LAST ROW PATTERN (A);\n"
    )
    assert [q.skip_past_last_row for q in f.queries] == [True, False, False, False, True]


def test_quoted_names_keep_their_case_and_may_be_keywords():
    f = parse(
        'CREATE STREAM "S" ("time" UINT(8), Temp UINT(8));\n'
        'QUERY "Q" FROM s PATTERN ("and" r) DEFINE "and" AS "time" > :"Lim", R AS "R".temp > 1'
    )
    (s,), (q,) = f.streams, f.queries
    assert (s.name, s.quoted) == ("S", True)
    assert [(d.name, d.quoted) for d in s.fields] == [("time", True), ("Temp", False)]
    assert (q.name, q.name_quoted, q.stream, q.stream_quoted) == ("Q", True, "s", False)
    assert ast.dump(q.pattern) == 'seq{"and",r}'
    assert [(d.name, d.quoted) for d in q.defines] == [("and", True), ("R", False)]
    assert ast.dump(q.defines[0].expr) == '(> "time" :"Lim")'
    assert ast.dump(q.defines[1].expr) == '(> "R".temp 1)'
    assert ast.key("temp") == ast.key("TEMP") == ast.key("TEMP", quoted=True) == "TEMP"
    assert ast.key("temp", quoted=True) == "temp"
