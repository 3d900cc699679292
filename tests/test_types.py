"""The value types and operators of issue 27 items 4 and 7 through the public commands:
``*`` by an integer constant, ``IPV4`` and ``TIMESTAMP(unit)``. ``nfacep match`` against
results worked out by hand, and ``nfacep sim`` (Icarus) against ``nfacep match``."""

from __future__ import annotations

import pathlib

import pytest

from nfacep.cli import main
from nfacep.sim import build


def run(tmp_path: pathlib.Path, command: str, query: str, rows: str, *options: str) -> str:
    """``nfacep command`` on the query and CSV text; the match file's text."""
    (tmp_path / "q.sql").write_text(query)
    (tmp_path / "t.csv").write_text(rows)
    out = tmp_path / f"{command}.csv"
    argv = [command, str(tmp_path / "q.sql"), "--input", str(tmp_path / "t.csv")]
    assert main([*argv, "--output", str(out), *options]) == 0
    return out.read_text()


def simulated(tmp_path: pathlib.Path, query: str, rows: str, *options: str) -> str:
    """``nfacep sim --check`` under Icarus: it fails on any record that differs from the
    reference matcher's; the match file must also equal ``nfacep match``'s."""
    missing = build.simulator_available("icarus")
    if missing:
        pytest.fail(f"{missing} (CI installs it with tools/install-simulators.sh)")
    cache = tmp_path / "build"
    got = run(tmp_path, "sim", query, rows, "--check", "--build-dir", str(cache), *options)
    assert got == run(tmp_path, "match", query, rows, *options)
    return got


# --- * by an integer constant ----------------------------------------------------------------

MUL_QUERY = """\
CREATE STREAM ticks (price UINT(64), delta INT(64));
QUERY up PATTERN (UP) DEFINE UP AS price * 10 > 11 * delta;
QUERY down PATTERN (DOWN) DEFINE DOWN AS -3 * delta + price * -2 >= -40;
"""
# up: 10 * price > 11 * delta; down: -3 * delta - 2 * price >= -40 (each tuple that satisfies
# one is a match of that query)
MUL_ROWS = """\
price,delta
18446744073709551615,9223372036854775807
5,10
11,10
12,10
4,-9223372036854775808
0,14
0,13
"""
# row 0: 10 * (2**64 - 1) > 11 * (2**63 - 1) (both beyond 64 bits); down far below -40
# row 1: 50 > 110 no; -30 - 10 = -40 yes      row 2: 110 > 110 no; -52 no
# row 3: 120 > 110 yes; -54 no                row 4: 40 > -11 * 2**63 yes; 3 * 2**63 - 8 yes
# row 5: 0 > 154 no; -42 no                   row 6: 0 > 143 no; -39 yes
MUL_MATCHES = "seq,query,partition\n0,up,\n1,down,\n3,up,\n4,down,\n4,up,\n6,down,\n"


def test_products_by_constants_are_exact(tmp_path):
    assert run(tmp_path, "match", MUL_QUERY, MUL_ROWS) == MUL_MATCHES


def test_products_by_constants_in_the_gateware(tmp_path):
    assert simulated(tmp_path, MUL_QUERY, MUL_ROWS) == MUL_MATCHES
