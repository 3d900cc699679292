"""A board on a Linux TAP device: the Ethernet frames the kernel sends to the TAP go to a board
at the frame level (:class:`~.model.FrameBoard`, the software board), and its answers go back
to the kernel, so the kernel's own stack (ARP, ``ping``, UDP sockets) is the host.

:func:`open_tap` creates (or attaches to) a TAP device in the calling process's network
namespace (it needs ``CAP_NET_ADMIN`` and ``/dev/net/tun``); :func:`bridge` moves frames until
told to stop. ``tests/links/udp/test_udp_tap.py`` runs it inside a network namespace of its own.
"""

from __future__ import annotations

import fcntl
import os
import select
import struct
import threading

from .protocol import MIN_FRAME

__all__ = ["bridge", "open_tap"]

#: <linux/if_tun.h>
_TUNSETIFF = 0x400454CA
_IFF_TAP, _IFF_NO_PI = 0x0002, 0x1000


def open_tap(name: str) -> int:
    """A file descriptor of the TAP device ``name`` (created if missing), frames without the
    packet-information prefix; OSError when the machine or the process cannot."""
    fd = os.open("/dev/net/tun", os.O_RDWR)
    try:
        fcntl.ioctl(fd, _TUNSETIFF, struct.pack("16sH", name.encode(), _IFF_TAP | _IFF_NO_PI))
    except OSError:
        os.close(fd)
        raise
    return fd


def bridge(fd: int, board, stop: threading.Event, *, capture=None) -> None:
    """Until ``stop`` is set: each frame read from the TAP ``fd`` to ``board`` (``feed(frame)``
    returns the frames to send back), padded to the minimum frame as on the wire, each answer
    written to ``fd``. ``capture``: a
    :class:`~.pcap.PcapWriter` that gets every frame both ways."""
    import time

    while not stop.is_set():
        ready, _, _ = select.select([fd], [], [], 0.05)
        if not ready:
            continue
        frame = os.read(fd, 65536)
        # (the kernel does not pad what it sends to a TAP; a network card pads on the wire)
        frame += bytes(max(0, MIN_FRAME - 4 - len(frame)))
        if capture is not None:
            capture.write(frame, time.time_ns())
        for out in board.feed(frame):
            os.write(fd, out)
            if capture is not None:
                capture.write(out, time.time_ns())
