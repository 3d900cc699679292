"""The UART link (``--link uart``, ``boards/LINK.md``): tuples in and match records out in
CRC-checked frames over a board's USB UART, under go-back-N flow control.

:mod:`~nfacep.links.uart.protocol` is the frame format (pure software: the gateware, the host
and the software board import it), :mod:`~nfacep.links.uart.host` the host (``nfacep run
--port``), :mod:`~nfacep.links.uart.model` the software board, :mod:`~nfacep.links.uart.top`
the board top and its checks. The link's gateware is in :mod:`nfacep.hdl.uart`.
"""

from __future__ import annotations

from nfacep.errors import UsageError

from .. import Link, folder_parts

__all__ = ["DEFAULT_BAUD", "UART", "UartLink"]

#: The serial line rate of ``--link uart`` and ``nfacep run`` unless --baud says otherwise.
DEFAULT_BAUD = 115200


class UartLink(Link):
    """``--link uart``: the board top on the board's USB UART, and ``nfacep run --port``."""

    name = "uart"
    drives_sdram = True
    help = "is the usable design for `nfacep run`"
    run_flag = "--port"
    run_choice = "--port (a serial port, --link uart)"
    parts = folder_parts(__name__, host="UartBoard", model="UartBoardModel")

    def add_build_arguments(self, parser) -> None:
        parser.add_argument(
            "--baud",
            type=int,
            default=DEFAULT_BAUD,
            metavar="B",
            help="UART line rate with --link uart (default %(default)s)",
        )

    def build_options(self, args) -> dict:
        return {"baud": args.baud}

    def check_board(self, platform, board_mhz, target_mhz, *, baud=DEFAULT_BAUD, **others):
        """A UsageError when the board has no USB UART or cannot make ``baud``."""
        from nfacep.hdl.uart.rx import BaudError, divisor

        top = self.part("top")
        try:
            top.check_board(platform)
            divisor(board_mhz * 1e6, baud)
        except (top.NoUartError, BaudError) as exc:
            raise UsageError(str(exc)) from None

    def top(self, engine, board_mhz, *, baud=DEFAULT_BAUD, **others):
        return self.part("top").make_top(engine, board_mhz, baud)

    def add_run_arguments(self, parser) -> None:
        parser.add_argument(
            "--port",
            metavar="P",
            help="serial port of a --link uart board (/dev/ttyUSB0, COM3, or a "
            "pyserial URL such as socket://host:port)",
        )
        parser.add_argument(
            "--baud",
            type=int,
            default=DEFAULT_BAUD,
            metavar="B",
            help="line rate the bitstream was built with (default %(default)s)",
        )
        parser.add_argument(
            "--frame-tuples",
            type=int,
            metavar="F",
            help="tuples per UART frame (default 16, fewer if the board's buffer is small)",
        )

    def selected(self, args) -> bool:
        return args.port is not None

    def check_run_arguments(self, args) -> None:
        if getattr(args, "tuples_per_packet", None) is not None:
            raise UsageError(
                "--tuples-per-packet is for --udp; over a serial port use --frame-tuples"
            )
        if getattr(args, "rate", None) is not None:
            raise UsageError(
                "--rate is for --udp; over a serial port the board's flow control paces the tuples"
            )
        if getattr(args, "images", None) is not None:
            raise UsageError(
                "--images is for --udp: only a programmable board over UDP takes `nfacep load`"
            )

    def host_options(self, args, **common):
        from .host import UartOptions

        return UartOptions(port=args.port, baud=args.baud, frame_tuples=args.frame_tuples, **common)


#: The UART link's entry in the registry.
UART = UartLink()
