"""Peak memory and tuples per second of the UART host, ``nfacep run --port``, against the
software board (:class:`nfacep.links.uart.model.UartBoardModel`, served on a pty in another
process): this tree's host, which reads its input and writes its matches in pieces, beside
another commit's (``--before``, e.g. the one before the UART host streamed).

The sibling of ``udp_host_memory.py`` (whose input, trees and measured runs it shares): the
marathon query's bundled tuples repeated to each ``--tuples`` count, as a Parquet file; every
run checked against ``nfacep match`` on the same file; the host's peak resident set size
(``VmHWM``) reported by its own process, the board's not counted. A pty does not pace bytes,
so the link runs as fast as the two processes do; the board's buffer (``--capacity`` bytes,
16 KiB by default rather than the gateware's 512) and ``--frame-tuples`` keep many tuples in
flight, or the run would wait a poll for each few tuples. Prints a table: the host's code,
tuples, the host's peak RSS, the command's wall time and tuples per second over it, and the
host's own ``link.seconds``.

    python benchmarks/uart_host_memory.py [--tuples 1000000] [--before COMMIT]
        [--capacity BYTES] [--frame-tuples N]
"""

from __future__ import annotations

import argparse
import pathlib
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from udp_host_memory import NFACEP, QUERY, run, stream, tree

#: serves the software board of the marathon query's default engine on a fresh pty, prints
#: the pty's path, and answers until SIGTERM
BOARD = (
    "import os, signal, sys, threading, tty\n"
    "from nfacep import compile_file\n"
    "from nfacep.params import default_engine\n"
    "from nfacep.links.uart.model import UartBoardModel, serve\n"
    "nfa = compile_file(sys.argv[1])\n"
    "master, slave = os.openpty()\n"
    "tty.setraw(master)\n"
    "stop = threading.Event()\n"
    "model = UartBoardModel(nfa, default_engine(nfa), capacity=int(sys.argv[2]))\n"
    "thread = serve(model, master, stop=stop)\n"
    "print(os.ttyname(slave), flush=True)\n"
    "signal.sigwait([signal.SIGTERM, signal.SIGINT])\n"
    "stop.set(); thread.join(2)\n"
)


def serve(capacity: int) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", BOARD, str(QUERY), str(capacity)], stdout=subprocess.PIPE, text=True
    )
    path = proc.stdout.readline().strip() if proc.stdout else ""
    if not path.startswith("/dev/"):
        proc.kill()
        raise SystemExit(f"the board did not start: {path!r}")
    return proc, path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tuples", type=int, nargs="+", default=[1_000_000])
    ap.add_argument("--before", help="another commit's host to measure beside this tree's")
    ap.add_argument("--capacity", type=int, default=16384, help="the board's buffer, bytes")
    ap.add_argument("--frame-tuples", type=int, default=256, help="the host's tuples a frame")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp)
        hosts: list[tuple[str, pathlib.Path | None]] = []
        if a.before:
            hosts.append((a.before, tree(a.before, folder)))
        hosts.append(("this tree", None))
        for n in a.tuples:
            data = folder / f"marathon-{n}.parquet"
            stream(n, data)
            expected = folder / "match.csv"
            subprocess.run(
                [*NFACEP, "match", str(QUERY), "--input", str(data), "--output", str(expected)],
                check=True,
                capture_output=True,
            )
            for name, path in hosts:
                proc, port = serve(a.capacity)
                try:
                    out = folder / "board.csv"
                    extra = ("--frame-tuples", str(a.frame_tuples))
                    got = run(port, data, out, path, flag="--port", module="uart", extra=extra)
                finally:
                    proc.send_signal(signal.SIGTERM)
                    proc.communicate(timeout=60)
                if out.read_text() != expected.read_text():
                    raise SystemExit(f"{name}, {n}: the match file differs from match's")
                seconds = got["summary"]["link"]["seconds"]
                rows.append((name, n, got["rss"], got["wall"], seconds))
                print(
                    f"({name}, {n:,} tuples: {got['rss']:.0f} MB, {got['wall']:.1f} s)", flush=True
                )
                out.unlink()
            data.unlink()
    print(
        "| host | tuples | peak RSS (MB) | wall s | tuples/s (wall) | link.seconds |\n"
        "| --- | ---: | ---: | ---: | ---: | ---: |"
    )
    for name, n, rss, wall, seconds in rows:
        print(f"| {name} | {n:,} | {rss:.0f} | {wall:.1f} | {n / wall:,.0f} | {seconds:.1f} |")


if __name__ == "__main__":
    main()
