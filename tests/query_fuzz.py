"""A fuzzer of the query language: mutated query files run through ``nfacep check`` and
``nfacep explain --json`` in a worker process, with a time and memory bound per input.

The only acceptable outcomes of an input are **accepted** (exit 0) and a **clean error**
(exit 2, the message starting ``file:line:col:``). Anything else is a failure: a **crash**
(an exception escaping the command line, or exit 2 without a position), or a **hang** (the
input took longer than the time bound; the worker is killed and restarted). The worker's
address space is capped, so a blow-up ends as a ``MemoryError`` crash instead of eating the
machine.

Used by ``tests/lang/test_query_fuzz.py`` (CI and nightly) and ``tests/fuzz_queries.py`` (a
campaign). ``tests`` is not a package: both import this file by path.

Inputs come from :func:`mutants`, a seeded mutator over the bundled queries (``queries/*.sql``)
and a few seed files of our own (the hostile shapes issue 13 found: long runs of NOT, minus,
parentheses, huge numbers, empty operands under big counts, PERMUTE of many items, …). Each
mutant applies one to four edits: an inserted, replaced, deleted, duplicated or swapped span,
a token repeated up to thousands of times, a number replaced by an extreme one, two files
spliced, a span and a long run grouped under a big count, or bytes flipped (invalid UTF-8).
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import random
import re
import select
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUTCOMES = ("accepted", "error", "crash", "hang")

_STREAM = "CREATE STREAM s (x UINT(8), y INT(16), b BOOL, f FLOAT32, e ENUM('a', 'b'));\n"

#: Seed files besides the bundled queries: shapes that once broke the front end.
SEEDS = [
    _STREAM + "QUERY q PATTERN (A B+ C?) DEFINE A AS x = 07, B AS y < -5 AND b, C AS e = 'a'",
    _STREAM + "QUERY q PATTERN (A (){4} (B{0}){4} PERMUTE((), ())) DEFINE A AS f > 1.5",
    _STREAM + "QUERY q PATTERN (A{2,5}? PERMUTE(A, B, C)) DEFINE A AS NOT NOT b, "
    "B AS x + x - 3 > 1, C AS f > 1e40",
    _STREAM + "SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY x ORDER BY y ONE ROW PER MATCH "
    "AFTER MATCH SKIP PAST LAST ROW PATTERN ((A | B)* C) DEFINE A AS x BETWEEN 1 AND "
    "0x0f, B AS e IN ('a', 'b'), C AS y NOT IN (1, 2)) AS m",
    _STREAM + "/* don't */ QUERY q PATTERN ((((A)))) -- it's\nDEFINE A AS (((x = 1)))",
    "\ufeff" + _STREAM + "QUERY q PATTERN (A*) DEFINE A AS f >= -0.0",
    _STREAM + "QUERY q PARTITION x MEASURES FIRST(seq) AS start_seq PATTERN (A B+ | B) "
    "DEFINE A AS x = 1 B AS y > 2",
    # the recovery inside MEASURES and after MATCH_RECOGNIZE ( … ) (issue 27's ports)
    _STREAM + "SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY x MEASURES FIRST(A.y) AS a, "
    "RUNNING LAST(y) AS b, COUNT(*) AS n, MATCH_NUMBER() AS m PATTERN (A B*) DEFINE A AS "
    "y > PREV(y), B AS y < PREV(y, 2)) AS m ORDER BY m.a",
]

#: Text inserted, repeated or substituted by the mutator.
TOKENS = [
    "QUERY",
    "PATTERN",
    "DEFINE",
    "AS",
    "FROM",
    "SELECT",
    "*",
    "MATCH_RECOGNIZE",
    "PARTITION BY",
    "ORDER BY",
    "AFTER MATCH SKIP PAST LAST ROW",
    "AFTER MATCH SKIP TO NEXT ROW",
    "AFTER MATCH REPORT EVERY END",
    '"',
    '"A"',
    "MEASURES",
    "RUNNING",
    "FINAL",
    "WHERE",
    "CAST(",
    "ONE ROW PER MATCH",
    "ALL ROWS PER MATCH",
    "SUBSET U = (A)",
    "PERMUTE(",
    "{-",
    "-}",
    "(",
    ")",
    "()",
    ",",
    ";",
    ".",
    "|",
    "?",
    "+",
    "*?",
    "{3}",
    "{2,}",
    "{,4}",
    "{1,5}?",
    "{4096}",
    "{4097}",
    "{0}",
    "{1000000000000}",
    "{" + "9" * 5000 + "}",
    "^",
    "$",
    "NOT",
    "AND",
    "OR",
    "BETWEEN",
    "IN (",
    "=",
    "<>",
    "!=",
    "<",
    ">=",
    "-",
    "0",
    "07",
    "0x1F",
    "0X",
    "1e40",
    "-1e40",
    "1e-50",
    "3.4028235e38",
    str(1 << 128),
    "9" * 50,
    "9" * 5000,
    "1.5",
    ".5",
    "1." + "0" * 5000 + "1",
    "'a'",
    "''",
    "'it''s'",
    "'unterminated",
    "TRUE",
    "FALSE",
    "--",
    "/*",
    "*/",
    "\n",
    "\ufeff",
    "\x00",
    "\x1b[31m",
    "é",
    "PREV(",
    "COUNT(",
    "A.*",
    "LIKE",
    "IS NULL",
    "CREATE STREAM",
    "CREATE TABLE",
    "UINT(",
    "INT(",
    "INT",
    "UINT(64)",
    "INT(65)",
    "UINT(" + "1" * 5000 + ")",
    "BOOL",
    "ENUM(",
    "FLOAT32",
    "WITHIN 5",
    ":p",
    "MEASURES FIRST(seq) AS start_seq",
    "FIRST(seq)",
    "AS start_seq",
    "seq",
    "x",
    "y",
    "A",
    "B",
    "s",
    "f",
    "e",
    "b",
    "%",
    "/",
]

#: Repeated many times over by the mutator: the shapes of deep or long input.
RUNS = [
    "NOT ",
    "- ",
    "+ ",
    "(",
    ")",
    "{- ",
    "PERMUTE(",
    "A ",
    "A* ",
    "(A)? ",
    "() ",
    "x + ",
    "b AND ",
    "A, ",
    "'a', ",
    "1, ",
]
RUN_LENGTHS = [2, 10, 99, 100, 101, 150, 600, 1500, 5000]


def corpus() -> list[str]:
    """The bundled query files and :data:`SEEDS`."""
    files = sorted((ROOT / "queries").glob("*.sql"))
    return [f.read_text(encoding="utf-8") for f in files] + SEEDS


def _span(rng: random.Random, text: str) -> tuple[int, int]:
    start = rng.randrange(len(text) + 1)
    return start, min(len(text), start + rng.choice([1, 1, 2, 5, 20, 200]))


def _mutate_once(rng: random.Random, text: str, files: list[str]) -> str:
    op = rng.randrange(11)
    i, j = _span(rng, text)
    if op == 0:  # insert a token
        return text[:i] + rng.choice([" ", ""]) + rng.choice(TOKENS) + " " + text[i:]
    if op == 1:  # replace a span by a token
        return text[:i] + rng.choice(TOKENS) + text[j:]
    if op == 2:  # delete a span
        return text[:i] + text[j:]
    if op == 3:  # duplicate a span
        return text[:j] + text[i:j] + text[j:]
    if op == 4:  # a run of one token
        return text[:i] + rng.choice(RUNS) * rng.choice(RUN_LENGTHS) + text[i:]
    if op == 5:  # wrap a span in many brackets or operators
        k = rng.choice(RUN_LENGTHS)
        opener, closer = rng.choice(
            [
                ("(", ")"),
                ("NOT (", ")"),
                ("-(", ")"),
                ("(", ")*"),
                ("(", "){2}"),
                ("{- ", " -}"),
                ("PERMUTE(", ")"),
            ]
        )
        return text[:i] + opener * k + text[i:j] + closer * k + text[j:]
    if op == 6:  # a number replaced by an extreme one
        numbers = list(re.finditer(r"\b\d+(\.\d*)?\b", text))
        if numbers:
            m = rng.choice(numbers)
            extreme = rng.choice(
                [
                    "0",
                    "00",
                    "07",
                    "4096",
                    "4097",
                    "65",
                    "64",
                    str(1 << 64),
                    str(1 << 128),
                    "9" * 40,
                    "9" * 4400,
                    "1e39",
                    "1e-46",
                    "0x" + "f" * 40,
                ]
            )
            return text[: m.start()] + extreme + text[m.end() :]
        return text
    if op == 7:  # splice two files
        other = rng.choice(files)
        k = rng.randrange(len(other) + 1)
        return text[:i] + other[k:]
    if op == 8:  # swap two spans
        a, b = sorted((_span(rng, text), _span(rng, text)))
        if a[1] <= b[0]:
            return (
                text[: a[0]]
                + text[b[0] : b[1]]
                + text[a[1] : b[0]]
                + text[a[0] : a[1]]
                + text[b[1] :]
            )
        return text
    if op == 9:  # a group of a span and a long run, repeated many times
        run = rng.choice(RUNS) * rng.choice(RUN_LENGTHS)
        count = rng.choice(["2", "100", "4096", "4097", "0", "1,", ",4096", "1000,"])
        return text[:i] + "(" + text[i:j] + " " + run + "){" + count + "}" + text[j:]
    # change the case of a span (keywords are case-insensitive, names are not)
    return text[:i] + text[i:j].swapcase() + text[j:]


def mutant(rng: random.Random, files: list[str]) -> bytes:
    """One mutated query file, as the bytes a user might hand ``nfacep``."""
    text = rng.choice(files)
    for _ in range(rng.randint(1, 4)):
        text = _mutate_once(rng, text, files)
    data = text.encode("utf-8")
    if data and rng.random() < 0.05:  # flip bytes: invalid UTF-8, control characters
        data = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        data = bytes(data)
    return data


def mutants(seed: int, count: int):
    """``count`` mutants from one seed: the same seed gives the same inputs."""
    rng = random.Random(seed)
    files = corpus()
    for _ in range(count):
        yield mutant(rng, files)


# --- the worker ---------------------------------------------------------------------------------


def _serve(memory_bytes: int) -> None:
    """Worker loop: one JSON line per input on stdin, one JSON line per result on stdout."""
    import resource

    from nfacep.cli import main

    if memory_bytes:
        soft = _address_space() + memory_bytes
        resource.setrlimit(resource.RLIMIT_AS, (soft, resource.RLIM_INFINITY))
    out = sys.stdout
    folder = tempfile.mkdtemp(prefix="nfacep-fuzz-")
    path = os.path.join(folder, "fuzz.sql")
    for line in sys.stdin:
        data = base64.b64decode(json.loads(line)["data"])
        with open(path, "wb") as f:
            f.write(data)
        result = {"outcome": "accepted", "detail": ""}
        start = time.process_time()
        for argv in (["check", path], ["explain", path, "--json"]):
            stdout, stderr = io.StringIO(), io.StringIO()
            try:
                with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                    code = main(argv)
            except BaseException as exc:  # classifying every escape is the point
                result = {
                    "outcome": "crash",
                    "detail": f"{argv[0]}: {type(exc).__name__}: {str(exc)[:300]}",
                }
                break
            err = stderr.getvalue()
            if code == 2 and re.match(re.escape(path) + r":\d+:\d+: ", err):
                result = {"outcome": "error", "detail": err.splitlines()[0][len(path) + 1 : 200]}
                break
            if code != 0:
                result = {
                    "outcome": "crash",
                    "detail": f"{argv[0]}: exit {code} without a position: {err[:300]}",
                }
                break
            if argv[0] == "explain":
                json.loads(stdout.getvalue())  # the JSON must parse
        result["seconds"] = time.process_time() - start
        out.write(json.dumps(result) + "\n")
        out.flush()


def _address_space() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


@dataclass
class Report:
    """Counts of outcomes, the slowest input (CPU seconds, and the input), and the failing
    inputs."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    slowest: float = 0.0
    slowest_input: bytes = b""
    failures: list[tuple[str, bytes, str]] = field(default_factory=list)

    @property
    def tried(self) -> int:
        return sum(self.counts.values())

    def add(self, outcome: str, data: bytes, detail: str, seconds: float) -> None:
        self.counts[outcome] += 1
        if seconds > self.slowest:
            self.slowest, self.slowest_input = seconds, data
        if outcome in ("crash", "hang"):
            self.failures.append((outcome, data, detail))

    def merge(self, other: Report) -> None:
        for k, v in other.counts.items():
            self.counts[k] += v
        if other.slowest > self.slowest:
            self.slowest, self.slowest_input = other.slowest, other.slowest_input
        self.failures += other.failures

    def summary(self) -> str:
        counts = ", ".join(f"{k} {v}" for k, v in self.counts.items())
        return f"{self.tried} inputs: {counts}; slowest {self.slowest:.2f} s of CPU"


class Runner:
    """A worker process fed one input at a time; restarted after a hang or a crash that
    killed it."""

    def __init__(self, timeout: float = 5.0, memory_bytes: int = 1 << 30):
        self.timeout = timeout
        self.memory_bytes = memory_bytes
        self.proc: subprocess.Popen | None = None

    def _start(self) -> subprocess.Popen:
        env = dict(os.environ, PYTHONHASHSEED="0")
        return subprocess.Popen(
            [sys.executable, __file__, "--serve", str(self.memory_bytes)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            text=True,
            bufsize=1,
        )

    def run(self, data: bytes) -> tuple[str, str, float]:
        """The outcome of one input, a detail (the message or the exception) and the CPU
        seconds it took (the hang bound is wall time)."""
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
            self._warm_up()
        self.proc.stdin.write(json.dumps({"data": base64.b64encode(data).decode()}) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], self.timeout)
        if not ready:
            self.close()
            return "hang", f"no answer within {self.timeout} s", self.timeout
        line = self.proc.stdout.readline()
        if not line:
            code = self.proc.wait()
            self.close()
            return "crash", f"the worker died (exit {code})", 0.0
        result = json.loads(line)
        return result["outcome"], result["detail"], result["seconds"]

    def _warm_up(self) -> None:
        """Import everything before the first timed input (the imports take a while)."""
        self.proc.stdin.write(
            json.dumps({"data": base64.b64encode(SEEDS[0].encode()).decode()}) + "\n"
        )
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], 120)
        if not ready or not self.proc.stdout.readline():
            raise RuntimeError("the fuzz worker did not start")

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc.stdin.close()
            self.proc.stdout.close()
            self.proc = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def campaign(inputs, runner: Runner) -> Report:
    report = Report()
    for data in inputs:
        outcome, detail, seconds = runner.run(data)
        report.add(outcome, data, detail, seconds)
    return report


if __name__ == "__main__" and sys.argv[1:2] == ["--serve"]:
    _serve(int(sys.argv[2]))
