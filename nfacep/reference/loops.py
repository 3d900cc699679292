"""The compiled loops (:mod:`nfacep.reference.compiled`) when numba is installed, loaded on
first use: importing numba takes a while, so a short run never does."""

from __future__ import annotations

import importlib.util

__all__ = ["LOOPS_FROM", "loops"]

#: Array lengths from which a helper of the partitioner's model (first tuple of each key, the
#: last admitted tuple of each key, key codes by table) runs its compiled loop: below, numpy's
#: few passes cost less than loading the loop.
LOOPS_FROM = 1 << 18


def loops(n: int | None = None):
    """:mod:`nfacep.reference.compiled`, or None without numba, or for ``n`` elements fewer than
    :data:`LOOPS_FROM`."""
    if n is not None and n < LOOPS_FROM:
        return None
    if importlib.util.find_spec("numba") is None:
        return None
    from . import compiled

    return compiled
