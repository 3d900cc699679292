#!/usr/bin/env python3
"""LUTs and flip-flops against the partitioner's depth for A (B | C*) D on an ECP5 LFE5U-85F.

The shape of the paper's Figure 9 (Woods, Teubner and Alonso, VLDB 2010: resource use of the
stream partitioner grows linearly with the number of partition elements). Each depth is a real
``nfacep build`` for the ULX3S-85F: Yosys synthesis and nextpnr place-and-route, numbers as
nextpnr counts them (TRELLIS_COMB, TRELLIS_FF). The board top's harness (tuple generator, LED
fold) is included; its cost is the same at every depth, so the slope is the partition
element's. Prints a table and a least-squares slope; ``--plot F`` draws it.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import plots
from fabric import build_report

import nfacep
from nfacep.boards import get_board
from nfacep.params import EngineParams

QUERY = """CREATE STREAM ev (k UINT(16), e ENUM('a', 'b', 'c', 'd'));
QUERY q FROM ev PARTITION k PATTERN (A (B | C*) D)
DEFINE A AS e = 'a' B AS e = 'b' C AS e = 'c' D AS e = 'd';
"""


def slope(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares line ``y = a + b x``: returns ``(a, b)``."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0
    return my - b * mx, b


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--depths", type=int, nargs="+", default=[1, 8, 16, 32, 64, 128])
    ap.add_argument("--board", default="ulx3s-85f")
    ap.add_argument(
        "--target-mhz",
        type=float,
        default=None,
        help="clock constraint for nextpnr (default: the board's oscillator)",
    )
    ap.add_argument("--plot", metavar="PNG")
    args = ap.parse_args()

    nfa = nfacep.compile_text(QUERY)
    board = get_board(args.board)
    print(f"A (B | C*) D, PARTITION k UINT(16), on {board.name} ({board.description})")
    print(f"{'depth':>6} {'LUTs':>8} {'FFs':>8} {'BRAMs':>6} {'fmax MHz':>9} {'build s':>8}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for depth in args.depths:
            start = time.monotonic()
            out = os.path.join(tmp, str(depth))
            params = EngineParams(partitions=depth)
            report, fmax = build_report(
                nfa, board, out, params, target_mhz=args.target_mhz, stem="abcd"
            )
            res = report["resources"]
            row = (
                depth,
                res["luts"]["used"],
                res["ffs"]["used"],
                res["brams"]["used"],
                fmax,
                time.monotonic() - start,
            )
            rows.append(row)
            print(
                f"{row[0]:>6} {row[1]:>8,} {row[2]:>8,} {row[3]:>6} {row[4]:>9.1f} {row[5]:>8.1f}",
                flush=True,
            )
    depths = [r[0] for r in rows]
    if len(rows) > 1:
        lut0, lut_per = slope(depths, [r[1] for r in rows])
        ff0, ff_per = slope(depths, [r[2] for r in rows])
        print(
            f"per partition element: {lut_per:.1f} LUTs, {ff_per:.1f} flip-flops "
            f"(fixed part: {lut0:.0f} LUTs, {ff0:.0f} flip-flops)"
        )
    if args.plot:
        fig, ax = plots.figure(figsize=(6, 4))
        ax.plot(depths, [r[1] for r in rows], "o-", label="LUTs (TRELLIS_COMB)")
        ax.plot(depths, [r[2] for r in rows], "s-", label="flip-flops (TRELLIS_FF)")
        ax.set_xlabel("partitioner depth (partition elements)")
        ax.set_ylabel(f"used on {board.description.split(', ')[-1]}")
        ax.set_title("A (B | C*) D: resources against partitioner depth")
        ax.grid(True, alpha=0.3)
        ax.legend()
        plots.save(fig, args.plot)


if __name__ == "__main__":
    main()
