"""Ethernet frames between a host side and a board, both ways: ``nfacep serve --tap`` and
``nfacep serve --rtl``.

Both sides are *ports*: objects with ``receive(timeout)`` (the next frame, destination MAC
address to payload without FCS, or None when none came within ``timeout`` seconds; EOFError
when the side has ended), ``send(frame)`` and ``close()``. :func:`bridge` moves frames from the
host side's port to the board's and back in two threads until told to stop. The host sides
are a TAP device (:class:`~.tap.TapPort`: the kernel's own stack is the host) and a UDP socket
(:class:`SocketPort`: each datagram becomes the frame the wire would carry); the boards are the
Verilated board top (:class:`nfacep.sim.rtl_board.RtlBoard`) and the software board at the
frame level (:class:`ModelPort` around :class:`~.model.FrameBoard`). So each pairing is one
bridge: a TAP or a socket, to the gateware or to the model.
"""

from __future__ import annotations

import queue
import socket
import threading
import time
from typing import Protocol

from . import protocol as udp

__all__ = ["ModelPort", "Port", "SocketPort", "bridge"]

#: How long each side waits for a frame before it looks at ``stop`` again (seconds).
POLL = 0.05


class Port(Protocol):
    """One side of a bridge: a source and a sink of Ethernet frames (no FCS)."""

    def receive(self, timeout: float) -> bytes | None: ...

    def send(self, frame: bytes) -> None: ...

    def close(self) -> None: ...


def bridge(host: Port, board: Port, stop: threading.Event, *, capture=None) -> threading.Thread:
    """Move frames from ``host`` to ``board`` and from ``board`` to ``host`` until ``stop`` is set
    or a side ends (EOFError or OSError: ``stop`` is set then), in two daemon threads; the
    returned one ends last, after it closed both ports and ``capture`` (a
    :class:`~.pcap.PcapWriter` that gets every frame both ways, in the order they passed)."""
    lock = threading.Lock()

    def seen(frame: bytes) -> None:
        if capture is not None:
            with lock:
                capture.write(frame, time.time_ns())

    def carry(source: Port, sink: Port) -> None:
        try:
            while not stop.is_set():
                frame = source.receive(POLL)
                if frame is not None:
                    seen(frame)
                    sink.send(frame)
        except (EOFError, OSError):
            stop.set()

    def inbound() -> None:
        carry(host, board)

    def outbound() -> None:
        try:
            carry(board, host)
        finally:
            reader.join(timeout=2)
            host.close()
            board.close()
            if capture is not None:
                capture.close()

    reader = threading.Thread(target=inbound, daemon=True, name="nfacep-bridge-in")
    reader.start()
    writer = threading.Thread(target=outbound, daemon=True, name="nfacep-bridge-out")
    writer.start()
    return writer


class SocketPort:
    """A UDP socket bound to ``host``:``port`` (0: any free port; OSError when it cannot be) as
    a host side for the board at ``board``: each datagram becomes the frame the wire would
    carry (from :data:`~.pcap.HOST_MAC`, the sender's IPv4 address and port, a UDP checksum as
    an operating system sends one), and each UDP frame the board sends goes back as a datagram
    to the address and port it names (other frames, ARP replies, have no datagram)."""

    def __init__(self, host: str, port: int, board: udp.Endpoint):
        self.board = board
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self.sock.bind((host, port))
        except OSError:
            self.sock.close()
            raise

    @property
    def address(self) -> tuple[str, int]:
        return self.sock.getsockname()

    def receive(self, timeout: float) -> bytes | None:
        from .pcap import HOST_MAC

        self.sock.settimeout(timeout)
        try:
            data, (ip, sport) = self.sock.recvfrom(65536)
        except TimeoutError:
            return None
        sender = udp.Endpoint.parse(HOST_MAC.hex(":"), ip, sport)
        return udp.udp_frame(sender, self.board, data, udp_checksum=True)

    def send(self, frame: bytes) -> None:
        try:
            parsed = udp.parse_frame(frame)
        except ValueError:  # (not a frame a datagram can come from)
            return
        if parsed["kind"] == "udp":
            dst = parsed["dst"]
            self.sock.sendto(parsed["payload"], (".".join(map(str, dst.ip)), dst.port))

    def close(self) -> None:
        self.sock.close()


class ModelPort:
    """The software board at the frame level (:class:`~.model.FrameBoard`) as a port: the
    frames it answers a frame with wait in a queue for :meth:`receive`."""

    def __init__(self, board):
        self.board = board
        self._out: queue.SimpleQueue[bytes] = queue.SimpleQueue()

    def send(self, frame: bytes) -> None:
        for out in self.board.feed(frame):
            self._out.put(out)

    def receive(self, timeout: float) -> bytes | None:
        try:
            return self._out.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self) -> None:
        pass
