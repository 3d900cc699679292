"""A Linux TAP device as the board's host side: the Ethernet frames the kernel sends to the TAP
go to a board (the software board or the Verilated board top, :mod:`.bridge`), and its frames
go back to the kernel, so the kernel's own stack (ARP, ``ping``, UDP sockets) is the host.

:func:`open_tap` creates (or attaches to) a TAP device in the calling process's network
namespace (it needs ``CAP_NET_ADMIN`` and ``/dev/net/tun``); :class:`TapPort` is it as a port
of :func:`.bridge.bridge`. ``tests/links/udp/test_udp_tap.py`` runs it inside a network
namespace of its own.
"""

from __future__ import annotations

import errno
import fcntl
import os
import select
import struct

from .protocol import MIN_FRAME

__all__ = ["TapPort", "check_name", "open_tap"]

#: <linux/if_tun.h>
_TUNSETIFF = 0x400454CA
_IFF_TAP, _IFF_NO_PI = 0x0002, 0x1000


def check_name(name: str) -> str:
    """``name`` when Linux takes it as a network interface's, exactly (1 to 15 bytes, not
    ``.`` or ``..``, no ``/``, ``:``, ``%`` or white space); ValueError saying why not. (The
    kernel's request holds 16 bytes, so a longer name was cut short silently, and ``%d`` asks
    the kernel to choose a number.)"""
    raw = name.encode()
    if not 0 < len(raw) < 16 or name in (".", "..") or any(c in "/:%" or c.isspace() for c in name):
        raise ValueError(
            f"{name!r} is not a network interface's name (1 to 15 bytes, without '/', ':', "
            "'%' or spaces)"
        )
    return name


def open_tap(name: str) -> int:
    """A file descriptor of the TAP device ``name`` (created if missing), frames without the
    packet-information prefix; ValueError for a name Linux would not take as it is
    (:func:`check_name`), OSError when the machine or the process cannot."""
    request = struct.pack("16sH", check_name(name).encode(), _IFF_TAP | _IFF_NO_PI)
    fd = os.open("/dev/net/tun", os.O_RDWR)
    try:
        fcntl.ioctl(fd, _TUNSETIFF, request)
    except OSError:
        os.close(fd)
        raise
    return fd


class TapPort:
    """The TAP device ``name`` (:func:`open_tap`) as a port: :meth:`receive` gives the next
    frame the kernel sent, padded to the minimum frame as a network card pads it on the wire
    (the kernel does not pad what it sends to a TAP); :meth:`send` gives the kernel a frame."""

    def __init__(self, name: str):
        self.name = name
        self.fd = open_tap(name)

    def receive(self, timeout: float) -> bytes | None:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return None
        frame = os.read(self.fd, 65536)
        return frame + bytes(max(0, MIN_FRAME - 4 - len(frame)))

    def send(self, frame: bytes) -> None:
        try:
            os.write(self.fd, frame)
        except OSError as exc:  # (the device is down: dropped, as a card without a link would)
            if exc.errno != errno.EIO:
                raise

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
