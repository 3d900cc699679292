"""The checker's reading of ``MEASURES``: which items the engine can report, and why not others.

A measure is ``FIRST(field)``, ``LAST(field)``, ``COUNT(*)`` or ``MATCH_NUMBER()``, each
``AS name``; ``seq`` in FIRST or LAST is the tuple's position in the input. The engine reports
where a match begins and ends; the host reads the values there (:mod:`nfacep.measures`).
``FIRST(X.field)`` is accepted where every match provably begins with a tuple of ``X`` (every
variable a match can begin with is ``X``), and ``LAST(X.field)`` where every match ends with
one: there they are ``FIRST(field)`` and ``LAST(field)``. Anything else is refused with why.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from ..errors import QueryError, QueryErrors
from ..schema import Measure, Schema, partition_columns
from . import ast
from .names import case_clash, declare
from .unsupported import measure_semantics_error

__all__ = ["RESERVED", "check_measures", "edge_vars"]

#: the match file's own columns: no measure may take their names
RESERVED = ("seq", "query", "partition")

_WHAT = (
    "the measures are FIRST(field), LAST(field), COUNT(*), MATCH_NUMBER() and FIRST(seq), "
    "each AS name"
)


def check_measures(
    q: ast.Query,
    schema: Schema,
    field: Callable[[ast.Column], ast.FieldDecl],
    partition: tuple[str, ...],
    columns: dict,
) -> tuple[Measure, ...]:
    """The checked ``MEASURES`` of ``q``, partitioned by the fields ``partition``; ``field``
    resolves an unqualified column (raising for an unknown one); ``columns``: the measure
    names of the file's queries before, by upper-case fold (the match file has a column per
    name, spelled as first written), to which ``q``'s are added. Raises QueryError (a
    QueryErrors when there are several) at each item the engine cannot report."""
    out: list[Measure] = []
    errors: list[QueryError] = []
    seen: dict = {}
    # the match file's own columns (``partition_<field>`` with several partition fields),
    # compared quoted or not: the header would say a name twice
    taken = list(dict.fromkeys([*RESERVED, *partition_columns(partition)]))
    for m in q.measures:
        k = ast.key(m.alias, m.quoted)
        if m.alias.lower() in (c.lower() for c in taken):
            errors.append(
                QueryError(
                    f"measure name '{m.alias}' is a column the match file already has "
                    f"({', '.join(taken)}): choose another",
                    m.alias_pos,
                )
            )
        else:
            try:  # a name once per query, and in one case per file: the columns' names
                declare(
                    seen,
                    m.alias,
                    m.quoted,
                    m.alias_pos,
                    "measure",
                    f"measure name '{m.alias}' is given twice",
                )
                earlier = columns.setdefault(m.alias.upper(), (m.alias, m.quoted, m.alias_pos))
                if ast.key(earlier[0], earlier[1]) != k:
                    raise case_clash("measure", ast.quote(m.alias, m.quoted), earlier, m.alias_pos)
            except QueryError as err:
                errors.append(err)
        if m.semantics is not None:
            errors.append(measure_semantics_error(m.semantics, m.semantics_pos))
        try:  # each item on its own, as each DEFINE
            kind, name = _read(m.expr, m.pos, q, schema, field)
        except QueryError as err:
            errors.append(err)
            continue
        out.append(Measure(m.alias, kind, name, quoted=m.quoted))
    if errors:
        raise QueryErrors.of(errors)
    return tuple(out)


def _read(expr, at, q: ast.Query, schema: Schema, field) -> tuple[str, str | None]:
    """The kind of measure ``expr`` (written at ``at``) is and the field it reads (None:
    none, or ``seq``)."""
    pos = getattr(expr, "pos", None)
    if isinstance(expr, ast.Column):
        raise QueryError(
            f"the measure '{ast.dump(expr)}' is not supported: {_WHAT} (a bare field has a "
            "value on every row of a match: say which, FIRST or LAST)",
            pos,
        )
    if not isinstance(expr, ast.Call):
        raise QueryError(
            f"this measure is not supported: {_WHAT}; expressions, "
            "aggregates and other functions are not (the engine reports where a match begins "
            "and ends, and values are read there)",
            at,
        )
    if expr.name == "COUNT":
        if expr.args != (ast.Column("*"),):
            raise QueryError(
                "COUNT of a field or of a variable's rows is not supported: COUNT(*) counts "
                "the tuples of the match's partition from its first tuple to its last",
                pos,
            )
        return "count", None
    if expr.name == "MATCH_NUMBER":
        if expr.args:
            raise QueryError("MATCH_NUMBER() takes no arguments", pos)
        return "number", None
    if expr.name not in ("FIRST", "LAST"):
        raise QueryError(f"the measure {expr.name}(…) is not supported: {_WHAT}", pos)
    if len(expr.args) != 1 or not isinstance(expr.args[0], ast.Column):
        raise QueryError(
            f"{expr.name} takes one field (FIRST(field), LAST(X.field)); an offset or an "
            "expression is not supported",
            pos,
        )
    col = expr.args[0]
    kind = expr.name.lower()
    if col.qualifier is not None:
        _check_qualifier(col, kind, q)
        col = dataclasses.replace(col, qualifier=None, qualifier_quoted=False)
    if not col.quoted and col.name.lower() == "seq":
        if schema.resolve("seq") is not None:
            raise QueryError(
                f"{expr.name}(seq) is the position of the tuple a match "
                f"{'begins' if kind == 'first' else 'ends'} at, but stream '{schema.name}' "
                "has a field named seq: rename the field",
                col.pos,
            )
        return kind, None
    if col.name == "*":
        raise QueryError(f"{expr.name}(*) is not supported: name a field", pos)
    return kind, field(col).name


def _check_qualifier(col: ast.Column, kind: str, q: ast.Query) -> None:
    """Accept ``FIRST(X.f)`` only where every match begins with X, ``LAST(X.f)`` only where
    every match ends with X: there the qualified measure is the unqualified one."""
    x = ast.key(col.qualifier or "", col.qualifier_quoted)
    edge = edge_vars(q.pattern, first=kind == "first")
    if edge != {x}:
        where = "begins" if kind == "first" else "ends"
        written = ast.quote(col.qualifier or "", col.qualifier_quoted)
        others = sorted("." if v is None else v for v in edge - {x})
        raise QueryError(
            f"{kind.upper()}({written}.{col.name}) is accepted only where every match {where} "
            f"with a tuple of {written}, but a match may {where[:-1]} with "
            f"{', '.join(others) or 'no tuple of it'}: write {kind.upper()}({col.name}) for the "
            f"tuple a match {where} at",
            col.pos,
        )


def edge_vars(p: ast.Pattern, *, first: bool) -> set[str | None]:
    """The variables (their keys; None for the wildcard ``.``) a non-empty match of ``p`` may
    begin with (``first``) or end with."""
    match p:
        case ast.Var(name, _, quoted):
            return {ast.key(name, quoted)}
        case ast.Wildcard():
            return {None}
        case ast.Empty() | ast.Anchor():
            return set()
        case ast.Seq(items):
            out: set[str | None] = set()
            for item in items if first else reversed(items):
                out |= edge_vars(item, first=first)
                if not _nullable(item):
                    break
            return out
        case ast.Alt(items) | ast.Permute(items):
            return set().union(*(edge_vars(i, first=first) for i in items))
        case ast.Repeat(child, _, hi):
            return set() if hi == 0 else edge_vars(child, first=first)
        case ast.Exclusion(child):
            return edge_vars(child, first=first)
    raise TypeError(p)


def _nullable(p: ast.Pattern) -> bool:
    """Whether ``p`` matches the empty sequence."""
    match p:
        case ast.Var() | ast.Wildcard():
            return False
        case ast.Empty() | ast.Anchor():
            return True
        case ast.Seq(items) | ast.Permute(items):
            return all(_nullable(i) for i in items)
        case ast.Alt(items):
            return any(_nullable(i) for i in items)
        case ast.Repeat(child, lo, _):
            return lo == 0 or _nullable(child)
        case ast.Exclusion(child):
            return _nullable(child)
    raise TypeError(p)
