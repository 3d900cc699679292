"""The UDP host's errors that are a setup to fix (exit 2), shared by ``nfacep run --udp``
(:mod:`.host`) and the loader (:mod:`.load`)."""

from __future__ import annotations

from ..host import NoBoardError

__all__ = ["EngineMismatchError", "UdpTimeoutError"]


class UdpTimeoutError(NoBoardError):
    """Nothing answers at the address within ``--timeout``: a setup to fix (exit 2)."""

    exit_code = 2


class EngineMismatchError(NoBoardError):
    """The board answers but runs another engine: load the right bitstream (exit 2)."""

    exit_code = 2
