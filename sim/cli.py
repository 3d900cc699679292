"""The ``nfacep sim`` subcommand (DESIGN.md §5): run the generated gateware under cocotb.

``nfacep.cli`` adds it with :func:`add_sim_parser` and dispatches ``sim`` to :func:`cmd_sim`.
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["add_sim_parser", "cmd_sim"]


def add_sim_parser(sub, hardware_args) -> argparse.ArgumentParser:
    """Add ``sim`` to the subparsers ``sub``; ``hardware_args(parser)`` adds --partitions etc."""
    s = sub.add_parser(
        "sim", help="run the generated gateware under cocotb and write its matches",
        description="Emit the engine's Verilog, simulate it with cocotb on the tuples (with "
                    "seeded random input gaps and output backpressure) and write its matches "
                    "and summary exactly as `nfacep match` does.")
    s.add_argument("query", help="query file (.sql)")
    s.add_argument("--input", required=True, metavar="T",
                   help="tuples: .csv, .parquet, or a folder of Parquet part files")
    s.add_argument("--output", required=True, metavar="M", help="matches (.csv)")
    s.add_argument("--simulator", choices=("icarus", "verilator"), default="icarus",
                   help="HDL simulator (default %(default)s); install both with "
                        "`bash tools/install-simulators.sh`")
    s.add_argument("--waves", metavar="F",
                   help="also write the waveform of the run to F, for GTKWave or Surfer (FST "
                        "with icarus, VCD with verilator)")
    s.add_argument("--seed", type=int, default=0, metavar="S",
                   help="seed of the random input gaps and output stalls (default %(default)s)")
    s.add_argument("--traffic", choices=("random", "full"), default="random",
                   help="random: seeded gaps in valid and stalls in ready; full: valid and "
                        "ready always high, to measure throughput (default %(default)s)")
    s.add_argument("--check", action="store_true",
                   help="also run the reference matcher and compare every record as it "
                        "arrives; exit 1 on the first differences")
    s.add_argument("--build-dir", metavar="D",
                   help="folder caching simulator builds (default $NFACEP_SIM_CACHE or "
                        "~/.cache/nfacep/sim)")
    hardware_args(s)
    return s


def cmd_sim(args) -> int:
    from . import runner

    result = runner.run(
        args.query, args.input, args.output, simulator=args.simulator,
        partitions=args.partitions, tick_tuples=args.tick_tuples, timer_bits=args.timer_bits,
        waves=args.waves, seed=args.seed, traffic=args.traffic, build_dir=args.build_dir,
        check=args.check)
    for warning in result.warnings:
        print(warning, file=sys.stderr)
    counts = ", ".join(f"{n}: {result.count(n)}" for n in result.names)
    rate = "" if result.tuples_per_cycle is None else \
        f", {result.tuples_per_cycle:.3f} tuples/cycle"
    print(f"{result.n} tuples, {len(result.matches)} matches ({counts}), "
          f"{len(result.drop_seqs)} dropped -> {args.output} [{result.simulator}, "
          f"{result.cycles} cycles{rate}]")
    if result.waves:
        print(f"waves -> {result.waves}")
    drops = result.drop_seqs
    if drops:
        shown = ", ".join(str(s) for s in drops[:10]) + (" …" if len(drops) > 10 else "")
        print(f"warning: {len(drops)} tuples dropped (partitioner full, --partitions "
              f"{args.partitions}) at seq {shown}", file=sys.stderr)
    c = result.counters
    if c.get("tuples") is not None and c["tuples"] != result.n % (1 << 32):
        print(f"warning: the engine's tuples counter is {c['tuples']}, not {result.n}",
              file=sys.stderr)
    if c.get("drops") is not None and c["drops"] != len(drops) % (1 << 32):
        print(f"warning: the engine's drops counter is {c['drops']}, but {len(drops)} "
              "records report a drop", file=sys.stderr)
    return 0
