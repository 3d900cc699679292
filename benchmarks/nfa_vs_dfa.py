#!/usr/bin/env python3
"""NFA vs one-hot DFA vs compressed DFA for (0|1)*1(0|1)^i on an ECP5 LFE5U-85F.

The paper's Figures 4, 16 and 17 (Woods, Teubner and Alonso, VLDB 2010, §4.4 and appendix D):
LUTs and flip-flops of the three automata as i grows. The pattern is written
``(Z | O)* O (Z | O){i}`` over a 1-bit field, ``Z AS b = 0``, ``O AS b = 1``. NFA:
:class:`nfacep.hdl.nfa.NfaMatcher`, one flip-flop per state. DFA:
:class:`nfacep.hdl.dfa.DfaMatcher`, the minimal Moore DFA (the paper's 1 + (2^(i+1) - 1) states),
one-hot or binary-encoded. Each point is a Yosys + nextpnr build of ``source ▸ decoder ▸ matcher ▸
LEDs`` (benchmarks/fabric.py); the harness costs the same at every i. A series stops after a build
that ran out of time (``--timeout``) or did not fit the device.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from functools import partial

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import plots
from fabric import MERGE, MatcherTop, build_design, design_row, output_arguments, save_rows

import nfacep
from nfacep.boards import get_board
from nfacep.hdl.dfa import DfaMatcher, Encoding, moore_dfa
from nfacep.hdl.nfa import NfaMatcher

STREAM = "CREATE STREAM bits (b UINT(1));\n"
VARIANTS = ["nfa", "dfa-one-hot", "dfa-compressed", "dfa-compressed-shuffled"]
LABELS = {
    "nfa": "NFA",
    "dfa-one-hot": "DFA (one-hot)",
    "dfa-compressed": "DFA compressed (breadth-first numbering)",
    "dfa-compressed-shuffled": "DFA compressed (random numbering)",
}
MARKERS = {
    "nfa": "o-",
    "dfa-one-hot": "s-",
    "dfa-compressed": "D--",
    "dfa-compressed-shuffled": "^-",
}
#: seed of the random state numbering
SHUFFLE = 1


def query(i: int):
    return nfacep.compile_text(
        STREAM + f"QUERY q PATTERN ((Z | O)* O (Z | O){{{i}}}) DEFINE Z AS b = 0 O AS b = 1"
    )


def make_top(i: int, variant: str) -> MatcherTop:
    nfa = query(i)
    if variant == "nfa":
        return MatcherTop(nfa, NfaMatcher(nfa, 0))
    encoding = Encoding.ONE_HOT if variant == "dfa-one-hot" else Encoding.COMPRESSED
    shuffle = SHUFFLE if variant == "dfa-compressed-shuffled" else None
    return MatcherTop(nfa, DfaMatcher(nfa, 0, encoding, max_states=1 << 20, shuffle=shuffle))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--i", type=int, nargs="+", default=[1, 2, 4, 6, 8, 10, 12, 14], dest="values", metavar="I"
    )
    ap.add_argument("--variants", nargs="+", choices=VARIANTS, default=VARIANTS)
    ap.add_argument(
        "--timeout",
        type=float,
        default=240.0,
        help="seconds per build; a series stops after one that takes longer",
    )
    output_arguments(ap, "nfa_vs_dfa", merge=MERGE)
    args = ap.parse_args()

    board = get_board(args.board)
    print(
        f"(0|1)*1(0|1)^i on {board.name} ({board.description}); "
        f"{board.luts:,} LUTs, {board.ffs:,} flip-flops"
    )
    print(
        f"{'i':>3} {'variant':<15} {'states':>7} {'state FFs':>9} {'LUTs':>7} {'FFs':>7} "
        f"{'LUT %':>6} {'FF %':>6} {'fmax':>6} {'build s':>8}  status"
    )
    rows: list[dict] = []
    stopped: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or tmp
        for i in sorted(args.values):
            nfa = query(i)
            (q,) = nfa.queries
            dfa_states = moore_dfa(nfa, q, max_states=1 << 20).states
            for variant in args.variants:
                states = q.count if variant == "nfa" else dfa_states
                state_ffs = (
                    states if variant in ("nfa", "dfa-one-hot") else (states - 1).bit_length()
                )
                row = {"i": i, "variant": variant, "states": states, "state_ffs": state_ffs}
                if variant in stopped:
                    row["status"] = f"skipped ({stopped[variant]})"
                elif state_ffs > board.ffs:
                    row["status"] = "skipped (more state flip-flops than the device has)"
                    stopped[variant] = f"i = {i} needs {state_ffs:,} flip-flops"
                else:
                    result = build_design(
                        partial(make_top, i, variant),
                        board,
                        os.path.join(root, f"{variant}-{i}"),
                        timeout=args.timeout,
                    )
                    row.update(design_row(result, board))
                    if result["status"] == "timeout":
                        stopped[variant] = f"i = {i} took over {args.timeout:g} s"
                    elif result["status"] != "ok":
                        stopped[variant] = f"i = {i}: {result['status']}"
                rows.append(row)
                if row.get("luts") is not None:
                    print(
                        f"{i:>3} {variant:<15} {states:>7,} {state_ffs:>9,} "
                        f"{row['luts']:>7,} {row['ffs']:>7,} {row['luts_pct']:>6.2f} "
                        f"{row['ffs_pct']:>6.2f} {row['fmax_mhz'] or 0:>6.1f} "
                        f"{row['wall_s']:>8.0f}  {row['status']}",
                        flush=True,
                    )
                else:
                    print(
                        f"{i:>3} {variant:<15} {states:>7,} {state_ffs:>9,} "
                        f"{'':>7} {'':>7} {'':>6} {'':>6} {'':>6} "
                        f"{row.get('wall_s') or 0:>8.0f}  {row['status']}",
                        flush=True,
                    )
    rows = save_rows(args.csv, rows, merge=args.merge, replaced=args.variants, order=list(VARIANTS))
    if args.plot:
        plot(rows, board, [v for v in VARIANTS if any(r["variant"] == v for r in rows)], args.plot)


def plot(rows: list[dict], board, variants: list[str], path: str) -> None:
    fig, axes = plots.figure(1, 2, figsize=(11, 4.2))
    device = board.description.split(", ")[-1]
    for ax, key, title, total in (
        (axes[0], "luts", "LUTs (cf. Figure 17)", board.luts),
        (axes[1], "ffs", "flip-flops (cf. Figure 16)", board.ffs),
    ):
        for variant in variants:
            pts = [
                (r["i"], r[key]) for r in rows if r["variant"] == variant and r.get(key) is not None
            ]
            if pts:
                ax.plot(*zip(*pts, strict=True), MARKERS[variant], label=LABELS[variant])
        ax.axhline(total, color="grey", ls=":", label=f"{device}: {total:,}")
        ax.set_yscale("log")
        ax.set_xlabel("i in (0|1)*1(0|1)^i")
        ax.set_ylabel(f"{'LUTs' if key == 'luts' else 'flip-flops'} used (nextpnr)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"NFA vs DFA on {device} (Yosys + nextpnr; harness included)")
    stops = [
        f"{LABELS[r['variant']]} at i = {r['i']} ({r['status']})"
        for r in rows
        if r["status"] != "ok" and not r["status"].startswith("skipped")
    ]
    if stops:
        fig.text(0.01, 0.01, "no result: " + "; ".join(stops), fontsize=7)
    plots.save(fig, path, rect=(0, 0.04 if stops else 0, 1, 1))


if __name__ == "__main__":
    main()
