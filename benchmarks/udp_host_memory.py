"""Peak memory and tuples per second of the UDP host, ``nfacep run --udp``, against the software
board (``nfacep serve``, in another process) on 127.0.0.1: this tree's host, which reads its
input and writes its matches in pieces, beside another commit's (``--before``, e.g. the one
before the host streamed).

The input is the marathon query's bundled tuples repeated to each ``--tuples`` count, as a
Parquet file; every run is checked against ``nfacep match`` on the same file (the match files
must be equal). The host runs in its own process, which reports its peak resident set size
(``VmHWM`` of ``/proc/self/status``) as it exits; the board's memory is not counted. Prints a
table: the host's code, tuples, the host's peak RSS, the command's wall time and tuples per
second over it, and the host's own ``link.seconds``.

    python benchmarks/udp_host_memory.py [--tuples 1000000 10000000] [--before COMMIT]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import tempfile
import time

from fabric import NFACEP
from revision import export

ROOT = pathlib.Path(__file__).resolve().parents[1]
QUERY = ROOT / "queries" / "marathon.sql"
#: runs nfacep's command line, then writes the process's peak RSS (kB) to $NFACEP_HWM
CODE = (
    "import os, sys\n"
    "from nfacep.cli import main\n"
    "try:\n"
    "    code = main()\n"
    "finally:\n"
    "    hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0]\n"
    "    open(os.environ['NFACEP_HWM'], 'w').write(hwm.split()[1])\n"
    "sys.exit(code)\n"
)


def stream(n: int, path: pathlib.Path) -> None:
    """The bundled marathon tuples repeated to ``n`` rows, as Parquet."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    table = pacsv.read_csv(ROOT / "queries" / "marathon.csv")
    whole = pa.concat_tables([table] * -(-n // table.num_rows)).slice(0, n)
    pq.write_table(whole, path)


def serve() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [*NFACEP, "serve", str(QUERY), "--udp", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    first = proc.stdout.readline() if proc.stdout else ""
    found = re.search(r"listening on udp (\S+):(\d+):", first)
    if not found:
        proc.kill()
        raise SystemExit(f"serve did not start: {first!r}")
    return proc, f"{found[1]}:{found[2]}"


def run(
    address: str,
    data: pathlib.Path,
    out: pathlib.Path,
    path: pathlib.Path | None,
    *,
    flag: str = "--udp",
    module: str = "udp",
    extra: tuple[str, ...] = (),
) -> dict:
    """One host run (of the ``module`` link's host, at ``flag address``, with ``extra``
    arguments); its summary, wall seconds and peak RSS (MB)."""
    env = dict(os.environ, NFACEP_HWM=str(out.with_suffix(".hwm")))
    if path is not None:
        env["PYTHONPATH"] = str(path)
        # (the host's code must be that commit's: say where it was imported from)
        where = subprocess.run(
            [sys.executable, "-c", f"import nfacep.links.{module}.host as h; print(h.__file__)"],
            capture_output=True,
            text=True,
            env=env,
            cwd=out.parent,
            check=True,
        ).stdout.strip()
        if not where.startswith(str(path)):
            raise SystemExit(f"the host to measure was imported from {where}, not {path}")
    command = [sys.executable, "-c", CODE, "run", str(QUERY), flag, address, *extra]
    started = time.monotonic()
    done = subprocess.run(
        [*command, "--input", str(data), "--output", str(out), "--timeout", "60"],
        capture_output=True,
        text=True,
        env=env,
        cwd=out.parent,  # (not the repository: `python -c` imports from its folder first)
    )
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"the host failed (exit {done.returncode}): {done.stderr[-2000:]}")
    summary = json.loads(out.with_suffix(".summary.json").read_text())
    hwm = int(out.with_suffix(".hwm").read_text()) / 1024
    return {"summary": summary, "wall": wall, "rss": hwm}


def measure(tuples: list[int], before: str | None, run_host) -> None:
    """For each size in ``tuples``, each host (``before``'s tree if given, then this tree's) run
    by ``run_host(data, out, path)`` against a board of its own, its match file checked
    against ``nfacep match``'s; the table printed at the end (what both links' scripts share)."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp)
        hosts: list[tuple[str, pathlib.Path | None]] = []
        if before:
            hosts.append((before, pathlib.Path(export(before, folder / "src"))))
        hosts.append(("this tree", None))
        for n in tuples:
            data = folder / f"marathon-{n}.parquet"
            stream(n, data)
            expected = folder / "match.csv"
            subprocess.run(
                [*NFACEP, "match", str(QUERY), "--input", str(data), "--output", str(expected)],
                check=True,
                capture_output=True,
            )
            for name, path in hosts:
                out = folder / "board.csv"
                got = run_host(data, out, path)
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


def run_host(data: pathlib.Path, out: pathlib.Path, path: pathlib.Path | None) -> dict:
    """One run of the host (``path``'s tree, or this one) against a software board of its own."""
    proc, address = serve()
    try:
        return run(address, data, out, path)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tuples", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--before", help="another commit's host to measure beside this tree's")
    a = ap.parse_args()
    measure(a.tuples, a.before, run_host)


if __name__ == "__main__":
    main()
