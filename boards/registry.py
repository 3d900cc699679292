"""The boards ``nfacep build`` knows: an amaranth-boards platform and its device's capacity."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nfacep.errors import NfacepError

if TYPE_CHECKING:
    from nfacep.hdl.sdram.timing import SDRAMSetup

__all__ = ["BOARDS", "Board", "UnknownBoardError", "get_board"]


class UnknownBoardError(NfacepError):
    """A ``--board`` name that is not in :data:`BOARDS`."""


@dataclass(frozen=True)
class Board:
    """One board: where its platform lives and what its FPGA holds.

    ``luts``, ``ffs`` and ``brams`` are the device's totals as nextpnr counts them (ECP5:
    ``TRELLIS_COMB``, ``TRELLIS_FF``, ``DP16KD``; iCE40: ``ICESTORM_LC`` for both LUTs and
    flip-flops, one of each per logic cell, and ``ICESTORM_RAM``); they let a design that cannot
    fit be rejected before place-and-route.

    ``sdram_chip`` names the board's SDRAM chip for ``--store sdram`` in
    :mod:`nfacep.hdl.sdram.timing` (``None`` without one); :attr:`sdram` is it (its geometry
    and timing, at the simulations' clock: a board top builds the controller for its own),
    looked up when asked for, so that reading the registry (``nfacep check``) loads no
    gateware package.
    """

    name: str
    description: str
    module: str  #: amaranth_boards module
    platform: str  #: platform class in it
    family: str  #: "ecp5" or "ice40"
    luts: int
    ffs: int
    brams: int
    sdram_chip: str | None = None

    @property
    def sdram(self) -> SDRAMSetup | None:
        if self.sdram_chip is None:
            return None
        from nfacep.hdl.sdram import timing

        return getattr(timing, self.sdram_chip)

    def platform_class(self):
        return getattr(importlib.import_module(f"amaranth_boards.{self.module}"), self.platform)

    @property
    def tools(self) -> tuple[str, ...]:
        """The toolchain programs a build runs, by their Amaranth names."""
        if self.family == "ecp5":
            return ("yosys", "nextpnr-ecp5", "ecppack")
        return ("yosys", "nextpnr-ice40", "icepack")

    @property
    def bitstream_suffix(self) -> str:
        return ".bit" if self.family == "ecp5" else ".bin"


BOARDS: dict[str, Board] = {
    b.name: b
    for b in [
        Board(
            "ulx3s-85f",
            "Radiona ULX3S, Lattice ECP5 LFE5U-85F",
            "ulx3s",
            "ULX3S_85F_Platform",
            "ecp5",
            luts=83640,
            ffs=83640,
            brams=208,
            sdram_chip="ULX3S_SDRAM",
        ),
        Board(
            "ulx3s-45f",
            "Radiona ULX3S, Lattice ECP5 LFE5U-45F",
            "ulx3s",
            "ULX3S_45F_Platform",
            "ecp5",
            luts=43848,
            ffs=43848,
            brams=108,
            sdram_chip="ULX3S_SDRAM",
        ),
        Board(
            "ulx3s-25f",
            "Radiona ULX3S, Lattice ECP5 LFE5U-25F",
            "ulx3s",
            "ULX3S_25F_Platform",
            "ecp5",
            luts=24288,
            ffs=24288,
            brams=56,
            sdram_chip="ULX3S_SDRAM",
        ),
        Board(
            "colorlight-5a75b",
            "Colorlight 5A-75B v7.0, Lattice ECP5 LFE5U-25F",
            "colorlight_5a75b_r7_0",
            "Colorlight_5A75B_R70Platform",
            "ecp5",
            luts=24288,
            ffs=24288,
            brams=56,
            sdram_chip="ENGINE_SDRAM",
        ),
        Board(
            "icebreaker",
            "1BitSquared iCEBreaker, Lattice iCE40 UP5K",
            "icebreaker",
            "ICEBreakerPlatform",
            "ice40",
            luts=5280,
            ffs=5280,
            brams=30,
        ),
        Board(
            "icestick",
            "Lattice iCEstick, iCE40 HX1K (small queries only)",
            "icestick",
            "ICEStickPlatform",
            "ice40",
            luts=1280,
            ffs=1280,
            brams=16,
        ),
    ]
}


def known_boards() -> str:
    width = max(len(n) for n in BOARDS)
    return "\n".join(f"  {b.name:<{width}}  {b.description}" for b in BOARDS.values())


def get_board(name: str) -> Board:
    """The board called ``name``; an :class:`UnknownBoardError` listing the known ones if none."""
    try:
        return BOARDS[name.lower()]
    except KeyError:
        raise UnknownBoardError(
            f"unknown board '{name}'; the known boards are:\n{known_boards()}"
        ) from None
