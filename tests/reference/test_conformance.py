"""The conformance set (tests/conformance/, issue 27): Flink's documented MATCH_RECOGNIZE
examples, each run through ``nfacep match`` and compared with the rows Flink printed for it.

Flink's rows (``flink.csv``) were written by benchmarks/flink_conformance.py, which runs the
example through PyFlink; this test never runs Flink. Both sides are brought to one form
(tests/conformance/README.md): a column per PARTITION BY field, named as declared, then one per
measure; values as nfacep's tuple files write them; rows sorted. An example's ``query.sql``
says in a ``-- conformance:`` line whether nfacep reports Flink's rows (``same``) or differs by
design (``differs``): then ``nfacep.csv`` holds nfacep's rows, derived by hand in the example's
comments from docs/language.md, and the test asserts them exactly and that Flink's differ;
``differs as NAME`` also asserts that nfacep's rows are Flink's for the example NAME.
"""

import contextlib
import csv
import functools
import io
import json
import re
from pathlib import Path

import pytest

from nfacep.cli import main

SET = Path(__file__).parents[1] / "conformance"
EXAMPLES = sorted(p.parent.name for p in SET.glob("*/query.sql"))
_KIND = re.compile(r"^-- conformance: (same|differs(?: as (\w+))?)$", re.M)


def kind(example: str) -> tuple[str, str | None]:
    found = _KIND.findall((SET / example / "query.sql").read_text())
    assert len(found) == 1, f"{example}/query.sql needs one '-- conformance:' line"
    return found[0][0].split()[0], found[0][1] or None


def read_rows(path: Path) -> tuple[list[str], list[list[str]]]:
    with open(path, newline="") as f:
        header, *rows = list(csv.reader(f))
    return header, rows


def project(header: list[str], rows: list[list[str]], columns: list[str]) -> list[list[str]]:
    """``rows`` with ``columns`` only, in that order, sorted."""
    missing = [c for c in columns if c not in header]
    assert not missing, f"columns {missing} not in {header}"
    at = [header.index(c) for c in columns]
    return sorted([row[i] for i in at] for row in rows)


def nfacep_form(example: str, tmp_path: Path, command: str = "match") -> tuple[list[str], list]:
    """``nfacep COMMAND`` on the example, its match file in the comparable form."""
    query, out = SET / example / "query.sql", tmp_path / f"{example}.csv"
    assert main([command, str(query), "--input", str(SET / example / "input.csv"), "--output",
                 str(out)]) == 0  # fmt: skip
    header, rows = read_rows(out)
    assert header[:2] == ["seq", "query"]
    keys = len(partition_fields(example))
    measures = header[2 + max(keys, 1) :]
    named = [*partition_fields(example), *measures]
    cells = [row[2 : 2 + keys] + row[2 + max(keys, 1) :] for row in rows]
    return named, sorted(cells)


@functools.cache
def partition_fields(example: str) -> list[str]:
    """The example's PARTITION BY fields, as ``nfacep check --json`` lists them."""
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        assert main(["check", "--json", str(SET / example / "query.sql")]) == 0
    return [f["name"] for f in json.loads(text.getvalue())["partition_fields"]]


def test_the_set_is_there():
    assert {
        "basic",
        "v_shape",
        "greedy",
        "reluctant",
        "rising",
        "within",
        "memory_negated",
        "memory_reluctant",
    } <= set(EXAMPLES)


@pytest.mark.parametrize("example", EXAMPLES)
def test_nfacep_against_flink(example, tmp_path):
    columns, ours = nfacep_form(example, tmp_path)
    flink = project(*read_rows(SET / example / "flink.csv"), columns)
    how, like = kind(example)
    if how == "same":
        assert ours == flink
        assert not (SET / example / "nfacep.csv").exists()
        return
    stated = project(*read_rows(SET / example / "nfacep.csv"), columns)
    assert ours == stated
    assert ours != flink
    if like is not None:
        assert ours == project(*read_rows(SET / like / "flink.csv"), columns)


@pytest.mark.slow
@pytest.mark.parametrize("example", ["basic", "greedy", "within"])
def test_sim_reports_what_match_does(example, tmp_path):
    """The gateware (Icarus) on three small examples: the same rows as ``nfacep match``."""
    pytest.importorskip("cocotb")
    (tmp_path / "sim").mkdir()
    assert nfacep_form(example, tmp_path / "sim", "sim") == nfacep_form(example, tmp_path)
