#!/usr/bin/env python3
"""LUTs of (AB)^i with and without the shared predicate decoder on an ECP5 LFE5U-85F.

The paper's Figure 15 (Woods, Teubner and Alonso, VLDB 2010, appendix C): A and B are ASCII
characters on a 7-bit field (``A AS c = 65``, ``B AS c = 66``), and without a decoder every NFA
state compares the seven wires itself. Four designs, each a Yosys + nextpnr build of
``source ▸ matcher ▸ LEDs`` (benchmarks/fabric.py):

* ``decoder``: :class:`nfacep.hdl.decoder.PredicateDecoder` (two comparators) ▸
  :class:`nfacep.hdl.nfa.NfaMatcher`, as the engine does;
* ``decoder-registered``: the same with a pipeline register between decoder and NFA, as in
  the engine, where the decoder feeds a FIFO (so synthesis cannot copy the decoder's logic
  into every state);
* ``per-state``: :class:`nfacep.hdl.unshared.UnsharedNfaMatcher`, one comparator per state in its
  own submodule, synthesised as Yosys does by default (the hierarchy flattened, so it may find
  and merge the identical comparators);
* ``per-state-kept``: the same design with every per-state module kept as a separate entity
  (``keep_hierarchy``), so no logic is shared across states — what a synthesizer that does
  not find the redundancy produces.
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
from nfacep.hdl.nfa import NfaMatcher
from nfacep.hdl.unshared import UnsharedNfaMatcher

STREAM = "CREATE STREAM chars (c UINT(7));\n"
VARIANTS = ["decoder", "decoder-registered", "per-state", "per-state-kept"]
LABELS = {
    "decoder": "with predicate decoder (combinational into the NFA)",
    "decoder-registered": "with predicate decoder, registered (as in the engine)",
    "per-state": "without (per-state predicates, Yosys flattens; same as decoder)",
    "per-state-kept": "without (per-state predicates, hierarchy kept)",
}
MARKERS = {"decoder": "o-", "decoder-registered": "v-", "per-state": "s:", "per-state-kept": "^-"}
#: Yosys command run after reading the design: keep every per-state predicate module
KEEP = "setattr -mod -set keep_hierarchy 1 *_pred"


def query(i: int):
    return nfacep.compile_text(
        STREAM + f"QUERY q PATTERN ((A B){{{i}}}) DEFINE A AS c = 65 B AS c = 66"
    )


def make_top(i: int, variant: str) -> MatcherTop:
    nfa = query(i)
    if variant.startswith("decoder"):
        return MatcherTop(nfa, NfaMatcher(nfa, 0), registered=variant == "decoder-registered")
    return MatcherTop(nfa, UnsharedNfaMatcher(nfa, 0))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--i",
        type=int,
        nargs="+",
        default=[1, 25, 50, 100, 150, 200, 250],
        dest="values",
        metavar="I",
    )
    ap.add_argument("--variants", nargs="+", choices=VARIANTS, default=VARIANTS)
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per build")
    output_arguments(ap, "predicate_decoder", merge=MERGE)
    args = ap.parse_args()

    board = get_board(args.board)
    print(f"(AB)^i, A: c = 65, B: c = 66 (c UINT(7)), on {board.name} ({board.description})")
    print(
        f"{'i':>4} {'variant':<15} {'states':>6} {'LUTs':>7} {'FFs':>6} {'LUT %':>6} "
        f"{'fmax':>6} {'build s':>8}  status"
    )
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or tmp
        for i in sorted(args.values):
            for variant in args.variants:
                result = build_design(
                    partial(make_top, i, variant),
                    board,
                    os.path.join(root, f"{variant}-{i}"),
                    timeout=args.timeout,
                    script_after_read=KEEP if variant == "per-state-kept" else None,
                )
                row = {"i": i, "variant": variant, "states": 2 * i}
                row.update(design_row(result, board))
                rows.append(row)
                print(
                    f"{i:>4} {variant:<15} {2 * i:>6} {row['luts'] or 0:>7,} "
                    f"{row['ffs'] or 0:>6,} {row.get('luts_pct', 0):>6.2f} "
                    f"{row['fmax_mhz'] or 0:>6.1f} {row['wall_s']:>8.0f}  {row['status']}",
                    flush=True,
                )
    rows = save_rows(args.csv, rows, merge=args.merge, replaced=args.variants, order=list(VARIANTS))
    if args.plot:
        plot(rows, board, [v for v in VARIANTS if any(r["variant"] == v for r in rows)], args.plot)


def plot(rows: list[dict], board, variants: list[str], path: str) -> None:
    fig, ax = plots.figure(figsize=(6.5, 4.2))
    for variant in variants:
        pts = [
            (r["i"], r["luts"])
            for r in rows
            if r["variant"] == variant and r.get("luts") is not None
        ]
        if pts:
            ax.plot(
                *zip(*pts, strict=True),
                MARKERS[variant],
                label=LABELS[variant],
                lw=3.5 if variant == "decoder" else 1.5,
                ms=8 if variant == "decoder" else 5,
            )
    ax.set_xlabel("i in (AB)^i  (NFA states: 2i)")
    ax.set_ylabel("LUTs used (nextpnr TRELLIS_COMB)")
    device = board.description.split(", ")[-1]
    ax.set_title(f"Predicate decoder (cf. Figure 15), {device}", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    plots.save(fig, path)


if __name__ == "__main__":
    main()
