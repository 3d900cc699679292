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

from nfacep.cli import main

#: (as the ``nfacep`` script runs it: ``python -m nfacep.cli`` would make the module twice;
#: a shell runs background jobs with SIGINT ignored, which Python then keeps, and so would the
#: board started by a test run in the background: the handler a terminal's Ctrl-C reaches is
#: restored first)
SERVE = [
    sys.executable,
    "-c",
    "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "from nfacep.cli import main; sys.exit(main())",
    "serve",
]
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


def stop(proc: subprocess.Popen, how: int = signal.SIGTERM, timeout: float = 60) -> tuple:
    """Send ``how`` to a board's process (:func:`_start`) and return its stdout and stderr
    once it exited; one that does not within ``timeout`` seconds is killed (no board is left
    serving) and the test fails. (Its exit takes 0.15 s of CPU: 1 to 4 s at a load of 10 to
    12 on 2 cores, so 60 s is a hang.)"""
    proc.send_signal(how)
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        name = signal.Signals(how).name
        pytest.fail(f"the board did not exit within {timeout:g} s of {name}; stderr: {err}")


@pytest.mark.parametrize(
    ("how", "background"),
    [(signal.SIGTERM, False), (signal.SIGINT, False), (signal.SIGINT, True)],
)
def test_serve_answers_run_and_stops_cleanly(tmp_path, how, background, capsys):
    """``background``: started as a shell's background job is (SIGINT ignored), as when
    the tests themselves run in one."""
    name = "supplychain"  # (a runtime parameter: the board's value from --param)
    expected, _ = reference(tmp_path, name, "--param", "big=20000")
    before = signal.signal(signal.SIGINT, signal.SIG_IGN) if background else None
    try:
        proc, address = _start(
            str(QUERIES / f"{name}.sql"), "--udp", "127.0.0.1:0", "--param", "big=20000"
        )
    finally:
        if background:
            signal.signal(signal.SIGINT, before)
    try:
        code, out = run(address, tmp_path, name, "--param", "big=20000")
        assert code == 0, capsys.readouterr().err
        assert out.read_text() == expected
    finally:
        rest, err = stop(proc, how)
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


@pytest.mark.parametrize("name", ["tap-name-longer-than-15", "tap%d", "a b", "", "x/y", ".."])
@pytest.mark.parametrize("rtl", [[], ["--rtl"]])
def test_serve_refuses_a_tap_name_linux_would_change(name, rtl, capsys):
    """``--tap``: a name Linux would cut short (its request holds 15 bytes and a NUL), number
    (``%d``) or refuse is a usage error before anything is opened or built (a long name was
    created cut short while the first line named it whole; an empty one was a traceback)."""
    assert main(["serve", str(QUERIES / "marathon.sql"), "--tap", name, *rtl]) == 2
    err = capsys.readouterr().err
    assert f"--tap: {name!r} is not a network interface's name" in err, err


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
        rest, err = stop(proc)
    assert proc.returncode == 0 and "stopped" in rest, err
    summary = json.loads((tmp_path / "board.summary.json").read_text())
    board = summary["board"]
    assert board["tuples"] == summary["tuples"] == 278 and board["accepted"] >= board["next_seq"]
    frames = read_pcap(pcap)
    assert len(frames) >= board["next_seq"] + board["packets"]


#: A small programmable engine that holds marathon's query (9 states, 7 atoms)
PROGRAMMABLE = ("--engine", "programmable", "--states", "9", "--atoms", "7", "--queries", "1")
PROGRAMMABLE_TABLE = ("--partitions", "16")  # (drops too: 16 entries for 50 runners)
#: Another query on marathon's stream, for ``nfacep load``
IN_ORDER = """QUERY in_order FROM marathon
PARTITION runner
PATTERN ( A B )
DEFINE
  A AS (checkpoint = 'Staten Island')
  B AS (checkpoint = 'Brooklyn' AND speed > 3.5);
"""


@pytest.mark.slow
def test_serve_rtl_runs_the_images_run_and_load_send(tmp_path, capsys, sim_cache, monkeypatch):
    """``nfacep serve --rtl --engine programmable``: the gateware's programmable engine behind
    the socket boots with no image; ``nfacep run`` loads marathon's image and gets ``nfacep
    match``'s file; ``nfacep load`` of another query on the same stream puts its image in
    force, and a run of that file (nothing left to send) gets its ``match`` file."""
    from nfacep.sim import build

    missing = build.simulator_available("verilator", sim_cache)
    if missing:
        pytest.fail(f"{missing} (CI installs it with tools/install-simulators.sh)")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # (load's record)
    marathon = (QUERIES / "marathon.sql").read_text()
    other = tmp_path / "in_order.sql"
    other.write_text(marathon[: marathon.index("QUERY cheat")] + IN_ORDER)
    engine = (*PROGRAMMABLE, *PROGRAMMABLE_TABLE)
    query = str(QUERIES / "marathon.sql")
    proc, address = _start(query, "--udp", "127.0.0.1:0", "--rtl", *engine,
                           *RTL_ADDRESSES, "--build-dir", str(sim_cache))  # fmt: skip
    try:
        expected, _ = reference(tmp_path, "marathon", *PROGRAMMABLE_TABLE)
        code, out = run(address, tmp_path, "marathon", *engine, "--timeout", "30")
        assert code == 0 and out.read_text() == expected
        assert "loaded the image" in capsys.readouterr().err
        assert main(["load", str(other), "--udp", address, *engine, "--timeout", "30"]) == 0
        assert f"image {_fingerprint(other)} of {other} in force" in capsys.readouterr().out
        data = ["--input", str(QUERIES / "marathon.csv"), "--output"]
        assert main(["match", str(other), *data, str(tmp_path / "ref2.csv"),
                     *PROGRAMMABLE_TABLE]) == 0  # fmt: skip
        assert main(["run", str(other), "--udp", address, *data, str(tmp_path / "board2.csv"),
                     *engine, "--timeout", "30"]) == 0  # fmt: skip
        assert "loaded the image" not in capsys.readouterr().err
        assert (tmp_path / "board2.csv").read_text() == (tmp_path / "ref2.csv").read_text()
        assert "in_order" in (tmp_path / "ref2.csv").read_text()
    finally:
        rest, err = stop(proc)
    assert proc.returncode == 0 and "stopped" in rest, err


def _fingerprint(path) -> str:
    """The image of the query file ``path`` for :data:`PROGRAMMABLE`'s engine."""
    import dataclasses

    from nfacep import compile_file
    from nfacep.image import Capacity, EngineShape, image
    from nfacep.params import EngineParams

    nfa = compile_file(path)
    params = dataclasses.replace(EngineParams(), states=9, atoms=7, queries=1)
    shape = EngineShape(nfa.program.schema, nfa.program.partition_fields, Capacity.of(params))
    return image(nfa, shape).fingerprint
