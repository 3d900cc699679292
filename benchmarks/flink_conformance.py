"""Run the conformance set (tests/conformance/) through Apache Flink and write what it prints.

Each example directory holds ``query.sql`` (nfacep's file: a ``CREATE STREAM`` and one
``SELECT * … MATCH_RECOGNIZE`` statement, written as Flink's documentation writes it) and
``input.csv``. For each, this script declares the stream as a Flink table over the CSV rows,
runs the statement in PyFlink's streaming mode (event time: the ORDER BY field is the rowtime
attribute, its watermark the field itself; the bounded input ends with the final watermark,
which flushes every pending match) and writes Flink's rows to ``flink.csv`` in the comparable
form that tests/reference/test_conformance.py also derives from nfacep's match file:

- one column per PARTITION BY field, named as declared, then one per measure, named as
  written after ``AS`` (Flink's ``SELECT *`` of ONE ROW PER MATCH: partition columns, then
  measures);
- values written as nfacep's tuple files write them: TIMESTAMP(MILLISECOND) as
  ``YYYY-MM-DDTHH:MM:SS.mmmZ``, integers in decimal, ENUM labels as they are;
- rows sorted (Flink's order across partitions is not the input's).

It does not import nfacep, and runs in a virtual environment of its own (PyFlink pins its own
numpy and pyarrow; Java 11 or 17 must be installed)::

    python3 -m venv /work/flinkvenv && /work/flinkvenv/bin/pip install apache-flink
    /work/flinkvenv/bin/python benchmarks/flink_conformance.py [EXAMPLE …]
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import re
import sys
import tempfile
from pathlib import Path

SET = Path(__file__).resolve().parent.parent / "tests" / "conformance"

_STREAM = re.compile(r"CREATE\s+STREAM\s+(\w+)\s*\((.*?)\)\s*;", re.S | re.I)
_FIELD = re.compile(r"(\w+)\s+(ENUM\s*\(.*?\)|\w+(?:\s*\(\s*\w+\s*\))?)", re.S)
_ORDER = re.compile(r"ORDER\s+BY\s+(\w+)", re.I)
_PARTITION = re.compile(r"PARTITION\s+BY\s+(\w+(?:\s*,\s*\w+)*)", re.I)


#: how far the watermark trails the ORDER BY field: Flink's CEP operator drops a row whose time
#: is not after the watermark, so a watermark equal to the field would drop rows of another
#: partition with the same time (ties). The inputs of the set span less than this; the bounded
#: input's final watermark still flushes every match.
LATE = "INTERVAL '1' DAY"


def strip_comments(text: str) -> str:
    return re.sub(r"--[^\n]*", "", text)


def flink_type(nfacep_type: str) -> str:
    """The Flink SQL type of an nfacep field type (the ones the set uses)."""
    t = nfacep_type.upper().replace(" ", "")
    if t.startswith("ENUM"):
        return "STRING"
    if t.startswith(("INT", "UINT")):
        return "BIGINT"
    if t == "TIMESTAMP(MILLISECOND)":
        return "TIMESTAMP(3)"
    if t in ("BOOL", "BOOLEAN"):
        return "BOOLEAN"
    raise SystemExit(f"flink_conformance: no Flink type for {nfacep_type}")


def parse(example: Path) -> tuple[str, list[tuple[str, str]], str, str]:
    """(stream name, [(field, nfacep type)], the SELECT statement, ORDER BY field), from the
    example's ``flink.sql`` where nfacep's ``query.sql`` uses what Flink refuses (PREV)."""
    source = example / "flink.sql"
    if not source.exists():
        source = example / "query.sql"
    text = strip_comments(source.read_text())
    stream = _STREAM.search(text)
    if stream is None:
        raise SystemExit(f"{example}/query.sql: no CREATE STREAM")
    fields = [(m[1], m[2]) for m in _FIELD.finditer(stream[2])]
    select = text[stream.end() :].strip().rstrip(";").strip()
    order = _ORDER.search(select)
    if order is None:
        raise SystemExit(f"{example}/query.sql: Flink needs ORDER BY a time attribute")
    return stream[1], fields, select, order[1]


def cell(value) -> str:
    """A Flink value written as nfacep writes the field."""
    if value is None:
        return ""
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def run(example: Path) -> list[list[str]]:
    from pyflink.table import EnvironmentSettings, TableEnvironment

    name, fields, select, order = parse(example)
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    env.get_config().set("parallelism.default", "1")
    with tempfile.TemporaryDirectory() as tmp:
        rows = (example / "input.csv").read_text().splitlines()[1:]
        (Path(tmp) / "input.csv").write_text("\n".join(rows) + "\n")
        columns = ",\n".join(f"  {f} {flink_type(t)}" for f, t in fields)
        env.execute_sql(
            f"CREATE TABLE {name} (\n{columns},\n  WATERMARK FOR {order} AS {order} - {LATE}\n)"
            f" WITH ("
            f"'connector' = 'filesystem', 'path' = '{tmp}/input.csv', 'format' = 'csv')"
        )
        result = env.execute_sql(select)
        header = list(result.get_table_schema().get_field_names())
        with result.collect() as it:
            out = sorted([cell(v) for v in row] for row in it)
    return [header, *out]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("examples", nargs="*", help="example directories' names (default: all)")
    args = ap.parse_args(argv)
    names = args.examples or sorted(p.parent.name for p in SET.glob("*/query.sql"))
    for n in names:
        rows = run(SET / n)
        with open(SET / n / "flink.csv", "w", newline="") as f:
            csv.writer(f, lineterminator="\n").writerows(rows)
        print(f"{n}: {len(rows) - 1} rows -> tests/conformance/{n}/flink.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
