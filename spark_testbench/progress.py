"""Progress lines of the long Spark runs (``nfacep vectors`` and ``nfacep regress``), on stderr.

One mechanism for both commands. A run goes through *phases* (generating, matching, simulating,
checking). A phase that counts tuples gets two Spark accumulators, which its tasks add to: the
tuples they handled (``Counter.add``) and, once, their own end (``Counter.finished``). Every
``every`` seconds a watcher thread on the driver prints what the phase has done (one line,
folded here)::

    regress: 1,234,567 of 10,000,000 tuples simulated (12%), 3 of 8 shards done,
    48,000 tuples/s, about 3 min left

and, when the phase ends, one last line with the total and the rate::

    regress: 10,000,000 of 10,000,000 tuples simulated (100%) in 3 min 28 s, 48,000 tuples/s

Accumulator updates reach the driver when a Spark task *ends*, not while it runs. So that a
long task (the global pass of ``vectors``, one task over the whole stream) shows its progress
while it runs, the driver also listens on a TCP port (:class:`_Live`: 127.0.0.1 in local mode,
every interface on a cluster) and each task sends its counts there about once a second, at most
(:meth:`Counter.add`); a line shows the larger of the two counts. A task that cannot reach the
port (a firewall) only loses that: its counts arrive with its end. A line printed before
anything was counted says so instead of showing a rate. A phase that counts no tuples (the
Spark joins of the check) shows the tasks of the running Spark stages, from the status
tracker.

The interval is ``every`` seconds, or ``$NFACEP_PROGRESS_SECONDS`` when ``every`` is None (tests
make it tiny), else :data:`EVERY`; it restarts with each phase and after each line, so two lines
never come closer than that, except a phase's last line. Time is read from ``clock`` (monotonic
seconds, :func:`time.monotonic` by default): tests pass a fake one and call
:meth:`Progress.tick` themselves instead of racing a thread with ``sleep``.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["EVERY", "LIVE_EVERY", "Counter", "Progress", "duration", "line"]

#: Seconds between two progress lines, by default.
EVERY = 10.0
ENV = "NFACEP_PROGRESS_SECONDS"


# --- formatting (no Spark) ------------------------------------------------------------------------


def duration(seconds: float) -> str:
    """``"45 s"``, ``"3 min 5 s"``, ``"2 h 7 min"``."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        m, s = divmod(s, 60)
        return f"{m} min {s} s" if s else f"{m} min"
    h, rest = divmod(s, 3600)
    m = rest // 60
    return f"{h} h {m} min" if m else f"{h} h"


def _left(seconds: float) -> str:
    """A rough time left: whole minutes past a minute, tens of seconds below."""
    if seconds < 10:
        return "less than 10 s left"
    if seconds < 60:
        return f"about {math.ceil(seconds / 10) * 10} s left"
    if seconds < 3600:
        return f"about {round(seconds / 60)} min left"
    return f"about {duration(round(seconds / 60) * 60)} left"


def line(
    command: str,
    verb: str,
    done: int,
    total: int | None,
    seconds: float,
    *,
    tasks_done: int | None = None,
    tasks: int | None = None,
    task_word: str = "tasks",
    final: bool = False,
    unit: str = "tuples",
) -> str:
    """One progress line: ``done`` of ``total`` ``unit`` ``verb`` after ``seconds``.

    The rate is ``done / seconds``; the time left, ``(total - done) / rate``, when the total is
    known and something is done. ``final``: the phase has ended (``in …`` instead of the time
    left).
    """
    of = f" of {total:,}" if total is not None else ""
    parts = [f"{command}: {done:,}{of} {unit} {verb}"]
    if total:
        parts[0] += f" ({min(100, math.floor(100 * done / total))}%)"
    if final:
        parts[0] += f" in {duration(seconds)}"
    if tasks is not None and not final:
        parts.append(f"{tasks_done or 0} of {tasks} {task_word} done")
    rate = done / seconds if seconds > 0 else None
    if done and rate:
        parts.append(f"{rate:,.0f} {unit}/s")
        if total is not None and not final and done < total:
            parts.append(_left((total - done) / rate))
    elif not final:
        parts.append(f"{duration(seconds)} elapsed (counted as {task_word} finish)")
    return ", ".join(parts)


def _listen(sc) -> _Live | None:
    """The driver's listener for running tasks' counts: on 127.0.0.1 in local mode, on every
    interface (announced as ``spark.driver.host``) on a cluster; None if it cannot listen."""
    try:
        local = str(sc.master).startswith("local")
        host = "127.0.0.1" if local else sc.getConf().get("spark.driver.host", "127.0.0.1")
        return _Live(host, "127.0.0.1" if local else "")
    except (OSError, AttributeError):  # (no master: a stand-in context, in tests)
        return None


# --- the counters Spark tasks add to -------------------------------------------------------------

#: Seconds between two reports of a running task to the driver's port, at least (less when
#: the lines come more often).
LIVE_EVERY = 1.0
#: Bytes of one report line at most (the listener drops a connection that sends longer ones).
_LINE_MAX = 64


@dataclass(frozen=True)
class Counter:
    """What a Spark task adds its work to (it pickles: two accumulators, and the driver's
    port for reports while it runs, ``live``: host, port and this phase's token)."""

    tuples: object  #: pyspark Accumulator[int]
    tasks: object  #: pyspark Accumulator[int]
    live: tuple[str, int, int, float] | None = None

    def add(self, n: int) -> None:
        """``n`` more tuples handled by this task."""
        if n:
            self.tuples.add(int(n))
            if self.live is not None:
                _reporter(self.live).add(int(n))

    def finished(self) -> None:
        """This task has ended (call once, last)."""
        self.tasks.add(1)
        if self.live is not None:
            _reporter(self.live).close()


class _Reporter:
    """A task's side of :class:`_Live`: counts sent as ``token count`` lines over one TCP
    connection, no more often than :data:`LIVE_EVERY`; any error ends the reports quietly."""

    def __init__(self, live: tuple[str, int, int, float]):
        self.address, self.token, self.every = (live[0], live[1]), live[2], live[3]
        self.pending = 0
        self.last = 0.0
        self.sock = None
        self.broken = False

    def add(self, n: int) -> None:
        self.pending += n
        if time.monotonic() - self.last >= self.every:
            self.flush()

    def flush(self) -> None:
        if not self.pending or self.broken:
            return
        import socket

        try:
            if self.sock is None:
                self.sock = socket.create_connection(self.address, timeout=1.0)
            self.sock.sendall(f"{self.token} {self.pending}\n".encode())
        except OSError:
            self.broken = True
            return
        self.pending = 0
        self.last = time.monotonic()

    def close(self) -> None:
        """Send what is pending and close the connection (a later report opens another)."""
        self.flush()
        if self.sock is not None:
            self.sock.close()
            self.sock = None


_REPORTERS: dict[tuple, _Reporter] = {}


def _reporter(live: tuple[str, int, int, float]) -> _Reporter:
    """This worker's reporter for ``live`` (one per phase, kept while the worker lives)."""
    if live not in _REPORTERS:
        _REPORTERS[live] = _Reporter(live)
    return _REPORTERS[live]


class _Live:
    """The driver's side: a TCP listener on ``host`` that adds up what running tasks report,
    per phase token. Malformed input closes that connection and counts nothing."""

    def __init__(self, host: str, bind: str):
        import socket

        self._sock = socket.create_server((bind, 0))
        self.address = (host, self._sock.getsockname()[1])
        self._counts: dict[int, int] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True, name="progress-listener").start()

    def count(self, token: int) -> int:
        with self._lock:
            return self._counts.get(token, 0)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(
                target=self._read, args=(conn,), daemon=True, name="progress-report"
            ).start()

    def _read(self, conn) -> None:
        with conn:
            buffer = b""
            while not self._closed.is_set():
                try:
                    data = conn.recv(4096)
                except OSError:
                    return
                if not data:
                    return
                buffer += data
                *lines, buffer = buffer.split(b"\n")
                if len(buffer) > _LINE_MAX:
                    return
                for raw in lines:
                    parts = raw.split()
                    if (
                        len(parts) != 2
                        or not all(p.isdigit() for p in parts)
                        or len(raw) > _LINE_MAX
                    ):
                        return
                    token, n = int(parts[0]), int(parts[1])
                    with self._lock:
                        self._counts[token] = self._counts.get(token, 0) + n

    def close(self) -> None:
        self._closed.set()
        self._sock.close()


@dataclass
class _Phase:
    verb: str
    total: int | None
    tasks: int | None
    task_word: str
    counter: Counter | None
    t0: float


class Progress:
    """Prints a phase's progress every ``every`` seconds on a thread, and its end.

    ``print_fn`` is None for no output (``--quiet``); the counters work anyway. Use it as a
    context manager around the phases; :meth:`phase` starts one (ending the previous one) and
    :meth:`end` ends the current one.

    ``clock`` returns monotonic seconds (:func:`time.monotonic`); every time the class uses
    comes from it. ``watcher`` false starts no thread: lines are then printed when the caller
    calls :meth:`tick` (tests, with a fake ``clock``).
    """

    def __init__(
        self,
        spark,
        command: str,
        print_fn=None,
        every: float | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        watcher: bool = True,
    ):
        self.sc = spark.sparkContext
        self.command = command
        self.print = print_fn
        if every is None:
            every = float(os.environ.get(ENV) or EVERY)
        if not every > 0:
            raise ValueError(f"progress interval {every!r}: must be more than 0 seconds")
        self.every = every
        self.clock = clock
        self._watcher = watcher
        self._phase: _Phase | None = None
        self._last = clock()  #: when the last line was printed, or a phase began
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name=f"{command}-progress")
        self._live: _Live | None = None
        self._tokens = 0

    def __enter__(self):
        if self.print is not None:
            if self._watcher:
                self._thread.start()
            self._live = _listen(self.sc)
        return self

    def __exit__(self, exc_type, *exc):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        if self._live is not None:
            self._live.close()
        if exc_type is None:
            self.end()
        else:
            self._phase = None

    def phase(
        self,
        verb: str,
        *,
        total: int | None = None,
        tasks: int | None = None,
        task_word: str = "tasks",
        count: bool = True,
    ) -> Counter | None:
        """Start a phase; returns the :class:`Counter` its tasks add to (None with ``count``
        false: the phase is followed through the running Spark stages' tasks instead)."""
        self.end()
        counter = None
        if count:
            live = None
            if self._live is not None:
                self._tokens += 1
                live = (*self._live.address, self._tokens, min(LIVE_EVERY, self.every))
            counter = Counter(self.sc.accumulator(0), self.sc.accumulator(0), live)
        with self._lock:
            self._phase = _Phase(verb, total, tasks, task_word, counter, self.clock())
            self._last = self._phase.t0
        return counter

    def end(self) -> None:
        """End the current phase: one last line with its total and rate."""
        with self._lock:  # no periodic line of this phase after its last one
            ph, self._phase = self._phase, None
            if ph is not None and ph.counter is not None and self.print is not None:
                self.print(
                    line(
                        self.command,
                        ph.verb,
                        ph.counter.tuples.value,
                        ph.total,
                        self.clock() - ph.t0,
                        final=True,
                    )
                )
                self._last = self.clock()

    def now(self) -> str | None:
        """The line for the current phase, now (None between phases)."""
        with self._lock:
            ph = self._phase
            return None if ph is None else self._line(ph)

    def _line(self, ph: _Phase) -> str:
        seconds = self.clock() - ph.t0
        if ph.counter is not None:
            done = ph.counter.tuples.value
            if ph.counter.live is not None and self._live is not None:
                done = max(done, self._live.count(ph.counter.live[2]))
            return line(
                self.command,
                ph.verb,
                done,
                ph.total,
                seconds,
                tasks_done=ph.counter.tasks.value,
                tasks=ph.tasks,
                task_word=ph.task_word,
            )
        done = total = 0
        tracker = self.sc.statusTracker()
        for sid in tracker.getActiveStageIds():
            info = tracker.getStageInfo(sid)
            if info is not None:
                done += info.numCompletedTasks
                total += info.numTasks
        tasks = f", {done} of {total} Spark tasks done" if total else ""
        return f"{self.command}: {ph.verb}{tasks}, {duration(seconds)} elapsed"

    def tick(self) -> float:
        """Print the current phase's line if one is due: ``every`` seconds after the last line
        or the phase's start, whichever is later (never two within ``every`` seconds, none just
        after a phase began). Returns the seconds until the next one is due."""
        with self._lock:
            now = self.clock()
            wait = self._last + self.every - now
            if wait > 0.001:
                return wait
            self._last = now
            try:
                text = None if self._phase is None else self._line(self._phase)
            except Exception:  # progress must never break the run
                text = None
            if text is not None and self.print is not None:
                self.print(text)
            return self.every

    def _loop(self) -> None:
        """The watcher thread: :meth:`tick` when the next line is due."""
        wait = self.every
        while not self._stop.wait(wait):
            wait = self.tick()
