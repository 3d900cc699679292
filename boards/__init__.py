"""Bitstreams for real boards: ``nfacep build`` and ``nfacep run`` (docs/commands.md).

:mod:`nfacep.boards.registry` names the boards (amaranth-boards platforms);
:mod:`nfacep.boards.top` is the synthesis harness around the engine (``--link harness``);
:mod:`nfacep.boards.rgmii` the RGMII pads (the links' gateware is :mod:`nfacep.hdl.uart` and
:mod:`nfacep.hdl.eth`; the links themselves, with their board tops, hosts and protocols, are
:mod:`nfacep.links`);
:mod:`nfacep.boards.flow` runs the open toolchain, :mod:`nfacep.boards.resources` counts what a
design uses against what the board has, :mod:`nfacep.boards.report` writes the report, and
:mod:`nfacep.boards.bitstream` puts them together; :mod:`nfacep.boards.cli` holds the
subcommands. :func:`run_flow` takes any Amaranth top level through the toolchain for a board
and returns a :class:`FlowResult` (the benchmarks build bare matchers with it); :func:`build`
is ``nfacep build`` on top of it.
"""

from .bitstream import build
from .flow import BuildError, DoesNotFitError, FlowResult, run_flow
from .registry import BOARDS, Board, UnknownBoardError, get_board
from .report import render_report
from .resources import Usage
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
