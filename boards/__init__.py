"""Bitstreams for real boards: ``nfacep build`` (DESIGN.md §5).

:mod:`nfacep.boards.registry` names the boards (amaranth-boards platforms),
:mod:`nfacep.boards.top` is the board top around the engine, :mod:`nfacep.boards.bitstream` runs
the open toolchain and writes the report, :mod:`nfacep.boards.cli` is the subcommand.
:func:`run_flow` takes any Amaranth top level through the toolchain for a board and returns a
:class:`FlowResult` (the benchmarks build bare matchers with it); :func:`build` is ``nfacep build``
on top of it. """

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

__all__ = ["BOARDS", "Board", "BuildError", "DoesNotFitError", "FlowResult",
           "ToolchainMissingError", "UnknownBoardError", "Usage", "build", "get_board",
           "render_report", "run_flow"]
