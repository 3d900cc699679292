"""Bitstreams for real boards: ``nfacep build`` and ``nfacep run`` (docs/commands.md).

:mod:`nfacep.boards.registry` names the boards (amaranth-boards platforms);
:mod:`nfacep.boards.top` is the synthesis harness around the engine (``--link harness``) and
:mod:`nfacep.boards.link` the UART link with its board top (``--link uart``);
:mod:`nfacep.boards.bitstream` runs the open toolchain and writes the report;
:mod:`nfacep.boards.cli` holds the subcommands. :func:`run_flow` takes any Amaranth top level
through the toolchain for a board and returns a :class:`FlowResult` (the benchmarks build bare
matchers with it); :func:`build` is ``nfacep build`` on top of it.
"""

from .bitstream import (
    BuildError,
    DoesNotFitError,
    FlowResult,
    Usage,
    build,
    render_report,
    run_flow,
)
from .registry import BOARDS, Board, UnknownBoardError, get_board
from .toolchain import ToolchainMissingError

__all__ = [
    "BOARDS",
    "Board",
    "BuildError",
    "DoesNotFitError",
    "FlowResult",
    "ToolchainMissingError",
    "UnknownBoardError",
    "Usage",
    "build",
    "get_board",
    "render_report",
    "run_flow",
]
