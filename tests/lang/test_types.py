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


# --- IPV4 -------------------------------------------------------------------------------------

IP_QUERY = """\
CREATE STREAM flows (src IPV4, dst IPV4, port UINT(16));
SELECT * FROM flows MATCH_RECOGNIZE (
    PARTITION BY src
    AFTER MATCH SKIP PAST LAST ROW
    PATTERN (INSIDE OUTSIDE)
    DEFINE INSIDE AS dst IN '10.0.0.0/8' AND dst <> '10.0.0.1',
           OUTSIDE AS dst NOT IN ('10.0.0.0/8', '192.168.1.128/25', '1.1.1.1') AND dst <> src
) AS leak;
"""
IP_ROWS = """\
src,dst,port
192.168.1.7,10.20.30.40,80
192.168.1.7,8.8.8.8,53
10.0.0.9,10.0.0.1,22
10.0.0.9,10.255.255.255,22
10.0.0.9,192.168.1.129,443
10.0.0.9,192.168.1.127,443
192.168.1.7,10.0.0.2,80
192.168.1.7,192.168.1.7,80
"""
# 0 INSIDE; 1 OUTSIDE after it: a match at 1 (partition 192.168.1.7). 2: 10.0.0.1 is not
# INSIDE; 3 INSIDE; 4 in 192.168.1.128/25: not OUTSIDE; 5 (.127) OUTSIDE, but 4 was not
# INSIDE; 6 INSIDE; 7 dst = src: not OUTSIDE
IP_MATCHES = "seq,query,partition\n1,leak,192.168.1.7\n"


def test_ipv4_fields_addresses_and_networks(tmp_path):
    assert run(tmp_path, "match", IP_QUERY, IP_ROWS) == IP_MATCHES
    rows = IP_ROWS.replace("10.0.0.9,192.168.1.129", "10.0.0.9,192.168.1.12")
    assert run(tmp_path, "match", IP_QUERY, rows) == IP_MATCHES.replace(
        "\n1,leak,192.168.1.7\n", "\n1,leak,192.168.1.7\n4,leak,10.0.0.9\n"
    )


@pytest.mark.parametrize(
    "store",
    [("--store", "pipeline", "--partitions", "8"), ("--store", "table", "--partitions", "64")],
)
def test_ipv4_in_the_gateware(tmp_path, store):
    """The masked compare of the decoder, and an IPV4 partition key in both stores."""
    rows = IP_ROWS.replace("10.0.0.9,192.168.1.129", "10.0.0.9,192.168.1.12")
    assert simulated(tmp_path, IP_QUERY, rows, *store) == IP_MATCHES.replace(
        "\n1,leak,192.168.1.7\n", "\n1,leak,192.168.1.7\n4,leak,10.0.0.9\n"
    )


IP_PREV_QUERY = """\
CREATE STREAM flows (src IPV4, dst IPV4);
SELECT * FROM flows MATCH_RECOGNIZE (
    PARTITION BY src
    AFTER MATCH SKIP PAST LAST ROW
    PATTERN (HOP BACK)
    DEFINE HOP AS dst <> PREV(dst) AND PREV(dst) IN '10.0.0.0/8',
           BACK AS dst = PREV(BACK.dst, 2)
) AS bounce;
"""
IP_PREV_ROWS = """\
src,dst
192.168.0.1,10.0.0.1
192.168.0.1,10.0.0.2
192.168.0.1,10.0.0.1
192.168.0.2,8.8.8.8
192.168.0.2,10.0.0.5
192.168.0.2,8.8.8.8
192.168.0.2,10.0.0.5
192.168.0.1,10.0.0.2
192.168.0.1,10.0.0.1
"""
# .1: 0 has no PREV (unknown: neither); 1 HOP; 2 BACK (= 0's): a match at 2, which is also a
# HOP, but its run began where the match ended (skipped past); 7 HOP, 8 BACK: a match at 8.
# .2: 4 is no HOP (8.8.8.8 is not in 10/8), so 5 (= 3's) is no match, but a HOP; 6 (= 4's) is.
IP_PREV_MATCHES = (
    "seq,query,partition\n2,bounce,192.168.0.1\n6,bounce,192.168.0.2\n8,bounce,192.168.0.1\n"
)


@pytest.mark.parametrize(
    "store",
    [("--store", "pipeline", "--partitions", "4"), ("--store", "table", "--partitions", "64")],
)
def test_ipv4_prev_in_the_gateware(tmp_path, store):
    """PREV of an IPV4 field, compared with a field, tested against a network and two tuples
    back: the decoder reads the partition's history as it reads an IPV4 field (it refused
    with a traceback before)."""
    assert run(tmp_path, "match", IP_PREV_QUERY, IP_PREV_ROWS) == IP_PREV_MATCHES
    assert simulated(tmp_path, IP_PREV_QUERY, IP_PREV_ROWS, *store) == IP_PREV_MATCHES


def test_ipv4_from_parquet_text_and_integers(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "q.sql").write_text(IP_QUERY)
    lines = [line.split(",") for line in IP_ROWS.splitlines()[1:]]
    as_int = [int.from_bytes(bytes(map(int, d.split("."))), "big") for _, d, _ in lines]
    table = pa.table(
        {
            "src": pa.array([s for s, _, _ in lines]),
            "dst": pa.array(as_int, pa.uint32()),
            "port": pa.array([int(p) for _, _, p in lines], pa.uint16()),
        }
    )
    pq.write_table(table, tmp_path / "t.parquet")
    out = tmp_path / "m.csv"
    argv = ["match", str(tmp_path / "q.sql"), "--input", str(tmp_path / "t.parquet")]
    assert main([*argv, "--output", str(out)]) == 0
    assert out.read_text() == IP_MATCHES


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("10.0.0.256", "is not an IPv4 address"),
        ("10.0.0", "is not an IPv4 address"),
        ("010.0.0.1", "is not an IPv4 address"),
        ("x10.0.0.1", "is not an IPv4 address"),
        ("10.0.0.1/8", "is not an IPv4 address"),
    ],
)
def test_bad_ipv4_values_are_named(tmp_path, capsys, value, why):
    (tmp_path / "q.sql").write_text(IP_QUERY)
    (tmp_path / "t.csv").write_text(f"src,dst,port\n1.2.3.4,5.6.7.8,1\n1.2.3.4,{value},1\n")
    argv = ["match", str(tmp_path / "q.sql"), "--input", str(tmp_path / "t.csv")]
    assert main([*argv, "--output", str(tmp_path / "m.csv")]) == 2
    err = capsys.readouterr().err
    assert f"t.csv: row 2 (line 3), column 'dst': '{value}' {why}" in err, err


@pytest.mark.parametrize(
    ("stream", "rows", "value", "why"),
    [
        ("dst IPV4", ["167772161", "167772162"], "167772161", "is not an IPv4 address"),
        (
            "dst TIMESTAMP(MILLISECOND)",
            ["1700000000000", "1700000000001"],
            "1700000000000",
            "is not an ISO 8601 time",
        ),
    ],
)
def test_a_csv_column_of_integers_is_no_address_nor_time(
    tmp_path, capsys, stream, rows, value, why
):
    """An IPV4 or TIMESTAMP value in CSV is written as a dotted quad or ISO 8601 time, also
    when every value of the column is an integer (those were read as the 32-bit address or
    the count of the unit, while the same integer beside a dotted quad or an ISO 8601 time
    was refused: what a file meant depended on its other rows). Parquet's integer columns
    stay the address or the count (docs/formats.md)."""
    (tmp_path / "q.sql").write_text(
        f"CREATE STREAM s (k UINT(8), {stream});\nQUERY q PATTERN (A) DEFINE A AS k > 0;\n"
    )
    (tmp_path / "t.csv").write_text("k,dst\n" + "".join(f"1,{r}\n" for r in rows))
    argv = ["match", str(tmp_path / "q.sql"), "--input", str(tmp_path / "t.csv")]
    assert main([*argv, "--output", str(tmp_path / "m.csv")]) == 2
    err = capsys.readouterr().err
    assert f"t.csv: row 1 (line 2), column 'dst': '{value}' {why}" in err, err


@pytest.mark.parametrize(
    ("condition", "message"),
    [
        ("dst < '10.0.0.1'", "IPV4 addresses compare only with = and <>"),
        ("dst BETWEEN '1.1.1.1' AND '2.2.2.2'", "IPV4 addresses compare only with = and <>"),
        ("dst = '10.0.0.0/8'", "is a network: test whether an address is in it with dst IN"),
        ("dst IN '10.0.0.1/8'", "has host bits set: the network is '10.0.0.0/8'"),
        ("dst IN '10.0.0.0/33'", "has no prefix length from 0 to 32"),
        ("dst = '10.0.0.01'", "is not an IPv4 address"),
        ("dst = 167772161", "cannot compare IPV4 field 'dst' with an integer literal"),
        ("dst + 1 = src", "not on an IPV4 value"),
        ("dst = port", "cannot compare IPV4 field 'dst' with UINT(16) field 'port'"),
    ],
)
def test_ipv4_refusals(tmp_path, capsys, condition, message):
    query = "CREATE STREAM flows (src IPV4, dst IPV4, port UINT(16));\n"
    (tmp_path / "q.sql").write_text(query + f"QUERY q PATTERN (A) DEFINE A AS {condition};\n")
    assert main(["check", str(tmp_path / "q.sql")]) == 2
    err = capsys.readouterr().err
    assert "q.sql:2:" in err and message in err, err


# --- TIMESTAMP --------------------------------------------------------------------------------

TS_QUERY = """\
CREATE STREAM logins (ts TIMESTAMP(MILLISECOND), user UINT(8), ok BOOL);
SELECT * FROM logins MATCH_RECOGNIZE (
    PARTITION BY user
    ORDER BY ts
    AFTER MATCH SKIP PAST LAST ROW
    PATTERN (FAIL{3}) WITHIN INTERVAL '2' SECOND
    DEFINE FAIL AS NOT ok AND ts >= TIMESTAMP '2024-03-01 12:00:00'
) AS burst;
"""
TS_ROWS = """\
ts,user,ok
2024-03-01T11:59:59.500Z,1,false
2024-03-01 12:00:00,1,false
2024-03-01T13:00:00.250+01:00,1,false
2024-03-01T12:00:01.999,1,false
2024-03-01T12:00:02.000Z,2,false
2024-03-01T12:00:02.5Z,2,false
2024-03-01T07:00:03-05:00,2,false
2024-03-01T12:00:05Z,2,false
2024-03-01T12:00:06.1Z,2,false
2024-03-01T12:00:07.000Z,2,false
"""
# user 1: row 0 is before noon; rows 1, 2 (12:00:00.250 UTC) and 3 (12:00:01.999) span 1.999 s
# < 2 s: a match at 3. User 2: rows 4, 5, 6 (12:00:03) span 1 s: a match at 6; then 7, 8, 9
# span 12:00:05 to 12:00:07.000, exactly 2 s: too long.
TS_MATCHES = "seq,query,partition\n3,burst,1\n6,burst,2\n"


def test_timestamps_iso_8601_order_by_and_within(tmp_path):
    assert run(tmp_path, "match", TS_QUERY, TS_ROWS) == TS_MATCHES


CONST_QUERY = """\
CREATE STREAM flows (ts TIMESTAMP(MILLISECOND), at TIMESTAMP(SECOND), src IPV4, dst IPV4);
QUERY q FROM flows
PARTITION src
PATTERN (A B)
DEFINE
  A AS ts >= TIMESTAMP '2024-03-01 13:00:00.25+01:00' AND src = '10.1.2.3'
  B AS at < TIMESTAMP '1969-12-31 23:59:59' AND dst IN '192.168.0.0/16';
"""
A_TEXT = "(ts >= TIMESTAMP '2024-03-01T12:00:00.250Z') AND (src = '10.1.2.3')"
B_TEXT = "(at < TIMESTAMP '1969-12-31T23:59:59Z') AND (dst IN '192.168.0.0/16')"


def test_check_and_explain_show_times_and_addresses(tmp_path, capsys):
    """`check`, `check --json` and `explain` show a TIMESTAMP constant as the time (ISO 8601
    in UTC, the fraction digits of its field's unit) and an IPV4 one as a dotted quad, not
    as the numbers the engine compares; the JSON lists those numbers beside. The text shown
    is query text: written back into the query, it gives the same predicates."""
    import json

    query = tmp_path / "q.sql"
    query.write_text(CONST_QUERY)
    assert main(["check", str(query)]) == 0
    out = capsys.readouterr().out
    assert f"p0: {A_TEXT}" in out and f"p1: {B_TEXT}" in out
    assert main(["explain", str(query)]) == 0
    out = capsys.readouterr().out
    assert f"A: {A_TEXT}" in out and f"B: {B_TEXT}" in out
    assert main(["check", "--json", str(query)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [p["text"] for p in doc["predicates"]] == [A_TEXT, B_TEXT]
    assert [p["constants"] for p in doc["predicates"]] == [
        [
            {
                "text": "TIMESTAMP '2024-03-01T12:00:00.250Z'",
                "value": 1709294400250,
                "unit": "MILLISECOND",
            },
            {"text": "'10.1.2.3'", "value": (10 << 24) + (1 << 16) + (2 << 8) + 3, "prefix": 32},
        ],
        [
            {"text": "TIMESTAMP '1969-12-31T23:59:59Z'", "value": -1, "unit": "SECOND"},
            {"text": "'192.168.0.0/16'", "value": (192 << 24) + (168 << 16), "prefix": 16},
        ],
    ]
    again = tmp_path / "again.sql"
    head = CONST_QUERY[: CONST_QUERY.index("  A AS")]
    again.write_text(f"{head}  A AS {A_TEXT}\n  B AS {B_TEXT};\n")
    assert main(["check", "--json", str(again)]) == 0
    assert json.loads(capsys.readouterr().out)["predicates"] == doc["predicates"]


@pytest.mark.parametrize(
    "store",
    [("--store", "pipeline", "--partitions", "8"), ("--store", "table", "--partitions", "64")],
)
def test_timestamps_in_the_gateware(tmp_path, store):
    assert simulated(tmp_path, TS_QUERY, TS_ROWS, *store) == TS_MATCHES


#: PREV of a TIMESTAMP field against a TIMESTAMP literal (PREV gives the literal its unit)
TS_PREV_QUERY = TS_QUERY.replace("FAIL{3}", "FAIL{2}").replace(
    "ts >= TIMESTAMP", "PREV(ts) >= TIMESTAMP"
)
# user 1: row 0 has no PREV, 1's is before noon; 2 and 3 (1.749 s apart): a match at 3. User 2:
# 4 has no PREV; 5 and 6 (0.5 s): a match at 6; 7 and 8 (1.1 s): at 8.
TS_PREV_MATCHES = "seq,query,partition\n3,burst,1\n6,burst,2\n8,burst,2\n"


def test_timestamp_prev_against_a_literal(tmp_path):
    """``PREV(ts) >= TIMESTAMP '…'`` takes the literal in ts's unit (it was refused: the
    literal's unit came only from fields as they are); the gateware agrees."""
    assert "PREV(ts) >= TIMESTAMP" in TS_PREV_QUERY
    assert run(tmp_path, "match", TS_PREV_QUERY, TS_ROWS) == TS_PREV_MATCHES
    table = ("--store", "table", "--partitions", "64")
    assert simulated(tmp_path, TS_PREV_QUERY, TS_ROWS, *table) == TS_PREV_MATCHES


@pytest.mark.parametrize(
    ("arrow_unit", "values", "expected"),
    [
        ("s", [0, 1, 2], ["1970-01-01T00:00:00.000Z", "1970-01-01T00:00:01.000Z"]),
        ("us", [0, 1000, 2 * 10**6], ["1970-01-01T00:00:00.000Z", "1970-01-01T00:00:00.001Z"]),
        ("ns", [0, 10**6, 2 * 10**9], ["1970-01-01T00:00:00.000Z", "1970-01-01T00:00:00.001Z"]),
    ],
)
def test_timestamps_from_parquet_of_any_unit(tmp_path, arrow_unit, values, expected):
    """A Parquet timestamp column in seconds, microseconds or nanoseconds read exactly into a
    TIMESTAMP(MILLISECOND) field; as a partition key it is written back as ISO 8601."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    query = (
        "CREATE STREAM s (ts TIMESTAMP(MILLISECOND), v UINT(8));\n"
        "QUERY q PARTITION ts PATTERN (A)\n"
        "DEFINE A AS v = 1 AND ts < TIMESTAMP '1970-01-01T00:00:02Z';\n"
    )
    (tmp_path / "q.sql").write_text(query)
    table = pa.table({"ts": pa.array(values, pa.timestamp(arrow_unit, tz="UTC")), "v": [1, 1, 1]})
    pq.write_table(table, tmp_path / "t.parquet", coerce_timestamps=None)
    out = tmp_path / "m.csv"
    argv = ["match", str(tmp_path / "q.sql"), "--input", str(tmp_path / "t.parquet")]
    assert main([*argv, "--output", str(out)]) == 0
    rows = out.read_text().splitlines()[1:]
    assert rows == [f"{i},q,{t}" for i, t in enumerate(expected)]


def test_parquet_timestamps_finer_than_the_unit_are_named(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "q.sql").write_text(TS_QUERY)
    table = pa.table(
        {
            "ts": pa.array([0, 1500], pa.timestamp("us")),
            "user": pa.array([1, 1], pa.uint8()),
            "ok": [True, True],
        }
    )
    pq.write_table(table, tmp_path / "t.parquet")
    argv = ["match", str(tmp_path / "q.sql"), "--input", str(tmp_path / "t.parquet")]
    assert main([*argv, "--output", str(tmp_path / "m.csv")]) == 2
    err = capsys.readouterr().err
    assert "row 2" in err and "'ts': 1970-01-01 00:00:00.001500 is finer than a millisecond" in err


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("2024-02-30T00:00:00Z", "is not a day of the calendar"),
        ("2024-03-01T24:00:00Z", "is not a time of day"),
        ("2024-03-01T12:00:00.0005Z", "is finer than a millisecond"),
        ("1709294400000", "is not an ISO 8601 time"),
        ("2024-03-01X12:00:00", "is not an ISO 8601 time"),
    ],
)
def test_bad_timestamps_are_named(tmp_path, capsys, value, why):
    (tmp_path / "q.sql").write_text(TS_QUERY)
    (tmp_path / "t.csv").write_text(f"ts,user,ok\n2024-01-01,1,true\n{value},1,true\n")
    argv = ["match", str(tmp_path / "q.sql"), "--input", str(tmp_path / "t.csv")]
    assert main([*argv, "--output", str(tmp_path / "m.csv")]) == 2
    err = capsys.readouterr().err
    assert f"t.csv: row 2 (line 3), column 'ts': '{value}' {why}" in err, err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ts > TIMESTAMP '2024-01-01 00:00:00.0001'", "is finer than a millisecond"),
        ("user > TIMESTAMP '2024-01-01'", "must be compared with a TIMESTAMP field"),
        ("ts > TIMESTAMP 'yesterday'", "is not an ISO 8601 time"),
        ("ts > DATE '2024-01-01'", "the only typed literal is TIMESTAMP"),
        ("ts > other", "their counts are in different units"),
    ],
)
def test_timestamp_refusals(tmp_path, capsys, text, message):
    stream = "CREATE STREAM s (ts TIMESTAMP(MILLISECOND), other TIMESTAMP(SECOND), user UINT(8))"
    stream += ";\n"
    (tmp_path / "q.sql").write_text(stream + f"QUERY q PATTERN (A) DEFINE A AS {text};\n")
    assert main(["check", str(tmp_path / "q.sql")]) == 2
    err = capsys.readouterr().err
    assert "q.sql:2:" in err and message in err, err


def test_wire_layout_of_ipv4_and_timestamp(tmp_path):
    """IPV4 packs as its 32-bit number, TIMESTAMP as its 64-bit count (two's complement),
    LSB-first in declaration order; both come back as the files write them."""
    from nfacep import compile_file, wire
    from nfacep.io import reader

    (tmp_path / "q.sql").write_text(
        "CREATE STREAM s (ip IPV4, ts TIMESTAMP(SECOND), b BOOL);\n"
        "QUERY q PATTERN (A) DEFINE A AS b;\n"
    )
    (tmp_path / "t.csv").write_text("ip,ts,b\n10.1.2.3,1969-12-31T23:59:59Z,true\n")
    schema = compile_file(str(tmp_path / "q.sql")).program.schema
    tuples = reader.read(str(tmp_path / "t.csv"), schema)
    (packed,) = wire.pack(schema, tuples)
    assert packed == 0x0A010203 | ((1 << 64) - 1) << 32 | 1 << 96
    ip, ts, _ = (
        wire.field_text(packed >> offset & ((1 << width) - 1), f.type)
        for (_, offset, width), f in zip(wire.field_slices(schema), schema.fields, strict=True)
    )
    assert (ip, ts) == ("10.1.2.3", "1969-12-31T23:59:59Z")
    back = wire.unpack(schema, [packed])
    assert back.columns["ip"].tolist() == [0x0A010203] and back.columns["ts"].tolist() == [-1]


PARAM_QUERY = """\
CREATE STREAM flows (src IPV4, dst IPV4, ts TIMESTAMP(MILLISECOND), bytes UINT(32));
QUERY q PARTITION src PATTERN (A B) DEFINE A AS dst = :p, B AS ts >= :t AND dst IN '10.0.0.0/8';
"""
PARAM_ROWS = """\
src,dst,ts,bytes
1.2.3.4,10.9.9.9,2024-01-01T00:00:00Z,5
1.2.3.4,10.1.1.1,2024-02-01T00:00:00Z,5
1.2.3.4,10.9.9.9,2024-02-01T00:00:00Z,5
1.2.3.4,10.9.9.8,2024-02-01T00:00:01Z,5
1.2.3.4,10.1.1.1,2024-02-01T00:00:02Z,5
"""
PARAMS = ("--param", "p=10.9.9.9", "--param", "t=2024-01-15", "--param", "p=10.9.9.8@2")


def test_ipv4_and_timestamp_parameters(tmp_path):
    """An IPV4 parameter given as a dotted quad and switched at seq 2, a TIMESTAMP one as ISO
    8601: A holds at 0 (then 10.9.9.9) and 3 (10.9.9.8 from 2 on), not at 2; B after both."""
    want = "seq,query,partition\n1,q,1.2.3.4\n4,q,1.2.3.4\n"
    assert run(tmp_path, "match", PARAM_QUERY, PARAM_ROWS, *PARAMS) == want
    assert simulated(tmp_path, PARAM_QUERY, PARAM_ROWS, *PARAMS) == want


@pytest.mark.parametrize(
    ("param", "message"),
    [
        ("p=10.9.9", ":p is IPV4: give an address such as 10.1.2.3"),
        ("t=2024-13-01", ":t is TIMESTAMP(MILLISECOND): the time is not a day of the calendar"),
    ],
)
def test_bad_ipv4_and_timestamp_parameters(tmp_path, capsys, param, message):
    (tmp_path / "q.sql").write_text(PARAM_QUERY)
    (tmp_path / "t.csv").write_text(PARAM_ROWS)
    good = {"p": "p=10.9.9.9", "t": "t=2024-01-15"}
    good[param[0]] = param
    argv = ["match", str(tmp_path / "q.sql"), "--input", str(tmp_path / "t.csv")]
    options = [x for v in good.values() for x in ("--param", v)]
    assert main([*argv, "--output", str(tmp_path / "m.csv"), *options]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("declaration", "message"),
    [
        ("ts TIMESTAMP(SECOND) TIME(SECOND)", "its type gives its unit"),
        ("ip IPV4 TIME(SECOND)", "does not apply to IPV4 field 'ip'"),
        ("ts TIMESTAMP(MINUTE)", "the units of a TIMESTAMP are SECOND, MILLISECOND"),
    ],
)
def test_timestamp_and_ipv4_declarations(tmp_path, capsys, declaration, message):
    (tmp_path / "q.sql").write_text(
        f"CREATE STREAM s ({declaration}, b BOOL);\nQUERY q PATTERN (A) DEFINE A AS b;\n"
    )
    assert main(["check", str(tmp_path / "q.sql")]) == 2
    err = capsys.readouterr().err
    assert "q.sql:1:" in err and message in err, err
