"""The Linux kernel as the board's host: ``nfacep serve --tap`` puts a board on a TAP device
inside a network namespace of the test's own, addressed from the documentation range
192.0.2.0/24: the software board (:class:`~nfacep.links.udp.model.FrameBoard`: ARP, ICMP echo
and the payload format at the Ethernet level) and, with ``--rtl``, the board top's own Verilog
under Verilator (its MAC fed the kernel's frames whole). The kernel's ARP resolves the board
(no static entry), ``ping`` gets three answers that the board's STATUS counts in ``echoes``,
and ``nfacep run --udp`` inside the namespace writes ``nfacep match``'s file. Nothing leaves the
namespace (it holds only the TAP and its loopback), every command is bounded in count and
time, and the namespace is deleted at the end, also on a failure."""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import subprocess
import sys
import time

import pytest
from test_serve import RTL_ADDRESSES, RTL_ENGINE, SERVE, stop
from test_udp_host import QUERIES, reference

from nfacep.links.udp import protocol as udp
from nfacep.links.udp.pcap import read_pcap

NAMESPACE = f"nfacep-test-{os.getpid()}"
TAP = "nfacep0"
HOST_IP = "192.0.2.1"
BOARD_IP, BOARD_MAC = RTL_ADDRESSES[1], RTL_ADDRESSES[3]
#: the ``nfacep`` command as the script runs it
NFACEP = [sys.executable, "-c", "import sys; from nfacep.cli import main; sys.exit(main())"]
#: A host in the namespace: RESET opens a session, three pings, then STATUS (the echoes it
#: counts since that RESET) and CLOSE; prints ping's output and STATUS as JSON.
PINGS = """
import json, secrets, socket, subprocess, sys
from nfacep.links.protocol import decode_fields, fields_size
from nfacep.links.udp.protocol import (
    HEADER_BYTES, STATUS_FIELDS, PacketType, decode_header, packet,
)
board = sys.argv[1]
session = secrets.randbits(31) + 1
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sock.connect((board, 5000))
sock.settimeout(1.0)
def ask(ptype):
    for _ in range(10):
        sock.send(packet(ptype, session=session))
        try:
            while True:
                data = sock.recv(65536)
                head = decode_header(data)
                if head["type"] == PacketType.STATUS and head["session"] == session:
                    body = data[HEADER_BYTES : HEADER_BYTES + fields_size(STATUS_FIELDS)]
                    return decode_fields(STATUS_FIELDS, body)
        except TimeoutError:
            continue
    raise SystemExit("no STATUS from the board")
ask(PacketType.RESET)
ping = subprocess.run(
    ["ping", "-c", "3", "-i", "0.2", "-W", "2", board], capture_output=True, text=True
)
status = ask(PacketType.STATUS_REQ)
sock.send(packet(PacketType.CLOSE, session=session))
print(json.dumps({"ping": ping.stdout + ping.stderr, "status": status}))
"""


def _require(rtl: bool, cache) -> None:
    if not os.path.exists("/dev/net/tun"):
        pytest.skip("no /dev/net/tun on this machine: no TAP device can be made")
    if os.geteuid() != 0:
        pytest.skip("a network namespace and a TAP device need root (CAP_NET_ADMIN)")
    for tool, package in (("ip", "iproute2"), ("ping", "iputils-ping")):
        if shutil.which(tool) is None:
            pytest.skip(f"no {tool} (the Debian package {package})")
    if rtl:
        from nfacep.sim import build

        missing = build.simulator_available("verilator", cache)
        if missing:
            pytest.skip(f"serve --rtl needs Verilator: {missing}")


def _in_namespace(*command: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["ip", "netns", "exec", NAMESPACE, *command],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@contextlib.contextmanager
def _namespace():
    made = subprocess.run(["ip", "netns", "add", NAMESPACE], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot make a network namespace here: {made.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["ip", "netns", "delete", NAMESPACE], capture_output=True, timeout=30)


def _first_line(proc: subprocess.Popen, timeout: float) -> str:
    """``serve``'s first line, waited for at most ``timeout`` seconds (``--rtl`` builds first)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 1.0)
        if ready or proc.poll() is not None:
            return proc.stdout.readline()
    return ""


@pytest.mark.slow
@pytest.mark.parametrize("rtl", [False, True], ids=["software", "rtl"])
def test_the_kernel_resolves_pings_and_runs_against_the_board_on_a_tap(tmp_path, rtl, sim_cache):
    _require(rtl, sim_cache)
    name = "marathon"
    # (the engine and addresses of test_serve's --rtl test: one Verilator build for both)
    engine = list(RTL_ENGINE)
    expected, _ = reference(tmp_path, name, *engine)
    pcap = tmp_path / "tap.pcap"
    board = ["--tap", TAP, *RTL_ADDRESSES, "--pcap", str(pcap), *engine]
    if rtl:
        board += ["--rtl", "--build-dir", str(sim_cache)]
    with _namespace():
        serve = subprocess.Popen(
            ["ip", "netns", "exec", NAMESPACE, *SERVE, str(QUERIES / f"{name}.sql"), *board],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            first = _first_line(serve, 900)
            assert f"listening on tap {TAP}" in first, first
            for command in (
                ["ip", "link", "set", "lo", "up"],
                ["ip", "addr", "add", f"{HOST_IP}/24", "dev", TAP],
                ["ip", "link", "set", TAP, "up"],
            ):
                done = _in_namespace(*command)
                assert done.returncode == 0, (command, done.stderr)
            pings = _in_namespace(sys.executable, "-c", PINGS, BOARD_IP, timeout=60)
            assert pings.returncode == 0, pings.stderr
            said = json.loads(pings.stdout)
            assert "3 received" in said["ping"], said["ping"]
            assert said["status"]["echoes"] == 3, said["status"]
            neighbour = _in_namespace("ip", "neigh", "show", BOARD_IP).stdout
            assert BOARD_MAC in neighbour and "PERMANENT" not in neighbour, neighbour
            out = tmp_path / "tap.csv"
            run = _in_namespace(
                *NFACEP,
                "run",
                str(QUERIES / f"{name}.sql"),
                "--udp",
                f"{BOARD_IP}:5000",
                "--input",
                str(QUERIES / f"{name}.csv"),
                "--output",
                str(out),
                timeout=120,
            )
            assert run.returncode == 0, run.stderr
            assert out.read_text() == expected
        finally:
            rest, err = stop(serve)
    assert serve.returncode == 0 and "stopped" in rest, err
    summary = json.loads(out.with_suffix(".summary.json").read_text())
    assert summary["board"]["tuples"] == summary["tuples"] == 278
    # the capture: the kernel's ARP request and the echo requests, each answered
    kinds = []
    for _, frame in read_pcap(pcap):
        with contextlib.suppress(ValueError):
            parsed = udp.parse_frame(frame)
            kinds.append((parsed["kind"], parsed.get("type", parsed.get("oper"))))
    assert kinds.count(("icmp", 8)) == kinds.count(("icmp", 0)) == 3
    assert ("arp", 1) in kinds and ("arp", 2) in kinds


@pytest.mark.parametrize("rtl", [False, True], ids=["software", "rtl"])
def test_a_tap_that_cannot_be_opened_is_a_usage_error(rtl, capsys, monkeypatch):
    """(No /dev/net/tun, or no CAP_NET_ADMIN, as the kernel says it; with ``--rtl`` the TAP is
    opened before the board is built, so the refusal comes at once. A name the kernel would
    refuse is refused before: ``test_serve.py``.)"""
    from nfacep.cli import main
    from nfacep.links.udp import tap

    def refused(name):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(tap, "open_tap", refused)
    args = ["serve", str(QUERIES / "marathon.sql"), "--tap", "nfacep-t0", *(["--rtl"] * rtl)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--tap nfacep-t0: cannot open the TAP device" in err and "Traceback" not in err
    assert "Operation not permitted" in err
