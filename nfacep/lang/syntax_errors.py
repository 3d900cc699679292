"""The messages of syntax errors: what the parser expected, in words, and the mistakes made
often (unsupported SQL, a clause out of order, a type without its width) recognised by name."""

from __future__ import annotations

from lark import Token
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from ..errors import QueryError, SourcePos
from .types import TIME_UNITS
from .unsupported import (
    CLAUSE_WORDS,
    SUBQUERY,
    WORDS,
    call_error,
    clause_order_error,
    measure_semantics_error,
    tail_error,
    word_error,
)

# How tokens are named in "expected …" messages.
_TOKEN_TEXT = {
    "LPAR": "'('",
    "RPAR": "')'",
    "SEMICOLON": "';'",
    "COMMA": "','",
    "DOT": "'.'",
    "VBAR": "'|'",
    "EQUAL": "'='",
    "NAME": "a name",
    "INT_NUM": "an integer",
    "HEX_NUM": "an integer",
    "DECIMAL": "a number",
    "STRING": "a quoted string",
    "PARAM": "a parameter (:name)",
    "QUANTIFIER": "a quantifier",
    "COMP_OP": "a comparison",
    "ADD_OP": "'+' or '-'",
    "MUL_OP": "'*'",
    "STAR_SELECT": "'*'",
    "STAR_ARG": "'*'",
    "MINUS": "'-'",
    "PLUS": "'+'",
    "CARET": "'^'",
    "DOLLAR": "'$'",
    "__ANON_0": "'{-'",
    "__ANON_1": "'-}'",
    "INT_KW": "INT",
    "$END": "end of file",
}


def _describe(terminals) -> str:
    names = sorted({_TOKEN_TEXT.get(t, t) for t in terminals})
    if len(names) > 8:
        names = [*names[:8], "…"]
    return ", ".join(names)


def pos_of(meta_or_token) -> SourcePos:
    return SourcePos(meta_or_token.line, meta_or_token.column)


SELECT_LIST_WHY = (
    "the engine reports where matches end, per partition; "
    "write SELECT * (match records carry seq, query and partition)"
)

#: what is said of a MEASURES clause the parser cannot read (RUNNING, FINAL, …)
_MEASURES = "MEASURES other than FIRST, LAST, COUNT(*) and MATCH_NUMBER()"
_MEASURES_WHY = (
    "the engine reports where a match begins and ends, and the host reads values there; "
    "the measures are FIRST(field), LAST(field), COUNT(*), MATCH_NUMBER() and FIRST(seq), "
    "each AS name, with no RUNNING or FINAL and no expressions around them (docs/language.md)"
)


def end_of(text: str) -> SourcePos:
    """The position just after the last non-blank character: where missing text belongs."""
    body = text.rstrip()
    line = body.count("\n") + 1
    return SourcePos(line, len(body) - (body.rfind("\n") + 1) + 1)


_STATEMENT_STARTS = {"QUERY", "SELECT", "CREATE"}
_TYPE_TOKENS = {"UINT", "INT_KW", "BOOL", "BOOLEAN", "ENUM", "FLOAT32", "IPV4", "TIMESTAMP"}
_TYPES = "UINT(n), INT(n), BOOL, ENUM('a', 'b', …), FLOAT32, IPV4 or TIMESTAMP(unit)"
# The clause keywords that say which part of a query an error is in.
CLAUSES = {
    "PATTERN",
    "DEFINE",
    "MEASURES",
    "SUBSET",
    "ONE",
    "ALL",
    "AFTER",
    "PARTITION",
    "ORDER",
    "SEMICOLON",
    "CREATE",
}
# The tokens that say which statement, form and clause an error is in (Recovery.heads).
LANDMARKS = {*CLAUSES, *CLAUSE_WORDS, "SELECT", "FROM", "MATCH_RECOGNIZE", "QUERY"}
_OPERATOR_CHARS = {"*", "/", "%", "^", "&", "|", "~"}


def _quoted_name_error(text: str, at: int) -> str:
    """Why the double-quoted name at ``text[at]`` is none: not closed on its line, or holding
    what a name cannot."""
    line_end = text.find("\n", at)
    rest = text[at + 1 : len(text) if line_end < 0 else line_end]
    close = rest.find('"')
    if close < 0:
        return "a double-quoted name is not closed on its line"
    inside = rest[:close]
    shown = inside if len(inside) <= 40 else inside[:40] + "…"
    return (
        f'"{shown}" is not a name: a double-quoted name holds what an unquoted one may '
        "(letters A-Z and a-z, digits and '_', not first a digit); a string, "
        f"such as an ENUM label, takes single quotes ('{shown}')"
    )


def syntax_error(
    err: UnexpectedInput, text: str, before: list[Token], heads: list[Token]
) -> QueryError:
    """The message for a parse error, knowing the tokens read before it and the landmarks of
    its statement (``heads``): unsupported SQL is recognised by name before falling back to
    "unexpected …, expected …"."""
    pos = SourcePos(err.line, err.column) if err.line > 0 else None
    known = _recognise(err, before, heads)
    if known is not None:
        return known
    if isinstance(err, UnexpectedCharacters):
        if err.char == '"' and err.pos_in_stream is not None:
            return QueryError(_quoted_name_error(text, err.pos_in_stream), pos)
        clause = next((t.type for t in reversed(heads) if t.type in CLAUSES), None)
        operand = not before or before[-1].type != "NAME"  # where an operand may stand
        if err.char == ":" and clause == "DEFINE" and operand and err.pos_in_stream is not None:
            # not a parameter's ':name'
            at = err.pos_in_stream + 1
            if text[at : at + 1] == '"':
                return QueryError(_quoted_name_error(text, at), SourcePos(err.line, err.column + 1))
            return QueryError(
                "a parameter is written ':name', the name right after the ':' (or "
                "double-quoted: ':\"Hot\"')",
                pos,
            )
        if err.char.isalpha():  # (a letter beyond ASCII)
            return QueryError(
                f"unexpected character {err.char!r}: a name holds the letters A-Z and a-z, "
                "digits and '_'",
                pos,
            )
        return QueryError(f"unexpected character {err.char!r}", pos)
    if isinstance(err, UnexpectedEOF):
        return QueryError(
            f"unexpected end of file, expected {_describe(err.expected)}", end_of(text)
        )
    assert isinstance(err, UnexpectedToken)
    token = err.token
    if token.type == "$END":
        return QueryError(
            f"unexpected end of file, expected {_describe(err.expected)}", end_of(text)
        )
    word = before[-1] if before else None
    if str(token).upper() in _STATEMENT_STARTS:  # QUERY q PATTERN (A) QUERY r …
        word = token
    if word is not None and str(word).upper() in _STATEMENT_STARTS:
        return QueryError(
            f"'{word}' starts a new statement here: is a ';' missing before it?", pos_of(word)
        )
    return QueryError(f"unexpected {str(token)!r}, expected {_describe(err.expected)}", pos)


def _recognise(err: UnexpectedInput, before: list[Token], heads: list[Token]) -> QueryError | None:
    """A specific message for a mistake made often, or None."""
    token = getattr(err, "token", None)
    prev = before[-1] if before else None
    clause = next((t.type for t in reversed(heads) if t.type in CLAUSES), None)
    in_condition = clause in ("DEFINE", "MEASURES")
    # CREATE TABLE, CREATE VIEW, …
    if (
        prev is not None
        and prev.type == "CREATE"
        and token is not None
        and token.type not in ("STREAM", "$END")
    ):
        return QueryError(
            f"CREATE {str(token).upper()} is not supported: a query file "
            "declares its input with CREATE STREAM name (field TYPE, …)",
            pos_of(prev),
        )
    declaration = _declaration_error(token, before, clause)
    if declaration is not None:
        return declaration
    expected = getattr(err, "expected", None) or getattr(err, "allowed", None) or set()
    if token is not None and token.type == "NAME" and set(expected) >= _TYPE_TOKENS:
        return QueryError(f"unknown type '{token}': the types are {_TYPES}", pos_of(token))
    within = _within_error(token, before)
    if within is not None:
        return within
    pattern = _pattern_error(err, token, prev, clause)
    if pattern is not None:
        return pattern
    # SELECT where a name or a condition goes
    subquery = _subquery(token, before)
    if subquery is not None:
        return subquery
    # inside MEASURES, whatever its expressions are, the clause itself is the problem
    if clause == "MEASURES" and not (isinstance(err, UnexpectedCharacters) and err.char == '"'):
        return _measures_error(token, before)
    # inside a call of a function the checker rejects by name (COUNT(A.*), PREV(x, 2) …)
    if in_condition:
        call = _open_call(before)
        if call is not None:
            return call_error(str(call).upper(), pos_of(call))
    # a SQL word that is not in the language, where the error is
    word = _unsupported_word(token, before)
    if word is not None:
        return word
    known = _misplaced(token, before, heads)
    if known is not None:
        return known
    return _operator_error(err, token, prev, in_condition)


#: Other languages' operators, and what the language writes for them.
_OPERATOR_SPELLINGS = {
    "!": "NOT",
    "≥": ">=",
    "≤": "<=",
    "≠": "<>",
    "==": "=",
    "=>": ">=",
    "=<": "<=",
}
_COMPARISONS = "the comparisons are =, <>, !=, <, <=, >, >="


def _operator_error(
    err: UnexpectedInput, token: Token | None, prev: Token | None, in_condition: bool
) -> QueryError | None:
    """The error for an operator the language does not have (``/``, ``&&``, ``==``, ``!``,
    ``≥``, …) where the error is; or None."""
    char = getattr(err, "char", None) if isinstance(err, UnexpectedCharacters) else None
    if char is None and in_condition and token is not None and str(token) in ("*", "|"):
        char = str(token)
    if char in _OPERATOR_CHARS:
        return QueryError(
            f"'{char}' is not an operator of the language: conditions use comparisons, "
            "+, -, * by an integer constant, AND, OR, NOT",
            SourcePos(err.line, err.column),
        )
    if char in _OPERATOR_SPELLINGS:
        return QueryError(
            f"'{char}' is not an operator of the language: write {_OPERATOR_SPELLINGS[char]}",
            SourcePos(err.line, err.column),
        )
    if (
        in_condition
        and prev is not None
        and token is not None
        and prev.type == "COMP_OP"
        and str(token) in ("=", "<", ">", "<>", "<=", ">=", "!=")
        and prev.end_pos == token.start_pos
    ):
        written = f"{prev}{token}"
        instead = _OPERATOR_SPELLINGS.get(written)
        return QueryError(
            f"'{written}' is not a comparison: "
            + (f"write {instead} ({_COMPARISONS})" if instead else _COMPARISONS),
            pos_of(prev),
        )
    return None


def _measures_error(token: Token | None, before: list[Token]) -> QueryError:
    """A parse error inside MEASURES: RUNNING or FINAL, another SQL word the language does not
    have (CAST, CASE, …) or a measure's name by what is wrong with it, else the clause."""
    prev = before[-1] if before else None
    for word in (token, prev):
        if word is not None and str(word).upper() in ("RUNNING", "FINAL"):
            return measure_semantics_error(str(word).upper(), pos_of(word))
    unsupported = _unsupported_word(token, before)
    if unsupported is not None:
        return unsupported
    if prev is not None and prev.type == "AS" and token is not None and token.type == "STRING":
        return QueryError(
            f"a measure is named by a name, not a string: AS {str(token)[1:-1]!s} (or "
            f'AS "{str(token)[1:-1]}" to keep its case)',
            pos_of(token),
        )
    ends = ("COMMA", "PATTERN", "ONE", "ALL", "AFTER", "NAME")
    operand = ("RPAR", "NAME", "INT_NUM", "STRING")  # what a measure's expression ends with
    named = len(before) >= 2 and before[-2].type == "AS"  # prev is the measure's name
    if prev is not None and prev.type in operand and not named and token and token.type in ends:
        named = token.type == "NAME" and str(token).upper() not in CLAUSE_WORDS
        written = f" {token}" if named else " name"
        return QueryError(
            f"a measure is named with AS, as in SQL: … AS{written} after the measure",
            pos_of(token),
        )
    return QueryError(f"{_MEASURES} is not supported: {_MEASURES_WHY}", _measure_start(before))


def _measure_start(before: list[Token]) -> SourcePos | None:
    """Where the measure the tokens ``before`` end in begins: after MEASURES or the ',' before
    it, outside parentheses."""
    depth = 0
    for i in range(len(before) - 1, -1, -1):
        t = before[i]
        depth += (t.type == "RPAR") - (t.type == "LPAR")
        if t.type == "MEASURES" or (t.type == "COMMA" and depth == 0):
            return pos_of(before[i + 1]) if i + 1 < len(before) else pos_of(t)
    return None


def _open_call(before: list[Token]) -> Token | None:
    """The function name before the innermost parenthesis still open, if it is one."""
    depth = 0
    for i in range(len(before) - 1, 0, -1):
        t = before[i]
        if t.type in ("AS", "DEFINE", "MEASURES", "SEMICOLON"):  # the condition's start
            return None
        if t.type == "RPAR":
            depth += 1
        elif t.type == "LPAR":
            if depth == 0:
                name = before[i - 1]
                return name if name.type == "NAME" else None
            depth -= 1
    return None


# Tokens that may follow an operand: a word followed by anything else is where an error is.
_AFTER_OPERAND = {
    "COMP_OP",
    "ADD_OP",
    "COMMA",
    "RPAR",
    "SEMICOLON",
    "AND",
    "OR",
    "AS",
    "DOT",
    "BETWEEN",
    "IN",
    "$END",
    "VBAR",
    "QUANTIFIER",
}


#: Flink's TIMESTAMP(p) precisions, and the unit each is.
_PRECISIONS = {"0": "SECOND", "3": "MILLISECOND", "6": "MICROSECOND", "9": "NANOSECOND"}
#: What SQL may write after a column's type, which a stream's field does not take.
_CONSTRAINTS = {"NOT", "NULL", "PRIMARY", "DEFAULT", "CONSTRAINT", "UNIQUE", "CHECK", "METADATA"}


def _declaration_error(
    token: Token | None, before: list[Token], clause: str | None
) -> QueryError | None:
    """The error for a field's type written as SQL or Flink write types (INT without its
    width, UINT8, TIMESTAMP(3), TIMESTAMP without its unit, TIMESTAMP_LTZ), a constraint after
    it (NOT NULL, PRIMARY KEY) or a WATERMARK among the fields; or None."""
    prev = before[-1] if before else None
    if token is None or prev is None:
        return None
    if prev.type in ("UINT", "INT_KW"):  # INT without its width, INTEGER, UINT8, …
        kw = str(prev).upper()
        if token.type in ("NAME", "INT_NUM") and token.start_pos == prev.end_pos:
            return QueryError(f"unknown type '{prev}{token}': the types are {_TYPES}", pos_of(prev))
        return QueryError(f"{kw} needs a width: write {kw}(n), with n from 1 to 64", pos_of(prev))
    if clause != "CREATE":
        return None
    units = ", ".join(_PRECISIONS.values())
    if prev.type == "TIMESTAMP":
        if token.start_pos == prev.end_pos and token.type in ("NAME", "INT_NUM"):
            return QueryError(f"unknown type '{prev}{token}': the types are {_TYPES}", pos_of(prev))
        return QueryError(
            f"TIMESTAMP needs its unit: TIMESTAMP(unit), the unit one of {units}", pos_of(prev)
        )
    if [t.type for t in before[-2:]] == ["TIMESTAMP", "LPAR"] and token.type == "INT_NUM":
        unit = _PRECISIONS.get(str(token).lstrip("0") or "0")
        instead = f"TIMESTAMP({unit})" if unit else f"TIMESTAMP(unit), the unit one of {units}"
        return QueryError(
            f"TIMESTAMP({token}): a TIMESTAMP's unit is written by its name: {instead}",
            pos_of(token),
        )
    word = str(token).upper()
    if word in _CONSTRAINTS and prev.type in ("RPAR", "BOOL", "BOOLEAN", "FLOAT32", "IPV4"):
        word = {"NOT": "NOT NULL", "PRIMARY": "PRIMARY KEY"}.get(word, word)
        return QueryError(
            f"{word} is not supported after a field's type: a stream declares its fields' "
            "types only (every tuple holds a value of each field, none is NULL)",
            pos_of(token),
        )
    if str(prev).upper() == "WATERMARK" and word == "FOR":
        return QueryError(
            "WATERMARK is not supported: the stream is processed in input order, and ORDER BY "
            "in a query checks that a field ascends",
            pos_of(prev),
        )
    return None


def _within_error(token: Token | None, before: list[Token]) -> QueryError | None:
    """The error for Flink's and SQL's ways of writing a window that WITHIN does not take:
    a count with a unit (``WITHIN 5 SECOND``), the interval's number unquoted (``INTERVAL 5
    MINUTE``), a range of units (``INTERVAL '1:30' HOUR TO MINUTE``) or a unit's precision
    (``SECOND(3)``); or None."""
    if token is None or not before:
        return None
    kinds = [t.type for t in before[-4:]]
    word = str(token).upper()
    unit = word[:-1] if word.endswith("S") and word[:-1] in TIME_UNITS else word
    if kinds[-2:] == ["WITHIN", "INT_NUM"] and unit in TIME_UNITS:
        return QueryError(
            f"WITHIN {before[-1]} {token}: WITHIN n counts in the ORDER BY field's "
            f"units; write WITHIN INTERVAL '{before[-1]}' {unit} for an "
            "interval (the field needs a TIME unit)",
            pos_of(token),
        )
    if kinds[-2:] == ["WITHIN", "INTERVAL"] and token.type == "INT_NUM":
        return QueryError(
            f"WITHIN INTERVAL {token}: the interval's number is a quoted string, as in SQL: "
            f"WITHIN INTERVAL '{token}' UNIT",
            pos_of(token),
        )
    if kinds == ["WITHIN", "INTERVAL", "STRING", "NAME"] and word in ("TO", "("):
        what, example = (
            ("a range of units (… TO …)", "INTERVAL '1:30' HOUR TO MINUTE as INTERVAL '90' MINUTE")
            if word == "TO"
            else ("a unit's precision", "INTERVAL '90' SECOND(3) as INTERVAL '90' SECOND")
        )
        return QueryError(
            f"{what} is not supported in WITHIN INTERVAL: an interval is one number of one "
            f"unit, 'n' UNIT with UNIT one of MILLISECOND, SECOND, MINUTE, HOUR, DAY (write "
            f"{example})",
            pos_of(token),
        )
    return None


def _pattern_error(
    err: UnexpectedInput, token: Token | None, prev: Token | None, clause: str | None
) -> QueryError | None:
    """The error for PATTERN without its parentheses, a quantifier on a quantifier
    (``A{2}{3}``, ``A+*``) or a count that is not a decimal integer (``A{0x10}``); or None."""
    if prev is not None and prev.type == "PATTERN" and token is not None:
        return QueryError(
            "PATTERN takes its pattern in parentheses: PATTERN (A B+ C)", pos_of(token)
        )
    if clause != "PATTERN":
        return None
    if (
        prev is not None
        and prev.type == "QUANTIFIER"
        and token is not None
        and str(token)[:1] in ("*", "+", "?", "{")
    ):
        return QueryError(
            f"quantifier {token} after the quantifier {prev}: an operand takes one quantifier "
            f"(a '?' after it makes it reluctant); to quantify a quantified operand, put it in "
            f"parentheses: (…{prev}){token}",
            pos_of(token),
        )
    if isinstance(err, UnexpectedCharacters) and err.char == "{":
        return QueryError(
            "a quantifier's counts are decimal integers: {n}, {n,}, {n,m}, {,m}",
            SourcePos(err.line, err.column),
        )
    return None


def _subquery(token: Token | None, before: list[Token]) -> QueryError | None:
    """The error for SELECT after '(' or FROM, or '(' after FROM; or None."""
    prev = before[-1] if before else None
    for i, word in ((len(before), token), (len(before) - 1, prev)):
        opener = before[i - 1] if i > 0 else None
        if word is None or opener is None or opener.type not in ("LPAR", "FROM"):
            continue
        if str(word).upper() == "SELECT" or (opener.type == "FROM" and word.type == "LPAR"):
            return QueryError(SUBQUERY, pos_of(word))
    return None


def _unsupported_word(token: Token | None, before: list[Token]) -> QueryError | None:
    """The error for a SQL word the language does not have (LIKE, IS, CASE, RUNNING, …) in the
    condition or clause the error is in: the unexpected word itself, or a word read as a name
    but followed by an operand (``RUNNING price``, ``CASE WHEN``, ``IS NULL``), or None."""
    start = len(before)
    while start > 0 and before[start - 1].type not in ("AS", "DEFINE", "SEMICOLON"):
        start -= 1
    words = before[start:]
    if token is not None:
        words = [*words, token]
    for i, word in enumerate(words):
        if word.type != "NAME" or str(word).upper() not in WORDS:
            continue
        after = words[i + 1] if i + 1 < len(words) else None
        if after is None or after.type not in _AFTER_OPERAND:
            return word_error(str(word).upper(), pos_of(word))
    return None


def _misplaced(token: Token | None, before: list[Token], heads: list[Token]) -> QueryError | None:
    """The error for a clause out of order (``ORDER BY t PARTITION BY k``, WITHIN after
    DEFINE), SQL around ``MATCH_RECOGNIZE ( … )``, or ``T.*`` as the select list; or None.
    ``heads``: the statement's landmarks (the clause keywords, SELECT, FROM, …)."""
    kinds = [t.type for t in heads if t.type != "SEMICOLON"]
    form = "sql" if "SELECT" in kinds else "concise" if kinds[:1] != ["CREATE"] else None
    if form is None or token is None:
        return None
    if form == "sql" and "MATCH_RECOGNIZE" not in kinds and str(token) == "*":
        select = next(i for i in range(len(before) - 1, -1, -1) if before[i].type == "SELECT")
        return QueryError(
            f"SELECT list is not supported: {SELECT_LIST_WHY}",
            pos_of(before[select + 1]) if select + 1 < len(before) else pos_of(token),
        )
    if form == "sql" and "FROM" in kinds and "MATCH_RECOGNIZE" not in kinds:
        joined = tail_error(str(token).upper(), pos_of(token))  # FROM s JOIN …, FROM s WHERE …
        if joined is not None:
            return joined
    prev = before[-1] if before else None
    if form == "sql" and "MATCH_RECOGNIZE" in kinds and kinds[-1] == "RPAR":
        # after its closing ')', or the word there, read as the query's name (`) ORDER BY t`)
        named = (
            prev is not None
            and len(before) >= 2
            and before[-2] is heads[-1]
            and prev.type == "NAME"
        )
        for said in (token, prev) if prev is not None and named else (token,):
            tail = tail_error(str(said).upper(), pos_of(said))
            if tail is not None:
                return tail
        return None
    seen = [t for t in kinds if t in CLAUSE_WORDS]
    # the unexpected word, or the word before it when that was read as a name (a DEFINE's)
    for word in (token, prev):
        if word is None or str(word).upper() not in CLAUSE_WORDS:
            continue
        if word is prev and (prev.type != "NAME" or token.type == "AS"):
            continue
        if word is token or (seen and seen[-1] == "DEFINE"):
            known = clause_order_error(str(word).upper(), form, seen, pos_of(word))
            if known is not None:
                return known
    return None
