#!/usr/bin/env python3
"""Fmax of the marathon engine against the partition count on an ECP5 LFE5U-85F.

Each partition count is a real ``nfacep build`` (the same flow as ``resources.py``: the board top
with its on-chip tuple source and LED fold, Yosys, nextpnr-ecp5), constrained to
``--target-mhz`` so nextpnr works for that clock rather than the board's 25 MHz oscillator.
Prints Fmax, resources and nextpnr's critical path (start and end cell, logic and routing delay,
logic levels) per build; writes a CSV and, with ``--plot``, a PNG. The issue's target is
125 MHz (the paper's clock) at 256 partitions.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from fabric import HERE, build_report, output_arguments, read_csv, write_csv

import nfacep
from nfacep.boards import get_board
from nfacep.params import EngineParams

QUERY = os.path.join(HERE, "..", "queries", "marathon.sql")


def critical_path(pnr: dict) -> dict:
    """Summary of the slowest clock's critical path from nextpnr's ``--report`` JSON."""
    paths = pnr.get("critical_paths") or []
    if not paths:
        return {}
    path = paths[0]["path"]
    logic = sum(seg["delay"] for seg in path if seg["type"] != "routing")
    routing = sum(seg["delay"] for seg in path if seg["type"] == "routing")
    cells = [seg["from"]["cell"] for seg in path if seg["type"] == "logic"]
    return {
        "from": path[0]["from"]["cell"],
        "to": path[-1]["to"]["cell"],
        "levels": len(cells),
        "logic_ns": round(logic, 2),
        "routing_ns": round(routing, 2),
        "longest_net": max(
            (seg for seg in path if seg["type"] == "routing"),
            key=lambda seg: seg["delay"],
            default={},
        ).get("net", ""),
        "longest_net_ns": round(
            max((seg["delay"] for seg in path if seg["type"] == "routing"), default=0.0), 2
        ),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, nargs="+", default=[16, 64, 128, 256])
    ap.add_argument("--query", default=QUERY, help="query file (default: queries/marathon.sql)")
    ap.add_argument(
        "--target-mhz",
        type=float,
        default=125.0,
        help="clock constraint for nextpnr (default: the paper's 125 MHz)",
    )
    output_arguments(
        ap, "fmax_partitions", merge="keep the CSV's rows for partition counts not built this time"
    )
    args = ap.parse_args()

    nfa = nfacep.compile_file(args.query)
    board = get_board(args.board)
    print(
        f"{os.path.basename(args.query)} on {board.name} ({board.description}), "
        f"nextpnr target {args.target_mhz:g} MHz"
    )
    print(
        f"{'parts':>6} {'LUTs':>7} {'FFs':>7} {'fmax MHz':>9} {'met':>4} {'levels':>6} "
        f"{'logic ns':>8} {'route ns':>8} {'build s':>8}  critical path"
    )
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or tmp
        for parts in args.partitions:
            start = time.monotonic()
            out = os.path.join(root, f"p{parts}")
            report, fmax = build_report(
                nfa,
                board,
                out,
                EngineParams(partitions=parts),
                target_mhz=args.target_mhz,
                stem="marathon",
            )
            with open(
                os.path.join(out, "toolchain", "nfacep_top.report.json"), encoding="utf-8"
            ) as f:
                cp = critical_path(json.load(f))
            res = report["resources"]
            row = {
                "partitions": parts,
                "luts": res["luts"]["used"],
                "ffs": res["ffs"]["used"],
                "brams": res["brams"]["used"],
                "fmax_mhz": fmax,
                "target_mhz": args.target_mhz,
                "timing_met": report["timing_met"],
                "build_s": round(time.monotonic() - start, 1),
                **{f"cp_{k}": v for k, v in cp.items()},
            }
            rows.append(row)
            print(
                f"{parts:>6} {row['luts']:>7,} {row['ffs']:>7,} {fmax:>9.1f} "
                f"{'yes' if row['timing_met'] else 'no':>4} {cp.get('levels', 0):>6} "
                f"{cp.get('logic_ns', 0):>8.2f} {cp.get('routing_ns', 0):>8.2f} "
                f"{row['build_s']:>8.0f}  {cp.get('from', '?')} -> {cp.get('to', '?')}",
                flush=True,
            )
    if args.merge and os.path.exists(args.csv):
        built = {r["partitions"] for r in rows}
        rows = sorted(
            [r for r in read_csv(args.csv) if r["partitions"] not in built] + rows,
            key=lambda r: r["partitions"],
        )
    write_csv(args.csv, rows)
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        xs = [r["partitions"] for r in rows]
        ax.plot(xs, [r["fmax_mhz"] for r in rows], "o-", label="Fmax (nextpnr, routed)")
        ax.axhline(
            args.target_mhz, color="grey", ls="--", label=f"target / paper: {args.target_mhz:g} MHz"
        )
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs, [str(x) for x in xs])
        ax.set_xlabel("partitions (partitioner depth)")
        ax.set_ylabel("MHz")
        ax.set_ylim(bottom=0)
        ax.set_title(f"marathon engine on {board.description.split(', ')[-1]}")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="lower left")
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
