"""``nfacep build``, ``nfacep run`` and ``nfacep serve``: bitstreams for boards, tuples through
a board, and a board to try without one (registered as entry points of ``nfacep.commands``)."""

from __future__ import annotations

import os
import re
import sys

from nfacep import links, params, settings
from nfacep.cli import Command, add_io_arguments, load_query
from nfacep.errors import UsageError
from nfacep.output import probe_folder_to_make

from .registry import BOARDS, get_board, known_boards
from .toolchain import ROUTERS

__all__ = ["Build", "CheckBoards", "Load", "Run", "Serve"]


def _timeout_argument(parser) -> None:
    """``--timeout`` of the commands that talk to a board."""
    parser.add_argument(
        "--timeout",
        type=float,
        default=5.0,
        metavar="S",
        help="give up when the board does not answer for S seconds (default %(default)s)",
    )


def _images_argument(parser) -> None:
    """``--images`` of ``nfacep load`` (``nfacep run --udp`` has its own, the same)."""
    parser.add_argument(
        "--images",
        metavar="DIR",
        help="where the host keeps the text of each query file it loads, by its image's "
        "fingerprint, for `nfacep run --udp` to name the matches after a switch (default "
        "$XDG_STATE_HOME/nfacep/images, or ~/.local/state/nfacep/images)",
    )


def _progress(command: str):
    return lambda text: print(f"nfacep {command}: {text}", file=sys.stderr)


def _add_link_arguments(parser) -> None:
    """``--link`` and each link's options: the board top of ``build`` (and of ``check
    --board``); the choices are :mod:`nfacep.links`' registry."""
    choices = [links.get(name) for name in links.names()]
    parser.add_argument(
        "--link",
        choices=[link.name for link in choices],
        default=links.DEFAULT,
        help="board top: "
        + "; ".join(f"'{link.name}' {link.help}" for link in choices)
        + " (default %(default)s)",
    )
    for link in choices:
        link.add_build_arguments(parser)


def _link_options(args) -> dict:
    """The chosen link's options from the command line (a UsageError if bad)."""
    return links.get(args.link).build_options(args)


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
            values=values,
            **_link_options(args),
        )

    def render(self, estimate: dict) -> str:
        from .resources import render_estimate

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
        "(boards/LINK.md). The engine is every command's default (the block-RAM table "
        "sized for the partition key, docs/commands.md), halved without --partitions "
        "until it fits the board (the iCEstick keeps the swap pipeline); the report's "
        "parameters say which, and the board reports them to `nfacep run`."
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
        parser.add_argument(
            "--seed",
            type=int,
            metavar="N",
            help="nextpnr's placement seed (its own default otherwise): another placement "
            "of the same design, to see how much its Fmax moves",
        )
        parser.add_argument(
            "--router", choices=ROUTERS, help="nextpnr's router (default router1, nextpnr's)"
        )
        _add_link_arguments(parser)
        params.add_arguments(parser)
        settings.add_argument(parser, switches=False)

    def run(self, args) -> int:
        from .bitstream import build
        from .defaults import board_engine
        from .flow import BuildError
        from .report import render_report

        # the options' ranges, before anything is read
        params.from_args(args, programmable=True)
        board = get_board(args.board)
        nfa = load_query(args.query)
        values = settings.from_args(nfa.program.parameters, args, switches=False, command="build")
        engine = board_engine(nfa, board, params.given(args))
        stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(args.query))[0]) or "engine"
        out_dir = args.output or os.path.join("build", f"{stem}-{board.name}")
        probe_folder_to_make(out_dir, f"-o {out_dir}" if args.output else "the output folder")
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
                values=values,
                seed=args.seed,
                router=args.router,
                **_link_options(args),
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
        "--link uart` (give --port) or `--link udp` (give --udp), take the engine "
        "parameters the board reports (an engine option given must equal them) and check "
        "that it is this query's engine, stream the tuples (over the "
        "serial port: framed, CRC-checked, flow controlled, lost frames resent; over "
        "UDP: in TUPLES packets under the board's buffer credit, a run with a lost "
        "packet started again), switch the runtime parameters (--param) at the tuples "
        "given, and write the matches and summary exactly as `nfacep match` does. "
        "The formats are in boards/LINK.md and boards/UDP.md."
    )
    order = 90

    def add_arguments(self, parser) -> None:
        add_io_arguments(parser)
        _timeout_argument(parser)
        for link in links.runnable():
            link.add_run_arguments(parser)
        params.add_arguments(parser, defaults="the board's, which its STATUS reports")
        settings.add_argument(parser, switches=True)

    def run(self, args) -> int:
        from nfacep.backend import run_files
        from nfacep.result import report

        choices = links.runnable()
        chosen = [link for link in choices if link.selected(args)]
        if len(chosen) != 1:
            raise UsageError(
                "give exactly one of " + " and ".join(link.run_choice for link in choices)
            )
        link = chosen[0]
        link.check_run_arguments(args)
        # the options' ranges, before anything is read (a programmable board: over UDP)
        programmable = link.name == "udp"
        params.from_args(args, programmable=programmable)
        board = link.backend(args, _progress("run"))
        nfa = load_query(args.query)
        engine = params.from_args(args, nfa=nfa, programmable=programmable)
        values = settings.from_args(nfa.program.parameters, args, switches=True, command="run")
        result = run_files(
            board, nfa, args.input, args.output, engine, query_file=args.query, values=values
        )
        report(result, args.output)
        return 0


class Serve(Command):
    name = "serve"
    help = "serve a software UDP board on a UDP socket, to try `run --udp` without a board"
    description = (
        "Answer the UDP link's payload format (boards/UDP.md) on a UDP socket at --udp "
        "ADDR:PORT as a board built with `nfacep build --link udp` and these engine "
        "parameters would: the software board model (the reference matcher as the engine; "
        "sessions, counters and replies as the gateware's). With --tap IFACE instead, the "
        "board is on a Linux TAP device at --ip/--port/--mac, answering ARP and the payload "
        "format as the gateware does, and ping, so the kernel's stack is its host. With --rtl, "
        "the board on either is the board top's own Verilog under Verilator. The first "
        "line on stdout says where it listens; it serves until SIGINT or SIGTERM (exit 0 then)."
    )
    order = 91

    def add_arguments(self, parser) -> None:
        from nfacep.links.udp import UDP

        parser.add_argument("query", help="the query file the board's engine is built from")
        where = parser.add_mutually_exclusive_group(required=True)
        where.add_argument(
            "--udp",
            metavar="ADDR[:PORT]",
            help="IPv4 address (or name) and UDP port to listen on (port 5000 if omitted, "
            "0: any free port)",
        )
        where.add_argument(
            "--tap",
            metavar="IFACE",
            help="be the board on the Linux TAP device IFACE (created if missing; needs "
            "CAP_NET_ADMIN), at the addresses --ip, --port and --mac",
        )
        UDP.add_build_arguments(parser)
        parser.add_argument(
            "--rtl",
            action="store_true",
            help="serve the board top's own Verilog under Verilator (the design of "
            "`sim --link udp`) at the addresses --ip, --port and --mac, instead of the "
            "software model, behind the --udp socket or on the --tap device",
        )
        parser.add_argument(
            "--build-dir",
            metavar="D",
            help="with --rtl: folder caching the Verilated board (default $NFACEP_SIM_CACHE or "
            "~/.cache/nfacep/sim)",
        )
        parser.add_argument(
            "--pcap",
            metavar="F",
            help="write every frame both ways to the pcap file F (with --udp, the Ethernet "
            "frames its datagrams would be on the wire), for Wireshark with "
            "links/udp/nfacep.lua (boards/UDP.md)",
        )
        params.add_arguments(parser)
        settings.add_argument(parser, switches=False)

    def run(self, args) -> int:
        import threading

        from nfacep.cli import Terminated
        from nfacep.links.udp import UDP
        from nfacep.links.udp.model import UdpBoardModel

        # the options' ranges, before anything is read (--engine programmable: the software
        # board runs the images LOAD brings, from its stream declaration and key)
        params.from_args(args, programmable=True)
        if args.tap is not None:
            from nfacep.links.udp.tap import check_name

            try:
                check_name(args.tap)
            except ValueError as exc:
                raise UsageError(f"--tap: {exc}") from None
        nfa = load_query(args.query)
        engine = params.from_args(args, nfa=nfa, programmable=True)
        values = settings.from_args(nfa.program.parameters, args, switches=False, command="serve")
        model = UdpBoardModel(nfa, engine, values=values if nfa.program.parameters else None)
        if args.pcap is not None:
            from nfacep.output import check_outputs

            check_outputs([args.pcap], [args.query], what="--pcap")
        stop = threading.Event()
        if args.rtl:
            thread, where = _serve_rtl(args, nfa, engine, values, stop)
            what = f"the Verilated board top (at {UDP.build_options(args)['udp']})"
        else:
            thread, where = (_serve_udp if args.tap is None else _serve_tap)(args, model, stop)
            what = "a software board"
        print(
            f"nfacep serve: listening on {where}: {what} for {args.query}, engine {model.id:#010x}",
            flush=True,
        )
        try:
            while thread.is_alive():
                stop.wait(0.2)
        except (KeyboardInterrupt, Terminated):
            pass
        finally:
            stop.set()
            thread.join(timeout=2)
        if args.rtl:
            print("nfacep serve: stopped", flush=True)
            return 0
        counters = model.counters
        print(
            f"nfacep serve: stopped; since the last RESET {model.taken()} tuples taken, "
            f"{counters['records']} records sent, {counters['accepted']} packets accepted, "
            f"{counters['foreign']} foreign" + (f"; capture -> {args.pcap}" if args.pcap else ""),
            flush=True,
        )
        return 0


def _listen_address(text: str) -> tuple[str, int]:
    """``--udp ADDR[:PORT]``'s address and port (``:0``: any free port, the kernel's choice,
    which the first line says)."""
    from nfacep.links.udp.host import parse_address

    any_port = text.endswith(":0")
    host, port = parse_address(text[:-2] if any_port else text)
    return host, 0 if any_port else port


def _serve_udp(args, model, stop):
    """``serve --udp``: the model on a UDP socket; the thread and where it listens."""
    from nfacep.links.udp.model import serve

    host, port = _listen_address(args.udp)
    try:
        # (the board's thread reads without sleeping after a packet: this process's main
        # thread only waits, so the answers come without a wake-up's delay)
        thread, (bound_host, bound_port) = serve(
            model, host, port, stop=stop, pcap=args.pcap, spin=True
        )
    except OSError as exc:
        raise UsageError(f"--udp {args.udp}: cannot listen there: {exc}") from None
    return thread, f"udp {bound_host}:{bound_port}"


def _host_port(args, board):
    """The host side of a frame bridge to a board at ``board``'s addresses: ``--tap``'s device
    or ``--udp``'s socket; and where it listens."""
    if args.tap is not None:
        from nfacep.links.udp.tap import TapPort

        try:
            return TapPort(args.tap), f"tap {args.tap} as {board}"
        except OSError as exc:
            raise UsageError(
                f"--tap {args.tap}: cannot open the TAP device (it needs /dev/net/tun and "
                f"CAP_NET_ADMIN): {exc}"
            ) from None
    from nfacep.links.udp.bridge import SocketPort

    host, port = _listen_address(args.udp)
    try:
        socket_port = SocketPort(host, port, board)
    except OSError as exc:
        raise UsageError(f"--udp {args.udp}: cannot listen there: {exc}") from None
    bound_host, bound_port = socket_port.address
    return socket_port, f"udp {bound_host}:{bound_port}"


def _capture(args):
    from nfacep.links.udp.pcap import PcapWriter

    return None if args.pcap is None else PcapWriter(args.pcap)


def _serve_rtl(args, nfa, engine, values, stop):
    """``serve --rtl``: the Verilated board top bridged to a UDP socket (``--udp``) or a TAP
    device (``--tap``); the thread and where it listens."""
    from nfacep.links.udp import UDP
    from nfacep.links.udp.bridge import bridge
    from nfacep.sim.build import SimulationError
    from nfacep.sim.rtl_board import RtlBoard, os_cache

    board = UDP.build_options(args)["udp"]
    host, where = _host_port(args, board)  # (before the build: a refusal comes at once)
    print(f"nfacep serve: building the Verilated board top at {board} ...", file=sys.stderr)
    try:
        rtl = RtlBoard(
            nfa, engine, values if nfa.program.parameters else None, board, os_cache(args.build_dir)
        )
    except SimulationError as exc:
        host.close()
        raise UsageError(str(exc)) from None
    except BaseException:
        host.close()
        raise
    return bridge(host, rtl, stop, capture=_capture(args)), where


def _serve_tap(args, model, stop):
    """``serve --tap``: the model behind a frame-level board on a TAP device; the thread and
    where it listens."""
    from nfacep.links.udp import UDP
    from nfacep.links.udp.bridge import ModelPort, bridge
    from nfacep.links.udp.model import FrameBoard

    board = UDP.build_options(args)["udp"]
    host, where = _host_port(args, board)
    return bridge(host, ModelPort(FrameBoard(model, board)), stop, capture=_capture(args)), where


class Load(Command):
    name = "load"
    help = "load a query into a programmable board over UDP, while tuples flow"
    description = (
        "Put the query file's configuration image in force on a board built with `nfacep "
        "build --link udp --engine programmable` (or `nfacep serve --engine programmable`): "
        "the board's STATUS says its engine (capacities, stream declaration and key by its "
        "engine id); the image is made for it, or refused before anything is sent, naming "
        "each capacity the file exceeds; it travels in LOAD packets (boards/UDP.md, "
        '"Loading a query"), needs no session of its own, so a run on the same host may be '
        "streaming meanwhile (while a session is alive the board takes loads from its host's "
        "address only), and "
        "is in force from tuple --at on (default: the next tuple the engine takes), every "
        "partition's states cleared at once. Before sending, it keeps the file's text in "
        "--images DIR by the image's fingerprint, so that `nfacep run --udp` streaming "
        "meanwhile names the matches from the switch on with this file's queries. Exit 0 "
        "once the board took it (and, without a later --at, once it is in force)."
    )
    order = 92

    def add_arguments(self, parser) -> None:
        super().add_arguments(parser)
        parser.add_argument(
            "--udp",
            required=True,
            metavar="HOST[:PORT]",
            help="IPv4 address (or name) and UDP port of the board (port 5000 if omitted)",
        )
        parser.add_argument(
            "--port",
            type=int,
            metavar="P",
            help="the board's UDP port (instead of HOST:PORT)",
        )
        parser.add_argument(
            "--at",
            type=int,
            metavar="SEQ",
            help="the tuple (0-based since the board's last RESET, modulo 2^32) the query "
            "is in force from; tuples before it are judged by the query in force (default: "
            "the next tuple the engine takes)",
        )
        _images_argument(parser)
        _timeout_argument(parser)
        params.add_arguments(parser, defaults="the board's, which its STATUS reports")
        settings.add_argument(parser, switches=False)

    def run(self, args) -> int:
        import contextlib
        import socket

        from nfacep import read_query_file
        from nfacep.links.host import check_timeout
        from nfacep.links.udp import images
        from nfacep.links.udp.host import parse_address
        from nfacep.links.udp.load import load_image

        check_timeout(args.timeout)
        if args.at is not None and not 0 <= args.at < 2**32:
            raise UsageError(f"--at {args.at}: a tuple number from 0 to 2^32 - 1")
        if args.engine is None:  # (a board that takes loads has the programmable engine)
            args.engine = "programmable"
        if args.engine != "programmable":
            raise UsageError("--engine: `nfacep load` loads a programmable engine")
        params.from_args(args, programmable=True)  # the options' ranges
        address = (
            args.udp
            if args.port is None
            else f"{args.udp.rpartition(':')[0] or args.udp}:{args.port}"
        )
        host, port = parse_address(address)
        nfa = load_query(args.query)
        values = settings.from_args(nfa.program.parameters, args, switches=False, command="load")
        text = read_query_file(args.query)
        where = images.folder(args.images)
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.connect((host, port))
        except OSError as exc:
            sock.close()
            raise UsageError(f"--udp {address}: {exc}") from None
        with contextlib.closing(sock):
            loaded = load_image(
                sock,
                f"{host}:{port}",
                args.timeout,
                nfa,
                values=values if nfa.program.parameters else None,
                given=params.given(args),
                at=args.at,
                always=True,
                wait=args.at is None,
                before=lambda img: images.record(
                    where, img.fingerprint, text, args.param if nfa.program.parameters else None
                ),
            )
        if loaded is None:
            raise UsageError(
                f"the board at {host}:{port} has a fixed engine: its query is its bitstream "
                "(build it with --engine programmable to load queries)"
            )
        print(
            f"nfacep load: image {loaded.image.fingerprint} of {args.query} "
            + ("in force" if args.at is None else "taken")
            + f" on the board at {host}:{port}, from tuple {loaded.at} "
            f"({loaded.packets} LOAD packets)",
            flush=True,
        )
        return 0
