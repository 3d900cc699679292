"""Hypothesis strategies for random queries and streams over a stream of BOOL fields.

Shared by the oracle differential tests and the gateware property tests. Patterns and
predicates are the oracle's own tuple trees (tests/oracle.py), rendered to query text there.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from hypothesis import strategies as st
from oracle import (
    ANY,
    EMPTY,
    Query,
    alt,
    group,
    only_empty,
    pattern_vars,
    permute,
    render_query,
    rep,
    seq,
    var,
)

STREAM = "CREATE STREAM s (k UINT(8), p0 BOOL, p1 BOOL, p2 BOOL);\n"

# --------------------------------------------------------------------------------------------
# Random patterns, predicates, streams and query files

DEFINED = ("A", "B", "C")
UNDEFINED = ("X",)
_BRACES = ("{%d}", "{%d,}", "{%d,%d}", "{,%d}")


@st.composite
def quantifiers(draw) -> str:
    kind = draw(st.sampled_from(["*", "+", "?", *_BRACES]))
    lazy = "?" if draw(st.integers(0, 3)) == 0 else ""
    count = st.sampled_from([0, 1, 1, 2, 2, 3])  # 0 rarely: {0}, {0,0}, {,0} match only ()
    if kind == "{%d,%d}":
        lo = draw(count)
        text = kind % (lo, draw(st.integers(lo, 3)))
    elif "%d" in kind:
        text = kind % draw(count)
    else:
        text = kind
    return text + lazy


def _pattern(draw, atoms: int, depth: int, names: Sequence[str]) -> tuple:
    unary = ["rep", "rep", "group"] if depth < 4 else []
    if atoms == 1:
        kind = draw(st.sampled_from(["var"] * 8 + ["any", "empty", *unary]))
        if kind == "var":
            return var(draw(st.sampled_from(names)))
        if kind == "any":
            return ANY
        if kind == "empty":
            return EMPTY
    else:
        kinds = ["seq", "seq", "alt", "alt", *unary]
        if depth < 3:
            kinds.append("permute")
        kind = draw(st.sampled_from(kinds))
    if kind == "rep":
        return rep(_pattern(draw, atoms, depth + 1, names), draw(quantifiers()))
    if kind == "group":
        return group(_pattern(draw, atoms, depth + 1, names))
    parts = draw(st.integers(2, min(atoms, 2 if kind == "permute" else 3)))
    cuts = sorted(draw(st.permutations(range(1, atoms)))[: parts - 1])
    sizes = [b - a for a, b in itertools.pairwise([0, *cuts, atoms])]
    children = [_pattern(draw, n, depth + 1, names) for n in sizes]
    return {"seq": seq, "alt": alt, "permute": permute}[kind](*children)


@st.composite
def patterns(draw, max_atoms: int = 6, names: Sequence[str] = DEFINED + UNDEFINED) -> tuple:
    return _pattern(draw, draw(st.integers(1, max_atoms)), 0, names)


_BOOL_FIELDS = ("p0", "p1", "p2")


@st.composite
def predicates(draw, depth: int = 0) -> tuple:
    kind = draw(
        st.sampled_from(
            ["bool"] * 6
            + ["bool_field", "key", "between", "in"]
            + (["not", "and", "or"] if depth < 2 else [])
        )
    )
    if kind == "bool":
        op = draw(st.sampled_from(["=", "=", "<>", "!="]))
        return ("cmp", draw(st.sampled_from(_BOOL_FIELDS)), op, draw(st.booleans()))
    if kind == "bool_field":
        f, g = draw(st.permutations(_BOOL_FIELDS))[:2]
        return ("cmpf", f, draw(st.sampled_from(["=", "<>", "!="])), g)
    if kind == "key":
        op = draw(st.sampled_from(["=", "<>", "!=", "<", "<=", ">", ">="]))
        return ("cmp", "k", op, draw(st.integers(0, 3)))
    if kind == "between":
        lo = draw(st.integers(0, 3))
        return ("between", "k", lo, draw(st.integers(lo, 3)))
    if kind == "in":
        return ("in", "k", tuple(draw(st.lists(st.integers(0, 3), min_size=1, max_size=3))))
    if kind == "not":
        return ("not", draw(predicates(depth + 1)))
    return (kind, draw(predicates(depth + 1)), draw(predicates(depth + 1)))


#: The stream of the PREV tests: a small integer ``v``, an address ``ip`` and a time ``t``
#: beside the key and the BOOL fields.
PREV_STREAM = (
    "CREATE STREAM s (k UINT(8), p0 BOOL, p1 BOOL, p2 BOOL, v UINT(3), ip IPV4, "
    "t TIMESTAMP(SECOND));\n"
)
#: The times ``t`` takes and the PREV tests compare it with (ISO 8601, one format: as text
#: they sort as the instants do), a second apart.
PREV_TIMES = tuple(f"2024-02-29T23:59:5{i}Z" for i in range(4))
#: The addresses ``ip`` takes: two in 10.0.0.0/8, one in 192.168.0.0/16, one in neither.
PREV_ADDRESSES = ("10.0.0.1", "10.0.0.2", "192.168.1.1", "8.8.8.8")
#: The networks the PREV tests test ``ip`` and its PREVs against (one of a single address, one
#: of every address).
PREV_NETWORKS = ("10.0.0.0/8", "10.0.0.2/32", "192.168.0.0/16", "0.0.0.0/0")


def _value(draw, depth: int = 0) -> tuple:
    """An integer operand over ``v``: the field, PREV of it or of the key, a constant, or a
    sum or difference of two (at least one side a field or PREV)."""
    kind = draw(
        st.sampled_from(["f", "prev", "prev", "prev", "key"] + (["sum"] if not depth else []))
    )
    if kind == "f":
        return ("f", "v")
    if kind == "prev":
        return ("prev", "v", draw(st.sampled_from([1, 1, 2, 3, 8])))
    if kind == "key":
        return ("prev", "k", draw(st.integers(1, 2)))
    other = draw(st.sampled_from([("lit", draw(st.integers(0, 3))), _value(draw, 1)]))
    return (draw(st.sampled_from(["+", "-"])), _value(draw, 1), other)


@st.composite
def prev_predicates(draw, depth: int = 0) -> tuple:
    """:func:`predicates` over :data:`PREV_STREAM`, with PREV: comparisons of ``v``, PREV
    and sums, BOOL PREVs as conditions and compared, ``ip`` and its PREVs compared with each
    other and with addresses and tested against networks, ``t`` and its PREVs compared with
    each other and with TIMESTAMP literals, under NOT, AND and OR."""
    kind = draw(
        st.sampled_from(
            ["cmpv"] * 4
            + ["prevb", "prevcmp", "plain", "ipcmp", "ipin", "tcmp"]
            + (["not", "and", "or"] if depth < 2 else [])
        )
    )
    if kind == "tcmp":
        time = st.sampled_from([("f", "t"), ("prev", "t", 1), ("prev", "t", 2)])
        right = draw(st.one_of(time, st.sampled_from(PREV_TIMES).map(lambda t: ("tlit", t))))
        op = draw(st.sampled_from(["=", "<>", "<", "<=", ">", ">="]))
        return ("cmpv", draw(time), op, right)
    address = st.sampled_from(
        [("f", "ip"), ("prev", "ip", 1), ("prev", "ip", 2), ("prev", "ip", 3)]
    )
    if kind == "ipcmp":
        right = draw(st.one_of(address, st.sampled_from(PREV_ADDRESSES).map(lambda a: ("lit", a))))
        return ("cmpv", draw(address), draw(st.sampled_from(["=", "<>"])), right)
    if kind == "ipin":
        return ("ipinv", draw(address), draw(st.sampled_from(PREV_NETWORKS)))
    if kind == "cmpv":
        op = draw(st.sampled_from(["=", "<>", "<", "<=", ">", ">="]))
        return ("cmpv", _value(draw), op, _value(draw))
    if kind == "prevb":
        return ("prevb", draw(st.sampled_from(_BOOL_FIELDS)), draw(st.integers(1, 3)))
    if kind == "prevcmp":
        left = ("prev", draw(st.sampled_from(_BOOL_FIELDS)), draw(st.integers(1, 2)))
        right = draw(st.sampled_from([("lit", True), ("lit", False), ("f", "p0")]))
        return ("cmpv", left, draw(st.sampled_from(["=", "<>"])), right)
    if kind == "plain":
        return draw(predicates(2))
    if kind == "not":
        return ("not", draw(prev_predicates(depth + 1)))
    return (kind, draw(prev_predicates(depth + 1)), draw(prev_predicates(depth + 1)))


@st.composite
def queries(draw, name: str, skip: bool | None = None, preds=None) -> Query:
    pattern = draw(patterns())
    used = pattern_vars(pattern)
    if only_empty(pattern) or not any(v in DEFINED for v in used):
        # never a report, and DEFINE needs at least one variable: see test_match_only_empty
        pattern = seq(var("A"), pattern)
        used = pattern_vars(pattern)
    defines = tuple((v, draw((preds or predicates)())) for v in used if v in DEFINED)
    if skip is None:
        skip = draw(st.booleans())
    return Query(name, pattern, defines, skip)


@st.composite
def streams(draw, max_len: int = 30, keys: int = 4) -> list[dict[str, object]]:
    row = st.fixed_dictionaries(
        {
            "k": st.integers(0, keys - 1),
            "p0": st.booleans(),
            "p1": st.booleans(),
            "p2": st.booleans(),
        }
    )
    n = draw(st.integers(0, max_len))  # uniform lengths: lists alone stay mostly short
    return draw(st.lists(row, min_size=n, max_size=n))


@st.composite
def spellings(draw, name: str, other: bool = False) -> str:
    """``name`` (declared unquoted) as a query may write it: in any case, or double-quoted in
    upper case, the same name in SQL; with ``other``, sometimes double-quoted in lower case,
    another name (an undefined variable, true for every tuple)."""
    kinds = ["as", "as", "lower", "upper", "mixed", "quoted"] + (["other"] if other else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "lower":
        return name.lower()
    if kind == "upper":
        return name.upper()
    if kind == "mixed":
        return "".join(draw(st.sampled_from([c.lower(), c.upper()])) for c in name)
    if kind == "quoted":
        return f'"{name.upper()}"'
    if kind == "other" and name.lower() != name.upper():
        return f'"{name.lower()}"'
    return name


@st.composite
def respelled(draw, q: Query, named: bool = True) -> Query:
    """``q`` with every name (variables, fields, the query's if ``named``) written as
    :func:`spellings` draws it, each occurrence on its own; some variables of the pattern
    become other names."""

    def pattern(p: tuple) -> tuple:
        kind = p[0]
        if kind == "var":
            return var(draw(spellings(p[1], other=True)))
        if kind in ("seq", "alt", "permute"):
            return (kind, tuple(pattern(c) for c in p[1]))
        if kind == "rep":
            return ("rep", pattern(p[1]), p[2])
        if kind == "group":
            return ("group", pattern(p[1]))
        return p

    def pred(e: tuple) -> tuple:
        kind = e[0]
        if kind == "not":
            return (kind, pred(e[1]))
        if kind in ("and", "or"):
            return (kind, pred(e[1]), pred(e[2]))
        field = draw(spellings(e[1]))
        if kind == "cmpf":
            return (kind, field, e[2], draw(spellings(e[3])))
        return (kind, field, *e[2:])

    return Query(
        draw(spellings(q.name)) if named else q.name,
        pattern(q.pattern),
        tuple((draw(spellings(v)), pred(e)) for v, e in q.defines),
        q.skip,
        q.window,
        None if q.order is None else draw(spellings(q.order)),
        q.start,
    )


@dataclass
class Scenario:
    queries: list[Query]
    text: str
    partitioned: bool


@st.composite
def scenarios(draw, partitioned: bool | None = None, max_queries: int = 3) -> Scenario:
    """A query file: the stream and 1-3 queries in either form, named or numbered, their names
    written in any case or quoted (:func:`respelled`), AFTER MATCH written or left to each
    form's default."""
    if partitioned is None:
        partitioned = draw(st.booleans())
    named = draw(st.booleans())
    n = draw(st.integers(1, max_queries))
    names = [f"m{i}" for i in range(n)] if named else [f"q{i + 1}" for i in range(n)]
    qs = [draw(queries(name)) for name in names]
    if draw(st.booleans()):
        qs = [draw(respelled(q, named)) for q in qs]
    parts = [STREAM]
    for q in qs:
        form = draw(st.sampled_from(["sql", "concise"]))
        stream = draw(spellings("s"))
        text = render_query(
            q,
            stream,
            draw(spellings("k")) if partitioned else None,
            form,
            named,
            qualify=draw(st.booleans()),
            after=draw(st.sampled_from([None, "explicit", "default"])),
        )
        if form == "concise" and named and draw(st.booleans()):  # one stream: FROM optional
            text = text.replace(f" FROM {stream}\n", "\n", 1)
        parts.append(text)
    return Scenario(qs, "".join(parts), partitioned)
