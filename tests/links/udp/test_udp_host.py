"""``nfacep run --udp`` (links/udp/host.py) against the software board of the UDP link.

The board is :class:`nfacep.links.udp.model.UdpBoardModel` (the payload format with the
reference matcher as the engine) served on 127.0.0.1; losses are injected by a small UDP proxy
between the host and the model that drops chosen packets in either direction. The match file
and summary must equal ``nfacep match``'s, also with runtime parameters switched while the
stream runs; a loss is either recovered (the run starts again) or reported with its tuple
ranges, and nothing is written then.
"""

from __future__ import annotations

import contextlib
import json
import pathlib
import selectors
import socket
import threading

import pytest
from bundled import board_setup, param_args, reference

from nfacep import compile_file
from nfacep.backend import run_files
from nfacep.cli import main
from nfacep.links.udp import host as udp_host
from nfacep.links.udp.model import UdpBoardModel, serve
from nfacep.links.udp.protocol import PacketType, decode_header
from nfacep.params import default_engine

ROOT = pathlib.Path(__file__).resolve().parents[3]
QUERIES = ROOT / "queries"
SAME = ("tuples", "matches", "drops", "drop_seqs", "partitions", "tick_tuples", "timer_bits")


@contextlib.contextmanager
def board(name="marathon", **kwargs):
    """A software board on 127.0.0.1; yields (model, "127.0.0.1:port"). Built with the bundled
    runtime parameters' values unless ``values`` (``--param`` texts) says otherwise."""
    nfa, engine, values = board_setup(name, kwargs)
    model = UdpBoardModel(nfa, engine, values=values, **kwargs)
    with serving(model) as address:
        yield model, address


@contextlib.contextmanager
def serving(model):
    """``model`` (a software board) served on 127.0.0.1 by a thread of its own: yields its
    ``host:port``, and stops the thread on the way out."""
    stop = threading.Event()
    thread, (host, port) = serve(model, stop=stop)
    try:
        yield f"{host}:{port}"
    finally:
        stop.set()
        thread.join(timeout=2)


class Proxy:
    """A UDP proxy on 127.0.0.1 in front of ``target``: ``drop_up(header, count, resets)`` and
    ``drop_down(header, count, resets)`` decide per packet (``count``: how many packets of that
    type went that way before; ``resets``: RESETs the host sent so far) whether it is lost;
    ``dropped`` lists what was."""

    def __init__(self, target: str, drop_up=None, drop_down=None):
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self.drop_up = drop_up or (lambda head, count, resets: False)
        self.drop_down = drop_down or (lambda head, count, resets: False)
        self.front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.front.bind(("127.0.0.1", 0))
        self.back = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.back.bind(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.front.getsockname()[1]}"
        self.counts: dict[tuple[str, int], int] = {}
        self.dropped: list[tuple[str, int, int]] = []  # (direction, type, seq)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _lose(self, way: str, data: bytes, decide) -> bool:
        head = decode_header(data)
        key = (way, head["type"])
        count = self.counts.get(key, 0)
        self.counts[key] = count + 1
        if decide(head, count, self.counts.get(("up", PacketType.RESET), 0)):
            self.dropped.append((way, head["type"], head["seq"]))
            return True
        return False

    def _loop(self) -> None:
        client = None
        with selectors.DefaultSelector() as sel:
            sel.register(self.front, selectors.EVENT_READ)
            sel.register(self.back, selectors.EVENT_READ)
            while not self.stop.is_set():
                for key, _ in sel.select(0.02):
                    data, sender = key.fileobj.recvfrom(65536)
                    if key.fileobj is self.front:
                        client = sender
                        if not self._lose("up", data, self.drop_up):
                            self.back.sendto(data, self.target)
                    elif client is not None and not self._lose("down", data, self.drop_down):
                        self.front.sendto(data, client)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=2)
        self.front.close()
        self.back.close()


@contextlib.contextmanager
def proxy(target: str, **kwargs):
    p = Proxy(target, **kwargs)
    try:
        yield p
    finally:
        p.close()


def run(address, tmp_path, name="marathon", *more):
    out = tmp_path / "board.csv"
    code = main(
        [
            "run",
            str(QUERIES / f"{name}.sql"),
            "--udp",
            address,
            "--input",
            str(QUERIES / f"{name}.csv"),
            "--output",
            str(out),
            *more,
        ]
    )
    return code, out


@pytest.mark.parametrize("name", sorted(p.stem for p in QUERIES.glob("*.sql")))
def test_run_udp_equals_match(tmp_path, name, capsys):
    with board(name) as (model, address):
        code, out = run(address, tmp_path, name, *param_args(name))
        assert model.switches == []  # the board runs the values it was built with
    assert code == 0
    expected, ref_summary = reference(tmp_path, name, *param_args(name))
    assert out.read_text() == expected == (QUERIES / f"{name}.matches.csv").read_text()
    summary = json.loads((tmp_path / "board.summary.json").read_text())
    assert {k: summary[k] for k in SAME} == {k: ref_summary[k] for k in SAME}
    assert summary["backend"] == "board" and summary["udp"] == address
    assert summary["board"]["tuples"] == summary["tuples"]
    assert summary["link"]["attempts"] == 1 and summary["link"]["losses"] == []
    assert f"-> {out}" in capsys.readouterr().out
    if param_args(name):
        assert summary["runtime_parameters"] == ref_summary["runtime_parameters"]
        assert summary["board"]["values"] == ref_summary["runtime_parameters"]["initial"]


#: supplychain's ato matches tuples 231, 241 and 281 with big=0, none with a big :big; these
#: switches leave 241 and 281 (as in test_boards_host.py).
SWITCHES = [
    "big=4000000000",
    "big=0@235",
    "big=4000000000@260",
    "big=0@281",
    "big=7@282",
    "big=4000000000@300",
]


def _params(texts):
    return [arg for text in texts for arg in ("--param", text)]


@pytest.mark.parametrize("built", ["big=20000", "big=4000000000"])
def test_run_udp_switches_runtime_parameters(tmp_path, built):
    """PARAMS packets among the TUPLES packets (a small buffer: the host waits for credit and
    for a pending switch's tuple); a board built with other values is switched at tuple 0.
    The matches equal ``nfacep match`` with the same --param arguments."""
    with board("supplychain", values=[built], capacity=64) as (model, address):
        code, out = run(
            address, tmp_path, "supplychain", "--tuples-per-packet", "4", *_params(SWITCHES)
        )
        assert code == 0
        assert [seq for seq, _ in model.switches] == ([0] if built != SWITCHES[0] else []) + [
            235,
            260,
            281,
            282,
            300,
        ]
        assert model.counters["engine_full"] == 0
    expected, ref_summary = reference(tmp_path, "supplychain", *_params(SWITCHES))
    assert out.read_text() == expected
    assert [line.split(",")[0] for line in expected.splitlines() if ",ato," in line] == [
        "241",
        "281",
    ]
    summary = json.loads((tmp_path / "board.summary.json").read_text())
    assert {k: summary[k] for k in SAME} == {k: ref_summary[k] for k in SAME}
    assert summary["runtime_parameters"] == ref_summary["runtime_parameters"]
    assert summary["board"]["values"] == {"big": 4000000000}
    assert summary["link"]["switches"] == 6 - (built == SWITCHES[0])
    assert summary["link"]["attempts"] == 1


def test_a_lost_params_packet_is_recovered(tmp_path):
    # the first PARAMS packet of attempt 1 is lost: the board counts the gap, the run starts
    # again
    def lose_up(head, count, resets):
        return head["type"] == PacketType.PARAMS and resets == 1 and count == 0

    with board("supplychain", capacity=64) as (_, address), proxy(address, drop_up=lose_up) as p:
        code, out = run(
            p.address,
            tmp_path,
            "supplychain",
            "--tuples-per-packet",
            "4",
            *_params(["big=20000", "big=0@100"]),
        )
    assert code == 0 and [kind for _, kind, _ in p.dropped] == [PacketType.PARAMS]
    expected, _ = reference(tmp_path, "supplychain", *_params(["big=20000", "big=0@100"]))
    assert out.read_text() == expected
    summary = json.loads((tmp_path / "board.summary.json").read_text())
    assert summary["link"]["attempts"] == 2
    assert "did not all reach the board" in summary["link"]["losses"][0]


def test_small_packets_a_small_buffer_and_drops(tmp_path):
    # 4 partitions: marathon's runners overflow them; a 64-byte buffer holds 5 tuples, so the
    # host waits for the board's credit after every packet of 3
    params = ["--store", "pipeline", "--partitions", "4", "--tick-tuples", "3", "--timer-bits", "2"]
    with board(partitions=4, tick_tuples=3, timer_bits=2, capacity=64) as (model, address):
        code, out = run(address, tmp_path, "marathon", "--tuples-per-packet", "3", *params)
        assert code == 0
        assert model.counters["engine_full"] == 0
    expected, ref_summary = reference(tmp_path, "marathon", *params)
    summary = json.loads((tmp_path / "board.summary.json").read_text())
    assert ref_summary["drops"] > 0 and out.read_text() == expected
    assert {k: summary[k] for k in SAME} == {k: ref_summary[k] for k in SAME}
    assert summary["link"]["tuples_per_packet"] == 3
    assert summary["link"]["packets"] == -(-278 // 3)
    assert summary["link"]["status_requests"] > summary["link"]["packets"] // 2


def test_lost_status_answers_are_asked_again(tmp_path):
    # the STATUS answering RESET and the third STATUS are lost: asked again, no restart
    def lose(head, count, resets):
        return head["type"] == PacketType.STATUS and count in (0, 3)

    with board(capacity=64) as (_, address), proxy(address, drop_down=lose) as p:
        result = run_files(
            udp_host.UdpBoard(udp_host.UdpOptions(address=p.address, tuples_per_packet=5)),
            compile_file(QUERIES / "marathon.sql"),
            str(QUERIES / "marathon.csv"),
            str(tmp_path / "board.csv"),
            default_engine(compile_file(QUERIES / "marathon.sql")),
        )
    assert len(p.dropped) == 2
    assert (tmp_path / "board.csv").read_text() == (QUERIES / "marathon.matches.csv").read_text()
    # (a file is read in pieces: the run's totals, the link's statistics in their details)
    assert result.details["link"]["attempts"] == 1 and not result.warnings


def test_lost_packets_both_ways_are_recovered(tmp_path, capsys):
    # attempt 1 loses TUPLES packet 3 on the way to the board, attempt 2 the second RECORDS
    # packet on the way back; attempt 3 goes through
    def lose_up(head, count, resets):
        return head["type"] == PacketType.TUPLES and head["seq"] == 3 and resets == 1

    def lose_down(head, count, resets):
        return (
            head["type"] == PacketType.RECORDS
            and head["seq"] >= 1
            and resets == 2
            and not p.dropped[1:]
        )

    with (
        board(capacity=64) as (_, address),
        proxy(address, drop_up=lose_up, drop_down=lose_down) as p,
    ):
        code, out = run(p.address, tmp_path, "marathon", "--tuples-per-packet", "5")
    assert code == 0
    assert [(way, kind) for way, kind, _ in p.dropped] == [
        ("up", PacketType.TUPLES),
        ("down", PacketType.RECORDS),
    ]
    assert out.read_text() == (QUERIES / "marathon.matches.csv").read_text()
    summary = json.loads((tmp_path / "board.summary.json").read_text())
    link = summary["link"]
    assert link["attempts"] == 3
    assert "TUPLES packets 3-3 did not all reach the board" in link["losses"][0]
    assert "tuples 15-19" in link["losses"][0]
    assert "1 RECORDS packets (1 records)" in link["losses"][1]
    err = capsys.readouterr().err
    assert "warning: the UDP link lost packets" in err


def test_upstream_loss_in_every_attempt_names_the_tuples(tmp_path, capsys):
    def lose_up(head, count, resets):
        return head["type"] == PacketType.TUPLES and head["seq"] == 7

    with board(capacity=64) as (_, address), proxy(address, drop_up=lose_up) as p:
        code, out = run(
            p.address, tmp_path, "marathon", "--tuples-per-packet", "5", "--retries", "1"
        )
    assert code == 1
    err = capsys.readouterr().err
    assert "in each of 2 attempts" in err and "TUPLES packets 7-7" in err
    assert "tuples 35-39" in err
    assert not out.exists() and not (tmp_path / "board.summary.json").exists()


def test_downstream_loss_in_every_attempt_names_the_tuples(tmp_path, capsys):
    # the board's records (marathon: 8 matches); its third RECORDS packet of each attempt is
    # lost, so the tuples between the second and the fourth record are named
    seqs = [
        int(line.split(",")[0])
        for line in (QUERIES / "marathon.matches.csv").read_text().splitlines()[1:]
    ]

    def lose_down(head, count, resets):
        return head["type"] == PacketType.RECORDS and count == 2

    with board(capacity=64) as (_, address), proxy(address, drop_down=lose_down) as p:
        code, out = run(
            p.address, tmp_path, "marathon", "--tuples-per-packet", "5", "--retries", "0"
        )
    assert code == 1, capsys.readouterr().err
    assert len(p.dropped) == 1
    err = capsys.readouterr().err
    assert "1 RECORDS packets (1 records) from the board were lost" in err
    assert f"tuples {seqs[1] + 1}-{seqs[3] - 1}" in err
    assert not out.exists() and not (tmp_path / "board.summary.json").exists()


@pytest.mark.parametrize("rate", ["max", "20000"])
def test_open_loop_equals_match(tmp_path, rate):
    """--rate: open loop, no credit; the switches still wait for their tuples; the same
    matches as ``nfacep match``; paced at 20,000 tuples/s the run takes at least as long as its
    tuples need at that rate."""
    with board("supplychain", capacity=64) as (model, address):
        code, out = run(
            address,
            tmp_path,
            "supplychain",
            "--tuples-per-packet",
            "4",
            "--rate",
            rate,
            *_params(SWITCHES),
        )
        assert code == 0
        # (the board is built with big=20000: a switch at tuple 0 first)
        assert [seq for seq, _ in model.switches] == [0, 235, 260, 281, 282, 300]
    expected, _ = reference(tmp_path, "supplychain", *_params(SWITCHES))
    assert out.read_text() == expected
    link = json.loads((tmp_path / "board.summary.json").read_text())["link"]
    assert link["rate"] == ("max" if rate == "max" else 20000.0)
    assert link["attempts"] == 1 and link["switches"] == 6
    if rate != "max":
        assert link["seconds"] >= (309 - 4) / 20000


def test_open_loop_losses_are_found_and_recovered(tmp_path, capsys):
    # attempt 1 loses TUPLES packet 3, attempt 2 packet 60 (the last: no later packet shows the
    # gap, the last STATUS does); attempt 3 goes through
    # (by the RESETs since the last drop, not their number: a RESET is repeated when its
    # answer is slow, on a busy machine)
    plan = {"next": [3, 55], "resets": 0}

    def lose_up(head, count, resets):
        if head["type"] != PacketType.TUPLES or not plan["next"]:
            return False
        if head["seq"] != plan["next"][0] or resets <= plan["resets"]:
            return False
        plan["next"].pop(0)
        plan["resets"] = resets
        return True

    with board() as (_, address), proxy(address, drop_up=lose_up) as p:
        code, out = run(
            p.address, tmp_path, "marathon", "--tuples-per-packet", "5", "--rate", "max"
        )
    assert code == 0, capsys.readouterr().err
    assert [(kind, seq) for _, kind, seq in p.dropped] == [
        (PacketType.TUPLES, 3),
        (PacketType.TUPLES, 55),
    ]
    assert out.read_text() == (QUERIES / "marathon.matches.csv").read_text()
    link = json.loads((tmp_path / "board.summary.json").read_text())["link"]
    assert link["attempts"] == 3
    first, second = link["losses"]
    # the tuples named hold the lost ones (15-19, 275-277)
    for text, lost in ((first, (15, 19)), (second, (275, 277))):
        a, b = map(int, text.rsplit("tuples ", 1)[1].split("-"))
        assert a <= lost[0] and lost[1] <= b, text


@pytest.mark.parametrize("listening", [True, False])
def test_silent_address_times_out(tmp_path, capsys, listening):
    # a socket that never answers, or none at all (the port refuses: ICMP unreachable)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:
        silent.bind(("127.0.0.1", 0))
        port = silent.getsockname()[1]
        if not listening:
            silent.close()
        code, out = run(f"127.0.0.1:{port}", tmp_path, "marathon", "--timeout", "0.5")
    assert code == 2
    err = capsys.readouterr().err
    assert f"no board answers at 127.0.0.1:{port} within --timeout 0.5 s" in err
    assert "--link udp" in err
    assert ("refuses UDP" in err) != listening
    assert not out.exists() and not (tmp_path / "board.summary.json").exists()


def test_run_learns_the_engine_from_the_board(tmp_path, capsys):
    """``run --udp`` without engine options takes the board's from its STATUS."""
    engine = ("--store", "pipeline", "--partitions", "8", "--tick-tuples", "8", "--timer-bits", "3")
    with board(partitions=8, tick_tuples=8, timer_bits=3) as (_, address):
        code, out = run(address, tmp_path, "marathon")
        assert code == 0
        # an option given must be the board's
        assert run(address, tmp_path, "marathon", "--tick-tuples", "8")[0] == 0
    expected, ref = reference(tmp_path, "marathon", *engine)
    summary = json.loads((tmp_path / "board.summary.json").read_text())
    assert out.read_text() == expected and ref["drops"] > 0
    keys = ("drops", "drop_seqs", "partitions", "tick_tuples", "timer_bits", "store")
    assert {k: summary[k] for k in keys} == {k: ref[k] for k in keys}


def test_board_with_another_engine(tmp_path, capsys):
    with board() as (_, address):  # built with the default engine, asked for a pipeline
        code, out = run(address, tmp_path, "marathon", "--store", "pipeline", "--partitions", "64")
    assert code == 2
    err = capsys.readouterr().err
    assert "the board runs this query file's engine built with --partitions 65536" in err
    assert "--partitions 65536 (given: 64), --store table (given: pipeline)" in err
    assert not out.exists() and not (tmp_path / "board.summary.json").exists()
    # a board of another query file (its fingerprint is not this file's with its parameters)
    with board(engine_id_override=0x12345678) as (_, address):
        code, out = run(address, tmp_path, "marathon")
    assert code == 2
    err = capsys.readouterr().err
    assert "the board runs another engine (engine id 12345678" in err and "--link udp" in err


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--udp", "127.0.0.1:5000", "--port", "/dev/ttyUSB0"], "exactly one of --port"),
        ([], "exactly one of --port"),
        (["--udp", "127.0.0.1:99999"], "is not a UDP port"),
        (["--udp", "127.0.0.1:"], "is not a UDP port"),
        (["--udp", ":5000"], "expected HOST or HOST:PORT"),
        (["--udp", "no-such-host.invalid"], "cannot resolve"),
        (["--udp", "127.0.0.1", "--tuples-per-packet", "0"], "at least 1"),
        (["--udp", "127.0.0.1", "--frame-tuples", "4"], "--frame-tuples is for --port"),
        (["--port", "/dev/null", "--tuples-per-packet", "4"], "--tuples-per-packet is for --udp"),
        (["--udp", "127.0.0.1", "--timeout", "nan"], "--timeout"),
        (["--udp", "127.0.0.1", "--rate", "0"], "--rate '0': expected a positive number"),
        (["--udp", "127.0.0.1", "--rate", "fast"], "--rate 'fast'"),
        (["--udp", "127.0.0.1", "--rate", "inf"], "--rate 'inf'"),
        (["--port", "/dev/null", "--rate", "1000"], "--rate is for --udp"),
        (["--port", "/dev/null", "--images", "d"], "--images is for --udp"),
    ],
)
def test_usage_errors(tmp_path, capsys, args, words):
    out = tmp_path / "m.csv"
    assert (
        main(
            [
                "run",
                str(QUERIES / "marathon.sql"),
                "--input",
                str(QUERIES / "marathon.csv"),
                "--output",
                str(out),
                *args,
            ]
        )
        == 2
    )
    assert words in capsys.readouterr().err
    assert not out.exists()


def test_too_many_tuples_per_packet(tmp_path, capsys):
    with board() as (_, address):
        code, out = run(address, tmp_path, "marathon", "--tuples-per-packet", "133")
    assert code == 2
    assert "at most 132 tuples of 11 bytes fit a 1,500-byte packet" in capsys.readouterr().err
    assert not out.exists()


def test_default_packets_fill_the_mtu():
    assert udp_host.max_tuples_per_packet(11) == 132


def test_more_tuples_per_packet_than_the_board_holds(tmp_path, capsys):
    with board(capacity=64) as (_, address):
        code, out = run(address, tmp_path, "marathon", "--tuples-per-packet", "6")
    assert code == 2
    assert "the board's buffer holds 5 tuples of 11 bytes" in capsys.readouterr().err
    assert not out.exists()
