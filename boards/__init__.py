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

from nfacep.lazy import lazy_attributes

#: Each public name and the module that defines it, imported when the name is first used
#: (PEP 562): the CLI imports this package for its subcommands without loading the flow.
_WHERE = {
    "BOARDS": "registry",
    "Board": "registry",
    "BuildError": "flow",
    "DoesNotFitError": "flow",
    "FlowResult": "flow",
    "ToolchainMissingError": "toolchain",
    "UnknownBoardError": "registry",
    "Usage": "resources",
    "build": "bitstream",
    "get_board": "registry",
    "render_report": "report",
    "run_flow": "flow",
}
__all__ = sorted(_WHERE)


__getattr__, __dir__ = lazy_attributes(__name__, _WHERE)
