"""A call run in a daemon thread beside the caller's work: ``nfacep regress`` emits the engine
and builds its model (:func:`.regress_tasks.prebuild`) while the Spark session starts, since each
takes tens of seconds and mostly waits on another process (the JVM; Verilator's compiler)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["Beside"]

T = TypeVar("T")


class Beside(Generic[T]):
    """``call()`` started in a daemon thread (an interrupted command does not wait for it);
    :meth:`result` waits for it and returns what it returned or raises what it raised."""

    def __init__(self, call: Callable[[], T], name: str = "nfacep-beside"):
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(call,), name=name, daemon=True)
        self._thread.start()

    def _run(self, call: Callable[[], T]) -> None:
        try:
            self._value = call()
        except BaseException as err:  # raised again by result(), in the caller's thread
            self._error = err

    def result(self) -> T:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]

    def discard(self, cleanup: Callable[[T], object]) -> None:
        """Wait for the call and pass its value (when it returned one) to ``cleanup``."""
        self._thread.join()
        if self._error is None:
            cleanup(self._value)  # type: ignore[arg-type]
