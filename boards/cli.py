"""``nfacep build`` and ``nfacep run``: bitstreams for boards, and tuples through a board
(registered as entry points of ``nfacep.commands``)."""

from __future__ import annotations

import math
import os
import re
import sys

from nfacep import params, settings
from nfacep.cli import Command, add_io_arguments, load_query
from nfacep.errors import UsageError

from .registry import BOARDS, get_board, known_boards

__all__ = ["DEFAULT_BAUD", "Build", "CheckBoards", "Run"]

#: The serial line rate of ``--link uart`` and ``nfacep run`` unless --baud says otherwise.
DEFAULT_BAUD = 115200


def _progress(command: str):
    return lambda text: print(f"nfacep {command}: {text}", file=sys.stderr)


def _add_link_arguments(parser) -> None:
    """``--link`` and ``--baud``: the board top of ``build`` (and of ``check --board``)."""
    from .link.eth.payload import DEFAULT_ENDPOINT

    parser.add_argument(
        "--link",
        choices=("harness", "uart", "udp"),
        default="harness",
        help="board top: 'harness' measures the engine alone (on-chip "
        "tuples, LEDs); 'uart' is the usable design for `nfacep run`; "
        "'udp' takes tuples over Gigabit Ethernet (boards/UDP.md; "
        "Colorlight 5A-75B) (default %(default)s)",
    )
    parser.add_argument(
        "--baud",
        type=int,
        default=DEFAULT_BAUD,
        metavar="B",
        help="UART line rate with --link uart (default %(default)s)",
    )
    parser.add_argument(
        "--ip",
        default=".".join(map(str, DEFAULT_ENDPOINT.ip)),
        metavar="A",
        help="the board's IPv4 address with --link udp (default %(default)s)",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_ENDPOINT.port,
        metavar="P",
        help="the board's UDP port with --link udp (default %(default)s)",
    )
    parser.add_argument(
        "--mac",
        default=DEFAULT_ENDPOINT.mac.hex(":"),
        metavar="M",
        help="the board's MAC address with --link udp (default %(default)s)",
    )


def _udp_endpoint(args):
    """The board's addresses from ``--mac``, ``--ip`` and ``--port`` (a UsageError if bad)."""
    from .link.eth.payload import Endpoint

    try:
        return Endpoint.parse(args.mac, args.ip, args.port)
    except (ValueError, TypeError) as exc:
        raise UsageError(f"--mac/--ip/--port: {exc}") from None


class CheckBoards:
    """``nfacep check --board``: the size ``build`` checks before synthesis (registered as an
    entry point of ``nfacep.check_boards``; :class:`nfacep.cli.Check` loads it)."""

    def boards(self) -> str:
        return known_boards()

    def add_arguments(self, parser) -> None:
        _add_link_arguments(parser)

    def estimate(self, nfa, engine, args) -> dict:
        from .bitstream import estimate
        from .defaults import board_engine

        board = get_board(args.board)
        engine = board_engine(nfa, board, params.given(args))  # what build would use
        values = settings.from_args(
            nfa.program.parameters, args, switches=False, command="check --board"
        )
        return estimate(
            nfa,
            board,
            engine,
            link=args.link,
            baud=args.baud,
            udp=_udp_endpoint(args) if args.link == "udp" else None,
            values=values,
        )

    def render(self, estimate: dict) -> str:
        from .bitstream import render_estimate

        return render_estimate(estimate)


class Build(Command):
    name = "build"
    help = "bitstream plus a resource and timing report for a board"
    description = (
        "Synthesise, place and route the engine for a board with the open toolchain "
        "(Yosys, nextpnr). Writes the bitstream, the Verilog and report.json to the "
        "output folder. The board top is chosen with --link: 'harness' (the "
        "default) generates pseudo-random tuples on chip and folds the results "
        "into the LEDs, to measure the engine's area and Fmax; 'uart' takes tuples "
        "and returns matches over the board's USB UART, for `nfacep run` "
        "(boards/LINK.md). Without --store, --partitions and --ways, a board whose "
        "default is the block-RAM table (all but the iCEstick) gets the largest "
        "table that fits it; the report's parameters say which, and `nfacep run` "
        "needs the same options."
    )
    order = 80

    def epilog(self) -> str:
        return f"boards:\n{known_boards()}"

    def add_arguments(self, parser) -> None:
        super().add_arguments(parser)
        parser.add_argument(
            "--board", required=True, metavar="NAME", help=f"one of: {', '.join(BOARDS)}"
        )
        parser.add_argument(
            "-o", "--output", metavar="DIR", help="output folder (default build/<query>-<board>)"
        )
        parser.add_argument(
            "--target-mhz",
            type=float,
            metavar="F",
            help="constrain the clock to F MHz instead of the board's "
            "oscillator, to see how fast the engine can run (the paper's "
            "engine ran at 125)",
        )
        _add_link_arguments(parser)
        params.add_arguments(parser)
        settings.add_argument(parser, switches=False)

    def run(self, args) -> int:
        from .bitstream import BuildError, build, render_report
        from .defaults import board_engine

        params.from_args(args)  # the options' ranges, before anything is read
        board = get_board(args.board)
        nfa = load_query(args.query)
        values = settings.from_args(nfa.program.parameters, args, switches=False, command="build")
        engine = board_engine(nfa, board, params.given(args))
        stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(args.query))[0]) or "engine"
        out_dir = args.output or os.path.join("build", f"{stem}-{board.name}")
        try:
            report = build(
                nfa,
                board,
                out_dir,
                engine,
                target_mhz=args.target_mhz,
                stem=stem,
                query_file=args.query,
                progress=_progress("build"),
                link=args.link,
                baud=args.baud,
                udp=_udp_endpoint(args) if args.link == "udp" else None,
                values=values,
            )
        except BuildError as err:
            if err.report is not None:
                print(render_report(err.report))
                print(f"wrote {os.path.join(out_dir, 'report.json')}")
            raise
        print(render_report(report))
        print(
            f"wrote {os.path.join(out_dir, report['files']['bitstream'])}, "
            f"{os.path.join(out_dir, report['files']['verilog'])} and "
            f"{os.path.join(out_dir, 'report.json')}"
        )
        return 0


class Run(Command):
    name = "run"
    help = "stream tuples to a board over its USB UART or UDP and write its matches"
    description = (
        "Reset the engine on a board loaded with a bitstream from `nfacep build "
        "--link uart` (give --port) or `--link udp` (give --udp), check that it is "
        "this query's engine with these parameters, stream the tuples (over the "
        "serial port: framed, CRC-checked, flow controlled, lost frames resent; over "
        "UDP: in TUPLES packets under the board's buffer credit, a run with a lost "
        "packet started again), switch the runtime parameters (--param) at the tuples "
        "given, and write the matches and summary exactly as `nfacep match` does. "
        "The formats are in boards/LINK.md and boards/UDP.md."
    )
    order = 90

    def add_arguments(self, parser) -> None:
        add_io_arguments(parser)
        parser.add_argument(
            "--port",
            metavar="P",
            help="serial port of a --link uart board (/dev/ttyUSB0, COM3, or a "
            "pyserial URL such as socket://host:port)",
        )
        parser.add_argument(
            "--udp",
            metavar="HOST[:PORT]",
            help="IPv4 address (or name) and UDP port of a --link udp board (port 5000 if omitted)",
        )
        parser.add_argument(
            "--baud",
            type=int,
            default=DEFAULT_BAUD,
            metavar="B",
            help="line rate the bitstream was built with (default %(default)s)",
        )
        parser.add_argument(
            "--timeout",
            type=float,
            default=5.0,
            metavar="S",
            help="give up when the board does not answer for S seconds (default %(default)s)",
        )
        parser.add_argument(
            "--frame-tuples",
            type=int,
            metavar="F",
            help="tuples per UART frame (default 16, fewer if the board's buffer is small)",
        )
        parser.add_argument(
            "--tuples-per-packet",
            type=int,
            metavar="N",
            help="tuples per UDP packet (default as many as fit a 1,500-byte "
            "MTU and the board's buffer)",
        )
        parser.add_argument(
            "--rate",
            metavar="R",
            help="over UDP, send open loop at R tuples per second (e.g. 5e6), "
            "or 'max' for as fast as the host can, instead of waiting for "
            "the board's buffer credit (a STATUS round trip per 4 KiB); a "
            "packet the board refuses is a loss like any other",
        )
        parser.add_argument(
            "--retries",
            type=int,
            default=2,
            metavar="R",
            help="over UDP, start a run with a lost packet again up to R times "
            "(default %(default)s)",
        )
        params.add_arguments(parser)
        settings.add_argument(parser, switches=True)

    def run(self, args) -> int:
        from nfacep.backend import run_files
        from nfacep.result import report

        from .host import UartBoard, UartOptions
        from .udp_host import UdpBoard, UdpOptions

        if (args.port is None) == (args.udp is None):
            raise UsageError(
                "give exactly one of --port (a serial port, --link uart) and "
                "--udp HOST[:PORT] (--link udp)"
            )
        if args.udp is not None:
            if args.frame_tuples is not None:
                raise UsageError("--frame-tuples is for --port; over UDP use --tuples-per-packet")
            engine = params.from_args(args)
            board = UdpBoard(
                UdpOptions(
                    address=args.udp,
                    timeout=args.timeout,
                    tuples_per_packet=args.tuples_per_packet,
                    retries=args.retries,
                    rate=_rate(args.rate),
                ),
                progress=_progress("run"),
            )
        else:
            if args.tuples_per_packet is not None:
                raise UsageError(
                    "--tuples-per-packet is for --udp; over a serial port use --frame-tuples"
                )
            if args.rate is not None:
                raise UsageError(
                    "--rate is for --udp; over a serial port the board's flow "
                    "control paces the tuples"
                )
            engine = params.from_args(args)
            board = UartBoard(
                UartOptions(
                    port=args.port,
                    baud=args.baud,
                    timeout=args.timeout,
                    frame_tuples=args.frame_tuples,
                ),
                progress=_progress("run"),
            )
        nfa = load_query(args.query)
        values = settings.from_args(nfa.program.parameters, args, switches=True, command="run")
        result = run_files(
            board, nfa, args.input, args.output, engine, query_file=args.query, values=values
        )
        report(result, args.output)
        return 0


def _rate(text: str | None) -> float | None:
    """``--rate``: tuples per second, or ``max`` (infinity); None when not given."""
    if text is None:
        return None
    if text.strip().lower() == "max":
        return math.inf
    try:
        rate = float(text)
    except ValueError:
        rate = math.nan
    if not math.isfinite(rate) or rate <= 0:
        raise UsageError(
            f"--rate {text!r}: expected a positive number of tuples per second (e.g. 5e6) or max"
        )
    return rate
