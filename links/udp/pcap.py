"""Captures of the UDP link: every Ethernet frame both ways in a pcap file Wireshark and
``tshark`` open (``nfacep sim --link udp --pcap F``, ``nfacep serve --pcap F``).

The file is the classic pcap format with nanosecond timestamps (magic ``0xa1b23c4d``) and link
type 1 (``LINKTYPE_ETHERNET``): each record is one frame from the destination MAC address to
the end of the payload (padded to 60 bytes as on the wire), without preamble and FCS, as a
network card's capture shows it. ``links/udp/nfacep.lua`` dissects the payload format.

:class:`PcapWriter` writes one; :class:`SocketCapture` writes the frames a software board
on a UDP socket (``nfacep serve``) would exchange on the wire: it sees only UDP payloads, so it
puts around each the Ethernet, IPv4 and UDP headers the gateware and the host's stack would
(IPv4 header checksums; a UDP checksum on the host's datagrams as an operating system computes
it, none on the board's, as the gateware sends none); :func:`read_pcap` reads a file back.
"""

from __future__ import annotations

import os
import struct
import time
from typing import BinaryIO

from .protocol import DEFAULT_ENDPOINT, Endpoint, udp_frame

__all__ = ["HOST_MAC", "LINKTYPE_ETHERNET", "PcapWriter", "SocketCapture", "read_pcap"]

#: The pcap link type of Ethernet frames without FCS.
LINKTYPE_ETHERNET = 1
#: The classic pcap magic number for nanosecond timestamps.
_MAGIC_NS = 0xA1B23C4D
_SNAPLEN = 65535


class PcapWriter:
    """A pcap file of Ethernet frames at ``path``: :meth:`write` appends a frame with the time
    it started, in nanoseconds since the epoch (or since the simulation's start); use as a
    context manager, or :meth:`close`."""

    def __init__(self, path: str | os.PathLike):
        self._file: BinaryIO = open(path, "wb")  # noqa: SIM115 (closed by close())
        self._file.write(
            struct.pack("<IHHiIII", _MAGIC_NS, 2, 4, 0, 0, _SNAPLEN, LINKTYPE_ETHERNET)
        )
        self.frames = 0

    def write(self, frame: bytes, ns: int) -> None:
        """Append ``frame`` (destination MAC to payload, no FCS) seen at ``ns``."""
        seconds, rest = divmod(int(ns), 1_000_000_000)
        kept = frame[:_SNAPLEN]
        self._file.write(struct.pack("<IIII", seconds, rest, len(kept), len(frame)) + kept)
        self.frames += 1

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> PcapWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


#: The MAC address a :class:`SocketCapture` gives the host (a UDP socket does not see it).
HOST_MAC = bytes.fromhex("020000000001")


class SocketCapture:
    """The frames between a board at ``board`` (its MAC address and the IPv4 address and port
    its socket is bound to) and the hosts that send to it, written to ``path`` as they would be
    on the wire; the times are ``clock``'s (nanoseconds since the epoch)."""

    def __init__(self, path: str | os.PathLike, board: Endpoint, *, clock=time.time_ns):
        self._writer = PcapWriter(path)
        self.board, self._clock = board, clock

    @classmethod
    def at(cls, path: str | os.PathLike, address: tuple[str, int], **kwargs) -> SocketCapture:
        """For a board bound to ``address`` (IPv4 address, port), with the default MAC."""
        return cls(path, Endpoint.parse(DEFAULT_ENDPOINT.mac.hex(":"), *address), **kwargs)

    def _host(self, address: tuple[str, int]) -> Endpoint:
        return Endpoint.parse(HOST_MAC.hex(":"), *address)

    def received(self, payload: bytes, sender: tuple[str, int]) -> None:
        """A datagram from ``sender`` to the board."""
        frame = udp_frame(self._host(sender), self.board, payload, udp_checksum=True)
        self._writer.write(frame, self._clock())

    def sent(self, payload: bytes, address: tuple[str, int]) -> None:
        """A datagram from the board to ``address``."""
        self._writer.write(udp_frame(self.board, self._host(address), payload), self._clock())

    @property
    def frames(self) -> int:
        return self._writer.frames

    def close(self) -> None:
        self._writer.close()


def read_pcap(path: str | os.PathLike) -> list[tuple[int, bytes]]:
    """The frames of a file :class:`PcapWriter` wrote: (nanoseconds, frame) pairs; ValueError
    when it is not such a file."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 24 or struct.unpack("<I", raw[:4])[0] != _MAGIC_NS:
        raise ValueError(f"{path}: not a nanosecond pcap file")
    if struct.unpack("<I", raw[20:24])[0] != LINKTYPE_ETHERNET:
        raise ValueError(f"{path}: not a capture of Ethernet frames")
    out, at = [], 24
    while at < len(raw):
        seconds, ns, kept, _ = struct.unpack("<IIII", raw[at : at + 16])
        out.append((seconds * 1_000_000_000 + ns, raw[at + 16 : at + 16 + kept]))
        at += 16 + kept
    return out
