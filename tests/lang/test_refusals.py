"""Every refusal names its construct and says why (docs/language.md, "What is rejected, and
why"): the constructs of Flink's and Oracle's MATCH_RECOGNIZE documentation and of SQL that the
language does not have, each through ``nfacep check``: ``file:line:col`` at the construct, a
message naming it, a reason, exit 2, never a bare "unexpected …".

In each query below, ``§`` marks where the error must point; it is removed before checking.
"""

from __future__ import annotations

import re

import pytest

from nfacep.cli import main
from nfacep.lang.unsupported import WORDS

STREAM = (
    "CREATE STREAM ticker (t UINT(32), symbol UINT(8), price UINT(16), ok BOOL,\n"
    "    city ENUM('Brooklyn', 'Queens'));\n"
)


def sql(body: str, define: str = "A AS price > 1") -> str:
    return STREAM + f"SELECT * FROM ticker MATCH_RECOGNIZE (\n{body}\nDEFINE {define}\n) AS m"


def concise(body: str) -> str:
    return STREAM + f"QUERY q {body}"


#: (construct, query with § at the error, words the message must hold)
CASES = [
    ("CASE", sql("PATTERN (A)", "A AS §CASE WHEN price > 1 THEN TRUE ELSE FALSE END"), ["CASE"]),
    ("CASE in parentheses", sql("PATTERN (A)", "A AS (§CASE WHEN ok THEN ok END)"), ["CASE"]),
    ("RUNNING", sql("PATTERN (A)", "A AS §RUNNING price > 1"), ["RUNNING"]),
    ("RUNNING LAST", sql("PATTERN (A)", "A AS §RUNNING LAST(A.price) > 1"), ["RUNNING"]),
    ("FINAL", sql("PATTERN (A)", "A AS §FINAL LAST(price) > 1"), ["FINAL"]),
    (
        "RUNNING in MEASURES",
        sql("MEASURES §RUNNING LAST(price) AS p PATTERN (A)"),
        ["RUNNING", "read once"],
    ),
    ("FINAL in MEASURES", sql("MEASURES §FINAL COUNT(*) AS n PATTERN (A)"), ["FINAL"]),
    ("CAST in MEASURES", sql("MEASURES §CAST(LAST(price) AS INT) AS p PATTERN (A)"), ["CAST"]),
    (
        "CASE in MEASURES",
        sql("MEASURES §CASE WHEN LAST(ok) THEN 1 END AS p PATTERN (A)"),
        ["CASE is not supported"],
    ),
    (
        "WITHIN after DEFINE",
        sql("ORDER BY t PATTERN (A)", "A AS price > 1\n§WITHIN INTERVAL '1' HOUR"),
        ["WITHIN", "goes before DEFINE", "right after PATTERN"],
    ),
    (
        "ORDER BY before PARTITION BY",
        sql("ORDER BY t §PARTITION BY symbol PATTERN (A)"),
        ["PARTITION BY", "goes before ORDER BY", "PARTITION BY, ORDER BY"],
    ),
    (
        "ORDER BY before PARTITION, paper form",
        concise("ORDER BY t §PARTITION symbol PATTERN (A)"),
        ["PARTITION [BY]", "goes before ORDER BY"],
    ),
    ("DEFINE before PATTERN", sql("§DEFINE B AS ok PATTERN (A)"), ["DEFINE", "after PATTERN"]),
    (
        "MEASURES after PATTERN",
        sql("PATTERN (A) §MEASURES FIRST(seq) AS start_seq"),
        ["MEASURES", "goes before PATTERN"],
    ),
    (
        "AFTER MATCH after PATTERN",
        sql("PATTERN (A) §AFTER MATCH SKIP PAST LAST ROW"),
        ["AFTER MATCH", "goes before PATTERN"],
    ),
    (
        "ONE ROW PER MATCH after AFTER MATCH",
        sql("AFTER MATCH SKIP PAST LAST ROW §ONE ROW PER MATCH PATTERN (A)"),
        ["ONE ROW PER MATCH", "goes before AFTER MATCH"],
    ),
    ("PATTERN twice", sql("PATTERN (A) §PATTERN (A)"), ["PATTERN", "twice"]),
    (
        "a label in double quotes",
        sql("PATTERN (A)", 'A AS city = §"Brooklyn"'),
        ["did you mean the label 'Brooklyn'", "single quotes"],
    ),
    (
        "labels in double quotes in IN",
        sql("PATTERN (A)", 'A AS city IN (§"Queens", "Brooklyn")'),
        ["did you mean the label 'Queens'"],
    ),
    ("a string in double quotes", sql("PATTERN (A)", 'A AS price = §"high"'), ["single quotes"]),
    ("IS NULL", sql("PATTERN (A)", "A AS price §IS NULL"), ["IS (NULL", "no NULLs"]),
    ("IS NOT NULL", sql("PATTERN (A)", "A AS (price §IS NOT NULL)"), ["IS (NULL", "no NULLs"]),
    ("IS TRUE", sql("PATTERN (A)", "A AS ok §IS TRUE"), ["IS (NULL, TRUE", "= TRUE"]),
    ("NULL", sql("PATTERN (A)", "A AS price = §NULL"), ["NULL is not supported"]),
    ("a parameter with a space", sql("PATTERN (A)", "A AS price > §: hot"), ["':name'"]),
    ("==", sql("PATTERN (A)", "A AS price §== 1"), ["'==' is not a comparison", "write ="]),
    ("=>", sql("PATTERN (A)", "A AS price §=> 1"), ["'=>' is not a comparison", "write >="]),
    ("!", sql("PATTERN (A)", "A AS §!(price > 1)"), ["'!' is not an operator", "write NOT"]),
    ("≥", sql("PATTERN (A)", "A AS price §≥ 1"), ["'≥' is not an operator", "write >="]),
    ("a parameter with a space", sql("PATTERN (A)", 'A AS price > :§"h t"'), ['"h t" is not']),
    ("LIKE", sql("PATTERN (A)", "A AS city §LIKE 'B%'"), ["string matching", "IN ("]),
    ("NOT LIKE", sql("PATTERN (A)", "A AS city NOT §LIKE 'B%'"), ["string matching"]),
    ("SIMILAR TO", sql("PATTERN (A)", "A AS city §SIMILAR TO 'B%'"), ["string matching"]),
    ("CAST", sql("PATTERN (A)", "A AS §CAST(price AS INT) > 1"), ["CAST"]),
    (
        "BETWEEN SYMMETRIC",
        sql("PATTERN (A)", "A AS price BETWEEN §SYMMETRIC 5 AND 1"),
        ["BETWEEN SYMMETRIC"],
    ),
    (
        "a subquery in a condition",
        sql("PATTERN (A)", "A AS price > (§SELECT MAX(price) FROM ticker)"),
        ["subquery"],
    ),
    ("a subquery in IN", sql("PATTERN (A)", "A AS price IN (§SELECT 1)"), ["subquery"]),
    (
        "a subquery in FROM",
        STREAM + "SELECT * FROM §(SELECT * FROM ticker) MATCH_RECOGNIZE (PATTERN (A)) AS m",
        ["subquery"],
    ),
    ("ALL ROWS PER MATCH", sql("§ALL ROWS PER MATCH PATTERN (A)"), ["ALL ROWS PER MATCH"]),
    (
        "ALL ROWS PER MATCH in the paper's form",
        concise("PARTITION symbol §ALL ROWS PER MATCH PATTERN (A)"),
        ["ALL ROWS PER MATCH is not supported", "rows of a match"],
    ),
    (
        "ALL ROWS PER MATCH out of place",
        sql("AFTER MATCH SKIP PAST LAST ROW §ALL ROWS PER MATCH PATTERN (A)"),
        ["ALL ROWS PER MATCH is not supported"],
    ),
    (
        "ALL ROWS PER MATCH WITH UNMATCHED ROWS",
        sql("§ALL ROWS PER MATCH WITH UNMATCHED ROWS PATTERN (A)"),
        ["ALL ROWS PER MATCH"],
    ),
    ("NEXT", sql("PATTERN (A)", "A AS §NEXT(price) > 1"), ["NEXT()", "another row"]),
    ("$", sql("PATTERN (A §$)"), ["'$' anchor", "no end", "may end at any tuple"]),
    ("^", sql("PATTERN (§^ A)"), ["'^' anchor", "no start", "may start at any tuple"]),
    ("{- -}", sql("PATTERN (A §{- A -})"), ["exclusion"]),
    ("a quantifier on a quantifier", sql("PATTERN (A{2}§{3})"), ["{3} after", "(…{2}){3}"]),
    ("a possessive quantifier", sql("PATTERN (A*§+ B)"), ["+ after the quantifier *"]),
    ("a count in hex", sql("PATTERN (A§{0x10})"), ["decimal integers"]),
    ("CLASSIFIER()", sql("PATTERN (A)", "A AS §CLASSIFIER() = 'A'"), ["CLASSIFIER()"]),
    ("MATCH_NUMBER() in DEFINE", sql("PATTERN (A)", "A AS §MATCH_NUMBER() > 1"), ["MATCH_NUMBER"]),
    ("MATCH_ROWTIME()", sql("PATTERN (A)", "A AS §MATCH_ROWTIME() > 1"), ["MATCH_ROWTIME()"]),
    ("SUBSET", sql("PATTERN (A B) §SUBSET U = (A, B)"), ["SUBSET"]),
    (
        "a measure without AS",
        sql("MEASURES LAST(price) §last_price PATTERN (A)"),
        ["named with AS", "AS last_price"],
    ),
    ("a measure without a name", sql("MEASURES COUNT(*) §PATTERN (A)"), ["AS name"]),
    ("a measure named by a string", sql("MEASURES COUNT(*) AS §'n' PATTERN (A)"), ["AS n"]),
    (
        "a measure named with a space",
        sql('MEASURES COUNT(*) AS §"n m" PATTERN (A)'),
        ['"n m" is not a name'],
    ),
    ("SUM", sql("PATTERN (A)", "A AS §SUM(A.price) > 1"), ["SUM()", "aggregate"]),
    ("AVG", sql("PATTERN (A+)", "A AS §AVG(A.price) < 15"), ["AVG()", "aggregate"]),
    ("COUNT(A.*)", sql("PATTERN (A)", "A AS §COUNT(A.*) > 1"), ["COUNT()"]),
    ("another variable's row", sql("PATTERN (A B)", "B AS §A.price < 10"), ["another variable"]),
    ("SKIP TO NEXT ROW", sql("AFTER MATCH SKIP §TO NEXT ROW PATTERN (A)"), ["SKIP TO NEXT ROW"]),
    ("SKIP TO LAST var", sql("AFTER MATCH SKIP §TO LAST A PATTERN (A)"), ["SKIP TO LAST A"]),
    ("SKIP TO FIRST var", sql("AFTER MATCH SKIP §TO FIRST A PATTERN (A)"), ["SKIP TO FIRST A"]),
    ("ORDER BY DESC", sql("ORDER BY t §DESC PATTERN (A)"), ["DESC"]),
    ("/", sql("PATTERN (A)", "A AS price §/ 2 > 1"), ["'/' is not supported", "not exact"]),
    ("%", sql("PATTERN (A)", "A AS price §% 2 = 1"), ["'%' is not supported", "not exact"]),
    ("||", sql("PATTERN (A)", "A AS city §|| 'x' = 'a'"), ["'|'", "not an operator"]),
    (
        "a select list",
        STREAM + "SELECT §symbol FROM ticker MATCH_RECOGNIZE (PATTERN (A)) AS m",
        ["SELECT list", "SELECT *"],
    ),
    (
        "SELECT T.*",
        STREAM + "SELECT §T.* FROM ticker MATCH_RECOGNIZE (PATTERN (A)) AS T",
        ["SELECT list", "SELECT *"],
    ),
    ("WHERE", sql("PATTERN (A)") + " §WHERE price > 1", ["WHERE", "SELECT * FROM stream"]),
    ("ORDER BY after", sql("PATTERN (A)") + " §ORDER BY t", ["ORDER BY", "inside"]),
    ("GROUP BY", sql("PATTERN (A)") + " §GROUP BY symbol", ["GROUP BY"]),
    (
        "ORDER BY after, the query unnamed",
        STREAM + "SELECT * FROM ticker MATCH_RECOGNIZE (PATTERN (A)) §ORDER BY t",
        ["ORDER BY", "inside"],
    ),
    (
        "WHERE, the query unnamed",
        STREAM + "SELECT * FROM ticker MATCH_RECOGNIZE (PATTERN (A)) §WHERE price > 1",
        ["WHERE", "SELECT * FROM stream"],
    ),
    (
        "INTERVAL in a condition",
        sql("PATTERN (A)", "A AS t < 5 + §INTERVAL '10' MINUTE"),
        ["INTERVAL", "WITHIN INTERVAL"],
    ),
    (
        "a join",
        STREAM + "SELECT * FROM ticker §JOIN x MATCH_RECOGNIZE (PATTERN (A)) AS m",
        ["a join"],
    ),
    ("ORDER BY two fields", sql("ORDER BY t, §symbol PATTERN (A)"), ["ORDER BY more than one"]),
    (
        "an interval of two units",
        sql("ORDER BY t PATTERN (A) WITHIN INTERVAL '1:30' HOUR §TO MINUTE"),
        ["range of units", "INTERVAL '90' MINUTE"],
    ),
    (
        "an interval unit's precision",
        sql("ORDER BY t PATTERN (A) WITHIN INTERVAL '90' SECOND§(3)"),
        ["precision", "INTERVAL '90' SECOND)"],
    ),
    (
        "an interval's number unquoted",
        sql("ORDER BY t PATTERN (A) WITHIN INTERVAL §5 MINUTE"),
        ["quoted", "INTERVAL '5' UNIT"],
    ),
    (
        "a window in plural units",
        sql("ORDER BY t PATTERN (A) WITHIN 5 §SECONDS"),
        ["WITHIN INTERVAL '5' SECOND "],
    ),
    ("PATTERN without parentheses", sql("PATTERN §A B"), ["parentheses"]),
    ("CREATE TABLE", "§CREATE TABLE t (x INT(8))", ["CREATE TABLE"]),
    ("INT without width", "CREATE STREAM s (x §INT)", ["INT needs a width"]),
    (
        "Flink's TIMESTAMP(3)",
        "CREATE STREAM s (rowtime TIMESTAMP(§3))",
        ["TIMESTAMP(3)", "TIMESTAMP(MILLISECOND)"],
    ),
    ("TIMESTAMP without its unit", "CREATE STREAM s (t §TIMESTAMP)", ["needs its unit"]),
    ("TIMESTAMP_LTZ", "CREATE STREAM s (t §TIMESTAMP_LTZ(3))", ["unknown type 'TIMESTAMP_LTZ'"]),
    ("NOT NULL", "CREATE STREAM s (t UINT(8) §NOT NULL)", ["NOT NULL is not supported"]),
    ("PRIMARY KEY", "CREATE STREAM s (t UINT(8) §PRIMARY KEY)", ["PRIMARY KEY"]),
    (
        "WATERMARK",
        "CREATE STREAM s (t UINT(8), §WATERMARK FOR t AS t - INTERVAL '5' SECOND)",
        ["WATERMARK is not supported", "ORDER BY"],
    ),
]


def _place(marked: str) -> tuple[str, int, int]:
    """The query without its §, and the line and column where § was."""
    assert marked.count("§") == 1, marked
    at = marked.index("§")
    line = marked.count("\n", 0, at) + 1
    column = at - (marked.rfind("\n", 0, at) + 1) + 1
    return marked.replace("§", ""), line, column


@pytest.mark.parametrize(("construct", "marked", "words"), CASES, ids=[c[0] for c in CASES])
def test_each_refusal_names_the_construct_at_its_place(tmp_path, capsys, construct, marked, words):
    text, line, column = _place(marked)
    path = tmp_path / "port.sql"
    path.write_text(text)
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    first = err.splitlines()[0]
    head = f"{path}:{line}:{column}: "
    assert first.startswith(head), (construct, first)
    message = first[len(head) :]
    assert not message.startswith("unexpected"), (construct, message)
    for word in words:
        assert word in message, (construct, word, message)
    # and why: every refusal says more than its name
    assert re.search(r"(:|;| because | needs | goes | comes | belongs | twice)", message)


@pytest.mark.parametrize("word", sorted(WORDS))
def test_every_sql_word_the_language_lacks_is_named(tmp_path, capsys, word):
    """Each entry of nfacep.lang.unsupported.WORDS is reachable: the word where a condition
    goes on, in any case, is reported at its place with its reason."""
    text, line, column = _place(sql("PATTERN (A)", f"A AS price §{word.lower()} 'x'"))
    path = tmp_path / "port.sql"
    path.write_text(text)
    assert main(["check", str(path)]) == 2
    first = capsys.readouterr().err.splitlines()[0]
    assert first == f"{path}:{line}:{column}: {WORDS[word]}"
