"""A long fuzzing campaign over tuple files: the mutants of ``tests/tuple_fuzz.py`` run in
worker processes, each input bounded in time and memory.

    .venv/bin/python tests/fuzz_tuples.py --inputs 100000 [--seed S] [--workers 2]
        [--timeout 10] [--memory-mb 4096]
    .venv/bin/python tests/fuzz_tuples.py --seed S --show I      # one input, and its outcome

Every input ends as one of: ``accepted``; ``error`` (nfacep's own error with a position);
``no-position`` (nfacep's error, without file and line); ``crash`` (any other exception, or
the worker died, e.g. a signal or the memory bound); ``hang`` (no answer within
``--timeout`` seconds: the worker is killed and a new one goes on after the input). The
summary line gives the counts; the findings are listed with the seed and index that
reproduce them. Exit status 1 when anything but accepted and error occurred.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import traceback


def worker(seed: int, start: int, stop: int, memory_mb: int) -> None:
    """Run inputs start…stop-1, one JSON line per input on stdout ("begin", then the result)."""
    limit = memory_mb << 20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    import tuple_fuzz

    with tempfile.TemporaryDirectory(prefix="nfacep-fuzz-") as folder:
        for i in range(start, stop):
            print(json.dumps({"begin": i}), flush=True)
            try:
                outcome, message, seconds = tuple_fuzz.timed(seed, i, folder)
            except tuple_fuzz.NoPosition as err:
                outcome, message, seconds = "no-position", str(err), 0.0
            except Exception as err:  # a crash is what this looks for
                outcome, seconds = "crash", 0.0
                message = "".join(traceback.format_exception_only(err)).strip()[-500:]
            print(
                json.dumps(
                    {"i": i, "outcome": outcome, "message": message[:300], "seconds": seconds}
                ),
                flush=True,
            )


class _Worker:
    """One worker process: the inputs it still owes, the one it is in and its unread output."""

    def __init__(self, proc: subprocess.Popen, stop: int):
        self.proc = proc
        self.stop = stop
        self.current: int | None = None
        self.since = time.monotonic()
        self.buffer = ""

    def lines(self, final: bool) -> list[str]:
        """The complete lines it has written since the last call (all of them when final)."""
        fd = self.proc.stdout.fileno()
        if final:
            os.set_blocking(fd, True)
        try:
            while chunk := os.read(fd, 1 << 16):
                self.buffer += chunk.decode("utf-8", "replace")
        except BlockingIOError:
            pass
        *lines, self.buffer = self.buffer.split("\n")
        return lines


class _Campaign:
    """Workers over chunks of the inputs, the outcome counts and the findings."""

    def __init__(self, seed: int, timeout: float, memory_mb: int):
        self.seed = seed
        self.timeout = timeout
        self.memory_mb = memory_mb
        self.counts: collections.Counter[str] = collections.Counter()
        self.findings: list[dict] = []
        self.slowest = (0.0, -1)
        self.running: list[_Worker] = []

    def spawn(self, start: int, stop: int) -> None:
        if start >= stop:
            return
        proc = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--worker",
                "--seed",
                str(self.seed),
                "--start",
                str(start),
                "--stop",
                str(stop),
                "--memory-mb",
                str(self.memory_mb),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        os.set_blocking(proc.stdout.fileno(), False)
        self.running.append(_Worker(proc, stop))

    def drain(self, w: _Worker, final: bool) -> None:
        for line in w.lines(final):
            record = json.loads(line)
            if "begin" in record:
                w.current, w.since = record["begin"], time.monotonic()
                continue
            w.current = None
            self.counts[record["outcome"]] += 1
            self.slowest = max(self.slowest, (record["seconds"], record["i"]))
            if record["outcome"] not in ("accepted", "error"):
                self.findings.append(record)

    def lost(self, w: _Worker, outcome: str, message: str) -> None:
        """The worker ended inside an input: count it, and go on after it in a new one."""
        self.running.remove(w)
        self.counts[outcome] += 1
        self.findings.append({"i": w.current, "outcome": outcome, "message": message})
        self.spawn(w.current + 1, w.stop)

    def poll(self, w: _Worker) -> None:
        done = w.proc.poll() is not None
        self.drain(w, final=done)
        if done:
            if w.current is None:
                self.running.remove(w)
            else:  # died inside an input: a crash
                self.lost(w, "crash", f"worker died (status {w.proc.returncode})")
        elif w.current is not None and time.monotonic() - w.since > self.timeout:
            w.proc.kill()
            w.proc.wait()
            self.lost(w, "hang", f"no answer within {self.timeout} s")

    def report(self, seconds: float) -> int:
        counts, slowest = self.counts, self.slowest
        total = sum(counts.values())
        print(
            f"seed {self.seed}: {total} inputs in {seconds:.0f} s: "
            f"{counts['accepted']} accepted, {counts['error']} clean errors, "
            f"{counts['no-position']} errors without a position, {counts['crash']} crashes, "
            f"{counts['hang']} hangs; slowest input {slowest[1]} ({slowest[0]:.2f} s)"
        )
        for f in self.findings[:50]:
            print(f"  --seed {self.seed} --show {f['i']}: {f['outcome']}: {f['message']}")
        return 1 if self.findings else 0


def campaign(seed: int, inputs: int, workers: int, timeout: float, memory_mb: int) -> int:
    run = _Campaign(seed, timeout, memory_mb)
    started = time.monotonic()
    for k in range(workers):
        run.spawn(k * inputs // workers, (k + 1) * inputs // workers)
    while run.running:
        time.sleep(0.05)
        for w in list(run.running):
            run.poll(w)
    return run.report(time.monotonic() - started)


def show(seed: int, i: int) -> int:
    import tuple_fuzz

    base, kind, data = tuple_fuzz.mutant(seed, i)
    print(
        f"input {i} of seed {seed}: {kind} mutant of queries/{base.name}.csv, "
        f"{len(data)} bytes: {data[:300]!r}{'…' if len(data) > 300 else ''}"
    )
    with tempfile.TemporaryDirectory(prefix="nfacep-fuzz-") as folder:
        outcome, message, seconds = tuple_fuzz.timed(seed, i, folder)
    print(f"{outcome} in {seconds:.3f} s{': ' + message if message else ''}")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--inputs", type=int, default=10000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    p.add_argument("--timeout", type=float, default=10.0, help="seconds per input")
    p.add_argument("--memory-mb", type=int, default=4096, help="address space per worker")
    p.add_argument("--show", type=int, metavar="I", help="run input I alone and print it")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--start", type=int, help=argparse.SUPPRESS)
    p.add_argument("--stop", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args.seed, args.start, args.stop, args.memory_mb)
        return 0
    if args.show is not None:
        return show(args.seed, args.show)
    return campaign(args.seed, args.inputs, max(1, args.workers), args.timeout, args.memory_mb)


if __name__ == "__main__":
    sys.exit(main())
