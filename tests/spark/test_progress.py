"""Progress lines of ``vectors`` and ``regress`` (spark_testbench.progress), without Spark.

The Spark runs that print them are tested in test_spark_vectors.py and test_spark_regress.py.
The watcher's timing is driven by a fake clock (:class:`_Clock`) and :meth:`Progress.tick`, so
no test races ``sleep`` against an interval.
"""

from __future__ import annotations

import time

import pytest

from nfacep.spark_testbench import progress
from nfacep.spark_testbench.progress import Progress, duration, line


def test_a_line_midway_has_counts_percent_rate_and_time_left():
    seconds = 1_234_567 / 48_000  # 48,000 tuples/s
    assert line(
        "regress",
        "simulated",
        1_234_567,
        10_000_000,
        seconds,
        tasks_done=3,
        tasks=8,
        task_word="shards",
    ) == (
        "regress: 1,234,567 of 10,000,000 tuples simulated (12%), 3 of 8 shards done, "
        "48,000 tuples/s, about 3 min left"
    )


def test_nothing_counted_yet_shows_the_elapsed_time_not_a_rate():
    assert line(
        "regress", "simulated", 0, 10_000_000, 65, tasks_done=0, tasks=2, task_word="shards"
    ) == (
        "regress: 0 of 10,000,000 tuples simulated (0%), 0 of 2 shards done, 1 min 5 s "
        "elapsed (counted as shards finish)"
    )


def test_the_last_line_has_the_total_the_time_and_the_rate():
    assert (
        line("vectors", "generated", 6000, 6000, 2.0, tasks_done=2, tasks=2, final=True)
        == "vectors: 6,000 of 6,000 tuples generated (100%) in 2 s, 3,000 tuples/s"
    )


@pytest.mark.parametrize(
    ("done", "total", "seconds", "tail"),
    [
        (999, 1000, 1.0, "(99%), 999 tuples/s, less than 10 s left"),  # 100% only when all done
        (1000, 100_000, 1.0, "(1%), 1,000 tuples/s, about 2 min left"),  # 99 s
        (100, 1000, 5.0, "(10%), 20 tuples/s, about 50 s left"),  # 45 s, rounded up to tens
        (1, 10_000, 1.0, "(0%), 1 tuples/s, about 2 h 47 min left"),  # 9,999 s
        (1000, None, 4.0, "250 tuples/s"),  # total unknown: no percent, no time left
    ],
)
def test_percent_rate_and_time_left(done, total, seconds, tail):
    text = line("x", "done", done, total, seconds)
    assert text.endswith(tail), text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.4, "0 s"),
        (59.4, "59 s"),
        (60, "1 min"),
        (185, "3 min 5 s"),
        (3600, "1 h"),
        (7620, "2 h 7 min"),
    ],
)
def test_duration(seconds, text):
    assert duration(seconds) == text


# --- the watcher, with stand-ins for the Spark context -------------------------------------------


class _Acc:
    def __init__(self):
        self.value = 0

    def add(self, n):
        self.value += n


class _Tracker:
    def getActiveStageIds(self):
        return []


class _Context:
    def accumulator(self, _zero):
        return _Acc()

    def statusTracker(self):
        return _Tracker()


class _Spark:
    sparkContext = _Context()


class _Clock:
    """A monotonic clock that moves only when told to."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def _progress(spark, command, print_fn, every, clock):
    """A watcher without its thread: the test calls ``tick`` after moving ``clock``."""
    return Progress(spark, command, print_fn, every=every, clock=clock, watcher=False)


def test_lines_every_interval_then_the_total():
    lines: list[str] = []
    clock = _Clock()
    with _progress(_Spark(), "regress", lines.append, 0.01, clock) as watch:
        counter = watch.phase("simulated", total=100, tasks=2, task_word="shards")
        counter.add(60)
        counter.finished()
        for _ in range(3):
            clock.advance(0.01)
            watch.tick()
    assert len(lines) == 4  # three periodic lines and the last one
    assert len(lines) >= 3
    periodic, last = lines[:-1], lines[-1]
    assert all(
        p.startswith("regress: 60 of 100 tuples simulated (60%), 1 of 2 shards done, ")
        and "tuples/s" in p
        for p in periodic
    ), periodic
    assert last.startswith("regress: 60 of 100 tuples simulated (60%) in 0 s, ")


def test_never_more_often_than_the_interval():
    lines: list[str] = []
    clock = _Clock()
    with _progress(_Spark(), "vectors", lines.append, 30, clock) as watch:
        watch.phase("generated", total=10, tasks=1).add(10)
        clock.advance(29)
        assert watch.tick() == pytest.approx(1)  # the next line would be due in 1 s
        watch.phase("matched", total=10, tasks=1).add(10)
        clock.advance(29)
        watch.tick()
    # only the phases' last lines: no periodic line within 30 s
    assert [ln.split(" in ")[0] for ln in lines] == [
        "vectors: 10 of 10 tuples generated (100%)",
        "vectors: 10 of 10 tuples matched (100%)",
    ]


def test_quiet_prints_nothing_but_counts():
    clock = _Clock()
    with _progress(_Spark(), "regress", None, 0.01, clock) as watch:
        counter = watch.phase("simulated", total=5)
        counter.add(5)
        clock.advance(0.05)
        watch.tick()
        assert watch.now().startswith("regress: 5 of 5 tuples simulated (100%)")


def test_the_interval_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv(progress.ENV, "0.5")
    assert Progress(_Spark(), "vectors").every == 0.5
    monkeypatch.delenv(progress.ENV)
    assert Progress(_Spark(), "vectors").every == progress.EVERY == 10
    monkeypatch.setenv(progress.ENV, "0")
    with pytest.raises(ValueError, match="must be more than 0"):
        Progress(_Spark(), "vectors")


def test_no_line_just_after_a_phase_began():
    """The interval restarts with each phase: a phase shorter than it prints only its last
    line, even when the previous one ran most of an interval."""
    lines: list[str] = []
    clock = _Clock()
    with _progress(_Spark(), "vectors", lines.append, 0.3, clock) as watch:
        watch.phase("generated", total=10, tasks=1).add(10)
        clock.advance(0.2)
        watch.tick()
        watch.phase("matched", total=10, tasks=1).add(10)
        clock.advance(0.2)  # 0.4 s after the first phase began, 0.2 s after the second
        watch.tick()
    assert len(lines) == 2 and all(" in 0 s, " in ln for ln in lines), lines


def test_the_watcher_thread_prints_a_line_when_one_is_due():
    """The thread ticks on its own: once the (fake) clock has passed the interval, one line
    (the clock stands still after it, so no second one), then the phase's last line."""
    lines: list[str] = []
    clock = _Clock()
    with Progress(_Spark(), "regress", lines.append, every=0.01, clock=clock) as watch:
        counter = watch.phase("simulated", total=100)
        counter.add(60)
        clock.advance(0.01)
        deadline = time.monotonic() + 10
        while not lines and time.monotonic() < deadline:
            time.sleep(0.01)
    assert len(lines) == 2, lines
    assert lines[0].startswith("regress: 60 of 100 tuples simulated (60%), 6,000 tuples/s")
    assert lines[1] == "regress: 60 of 100 tuples simulated (60%) in 0 s, 6,000 tuples/s"


class _LocalContext(_Context):
    master = "local[2]"


class _LocalSpark:
    sparkContext = _LocalContext()


def test_a_running_task_reports_over_the_drivers_port():
    """A task's counter is a copy of the driver's (pickled, as Spark ships it): its
    accumulator adds reach the driver only when the task ends, its reports to the driver's
    port while it runs; a line shows the larger count."""
    import pickle

    with _progress(_LocalSpark(), "vectors", lambda _: None, 0.01, _Clock()) as watch:
        counter = watch.phase("matched", total=1000, tasks=1)
        assert counter.live is not None and counter.live[:1] == ("127.0.0.1",)
        task = pickle.loads(pickle.dumps(counter))
        task.add(300)
        deadline = time.monotonic() + 10
        while "300 of 1,000" not in watch.now() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert watch.now().startswith("vectors: 300 of 1,000 tuples matched (30%)")
        assert counter.tuples.value == 0  # (the accumulator has not heard of it)
        task.add(200)
        task.finished()  # the rest goes with the end
        while "500 of 1,000" not in watch.now() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert watch.now().startswith("vectors: 500 of 1,000 tuples matched (50%)")


def test_the_listener_drops_a_connection_that_sends_garbage():
    import socket

    with _progress(_LocalSpark(), "vectors", lambda _: None, 0.01, _Clock()) as watch:
        counter = watch.phase("matched", total=100)
        host, port, token, _ = counter.live
        for junk in (b"x" * 200, b"1 2 3\n", b"-1 5\n", f"{token} 7\n".encode()):
            with socket.create_connection((host, port)) as s:
                s.sendall(junk)
        deadline = time.monotonic() + 10
        while "7 of 100" not in watch.now() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert watch.now().startswith("vectors: 7 of 100 tuples matched")
