"""The Linux kernel as the board's host: ``nfacep serve --tap`` puts the software board
(:class:`~nfacep.links.udp.model.FrameBoard`: ARP, ICMP echo and the payload format at the
Ethernet level; the gateware does not answer ICMP yet) on a TAP device inside a network
namespace of the test's own, addressed from the documentation range 192.0.2.0/24. The
kernel's ARP resolves the board (no static entry), ``ping`` gets answers, and ``nfacep run
--udp`` inside the namespace writes ``nfacep match``'s file. Nothing leaves the namespace (it
holds only the TAP and its loopback), every command is bounded in count and time, and the
namespace is deleted at the end, also on a failure. The Verilated board top is not behind
the TAP yet: the software board is."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys

import pytest
from test_serve import SERVE
from test_udp_host import QUERIES, reference

from nfacep.links.udp import protocol as udp
from nfacep.links.udp.pcap import read_pcap

NAMESPACE = f"nfacep-test-{os.getpid()}"
TAP = "nfacep0"
HOST_IP, BOARD_IP = "192.0.2.1", "192.0.2.2"
BOARD_MAC = "02:00:5e:00:02:02"
#: the ``nfacep`` command as the script runs it
NFACEP = [sys.executable, "-c", "import sys; from nfacep.cli import main; sys.exit(main())"]


def _require() -> None:
    if not os.path.exists("/dev/net/tun"):
        pytest.skip("no /dev/net/tun on this machine: no TAP device can be made")
    if os.geteuid() != 0:
        pytest.skip("a network namespace and a TAP device need root (CAP_NET_ADMIN)")
    for tool, package in (("ip", "iproute2"), ("ping", "iputils-ping")):
        if shutil.which(tool) is None:
            pytest.skip(f"no {tool} (the Debian package {package})")


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


@pytest.mark.slow
def test_the_kernel_resolves_pings_and_runs_against_the_board_on_a_tap(tmp_path):
    _require()
    name = "marathon"
    expected, _ = reference(tmp_path, name)
    pcap = tmp_path / "tap.pcap"
    with _namespace():
        board = ("--tap", TAP, "--ip", BOARD_IP, "--mac", BOARD_MAC, "--pcap", str(pcap))
        serve = subprocess.Popen(
            ["ip", "netns", "exec", NAMESPACE, *SERVE, str(QUERIES / f"{name}.sql"), *board],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            first = serve.stdout.readline()
            assert f"listening on tap {TAP}" in first, serve.stderr.read()
            for command in (
                ["ip", "link", "set", "lo", "up"],
                ["ip", "addr", "add", f"{HOST_IP}/24", "dev", TAP],
                ["ip", "link", "set", TAP, "up"],
            ):
                done = _in_namespace(*command)
                assert done.returncode == 0, (command, done.stderr)
            ping = _in_namespace("ping", "-c", "3", "-i", "0.2", "-W", "2", BOARD_IP)
            assert ping.returncode == 0 and "3 received" in ping.stdout, ping.stdout + ping.stderr
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
            serve.send_signal(signal.SIGTERM)
            rest, err = serve.communicate(timeout=10)
    assert serve.returncode == 0 and "stopped" in rest, err
    # the capture: the kernel's ARP request and the echo requests, each answered
    kinds = []
    for _, frame in read_pcap(pcap):
        with contextlib.suppress(ValueError):
            parsed = udp.parse_frame(frame)
            kinds.append((parsed["kind"], parsed.get("type", parsed.get("oper"))))
    assert kinds.count(("icmp", 8)) == kinds.count(("icmp", 0)) == 3
    assert ("arp", 1) in kinds and ("arp", 2) in kinds
