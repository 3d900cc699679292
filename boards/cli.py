"""``nfacep build Q.sql --board NAME``: the subcommand, wired into :mod:`nfacep.cli`."""

from __future__ import annotations

import os
import re
import sys

from .registry import BOARDS, get_board, known_boards

__all__ = ["add_build_parser", "cmd_build"]


def add_build_parser(subparsers, hardware_args) -> None:
    """Add the ``build`` subcommand; ``hardware_args(parser)`` adds the engine parameters."""
    import argparse

    b = subparsers.add_parser(
        "build", help="bitstream plus a resource and timing report for a board",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Synthesise, place and route the engine for a board with the open toolchain "
                    "(Yosys, nextpnr). Writes the bitstream, the Verilog and report.json to the "
                    "output folder. The board top is a synthesis/timing harness for now "
                    "(pseudo-random tuples on chip, results folded into the LEDs).",
        epilog=f"boards:\n{known_boards()}")
    b.add_argument("query", help="query file (.sql)")
    b.add_argument("--board", required=True, metavar="NAME",
                   help=f"one of: {', '.join(BOARDS)}")
    b.add_argument("-o", "--output", metavar="DIR",
                   help="output folder (default build/<query>-<board>)")
    b.add_argument("--target-mhz", type=float, metavar="F",
                   help="constrain the clock to F MHz instead of the board's oscillator, to see "
                        "how fast the engine can run (the paper's engine ran at 125)")
    hardware_args(b)


def cmd_build(args) -> int:
    from nfacep import compile_file

    from .bitstream import BuildError, build, render_report

    board = get_board(args.board)
    nfa = compile_file(args.query)
    for w in nfa.program.warnings:
        print(w.render(), file=sys.stderr)
    stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(args.query))[0]) or "engine"
    out_dir = args.output or os.path.join("build", f"{stem}-{board.name}")
    try:
        report = build(nfa, board, out_dir, partitions=args.partitions,
                       tick_tuples=args.tick_tuples, timer_bits=args.timer_bits,
                       target_mhz=args.target_mhz, stem=stem, query_file=args.query,
                       progress=lambda text: print(f"nfacep build: {text}", file=sys.stderr))
    except BuildError as err:
        if err.report is not None:
            print(render_report(err.report))
            print(f"wrote {os.path.join(out_dir, 'report.json')}")
        raise
    print(render_report(report))
    print(f"wrote {os.path.join(out_dir, report['files']['bitstream'])}, "
          f"{os.path.join(out_dir, report['files']['verilog'])} and "
          f"{os.path.join(out_dir, 'report.json')}")
    return 0
