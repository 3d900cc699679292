"""A fake clock for the progress lines of a whole command (``nfacep vectors``, ``regress``):
the :class:`~nfacep.spark_testbench.progress.Progress` the command builds runs without its
watcher thread, on a clock that moves only at a phase's end, by the interval, so the phase's
line is due then and printed, before its last one. Lines come at known points, so no test races
``sleep`` against an interval (tests/spark/test_progress.py drives the watcher itself, and
``test_a_running_task_shows_its_progress_before_it_ends`` a line while a task runs)."""

from __future__ import annotations

from nfacep.spark_testbench.progress import Progress


class Clock:
    """Monotonic seconds that move only when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def line_at_each_phase_end(monkeypatch, module) -> Clock:
    """Make the ``Progress`` that ``module`` (``vectors`` or ``regress`` of
    ``nfacep.spark_testbench``) builds print its current phase's line when the phase ends, from
    the counters as they are then, and then the phase's last line. Returns its clock."""
    clock = Clock()

    class AtPhaseEnds(Progress):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, clock=clock, watcher=False, **kwargs)

        def end(self) -> None:
            if self.now() is not None:
                clock.advance(self.every)
                self.tick()
            super().end()

    monkeypatch.setattr(module, "Progress", AtPhaseEnds)
    return clock
