#!/usr/bin/env python3
"""The programmable engine after place-and-route (issue 28, Measure): LUTs, flip-flops, block
RAMs and Fmax of ``nfacep build --engine programmable`` on the Colorlight 5A-75B (LFE5U-25F)
and the ULX3S-85F for a few capacities (S states, A atoms, Q queries), against the fixed
engines of the bundled queries, and the wall time of each ``nfacep build``.

Every point is one run of the real command, ``nfacep build Q --board B [--engine programmable
--states S --atoms A --queries Q] --link L -o DIR`` (a subprocess, timed from start to exit),
its numbers read from the ``report.json`` it writes: the resources nextpnr reports, the Fmax
of every clock and whether timing was met at the board's clock. The programmable points boot
with ``queries/marathon.sql``'s image (the engine does not depend on it beyond the stream
declaration; marathon needs 9 states and 7 atoms, so the smallest point is 16x8x1). Points
run one at a time (nextpnr takes minutes); rows go to the CSV after every build (``--merge``
keeps the points not rebuilt).

    python benchmarks/programmable_fmax.py --points "colorlight-5a75b harness prog 16x8x1"
    python benchmarks/programmable_fmax.py --plot-only
    python benchmarks/programmable_fmax.py --record "colorlight-5a75b udp prog 24x16x4" DIR 2400

A point is ``"<board> <link> <engine>"`` with ``<engine>`` ``prog SxAxQ`` (marathon's stream)
or ``fixed QUERY`` (a bundled query); ``--partitions N`` after it sets the table's entries
(the board's default otherwise).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import plots
from fabric import cell, earlier_rows, read_csv, write_merged

HERE = os.path.dirname(os.path.abspath(__file__))
QUERIES = os.path.join(HERE, "..", "queries")
CSV = os.path.join(HERE, "results", "programmable_fmax.csv")
PNG = os.path.join(HERE, "programmable_fmax.png")
#: the bundled queries' runtime parameters (queries/parameters.json)
VALUES = {"supplychain": ["big=20000"]}
POINTS = [
    "colorlight-5a75b harness prog 16x8x1",
    "colorlight-5a75b harness prog 16x16x4",
    "colorlight-5a75b harness prog 24x16x4",
    "colorlight-5a75b harness prog 32x32x4",
    "colorlight-5a75b harness fixed marathon",
    "colorlight-5a75b harness fixed vshape",
    "colorlight-5a75b harness fixed supplychain",
    # the default capacity (24x16x4, 6 timed slots) and the board's default table: 4,096
    # entries (65,536 would take 672 of its 56 block RAMs)
    "colorlight-5a75b udp prog 24x16x4",
    "ulx3s-85f harness prog 32x32x4",
    "ulx3s-85f harness prog 64x64x8",
    "ulx3s-85f harness fixed marathon",
]


def command(point: str, out: str) -> list[str]:
    """The ``nfacep build`` command line of ``point``."""
    words = point.split()
    board, link, kind, what, extra = words[0], words[1], words[2], words[3], words[4:]
    query = "marathon" if kind == "prog" else what
    argv = ["nfacep", "build", os.path.join(QUERIES, f"{query}.sql"), "--board", board]
    argv += ["--link", link, "-o", out, *extra]
    if kind == "prog":
        s, a, q = what.split("x")
        argv += ["--engine", "programmable", "--states", s, "--atoms", a, "--queries", q]
    for value in VALUES.get(query, []):
        argv += ["--param", value]
    return argv


def build_row(point: str, root: str, timeout: float) -> dict:
    out = os.path.join(root, point.replace(" ", "_"))
    argv = command(point, out)
    t0 = time.monotonic()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        status = None
    except subprocess.TimeoutExpired:
        done, status = None, "timeout"
    wall = time.monotonic() - t0
    if not os.path.exists(os.path.join(out, "report.json")):
        last = "" if done is None else (done.stderr.strip().splitlines() or [""])[-1]
        return {"point": point, "build_s": round(wall, 1)} | {
            "status": status or "no report",
            "message": last,
        }
    return report_row(point, out, wall)


def report_row(point: str, out: str, wall: float) -> dict:
    """The row of ``point`` from the ``report.json`` its build wrote to ``out``."""
    row: dict = {"point": point, "build_s": round(wall, 1)}
    path = os.path.join(out, "report.json")
    with open(path, encoding="utf-8") as f:
        report = json.load(f)
    res = report.get("resources") or {}
    fmax = report.get("fmax_mhz") or {}
    row.update(
        status=report["status"],
        partitions=report["parameters"]["partitions"],
        store=report["parameters"]["store"],
        luts=(res.get("luts") or {}).get("used"),
        ffs=(res.get("ffs") or {}).get("used"),
        brams=(res.get("brams") or {}).get("used"),
        resources_from=report.get("resources_from"),
        fmax_mhz=min(fmax.values()) if fmax else None,
        clocks=";".join(f"{k}={v:.1f}" for k, v in fmax.items()),
        timing_met=report.get("timing_met"),
        target_mhz=report.get("target_mhz"),
    )
    return row


def print_row(row: dict) -> None:
    def n(key, fmt):
        return cell(row, key, fmt)

    print(
        f"{row['point']:<56} {n('partitions', ','):>7} {n('luts', ','):>7} {n('ffs', ','):>7} "
        f"{n('brams', 'd'):>5} {n('fmax_mhz', '.1f'):>7} {n('build_s', '.0f'):>7}  "
        f"{row['status']}",
        flush=True,
    )


def sweep(args) -> list[dict]:
    old = earlier_rows(args.csv, args.merge)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        for point in args.points:
            row = build_row(point, args.keep or tmp, args.timeout)
            rows.append(row)
            print_row(row)
            write_merged(args.csv, old, rows, lambda r: r["point"])
    return read_csv(args.csv)


def plot(rows: list[dict], path: str) -> None:
    shown = [r for r in rows if r.get("luts") is not None]
    if not shown:
        print("nothing to plot")
        return
    fig, (left, right) = plots.figure(1, 2, figsize=(12, 0.45 * len(shown) + 1.5))
    labels = [r["point"] for r in shown]
    y = range(len(shown))
    colours = ["C1" if " prog " in r["point"] else "C0" for r in shown]
    left.barh(y, [r["luts"] for r in shown], color=colours)
    left.set_yticks(list(y), labels, fontsize=7)
    left.set_xlabel("LUTs (nextpnr)")
    right.barh(y, [r.get("fmax_mhz") or 0 for r in shown], color=colours)
    right.set_yticks(list(y), [""] * len(shown))
    right.set_xlabel("Fmax, slowest clock (MHz, nextpnr, routed)")
    for ax in (left, right):
        ax.invert_yaxis()
        ax.grid(True, axis="x", alpha=0.3)
    fig.suptitle("programmable (orange) against fixed engines (blue), one placement per bar")
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
    ap.add_argument(
        "--record",
        nargs=3,
        metavar=("POINT", "DIR", "SECONDS"),
        help="add POINT's row from the report.json of a build of its command line run "
        "separately into DIR (it took SECONDS), no builds",
    )
    args = ap.parse_args()
    print(
        f"{'point':<56} {'entries':>7} {'LUTs':>7} {'FFs':>7} {'BRAMs':>5} {'Fmax':>7} "
        f"{'build s':>7}  status"
    )
    if args.record:
        point, out, wall = args.record
        row = report_row(point, out, float(wall))
        print_row(row)
        write_merged(args.csv, earlier_rows(args.csv, True), [row], lambda r: r["point"])
    rows = read_csv(args.csv) if args.plot_only or args.record else sweep(args)
    if args.plot_only:
        for row in rows:
            print_row(row)
    if args.plot:
        plot(rows, args.plot)


if __name__ == "__main__":
    main()
