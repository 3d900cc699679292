"""An independent oracle for ``nfacep match``, written from docs/language.md only.

It shares no code with :mod:`nfacep` (and must never import it): patterns, predicates,
partitioning (by one field or several: their values together are the key, their bits
concatenated in the table, :func:`concat_key`), capacity, timers, time windows (WITHIN),
where a match begins (start_seq, the latest start of the runs that end at a match), the
measures read there and where it ends (FIRST, LAST, COUNT(*), MATCH_NUMBER()) and both match
semantics are modelled here from scratch, as directly as the specification states them, with
no NFA in sight.

Patterns are nested tuples::

    ("var", "A")              a pattern variable
    ("any",)                  the wildcard ``.``
    ("seq", (p, q, ...))      concatenation; ("seq", ()) is the empty pattern, ``()`` in a group
    ("alt", (p, q, ...))      alternation ``p | q | ...``
    ("rep", p, "{2,}?")       a quantifier, kept as its source text (``*``, ``+?``, ``{,3}``, ...)
    ("group", p)              explicit parentheses (no meaning of their own)
    ("permute", (p, q, ...))  ``PERMUTE(p, q, ...)``: every order of the operands

Names (of variables, fields, parameters and queries) are kept as a query writes them: an
unquoted name stands for its upper-case fold, a double-quoted one (``'"r"'``) for itself, so
``R``, ``r`` and ``"R"`` are one variable and ``"r"`` another (:func:`name_key`); a query is
reported by its name without quotes (:func:`name_text`). Rows are keyed by the fields' names.

Predicates (the right-hand sides of DEFINE) are nested tuples too::

    ("cmp", field, op, literal)         op in = <> != < <= > >=; literal a bool or an int
    ("cmpf", field, op, other_field)    field-to-field comparison
    ("between", field, lo, hi)
    ("in", field, (v, ...))
    ("lin", ((c, field), ...), op, (d, other_field) | None, k)
                                        c * field + ... op d * other_field + k, in exact integers
                                        (``*`` by an integer constant, docs/language.md)
    ("ipin", field, "a.b.c.d/n")        an IPV4 field (its dotted quad) in a network
    ("ipinv", a, "a.b.c.d/n")           an IPV4 value of ``cmpv``'s (a field or a PREV of one)
                                        in a network; unknown for a NULL
    ("cmpt", field, op, "ISO 8601")     a TIMESTAMP field against TIMESTAMP '…', as instants
    ("not", p) / ("and", p, q) / ("or", p, q)
    ("cmpv", a, op, b)                  a comparison of two values, each one of
                                        ("f", field), ("prev", field, k), ("lit", v),
                                        ("tlit", "ISO 8601") (TIMESTAMP '…', compared
                                        as text with fields' values of one format),
                                        ("+", a, b), ("-", a, b)
    ("prevb", field, k)                 a BOOL field k tuples back, as a condition

``("prev", field, k)`` is ``PREV(field, k)``: the field of the tuple ``k`` tuples back in the
same life of the partition (the tuples the partitioner processed for it while it was stored),
or NULL (None) where fewer precede. Conditions follow SQL's three-valued logic: a comparison
or a sum with NULL is unknown (None), NOT unknown is unknown, AND/OR are Kleene's, and only
True satisfies a variable.

Each tuple of a sub-stream is encoded as one character whose code point carries the bit
vector of the query's defined variables it satisfies (``chr(0x100 + bits)``); a variable is the
character class of every code with its bit set, an undefined variable or ``.`` the class of all
codes. A query then matches the run ``S[j..i]`` iff its regex fullmatches ``s[j:i+1]``.

Two independent engines decide that: Python's :mod:`re` (brute force over start positions,
``engine="re"``) and a direct set semantics computing, for every node and start position, the
set of end positions (``engine="sets"``). The first is the literal reading of the brief; the
second cannot backtrack exponentially (overlapping predicates make ``(A|B)*`` ambiguous), so
long streams use it. The self-tests check the two against each other.
"""

from __future__ import annotations

import datetime
import functools
import ipaddress
import itertools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

# --------------------------------------------------------------------------------------------
# Names


@functools.cache
def name_key(name: str) -> str:
    """What a name stands for: a double-quoted name itself, an unquoted one its upper case."""
    return name[1:-1] if name.startswith('"') else name.upper()


def name_text(name: str) -> str:
    """A name as nfacep reports it (the query column of the match file): without quotes."""
    return name[1:-1] if name.startswith('"') else name


@functools.cache
def _keys(names: tuple[str, ...]) -> tuple[str, ...]:
    """What each of a row's names stands for (``":name"`` for a parameter's value); a
    stream's rows share a few sets of names, so this is worked out once for each."""
    return tuple(":" + name_key(k[1:]) if k.startswith(":") else name_key(k) for k in names)


def _by_key(row: Mapping[str, object]) -> dict[str, object]:
    """A row keyed by what its names stand for (``":name"`` for a parameter's value)."""
    return dict(zip(_keys(tuple(row)), row.values(), strict=True))


# --------------------------------------------------------------------------------------------
# Patterns


def var(name: str) -> tuple:
    return ("var", name)


ANY = ("any",)


def seq(*parts: tuple) -> tuple:
    return ("seq", tuple(parts))


def alt(*parts: tuple) -> tuple:
    return ("alt", tuple(parts))


def rep(part: tuple, quantifier: str) -> tuple:
    parse_quantifier(quantifier)  # reject nonsense early
    return ("rep", part, quantifier)


def group(part: tuple) -> tuple:
    return ("group", part)


def permute(*parts: tuple) -> tuple:
    return ("permute", tuple(parts))


_QUANTIFIER = re.compile(r"(\*|\+|\?|\{(\d*)(,?)(\d*)\})(\?)?")


def parse_quantifier(text: str) -> tuple[int, int | None, bool]:
    """``(lo, hi, reluctant)`` of a quantifier's source text; ``hi`` is None when unbounded."""
    m = _QUANTIFIER.fullmatch(text)
    if m is None:
        raise ValueError(f"not a quantifier: {text!r}")
    base, lo_text, comma, hi_text, lazy = m.groups()
    reluctant = lazy is not None
    if base == "*":
        return 0, None, reluctant
    if base == "+":
        return 1, None, reluctant
    if base == "?":
        return 0, 1, reluctant
    if not comma:  # {n}
        if not lo_text or hi_text:
            raise ValueError(f"not a quantifier: {text!r}")
        return int(lo_text), int(lo_text), reluctant
    if not lo_text and not hi_text:
        raise ValueError(f"not a quantifier: {text!r}")
    lo = int(lo_text) if lo_text else 0
    hi = int(hi_text) if hi_text else None
    if hi is not None and hi < lo:
        raise ValueError(f"quantifier with max < min: {text!r}")
    return lo, hi, reluctant


def pattern_vars(p: tuple) -> list[str]:
    """Variable names in order of first appearance."""
    out: list[str] = []

    def walk(p: tuple) -> None:
        kind = p[0]
        if kind == "var":
            if p[1] not in out:
                out.append(p[1])
        elif kind in ("seq", "alt", "permute"):
            for c in p[1]:
                walk(c)
        elif kind in ("rep", "group"):
            walk(p[1])

    walk(p)
    return out


def pattern_atoms(p: tuple) -> int:
    kind = p[0]
    if kind in ("var", "any"):
        return 1
    if kind in ("seq", "alt", "permute"):
        return sum(pattern_atoms(c) for c in p[1])
    return pattern_atoms(p[1])


def only_empty(p: tuple) -> bool:
    """Whether ``p`` matches nothing but the empty sequence (so never reports anything)."""
    kind = p[0]
    if kind in ("var", "any"):
        return False
    if kind in ("seq", "alt", "permute"):
        return all(only_empty(c) for c in p[1])
    if kind == "rep":
        return parse_quantifier(p[2])[1] == 0 or only_empty(p[1])
    return only_empty(p[1])  # group


EMPTY = ("group", ("seq", ()))  # ``()``


def render_pattern(p: tuple) -> str:
    """nfacep PATTERN text (without the enclosing parentheses of the PATTERN clause)."""
    return _render(p, "top")


def _render(p: tuple, ctx: str) -> str:
    kind = p[0]
    if kind == "var":
        return p[1]
    if kind == "any":
        return "."
    if kind == "group":
        return "(" + _render(p[1], "top") + ")"
    if kind == "permute":
        return "PERMUTE(" + ", ".join(_render(c, "top") for c in p[1]) + ")"
    if kind == "seq":
        text = " ".join(_render(c, "seq") for c in p[1])
        return f"({text})" if ctx == "rep" else text
    if kind == "alt":
        text = " | ".join(_render(c, "alt") for c in p[1])
        return f"({text})" if ctx in ("seq", "rep") else text
    if kind == "rep":
        child = _render(p[1], "rep")
        if p[1][0] == "rep":  # A** or A*? would read as something else
            child = f"({child})"
        return child + p[2]
    raise ValueError(f"unknown pattern node {p!r}")


# --------------------------------------------------------------------------------------------
# Predicates


def _get(row: Mapping[str, object], name: str) -> object:
    """The value of field ``name`` (``":name"``: of a parameter) in ``row``, keyed by the
    fields' names (or by :func:`name_key`, as :func:`_by_key` makes it)."""
    if name in row:
        return row[name]
    key = ":" + name_key(name[1:]) if name.startswith(":") else name_key(name)
    if key in row:
        return row[key]
    return _by_key(row)[key]


#: The key under which a row of a life carries the rows before it (the latest first).
EARLIER = "@EARLIER"


def _value(operand: tuple, row: Mapping[str, object]) -> object:
    """The value of an operand of ``cmpv``; None for NULL."""
    kind = operand[0]
    if kind == "f":
        return _get(row, operand[1])
    if kind in ("lit", "tlit"):
        return operand[1]
    if kind == "prev":
        earlier = row.get(EARLIER, [])
        k = operand[2]
        return _get(earlier[k - 1], operand[1]) if len(earlier) >= k else None
    a, b = _value(operand[1], row), _value(operand[2], row)
    if a is None or b is None:
        return None
    return a + b if kind == "+" else a - b


def eval_pred(pred: tuple, row: Mapping[str, object]) -> bool | None:
    """True, False, or None for unknown (a comparison with a NULL, as SQL has it)."""
    kind = pred[0]
    if kind == "cmpv":
        a, b = _value(pred[1], row), _value(pred[3], row)
        return None if a is None or b is None else _compare(a, pred[2], b)
    if kind == "prevb":
        value = _value(("prev", pred[1], pred[2]), row)
        return None if value is None else bool(value)
    if kind == "cmp":
        return _compare(_get(row, pred[1]), pred[2], pred[3])
    if kind == "cmpf":
        return _compare(_get(row, pred[1]), pred[2], _get(row, pred[3]))
    if kind == "cmpp":  # ("cmpp", field, op, parameter): the value in force at this row
        return _compare(_get(row, pred[1]), pred[2], _get(row, ":" + pred[3]))
    if kind == "lin":
        _, terms, op, other, k = pred
        left = sum(c * _get(row, f) for c, f in terms)
        right = k + (0 if other is None else other[0] * _get(row, other[1]))
        return _compare(left, op, right)
    if kind in ("ipin", "ipinv"):
        address = _get(row, pred[1]) if kind == "ipin" else _value(pred[1], row)
        if address is None:
            return None
        return ipaddress.IPv4Address(address) in ipaddress.IPv4Network(pred[2])
    if kind == "cmpt":
        return _compare(instant(_get(row, pred[1])), pred[2], instant(pred[3]))
    if kind == "between":
        return pred[2] <= _get(row, pred[1]) <= pred[3]
    if kind == "in":
        return _get(row, pred[1]) in pred[2]
    if kind == "not":
        inner = eval_pred(pred[1], row)
        return None if inner is None else not inner
    if kind in ("and", "or"):
        both = (eval_pred(pred[1], row), eval_pred(pred[2], row))
        decides = kind == "or"  # the value that decides: True for OR, False for AND
        if decides in both:
            return decides
        return None if None in both else not decides
    raise ValueError(f"unknown predicate node {pred!r}")


def with_parameters(
    rows: Sequence[Mapping[str, object]],
    initial: Mapping[str, object],
    switches: Sequence[tuple[int, Mapping[str, object]]],
) -> list[dict]:
    """``rows`` with the value of every runtime parameter in force at each, as ``":name"``:
    ``initial`` from row 0, and each ``(seq, values)`` of ``switches`` from row ``seq`` on
    (in any order; for one parameter, the switch with the largest ``seq`` not after the row
    wins)."""
    out = []
    for n, row in enumerate(rows):
        values = dict(initial)
        for seq, changes in sorted(switches, key=lambda s: s[0]):
            if seq <= n:
                values.update(changes)
        out.append({**row, **{":" + name: v for name, v in values.items()}})
    return out


def _compare(a: object, op: str, b: object) -> bool:
    if op == "=":
        return a == b
    if op in ("<>", "!="):
        return a != b
    if op == "<":
        return a < b
    if op == "<=":
        return a <= b
    if op == ">":
        return a > b
    if op == ">=":
        return a >= b
    raise ValueError(f"unknown comparison {op!r}")


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def instant(text: object) -> int:
    """Nanoseconds since 1970-01-01 UTC of an ISO 8601 time (a time without a zone is UTC);
    an integer stays as it is. Fractions finer than a microsecond are not used here."""
    if not isinstance(text, str):
        return int(text)  # type: ignore[call-overload]
    t = datetime.datetime.fromisoformat(text)
    if t.tzinfo is None:
        t = t.replace(tzinfo=datetime.UTC)
    return (t - _EPOCH) // datetime.timedelta(microseconds=1) * 1000


def _literal(v: object) -> str:
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    return str(v)


def _render_value(operand: tuple, q: str) -> str:
    kind = operand[0]
    if kind == "f":
        return f"{q}{operand[1]}"
    if kind == "lit":
        return _literal(operand[1])
    if kind == "tlit":
        return f"TIMESTAMP '{operand[1]}'"
    if kind == "prev":
        back = "" if operand[2] == 1 else f", {operand[2]}"
        return f"PREV({q}{operand[1]}{back})"
    return f"({_render_value(operand[1], q)} {kind} {_render_value(operand[2], q)})"


def render_pred(pred: tuple, qualifier: str | None = None) -> str:
    """DEFINE text; ``qualifier`` writes fields as ``A.field``."""
    q = f"{qualifier}." if qualifier else ""
    kind = pred[0]
    if kind == "cmpv":
        return f"{_render_value(pred[1], q)} {pred[2]} {_render_value(pred[3], q)}"
    if kind == "prevb":
        return _render_value(("prev", pred[1], pred[2]), q)
    if kind == "cmp":
        return f"{q}{pred[1]} {pred[2]} {_literal(pred[3])}"
    if kind == "cmpf":
        return f"{q}{pred[1]} {pred[2]} {q}{pred[3]}"
    if kind == "cmpp":
        return f"{q}{pred[1]} {pred[2]} :{pred[3]}"
    if kind == "lin":
        _, terms, op, other, k = pred
        # a constant written before its field on odd terms, after it on even ones: both orders
        left = " + ".join(
            f"{c} * {q}{f}" if i % 2 else f"{q}{f} * {c}" for i, (c, f) in enumerate(terms)
        )
        right = str(k) if other is None else f"({other[0]}) * {q}{other[1]} + {k}"
        return f"{left} {op} {right}"
    if kind == "ipin":
        return f"{q}{pred[1]} IN '{pred[2]}'"
    if kind == "ipinv":
        return f"{_render_value(pred[1], q)} IN '{pred[2]}'"
    if kind == "cmpt":
        return f"{q}{pred[1]} {pred[2]} TIMESTAMP '{pred[3]}'"
    if kind == "between":
        return f"{q}{pred[1]} BETWEEN {pred[2]} AND {pred[3]}"
    if kind == "in":
        return f"{q}{pred[1]} IN ({', '.join(_literal(v) for v in pred[2])})"
    if kind == "not":
        return f"NOT ({render_pred(pred[1], qualifier)})"
    if kind in ("and", "or"):
        op = kind.upper()
        return f"({render_pred(pred[1], qualifier)} {op} {render_pred(pred[2], qualifier)})"
    raise ValueError(f"unknown predicate node {pred!r}")


# --------------------------------------------------------------------------------------------
# Queries and their text


@dataclass(frozen=True)
class Query:
    """One query: ``defines`` maps the defined variables to predicates (others are TRUE)."""

    name: str
    pattern: tuple
    defines: tuple[tuple[str, tuple], ...] = ()
    skip: bool = False  # AFTER MATCH SKIP PAST LAST ROW
    # WITHIN window: ts(end) - ts(start) < window, ts the ORDER BY (ISO 8601 text: in ns)
    window: int | None = None
    order: str | None = None  # the ORDER BY field
    start: bool = False  # MEASURES FIRST(seq) AS start_seq: report where each match begins
    #: further MEASURES, (alias, kind, field): kind "first", "last", "count" (COUNT(*)) or
    #: "number" (MATCH_NUMBER()); field None for ``seq``, the tuple's position
    measures: tuple[tuple[str, str, str | None], ...] = ()

    def all_measures(self) -> tuple[tuple[str, str, str | None], ...]:
        """Every measure, start_seq first when asked."""
        return ((("start_seq", "first", None),) if self.start else ()) + self.measures

    def define_map(self) -> dict[str, tuple]:
        """The predicate of each defined variable, by :func:`name_key`."""
        return {name_key(v): p for v, p in self.defines}


def render_query(
    q: Query,
    stream: str,
    partition: str | None,
    form: str = "sql",
    named: bool = True,
    qualify: bool = False,
    after: str | None = None,
) -> str:
    """Query text in the ``"sql"`` (MATCH_RECOGNIZE) or ``"concise"`` (paper) form.

    Unnamed queries are numbered by the compiler; a concise one then has no first line.
    ``after`` says when the AFTER MATCH clause is written: ``"explicit"`` always (``AFTER
    MATCH SKIP PAST LAST ROW`` or ``AFTER MATCH REPORT EVERY END``), ``"default"`` only when
    the query does not want its form's default (every end in the concise form, earliest end
    in the SQL form), ``None`` for SKIP PAST LAST ROW in both forms and for every end in the
    SQL form.
    """
    clause = _writes_after(q, form, after)
    if form == "concise":
        return _render_concise(q, stream, partition, named, qualify, clause)
    if form != "sql":
        raise ValueError(form)
    return _render_sql(q, stream, partition, named, qualify, clause)


def _writes_after(q: Query, form: str, after: str | None) -> bool:
    """Whether the AFTER MATCH clause is written (see :func:`render_query`)."""
    if after == "explicit":
        return True
    if after == "default":  # SKIP PAST LAST ROW is the SQL form's default
        return q.skip != (form == "sql")
    if after is None:
        return q.skip or form == "sql"
    raise ValueError(after)


def _after(q: Query) -> str:
    return "AFTER MATCH SKIP PAST LAST ROW" if q.skip else "AFTER MATCH REPORT EVERY END"


def _render_concise(
    q: Query, stream: str, partition: str | None, named: bool, qualify: bool, clause: bool
) -> str:
    lines = []
    if named:
        lines.append(f"QUERY {q.name} FROM {stream}")
    if partition:
        lines.append(f"PARTITION {partition}")
    if q.order:
        lines.append(f"ORDER BY {q.order}")
    if q.all_measures():
        lines.append("MEASURES " + render_measures(q))
    if clause:
        lines.append(_after(q))
    lines.append(f"PATTERN ( {render_pattern(q.pattern)} ){_within(q)}")
    if q.defines:
        lines.append("DEFINE")
        for v, pred in q.defines:
            lines.append(f"  {v} AS ({render_pred(pred, v if qualify else None)})")
    return "\n".join(lines) + ";\n"


def _render_sql(
    q: Query, stream: str, partition: str | None, named: bool, qualify: bool, clause: bool
) -> str:
    lines = [f"SELECT * FROM {stream}", "MATCH_RECOGNIZE ("]
    if partition:
        lines.append(f"    PARTITION BY {partition}")
    if q.order:
        lines.append(f"    ORDER BY {q.order}")
    if q.all_measures():
        lines.append("    MEASURES " + render_measures(q))
    if clause:
        lines.append("    " + _after(q))
    lines.append(f"    PATTERN ({render_pattern(q.pattern)}){_within(q)}")
    if q.defines:
        lines.append("    DEFINE")
        items = [
            f"        {v} AS {render_pred(pred, v if qualify else None)}" for v, pred in q.defines
        ]
        lines.append(",\n".join(items))
    lines.append(f") AS {q.name};\n" if named else ");\n")
    return "\n".join(lines)


def render_measures(q: Query) -> str:
    """The items of the MEASURES clause."""
    items = []
    for alias, kind, fld in q.all_measures():
        if kind == "count":
            items.append(f"COUNT(*) AS {alias}")
        elif kind == "number":
            items.append(f"MATCH_NUMBER() AS {alias}")
        else:
            items.append(f"{kind.upper()}({fld or 'seq'}) AS {alias}")
    return ", ".join(items)


def _within(q: Query) -> str:
    return "" if q.window is None else f" WITHIN {q.window}"


# --------------------------------------------------------------------------------------------
# Encoding tuples as characters, and the Python regex


_BASE = 0x100


def _bits(q: Query) -> dict[str, int]:
    """Bit index of each defined variable that the pattern uses, by :func:`name_key`."""
    defined = q.define_map()
    used = dict.fromkeys(name_key(v) for v in pattern_vars(q.pattern))
    return {v: i for i, v in enumerate(v for v in used if v in defined)}


def encode(q: Query, rows: Iterable[Mapping[str, object]]) -> str:
    """One character per row: ``chr(0x100 + bits)``, bit i set iff defined variable i holds."""
    defined = q.define_map()
    bits = _bits(q)
    out = []
    for row in map(_by_key, rows):
        code = 0
        for v, i in bits.items():
            if eval_pred(defined[v], row) is True:
                code |= 1 << i
        out.append(chr(_BASE + code))
    return "".join(out)


def _codes(q: Query, name: str | None) -> list[int]:
    """Codes satisfying variable ``name`` (``None`` for ``.``)."""
    bits = _bits(q)
    every = range(1 << len(bits))
    if name is None or name_key(name) not in bits:  # the wildcard or an undefined variable
        return list(every)
    return [c for c in every if c >> bits[name_key(name)] & 1]


def char_class(q: Query, name: str | None) -> str:
    """Regex class of the codes satisfying variable ``name`` of ``q`` (``None`` for ``.``)."""
    return "[" + "".join(chr(_BASE + c) for c in _codes(q, name)) + "]"


def to_regex(q: Query) -> str:
    """The query's pattern as a Python regex over the encoded characters."""

    def cls(name: str | None) -> str:
        return char_class(q, name)

    def r(p: tuple) -> str:
        kind = p[0]
        if kind == "var":
            return cls(p[1])
        if kind == "any":
            return cls(None)
        if kind == "group":
            return r(p[1])
        if kind == "seq":
            return "".join(f"(?:{r(c)})" for c in p[1])
        if kind == "alt":
            return "(?:" + "|".join(r(c) for c in p[1]) + ")"
        if kind == "permute":
            orders = itertools.permutations(p[1])
            return "(?:" + "|".join("".join(f"(?:{r(c)})" for c in o) for o in orders) + ")"
        if kind == "rep":
            lo, hi, _ = parse_quantifier(p[2])  # reluctance changes nothing here
            return f"(?:{r(p[1])}){{{lo},{'' if hi is None else hi}}}"
        raise ValueError(f"unknown pattern node {p!r}")

    return r(q.pattern)


# --------------------------------------------------------------------------------------------
# Which runs match: starts[i] = { j : s[j:i+1] matches }


@functools.lru_cache(maxsize=4096)
def _compiled(pattern: tuple, defines: tuple) -> re.Pattern[str]:
    return re.compile(to_regex(Query("", pattern, defines)))


def starts_re(q: Query, s: str) -> list[set[int]]:
    """Brute force with Python's ``re``: every non-empty substring, fullmatch or not."""
    rx = _compiled(q.pattern, q.defines)
    return [{j for j in range(i + 1) if rx.fullmatch(s, j, i + 1)} for i in range(len(s))]


def starts_sets(q: Query, s: str) -> list[set[int]]:
    """Set semantics: ends(p, j) is the set of e with p matching s[j:e]."""
    n = len(s)
    ends = _Ends(q, s)
    out: list[set[int]] = [set() for _ in range(n)]
    for j in range(n):
        for e in ends(q.pattern, j):
            if e > j:  # empty matches never count
                out[e - 1].add(j)
    return out


class _Ends:
    """``ends(p, j)``: the set of e with pattern node p matching s[j:e], memoised, one rule
    per node kind."""

    def __init__(self, q: Query, s: str):
        self.q = q
        self.s = s
        self.memo: dict[tuple[int, int], frozenset[int]] = {}
        self.classes: dict[str | None, frozenset[str]] = {}
        self.rules: dict[str, Callable[[tuple, int], set[int]]] = {
            "var": self._symbol,
            "any": self._symbol,
            "group": lambda p, j: set(self(p[1], j)),
            "seq": self._seq,
            "alt": self._alt,
            "permute": self._permute,
            "rep": self._rep,
        }

    def __call__(self, p: tuple, j: int) -> frozenset[int]:
        key = (id(p), j)
        if key in self.memo:
            return self.memo[key]
        rule = self.rules.get(p[0])
        if rule is None:
            raise ValueError(f"unknown pattern node {p!r}")
        self.memo[key] = frozenset(rule(p, j))
        return self.memo[key]

    def cls(self, name: str | None) -> frozenset[str]:
        if name not in self.classes:
            self.classes[name] = frozenset(chr(_BASE + c) for c in _codes(self.q, name))
        return self.classes[name]

    def ends_from(self, p: tuple, positions: Iterable[int]) -> set[int]:
        out: set[int] = set()
        for j in positions:
            out |= self(p, j)
        return out

    def _symbol(self, p: tuple, j: int) -> set[int]:
        name = p[1] if p[0] == "var" else None
        return {j + 1} if j < len(self.s) and self.s[j] in self.cls(name) else set()

    def _seq(self, p: tuple, j: int) -> set[int]:
        res = {j}
        for c in p[1]:
            res = self.ends_from(c, res)
        return res

    def _alt(self, p: tuple, j: int) -> set[int]:
        res = self.ends_from(p[1][0], [j]) if p[1] else set()
        for c in p[1][1:]:
            res |= self(c, j)
        return res

    def _permute(self, p: tuple, j: int) -> set[int]:
        res: set[int] = set()
        for order in itertools.permutations(p[1]):
            cur = {j}
            for c in order:
                cur = self.ends_from(c, cur)
            res |= cur
        return res

    def _rep(self, p: tuple, j: int) -> set[int]:
        lo, hi, _ = parse_quantifier(p[2])
        cur = {j}
        for _ in range(lo):  # exactly lo repetitions
            cur = self.ends_from(p[1], cur)
        res = set(cur)
        if hi is None:  # any number more: close under one more repetition
            frontier = cur
            while frontier:
                frontier = self.ends_from(p[1], frontier) - res
                res |= frontier
        else:
            for _ in range(hi - lo):
                cur = self.ends_from(p[1], cur)
                res |= cur
        return res


ENGINES: dict[str, Callable[[Query, str], list[set[int]]]] = {
    "re": starts_re,
    "sets": starts_sets,
}


def every_end(starts: Sequence[set[int]]) -> list[int]:
    """Every end: i is reported iff some non-empty run ends at i."""
    return [i for i, js in enumerate(starts) if js]


def skip_past_last_row(starts: Sequence[set[int]]) -> list[int]:
    """Earliest end, non-overlapping: after a report at i, runs must start after i."""
    out = []
    lower = 0
    for i, js in enumerate(starts):
        if any(j >= lower for j in js):
            out.append(i)
            lower = i + 1
    return out


def within(starts: Sequence[set[int]], times: Sequence[int], window: int) -> list[set[int]]:
    """WITHIN, by brute force over start positions: of the runs ``j..i`` ending at each ``i``,
    only those with ``times[i] - times[j] < window``."""
    return [{j for j in js if times[i] - times[j] < window} for i, js in enumerate(starts)]


def latest_starts(starts: Sequence[set[int]], ends: Sequence[int], skip: bool) -> list[int]:
    """Where each reported match at ``ends`` begins: the latest start of the runs ending
    there (the shortest match); with SKIP PAST LAST ROW, of the runs that begin after the
    previous report."""
    out = []
    lower = 0
    for i in ends:
        out.append(max(j for j in starts[i] if j >= lower))
        if skip:
            lower = i + 1
    return out


def match_positions(q: Query, s: str, engine: str = "sets") -> list[int]:
    starts = ENGINES[engine](q, s)
    return skip_past_last_row(starts) if q.skip else every_end(starts)


# --------------------------------------------------------------------------------------------
# Partitions, capacity and timers


@dataclass
class Lives:
    """How the partitioner splits the input: each life is one stored element's history."""

    lives: list[tuple[object, list[int]]] = field(default_factory=list)  # (key, seqs)
    drop_seqs: list[int] = field(default_factory=list)


def crc32(data: bytes) -> int:
    """CRC-32 as the ISO-HDLC standard defines it, bit by bit: reflected polynomial
    0xEDB88320, initial value and final XOR 0xFFFFFFFF."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0xEDB88320 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def concat_key(values: Sequence[object], widths: Sequence[int]) -> int:
    """The key of several partition fields as docs/language.md defines it: each value's bits
    in its field's width (two's complement for a negative integer, 1 for true), the fields
    side by side, the first one listed in the most significant bits."""
    key = 0
    for value, width in zip(values, widths, strict=True):
        key = key << width | int(value) % (1 << width)
    return key


def table_bucket(key: int, key_bits: int, partitions: int, ways: int) -> tuple[object, int]:
    """``--store table``: the bucket of ``key`` (an unsigned ``key_bits``-bit value) and how
    many partitions it holds, as docs/language.md defines them."""
    if (1 << key_bits) <= partitions:  # the key is the entry's index: a bucket of its own
        return ("entry", key), 1
    nbytes = (key_bits + 7) // 8
    return ("bucket", crc32(key.to_bytes(nbytes, "little")) % (partitions // ways)), ways


def partition(
    keys: Sequence[object],
    partitions: int = 256,
    tick_tuples: int = 0,
    timer_bits: int = 4,
    table: tuple | None = None,
) -> Lives:
    """Split the input into sub-stream lives, modelling docs/language.md literally.

    ``keys`` is the partition field per tuple. At most ``partitions`` partitions are stored;
    a tuple of an unstored partition takes a free element with an empty history, or is
    dropped when none is free. A processed tuple sets its element's timer to
    ``2**timer_bits - 1``; a tick after every ``tick_tuples``-th input tuple (dropped ones
    included) decrements every stored timer, and the tick that brings one to zero frees that
    element, forgetting its history.

    With ``table = (key_bits, ways)`` (``--store table``) the keys are unsigned integers of
    ``key_bits`` bits, and the limit is per bucket (:func:`table_bucket`), not overall; with
    ``table = (key_bits, ways, widths)`` each key is a tuple of several fields' values, of
    those widths, which the table takes concatenated (:func:`concat_key`).
    """
    result = Lives()
    stored: dict[object, list] = {}  # key -> [timer, seqs, bucket]
    top = (1 << timer_bits) - 1
    for n, key in enumerate(keys):
        if table is None:
            bucket, room = None, partitions
        else:
            raw = concat_key(key, table[2]) if len(table) > 2 else key
            bucket, room = table_bucket(raw, table[0], partitions, table[1])
        if key in stored:
            stored[key][0] = top
            stored[key][1].append(n)
        elif sum(1 for e in stored.values() if e[2] == bucket) < room:
            seqs = [n]
            stored[key] = [top, seqs, bucket]
            result.lives.append((key, seqs))
        else:
            result.drop_seqs.append(n)
        if tick_tuples and (n + 1) % tick_tuples == 0:
            for k in list(stored):
                stored[k][0] -= 1
                if stored[k][0] == 0:
                    del stored[k]
    return result


# --------------------------------------------------------------------------------------------
# Measures


@dataclass(frozen=True)
class Match:
    """A reported match: the positions of its first and last tuples, its partition's key."""

    first: int
    last: int
    key: object
    query: str


def measure_columns(queries: Sequence[Query]) -> list[str]:
    """The match file's measure columns: every query's measure names in file order, each name
    once (as SQL compares names), spelled as first written."""
    out: dict[str, str] = {}
    for q in queries:
        for alias, _, _ in q.all_measures():
            out.setdefault(name_key(alias), alias)
    return list(out.values())


def value_text(value: object) -> str:
    """A value as a tuple file writes it: BOOL as true/false, integers in decimal."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def match_cells(
    q: Query,
    m: Match,
    rows: Sequence[Mapping[str, object]],
    keys: Sequence[object] | None,
    numbers: dict[tuple[str, object], int],
    columns: Sequence[str],
) -> list[object]:
    """The measure columns' cells of match ``m`` of ``q`` (None where ``q`` has no such
    measure): ``start_seq`` as an int, the others as text. ``numbers`` counts each query's
    matches per partition, so matches must come in stream order within a partition."""
    mine = {}
    if any(kind == "number" for _, kind, _ in q.all_measures()):  # once per match
        numbers[(m.query, m.key)] = numbers.get((m.query, m.key), 0) + 1
    for alias, kind, fld in q.all_measures():
        if kind == "count":  # the partition's tuples from the first to the last
            if keys is None:
                value: object = m.last - m.first + 1
            else:
                value = sum(1 for n in range(m.first, m.last + 1) if keys[n] == m.key)
        elif kind == "number":
            value = numbers[(m.query, m.key)]
        else:
            at = m.first if kind == "first" else m.last
            value = at if fld is None else _by_key(rows[at])[name_key(fld)]
        cell = value if (alias == "start_seq" and kind == "first" and fld is None) else None
        mine[name_key(alias)] = cell if cell is not None else value_text(value)
    return [mine.get(name_key(c)) for c in columns]


# --------------------------------------------------------------------------------------------
# The whole matcher


@dataclass
class Result:
    tuples: int
    #: (seq, query, partition text, *measure cells), sorted: one cell per measure column
    #: (:func:`measure_columns`), None where the match's query has no such measure; a
    #: ``start_seq`` (FIRST(seq)) as an int, the others as the match file's text
    matches: list[tuple]
    drop_seqs: list[int]

    def counts(self, names: Iterable[str]) -> dict[str, int]:
        out = dict.fromkeys(map(name_text, names), 0)
        for m in self.matches:
            name = m[1]
            out[name] += 1
        return out


def run(
    queries: Sequence[Query],
    rows: Sequence[Mapping[str, object]],
    partition_field: str | tuple[str, ...] | None = None,
    partitions: int = 256,
    tick_tuples: int = 0,
    timer_bits: int = 4,
    engine: str = "sets",
    key_text: Callable[[object], str] = str,
    table: tuple | None = None,
) -> Result:
    """Matches of ``queries`` over ``rows`` as ``nfacep match`` should report them
    (``table``: ``--store table``, as :func:`partition` takes it). ``partition_field``: one
    field, or a tuple of several (PARTITION BY a, b), whose values together are the key and
    whose texts are reported one per field."""
    keys: list[object] | None = None  # the partition key of each tuple
    if partition_field is None:  # one sub-stream; capacity and timers do not apply
        lives = Lives(lives=[(None, list(range(len(rows))))])
    else:
        if isinstance(partition_field, str):
            keys = [_by_key(row)[name_key(partition_field)] for row in rows]
        else:
            names = [name_key(f) for f in partition_field]
            keys = [tuple(_by_key(row)[f] for f in names) for row in rows]
        lives = partition(keys, partitions, tick_tuples, timer_bits, table)
    columns = measure_columns(queries)
    numbers: dict[tuple[str, object], int] = {}  # (query, key): its matches so far
    starts_of = ENGINES[engine]
    memo: dict[tuple, list[set[int]]] = {}  # (pattern, defines, string) -> starts
    matches = []
    for key, seqs in lives.lives:
        if partition_field is None:
            text = ""
        elif isinstance(partition_field, str):
            text = key_text(key)
        else:
            text = tuple(key_text(v) for v in key)
        # a sub-stream's string is its tuples' characters in stream order; each tuple
        # carries the life's tuples before it, for PREV (which reads at most 8 back)
        life = [
            {**rows[n], EARLIER: [rows[m] for m in reversed(seqs[max(0, i - 8) : i])]}
            for i, n in enumerate(seqs)
        ]
        for q in queries:
            s = encode(q, life)
            k = (q.pattern, q.defines, s)
            if k not in memo:
                memo[k] = starts_of(q, s)
            starts = memo[k]
            if q.window is not None:
                order = name_key(q.order)
                times = [instant(_by_key(rows[n])[order]) for n in seqs]
                starts = within(starts, times, q.window)
            found = skip_past_last_row(starts) if q.skip else every_end(starts)
            name = name_text(q.name)
            began = latest_starts(starts, found, q.skip)
            for i, j in zip(found, began, strict=True):
                match = Match(seqs[j], seqs[i], key, name)
                cells = match_cells(q, match, rows, keys, numbers, columns)
                matches.append((seqs[i], name, text, *cells))
    matches.sort(key=lambda m: (m[0], m[1]))
    return Result(tuples=len(rows), matches=matches, drop_seqs=lives.drop_seqs)
