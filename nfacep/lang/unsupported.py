"""What the language rejects by name, each with the reason: function calls (and PREV's form),
SQL words it does not have, SQL after MATCH_RECOGNIZE ( … ), clauses out of order.

Both the parser (a call inside a clause it cannot parse, such as ``COUNT(A.*)``, a word where
its error is) and the checker (a call it parsed) reject these; the reasons are written once,
here.
"""

from __future__ import annotations

from ..errors import QueryError, SourcePos
from ..limits import MAX_PREV

__all__ = [
    "CLAUSE_ORDER",
    "CLAUSE_WORDS",
    "SUBQUERY",
    "WORDS",
    "call_error",
    "clause_order_error",
    "tail_error",
    "word_error",
]

_NAVIGATION = {"NEXT", "FIRST", "LAST"}
_AGGREGATES = {"SUM", "AVG", "COUNT", "MIN", "MAX"}
_MATCH_FUNCTIONS = {"CLASSIFIER", "MATCH_NUMBER", "RUNNING", "FINAL"}


def call_error(name: str, pos: SourcePos | None) -> QueryError:
    """The error for a call of function ``name`` (upper case): none is supported, and the
    ones SQL has are rejected with the reason; PREV, the one supported, is named with its form."""
    if name == "PREV":
        return QueryError(
            f"PREV is written PREV(field) or PREV(field, k), k an integer constant from 1 to "
            f"{MAX_PREV}, the field qualified with the variable being defined or not at all",
            pos,
        )
    if name in _NAVIGATION:
        why = (
            "navigates to another row of the match (a logical offset); a condition reads the "
            "current tuple and, with PREV(field, k), the k-th tuple before it in its partition"
        )
    elif name in _AGGREGATES:
        why = (
            "is an aggregate over the rows of a match; the NFA keeps one bit per state, "
            "not running values"
        )
    elif name in _MATCH_FUNCTIONS:
        why = "needs to know how a match was bound, which the NFA does not keep"
    else:
        why = (
            "is not a known function; conditions use comparisons, +, -, * by a constant, "
            "AND, OR, NOT and PREV"
        )
    return QueryError(f"{name}() is not supported: it {why}", pos)


_STRING_MATCHING = (
    "string matching is not supported: conditions compare fields (UINT, INT, "
    "BOOL, ENUM, FLOAT32, IPV4, TIMESTAMP) with constants; test an ENUM with = or "
    "IN ('a', 'b'), an IPV4 with = or IN '10.0.0.0/8'"
)
_CASE = (
    "CASE is not supported: a condition is a Boolean expression; write "
    "(c1 AND x) OR (NOT c1 AND y) for CASE WHEN c1 THEN x ELSE y END"
)
_RUNNING_FINAL = (
    "is not supported: it chooses whether a navigation or aggregate over a match's rows "
    "sees the rows so far or all of them, and conditions have no such aggregates; "
    "leave the word out"
)


def measure_semantics_error(word: str, pos: SourcePos | None) -> QueryError:
    """The error for RUNNING or FINAL (``word``, upper case) before a measure."""
    return QueryError(
        f"{word} is not supported: a measure is read once, at the match's reported row (ONE "
        "ROW PER MATCH); write the measure without it",
        pos,
    )


#: SQL words the language does not have, with what to do instead: the parser names them when
#: they are where its error is (the word itself, or a word followed by an operand).
WORDS = {
    "LIKE": _STRING_MATCHING,
    "ILIKE": _STRING_MATCHING,
    "SIMILAR": _STRING_MATCHING,
    "REGEXP": _STRING_MATCHING,
    "RLIKE": _STRING_MATCHING,
    "GLOB": _STRING_MATCHING,
    "IS": (
        "IS (NULL, TRUE, …) is not supported: fields have no NULLs (PREV before a "
        "partition's k-th tuple is NULL, and a comparison with it is unknown, so it satisfies "
        "nothing by itself); a BOOL field is a condition by itself, or compare it with = TRUE"
    ),
    "CASE": _CASE,
    "WHEN": _CASE,
    "CAST": "CAST is not supported: constants are converted to the field's type",
    "RUNNING": f"RUNNING {_RUNNING_FINAL}",
    "FINAL": f"FINAL {_RUNNING_FINAL}",
    "INTERVAL": (
        "INTERVAL in a condition is not supported: conditions compare a tuple's fields with "
        "constants; a match's time is bounded by WITHIN INTERVAL 'n' UNIT after PATTERN ( … )"
    ),
    "SYMMETRIC": "BETWEEN SYMMETRIC is not supported: write BETWEEN low AND high",
    "ASYMMETRIC": "BETWEEN ASYMMETRIC is not supported: write BETWEEN low AND high",
}


def word_error(word: str, pos: SourcePos | None) -> QueryError | None:
    """The error for a SQL word the language does not have (upper case), or None."""
    why = WORDS.get(word)
    return None if why is None else QueryError(why, pos)


SUBQUERY = (
    "a subquery (SELECT inside a query) is not supported: FROM names a declared stream, "
    "and a condition sees the current tuple's fields and constants"
)

#: What may follow SELECT … MATCH_RECOGNIZE ( … ) [AS name] in SQL, but not here.
_AFTER_MATCH_RECOGNIZE = {
    "WHERE": "a WHERE clause",
    "GROUP": "GROUP BY",
    "HAVING": "HAVING",
    "ORDER": "ORDER BY after MATCH_RECOGNIZE ( … )",
    "LIMIT": "LIMIT",
    "FETCH": "FETCH",
    "OFFSET": "OFFSET",
    "UNION": "UNION",
    "INTERSECT": "INTERSECT",
    "EXCEPT": "EXCEPT",
    "JOIN": "a join",
    "WINDOW": "a WINDOW clause",
}


def tail_error(word: str, pos: SourcePos | None) -> QueryError | None:
    """The error for SQL after a query's MATCH_RECOGNIZE ( … ) [AS name] (``word``, upper
    case), or None."""
    what = _AFTER_MATCH_RECOGNIZE.get(word)
    if what is None:
        return None
    inside = (
        " (ORDER BY goes inside the parentheses, after PARTITION BY)" if word == "ORDER" else ""
    )
    return QueryError(
        f"{what} is not supported: a query is SELECT * FROM stream MATCH_RECOGNIZE ( … ) "
        f"[AS name], and the engine reports every match it finds{inside}",
        pos,
    )


#: Each form's clauses in the order the form takes them (the SQL form's is the standard's).
CLAUSE_ORDER = {
    "sql": (
        "PARTITION BY",
        "ORDER BY",
        "MEASURES",
        "ONE ROW PER MATCH",
        "AFTER MATCH",
        "PATTERN ( … )",
        "WITHIN",
        "SUBSET",
        "DEFINE",
    ),
    "concise": (
        "PARTITION [BY]",
        "ORDER BY",
        "MEASURES",
        "AFTER MATCH",
        "PATTERN ( … )",
        "WITHIN",
        "DEFINE",
    ),
}
#: The keyword that starts each clause, with the clause's place in the SQL order.
CLAUSE_WORDS = {
    "PARTITION": 0,
    "ORDER": 1,
    "MEASURES": 2,
    "ONE": 3,
    "ALL": 3,
    "AFTER": 4,
    "PATTERN": 5,
    "WITHIN": 6,
    "SUBSET": 7,
    "DEFINE": 8,
}
_SQL_ONLY = {3: "ONE ROW PER MATCH", 7: "SUBSET"}
#: why ALL ROWS PER MATCH is refused, in either form
ALL_ROWS_WHY = (
    "the engine reports one record where each match ends; it does not keep the rows of a match"
)


def clause_order_error(
    word: str, form: str, seen: list[str], pos: SourcePos | None
) -> QueryError | None:
    """The error for clause keyword ``word`` (upper case) where the parser cannot take it,
    after the clause keywords ``seen`` of its query (in order), or None when it is not out of
    order."""
    place = CLAUSE_WORDS[word]
    names = dict(zip((0, 1, 2, 3, 4, 5, 6, 7, 8), CLAUSE_ORDER["sql"], strict=True))
    if word == "ALL":  # refused in either form, wherever it stands
        return QueryError(f"ALL ROWS PER MATCH is not supported: {ALL_ROWS_WHY}", pos)
    if form == "concise":
        names[0] = "PARTITION [BY]"
        if place in _SQL_ONLY:
            return QueryError(
                f"{_SQL_ONLY[place]} belongs to the SQL form (SELECT * FROM stream "
                "MATCH_RECOGNIZE ( … )), not to a QUERY",
                pos,
            )
    name = names[place]
    where = "MATCH_RECOGNIZE ( … )" if form == "sql" else "a QUERY"
    order = ", ".join(CLAUSE_ORDER[form])
    places = [CLAUSE_WORDS[w] for w in seen]
    if place in places and place != 3:
        return QueryError(f"{name} is given twice: {where} takes each clause once", pos)
    later = [p for p in places if p > place]
    if not later:
        if place > 5 and 5 not in places:  # DEFINE before PATTERN
            return QueryError(
                f"{name} is out of place: it comes after PATTERN ( … ), which every query "
                f"has; {where} takes its clauses in the order {order}",
                pos,
            )
        return None
    after = " (right after PATTERN ( … ))" if word == "WITHIN" else ""
    return QueryError(
        f"{name} is out of place: it goes before {names[min(later)]}{after}; {where} takes "
        f"its clauses in the order {order}",
        pos,
    )
