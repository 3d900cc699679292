"""``nfacep run`` (links/uart/host.py) against a software board over a pty pair.

The board is :class:`nfacep.links.uart.model.UartBoardModel`: the link protocol with the reference
matcher as the engine, served on the pty's master side while the host opens the slave side
as its serial port. The match file and summary must equal ``nfacep match``'s, also over a
link that loses and corrupts bytes, with a buffer the host has to wait for, and with drops, and
with runtime parameters switched while the stream runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import threading
import time
import tty

import pytest
from bundled import board_setup, keyed_fire, param_args, reference

from nfacep import compile_file
from nfacep.backend import run_files
from nfacep.cli import main
from nfacep.links import host
from nfacep.links.uart import host as uart_host
from nfacep.links.uart.model import UartBoardModel, serve
from nfacep.params import default_engine
from nfacep.settings import ParamValues

ROOT = pathlib.Path(__file__).resolve().parents[3]
QUERIES = ROOT / "queries"
#: The baud rate the lossy-link tests give the host. A pty does not pace bytes, and the host's
#: retransmission timeout grows with the byte time (0.29 s at 115200 baud for the vshape board,
#: 0.11 s at 3 Mbaud, an FTDI's most): the same resends with less waiting.
LOSSY_BAUD = 3_000_000


def run_on(port, name, output, *options):
    """``nfacep run`` of the bundled query ``name`` on its tuples over the serial ``port``,
    the matches written to ``output``: its exit code."""
    query, tuples = str(QUERIES / f"{name}.sql"), str(QUERIES / f"{name}.csv")
    return run_cli(
        ["run", query, "--port", port, "--input", tuples, "--output", str(output), *options]
    )


def run_cli(argv):
    """``nfacep ARGV`` through the real command line."""
    return main(argv)


@contextlib.contextmanager
def board(name="marathon", *, serve_it=True, lose=0.0, corrupt=0.0, folder=QUERIES, **kwargs):
    """A software board on a fresh pty; yields (model, port path). Built with the bundled
    runtime parameters' values unless ``values`` (``--param`` texts) says otherwise."""
    nfa, engine, values = board_setup(name, kwargs, folder)
    model = UartBoardModel(nfa, engine, values=values, **kwargs)
    master, slave = os.openpty()
    tty.setraw(master)
    stop = threading.Event()
    thread = (
        serve(model, master, stop=stop, lose=lose, corrupt=corrupt, seed=7) if serve_it else None
    )
    try:
        yield model, os.ttyname(slave)
    finally:
        stop.set()
        if thread is not None:
            thread.join(timeout=2)
        os.close(master)
        os.close(slave)


SAME = ("tuples", "matches", "drops", "drop_seqs", "partitions", "tick_tuples", "timer_bits")


@pytest.mark.parametrize("name", sorted(p.stem for p in QUERIES.glob("*.sql")))
def test_run_equals_match(tmp_path, name, capsys):
    out = tmp_path / "board.csv"
    with board(name) as (model, port):
        assert run_on(port, name, out, *param_args(name)) == 0
        assert model.switches == []  # the board runs the values it was built with
    expected, ref_summary = reference(tmp_path, name, *param_args(name))
    assert out.read_text() == expected == (QUERIES / f"{name}.matches.csv").read_text()
    summary = json.loads((tmp_path / "board.summary.json").read_text())
    assert {k: summary[k] for k in SAME} == {k: ref_summary[k] for k in SAME}
    assert summary["board"]["tuples"] == summary["tuples"]
    # (a software board is a thread of this process, late on a busy machine: the host then
    # resends frames the board took, each counted there; nothing is resent from a board that
    # answers at once, test_answers_within_the_timeout_get_nothing_resent)
    assert summary["link"]["frames_resent"] == summary["board"]["out_of_seq"]
    if param_args(name):
        assert summary["runtime_parameters"] == ref_summary["runtime_parameters"]
        assert summary["board"]["values"] == ref_summary["runtime_parameters"]["initial"]
        assert summary["link"]["switches"] == 0
    assert f"-> {out}" in capsys.readouterr().out


class LatePort:
    """A serial port to ``model`` in this thread: each write is fed to the board at once, and
    its answer can be read ``late`` seconds later, whenever the host reads (the pty's board is
    a thread, late when it is scheduled late)."""

    def __init__(self, model: UartBoardModel, late: float):
        self.model, self.late = model, late
        self.coming: list[tuple[float, bytes]] = []  # (when, bytes)
        self.waiting = bytearray()

    def write(self, data: bytes) -> int:
        self.coming.append((time.monotonic() + self.late, self.model.feed(bytes(data))))
        return len(data)

    @property
    def in_waiting(self) -> int:
        now = time.monotonic()
        while self.coming and self.coming[0][0] <= now:
            self.waiting += self.coming.pop(0)[1]
        return len(self.waiting)

    def read(self, size: int = 1) -> bytes:
        if not self.in_waiting:
            time.sleep(0.001)  # (as the port's read timeout)
        data, self.waiting = bytes(self.waiting[:size]), self.waiting[size:]
        return data


def test_answers_within_the_timeout_get_nothing_resent(tmp_path):
    """A lossless link to a board whose answers come 0.15 s late, within the host's
    retransmission timeout (0.29 s for this board at 115200 baud): no frame is resent, the
    matches are ``nfacep match``'s."""
    nfa, engine, values = board_setup("marathon", {})
    model = UartBoardModel(nfa, engine, values=values)
    options = uart_host.UartOptions(port="late", baud=115200, timeout=5)
    result = run_files(
        uart_host.UartBoard(options, serial_port=LatePort(model, 0.15)),
        nfa,
        str(QUERIES / "marathon.csv"),
        str(tmp_path / "board.csv"),
        engine,
    )
    assert (tmp_path / "board.csv").read_text() == (QUERIES / "marathon.matches.csv").read_text()
    assert result.details["link"]["frames_resent"] == 0
    assert model.counters == {"bad_length": 0, "out_of_seq": 0, "overflow": 0}


def test_several_key_fields(tmp_path):
    """PARTITION BY site, sensor over the link: the records' keys come back as a column per
    field, the matches and drops as nfacep match's."""
    query = keyed_fire(tmp_path)
    params = ["--store", "pipeline", "--partitions", "8", "--tick-tuples", "8", "--timer-bits", "3"]
    out = tmp_path / "board.csv"
    with board("fire2", folder=tmp_path, partitions=8, tick_tuples=8, timer_bits=3) as (_, port):
        argv = ["run", str(query), "--port", port, "--input", str(tmp_path / "fire2.csv")]
        assert run_cli([*argv, "--output", str(out), *params]) == 0
    expected, ref_summary = reference(tmp_path, "fire2", *params, folder=tmp_path)
    assert out.read_text() == expected
    assert expected.startswith("seq,query,partition_site,partition_sensor\n")
    summary = json.loads((tmp_path / "board.summary.json").read_text())
    assert {k: summary[k] for k in SAME} == {k: ref_summary[k] for k in SAME}
    assert summary["drops"] > 0 and summary["matches"]["fire"] > 0


def test_drops_and_a_small_slow_buffer(tmp_path):
    # 4 partitions: marathon's runners overflow them; a 64-byte buffer holds 5 tuples and the
    # engine takes them only between polls, so the host must wait for room
    params = ["--store", "pipeline", "--partitions", "4", "--tick-tuples", "3", "--timer-bits", "2"]
    out = tmp_path / "board.csv"
    with board(partitions=4, tick_tuples=3, timer_bits=2, capacity=64) as (model, port):
        model.consume = False
        assert run_on(port, "marathon", out, *params) == 0
        assert model.counters["overflow"] == 0
    expected, ref_summary = reference(tmp_path, "marathon", *params)
    summary = json.loads((tmp_path / "board.summary.json").read_text())
    assert ref_summary["drops"] > 0
    assert out.read_text() == expected
    assert {k: summary[k] for k in SAME} == {k: ref_summary[k] for k in SAME}
    assert summary["link"]["tuples_per_frame"] == 2 and summary["link"]["status_polls"] > 0


@pytest.mark.slow
def test_lossy_link_resends_and_still_matches(tmp_path):
    out = tmp_path / "board.csv"
    with board("vshape", lose=0.0005, corrupt=0.0005) as (model, port):
        result = run_files(
            uart_host.UartBoard(uart_host.UartOptions(port=port, baud=LOSSY_BAUD, timeout=5)),
            compile_file(QUERIES / "vshape.sql"),
            str(QUERIES / "vshape.csv"),
            str(out),
            default_engine(compile_file(QUERIES / "vshape.sql")),
        )
    expected, _ = reference(tmp_path, "vshape")
    assert out.read_text() == expected
    errors = model.status()
    assert errors["bad_crc"] + errors["bad_type"] + errors["bad_length"] > 0
    assert result.details["link"]["frames_resent"] > 0


def test_no_board_answers(tmp_path, capsys):
    out = tmp_path / "board.csv"
    with board(serve_it=False) as (_, port):
        assert run_on(port, "marathon", out, "--timeout", "0.6") == 1
    err = capsys.readouterr().err
    assert f"no board answers on {port}" in err and "--link uart" in err
    assert not out.exists() and not (tmp_path / "board.summary.json").exists()


def test_port_that_does_not_exist(tmp_path, capsys):
    # a port that cannot be opened is a mistake to fix (exit 2), not a failed run (1)
    assert run_on(str(tmp_path / "ttyNONE"), "marathon", tmp_path / "m.csv") == 2
    assert "cannot open the serial port" in capsys.readouterr().err
    assert not (tmp_path / "m.csv").exists()


ENGINE = ("--store", "pipeline", "--partitions", "8", "--tick-tuples", "8", "--timer-bits", "3")


def test_run_learns_the_engine_from_the_board(tmp_path, capsys):
    """``run`` without engine options takes the board's from its STATUS: a board built with
    a small pipeline and timers gives ``nfacep match``'s matches and drops with those options,
    and the summary records them."""
    out = tmp_path / "board.csv"
    with board(partitions=8, tick_tuples=8, timer_bits=3) as (_, port):
        argv = ["run", str(QUERIES / "marathon.sql"), "--port", port, "--input"]
        assert run_cli([*argv, str(QUERIES / "marathon.csv"), "--output", str(out)]) == 0
    expected, ref = reference(tmp_path, "marathon", *ENGINE)
    summary = json.loads((tmp_path / "board.summary.json").read_text())
    assert out.read_text() == expected and ref["drops"] > 0
    assert {k: summary[k] for k in (*SAME, "store")} == {k: ref[k] for k in (*SAME, "store")}


def test_board_with_another_engine(tmp_path, capsys):
    out = tmp_path / "board.csv"
    with board() as (_, port):  # built with the default engine, asked for a pipeline
        assert run_on(port, "marathon", out, "--store", "pipeline", "--partitions", "64") == 1
    err = capsys.readouterr().err
    assert "engine built with --partitions 65536 --tick-tuples 0 --timer-bits 4" in err
    assert "--partitions 65536 (given: 64), --store table (given: pipeline)" in err
    assert not out.exists()


#: supplychain's ato matches tuples 231, 241 and 281 with big=0, none with a big :big; these
#: switches leave 241 and 281 (and change :big twice inside one 16-tuple frame).
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


@pytest.mark.parametrize(("built", "slow"), [("big=20000", False), ("big=4000000000", True)])
def test_run_switches_runtime_parameters(tmp_path, built, slow):
    """Switches arrive before their tuples; a board built with other starting values is
    switched at tuple 0 first; a small buffer the engine empties only between polls makes the
    host wait for a pending switch's tuple before it sends the next switch. The matches equal
    ``nfacep match`` with the same --param arguments (and differ from every constant value)."""
    out = tmp_path / "board.csv"
    with board("supplychain", values=[built], capacity=64) as (model, port):
        model.consume = not slow
        assert run_on(port, "supplychain", out, *_params(SWITCHES)) == 0
        assert [seq for seq, _ in model.switches] == ([0] if built != SWITCHES[0] else []) + [
            235,
            260,
            281,
            282,
            300,
        ]
        assert model.counters["overflow"] == 0
        resent = model.counters["out_of_seq"]  # (late answers on a busy machine: see above)
    expected, ref_summary = reference(tmp_path, "supplychain", *_params(SWITCHES))
    assert out.read_text() == expected
    assert [line.split(",")[0] for line in expected.splitlines() if ",ato," in line] == [
        "241",
        "281",
    ]
    summary = json.loads((tmp_path / "board.summary.json").read_text())
    assert {k: summary[k] for k in SAME} == {k: ref_summary[k] for k in SAME}
    assert summary["runtime_parameters"] == ref_summary["runtime_parameters"]
    assert summary["board"]["values"] == {"big": 4000000000}  # in force at the end
    assert summary["link"]["switches"] == 6 - (built == SWITCHES[0])
    assert summary["link"]["frames_resent"] == resent


def test_run_switches_over_a_lossy_link(tmp_path):
    out = tmp_path / "board.csv"
    with board("supplychain", lose=0.001, corrupt=0.001) as (model, port):
        result = run_files(
            uart_host.UartBoard(uart_host.UartOptions(port=port, baud=LOSSY_BAUD, timeout=5)),
            compile_file(QUERIES / "supplychain.sql"),
            str(QUERIES / "supplychain.csv"),
            str(out),
            default_engine(compile_file(QUERIES / "supplychain.sql")),
            values=ParamValues.parse(model.values.types, SWITCHES),
        )
    expected, _ = reference(tmp_path, "supplychain", *_params(SWITCHES))
    assert out.read_text() == expected
    assert result.details["link"]["frames_resent"] > 0
    assert [seq for seq, _ in model.switches] == [0, 235, 260, 281, 282, 300]


def test_a_lost_switch_fails_the_run(tmp_path, capsys, monkeypatch):
    """A board whose values at the end are not the ones the switches give: the run fails
    rather than write results found with other values."""
    accept = UartBoardModel.params_frame

    def forget(self, payload):  # accepted, but the engine never sees it
        reply = accept(self, payload)
        self.switches.clear()
        return reply

    monkeypatch.setattr(UartBoardModel, "params_frame", forget)
    out = tmp_path / "board.csv"
    with board("supplychain") as (_, port):
        assert run_on(port, "supplychain", out, *_params(["big=20000", "big=5@100"])) == 1
    assert (
        "runtime parameters at the end of the run are {'big': 20000}, expected "
        "{'big': 5}" in capsys.readouterr().err
    )
    assert not out.exists()


def test_switch_plan_and_frame_starts():
    nfa = compile_file(QUERIES / "supplychain.sql")
    values = ParamValues.parse(nfa.program.parameters, ["big=3", "big=4@5", "big=9@40"])
    assert host.switch_plan(values, values.packed({"big": 3}), 40) == [(5, 4)]
    assert host.switch_plan(values, 8, 41) == [(0, 3), (5, 4), (40, 9)]
    assert host.switch_plan(values, 8, 0) == [] and host.switch_plan(None, 0, 9) == []
    assert host.frame_starts(10, 4, [5, 0, 10, 12]) == [0, 4, 5, 8, 10]
    assert host.values_bytes(nfa) == 4


def test_a_board_that_never_takes_a_switch(tmp_path, capsys, monkeypatch):
    """A board that answers but rejects every PARAMS frame: the run fails within its timeout
    (no endless resending)."""

    def reject(self, payload):
        self.counters["overflow"] += 1
        return self.ack()

    monkeypatch.setattr(UartBoardModel, "params_frame", reject)
    with board("supplychain") as (_, port):
        switches = _params(["big=20000", "big=5@100"])
        assert run_on(port, "supplychain", tmp_path / "b.csv", "--timeout", "0.5", *switches) == 1
    err = capsys.readouterr().err
    assert "has not accepted frame 7 (PARAMS)" in err and "'overflow'" in err
