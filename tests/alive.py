"""How many pieces of the input a host holds at once: each piece ``backend.read_pieces`` makes
is counted while it exists.

The pieces are made in the reader's thread (``reader.prefetch``) and let go in the host's, so
the count is a set of the live pieces' ids (one ``add`` or ``discard`` each, atomic under the
GIL), not an integer read, changed and written back from two threads: such a count loses a
decrement when the threads switch between its read and its write, and then reports a piece
that no longer exists (seen under load: "held 4" of a host that held three)."""

from __future__ import annotations

import threading
import time
import weakref

from nfacep import backend


class Alive:
    """The pieces alive now and the most alive at once, counted from ``install``'s wrapper."""

    def __init__(self) -> None:
        self._live: set[int] = set()
        self._lock = threading.Lock()
        self.most = 0
        self.made = 0

    def _made(self, piece: object) -> None:
        with self._lock:
            self.made += 1
            self._live.add(id(piece))
            self.most = max(self.most, len(self._live))
        weakref.finalize(piece, self._gone, id(piece))

    def _gone(self, key: int) -> None:
        with self._lock:
            self._live.discard(key)

    @property
    def now(self) -> int:
        with self._lock:
            return len(self._live)

    def install(self, monkeypatch) -> Alive:
        """``backend.read_pieces`` replaced, for the test, by one that counts its pieces."""
        real = backend.read_pieces

        def counted(*args, **kwargs):
            for piece in real(*args, **kwargs):
                self._made(piece)
                yield piece
                del piece  # (not held here while the next one is read)

        monkeypatch.setattr(backend, "read_pieces", counted)
        return self


def late_host(monkeypatch, host_module, seconds: float = 0.05) -> None:
    """The host of ``host_module`` (it reads its pieces through ``each_piece``) made late by
    ``seconds`` after it takes each piece, as a busy machine makes it, while the reader's
    thread reads on: a piece the host still holds then meets the piece after the next."""
    from nfacep.links import host

    real = host.each_piece

    class Late:
        def __init__(self, stream):
            self.stream = stream

        def __iter__(self):
            return self

        def __next__(self):
            piece = next(self.stream)
            time.sleep(seconds)
            return piece

    monkeypatch.setattr(host_module, "each_piece", lambda stream: real(Late(stream)))
