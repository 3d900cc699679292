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

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from udp_host_memory import QUERY, measure, run

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

    def run_host(data: pathlib.Path, out: pathlib.Path, path: pathlib.Path | None) -> dict:
        proc, port = serve(a.capacity)
        try:
            extra = ("--frame-tuples", str(a.frame_tuples))
            return run(port, data, out, path, flag="--port", module="uart", extra=extra)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=60)

    measure(a.tuples, a.before, run_host)


if __name__ == "__main__":
    main()
