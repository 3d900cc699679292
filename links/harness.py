"""``--link harness``: no link at all, the synthesis and timing harness of
:class:`nfacep.boards.top.BoardTop` (tuples generated on chip, records folded into the LEDs),
for measuring the engine's area and Fmax. ``nfacep run`` cannot talk to it.
"""

from __future__ import annotations

from types import MappingProxyType

from . import Link

__all__ = ["HARNESS", "NOTE", "HarnessLink"]

#: The report's note on ``--link harness``.
NOTE = (
    "synthesis/timing harness: pseudo-random tuples generated on chip, records and "
    "counters folded into the LEDs, no I/O (--link uart builds the UART link)"
)


class HarnessLink(Link):
    """The harness board top, as a link without a host."""

    name = "harness"
    help = "measures the engine alone (on-chip tuples, LEDs)"
    parts = MappingProxyType({"top": "nfacep.boards.top"})

    def top(self, engine, board_mhz, **options):
        return {"kind": "harness", "note": NOTE}, self.part("top").BoardTop(engine)


#: The harness's entry in the registry.
HARNESS = HarnessLink()
