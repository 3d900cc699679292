"""Bitstreams for real boards: ``nfacep build`` (DESIGN.md §5).

:mod:`boards.registry` names the boards (amaranth-boards platforms), :mod:`boards.top` is the
board top around the engine, :mod:`boards.bitstream` runs the open toolchain and writes the
report, :mod:`boards.cli` is the subcommand.
"""

from .bitstream import BuildError, DoesNotFitError, build, render_report
from .registry import BOARDS, Board, UnknownBoardError, get_board
from .toolchain import ToolchainMissingError

__all__ = ["BOARDS", "Board", "BuildError", "DoesNotFitError", "ToolchainMissingError",
           "UnknownBoardError", "build", "get_board", "render_report"]
