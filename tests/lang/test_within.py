# amaranth: UnusedElaboratable=no
"""Time windows: ``PATTERN ( … ) WITHIN n`` and ``WITHIN INTERVAL 'n' UNIT`` (issue 14).

The language and the checker (windows in ORDER BY units, every error named and placed), the
reference matcher's two loops on automata of several words, and the commands: ``match``,
``check`` and ``explain`` take a window, and so does the gateware (its tests against the
reference are in test_hdl_engine.py). What windows match is judged against the oracle in
test_oracle_differential.py.
"""

import json

import numpy as np
import pytest

import nfacep
from nfacep.cli import main
from nfacep.errors import QueryError
from nfacep.io.tuples import Tuples
from nfacep.reference import matcher as reference

STREAM = (
    "CREATE STREAM s (k UINT(8), a BOOL, u UINT(8), i INT(8), f FLOAT32, "
    "ms UINT(32) TIME(MILLISECOND), sec INT(16) TIME(SECOND));\n"
)


def window(text: str) -> int | None:
    return nfacep.compile_text(STREAM + text).queries[0].window


@pytest.mark.parametrize(
    ("text", "n"),
    [
        ("QUERY q PARTITION k ORDER BY u PATTERN (A B) WITHIN 5 DEFINE A AS a", 5),
        ("QUERY q ORDER BY u PATTERN (A) WITHIN 255", 255),
        ("QUERY q ORDER BY i PATTERN (A) WITHIN 127", 127),
        ("SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY k ORDER BY u PATTERN (A) WITHIN 07)", 7),
        (
            "SELECT * FROM s MATCH_RECOGNIZE (ORDER BY ms PATTERN (A) WITHIN INTERVAL '2' SECOND)",
            2000,
        ),
        (
            "SELECT * FROM s MATCH_RECOGNIZE (ORDER BY ms PATTERN (A) "
            "WITHIN INTERVAL '1.5' second)",
            1500,
        ),
        (
            "SELECT * FROM s MATCH_RECOGNIZE (ORDER BY ms PATTERN (A) "
            "WITHIN INTERVAL '3' MILLISECOND)",
            3,
        ),
        (
            "SELECT * FROM s MATCH_RECOGNIZE (ORDER BY sec PATTERN (A) WITHIN INTERVAL '2' MINUTE)",
            120,
        ),
        (
            "SELECT * FROM s MATCH_RECOGNIZE (ORDER BY sec PATTERN (A) "
            "WITHIN INTERVAL '0.25' HOUR)",
            900,
        ),
        ("QUERY q ORDER BY ms PATTERN (A) WITHIN INTERVAL '1' DAY", 86_400_000),
        ("QUERY q ORDER BY u PATTERN (A)", None),
    ],
)
def test_windows_in_order_by_units(text, n):
    assert window(text) == n


ERRORS = [
    ("QUERY q PARTITION k PATTERN (A) WITHIN 5", "WITHIN needs ORDER BY", "WITHIN"),
    ("SELECT * FROM s MATCH_RECOGNIZE (PATTERN (A) WITHIN 5)", "add ORDER BY field to", "WITHIN"),
    ("QUERY q ORDER BY u PATTERN (A) WITHIN 0", "the window must be positive", "WITHIN"),
    ("QUERY q ORDER BY u PATTERN (A) WITHIN 256", "more than u UINT(8) can hold (255)", "WITHIN"),
    ("QUERY q ORDER BY i PATTERN (A) WITHIN 128", "more than i INT(8) can hold (127)", "WITHIN"),
    ("QUERY q ORDER BY f PATTERN (A) WITHIN 3", "integer ORDER BY field", "f"),
    (
        "QUERY q ORDER BY u PATTERN (A) WITHIN INTERVAL '1' SECOND",
        "the ORDER BY field 'u' has no time unit",
        "WITHIN",
    ),
    (
        "QUERY q ORDER BY ms PATTERN (A) WITHIN INTERVAL '1.0005' SECOND",
        "not a whole number of MILLISECONDS",
        "WITHIN",
    ),
    (
        "QUERY q ORDER BY sec PATTERN (A) WITHIN INTERVAL '5' MILLISECOND",
        "not a whole number of SECONDS",
        "WITHIN",
    ),
    ("QUERY q ORDER BY ms PATTERN (A) WITHIN INTERVAL '0' SECOND", "must be positive", "WITHIN"),
    ("QUERY q ORDER BY ms PATTERN (A) WITHIN INTERVAL 'soon' SECOND", "must be a number", "WITHIN"),
    (
        "QUERY q ORDER BY ms PATTERN (A) WITHIN INTERVAL '1' WEEK",
        "the units of an interval",
        "WEEK",
    ),
    (
        "QUERY q ORDER BY sec PATTERN (A) WITHIN INTERVAL '1' DAY",
        "more than sec INT(16) can hold (32767)",
        "WITHIN",
    ),
]


@pytest.mark.parametrize(("text", "message", "at"), ERRORS)
def test_window_errors(text, message, at):
    source = STREAM + text
    with pytest.raises(QueryError) as info:
        nfacep.compile_text(source, "q.sql")
    err = info.value
    assert message in err.message, err.message
    assert err.line == 2
    assert source.splitlines()[1][err.column - 1 :].startswith(at), err.render()


def test_a_count_with_a_unit_says_to_write_interval():
    with pytest.raises(QueryError, match="write WITHIN INTERVAL '5' SECOND for an interval"):
        nfacep.compile_text(STREAM + "QUERY q ORDER BY ms PATTERN (A) WITHIN 5 second")


@pytest.mark.parametrize(
    ("decl", "message"),
    [
        ("t UINT(8) TIME(YEAR)", "TIME(YEAR): the time units are NANOSECOND, MICROSECOND"),
        ("t BOOL TIME(SECOND)", "TIME(SECOND) is for integer fields (UINT or INT)"),
        ("t FLOAT32 TIME(SECOND)", "is for integer fields"),
    ],
)
def test_time_unit_errors(decl, message):
    with pytest.raises(QueryError, match=message.replace("(", r"\(").replace(")", r"\)")):
        nfacep.compile_text(f"CREATE STREAM s ({decl});\nQUERY q PATTERN (A)")


def test_keywords_stay_usable_as_names():
    nfa = nfacep.compile_text(
        "CREATE STREAM s (within UINT(8), time UINT(8) TIME(SECOND), "
        "interval UINT(8));\nQUERY q ORDER BY time PATTERN (A) "
        "WITHIN 3 DEFINE A AS within = interval"
    )
    assert nfa.queries[0].window == 3 and nfa.queries[0].order_field == "time"


def _run_both(nfa, columns, n):
    got = [reference.run(nfa, Tuples(columns, n), compiled=c) for c in (True, False)]
    assert np.array_equal(got[0].seqs, got[1].seqs)
    assert np.array_equal(got[0].queries, got[1].queries)
    return got[0]


@pytest.mark.parametrize("skip", [False, True])
def test_several_words_of_states_both_loops(skip):
    """A query of more than 64 states (two words in the compiled loop), windows of several
    sizes: the loops agree; a window wider than any run changes nothing, and windows only
    remove matches."""
    rng = np.random.default_rng(7)
    n = 4000
    columns = {
        "k": rng.integers(0, 3, n).astype(np.uint8),
        "a": rng.random(n) < 0.97,
        "b": rng.random(n) < 0.5,
        "ts": np.cumsum(rng.integers(0, 3, n)).astype(np.uint16),
    }
    mode = "AFTER MATCH SKIP PAST LAST ROW " if skip else ""
    base = (
        "CREATE STREAM s (k UINT(8), a BOOL, b BOOL, ts UINT(16));\n"
        f"QUERY q PARTITION k ORDER BY ts {mode}PATTERN ((A | B){{60,70}} A B) %s "
        "DEFINE A AS a, B AS b"
    )
    plain = _run_both(nfacep.compile_text(base % ""), columns, n)
    assert nfacep.compile_text(base % "").queries[0].count > 64
    wide = _run_both(nfacep.compile_text(base % "WITHIN 65535"), columns, n)
    assert wide.engines == {"q": "nfa"}
    assert np.array_equal(wide.seqs, plain.seqs)
    if not skip:  # with SKIP PAST LAST ROW a lost match may let a later one be reported
        previous = set(plain.seqs.tolist())
        for w in (200, 190, 180, 170, 160):  # runs of 62 tuples span about 186
            got = set(
                _run_both(nfacep.compile_text(base % f"WITHIN {w}"), columns, n).seqs.tolist()
            )
            assert got < previous
            previous = got
        assert previous


def test_dfa_engine_asked_for_still_runs_the_nfa():
    nfa = nfacep.compile_text(
        "CREATE STREAM s (a BOOL, ts UINT(8));\n"
        "QUERY q ORDER BY ts PATTERN (A A) WITHIN 2 DEFINE A AS a"
    )
    columns = {"a": np.ones(4, dtype=bool), "ts": np.array([0, 1, 3, 4], dtype=np.uint8)}
    got = reference.Reference("dfa").run(nfa, Tuples(columns, 4), nfacep.params.EngineParams())
    assert got.engines == {"q": "nfa"} and got.seqs.tolist() == [1, 3]


QUERY = """CREATE STREAM s (k UINT(8), a BOOL, ts UINT(16) TIME(SECOND));
SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts AFTER MATCH REPORT EVERY END
    PATTERN (A A) WITHIN INTERVAL '1' MINUTE DEFINE A AS a) AS q;
"""
TUPLES = "k,a,ts\n1,true,0\n2,true,10\n1,true,59\n2,true,70\n1,true,120\n1,true,179\n"


def files(tmp_path):
    (tmp_path / "q.sql").write_text(QUERY)
    (tmp_path / "t.csv").write_text(TUPLES)
    return str(tmp_path / "q.sql"), str(tmp_path / "t.csv")


def test_match_check_and_explain_take_a_window(tmp_path, capsys):
    q, t = files(tmp_path)
    assert main(["match", q, "--input", t, "--output", str(tmp_path / "m.csv")]) == 0
    # partition 1: 59 - 0 < 60, 179 - 120 < 60; partition 2: 70 - 10 = 60 is not
    assert (tmp_path / "m.csv").read_text() == "seq,query,partition\n2,q,1\n5,q,1\n"
    capsys.readouterr()
    assert main(["check", q]) == 0
    assert "ORDER BY ts, WITHIN 60" in capsys.readouterr().out
    assert main(["explain", q]) == 0
    assert "every match end, WITHIN 60 (ts units)" in capsys.readouterr().out
    assert main(["check", "--json", q]) == 0
    assert json.loads(capsys.readouterr().out)["queries"][0]["within"] == 60


# partition 1 has 0 and 59 (a match), then after a gap of exactly 2^16 (a stored age cannot
# span it, the time since the last tuple can) 65595 and 65654 (a match) and 65714 (60 after:
# not); partition 2 has 10, 70 (60 after: not) and 65606 (2^16 after: not)
LONG = (
    "k,a,ts\n1,true,0\n2,true,10\n1,true,59\n2,true,70\n1,true,65595\n2,true,65606\n"
    "1,true,65654\n1,true,65714\n"
)


@pytest.mark.slow
def test_sim_equals_match_with_a_window(tmp_path, capsys):
    """The gateware keeps windows: cocotb on the emitted Verilog reports what match does, in
    both partition stores, across a gap longer than a stored age spans."""
    from nfacep.sim import build

    missing = build.simulator_available("icarus")
    if missing:
        pytest.fail(f"{missing} (CI installs it with tools/install-simulators.sh)")
    q, _ = files(tmp_path)
    (tmp_path / "q.sql").write_text(QUERY.replace("UINT(16)", "UINT(32)"))
    t = tmp_path / "long.csv"
    t.write_text(LONG)
    assert main(["match", q, "--input", str(t), "--output", str(tmp_path / "m.csv")]) == 0
    want = (tmp_path / "m.csv").read_text()
    assert want == "seq,query,partition\n2,q,1\n6,q,1\n"
    for store in (
        ["--store", "pipeline", "--partitions", "4"],
        ["--store", "table", "--partitions", "16"],
    ):
        out = tmp_path / "s.csv"
        assert (
            main(
                [
                    "sim",
                    q,
                    "--input",
                    str(t),
                    "--output",
                    str(out),
                    *store,
                    "--build-dir",
                    str(tmp_path / "build"),
                    "--check",
                ]
            )
            == 0
        ), capsys.readouterr().err
        assert out.read_text() == want


@pytest.mark.slow
@pytest.mark.parametrize("simulator", ["icarus"])  # (Verilator too, but its build takes 50 s)
def test_sim_keeps_windows_at_their_boundary_at_every_distance(tmp_path, capsys, simulator):
    """The emitted Verilog ends runs exactly a window old and keeps those a window minus one
    old, whatever path through the table the state takes (the stream of
    :func:`window_cases.distance_tuples`), as ``match`` does."""
    from window_cases import DISTANCE_QUERY, distance_csv, distance_tuples

    from nfacep.sim import build

    missing = build.simulator_available(simulator)
    if missing:
        pytest.fail(f"{missing} (CI installs it with tools/install-simulators.sh)")
    q, t = tmp_path / "q.sql", tmp_path / "t.csv"
    q.write_text(DISTANCE_QUERY)
    t.write_text(distance_csv())
    assert main(["match", str(q), "--input", str(t), "--output", str(tmp_path / "m.csv")]) == 0
    want = (tmp_path / "m.csv").read_text()
    assert {int(line.split(",")[0]) for line in want.split()[1:]} == distance_tuples()[1]
    out = tmp_path / "s.csv"
    args = ["sim", str(q), "--input", str(t), "--output", str(out), "--simulator", simulator]
    args += ["--store", "table", "--partitions", "4", "--build-dir", str(tmp_path / "b")]
    assert main([*args, "--check"]) == 0, capsys.readouterr().err
    assert out.read_text() == want


def test_engine_state_holds_starts_and_the_last_time():
    """Under WITHIN a partition keeps where the latest run began per state of a windowed
    query but its start states (the low 7 bits of the ORDER BY value for a window of 60: the
    second A; the first is a start state, whose runs began at the last tuple) and the ORDER
    BY field of its last tuple (16 bits), beside the state bits."""
    pytest.importorskip("amaranth")
    from nfacep.hdl.nfa_layout import age_bits, start_bits, state_layout

    nfa = nfacep.compile_text(QUERY)
    assert age_bits(60) == 6 and age_bits(64) == 6 and age_bits(65) == 7 and age_bits(1) == 1
    assert start_bits(60) == 7 and start_bits(64) == 7 and start_bits(65) == 8
    layout = state_layout(nfa)
    assert layout.size == 2 + 7 + 16
    plain = nfacep.compile_text(QUERY.replace("WITHIN INTERVAL '1' MINUTE", ""))
    assert state_layout(plain).size == 2


def test_check_board_counts_the_window_state(tmp_path, capsys):
    plain = QUERY.replace("WITHIN INTERVAL '1' MINUTE", "")
    got = {}
    for name, text in (("window", QUERY), ("plain", plain)):
        path = str(tmp_path / f"{name}.sql")
        with open(path, "w") as f:
            f.write(text)
        try:
            rc = main(["check", path, "--board", "ulx3s-85f", "--json"])
        except SystemExit as e:
            pytest.skip(f"nfacep check --board is not available: exit {e.code}")
        out, err = capsys.readouterr()
        if "needs the boards package" in err:
            pytest.skip(err)
        assert rc == 0, err
        got[name] = json.loads(out)["board"]
    assert got["window"] != got["plain"]


def test_vectors_expects_what_match_reports_with_a_window(spark, tmp_path, capsys):
    """`nfacep vectors` runs the reference matcher in Spark tasks: it must hand it the ORDER BY
    field of a query with a window, which no predicate reads, and expect what `nfacep match`
    reports on the tuples it wrote."""
    pytest.importorskip("pyspark")
    import pyarrow.parquet as pq

    q, _ = files(tmp_path)
    out = tmp_path / "vectors"
    # local[2]: the Spark tests' session (the `spark` fixture), reused rather than started anew
    assert (
        main(
            [
                "vectors",
                q,
                "--tuples",
                "3000",
                "--keys",
                "20",
                "--out",
                str(out),
                "--master",
                "local[2]",
                "--quiet",
            ]
        )
        == 0
    )
    m = tmp_path / "m.csv"
    assert main(["match", q, "--input", str(out / "tuples.parquet"), "--output", str(m)]) == 0
    expected = pq.read_table(out / "expected.parquet").to_pylist()
    want = sorted((r["seq"], r["query"], r["partition"]) for r in expected)
    got = [
        (int(s), name, p)
        for s, name, p in (line.split(",") for line in m.read_text().splitlines()[1:])
    ]
    assert got == want and want
