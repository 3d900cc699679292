# amaranth: UnusedElaboratable=no
"""Where a match begins: ``MEASURES FIRST(seq) AS start_seq`` (issue 14).

The commands end to end: ``match`` writes the ``start_seq`` column, ``check`` and ``explain``
say which queries report it, ``sim`` (the emitted Verilog, batch and per-cycle testbenches,
both stores) reports the same starts, records carry them, and the state costs nothing for
queries that do not ask. What start_seq is, is judged against the oracle in
test_oracle_differential.py; the gateware against the reference in test_hdl_engine.py.
"""

import json

import pytest

import nfacep
from nfacep import wire
from nfacep.cli import main
from nfacep.params import EngineParams
from nfacep.result import Result

# Five failed logins then a success, within a minute, per source; `plain` does not report
# start_seq and shares the file
QUERY = """CREATE STREAM s (k UINT(8), ev ENUM('F', 'OK', 'X'), ts UINT(32));
SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts
    MEASURES FIRST(seq) AS start_seq
    AFTER MATCH REPORT EVERY END
    PATTERN (F{2,} OK) WITHIN 60 DEFINE F AS ev = 'F', OK AS ev = 'OK') AS brute;
QUERY plain FROM s
PARTITION k
PATTERN ( OK )
DEFINE OK AS (ev = 'OK');
QUERY skip FROM s
PARTITION k
MEASURES FIRST(seq) AS start_seq
AFTER MATCH SKIP PAST LAST ROW
PATTERN ( F .* OK )
DEFINE F AS (ev = 'F') OK AS (ev = 'OK');
"""
# key 1: F F F OK (F{2,} OK may start at 0 or 2: the latest is 2) and, 2^32 - 6 later, OK;
# key 2: F F, then 70 later F F OK (the window leaves only the starts 6 and 7: brute starts at
# 6, the latest start of F .* OK is 7)
TUPLES = (
    "k,ev,ts\n1,F,0\n2,F,1\n1,F,2\n1,F,3\n2,F,4\n1,OK,5\n2,F,74\n2,F,75\n2,OK,76\n1,OK,4294967295\n"
)
WANT = (
    "seq,query,partition,start_seq\n"
    "5,brute,1,2\n5,plain,1,\n5,skip,1,3\n"
    "8,brute,2,6\n8,plain,2,\n8,skip,2,7\n"
    "9,plain,1,\n"
)


def files(tmp_path):
    (tmp_path / "q.sql").write_text(QUERY)
    (tmp_path / "t.csv").write_text(TUPLES)
    return str(tmp_path / "q.sql"), str(tmp_path / "t.csv")


def test_match_writes_where_matches_begin(tmp_path, capsys):
    q, t = files(tmp_path)
    out = tmp_path / "m.csv"
    assert main(["match", q, "--input", t, "--output", str(out)]) == 0
    assert out.read_text() == WANT
    capsys.readouterr()
    assert main(["check", q]) == 0
    text = capsys.readouterr().out
    assert (
        "query brute: 3 NFA states, every match end, ORDER BY ts, WITHIN 60, reports "
        "start_seq" in text
    )
    assert "query plain: 1 NFA states, every match end\n" in text
    assert main(["explain", q]) == 0
    assert "skip past last row, reports start_seq" in capsys.readouterr().out
    assert main(["check", "--json", q]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [x["start_seq"] for x in doc["queries"]] == [True, False, True]


def test_a_file_without_start_seq_keeps_three_columns(tmp_path):
    (tmp_path / "q.sql").write_text(
        QUERY.split("QUERY plain")[0].replace("MEASURES FIRST(seq) AS start_seq\n    ", "")
    )
    (tmp_path / "t.csv").write_text(TUPLES)
    out = tmp_path / "m.csv"
    assert (
        main(
            [
                "match",
                str(tmp_path / "q.sql"),
                "--input",
                str(tmp_path / "t.csv"),
                "--output",
                str(out),
            ]
        )
        == 0
    )
    assert out.read_text() == "seq,query,partition\n5,brute,1\n8,brute,2\n"


def test_records_carry_the_starts_of_the_queries_that_ask():
    """A record's ``starts`` holds one SEQ_BITS slot per query reporting start_seq, in file
    order; the result goes to records and back unchanged."""
    nfa = nfacep.compile_text(QUERY)
    assert wire.start_queries(nfa) == [0, 2]
    fmt = wire.record_format(nfa)
    assert fmt.widths["starts"] == 2 * wire.SEQ_BITS
    assert (
        "starts"
        not in wire.record_format(
            nfacep.compile_text(QUERY.replace("MEASURES FIRST(seq) AS start_seq", ""))
        ).widths
    )
    rec = wire.Record(8, 2, 0b111, 0, 6 | 1 << wire.SEQ_BITS)
    assert fmt.decode_bytes(fmt.encode_bytes(rec)) == rec
    got = Result.from_records(nfa, 10, [rec], EngineParams())
    assert got.matches == [(8, "brute", "2", 6), (8, "plain", "2", None), (8, "skip", "2", 1)]
    import numpy as np

    from nfacep.io.tuples import Tuples

    keys = Tuples(
        {
            "k": np.array([0] * 8 + [2, 0], dtype=np.uint8),
            "ev": np.zeros(10, dtype=np.uint8),
            "ts": np.zeros(10, dtype=np.uint32),
        },
        10,
    )
    assert got.records(nfa, keys) == [rec]


def test_a_record_starting_after_its_tuple_is_refused():
    nfa = nfacep.compile_text(QUERY)
    with pytest.raises(ValueError, match="began at tuple 9, after it"):
        Result.from_records(nfa, 10, [wire.Record(8, 2, 0b001, 0, 9)], EngineParams())


def test_engine_state_holds_starts_only_when_asked():
    """start_seq stores a position (SEQ_BITS) per state that is not a start state, and the
    last tuple's position once per partition; a query that does not ask stores nothing."""
    pytest.importorskip("amaranth")
    from nfacep.hdl.nfa_layout import state_layout

    one = (
        "CREATE STREAM s (k UINT(8), ev ENUM('F', 'OK'));\n"
        "QUERY q PARTITION k {m}PATTERN (F F OK) DEFINE F AS ev = 'F' OK AS ev = 'OK';"
    )
    plain = state_layout(nfacep.compile_text(one.format(m="")))
    asked = state_layout(nfacep.compile_text(one.format(m="MEASURES FIRST(seq) AS start_seq ")))
    assert plain.size == 3
    assert asked.size == 3 + 2 * wire.SEQ_BITS + wire.SEQ_BITS


@pytest.mark.slow
def test_sim_equals_match_with_start_seq(tmp_path, capsys):
    """cocotb on the emitted Verilog reports the starts match does: both stores, the batch
    harness and the per-cycle testbench."""
    from nfacep.sim import build

    missing = build.simulator_available("icarus")
    if missing:
        pytest.fail(f"{missing} (CI installs it with tools/install-simulators.sh)")
    q, t = files(tmp_path)
    for options in (
        ["--store", "pipeline", "--partitions", "4"],
        ["--store", "table", "--partitions", "16"],
        ["--store", "pipeline", "--partitions", "4", "--mode", "cycle"],
    ):
        out = tmp_path / "s.csv"
        assert (
            main(
                [
                    "sim",
                    q,
                    "--input",
                    t,
                    "--output",
                    str(out),
                    *options,
                    "--build-dir",
                    str(tmp_path / "build"),
                    "--check",
                ]
            )
            == 0
        ), capsys.readouterr().err
        assert out.read_text() == WANT


def test_run_over_the_uart_link_reports_the_starts(tmp_path, capsys):
    """``nfacep run --port`` against the software board (the link protocol, the reference
    as its engine): records carry the starts and the match file equals match's."""
    import os
    import threading
    import tty

    from nfacep.links.uart.model import UartBoardModel, serve

    q, t = files(tmp_path)
    model = UartBoardModel(nfacep.compile_text(QUERY), EngineParams(partitions=4))
    assert model.record_bytes == (wire.record_format(model.nfa).width + 7) // 8
    master, slave = os.openpty()
    tty.setraw(master)
    stop = threading.Event()
    thread = serve(model, master, stop=stop, seed=7)
    try:
        out = tmp_path / "board.csv"
        assert (
            main(
                [
                    "run",
                    q,
                    "--port",
                    os.ttyname(slave),
                    "--input",
                    t,
                    "--output",
                    str(out),
                    "--store",
                    "pipeline",
                    "--partitions",
                    "4",
                ]
            )
            == 0
        ), capsys.readouterr().err
        assert out.read_text() == WANT
    finally:
        stop.set()
        thread.join(timeout=2)
        os.close(master)
        os.close(slave)
