"""The Gigabit Ethernet/UDP link (``--link udp``, ``boards/UDP.md``): tuples in and match
records out in UDP packets.

:mod:`~nfacep.links.udp.protocol` is the payload format and the Ethernet/IPv4/UDP framing in
Python (pure software: the gateware, the tests, the host and the software board import it),
:mod:`~nfacep.links.udp.host` the host (``nfacep run --udp``; its session with the board in
:mod:`~nfacep.links.udp.session`, its streaming in :mod:`~nfacep.links.udp.stream`),
:mod:`~nfacep.links.udp.model` the software board, :mod:`~nfacep.links.udp.top` the board top
and its checks. The link's gateware is in :mod:`nfacep.hdl.eth`, the RGMII pads in
:mod:`nfacep.boards.rgmii`.
"""

from __future__ import annotations

from nfacep.errors import UsageError

from .. import Link, folder_parts

__all__ = ["UDP", "UdpLink"]


class UdpLink(Link):
    """``--link udp``: the board top on the Colorlight 5A-75B's RGMII port, and ``nfacep run
    --udp``."""

    loads_images = True
    name = "udp"
    drives_sdram = True
    help = "takes tuples over Gigabit Ethernet (boards/UDP.md; Colorlight 5A-75B)"
    run_flag = "--udp"
    run_choice = "--udp HOST[:PORT] (--link udp)"
    parts = folder_parts(__name__, host="UdpBoard", model="UdpBoardModel")

    def add_build_arguments(self, parser) -> None:
        from .protocol import DEFAULT_ENDPOINT

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
        parser.add_argument(
            "--engine-mhz",
            type=float,
            metavar="F",
            help="with --link udp: the engine's clock, in its own clock domain beside the "
            "link's 125 MHz (default: chosen for the line's most tuples per second, with a "
            "margin; boards/UDP.md)",
        )

    def build_options(self, args) -> dict:
        """The board's addresses from ``--mac``, ``--ip`` and ``--port`` (a UsageError if
        bad)."""
        from .protocol import Endpoint

        mhz = getattr(args, "engine_mhz", None)
        if mhz is not None and not mhz > 0:
            raise UsageError(f"--engine-mhz {mhz:g}: expected a positive frequency")
        try:
            board = Endpoint.parse(args.mac, args.ip, args.port).check_station()
            return {"udp": board, "engine_mhz": mhz}
        except (ValueError, TypeError) as exc:
            raise UsageError(f"--mac/--ip/--port: {exc}") from None

    def check_board(self, platform, board_mhz, target_mhz, **options):
        """A UsageError when the board has no RGMII port the link supports, or for a
        ``target_mhz`` (the engine runs at the line's clock)."""
        top = self.part("top")
        if target_mhz is not None:
            raise UsageError(
                "--target-mhz does not apply to --link udp: the link runs at the line's 125 MHz "
                "and the engine in its own clock domain (--engine-mhz)"
            )
        try:
            top.check_board(platform)
        except top.NoEthernetError as exc:
            raise UsageError(str(exc)) from None

    def top(self, engine, board_mhz, *, udp=None, engine_mhz=None, **others):
        """The board top at the board's addresses ``udp`` (an
        :class:`~nfacep.links.udp.protocol.Endpoint`; default ``DEFAULT_ENDPOINT``), the
        engine's clock at ``engine_mhz`` (default: chosen for the line)."""
        protocol = self.part("protocol")
        return self.part("top").make_top(
            engine, udp or protocol.DEFAULT_ENDPOINT, engine_mhz=engine_mhz
        )

    def add_run_arguments(self, parser) -> None:
        parser.add_argument(
            "--udp",
            metavar="HOST[:PORT]",
            help="IPv4 address (or name) and UDP port of a --link udp board (port 5000 if omitted)",
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
            "(default %(default)s, at most 100)",
        )
        parser.add_argument(
            "--images",
            metavar="DIR",
            help="over UDP, where `nfacep load` kept the query files it loaded: a "
            "programmable board switched to one of them while the run streams has the "
            "matches from the switch on named by that file's queries (default "
            "$XDG_STATE_HOME/nfacep/images, or ~/.local/state/nfacep/images)",
        )

    def selected(self, args) -> bool:
        return args.udp is not None

    def check_run_arguments(self, args) -> None:
        if getattr(args, "frame_tuples", None) is not None:
            raise UsageError("--frame-tuples is for --port; over UDP use --tuples-per-packet")

    def host_options(self, args, **common):
        from .host import UdpOptions

        return UdpOptions(
            address=args.udp,
            tuples_per_packet=args.tuples_per_packet,
            retries=args.retries,
            rate=_rate(args.rate),
            images=args.images,
            **common,
        )


def _rate(text: str | None) -> float | None:
    """``--rate``: tuples per second, or ``max`` (infinity); None when not given."""
    import math

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
    from .host import MAX_RATE, MIN_RATE

    if not MIN_RATE <= rate <= MAX_RATE:
        raise UsageError(
            f"--rate {text!r}: expected {MIN_RATE:g} to {MAX_RATE:g} tuples per second, or max"
        )
    return rate


#: The UDP link's entry in the registry.
UDP = UdpLink()
