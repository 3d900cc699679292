"""The board top's own Verilog as a board on a host's network: ``nfacep serve --rtl``.

:class:`RtlBoard` emits the UDP board top (:class:`~nfacep.hdl.eth.top.UdpTop`, the design of
``nfacep sim --link udp`` and of the bitstream without its RGMII pads and PLL) at the board's
addresses, builds it with Verilator and a small C++ main (``templates/rtl_board.cpp``) once per
distinct Verilog, and runs it as a process: Ethernet frames go to its GMII receive pins and
the frames from its transmit pins come back, both through pipes. It is a port of
:func:`nfacep.links.udp.bridge.bridge`, which connects it to a UDP socket (each datagram the
frame the wire would carry, :class:`~nfacep.links.udp.bridge.SocketPort`) or to a Linux TAP
device (the kernel's own frames, :class:`~nfacep.links.udp.tap.TapPort`), so ``nfacep run
--udp`` (and, on a TAP, the kernel's ARP and ``ping``) talks to the real gateware.
"""

from __future__ import annotations

import os
import select
import struct
import subprocess
import threading
from pathlib import Path

from nfacep.links.udp import protocol as udp

from .build import SimulationError, find_verilator, verilated_executable
from .template import fill

__all__ = ["RtlBoard", "os_cache"]

TOP = "nfacep_udp_top"
EXECUTABLE = "nfacep_rtl_board"
#: Cycles of nothing on the transmit pins after which the main sleeps on its input.
QUIET_CYCLES = 100_000


def _opt() -> str:
    """The C++ optimisation of the Verilated board: ``-O2`` (its speed is the point), or
    ``NFACEP_VERILATOR_OPT``."""
    return os.environ.get("NFACEP_VERILATOR_OPT", "-O2")


def _emit(nfa, params, values, board: udp.Endpoint) -> tuple[str, int]:
    """The UDP board top's Verilog at ``board``'s addresses (a programmable engine boots with
    no image: ``nfacep run --udp`` and ``nfacep load`` load one), and its engine id."""
    from nfacep.hdl.emit import verilog
    from nfacep.hdl.eth.top import UdpTop

    from .udp import board_engine

    top = UdpTop(board_engine(nfa, params, values), mac=board.mac, ip=board.ip, port=board.port)
    return verilog(top, TOP), top.engine_id


def build(verilog_text: str, cache: Path) -> Path:
    """The Verilated board (``verilog_text`` and the C++ main), built once in ``cache``;
    the executable."""
    if find_verilator(cache) is None:
        raise SimulationError(
            "serve --rtl needs Verilator (bash tools/install-simulators.sh verilator)"
        )
    main = fill("rtl_board.cpp", top=TOP, quiet_cycles=QUIET_CYCLES)
    return verilated_executable(
        cache,
        "rtl-board",
        {"top.v": verilog_text.encode("ascii"), "main.cpp": main.encode("ascii")},
        top=TOP,
        opt=_opt(),
        executable=EXECUTABLE,
        what="the Verilated board",
    )


class RtlBoard:
    """The board top under Verilator, running: :meth:`send` puts a frame (no FCS) on its
    receive pins, :meth:`receive` waits up to ``timeout`` seconds for the next frame it sent
    (None if none came; EOFError when the process ended)."""

    def __init__(self, nfa, params, values, board: udp.Endpoint, cache: Path):
        text, self.engine_id = _emit(nfa, params, values, board)
        self.board = board
        executable = build(text, cache)
        self._proc = subprocess.Popen(
            [str(executable)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0
        )
        self._lock = threading.Lock()

    def send(self, frame: bytes) -> None:
        # (no wire carries a longer frame; the board counts this one oversize all the same)
        frame = frame[:0xFFFF]
        with self._lock:
            self._proc.stdin.write(struct.pack("<H", len(frame)) + frame)

    def receive(self, timeout: float) -> bytes | None:
        out = self._proc.stdout
        ready, _, _ = select.select([out], [], [], timeout)
        if not ready:
            return None
        head = out.read(2)
        if len(head) < 2:
            raise EOFError("the Verilated board ended")
        (n,) = struct.unpack("<H", head)
        data = b""
        while len(data) < n:
            more = out.read(n - len(data))
            if not more:
                raise EOFError("the Verilated board ended")
            data += more
        return data

    def close(self) -> None:
        with self._lock:
            if self._proc.stdin and not self._proc.stdin.closed:
                self._proc.stdin.close()
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


def os_cache(build_dir: str | os.PathLike | None) -> Path:
    """The folder caching Verilated boards: ``nfacep sim``'s build cache."""
    from .build import checked_cache

    cache = checked_cache(build_dir)
    cache.mkdir(parents=True, exist_ok=True)
    return cache
