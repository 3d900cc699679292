#!/usr/bin/env python3
"""Fmax by feature (issue 29, item 3): the marathon engine plain and with each feature that
widens a partition's entry or its update, by partition store and size, on ECP5.

Features (each alone, on ``queries/marathon.sql``'s cheat query):

- ``plain``: the query as it is;
- ``window``: ``ORDER BY time`` and ``WITHIN 3600`` (each partition keeps a 13-bit start
  per non-start state and the last 32-bit time);
- ``start_seq``: ``MEASURES FIRST(seq) AS start_seq`` (a 48-bit position per non-start state
  and the last tuple's);
- ``timers``: the plain query with a tick every 1,000 tuples and 4 timer bits (the table keeps
  a tick stamp per entry, the pipeline a timer per element);
- ``window+timers``: the window's query with the timers' ticks (the two together);
- ``parameters``: every constant a runtime parameter (``checkpoint = :first``), with
  ``i_params`` driven from the tuple source so that the registers stay (as in
  ``windows_params.py``);
- ``prev``: ``C`` also requires ``time > PREV(time)`` (32 bits of history and a count per
  partition, as in ``prev_cost.py``).

Each point is one ``nfacep build``-style flow of the harness top (on-chip tuples, LEDs) through
:func:`fabric.build_design`: Yosys, then nextpnr-ecp5 constrained to ``--target-mhz`` with its
default placement seed, or ``--seed N``'s (a row per seed: the CSV's key is the board, point,
feature and seed; the plot shows the default seed's), one build at a time. A point that does
not fit (start_seq or a window at 65,536 entries: a 114- or 352-bit entry) is a row with that
status. Rows go to the CSV after every build (``--merge`` keeps the points not rebuilt), and
the plot has one group of bars per store and size, one bar per feature.

    python benchmarks/fmax_features.py --points "table 65536" --features plain timers
    python benchmarks/fmax_features.py --plot-only
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import plots
from fabric import cell, earlier_rows, read_csv, write_merged
from figure9_table import device
from prev_cost import variants as prev_variants
from windows_params import build_row, marathon_text

from nfacep.params import EngineParams

HERE = os.path.dirname(os.path.abspath(__file__))
CSV = os.path.join(HERE, "results", "fmax_features.csv")
PNG = os.path.join(HERE, "fmax_features.png")
FEATURES = ["plain", "window", "start_seq", "timers", "window+timers", "parameters", "prev"]
POINTS = ["pipeline 256", "table 4096", "table 65536"]
BOARDS = ["ulx3s-85f", "ulx3s-25f"]
TICK_TUPLES = 1000
DEFAULT_SEED = "nextpnr default"  # the CSV's seed column for a build without --seed


def feature_text(feature: str) -> str:
    """The query text of a feature (timers: the plain query or the window's, the ticks are the
    store's)."""
    if feature in ("plain", "timers"):
        return marathon_text()
    if feature in ("window", "window+timers"):
        return marathon_text(window=True)
    if feature == "start_seq":
        return marathon_text(start=True)
    if feature == "parameters":
        return marathon_text(params=True)
    if feature == "prev":
        return prev_variants([1])["time k=1"]
    raise ValueError(f"unknown feature {feature!r}")


def engine_params(point: str, feature: str) -> EngineParams:
    """``point`` is ``"<store> <partitions>"``; the table has 4 ways (direct at 65,536)."""
    store, size = point.split()
    ticks = TICK_TUPLES if feature in ("timers", "window+timers") else 0
    if store == "table":
        return EngineParams(store="table", partitions=int(size), ways=4, tick_tuples=ticks)
    return EngineParams(store="pipeline", partitions=int(size), tick_tuples=ticks)


def print_row(row: dict) -> None:
    def n(key, fmt):
        return cell(row, key, fmt)

    print(
        f"{device(row['board']):<22} {row['point']:<13} {row['feature']:<10} "
        f"{n('state_bits', 'd'):>5} {n('luts', ','):>7} {n('ffs', ','):>7} {n('brams', 'd'):>5} "
        f"{n('fmax_mhz', '.1f'):>7} {n('build_s', '.0f'):>7}  {row['status']}",
        flush=True,
    )


def sweep(args) -> list[dict]:
    key = ("board", "point", "feature", "seed")
    seed = DEFAULT_SEED if args.seed is None else args.seed
    old = earlier_rows(args.csv, args.merge)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or tmp
        for board in args.boards:
            from nfacep.boards import get_board

            b = get_board(board)
            for point in args.points:
                for feature in args.features:
                    label = f"{board} {point} {feature}"
                    row = build_row(
                        label,
                        feature_text(feature),
                        engine_params(point, feature),
                        b,
                        args.target_mhz,
                        root,
                        seed=args.seed,
                        timeout=args.timeout,
                    )
                    row = {"board": board, "point": point, "feature": feature, **row}
                    row["seed"] = seed
                    rows.append(row)
                    print_row(row)
                    write_merged(args.csv, old, rows, lambda r: tuple(r[k] for k in key))
    return read_csv(args.csv)


def plot(rows: list[dict], path: str, target: float) -> None:
    boards = [b for b in BOARDS if any(r["board"] == b for r in rows)]
    fig, axes = plots.figure(1, len(boards), figsize=(7.5 * len(boards), 4.5), squeeze=False)
    width = 0.8 / len(FEATURES)
    handles: dict = {}
    for ax, board in zip(axes[0], boards, strict=True):
        # every point built on this board, the pipeline's first, then by size
        built = {r["point"] for r in rows if r["board"] == board}
        points = sorted(built, key=lambda p: (p.split()[0], int(p.split()[1])))
        found = {
            (r["point"], r["feature"]): r
            for r in rows
            if r["board"] == board and r.get("seed", DEFAULT_SEED) == DEFAULT_SEED
        }
        for i, feature in enumerate(FEATURES):
            for x, point in enumerate(points):
                row = found.get((point, feature))
                if row is None:
                    continue
                pos = x - 0.4 + (i + 0.5) * width
                if row.get("fmax_mhz") is None:
                    what = "does not fit" if "fit" in row["status"] else row["status"]
                    ax.text(pos, 3, what, rotation=90, ha="center", va="bottom", fontsize=7)
                    continue
                handles[feature] = ax.bar(pos, row["fmax_mhz"], width, color=f"C{i}")
                # every bar's value, so that none needs reading off the axis
                ax.text(
                    pos,
                    row["fmax_mhz"] + 2,
                    f"{row['fmax_mhz']:.1f}",
                    rotation=90,
                    ha="center",
                    va="bottom",
                    fontsize=6,
                )
        ax.axhline(target, color="grey", ls="--", lw=1)
        ax.set_xticks(range(len(points)), points)
        ax.set_xlim(-0.5, len(points) - 0.5)
        ax.set_ylabel("Fmax (MHz, nextpnr, routed)")
        ax.set_title(f"marathon on the {device(board)}")
        ax.grid(True, axis="y", alpha=0.3)
        top = max((r.get("fmax_mhz") or 0 for r in found.values()), default=0)
        ax.set_ylim(0, max(target, top) * 1.25)  # no bar clipped, nor its label
    shown = [f for f in FEATURES if f in handles]
    axes[0][0].legend([handles[f] for f in shown], shown, fontsize=8, ncol=3, loc="upper left")
    fig.suptitle(
        f"Fmax by feature (target {target:g} MHz, dashed), one placement per bar, "
        "nextpnr's default seed"
    )
    plots.save(fig, path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--boards", nargs="+", default=BOARDS)
    ap.add_argument("--points", nargs="+", default=POINTS, help='"<store> <partitions>"')
    ap.add_argument("--features", nargs="+", choices=FEATURES, default=FEATURES)
    ap.add_argument("--target-mhz", type=float, default=150.0)
    ap.add_argument("--seed", type=int, help="nextpnr's placement seed (default: its own)")
    ap.add_argument(
        "--timeout",
        type=float,
        default=1800,
        help="seconds a point's build may take before it is stopped and its row says "
        "'timeout' (default 1800; a large point on a loaded machine takes longer)",
    )
    ap.add_argument("--csv", default=CSV)
    ap.add_argument(
        "--plot",
        metavar="PNG",
        help="where to draw (default: the bundled figure for the bundled CSV, else the CSV's "
        "name with .png, so that a sweep into another CSV leaves the figure alone)",
    )
    ap.add_argument("--keep", metavar="DIR", help="keep the build folders here")
    ap.add_argument("--merge", action="store_true", help="keep the CSV's other points")
    ap.add_argument("--plot-only", action="store_true", help="redraw from the CSV, no builds")
    args = ap.parse_args()
    for point in args.points:
        store, _, size = point.partition(" ")
        if store not in ("pipeline", "table") or not size.isdigit():
            ap.error(f'--points: "{point}" is not "<pipeline|table> <partitions>"')
    print(
        f"{'device':<22} {'point':<13} {'feature':<10} {'state':>5} {'LUTs':>7} {'FFs':>7} "
        f"{'BRAMs':>5} {'Fmax':>7} {'build s':>7}  status"
    )
    rows = read_csv(args.csv) if args.plot_only else sweep(args)
    if args.plot_only:
        for row in rows:
            print_row(row)
    bundled = os.path.abspath(args.csv) == os.path.abspath(CSV)
    path = args.plot or (PNG if bundled else os.path.splitext(args.csv)[0] + ".png")
    plot(rows, path, args.target_mhz)


if __name__ == "__main__":
    main()
