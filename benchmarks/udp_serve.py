"""Tuples per second of ``nfacep run --udp`` against ``nfacep serve`` on 127.0.0.1: the software
board model and the board top's own Verilog under Verilator (``serve --rtl``), with the host's
credit (the default) and open loop (``--rate max``).

Each run sends the marathon query's bundled tuples repeated to ``--tuples`` tuples and is
checked against ``nfacep match`` on the same file (the match files must be equal); a run that
fails (open loop faster than the board takes its packets: they are lost and the host gives
up) is a row that says so. Prints a table: the board, the host's pacing, tuples, seconds and
tuples per second (the host's ``link.seconds``), and the RECORDS packets that came. The engine
is the commands' default unless ``--partitions`` is given.

    python benchmarks/udp_serve.py [--tuples N] [--partitions P] [--build-dir D]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import signal
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
QUERY = ROOT / "queries" / "marathon.sql"
NFACEP = [sys.executable, "-c", "import sys; from nfacep.cli import main; sys.exit(main())"]


def stream(n: int, path: pathlib.Path) -> None:
    """The bundled marathon tuples repeated to ``n`` rows, as CSV."""
    lines = (ROOT / "queries" / "marathon.csv").read_text().splitlines()
    head, rows = lines[0], lines[1:]
    with open(path, "w") as out:
        out.write(head + "\n")
        for i in range(n):
            out.write(rows[i % len(rows)] + "\n")


def serve(args: list[str]) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [*NFACEP, "serve", str(QUERY), "--udp", "127.0.0.1:0", *args],
        stdout=subprocess.PIPE,
        text=True,
    )
    first = proc.stdout.readline()
    found = re.search(r"listening on udp (\S+):(\d+):", first)
    if not found:
        proc.kill()
        raise SystemExit(f"serve did not start: {first!r}")
    return proc, f"{found[1]}:{found[2]}"


def run(address: str, data: pathlib.Path, out: pathlib.Path, engine: list[str], more: list[str]):
    command = [*NFACEP, "run", str(QUERY), "--udp", address, "--input", str(data)]
    done = subprocess.run(
        [*command, "--output", str(out), "--timeout", "60", *engine, *more],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:  # (open loop faster than the board takes: packets lost)
        return {"failed": done.stderr.strip().splitlines()[-1][:120]}
    return json.loads(out.with_suffix(".summary.json").read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tuples", type=int, default=20_000)
    ap.add_argument("--partitions", type=int)
    ap.add_argument("--build-dir", help="the Verilated board's cache (nfacep sim's default)")
    a = ap.parse_args()
    engine = [] if a.partitions is None else ["--partitions", str(a.partitions)]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp)
        data = folder / "marathon.csv"
        stream(a.tuples, data)
        expected = folder / "match.csv"
        command = [*NFACEP, "match", str(QUERY), "--input", str(data)]
        subprocess.run(
            [*command, "--output", str(expected), *engine],
            check=True,
            capture_output=True,
        )
        build = ["--build-dir", a.build_dir] if a.build_dir else []
        for board, extra in (("model", []), ("rtl (Verilator)", ["--rtl", *build])):
            proc, address = serve([*engine, *extra])
            try:
                for pacing, more in (("credit", []), ("open loop", ["--rate", "max"])):
                    out = folder / "board.csv"
                    summary = run(address, data, out, engine, more)
                    if "failed" in summary:
                        rows.append((board, pacing, a.tuples, None, None, summary["failed"]))
                        continue
                    if out.read_text() != expected.read_text():
                        raise SystemExit(f"{board}, {pacing}: the match file differs from match's")
                    link = summary["link"]
                    seconds = link["seconds"]
                    n = summary["tuples"]
                    rows.append((board, pacing, n, seconds, n / seconds, link["record_packets"]))
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.communicate(timeout=60)
    print(
        "| board | pacing | tuples | seconds | tuples/s | RECORDS packets |\n"
        "| --- | --- | ---: | ---: | ---: | ---: |"
    )
    for board, pacing, n, seconds, rate, packets in rows:
        if seconds is None:  # (the run failed: its last line says why)
            print(f"| {board} | {pacing} | {n:,} | failed | | {packets} |")
        else:
            print(f"| {board} | {pacing} | {n:,} | {seconds:.2f} | {rate:,.0f} | {packets} |")


if __name__ == "__main__":
    main()
