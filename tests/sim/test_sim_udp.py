"""``nfacep sim --link udp``: the UDP board top (the bitstream of ``nfacep build --link udp``
behind its RGMII pads) as Verilog under cocotb, its GMII pins driven by cocotbext-eth at 1 Gb/s
with the minimum inter-frame gap; the match file must equal ``nfacep match``'s."""

from __future__ import annotations

import json
import math
import pathlib
import shutil

import pytest
from bundled import param_args
from tshark import capture_counts

from nfacep.cli import main
from nfacep.links.udp.pcap import read_pcap
from nfacep.sim import build

ROOT = pathlib.Path(__file__).resolve().parents[2]
QUERIES = ROOT / "queries"
NAMES = sorted(p.stem for p in QUERIES.glob("*.sql"))
#: the bundled streams hold at most 60 partitions (queries/README.md)
BUNDLED = ("--store", "pipeline", "--partitions", "64")


def require_icarus() -> None:
    missing = build.simulator_available("icarus")
    if missing:
        pytest.fail(f"{missing} (CI installs it with tools/install-simulators.sh)")


def match(tmp_path, query, data, *args) -> str:
    out = tmp_path / "reference.csv"
    assert main(["match", str(query), "--input", str(data), "--output", str(out), *args]) == 0
    return out.read_text()


def sim_udp(tmp_path, sim_cache, query, data, *args, code: int = 0) -> tuple[str, dict]:
    out = tmp_path / "udp.csv"
    assert (
        main(
            [
                "sim",
                str(query),
                "--input",
                str(data),
                "--output",
                str(out),
                "--link",
                "udp",
                "--build-dir",
                str(sim_cache),
                *args,
            ]
        )
        == code
    )
    summary = tmp_path / "udp.summary.json"
    return out.read_text(), json.loads(summary.read_text()) if summary.exists() else {}


def frames_in(summary: dict) -> int:
    board = summary["board"]
    return sum(
        board[c]
        for c in (
            "accepted",
            "bad_size",
            "bad_fcs",
            "not_for_us",
            "ip_unsupported",
            "bad_ip_checksum",
            "ip_fragment",
            "bad_udp",
            "bad_header",
            "engine_full",
        )
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_bundled_query_over_udp(tmp_path, sim_cache, name, capsys):
    """Every bundled query: the board's records, sent back in RECORDS packets, give the match
    file of ``nfacep match`` byte for byte; every frame was accepted at line rate."""
    require_icarus()
    query, data = QUERIES / f"{name}.sql", QUERIES / f"{name}.csv"
    got, summary = sim_udp(tmp_path, sim_cache, query, data, *BUNDLED, "--check", *param_args(name))
    assert got == (QUERIES / f"{name}.matches.csv").read_text()
    assert got == match(tmp_path, query, data, *BUNDLED, *param_args(name))
    board, line = summary["board"], summary["line"]
    assert summary["backend"] == "simulation" and summary["link"] == "udp"
    assert board["tuples"] == summary["tuples"] and board["engine_full"] == 0
    assert board["lost"] == board["late"] == 0
    packets = math.ceil(summary["tuples"] / line["tuples_per_packet"])
    assert line["frames"] == packets == board["next_seq"]
    # every frame in is accepted: the packets, RESET's answer aside, and the STATUS requests
    assert board["accepted"] == frames_in(summary) >= packets
    assert line["of_line"] > 0.99  # back to back, minimum gap
    assert summary["latency_cycles"]["min"] > 0
    out = capsys.readouterr().out
    assert "UDP board top at 1 Gb/s" in out and "frames: accepted" in out


@pytest.mark.slow
def test_minimum_size_frames_at_line_rate_and_drops(tmp_path, sim_cache):
    """One marathon tuple a packet: 73-byte frames (58 bytes of headers, 11 of tuple, the FCS)
    back to back, 10^9 / 8 / (73 + 20) = 1,344,086 frames/s on the wire;
    and a partitioner of 4 elements that drops: the drop records come back too."""
    require_icarus()
    query, data = QUERIES / "marathon.sql", QUERIES / "marathon.csv"
    got, summary = sim_udp(
        tmp_path,
        sim_cache,
        query,
        data,
        "--store",
        "pipeline",
        "--partitions",
        "4",
        "--tuples-per-packet",
        "1",
        "--check",
    )
    assert got == match(tmp_path, query, data, "--store", "pipeline", "--partitions", "4")
    assert summary["drops"] > 100 and summary["board"]["drops"] == summary["drops"]
    line = summary["line"]
    assert line["frames"] == summary["tuples"] == 278
    assert line["limit_frames_per_s"] == pytest.approx(1e9 / 8 / (58 + 11 + 4 + 20))
    assert line["frames_per_s"] == pytest.approx(line["limit_frames_per_s"], rel=0.01)
    assert summary["board"]["engine_full"] == 0


@pytest.mark.slow
def test_runtime_parameter_switches_over_udp(tmp_path, sim_cache):
    """PARAMS packets among the TUPLES packets, each sent once the engine took the tuple of the
    switch before (as the host sends them): the same matches as ``nfacep match``."""
    require_icarus()
    query, data = QUERIES / "supplychain.sql", QUERIES / "supplychain.csv"
    args = (
        "--store",
        "pipeline",
        "--partitions",
        "64",
        "--param",
        "big=20000",
        "--param",
        "big=50000@100",
        "--param",
        "big=9000@200",
    )
    pcap = tmp_path / "udp.pcap"
    got, summary = sim_udp(
        tmp_path,
        sim_cache,
        query,
        data,
        *args,
        "--tuples-per-packet",
        "40",
        "--check",
        "--pcap",
        str(pcap),
    )
    assert got == match(tmp_path, query, data, *args)
    assert summary["board"]["values"] == {"big": 9000}
    # 309 tuples in packets of 40 cut at 100 and 200: 9 TUPLES packets, and two PARAMS
    assert summary["line"]["frames"] == 9 + 2
    # the capture (--pcap): every frame both ways, which tshark with the dissector reads
    frames = read_pcap(pcap)
    times = [ns for ns, _ in frames]
    assert times == sorted(times) and len(frames) > 11
    if shutil.which("tshark"):  # (test_udp_capture.py says why it is needed)
        counts = capture_counts(pcap)
        assert counts["tuples"] == summary["tuples"] == 309
        assert counts["records"] == summary["board"]["records"] > 0
        types = [r["nfacep.type"] for r in counts["rows"]]
        assert types.count("0x04") == 2 and types.count("0x01") == 9
        host = [f for _, f in frames if f[6:12] == bytes.fromhex("020000000001")]
        assert counts["udp_checksums"] == len(host) > 11  # the board's UDP sends none


@pytest.mark.slow
def test_an_engine_slower_than_the_line_loses_nothing_it_takes(tmp_path, sim_cache):
    """The engine in its own clock domain at 19.5 MHz (625 / 32) beside the link's 125 MHz:
    the pipeline store takes a tuple every other cycle, 9.8M tuples/s, below the line's
    10.8M at 132 tuples a packet. The receive buffer absorbs 278 tuples sent back to back
    (the crossing stalls the link, nothing is dropped): the matches are ``match``'s. 1,000 at
    5 MHz overflow it: the frames that do not fit are refused whole and
    counted (``engine_full``), every tuple of the others is taken, the run fails (exit 1)."""
    require_icarus()
    query, data = QUERIES / "marathon.sql", QUERIES / "marathon.csv"
    engine = ("--store", "pipeline", "--partitions", "16")
    got, summary = sim_udp(
        tmp_path, sim_cache, query, data, *engine, "--engine-mhz", "19.6", "--check"
    )
    assert got == match(tmp_path, query, data, *engine)
    assert summary["line"]["engine_mhz"] == pytest.approx(625 / 32, abs=1e-3)
    assert summary["board"]["engine_full"] == 0 and summary["board"]["tuples"] == 278
    lines = data.read_text().splitlines()
    more = tmp_path / "more.csv"
    more.write_text("\n".join([lines[0], *(lines[1:] * 4)[:1000]]) + "\n")
    _, summary = sim_udp(
        tmp_path,
        sim_cache,
        query,
        more,
        *engine,
        "--engine-mhz",
        "5",
        "--tuples-per-packet",
        "100",
        code=1,
    )
    board = summary["board"]
    assert board["engine_full"] > 0
    assert board["tuples"] == 100 * (10 - board["engine_full"])


@pytest.mark.slow
def test_the_sender_waits_for_the_tables_clearing_sweep(tmp_path, sim_cache):
    """The table store (every command's default engine) clears its rows after RESET, a row a
    clock of the engine's: the simulated sender waits for that sweep, as the host waits
    through its credit, before it sends at line rate. Marathon's tuples twice over, 556 in 5
    packets, on a table of 4,096 entries: every packet is taken and the matches are
    ``match``'s (sent at once, the packets that came while the 1,024 rows were being cleared
    overflowed the receive buffer and were refused, ``engine_full``)."""
    require_icarus()
    query = QUERIES / "marathon.sql"
    lines = (QUERIES / "marathon.csv").read_text().splitlines()
    data = tmp_path / "twice.csv"
    data.write_text("\n".join([lines[0], *lines[1:] * 2]) + "\n")
    engine = ("--store", "table", "--partitions", "4096")
    got, summary = sim_udp(tmp_path, sim_cache, query, data, *engine, "--check")
    assert got == match(tmp_path, query, data, *engine)
    assert summary["board"]["engine_full"] == 0 and summary["board"]["tuples"] == 556


WIDE_OUT = """CREATE STREAM s (v UINT(8));
QUERY every FROM s
PATTERN ( A )
DEFINE
  A AS (v >= 0);
"""


@pytest.mark.slow
def test_a_board_that_cannot_send_its_records_fast_enough_fails(tmp_path, sim_cache, capsys):
    """One-byte tuples that all match: each needs a 7-byte record back, so the transmit side
    cannot keep up with the line and the receive buffer overflows; the board counts the
    packets it refused (``engine_full``) and the simulation fails (exit 1) saying so."""
    require_icarus()
    query = tmp_path / "every.sql"
    query.write_text(WIDE_OUT)
    data = tmp_path / "v.csv"
    data.write_text("v\n" + "".join(f"{i % 256}\n" for i in range(6000)))
    sim_udp(tmp_path, sim_cache, query, data, code=1)
    err = capsys.readouterr().err
    assert "did not take every packet sent at line rate" in err and "engine_full" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--link", "udp", "--tuples-per-packet", "0"], "at least 1"),
        (["--link", "udp", "--tuples-per-packet", "133"], "at most 132 tuples of 11 bytes"),
        (["--link", "udp", "--mode", "cycle"], "--mode set how tuples reach the engine alone"),
        (["--link", "udp", "--traffic", "full"], "--traffic set how tuples reach the engine"),
        (["--tuples-per-packet", "4"], "--tuples-per-packet needs --link udp"),
        (["--pcap", "x.pcap"], "--pcap needs --link udp"),
    ],
)
def test_usage_errors(tmp_path, capsys, args, message):
    out = tmp_path / "m.csv"
    code = main(
        [
            "sim",
            str(QUERIES / "marathon.sql"),
            "--input",
            str(QUERIES / "marathon.csv"),
            "--output",
            str(out),
            "--build-dir",
            str(tmp_path / "cache"),
            *args,
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.slow
def test_programmable_engine_loads_its_image_over_udp(tmp_path, sim_cache):
    """``--engine programmable``: the board top has the programmable engine, the file's image
    goes first in a LOAD packet, and the match file is ``nfacep match``'s; STATUS names the
    image in force and counts no load refused."""
    from nfacep import compile_file
    from nfacep.image import Capacity, EngineShape, image

    require_icarus()
    query, data = QUERIES / "marathon.sql", QUERIES / "marathon.csv"
    capacity = ("--engine", "programmable", "--states", "9", "--atoms", "7", "--queries", "1")
    got, summary = sim_udp(tmp_path, sim_cache, query, data, *BUNDLED, *capacity, "--check")
    assert got == match(tmp_path, query, data, *BUNDLED)
    board = summary["board"]
    nfa = compile_file(query)
    shape = EngineShape(nfa.program.schema, nfa.program.partition_fields, Capacity(9, 7, 1))
    assert board["image"].to_bytes(8, "little").hex() == image(nfa, shape).fingerprint
    assert board["image_from"] == 0  # (in force from the first tuple, across the crossing)
    assert board["engine"] == 1 and board["refused"] == 0 and board["load_offset"] == 0
    assert board["engine_full"] == 0 and board["bad_load"] == 0
