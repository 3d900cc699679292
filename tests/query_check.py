"""The check of the bundled queries' data (``queries/*.csv`` and ``*.planted.csv``, written by
``tools/generate_queries.py``): every reported match of every query is a planted one.

    python tests/query_check.py [NAME ...]   # checks queries/NAME.csv (default: every query)

It reads the queries with the project's front end (``nfacep.compile_file``: stream schema,
query names, partition key, PATTERN, typed DEFINE predicates, AFTER MATCH SKIP PAST LAST ROW,
ORDER BY, the WITHIN window in ORDER BY units) and the tuples with the project's reader
(``nfacep.io.reader.read``), but decides the matches, windows included, with the independent
oracle ``tests/oracle.py``, which shares no code with nfacep: a small converter turns the
PATTERN into the oracle's nested tuples and each DEFINE into an oracle predicate, which the
oracle evaluates on every tuple itself (an integer ``+``/``-`` operand, which the oracle's
predicates lack, becomes a derived column computed here with Python integers; see
:class:`PredicateConverter`; FLOAT32 literals and values arrive already rounded to single
precision by the checker and the reader, and compare exactly as Python floats). Each query's
WITHIN window and ORDER BY field are handed to the oracle as they are. The predicates are
deliberately not evaluated with ``nfacep.lang.evaluate.evaluate``: so neither the predicate truth
values nor the matching come from the code the data are meant to test. The check fails,
naming query, seq and partition, unless the oracle's matches are exactly the planted ``match``
rows and no ``near_miss`` row is a match.

The bridge between nfacep and the oracle lives here, in ``tests/``, beside the oracle (which
imports nothing of nfacep); ``tests/reference/test_queries.py`` runs the check and
``tools/generate_queries.py`` runs this file after writing the data. ``tests`` is not a
package: run as a script or under pytest, this file's folder is on ``sys.path``, so
``import oracle`` finds the oracle.
"""

from __future__ import annotations

import csv
import functools
import json
import struct
import sys
from pathlib import Path

import oracle

import nfacep
import nfacep.io.reader
import nfacep.io.tuples
from nfacep.io.tuples import Tuples
from nfacep.lang import ast
from nfacep.lang.predicates import And, Arith, Cmp, Const, FieldRef, Not, Or, Param, PExpr, render
from nfacep.lang.types import BoolType, EnumType, Float32Type
from nfacep.lang.values import format_ipv4
from nfacep.schema import CheckedQuery, Program, Schema

QUERIES = Path(__file__).resolve().parent.parent / "queries"


def _one_key(program) -> str | None:
    """The partition field of a bundled query (they partition by at most one field)."""
    if len(program.partition_fields) > 1:
        raise CheckError("a bundled query partitions by at most one field")
    return program.partition_fields[0] if program.partition_fields else None


def _text(v) -> str:
    """A partition value as ``<name>.planted.csv`` and the CSV files write it."""
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


class CheckError(Exception):
    """A data set disagrees with its planted matches (the message names query, seq, partition)."""


def oracle_pattern(p: ast.Pattern) -> tuple:
    """A checked query's PATTERN (:mod:`nfacep.lang.ast`) as the oracle's nested tuples."""
    match p:
        case ast.Var(name):
            return oracle.var(name)
        case ast.Wildcard():
            return oracle.ANY
        case ast.Empty():
            return oracle.EMPTY
        case ast.Seq(items):
            return oracle.seq(*(oracle_pattern(i) for i in items))
        case ast.Alt(items):
            return oracle.alt(*(oracle_pattern(i) for i in items))
        case ast.Permute(items):
            return oracle.permute(*(oracle_pattern(i) for i in items))
        case ast.Repeat(child, lo, hi, reluctant):
            text = {(0, None): "*", (1, None): "+", (0, 1): "?"}.get((lo, hi))
            if text is None:
                text = f"{{{lo}}}" if lo == hi else f"{{{lo},{'' if hi is None else hi}}}"
            return oracle.rep(oracle_pattern(child), text + ("?" if reluctant else ""))
    raise TypeError(f"no oracle form for the pattern node {p!r}")


_FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}


class PredicateConverter:
    """Typed DEFINE predicates (:mod:`nfacep.lang.predicates`) to the oracle's nested tuples.

    The oracle compares a field with a literal or with another field. An integer ``+``/``-``/``*``
    operand (``open - 20``) has no such form, so it becomes a derived column named by its
    text in brackets (``[open - 20]``), which :func:`oracle_rows` computes per row with exact
    Python integers; the comparison itself is the oracle's. ENUM constants are compared as
    their labels, FLOAT32 ones as the float32 value the checker rounded the literal to.
    """

    def __init__(self, schema: Schema):
        self.schema = schema
        self.derived: dict[str, Arith] = {}

    def query(self, q: CheckedQuery) -> oracle.Query:
        defines = tuple((v, self.pred(e)) for v, e in q.predicates.items() if e is not None)
        return oracle.Query(
            q.name,
            oracle_pattern(q.pattern),
            defines,
            q.skip_past_last_row,
            q.window,
            q.order_field,
        )

    def pred(self, e: PExpr) -> tuple:
        match e:
            case Const(value, "bool"):
                never = ("in", self.schema.names[0], ())  # an empty IN list holds for no row
                return ("not", never) if value else never
            case FieldRef(name, BoolType()):
                return ("cmp", name, "=", True)
            case Not(operand):
                return ("not", self.pred(operand))
            case And(items) | Or(items):
                kind = "and" if isinstance(e, And) else "or"
                return functools.reduce(lambda a, b: (kind, a, b), map(self.pred, items))
            case Cmp(op, left, right, "bool") if not _field_or_literal(left, right):
                a, b = self.pred(left), self.pred(right)
                same = ("or", ("and", a, b), ("and", ("not", a), ("not", b)))
                return same if op == "=" else ("not", same)
            case Cmp(op, left, right, _):
                return self._compare(op, left, right)
        raise TypeError(f"no oracle form for the predicate {render(e)!r}")

    def _compare(self, op: str, left: PExpr, right: PExpr) -> tuple:
        if isinstance(left, Const):
            left, right, op = right, left, _FLIP.get(op, op)
        if isinstance(right, Param):  # its value is each row's ":name" (oracle_rows)
            return ("cmpp", self._column(left), op, right.name)
        if isinstance(right, Const) and right.kind == "ipv4" and right.prefix < 32:
            net = ("ipin", self._column(left), f"{format_ipv4(right.value)}/{right.prefix}")
            return net if op == "=" else ("not", net)
        if isinstance(right, Const):
            return ("cmp", self._column(left), op, _literal(right))
        return ("cmpf", self._column(left), op, self._column(right))

    def _column(self, e: PExpr) -> str:
        if isinstance(e, FieldRef):
            return e.name
        if isinstance(e, Arith):
            name = f"[{render(e)}]"
            self.derived[name] = e
            return name
        raise TypeError(f"no oracle form for the operand {render(e)!r}")


def _field_or_literal(left: PExpr, right: PExpr) -> bool:
    """Whether a comparison is field-to-literal or field-to-field (a ``cmp`` or ``cmpf``)."""
    sides = (left, right)
    return all(isinstance(e, FieldRef | Const) for e in sides) and any(
        isinstance(e, FieldRef) for e in sides
    )


def _literal(c: Const):
    if c.kind == "enum":
        return c.enum.labels[c.value]
    return {"bool": bool, "float": float}.get(c.kind, int)(c.value)


def _arith(e: PExpr, row: dict) -> int:
    match e:
        case FieldRef(name):
            return row[name]
        case Const(value):
            return int(value)
        case Arith("neg", operand):
            return -_arith(operand, row)
        case Arith(op, left, right):
            a, b = _arith(left, row), _arith(right, row)
            return {"+": a + b, "-": a - b, "*": a * b}[op]
    raise TypeError(e)


def oracle_rows(
    tuples: Tuples,
    schema: Schema,
    derived: dict[str, Arith],
    parameters: dict[str, object] | None = None,
) -> list[dict]:
    """The tuples as the oracle reads them: one dict of Python values per row (ENUM as its
    label, FLOAT32 as the exact float), plus the derived columns of :class:`PredicateConverter`
    and the runtime parameters' values (``parameters``, :func:`parameter_values`) as the
    oracle's ``":name"`` columns.
    """
    columns = []
    for f in schema.fields:
        values = tuples.columns[f.name].tolist()
        if isinstance(f.type, EnumType):
            values = [f.type.labels[v] for v in values]
        columns.append(values)
    rows = [dict(zip(schema.names, vals, strict=True)) for vals in zip(*columns, strict=True)]
    for name, e in derived.items():
        for row in rows:
            row[name] = _arith(e, row)
    if parameters:
        rows = oracle.with_parameters(rows, parameters, [])
    return rows


def parameter_values(name: str, program: Program, folder: Path = QUERIES) -> dict[str, object]:
    """The runtime parameters' values the data of ``name`` are planted for
    (``parameters.json``), as the oracle compares them: integers, labels, floats, bools (read
    here, not with nfacep's reader)."""
    if not program.parameters:
        return {}
    given = json.loads((folder / "parameters.json").read_text()).get(name, {})
    out = {}
    for param, ty in program.parameters.items():
        if param not in given:
            raise CheckError(f"{folder / 'parameters.json'}: no value of :{param} for {name}")
        text = given[param]
        if isinstance(ty, EnumType):
            out[param] = text
        elif isinstance(ty, BoolType):
            out[param] = text.lower() == "true"
        elif isinstance(ty, Float32Type):
            out[param] = float(struct.unpack("<f", struct.pack("<f", float(text)))[0])
        else:
            out[param] = int(text)
    return out


def _read_planted(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def check(name: str, folder: Path = QUERIES, planted: list[dict] | None = None) -> list[tuple]:
    """Check ``<name>.csv`` of ``folder`` against its planted rows (``<name>.planted.csv``, or
    ``planted`` given as its dict rows): the oracle's matches must be exactly the ``match``
    rows and no ``near_miss`` row a match. Raises :class:`CheckError` naming every
    disagreement; returns ``(query, matches, near_misses, rows, partitions)`` per query.
    """
    program = nfacep.compile_file(str(folder / f"{name}.sql")).program
    schema, key = program.schema, _one_key(program)
    csv_path = folder / f"{name}.csv"
    with open(csv_path, newline="") as f:
        header = next(csv.reader(f))
    if header != list(schema.names):
        raise CheckError(
            f"{csv_path}: header {header}, expected the fields of stream "
            f"'{schema.name}' in declaration order {list(schema.names)}"
        )
    try:
        tuples = nfacep.io.reader.read(str(csv_path), schema)
        for field in program.order_fields:
            nfacep.io.tuples.check_order(tuples, field)
    except nfacep.DataError as err:
        raise CheckError(str(err)) from None
    converter = PredicateConverter(schema)
    queries = [converter.query(q) for q in program.queries]
    rows = oracle_rows(tuples, schema, converter.derived, parameter_values(name, program, folder))
    # as many partitions as tuples and no ticks: the partitioner never drops nor forgets one
    result = oracle.run(
        queries, rows, key, partitions=max(1, len(rows)), tick_tuples=0, key_text=_text
    )
    if planted is None:
        planted = _read_planted(folder / f"{name}.planted.csv")
    problems = _planted_problems(name, planted, program, rows)
    found = set(result.matches)
    want = {_row_key(p) for p in planted if p["kind"] == "match"}
    avoid = {_row_key(p) for p in planted if p["kind"] == "near_miss"}
    for what, bad in (
        ("a match that is not planted", found - want - avoid),
        ("a planted match that the oracle does not report", want - found),
        ("a near_miss that is a match", found & avoid),
    ):
        problems += [
            f"{name}.sql: query {q}: {what}: seq {seq}, partition {part}"
            for seq, q, part in sorted(bad)
        ]
    if problems:
        raise CheckError("\n".join(problems))
    parts = len({row[key] for row in rows}) if key else 1
    return [
        (
            q.name,
            sum(1 for k in want if k[1] == q.name),
            sum(1 for k in avoid if k[1] == q.name),
            len(rows),
            parts,
        )
        for q in program.queries
    ]


def _row_key(p: dict) -> tuple[int, str, str]:
    return int(p["seq"]), p["query"], p["partition"]


def _planted_problems(
    name: str, planted: list[dict], program: Program, rows: list[dict]
) -> list[str]:
    """Planted rows that name no query of the file, no tuple, or another partition."""
    names = {q.name for q in program.queries}
    key = _one_key(program)
    problems = []
    for p in planted:
        where = f"{name}.planted.csv: query {p['query']}, seq {p['seq']}"
        if p["query"] not in names or p["kind"] not in ("match", "near_miss"):
            problems.append(f"{where}: unknown query or kind {p['kind']!r}")
        elif not 0 <= int(p["seq"]) < len(rows):
            problems.append(f"{where}: no such tuple ({len(rows)} rows)")
        elif key and _text(rows[int(p["seq"])][key]) != p["partition"]:
            problems.append(
                f"{where}: partition {p['partition']}, but the tuple's {key} is "
                f"{_text(rows[int(p['seq'])][key])}"
            )
    return problems


def main(argv: list[str] | None = None) -> int:
    """Check the data of the queries named in ``argv`` (default: every query file), print a
    line per query; 1 and the problems on stderr when a check fails."""
    names = argv if argv else sorted(p.stem for p in QUERIES.glob("*.sql"))
    try:
        for name in names:
            for qname, nm, nn, rows, parts in check(name):
                print(
                    f"{name}.sql {qname:15s} rows={rows:4d} partitions={parts:3d} "
                    f"matches={nm:2d} near_misses={nn:2d}"
                )
    except CheckError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
