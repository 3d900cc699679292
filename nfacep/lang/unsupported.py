"""Function calls the language rejects by name, each with the reason (and PREV's form).

Both the parser (a call inside a clause it cannot parse, such as ``COUNT(A.*)``) and the
checker (a call it parsed) reject calls; the reasons are written once, here.
"""

from __future__ import annotations

from ..errors import QueryError, SourcePos
from ..limits import MAX_PREV

__all__ = ["call_error"]

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
            "navigates to another row; the hardware evaluates each predicate on the current "
            "tuple alone"
        )
    elif name in _AGGREGATES:
        why = (
            "is an aggregate over the rows of a match; the NFA keeps one bit per state, "
            "not running values"
        )
    elif name in _MATCH_FUNCTIONS:
        why = "needs to know how a match was bound, which the NFA does not keep"
    else:
        why = "is not a known function; predicates use comparisons, +, -, AND, OR, NOT"
    return QueryError(f"{name}() is not supported: it {why}", pos)
