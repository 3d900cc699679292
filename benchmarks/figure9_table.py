#!/usr/bin/env python3
"""The paper's Figure 9 for the block-RAM table store: LUTs, FFs, block RAMs and Fmax against
partitions (1k to 64k) for marathon and A (B | C*) D, on an LFE5U-85F and an LFE5U-25F.

Each point is a real ``nfacep build --store table`` (the harness top: on-chip tuples, LED fold)
through :func:`table_store.build_point`, with nextpnr constrained to ``--target-mhz``, one build
at a time. Both queries partition on a 16-bit key, so 65,536 entries index the table directly
and smaller tables are set-associative (``--ways``, 4 by default as in the CLI). A build that
does not fit or fails is a row with the flow's status and message; on a board, the sizes above
the first that does not fit are not built. Rows are written to the CSV after every build.

The plot sets the swap pipeline's Figure 9 points (``results/fmax_partitions.csv``, written by
``fmax_partitions.py``: marathon on the 85F) beside the table's; they are read, not rebuilt.
Tuples/s is Fmax for the table (one tuple per cycle) and Fmax / 2 for the pipeline.

    python benchmarks/figure9_table.py                     # the whole sweep, ~20 builds
    python benchmarks/figure9_table.py --plot-only         # redraw from the CSV
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fabric import read_csv, write_csv
from fmax_partitions import critical_path
from resources import QUERY as ABCD_QUERY
from table_store import ROOT, build_point

import nfacep
from nfacep.boards import get_board
from nfacep.params import EngineParams

HERE = os.path.dirname(os.path.abspath(__file__))
QUERIES = {"marathon": "marathon", "abcd": "A (B | C*) D"}
BOARDS = ["ulx3s-85f", "ulx3s-25f"]
PARTITIONS = [1024, 4096, 16384, 32768, 65536]
CSV = os.path.join(HERE, "results", "figure9_table.csv")
PIPELINE_CSV = os.path.join(HERE, "results", "fmax_partitions.csv")
KEY = ("query", "board", "partitions", "tick_tuples")


def compile_query(name: str):
    if name == "marathon":
        return nfacep.compile_file(str(ROOT / "queries" / "marathon.sql"))
    return nfacep.compile_text(ABCD_QUERY)


def device(board: str) -> str:
    return get_board(board).description.split(", ")[-1]


def num(value, fmt: str) -> str:
    return "-" if value is None or value == "" else format(value, fmt)


def print_row(row: dict) -> None:
    print(
        f"{QUERIES[row['query']]:<13} {device(row['board']):<22} {row['partitions']:>6} "
        f"{row.get('tick_tuples') or 0:>6} "
        f"{num(row.get('luts'), ','):>7} {num(row.get('ffs'), ','):>7} "
        f"{num(row.get('brams'), ''):>6} {num(row.get('fmax_mhz'), '.1f'):>9} "
        f"{row.get('build_s', 0):>8.0f}  {row['status']}"
        + (
            f": {row['message'][:160]}"
            if row["status"] not in ("ok", "timing not met") and row.get("message")
            else ""
        ),
        flush=True,
    )


def sweep(args) -> list[dict]:
    old = read_csv(args.csv) if args.merge and os.path.exists(args.csv) else []
    rows: list[dict] = []

    def save() -> None:
        done = {tuple(r[k] for k in KEY) for r in rows}
        merged = [r for r in old if tuple(r[k] for k in KEY) not in done] + rows
        order = {q: i for i, q in enumerate(QUERIES)}
        write_csv(
            args.csv,
            sorted(
                merged,
                key=lambda r: (
                    BOARDS.index(r["board"]) if r["board"] in BOARDS else 9,
                    order[r["query"]],
                    int(r.get("tick_tuples") or 0),
                    r["partitions"],
                ),
            ),
        )

    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or tmp
        for board in args.boards:
            for query in args.queries:
                nfa = compile_query(query)
                too_big = None
                for parts in args.partitions:
                    row: dict = {
                        "query": query,
                        "board": board,
                        "device": device(board),
                        "partitions": parts,
                        "store": "table",
                        "ways": args.ways,
                        "tick_tuples": args.tick_tuples,
                        "timer_bits": 4,
                        "target_mhz": args.target_mhz,
                    }
                    if too_big is not None:
                        row.update(
                            status="not built",
                            message=f"{too_big} partitions did not fit this device",
                        )
                        rows.append(row)
                        print_row(row)
                        continue
                    params = EngineParams(
                        store="table",
                        partitions=parts,
                        ways=row["ways"],
                        tick_tuples=args.tick_tuples,
                        timer_bits=4,
                    )
                    out = os.path.join(root, f"{board}-{query}-{parts}-{args.tick_tuples}")
                    row.update(build_point(nfa, params, board, args.target_mhz, out, query))
                    # the build folder is temporary: drop where the failing bitstream was left
                    row["message"] = row["message"].split(" (the bitstream")[0]
                    report = os.path.join(out, "toolchain", "nfacep_top.report.json")
                    if os.path.exists(report) and row["fmax_mhz"] is not None:
                        with open(report, encoding="utf-8") as f:
                            cp = critical_path(json.load(f))
                        row.update({f"cp_{k}": v for k, v in cp.items()})
                    if row["status"] == "does not fit":
                        too_big = parts
                    rows.append(row)
                    print_row(row)
                    save()
    return read_csv(args.csv)


def plot(rows: list[dict], pipeline: list[dict], path: str, target: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(13, 7.5))
    panels = [
        ("luts", "LUTs (TRELLIS_COMB)"),
        ("ffs", "flip-flops (TRELLIS_FF)"),
        ("brams", "block RAMs (DP16KD)"),
        ("fmax_mhz", "Fmax (MHz)"),
        ("tuples", "M tuples/s (table: Fmax; pipeline: Fmax / 2)"),
    ]
    styles = {
        ("marathon", "ulx3s-85f"): ("C0", "o-"),
        ("abcd", "ulx3s-85f"): ("C1", "s-"),
        ("marathon", "ulx3s-25f"): ("C0", "o--"),
        ("abcd", "ulx3s-25f"): ("C1", "s--"),
    }
    for (query, board), (color, style) in styles.items():
        for ticked in (False, True):
            pts = [
                r
                for r in rows
                if r["query"] == query
                and r["board"] == board
                and bool(r.get("tick_tuples")) == ticked
                and r.get("luts") is not None
                and r.get("fmax_mhz") is not None
            ]
            if not pts:
                continue
            xs = [r["partitions"] for r in pts]
            label = f"table, {QUERIES[query]}, {device(board)}"
            if ticked:
                label += f", a tick per {pts[0]['tick_tuples']:,} tuples"
            for ax, (key, _) in zip(axes.flat, panels, strict=False):
                ys = [r["fmax_mhz"] if key == "tuples" else r[key] for r in pts]
                fmt = style[0] + ("-." if ticked else style[1:])  # marker, then line
                ax.plot(
                    xs,
                    ys,
                    fmt,
                    color="C2" if ticked else color,
                    label=label,
                    mfc="none" if "--" in style else None,
                )
    if pipeline:
        xs = [r["partitions"] for r in pipeline]
        for ax, (key, _) in zip(axes.flat, panels, strict=False):
            ys = [r["fmax_mhz"] / 2 if key == "tuples" else r[key] for r in pipeline]
            ax.plot(
                xs,
                ys,
                "^:",
                color="C3",
                label="swap pipeline, marathon, LFE5U-85F\n(fmax_partitions.csv, target 125 MHz)",
            )
    axes.flat[3].axhline(target, color="grey", ls="--", lw=1)
    axes.flat[3].text(16, target + 3, f"nextpnr target {target:g} MHz", fontsize=8, color="grey")
    axes.flat[4].axhline(150, color="grey", ls="--", lw=1)
    axes.flat[4].text(16, 153, "goal: 150M tuples/s", fontsize=8, color="grey")
    ticks = [16, 64, 256, 1024, 4096, 16384, 65536]
    for ax, (key, title) in zip(axes.flat, panels, strict=False):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [f"{t // 1024}k" if t >= 1024 else str(t) for t in ticks])
        ax.set_xlabel("partitions")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        if key in ("luts", "ffs"):
            ax.set_yscale("log")
        else:
            # the frequency panels start at 0 and reach past every point (the table's best
            # exceed 180 MHz), with room above the 150 MHz line's label
            top = max((y for line in ax.get_lines() for y in line.get_ydata()), default=0)
            ax.set_ylim(0, max(175, top * 1.06) if key in ("fmax_mhz", "tuples") else None)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    axes.flat[5].axis("off")
    axes.flat[5].legend(handles, labels, loc="center", fontsize=9)
    fig.suptitle(
        "Figure 9 for the block-RAM table store (nextpnr-ecp5, routed, "
        f"target {target:g} MHz) beside the swap pipeline"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, nargs="+", default=PARTITIONS)
    ap.add_argument("--queries", nargs="+", choices=list(QUERIES), default=list(QUERIES))
    ap.add_argument("--boards", nargs="+", default=BOARDS)
    ap.add_argument(
        "--ways",
        type=int,
        default=4,
        help="--ways: a bucket's entries below 65,536 partitions (the keys are 16 "
        "bits), the banks the direct table is interleaved over at 65,536",
    )
    ap.add_argument(
        "--target-mhz",
        type=float,
        default=150.0,
        help="clock constraint for nextpnr (default: the issue's 150 MHz goal)",
    )
    ap.add_argument(
        "--tick-tuples",
        type=int,
        default=0,
        help="--tick-tuples (timers: a tick stamp per entry, 4 timer bits)",
    )
    ap.add_argument("--csv", default=CSV)
    ap.add_argument("--pipeline-csv", default=PIPELINE_CSV)
    ap.add_argument("--plot", metavar="PNG", default=os.path.join(HERE, "figure9_table.png"))
    ap.add_argument("--keep", metavar="DIR", help="keep the build folders here")
    ap.add_argument(
        "--merge", action="store_true", help="keep the CSV's rows for points not built this time"
    )
    ap.add_argument("--plot-only", action="store_true", help="redraw from the CSV, no builds")
    args = ap.parse_args()

    head = (
        f"{'query':<13} {'device':<22} {'parts':>6} {'tick':>6} {'LUTs':>7} {'FFs':>7} "
        f"{'BRAMs':>6} "
        f"{'Fmax MHz':>9} {'build s':>8}  status"
    )
    if args.plot_only:
        rows = read_csv(args.csv)
    else:
        print(f"--store table, nextpnr target {args.target_mhz:g} MHz, one build at a time")
        print(head)
        rows = sweep(args)
    print(head)
    for row in rows:
        print_row(row)
    pipeline = read_csv(args.pipeline_csv) if os.path.exists(args.pipeline_csv) else []
    if args.plot:
        plot(rows, pipeline, args.plot, args.target_mhz)


if __name__ == "__main__":
    main()
