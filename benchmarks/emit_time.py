#!/usr/bin/env python3
"""The engine to Verilog: Amaranth's conversion as it is against ``nfacep.hdl.emit``.

For each bundled query and table size, the same engine (``nfacep.hdl.engine.Engine`` with the
default parameters for the query, ``--entries`` overriding the table's size) is converted
side by side in one process:

- *before*: ``amaranth.back.verilog.convert``, which writes every memory's initial value
  bit by bit (``$meminit_v2``) and Yosys one ``mem[i] = ...;`` statement per row;
- *after*: ``nfacep.hdl.emit.verilog`` (what ``nfacep verilog``, ``sim`` and ``regress``
  use), where a memory that starts at zero gets one ``initial`` loop instead.

Columns: seconds from the elaborated engine to Verilog text (best of ``--repeat``), the
Verilog's size, and Icarus's compile of it (``iverilog -g2012``, seconds) when Icarus is
installed; with ``--verilator`` also Verilator's translation to C++ (``verilator --cc``,
seconds, and the C++'s size; not its compile). Wall-clock on a shared machine.

    python benchmarks/emit_time.py
    python benchmarks/emit_time.py --queries fire marathon --entries 0 256 --verilator
"""

from __future__ import annotations

import argparse
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


def convert(engine, path: str) -> str:
    """``engine`` as Verilog by ``path`` (``"before"`` or ``"after"``)."""
    if path == "before":
        from amaranth.back import verilog

        return verilog.convert(engine, name="top", emit_src=False)
    from nfacep.hdl.emit import verilog as emit

    return emit(engine, "top")


def timed(argv: list[str], cwd: pathlib.Path) -> float:
    started = time.monotonic()
    subprocess.run(argv, cwd=cwd, check=True, capture_output=True)
    return time.monotonic() - started


def downstream(text: str, work: pathlib.Path, verilator: bool) -> dict:
    """Icarus's compile of ``text`` and, with ``verilator``, Verilator's translation."""
    work.mkdir(parents=True)
    (work / "top.v").write_text(text)
    out: dict = {}
    if shutil.which("iverilog"):
        out["iverilog_s"] = timed(["iverilog", "-g2012", "-o", "top.vvp", "top.v"], work)
    if verilator:
        argv = ["verilator", "--cc", "-Wno-fatal", "-Wno-lint", "-Wno-style"]
        out["verilator_s"] = timed([*argv, "--top-module", "top", "-Mdir", "obj", "top.v"], work)
        out["cpp_mb"] = sum(p.stat().st_size for p in (work / "obj").glob("*.cpp")) / 1e6
    return out


def measure(query: str, entries: int, repeat: int, verilator: bool, work: pathlib.Path) -> dict:
    from nfacep.cli import load_query
    from nfacep.hdl.engine import Engine
    from nfacep.params import default_engine

    nfa = load_query(str(ROOT / "queries" / f"{query}.sql"))
    params = default_engine(nfa, {"partitions": entries} if entries else None)
    row: dict = {"query": query, "entries": params.partitions}
    for path in ("before", "after"):
        best, text = float("inf"), ""
        for _ in range(repeat):
            engine = Engine(nfa, params)
            started = time.monotonic()
            text = convert(engine, path)
            best = min(best, time.monotonic() - started)
        row[path] = {"s": best, "mb": len(text) / 1e6}
        row[path].update(downstream(text, work / f"{query}-{entries}-{path}", verilator))
    return row


def cells(row: dict, key: str, fmt: str) -> list[str]:
    values = [row[p].get(key) for p in ("before", "after")]
    return [fmt.format(v) if v is not None else "" for v in values]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", nargs="+", default=["fire", "marathon"])
    ap.add_argument(
        "--entries", type=int, nargs="+", default=[0, 256], help="table sizes; 0: the default"
    )
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--verilator", action="store_true", help="also time `verilator --cc`")
    args = ap.parse_args()
    head = ["query", "entries", "to Verilog s (before / after)", "Verilog MB", "iverilog s"]
    if args.verilator:
        head += ["verilator --cc s", "C++ MB"]
    print("| " + " | ".join(head) + " |")
    print("| --- | ---: |" + " ---: |" * (len(head) - 2))
    with tempfile.TemporaryDirectory(prefix="emit-time-") as tmp:
        for query in args.queries:
            for entries in args.entries:
                row = measure(query, entries, args.repeat, args.verilator, pathlib.Path(tmp))
                cols = [query, f"{row['entries']:,}"]
                keys = [("s", "{:.2f}"), ("mb", "{:.2f}"), ("iverilog_s", "{:.2f}")]
                if args.verilator:
                    keys += [("verilator_s", "{:.2f}"), ("cpp_mb", "{:.1f}")]
                for key, fmt in keys:
                    cols.append(" / ".join(cells(row, key, fmt)))
                print("| " + " | ".join(cols) + " |", flush=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
