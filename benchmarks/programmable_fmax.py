#!/usr/bin/env python3
"""The programmable engine after place-and-route (issue 28, Measure): LUTs, flip-flops, block
RAMs and Fmax of ``nfacep build --engine programmable`` on the Colorlight 5A-75B (LFE5U-25F)
and the ULX3S-85F for a few capacities (S states, A atoms, Q queries), against the fixed
engines of the bundled queries, and the wall time of each ``nfacep build``.

Every point is one run of the real command, ``nfacep build Q --board B [--engine programmable
--states S --atoms A --queries Q] --link L -o DIR`` (a subprocess of the Python that runs this
script, ``python -m nfacep.cli``: its ``nfacep``, on PATH or not; timed from start to exit),
its numbers read from the ``report.json`` it writes: the resources nextpnr reports, the Fmax
of every clock and whether timing was met at the board's clock; from the build's
``toolchain/`` folder Yosys's ``synth_ecp5`` options (``-nowidelut``, which ``nfacep build``
passes for the programmable engine on the ECP5, or Yosys's default wide LUTs), nextpnr's
seed and its critical path of the slowest clock (start and end cells, delay, routing share);
the 1-minute load average sampled every 30 s during the build (the machine is shared) and
the date. The table prints every row per board, fixed engines then programmable capacities
(``--markdown`` for the README); the plot has a row of panels per board (LUTs, flip-flops,
block RAMs, Fmax), programmable against fixed. The programmable points boot
with ``queries/marathon.sql``'s image (the engine does not depend on it beyond the stream
declaration; marathon needs 9 states and 7 atoms, so the smallest point is 16x8x1). Points
run one at a time (nextpnr takes minutes); rows go to the CSV after every build (``--merge``
keeps the points not rebuilt; a row is its point, Yosys's options and the commit whose tree
was built, ``+`` after it when files outside ``benchmarks/`` differed from it: a point rebuilt
with ``-nowidelut``, or at another commit, keeps its earlier row beside the new one).

    python benchmarks/programmable_fmax.py --points "colorlight-5a75b harness prog 16x8x1"
    python benchmarks/programmable_fmax.py --plot-only [--markdown]
    python benchmarks/programmable_fmax.py --record "colorlight-5a75b udp prog 24x16x4" DIR 2400 \
        --load "6.8 (2.7-10.4)" --commit bff7467

A point is ``"<board> <link> <engine>"`` with ``<engine>`` ``prog SxAxQ`` (marathon's stream)
or ``fixed QUERY`` (a bundled query); options of ``nfacep build`` after it go to its command
line: ``--partitions N`` sets the table's entries (the board's default otherwise), ``--seed N``
nextpnr's placement seed (its own otherwise; the row's ``seed`` says which), as in
``"colorlight-5a75b udp prog 24x16x4 --seed 2"``.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import plots
from fabric import NFACEP, cell, earlier_rows, read_csv, write_merged
from revision import commit_of

HERE = os.path.dirname(os.path.abspath(__file__))
QUERIES = os.path.join(HERE, "..", "queries")
CSV = os.path.join(HERE, "results", "programmable_fmax.csv")
PNG = os.path.join(HERE, "programmable_fmax.png")
#: the bundled queries' runtime parameters (queries/parameters.json)
VALUES = {"supplychain": ["big=20000"]}
#: the bundled queries (queries/*.sql), whose fixed engines the programmable ones are against
BUNDLED = ("bruteforce", "fire", "marathon", "supplychain", "vshape")
POINTS = [
    "colorlight-5a75b harness prog 16x8x1",
    "colorlight-5a75b harness prog 16x16x4",
    "colorlight-5a75b harness prog 24x16x4",
    "colorlight-5a75b harness prog 32x32x4",
    *(f"colorlight-5a75b harness fixed {q}" for q in BUNDLED),
    # the default capacity (24x16x4, 6 timed slots) and the board's default table: 4,096
    # entries (65,536 would take 672 of its 56 block RAMs)
    "colorlight-5a75b udp prog 24x16x4",
    "ulx3s-85f harness prog 24x16x4",
    "ulx3s-85f harness prog 32x32x4",
    "ulx3s-85f harness prog 64x64x8",
    *(f"ulx3s-85f harness fixed {q}" for q in BUNDLED),
]


def command(point: str, out: str) -> list[str]:
    """The ``nfacep build`` command line of ``point``."""
    words = point.split()
    board, link, kind, what, extra = words[0], words[1], words[2], words[3], words[4:]
    query = "marathon" if kind == "prog" else what
    argv = [*NFACEP, "build", os.path.join(QUERIES, f"{query}.sql"), "--board", board]
    argv += ["--link", link, "-o", out, *extra]
    if kind == "prog":
        s, a, q = what.split("x")
        argv += ["--engine", "programmable", "--states", s, "--atoms", a, "--queries", q]
    for value in VALUES.get(query, []):
        argv += ["--param", value]
    return argv


def run_sampled(argv: list[str], timeout: float) -> tuple[str | None, str, list[float]]:
    """Run ``argv``; ``(status, stderr, loads)``: ``"timeout"`` or None, its standard error,
    and the 1-minute load average sampled every 30 s while it ran (the machine is shared). A
    build past ``timeout`` is stopped with the programs it started (Yosys, nextpnr): the
    command runs in a process group of its own, and the whole group is killed."""
    loads = [os.getloadavg()[0]]
    t0 = time.monotonic()
    with subprocess.Popen(
        argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as p:
        while True:
            try:
                _, err = p.communicate(timeout=30)
                return None, err, loads
            except subprocess.TimeoutExpired:
                loads.append(os.getloadavg()[0])
                if time.monotonic() - t0 > timeout:
                    os.killpg(p.pid, signal.SIGKILL)
                    _, err = p.communicate()
                    return "timeout", err, loads


def load_text(loads: list[float]) -> str:
    """The load averages sampled during a build, as ``mean (min-max)``."""
    return f"{sum(loads) / len(loads):.1f} ({min(loads):.1f}-{max(loads):.1f})"


def build_row(point: str, root: str, timeout: float) -> dict:
    out = os.path.join(root, point.replace(" ", "_"))
    argv = command(point, out)
    commit = commit_of()  # (the tree as the build starts)
    t0 = time.monotonic()
    status, err, loads = run_sampled(argv, timeout)
    wall = time.monotonic() - t0
    if not os.path.exists(os.path.join(out, "report.json")):
        last = (err.strip().splitlines() or [""])[-1]
        return {"point": point, "commit": commit, "build_s": round(wall, 1)} | {
            "load": load_text(loads),
            "status": status or "no report",
            "message": last,
        }
    return report_row(point, out, wall, load_text(loads), commit)


def report_row(
    point: str, out: str, wall: float, load: str | None = None, commit: str | None = None
) -> dict:
    """The row of ``point`` from the ``report.json`` its build wrote to ``out`` and nextpnr's
    files in its ``toolchain/`` folder (Yosys's options, the seed, the critical path), built
    from the tree of ``commit``."""
    row: dict = {"point": point, "commit": commit, "build_s": round(wall, 1)}
    path = os.path.join(out, "report.json")
    with open(path, encoding="utf-8") as f:
        report = json.load(f)
    res = report.get("resources") or {}
    fmax = report.get("fmax_mhz") or {}
    tools = os.path.join(out, "toolchain")
    row.update(
        status=report["status"],
        date=datetime.datetime.fromtimestamp(os.path.getmtime(path), datetime.UTC).strftime(
            "%Y-%m-%d %H:%M"
        ),
        load=load,
        synth=synth_of(tools),
        seed=seed_of(tools),
        partitions=report["parameters"]["partitions"],
        store=report["parameters"]["store"],
        luts=(res.get("luts") or {}).get("used"),
        luts_total=(res.get("luts") or {}).get("total"),
        ffs=(res.get("ffs") or {}).get("used"),
        brams=(res.get("brams") or {}).get("used"),
        brams_total=(res.get("brams") or {}).get("total"),
        resources_from=report.get("resources_from"),
        fmax_mhz=min(fmax.values()) if fmax else None,
        clocks=";".join(f"{k}={v:.1f}" for k, v in fmax.items()),
        timing_met=report.get("timing_met"),
        target_mhz=report.get("target_mhz"),
        critical_path=critical_path(tools, min(fmax, key=fmax.get) if fmax else None),
    )
    return row


def synth_of(tools: str) -> str | None:
    """Yosys's ``synth_ecp5`` options in the build's script: ``-nowidelut`` or ``wide LUTs``
    (Yosys's default)."""
    try:
        with open(os.path.join(tools, "nfacep_top.ys"), encoding="utf-8") as f:
            m = re.search(r"synth_ecp5([^\n;]*)", f.read())
    except OSError:
        return None
    if m is None:
        return None
    return "-nowidelut" if "-nowidelut" in m.group(1) else "wide LUTs"


def seed_of(tools: str) -> str | None:
    """nextpnr's ``--seed`` in the build's script, ``default`` when it passed none."""
    try:
        with open(os.path.join(tools, "build_nfacep_top.sh"), encoding="utf-8") as f:
            m = re.search(r"--seed[ =](\d+)", f.read())
    except OSError:
        return None
    return m.group(1) if m else "default"


#: the cell-type suffixes nextpnr's cell names carry after the net they drive
CELL_SUFFIX = re.compile(r"(\$[A-Za-z_]\w*|_(TRELLIS|LUT4|CCU2C|PFUMX|L6MUX21|DP16KD)\w*)$")


def cell_name(cell: str) -> str:
    """``cell`` without its cell-type suffix: the net (hierarchy and signal) it drives."""
    return CELL_SUFFIX.sub("", cell)


def critical_path(tools: str, clock: str | None) -> str | None:
    """nextpnr's critical path of ``clock`` (``--report``) in a few words: start and end
    cells, delay, its routing share and logic cells."""
    try:
        with open(os.path.join(tools, "nfacep_top.report.json"), encoding="utf-8") as f:
            paths = json.load(f).get("critical_paths", [])
    except (OSError, ValueError):
        return None
    mine = [p for p in paths if clock is not None and clock in p.get("from", "")] or paths
    if not mine:
        return None
    path = max(mine, key=lambda p: sum(s["delay"] for s in p["path"]))["path"]
    total = sum(s["delay"] for s in path)
    routing = sum(s["delay"] for s in path if s["type"] == "routing")
    logic = sum(1 for s in path if s["type"] == "logic")
    start, end = cell_name(path[0]["from"]["cell"]), cell_name(path[-1]["to"]["cell"])
    return f"{start} -> {end}: {total:.1f} ns, {routing:.1f} routing, {logic} logic cells"


def key(row: dict) -> tuple:
    """A row's identity in the CSV: its point, Yosys's options and the commit built (a point
    rebuilt without wide LUTs keeps the row built with them, and a point rebuilt at another
    commit the row of the one before; rebuilt at the same commit, its row is replaced)."""
    return row["point"], row.get("synth") or "", str(row.get("commit") or "")


def parts(point: str) -> tuple[str, str, str]:
    """``(board, link, engine)`` of ``point``, ``engine`` as ``prog SxAxQ`` or ``fixed Q``."""
    words = point.split()
    return words[0], words[1], " ".join(words[2:])


def ordered(rows: list[dict]) -> list[dict]:
    """Per board and link, the fixed engines first, then the programmable ones by capacity."""

    def order(row: dict) -> tuple:
        board, link, engine = parts(row["point"])
        kind, what = engine.split()[0], engine.split()[1]
        size = tuple(int(x) for x in what.split("x")) if kind == "prog" else ()
        return (
            board,
            link,
            kind != "fixed",
            size,
            what,
            row.get("synth") or "",
            row.get("date") or "",
        )

    return sorted(rows, key=order)


def of_total(row: dict, used: str, total: str) -> str:
    if row.get(used) is None:
        return "-"
    if row.get(total) is None:
        return f"{row[used]:,}"
    return f"{row[used]:,} ({100 * row[used] / row[total]:.0f}%)"


COLUMNS = (
    "board",
    "link",
    "engine",
    "entries",
    "LUTs",
    "FFs",
    "BRAMs",
    "Fmax",
    "met",
    "synth",
    "seed",
    "build s",
    "load",
    "date (UTC)",
    "commit",
    "critical path",
)


def cells(row: dict) -> list[str]:
    """The table's cells of ``row`` (:data:`COLUMNS`)."""
    board, link, engine = parts(row["point"])
    if row.get("luts") is None:
        return (
            [board, link, engine]
            + ["-"] * 8
            + [
                cell(row, "build_s", ".0f"),
                str(row.get("load", "-")),
                "-",
                str(row.get("commit") or "-"),
                f"{row['status']}: {row.get('message', '')}",
            ]
        )
    return [
        board,
        link,
        engine,
        cell(row, "partitions", ","),
        of_total(row, "luts", "luts_total"),
        cell(row, "ffs", ","),
        of_total(row, "brams", "brams_total"),
        cell(row, "fmax_mhz", ".1f"),
        {"True": "yes", "False": "no", True: "yes", False: "no"}.get(row.get("timing_met"), "-"),
        row.get("synth") or "-",
        str(row.get("seed", "-")),
        cell(row, "build_s", ".0f"),
        str(row.get("load", "-")),
        row.get("date") or "-",
        str(row.get("commit") or "-"),
        row.get("critical_path") or "-",
    ]


def table(rows: list[dict], markdown: bool = False) -> str:
    """Every row, per board, fixed engines then programmable capacities: as aligned text, or
    as a Markdown table (``--markdown``, for the README)."""
    body = [cells(r) for r in ordered(rows)]
    if markdown:
        lines = ["| " + " | ".join(COLUMNS) + " |", "|" + " --- |" * len(COLUMNS)]
        return "\n".join(lines + ["| " + " | ".join(c) + " |" for c in body])
    widths = [max(len(c[i]) for c in [COLUMNS, *body]) for i in range(len(COLUMNS) - 1)]
    return "\n".join(
        "  ".join(c[i].ljust(widths[i]) for i in range(len(widths))) + "  " + c[-1]
        for c in [COLUMNS, *body]
    )


def print_row(row: dict) -> None:
    print("  ".join(cells(row)), flush=True)


def sweep(args) -> list[dict]:
    old = earlier_rows(args.csv, args.merge)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        for point in args.points:
            row = build_row(point, args.keep or tmp, args.timeout)
            rows.append(row)
            print_row(row)
            write_merged(args.csv, old, rows, key)
    return read_csv(args.csv)


#: the plot's panels: (column, its total's column, label)
PANELS = (
    ("luts", "luts_total", "LUTs (nextpnr)"),
    ("ffs", "luts_total", "flip-flops (nextpnr)"),
    ("brams", "brams_total", "block RAMs (DP16KD)"),
    ("fmax_mhz", None, "Fmax, slowest clock (MHz, routed)"),
)


def plot(rows: list[dict], path: str) -> None:
    """Per board (a row of panels), every point's LUTs, flip-flops, block RAMs and Fmax:
    programmable engines orange, fixed blue, hatched where Yosys made wide LUTs; a dashed
    line at the die's total (flip-flops: one per LUT) and at the harness's clock."""
    shown = [r for r in ordered(rows) if r.get("luts") is not None]
    if not shown:
        print("nothing to plot")
        return
    boards = list(dict.fromkeys(parts(r["point"])[0] for r in shown))
    per = [[r for r in shown if parts(r["point"])[0] == b] for b in boards]
    height = sum(0.32 * len(p) + 1.0 for p in per) + 1.0
    fig, axes = plots.figure(
        len(boards),
        len(PANELS),
        figsize=(15, height),
        squeeze=False,
        gridspec_kw={"height_ratios": [len(p) + 2 for p in per]},
    )
    for board, mine, row_axes in zip(boards, per, axes, strict=True):
        y = list(range(len(mine)))
        labels = [
            " ".join(parts(r["point"])[1:]) + (f" @{r['commit']}" if r.get("commit") else "")
            for r in mine
        ]
        colours = ["C1" if " prog " in r["point"] else "C0" for r in mine]
        hatches = [
            "//" if r.get("synth") == "wide LUTs" and " prog " in r["point"] else "" for r in mine
        ]
        for ax, (col, total, label) in zip(row_axes, PANELS, strict=True):
            bars = ax.barh(y, [r.get(col) or 0 for r in mine], color=colours)
            for bar, hatch in zip(bars, hatches, strict=True):
                bar.set_hatch(hatch)
            limit = mine[0].get(total) if total else mine[0].get("target_mhz")
            if limit:
                ax.axvline(limit, color="grey", linestyle="--", linewidth=1)
            ax.set_yticks(y, labels if ax is row_axes[0] else [""] * len(y), fontsize=7)
            ax.set_xlabel(label, fontsize=8)
            ax.invert_yaxis()
            ax.grid(True, axis="x", alpha=0.3)
        row_axes[0].set_title(board, loc="left", fontsize=9)
    fig.suptitle(
        "programmable (orange, hatched: wide LUTs) against fixed engines (blue), one placement "
        "per bar; dashed: the die's total, or the harness's clock"
    )
    plots.save(fig, path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", nargs="+", default=POINTS)
    ap.add_argument("--csv", default=CSV)
    ap.add_argument("--plot", metavar="PNG", default=PNG)
    ap.add_argument("--keep", metavar="DIR", help="keep the build folders here")
    ap.add_argument("--merge", action="store_true", help="keep the CSV's other points")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per build")
    ap.add_argument("--plot-only", action="store_true", help="redraw from the CSV, no builds")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument(
        "--record",
        nargs=3,
        metavar=("POINT", "DIR", "SECONDS"),
        help="add POINT's row from the report.json of a build of its command line run "
        "separately into DIR (it took SECONDS), no builds",
    )
    ap.add_argument("--load", help="with --record: the load average while it was built")
    ap.add_argument("--commit", help="with --record: the commit whose tree was built")
    args = ap.parse_args()
    if not (args.plot_only or args.record) and importlib.util.find_spec("nfacep") is None:
        sys.exit(
            f"programmable_fmax.py: {sys.executable} has no nfacep: run it with the Python "
            "of the environment nfacep is installed in (the project's .venv/bin/python)"
        )
    if args.record:
        point, out, wall = args.record
        row = report_row(point, out, float(wall), args.load, args.commit)
        write_merged(args.csv, earlier_rows(args.csv, True), [row], key)
    rows = read_csv(args.csv) if args.plot_only or args.record else sweep(args)
    print(table(rows, args.markdown))
    if args.plot:
        plot(rows, args.plot)


if __name__ == "__main__":
    main()
