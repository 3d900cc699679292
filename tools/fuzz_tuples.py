"""A long fuzzing campaign over tuple files: the mutants of ``tests/tuple_fuzz.py`` run in
worker processes, each input bounded in time and memory.

    .venv/bin/python tools/fuzz_tuples.py --inputs 100000 [--seed S] [--workers 2]
        [--timeout 10] [--memory-mb 4096]
    .venv/bin/python tools/fuzz_tuples.py --seed S --show I      # one input, and its outcome

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
import pathlib
import resource
import subprocess
import sys
import tempfile
import time
import traceback

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


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


def campaign(seed: int, inputs: int, workers: int, timeout: float, memory_mb: int) -> int:
    counts: collections.Counter[str] = collections.Counter()
    findings: list[dict] = []
    slowest = (0.0, -1)
    chunks = [(k * inputs // workers, (k + 1) * inputs // workers) for k in range(workers)]
    started = time.monotonic()
    running: list[dict] = []

    def spawn(start: int, stop: int) -> None:
        if start >= stop:
            return
        proc = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--worker",
                "--seed",
                str(seed),
                "--start",
                str(start),
                "--stop",
                str(stop),
                "--memory-mb",
                str(memory_mb),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        os.set_blocking(proc.stdout.fileno(), False)
        running.append(
            {"proc": proc, "stop": stop, "current": None, "since": time.monotonic(), "buffer": ""}
        )

    for a, b in chunks:
        spawn(a, b)

    def drain(w: dict, final: bool) -> None:
        nonlocal slowest
        fd = w["proc"].stdout.fileno()
        if final:
            os.set_blocking(fd, True)
        try:
            while chunk := os.read(fd, 1 << 16):
                w["buffer"] += chunk.decode("utf-8", "replace")
        except BlockingIOError:
            pass
        *lines, w["buffer"] = w["buffer"].split("\n")
        for line in lines:
            record = json.loads(line)
            if "begin" in record:
                w["current"], w["since"] = record["begin"], time.monotonic()
                continue
            w["current"] = None
            counts[record["outcome"]] += 1
            slowest = max(slowest, (record["seconds"], record["i"]))
            if record["outcome"] not in ("accepted", "error"):
                findings.append(record)

    while running:
        time.sleep(0.05)
        for w in list(running):
            proc = w["proc"]
            done = proc.poll() is not None
            drain(w, final=done)
            current = w["current"]
            if done:
                running.remove(w)
                if current is not None:  # died inside an input: a crash
                    counts["crash"] += 1
                    findings.append(
                        {
                            "i": current,
                            "outcome": "crash",
                            "message": f"worker died (status {proc.returncode})",
                        }
                    )
                    spawn(current + 1, w["stop"])
            elif current is not None and time.monotonic() - w["since"] > timeout:
                proc.kill()
                proc.wait()
                running.remove(w)
                counts["hang"] += 1
                findings.append(
                    {"i": current, "outcome": "hang", "message": f"no answer within {timeout} s"}
                )
                spawn(current + 1, w["stop"])
    total = sum(counts.values())
    print(
        f"seed {seed}: {total} inputs in {time.monotonic() - started:.0f} s: "
        f"{counts['accepted']} accepted, {counts['error']} clean errors, "
        f"{counts['no-position']} errors without a position, {counts['crash']} crashes, "
        f"{counts['hang']} hangs; slowest input {slowest[1]} ({slowest[0]:.2f} s)"
    )
    for f in findings[:50]:
        print(f"  --seed {seed} --show {f['i']}: {f['outcome']}: {f['message']}")
    return 1 if findings else 0


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
