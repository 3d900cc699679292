#!/usr/bin/env python3
"""Start-up: the time of a small ``nfacep`` command, and what it imports (issue 25, item 6).

Each command runs ``--repeat`` times as a new process (the installed ``nfacep`` script beside
this Python, else the same entry point through ``python -c``) after one unmeasured warm-up
run (so the grammar's tables and the compiled loops are cached and the files are in the page
cache). For each, the median of the CPU time (user + system of the child, from
``getrusage``) and of the wall time; on a shared machine the CPU time is the steadier figure.
One more run under ``python -X importtime`` gives the imports that took longest (the
top-level ones, with what they imported: cumulative milliseconds), which is where to look
for what a command loads and does not use.

Every command is timed twice: with Python's bytecode cached (in a temporary
``PYTHONPYCACHEPREFIX``, as an installation has it: pip compiles the modules when it installs
them) and with none (``PYTHONDONTWRITEBYTECODE``, every module compiled from its source on
every run, as in a checkout whose environment sets it).

The commands: ``check`` of the marathon query, ``match`` of it on its own small example
file (``queries/marathon.csv``, 278 tuples) to a CSV file, and ``--help`` (every registered
command's parser). Issue 25's goals: check under 0.3 s, match under 0.5 s. Two anchors are
timed alike: Python doing nothing, and the script ``benchmarks/csv_read.py`` times against
``match`` (it imports pyarrow and reads the same 278-tuple file with the stream's types):
what ``match`` costs more than that script is nfacep's start-up (issue 30, item 3).

``--rev REV`` also times the nfacep commands of a revision (its tree exported with ``git
archive`` by ``revision.export`` and put first on ``PYTHONPATH``, the same interpreter and
packages), in
turns with the working tree's run by run, so that the load of a shared machine falls on both
alike.

    python benchmarks/startup.py [--repeat 5] [--top 4] [--rev REV]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from revision import export

ROOT = pathlib.Path(__file__).resolve().parents[1]
QUERY = str(ROOT / "queries" / "marathon.sql")
INPUT = str(ROOT / "queries" / "marathon.csv")

#: name, arguments (``{out}`` is a scratch folder), goal in seconds (or None)
COMMANDS = [
    ("check", ["check", QUERY], 0.3),
    ("match (278-tuple CSV)", ["match", QUERY, "--input", INPUT, "--output", "{out}/m.csv"], 0.5),
    ("--help", ["--help"], None),
]


def anchors() -> list[tuple[str, list[str]]]:
    """Name and arguments of this Python of each anchor: what a command's start-up is
    compared with (the pyarrow script is ``csv_read.py``'s: one definition)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from csv_read import PYARROW_SCRIPT

    return [
        ("python, nothing imported", ["-c", "pass"]),
        ("pyarrow reads the 278-tuple CSV", ["-c", PYARROW_SCRIPT, INPUT]),
    ]


def _nfacep() -> list[str]:
    script = pathlib.Path(sys.executable).with_name("nfacep")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from nfacep.entry import main; main()"]


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """One run's CPU and wall seconds; stops the script when the command fails."""
    cpu, wall = _child_cpu(), time.perf_counter()
    run = subprocess.run(argv, capture_output=True, text=True, env=env)
    wall, cpu = time.perf_counter() - wall, _child_cpu() - cpu
    if run.returncode != 0:
        sys.exit(f"{' '.join(argv)}: exit {run.returncode}\n{run.stderr}")
    return cpu, wall


#: ``nfacep`` run through this Python's ``-c`` (for ``-X importtime``)
PROBE = ["-c", "import sys; from nfacep.entry import main; sys.argv[0] = 'nfacep'; main()"]


def top_imports(argv: list[str], env: dict[str, str], top: int) -> list[tuple[str, int]]:
    """The ``top`` top-level imports of one run of this Python with ``argv`` by cumulative
    time (microseconds)."""
    run = subprocess.run(
        [sys.executable, "-X", "importtime", *argv],
        capture_output=True,
        text=True,
        env=env,
    )
    found = []
    for line in run.stderr.splitlines():
        if not line.startswith("import time:") or line.count("|") != 2:
            continue
        _, cumulative, name = line.split("|")
        if cumulative.strip().isdigit() and not name[1:].startswith(" "):
            found.append((name.strip(), int(cumulative)))
    return sorted(found, key=lambda f: -f[1])[:top]


def environments(pycache: str) -> list[tuple[str, dict[str, str]]]:
    """The two settings: bytecode cached under ``pycache``, and none."""
    cached = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    cached["PYTHONPYCACHEPREFIX"] = pycache
    none = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
    none["PYTHONDONTWRITEBYTECODE"] = "1"
    return [("cached", cached), ("none", none)]


def runs_of(
    variants: list[tuple[str, list[str], dict[str, str]]], repeat: int
) -> list[tuple[float, float]]:
    """CPU and wall medians of each variant (a name, its argv, its environment), the variants
    in turns, after one unmeasured warm-up run of each (caches written, files read once)."""
    for _, argv, env in variants:
        timed(argv, env)
    runs: list[list[tuple[float, float]]] = [[] for _ in variants]
    for _ in range(repeat):
        for i, (_, argv, env) in enumerate(variants):
            runs[i].append(timed(argv, env))
    return [
        (statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs)) for rs in runs
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="runs of each (default 5)")
    ap.add_argument("--top", type=int, default=4, help="imports listed (default 4)")
    ap.add_argument("--rev", help="also a git revision's nfacep, in turns with the working tree")
    opts = ap.parse_args()
    nfacep = _nfacep()
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}, {opts.repeat} runs")
    print()
    print("| command | bytecode | CPU median | wall median | goal | top imports (cumulative ms) |")
    print("| --- | --- | ---: | ---: | ---: | --- |")
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(tempfile.TemporaryDirectory())
        pycache = stack.enter_context(tempfile.TemporaryDirectory())
        rev = None
        if opts.rev is not None:
            rev = export(opts.rev, stack.enter_context(tempfile.TemporaryDirectory()))
        # name, argv, goal, the arguments of this Python for -X importtime, whether nfacep's
        commands = [(name, [sys.executable, *a], None, a, False) for name, a in anchors()]
        for name, args, goal in COMMANDS:
            args = [a.format(out=out) for a in args]
            commands.append((name, nfacep + args, goal, PROBE + args, True))
        for name, argv, goal, probe, ours in commands:
            for bytecode, env in environments(pycache):
                variants = [(name, argv, env)]
                if rev is not None and ours:
                    variants.append((f"{name} at {opts.rev}", argv, {**env, "PYTHONPATH": rev}))
                goal_text = "" if goal is None else f"< {goal} s"
                for (label, _, env), (cpu, wall) in zip(
                    variants, runs_of(variants, opts.repeat), strict=True
                ):
                    imports = ", ".join(
                        f"{m} {us / 1000:.0f}" for m, us in top_imports(probe, env, opts.top)
                    )
                    print(
                        f"| {label} | {bytecode} | {cpu:.3f} s | {wall:.3f} s | {goal_text} "
                        f"| {imports} |"
                    )


if __name__ == "__main__":
    main()
