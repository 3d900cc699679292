"""``nfacep sim``: run the generated gateware under cocotb (registered as an entry point of
``nfacep.commands``)."""

from __future__ import annotations

import os

from nfacep import params, settings
from nfacep.cli import Command, add_io_arguments, load_query
from nfacep.errors import UsageError
from nfacep.output import check_outputs, summary_path

from .build import SIMULATORS, default_mode

__all__ = ["Sim"]


class Sim(Command):
    name = "sim"
    help = "run the generated gateware under cocotb and write its matches"
    description = (
        "Emit the engine's Verilog, simulate it on the tuples (with seeded random "
        "input gaps and output backpressure) and write its matches and summary "
        "exactly as `nfacep match` does."
    )
    order = 50

    def add_arguments(self, parser) -> None:
        add_io_arguments(parser)
        parser.add_argument(
            "--simulator",
            choices=SIMULATORS,
            default="icarus",
            help="HDL simulator (default %(default)s); install both with "
            "`bash tools/install-simulators.sh`",
        )
        parser.add_argument(
            "--waves",
            metavar="F",
            help="also write the waveform of the run to F, for GTKWave or "
            "Surfer (FST with icarus, VCD with verilator)",
        )
        parser.add_argument(
            "--seed",
            type=int,
            default=0,
            metavar="S",
            help="seed of the random input gaps and output stalls (default %(default)s)",
        )
        parser.add_argument(
            "--traffic",
            choices=("random", "full"),
            default=None,
            help="random: seeded gaps in valid and stalls in ready; full: valid "
            "and ready always high, to measure throughput (default "
            "random; not with --link)",
        )
        parser.add_argument(
            "--link",
            choices=("udp",),
            help="simulate a whole board top instead of the engine alone: "
            "udp, the Gigabit Ethernet board of `nfacep build --link "
            "udp`, its GMII pins driven by cocotbext-eth at 1 Gb/s with "
            "the minimum gap between frames; prints the tuples and "
            "frames per second against the line's limit, the latency "
            "and every frame counter",
        )
        _add_udp_arguments(parser)
        parser.add_argument(
            "--mode",
            choices=("batch", "cycle", "native"),
            default=None,
            help="batch: a Verilog harness streams the tuples, Python wakes "
            "once per batch (fast); cycle: cocotb drives every clock "
            "cycle; native: the batch harness compiled by Verilator "
            "with a C++ main, no Python while it runs (fastest; "
            "--simulator verilator) (default: native with verilator, batch with "
            "icarus; not with --link)",
        )
        parser.add_argument(
            "--check",
            action="store_true",
            help="also run the reference matcher and compare every record as "
            "it arrives; exit 1 on the first differences",
        )
        parser.add_argument(
            "--build-dir",
            metavar="D",
            help="folder caching simulator builds (default $NFACEP_SIM_CACHE or "
            "~/.cache/nfacep/sim)",
        )
        params.add_arguments(parser)
        settings.add_argument(parser, switches=True)

    def run(self, args) -> int:
        from nfacep.backend import run_files
        from nfacep.result import report

        from .options import SimOptions
        from .runner import Simulation

        # the options' ranges, before anything is read
        params.from_args(args, programmable=args.link in (None, "udp"))
        for flag, path in (("--waves", args.waves), ("--pcap", args.pcap)):
            if path is None:  # not an input, nor one of the other outputs
                continue
            check_outputs([path], [args.query, args.input], what=flag)
            if os.path.abspath(path) in {
                os.path.abspath(p) for p in (args.output, summary_path(args.output))
            }:
                raise UsageError(f"{flag} {path} is also the match file or its summary")
        if args.link is not None:
            from .udp import UdpSimOptions, UdpSimulation

            given = [
                f"--{o}"
                for o, v in (("mode", args.mode), ("traffic", args.traffic))
                if v is not None
            ]
            if given:
                raise UsageError(
                    f"{' and '.join(given)} set how tuples reach the engine alone;"
                    f" with --link {args.link} they come in frames at line rate"
                )
            simulation = UdpSimulation(
                UdpSimOptions(
                    simulator=args.simulator,
                    tuples_per_packet=args.tuples_per_packet,
                    waves=args.waves,
                    build_dir=args.build_dir,
                    check=args.check,
                    seed=args.seed,
                    pcap=args.pcap,
                    engine_mhz=args.engine_mhz,
                )
            )
        else:
            for flag, value in (
                ("--tuples-per-packet", args.tuples_per_packet),
                ("--pcap", args.pcap),
                ("--engine-mhz", args.engine_mhz),
            ):
                if value is not None:
                    raise UsageError(f"{flag} needs --link udp")
            simulation = Simulation(
                SimOptions(
                    simulator=args.simulator,
                    seed=args.seed,
                    traffic=args.traffic or "random",
                    waves=args.waves,
                    build_dir=args.build_dir,
                    check=args.check,
                    mode=args.mode or default_mode(args.simulator),
                )
            )
        nfa = load_query(args.query)
        engine = params.from_args(args, programmable=args.link in (None, "udp"), nfa=nfa)
        values = settings.from_args(nfa.program.parameters, args, switches=True, command="sim")
        result = run_files(
            simulation, nfa, args.input, args.output, engine, query_file=args.query, values=values
        )
        report(result, args.output)
        if args.link is not None:
            print(result.frame_counters())
        if result.waves:
            print(f"waves -> {result.waves}")
        return 0


def _add_udp_arguments(parser) -> None:
    """``sim``'s options for ``--link udp``."""
    parser.add_argument(
        "--tuples-per-packet",
        type=int,
        metavar="N",
        help="with --link udp: tuples in each UDP packet (default as many "
        "as fit 1,500 bytes and the board's buffer)",
    )
    parser.add_argument(
        "--engine-mhz",
        type=float,
        metavar="F",
        help="with --link udp: the engine's clock, in its own domain beside the link's "
        "125 MHz (default: the one `nfacep build --link udp` chooses)",
    )
    parser.add_argument(
        "--pcap",
        metavar="F",
        help="with --link udp: write every frame both ways to the pcap file F (for "
        "Wireshark with links/udp/nfacep.lua; boards/UDP.md)",
    )
