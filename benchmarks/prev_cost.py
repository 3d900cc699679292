#!/usr/bin/env python3
"""What PREV(field, k) costs per partition on marathon-sized tuples (issue 27, item 3).

``queries/marathon.sql``'s cheat query, as it is and with one PREV added to its ``C``
(``checkpoint = 'Queens' AND <cond>``), for each field type of the marathon stream and several
``k``: ``time > PREV(time, k)`` (UINT(32)), ``speed > PREV(speed, k)`` (FLOAT32) and
``checkpoint <> PREV(checkpoint, k)`` (a 3-bit ENUM). Each partition then keeps the field's
last ``k`` values and a count of its tuples (up to ``k``) beside its NFA state.

Without a toolchain (the default), per variant: the bits a partition keeps (its entry: NFA
state and history), the flip-flops of the elaborated harness top with the swap pipeline of
``--partitions`` elements, as ``nfacep check --board`` counts them, and the extra flip-flops
per partition against the plain query; and with the block-RAM table of ``--table`` entries its
entry width and DP16KD blocks (:func:`nfacep.boards.bitstream.estimate`).

With ``--build LABEL …``, those variants are also built (Yosys and nextpnr-ecp5 for
``--board``, as ``nfacep build`` runs them, without packing; through
``fabric.build_design``, one at a time, slow: minutes each): LUTs, FFs, block RAMs and Fmax.

    python benchmarks/prev_cost.py
    python benchmarks/prev_cost.py --partitions 16 --table 4096
    python benchmarks/prev_cost.py --build plain "time k=1" --store pipeline
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import nfacep
from nfacep.boards import get_board
from nfacep.boards.bitstream import estimate
from nfacep.hdl.nfa_layout import state_layout
from nfacep.params import EngineParams

ROOT = pathlib.Path(__file__).resolve().parent.parent
MARATHON = (ROOT / "queries" / "marathon.sql").read_text()
QUEENS = "C    AS (checkpoint = 'Queens')"
CONDITIONS = {
    "time": "time > PREV(time{k})",
    "speed": "speed > PREV(speed{k})",
    "checkpoint": "checkpoint <> PREV(checkpoint{k})",
}


def variants(ks: list[int]) -> dict[str, str]:
    """The query texts by label: ``plain`` and ``<field> k=<k>``."""
    assert QUEENS in MARATHON, "marathon.sql's C"
    out = {"plain": MARATHON}
    for field, cond in CONDITIONS.items():
        for k in ks:
            text = cond.format(k="" if k == 1 else f", {k}")
            out[f"{field} k={k}"] = MARATHON.replace(
                QUEENS, f"C    AS (checkpoint = 'Queens' AND {text})"
            )
    return out


def estimate_row(label: str, text: str, board, partitions: int, table: int) -> dict:
    nfa = nfacep.compile_text(text)
    history = sum(k * nfa.program.schema.field(f).type.bits for f, k in nfa.history.items())
    count = max(nfa.history.values(), default=0).bit_length()
    pipe = estimate(nfa, board, EngineParams(partitions=partitions, store="pipeline"))
    tab = estimate(nfa, board, EngineParams(partitions=table, store="table"))
    brams = tab["resources"]["brams"]
    return {
        "label": label,
        "state_bits": state_layout(nfa).size,
        "history_bits": history + count,
        "pipeline_ffs": pipe["resources"]["ffs"]["estimate"],
        "table_entry_bits": brams.get("entry_bits"),
        "table_brams": brams.get("estimate"),
    }


def build_row(label: str, text: str, board, params: EngineParams, target: float, root: str):
    from fabric import build_design

    from nfacep.boards.top import BoardTop
    from nfacep.hdl.engine import Engine

    nfa = nfacep.compile_text(text)

    def make_top():
        return BoardTop(Engine(nfa, params))

    out = os.path.join(root, f"{params.store}_{label.replace(' ', '_').replace('=', '')}")
    res = build_design(make_top, board, out, target_mhz=target, timeout=3600)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--board", default="ulx3s-85f")
    ap.add_argument("--partitions", type=int, default=16, help="pipeline elements")
    ap.add_argument("--table", type=int, default=4096, help="table entries")
    ap.add_argument("--k", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--build", nargs="*", default=[], metavar="LABEL")
    ap.add_argument("--store", choices=["pipeline", "table"], default="pipeline")
    ap.add_argument("--target-mhz", type=float, default=100.0)
    args = ap.parse_args()
    board = get_board(args.board)
    texts = variants(args.k)
    unknown = [label for label in args.build if label not in texts]
    if unknown:
        ap.error(f"--build {', '.join(unknown)}: the variants are {', '.join(texts)}")
    print(
        f"PREV per partition on marathon's tuples ({board.name}; pipeline of "
        f"{args.partitions} elements, table of {args.table} entries; before synthesis)"
    )
    print(
        f"{'variant':<16} {'state':>6} {'history':>8} {'entry':>6} {'pipe FFs':>9} "
        f"{'FFs/part':>9} {'table entry':>12} {'DP16KD':>7}"
    )
    plain = None
    for label, text in texts.items():
        row = estimate_row(label, text, board, args.partitions, args.table)
        if plain is None:
            plain = row
        per = (row["pipeline_ffs"] - plain["pipeline_ffs"]) / args.partitions
        print(
            f"{label:<16} {row['state_bits']:>6} {row['history_bits']:>8} "
            f"{row['state_bits'] + row['history_bits']:>6} {row['pipeline_ffs']:>9,} "
            f"{per:>9.1f} {row['table_entry_bits']:>12} {row['table_brams']:>7}",
            flush=True,
        )
    if not args.build:
        return
    store_size = args.partitions if args.store == "pipeline" else args.table
    params = EngineParams(partitions=store_size, store=args.store)
    print()
    print(f"builds: --store {args.store} --partitions {store_size}, {board.name}")
    print(f"{'variant':<16} {'LUTs':>7} {'FFs':>7} {'BRAMs':>6} {'Fmax MHz':>9} {'build s':>8}")
    with tempfile.TemporaryDirectory(prefix="nfacep-prev-") as root:
        for label in args.build:
            res = build_row(label, texts[label], board, params, args.target_mhz, root)
            if res["status"] != "ok":
                print(f"{label:<16} {res['status']}: {res.get('message', '')}", flush=True)
                continue
            print(
                f"{label:<16} {res['luts']:>7,} {res['ffs']:>7,} {res['brams']:>6} "
                f"{res['fmax_mhz']:>9.1f} {res['wall_s']:>8.0f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
