"""The compiled loops (:mod:`nfacep.reference.compiled`) when numba is installed, loaded on
first use: importing numba takes a while, so a short run never does."""

from __future__ import annotations

import importlib.util
import sys

__all__ = ["LOAD_FROM", "LOOPS_FROM", "loops", "ready"]

#: Array lengths from which a helper of the partitioner's model (first tuple of each key, the
#: last admitted tuple of each key, key codes by table) runs its compiled loop once the loops
#: are loaded: below, numpy's few passes cost less than loading the loop from numba's cache,
#: unless the loop has run in the process already (:func:`ready`; then it costs less: about
#: 3 ms of 13 to match 10^6 tuples cut as ``match`` cuts a CSV file, measured).
LOOPS_FROM = 1 << 18

#: Array lengths from which such a helper loads the compiled loops itself (importing numba
#: and setting it up, about 0.4 s of CPU: numpy's passes cost some 10-30 ms a million).
LOAD_FROM = 1 << 22


def loops(n: int | None = None, name: str | None = None):
    """:mod:`nfacep.reference.compiled`, or None without numba; for a helper's ``n``
    elements, None below :data:`LOOPS_FROM` (unless its loop ``name`` has run: :func:`ready`),
    and below :data:`LOAD_FROM` when the loops are not loaded yet (the helper then does not
    load them)."""
    if n is not None and n < LOOPS_FROM and not (name is not None and ready(name)):
        return None
    if n is not None and n < LOAD_FROM and f"{__package__}.compiled" not in sys.modules:
        return None
    if importlib.util.find_spec("numba") is None:
        return None
    from . import compiled

    return compiled


def ready(name: str) -> bool:
    """Whether the compiled loop ``name`` of :mod:`nfacep.reference.compiled` has run in this
    process, so that running it again loads nothing. (Importing numba costs about 0.17 s of
    CPU, the first loop run in a process about 0.2 s more, setting numba's compiler up; each
    further loop's first run reads it from numba's cache in some milliseconds.)"""
    compiled = sys.modules.get(f"{__package__}.compiled")
    return compiled is not None and bool(getattr(compiled, name).signatures)
