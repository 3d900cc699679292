"""``nfacep build Q.sql --board NAME``: the subcommand, wired into :mod:`nfacep.cli`."""

from __future__ import annotations

import os
import re
import sys

from .registry import BOARDS, get_board, known_boards

__all__ = ["add_build_parser", "add_run_parser", "cmd_build", "cmd_run"]

#: The serial line rate of ``--link uart`` and ``nfacep run`` unless --baud says otherwise.
DEFAULT_BAUD = 115200


def add_build_parser(subparsers, hardware_args) -> None:
    """Add the ``build`` subcommand; ``hardware_args(parser)`` adds the engine parameters."""
    import argparse

    b = subparsers.add_parser(
        "build", help="bitstream plus a resource and timing report for a board",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Synthesise, place and route the engine for a board with the open toolchain "
                    "(Yosys, nextpnr). Writes the bitstream, the Verilog and report.json to the "
                    "output folder. The board top is chosen with --link: 'harness' (the "
                    "default) generates pseudo-random tuples on chip and folds the results "
                    "into the LEDs, to measure the engine's area and Fmax; 'uart' takes tuples "
                    "and returns matches over the board's USB UART, for `nfacep run` "
                    "(boards/LINK.md).",
        epilog=f"boards:\n{known_boards()}")
    b.add_argument("query", help="query file (.sql)")
    b.add_argument("--board", required=True, metavar="NAME",
                   help=f"one of: {', '.join(BOARDS)}")
    b.add_argument("-o", "--output", metavar="DIR",
                   help="output folder (default build/<query>-<board>)")
    b.add_argument("--target-mhz", type=float, metavar="F",
                   help="constrain the clock to F MHz instead of the board's oscillator, to see "
                        "how fast the engine can run (the paper's engine ran at 125)")
    b.add_argument("--link", choices=("harness", "uart"), default="harness",
                   help="board top: 'harness' measures the engine alone (on-chip tuples, LEDs); "
                        "'uart' is the usable design for `nfacep run` (default %(default)s)")
    b.add_argument("--baud", type=int, default=DEFAULT_BAUD, metavar="B",
                   help="UART line rate with --link uart (default %(default)s)")
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
                       progress=lambda text: print(f"nfacep build: {text}", file=sys.stderr),
                       link=args.link, baud=args.baud)
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


def add_run_parser(subparsers, hardware_args) -> None:
    """Add the ``run`` subcommand; ``hardware_args(parser)`` adds the engine parameters."""
    r = subparsers.add_parser(
        "run", help="stream tuples to a board over its USB UART and write its matches",
        description="Reset the engine on a board loaded with a bitstream from `nfacep build "
                    "--link uart`, check that it is this query's engine with these parameters, "
                    "stream the tuples over the serial port (framed, CRC-checked, flow "
                    "controlled, lost frames resent) and write the matches and summary exactly "
                    "as `nfacep match` does. The frame format is in boards/LINK.md.")
    r.add_argument("query", help="query file (.sql)")
    r.add_argument("--port", required=True, metavar="P",
                   help="serial port of the board (/dev/ttyUSB0, COM3, or a pyserial URL such "
                        "as socket://host:port)")
    r.add_argument("--input", required=True, metavar="T",
                   help="tuples: .csv, .parquet, or a folder of Parquet part files")
    r.add_argument("--output", required=True, metavar="M", help="matches (.csv)")
    r.add_argument("--baud", type=int, default=DEFAULT_BAUD, metavar="B",
                   help="line rate the bitstream was built with (default %(default)s)")
    r.add_argument("--timeout", type=float, default=5.0, metavar="S",
                   help="give up when the board does not answer for S seconds "
                        "(default %(default)s)")
    r.add_argument("--frame-tuples", type=int, metavar="F",
                   help="tuples per frame (default 16, fewer if the board's buffer is small)")
    hardware_args(r)


def cmd_run(args) -> int:
    from . import host

    if args.baud <= 0:
        from nfacep.errors import UsageError

        raise UsageError("--baud must be positive")
    result = host.run(
        args.query, args.input, args.output, port=args.port, baud=args.baud,
        partitions=args.partitions, tick_tuples=args.tick_tuples, timer_bits=args.timer_bits,
        timeout=args.timeout, frame_tuples=args.frame_tuples,
        progress=lambda text: print(f"nfacep run: {text}", file=sys.stderr))
    host.print_result(result, args.output, args.port, args.baud, args.partitions)
    return 0
