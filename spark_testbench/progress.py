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

Accumulator updates reach the driver when a Spark task *ends*, not while it runs, so the counts
move by whole tasks (shards); a line printed before the first task ends says so instead of
showing a rate. A phase that counts no tuples (the Spark joins of the check) shows the tasks of
the running Spark stages, from the status tracker.

The interval is ``every`` seconds, or ``$NFACEP_PROGRESS_SECONDS`` when ``every`` is None (tests
make it tiny), else :data:`EVERY`; it restarts with each phase and after each line, so two lines
never come closer than that, except a phase's last line.
"""

from __future__ import annotations

import math
import os
import threading
import time
from dataclasses import dataclass

__all__ = ["EVERY", "Counter", "Progress", "duration", "line"]

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


def line(command: str, verb: str, done: int, total: int | None, seconds: float, *,
         tasks_done: int | None = None, tasks: int | None = None, task_word: str = "tasks",
         final: bool = False, unit: str = "tuples") -> str:
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


# --- the counters Spark tasks add to -------------------------------------------------------------

@dataclass(frozen=True)
class Counter:
    """What a Spark task adds its work to (it pickles: two accumulators)."""

    tuples: object  #: pyspark Accumulator[int]
    tasks: object  #: pyspark Accumulator[int]

    def add(self, n: int) -> None:
        """``n`` more tuples handled by this task."""
        if n:
            self.tuples.add(int(n))

    def finished(self) -> None:
        """This task has ended (call once, last)."""
        self.tasks.add(1)


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
    """

    def __init__(self, spark, command: str, print_fn=None, every: float | None = None):
        self.sc = spark.sparkContext
        self.command = command
        self.print = print_fn
        if every is None:
            every = float(os.environ.get(ENV) or EVERY)
        if not every > 0:
            raise ValueError(f"progress interval {every!r}: must be more than 0 seconds")
        self.every = every
        self._phase: _Phase | None = None
        self._last = time.perf_counter()  #: when the last line was printed, or a phase began
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True,
                                        name=f"{command}-progress")

    def __enter__(self):
        if self.print is not None:
            self._thread.start()
        return self

    def __exit__(self, exc_type, *exc):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        if exc_type is None:
            self.end()
        else:
            self._phase = None

    def phase(self, verb: str, *, total: int | None = None, tasks: int | None = None,
              task_word: str = "tasks", count: bool = True) -> Counter | None:
        """Start a phase; returns the :class:`Counter` its tasks add to (None with ``count``
        false: the phase is followed through the running Spark stages' tasks instead)."""
        self.end()
        counter = None
        if count:
            counter = Counter(self.sc.accumulator(0), self.sc.accumulator(0))
        with self._lock:
            self._phase = _Phase(verb, total, tasks, task_word, counter, time.perf_counter())
            self._last = self._phase.t0
        return counter

    def end(self) -> None:
        """End the current phase: one last line with its total and rate."""
        with self._lock:  # no periodic line of this phase after its last one
            ph, self._phase = self._phase, None
            if ph is not None and ph.counter is not None and self.print is not None:
                self.print(line(self.command, ph.verb, ph.counter.tuples.value, ph.total,
                                time.perf_counter() - ph.t0, final=True))
                self._last = time.perf_counter()

    def now(self) -> str | None:
        """The line for the current phase, now (None between phases)."""
        with self._lock:
            ph = self._phase
            return None if ph is None else self._line(ph)

    def _line(self, ph: _Phase) -> str:
        seconds = time.perf_counter() - ph.t0
        if ph.counter is not None:
            return line(self.command, ph.verb, ph.counter.tuples.value, ph.total, seconds,
                        tasks_done=ph.counter.tasks.value, tasks=ph.tasks,
                        task_word=ph.task_word)
        done = total = 0
        tracker = self.sc.statusTracker()
        for sid in tracker.getActiveStageIds():
            info = tracker.getStageInfo(sid)
            if info is not None:
                done += info.numCompletedTasks
                total += info.numTasks
        tasks = f", {done} of {total} Spark tasks done" if total else ""
        return f"{self.command}: {ph.verb}{tasks}, {duration(seconds)} elapsed"

    def _loop(self) -> None:
        """A line ``every`` seconds after the last line or the phase's start, whichever is
        later: never two within ``every`` seconds, none just after a phase began."""
        wait = self.every
        while not self._stop.wait(wait):
            with self._lock:
                wait = self._last + self.every - time.perf_counter()
                if wait > 0.001:
                    continue
                wait = self.every
                self._last = time.perf_counter()
                try:
                    text = None if self._phase is None else self._line(self._phase)
                except Exception:  # progress must never break the run
                    continue
                if text is not None:
                    self.print(text)
