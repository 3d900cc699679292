"""``nfacep serve``: the software UDP board on a socket, as a command: its first line says where
it listens, ``nfacep run --udp`` pointed there gives ``nfacep match``'s file, and SIGTERM or
SIGINT stop it with exit 0."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys

import pytest
from test_udp_host import QUERIES, reference, run

#: (as the ``nfacep`` script runs it: ``python -m nfacep.cli`` would make the module twice)
SERVE = [sys.executable, "-c", "import sys; from nfacep.cli import main; sys.exit(main())", "serve"]
#: The ``--rtl`` board's engine and addresses, here and in ``test_udp_tap.py`` (on a TAP, in a
#: namespace addressed from the documentation range 192.0.2.0/24): the same Verilog, so one
#: Verilator build in the session's cache serves both tests.
RTL_ENGINE = ("--partitions", "8")
RTL_ADDRESSES = ("--ip", "192.0.2.2", "--mac", "02:00:5e:00:02:02")


def _start(*args: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [*SERVE, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    first = proc.stdout.readline()
    found = re.search(r"listening on udp (\S+):(\d+):", first)
    if not found:
        proc.kill()
        raise AssertionError(f"no address in {first!r}: {proc.stderr.read()}")
    return proc, f"{found[1]}:{found[2]}"


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_serve_answers_run_and_stops_cleanly(tmp_path, stop, capsys):
    name = "supplychain"  # (a runtime parameter: the board's value from --param)
    expected, _ = reference(tmp_path, name, "--param", "big=20000")
    proc, address = _start(
        str(QUERIES / f"{name}.sql"), "--udp", "127.0.0.1:0", "--param", "big=20000"
    )
    try:
        code, out = run(address, tmp_path, name, "--param", "big=20000")
        assert code == 0, capsys.readouterr().err
        assert out.read_text() == expected
    finally:
        proc.send_signal(stop)
        rest, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert "stopped" in rest and "Traceback" not in err


def test_serve_refuses_an_address_in_use(tmp_path):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        done = subprocess.run(
            [*SERVE, str(QUERIES / "marathon.sql"), "--udp", f"127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2
    assert "cannot listen there" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_serve_rtl_is_the_gateware_behind_a_socket(tmp_path, capsys, sim_cache):
    """``nfacep serve --rtl``: the board top's Verilog under Verilator behind the socket;
    ``nfacep run --udp`` gets ``nfacep match``'s file from the real gateware (its STATUS has
    the gateware's counters), and a capture holds every frame both ways."""
    from nfacep.links.udp.pcap import read_pcap
    from nfacep.sim import build

    missing = build.simulator_available("verilator", sim_cache)
    if missing:
        pytest.fail(f"{missing} (CI installs it with tools/install-simulators.sh)")
    name, pcap = "marathon", tmp_path / "rtl.pcap"
    expected, _ = reference(tmp_path, name, *RTL_ENGINE)
    proc, address = _start(
        str(QUERIES / f"{name}.sql"),
        "--udp",
        "127.0.0.1:0",
        "--rtl",
        *RTL_ENGINE,
        *RTL_ADDRESSES,
        "--build-dir",
        str(sim_cache),
        "--pcap",
        str(pcap),
    )
    try:
        code, out = run(address, tmp_path, name, *RTL_ENGINE, "--timeout", "30")
        assert code == 0, capsys.readouterr().err
        assert out.read_text() == expected
    finally:
        proc.send_signal(signal.SIGTERM)
        rest, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "stopped" in rest, err
    summary = json.loads((tmp_path / "board.summary.json").read_text())
    board = summary["board"]
    assert board["tuples"] == summary["tuples"] == 278 and board["accepted"] >= board["next_seq"]
    frames = read_pcap(pcap)
    assert len(frames) >= board["next_seq"] + board["packets"]
