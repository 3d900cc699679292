"""``nfacep run`` (boards/host.py) against a software board over a pty pair.

The board is :class:`nfacep.boards.link.model.BoardModel`: the link protocol with the reference
matcher as the engine, served on the pty's master side while the host opens the slave side
as its serial port. The match file and summary must equal ``nfacep match``'s, also over a
link that loses and corrupts bytes, with a buffer the host has to wait for, and with drops.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import threading
import tty

import pytest
from bundled import param_args

from nfacep import compile_file
from nfacep.backend import run_files
from nfacep.boards import host
from nfacep.boards.link.model import BoardModel, serve
from nfacep.cli import main
from nfacep.params import EngineParams

ROOT = pathlib.Path(__file__).resolve().parents[1]
QUERIES = ROOT / "queries"


def run_cli(argv):
    """``nfacep ARGV`` through the real command line."""
    return main(argv)


@contextlib.contextmanager
def board(name="marathon", *, serve_it=True, lose=0.0, corrupt=0.0, **kwargs):
    """A software board on a fresh pty; yields (model, port path)."""
    given = {k: kwargs.pop(k) for k in list(kwargs) if k in ("partitions", "tick_tuples",
                                                              "timer_bits")}
    model = BoardModel(compile_file(QUERIES / f"{name}.sql"), EngineParams(**given), **kwargs)
    master, slave = os.openpty()
    tty.setraw(master)
    stop = threading.Event()
    thread = serve(model, master, stop=stop, lose=lose, corrupt=corrupt, seed=7) \
        if serve_it else None
    try:
        yield model, os.ttyname(slave)
    finally:
        stop.set()
        if thread is not None:
            thread.join(timeout=2)
        os.close(master)
        os.close(slave)


def reference(tmp_path, name, *params):
    out = tmp_path / "reference.csv"
    assert main(["match", str(QUERIES / f"{name}.sql"), "--input", str(QUERIES / f"{name}.csv"),
                 "--output", str(out), *params]) == 0
    return out.read_text(), json.loads((tmp_path / "reference.summary.json").read_text())


SAME = ("tuples", "matches", "drops", "drop_seqs", "partitions", "tick_tuples", "timer_bits")


@pytest.mark.parametrize("name", sorted(p.stem for p in QUERIES.glob("*.sql")))
def test_run_equals_match(tmp_path, name, capsys):
    out = tmp_path / "board.csv"
    if param_args(name):  # the link cannot switch or report runtime parameters yet
        assert run_cli(["run", str(QUERIES / f"{name}.sql"), "--port", str(tmp_path / "tty"),
                        "--input", str(QUERIES / f"{name}.csv"), "--output", str(out),
                        *param_args(name)]) == 2
        assert "the link cannot report or switch them yet" in capsys.readouterr().err
        assert not out.exists()
        return
    with board(name) as (_, port):
        assert run_cli(["run", str(QUERIES / f"{name}.sql"), "--port", port,
                        "--input", str(QUERIES / f"{name}.csv"), "--output", str(out)]) == 0
    expected, ref_summary = reference(tmp_path, name)
    assert out.read_text() == expected == (QUERIES / f"{name}.matches.csv").read_text()
    summary = json.loads((tmp_path / "board.summary.json").read_text())
    assert {k: summary[k] for k in SAME} == {k: ref_summary[k] for k in SAME}
    assert summary["board"]["tuples"] == summary["tuples"]
    assert summary["link"]["frames_resent"] == 0
    assert f"-> {out}" in capsys.readouterr().out


def test_drops_and_a_small_slow_buffer(tmp_path):
    # 4 partitions: marathon's runners overflow them; a 64-byte buffer holds 5 tuples and the
    # engine takes them only between polls, so the host must wait for room
    params = ["--partitions", "4", "--tick-tuples", "3", "--timer-bits", "2"]
    out = tmp_path / "board.csv"
    with board(partitions=4, tick_tuples=3, timer_bits=2, capacity=64) as (model, port):
        model.consume = False
        assert run_cli(["run", str(QUERIES / "marathon.sql"), "--port", port, "--input",
                        str(QUERIES / "marathon.csv"), "--output", str(out), *params]) == 0
        assert model.counters["overflow"] == 0
    expected, ref_summary = reference(tmp_path, "marathon", *params)
    summary = json.loads((tmp_path / "board.summary.json").read_text())
    assert ref_summary["drops"] > 0
    assert out.read_text() == expected
    assert {k: summary[k] for k in SAME} == {k: ref_summary[k] for k in SAME}
    assert summary["link"]["tuples_per_frame"] == 2 and summary["link"]["status_polls"] > 0


def test_lossy_link_resends_and_still_matches(tmp_path):
    out = tmp_path / "board.csv"
    with board("vshape", lose=0.0005, corrupt=0.0005) as (model, port):
        result = run_files(host.UartBoard(port, timeout=5),
                           compile_file(QUERIES / "vshape.sql"), str(QUERIES / "vshape.csv"),
                           str(out), EngineParams())
    expected, _ = reference(tmp_path, "vshape")
    assert out.read_text() == expected
    errors = model.status()
    assert errors["bad_crc"] + errors["bad_type"] + errors["bad_length"] > 0
    assert result.stats["frames_resent"] > 0


def test_no_board_answers(tmp_path, capsys):
    out = tmp_path / "board.csv"
    with board(serve_it=False) as (_, port):
        assert run_cli(["run", str(QUERIES / "marathon.sql"), "--port", port, "--input",
                        str(QUERIES / "marathon.csv"), "--output", str(out),
                        "--timeout", "0.6"]) == 1
    err = capsys.readouterr().err
    assert f"no board answers on {port}" in err and "--link uart" in err
    assert not out.exists() and not (tmp_path / "board.summary.json").exists()


def test_port_that_does_not_exist(tmp_path, capsys):
    # a port that cannot be opened is a mistake to fix (exit 2), not a failed run (1)
    assert run_cli(["run", str(QUERIES / "marathon.sql"), "--port", str(tmp_path / "ttyNONE"),
                    "--input", str(QUERIES / "marathon.csv"),
                    "--output", str(tmp_path / "m.csv")]) == 2
    assert "cannot open the serial port" in capsys.readouterr().err
    assert not (tmp_path / "m.csv").exists()


def test_board_with_another_engine(tmp_path, capsys):
    out = tmp_path / "board.csv"
    with board() as (_, port):  # built with 256 partitions, asked for 64
        assert run_cli(["run", str(QUERIES / "marathon.sql"), "--port", port, "--input",
                        str(QUERIES / "marathon.csv"), "--output", str(out),
                        "--partitions", "64"]) == 1
    err = capsys.readouterr().err
    assert "the board runs another engine" in err and "--partitions 64" in err
    assert not out.exists()
