"""PREV(field[, k]) through the command line: the examples of docs/language.md ('Earlier tuples:
PREV and NULL'), NULL at a partition's start in three-valued logic, dropped tuples that are no
rows, a timer that forgets a partition's history (whole and in pieces), what ``check`` shows.
What PREV matches on random queries and streams is judged against the oracle in
test_oracle_differential.py; the gateware (both stores) against the reference in
test_hdl_engine.py and test_sim.py."""

import csv
import json

import pytest

from nfacep.cli import main

TICKER = "CREATE STREAM ticker (rowtime UINT(32), symbol ENUM('ACME', 'BETA'), price UINT(32));\n"

V_SHAPE = """
SELECT * FROM ticker
MATCH_RECOGNIZE (
    PARTITION BY symbol
    ORDER BY rowtime
    MEASURES FIRST(seq) AS start_seq
    AFTER MATCH SKIP PAST LAST ROW
    PATTERN (START_ROW PRICE_DOWN+ PRICE_UP)
    DEFINE
        PRICE_DOWN AS price < PREV(price),
        PRICE_UP AS price > PREV(price)
) AS v_shape;
"""

#: the prices of docs/language.md's V-shape example, seq 0 to 8
PRICES = [
    ("ACME", 12),
    ("BETA", 20),
    ("ACME", 17),
    ("ACME", 13),
    ("BETA", 19),
    ("ACME", 11),
    ("ACME", 16),
    ("BETA", 22),
    ("ACME", 25),
]

VALUES = "CREATE STREAM s (k UINT(8), v UINT(8));\n"


def match(tmp_path, query: str, rows, header: str, *options: str) -> list[list[str]]:
    """``nfacep match`` of ``query`` on ``rows``: the match file's rows, header first."""
    (tmp_path / "q.sql").write_text(query)
    lines = [header] + [",".join(map(str, r)) for r in rows]
    (tmp_path / "t.csv").write_text("\n".join(lines) + "\n")
    out = tmp_path / "m.csv"
    argv = ["match", str(tmp_path / "q.sql"), "--input", str(tmp_path / "t.csv")]
    assert main([*argv, "--output", str(out), *options]) == 0
    with open(out, newline="") as f:
        return list(csv.reader(f))


def seqs(table: list[list[str]]) -> list[int]:
    return [int(r[0]) for r in table[1:]]


@pytest.mark.parametrize("chunk", [[], ["--chunk", "1"], ["--chunk", "4"]])
def test_v_shape_of_the_docs(tmp_path, chunk):
    rows = [(t, s, p) for t, (s, p) in enumerate(PRICES)]
    got = match(tmp_path, TICKER + V_SHAPE, rows, "rowtime,symbol,price", *chunk)
    assert got == [
        ["seq", "query", "partition", "start_seq"],
        ["6", "v_shape", "ACME", "3"],
        ["7", "v_shape", "BETA", "1"],
    ]


def test_rising_three_times(tmp_path):
    query = VALUES + (
        "SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY k AFTER MATCH REPORT EVERY END "
        "PATTERN (UP{3}) DEFINE UP AS v > PREV(v)) AS rising;"
    )
    # key 1: 1 2 3 4 5 rises from its second tuple on (seq 2, 4, 6, 8); key 2: 9 1 2 3 3
    # rises twice only (seq 5 and 7), then 3 is not above 3
    rows = [(1, 1), (2, 9), (1, 2), (2, 1), (1, 3), (2, 2), (1, 4), (2, 3), (1, 5), (2, 3)]
    assert seqs(match(tmp_path, query, rows, "k,v")) == [6, 8]


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        # the first tuple of each partition: PREV(v) is NULL, the comparison unknown
        ("v > PREV(v)", [3]),
        ("NOT (v > PREV(v))", [2]),
        ("NOT (v <= PREV(v))", [3]),
        # unknown OR true is true; unknown AND false is false, NOT of it true; unknown AND
        # true is unknown, and so is NOT of it
        ("v > PREV(v) OR v = 7", [0, 1, 3]),
        ("NOT (v > PREV(v) AND v = 8)", [0, 1, 2]),
        ("NOT (v > PREV(v) AND v = 7)", [2, 3]),
        # two back: known from a partition's third tuple only
        ("PREV(v, 2) < v OR PREV(v, 2) >= v", []),
        ("PREV(v) + 1 = v OR PREV(v) - 1 = v", [3]),
    ],
)
def test_null_at_a_partition_start_is_unknown(tmp_path, condition, expected):
    query = VALUES + f"QUERY q PARTITION k PATTERN (A) DEFINE A AS {condition};"
    rows = [(1, 7), (2, 7), (1, 3), (2, 8)]
    assert seqs(match(tmp_path, query, rows, "k,v")) == expected


def test_a_dropped_tuple_is_no_row(tmp_path):
    """A full partitioner drops key 2's tuple: key 1's next tuple reads key 1's before it."""
    query = VALUES + "QUERY q PARTITION k PATTERN (A) DEFINE A AS v = PREV(v) + 1;"
    rows = [(1, 1), (2, 5), (1, 2), (2, 6)]
    got = match(tmp_path, query, rows, "k,v", "--store", "pipeline", "--partitions", "1")
    assert seqs(got) == [2]
    summary = json.loads((tmp_path / "m.summary.json").read_text())
    assert summary["drop_seqs"] == [1, 3]


@pytest.mark.parametrize("chunk", [[], ["--chunk", "1"], ["--chunk", "2"]])
def test_a_timer_forgets_the_history(tmp_path, chunk):
    """Key 0's element is freed by the third tick after its tuple (2-bit timers, a tick after
    every tuple): its next tuple starts with no history, so PREV(v) is NULL there."""
    query = VALUES + "QUERY q PARTITION k PATTERN (A) DEFINE A AS v = PREV(v);"
    rows = [(0, 5), (1, 0), (1, 0), (1, 0), (0, 5), (0, 5)]
    plain = match(tmp_path, query, rows, "k,v", *chunk)
    assert seqs(plain) == [2, 3, 4, 5]
    timed = match(tmp_path, query, rows, "k,v", "--tick-tuples", "1", "--timer-bits", "2", *chunk)
    assert seqs(timed) == [2, 3, 5]


def test_check_shows_the_history(tmp_path, capsys):
    path = tmp_path / "v.sql"
    path.write_text(TICKER + V_SHAPE)
    assert main(["check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "p0: price < PREV(price)" in out
    assert "history (each partition keeps the last values PREV reads): price 1 × 32 bits" in out
    assert main(["check", "--json", str(path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["history"] == [{"field": "price", "depth": 1, "bits": 32}]
    assert main(["explain", str(path)]) == 0
    assert "PRICE_UP: price > PREV(price)" in capsys.readouterr().out


def test_check_board_counts_the_history_in_each_entry(tmp_path, capsys):
    """The table's entry grows by the history: 32 bits of price and 1 counting its tuples."""
    pytest.importorskip("amaranth")
    entry = {}
    for name, text in (
        ("prev", V_SHAPE),
        ("plain", V_SHAPE.replace("PREV(price)", "5")),
    ):
        path = tmp_path / f"{name}.sql"
        path.write_text(TICKER + text)
        argv = ["check", str(path), "--json", "--board", "ulx3s-85f", "--store", "table"]
        assert main([*argv, "--partitions", "1024"]) == 0
        doc = json.loads(capsys.readouterr().out)
        entry[name] = doc["board"]["resources"]["brams"]["entry_bits"]
    assert entry["prev"] - entry["plain"] == 32 + 1
