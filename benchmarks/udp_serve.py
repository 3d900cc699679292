"""Tuples per second of ``nfacep run --udp`` against ``nfacep serve``: the software board model
and the board top's own Verilog under Verilator (``serve --rtl``), each behind a UDP socket on
127.0.0.1 (``serve --udp``) and behind a Linux TAP device in a network namespace of its own
(``serve --tap``: the kernel's ARP and UDP stack are the host's, ``run --udp`` runs inside the
namespace), with the host's credit (the default) and open loop (``--rate max``).

Each run sends the marathon query's bundled tuples repeated to ``--tuples`` tuples and is
checked against ``nfacep match`` on the same file (the match files must be equal); a run that
fails (open loop faster than the board takes its packets: they are lost and the host gives
up) is a row that says so. Prints a table: the board, how it is reached, the host's pacing,
tuples, seconds and tuples per second (the host's ``link.seconds``), and the RECORDS packets
that came. The engine is the commands' default unless ``--partitions`` is given. The board
has the same addresses behind both (192.0.2.2, the documentation range), so the Verilated
board is built once (cached in ``--build-dir``; ``NFACEP_VERILATOR_OPT`` sets its C++
optimisation, ``-O2`` by default). The TAP needs root and ``/dev/net/tun``; without them
``--via socket``.

    python benchmarks/udp_serve.py [--tuples N] [--partitions P] [--build-dir D]
        [--boards model,rtl] [--via socket,tap]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import re
import select
import signal
import subprocess
import tempfile
import time

from fabric import NFACEP

ROOT = pathlib.Path(__file__).resolve().parents[1]
QUERY = ROOT / "queries" / "marathon.sql"
NAMESPACE, TAP = f"nfacep-bench-{os.getpid()}", "nfacep0"
HOST_IP, BOARD_IP, BOARD_MAC = "192.0.2.1", "192.0.2.2", "02:00:5e:00:02:02"
ADDRESSES = ["--ip", BOARD_IP, "--mac", BOARD_MAC]
BOARDS = {"model": [], "rtl": ["--rtl"]}


def stream(n: int, path: pathlib.Path) -> None:
    """The bundled marathon tuples repeated to ``n`` rows, as CSV."""
    lines = (ROOT / "queries" / "marathon.csv").read_text().splitlines()
    head, rows = lines[0], lines[1:]
    with open(path, "w") as out:
        out.write(head + "\n")
        for i in range(n):
            out.write(rows[i % len(rows)] + "\n")


def _first_line(proc: subprocess.Popen, timeout: float = 3600) -> str:
    """``serve``'s first line (``--rtl`` builds the board first: minutes)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if select.select([proc.stdout], [], [], 1.0)[0]:
            return proc.stdout.readline()
    return ""


def _in_namespace(*command: str) -> None:
    subprocess.run(["ip", "netns", "exec", NAMESPACE, *command], check=True, timeout=60)


@contextlib.contextmanager
def serve(via: str, args: list[str]):
    """``nfacep serve`` with ``args`` behind ``via`` (``socket`` or ``tap``); yields the address
    for ``run --udp`` and the prefix that runs a command where the host is."""
    where = ["--udp", "127.0.0.1:0"] if via == "socket" else ["--tap", TAP]
    prefix = [] if via == "socket" else ["ip", "netns", "exec", NAMESPACE]
    if via == "tap":
        subprocess.run(["ip", "netns", "add", NAMESPACE], check=True)
    try:
        proc = subprocess.Popen(
            [*prefix, *NFACEP, "serve", str(QUERY), *where, *args],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            first = _first_line(proc)
            if via == "socket":
                found = re.search(r"listening on udp (\S+):(\d+):", first)
                if not found:
                    raise SystemExit(f"serve did not start: {first!r}")
                address = f"{found[1]}:{found[2]}"
            else:
                if "listening on tap" not in first:
                    raise SystemExit(f"serve did not start: {first!r}")
                _in_namespace("ip", "link", "set", "lo", "up")
                _in_namespace("ip", "addr", "add", f"{HOST_IP}/24", "dev", TAP)
                _in_namespace("ip", "link", "set", TAP, "up")
                address = f"{BOARD_IP}:5000"
            yield address, prefix
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=60)
    finally:
        if via == "tap":
            subprocess.run(["ip", "netns", "delete", NAMESPACE], check=False)


def run(prefix, address, data: pathlib.Path, out: pathlib.Path, engine: list[str], more: list[str]):
    command = [*prefix, *NFACEP, "run", str(QUERY), "--udp", address, "--input", str(data)]
    done = subprocess.run(
        [*command, "--output", str(out), "--timeout", "60", *engine, *more],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:  # (open loop faster than the board takes: packets lost)
        return {"failed": done.stderr.strip().splitlines()[-1][:120]}
    return json.loads(out.with_suffix(".summary.json").read_text())


def measure(folder: pathlib.Path, board: str, via: str, args, engine: list[str]) -> list[tuple]:
    """The rows of one served board: credit and open loop."""
    data, expected = folder / "marathon.csv", (folder / "match.csv").read_text()
    build = ["--build-dir", args.build_dir] if args.build_dir and board == "rtl" else []
    rows = []
    with serve(via, [*engine, *ADDRESSES, *BOARDS[board], *build]) as (address, prefix):
        for pacing, more in (("credit", []), ("open loop", ["--rate", "max"])):
            out = folder / "board.csv"
            summary = run(prefix, address, data, out, engine, more)
            if "failed" in summary:
                rows.append((board, via, pacing, args.tuples, None, None, summary["failed"]))
                continue
            if out.read_text() != expected:
                raise SystemExit(f"{board}, {via}, {pacing}: the match file differs from match's")
            link, n = summary["link"], summary["tuples"]
            seconds = link["seconds"]
            rows.append((board, via, pacing, n, seconds, n / seconds, link["record_packets"]))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tuples", type=int, default=20_000)
    ap.add_argument("--partitions", type=int)
    ap.add_argument("--build-dir", help="the Verilated board's cache (nfacep sim's default)")
    ap.add_argument("--boards", default="model,rtl", help="%(default)s")
    ap.add_argument("--via", default="socket,tap", help="%(default)s")
    a = ap.parse_args()
    engine = [] if a.partitions is None else ["--partitions", str(a.partitions)]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp)
        os.chmod(folder, 0o755)
        data = folder / "marathon.csv"
        stream(a.tuples, data)
        command = [*NFACEP, "match", str(QUERY), "--input", str(data)]
        subprocess.run(
            [*command, "--output", str(folder / "match.csv"), *engine],
            check=True,
            capture_output=True,
        )
        for board in a.boards.split(","):
            for via in a.via.split(","):
                rows += measure(folder, board, via, a, engine)
    print(
        "| board | via | pacing | tuples | seconds | tuples/s | RECORDS packets |\n"
        "| --- | --- | --- | ---: | ---: | ---: | ---: |"
    )
    for board, via, pacing, n, seconds, rate, packets in rows:
        if seconds is None:  # (the run failed: its last line says why)
            print(f"| {board} | {via} | {pacing} | {n:,} | failed | | {packets} |")
        else:
            print(
                f"| {board} | {via} | {pacing} | {n:,} | {seconds:.2f} | {rate:,.0f} | {packets} |"
            )


if __name__ == "__main__":
    main()
