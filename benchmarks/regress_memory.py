#!/usr/bin/env python3
"""Peak memory of `nfacep regress` in global mode (one task simulates the whole stream),
before and after its tasks streamed, side by side in one run.

For each size it makes the vectors once (`nfacep vectors`, with timers so that the mode is
``global``: ``--tick-tuples`` makes the expiry depend on the position in the whole stream),
then runs `nfacep regress --simulator verilator --mode native` on them with the code of two
revisions (``--before``, default the commit before the streamed tasks, and ``--after``,
default HEAD), each exported by ``revision.export`` into a temporary folder laid out as the
installed package and put on PYTHONPATH (which the Spark JVM hands on to its Python workers).
Each command runs in a fresh process (its own JVM, a
fresh build cache); a thread samples /proc every 0.1 s for the processes below it and keeps
each Python process's peak resident memory (``VmHWM``): the driver, and the Spark Python
workers (the daemon and the workers it forks). The JVM and the simulator's process are not
counted (shown apart: the native model's peak). The two reports must be equal but for the
run's times.

    python benchmarks/regress_memory.py                       # 10^6 and 10^7 tuples
    python benchmarks/regress_memory.py --sizes 100000        # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import threading
import time

from revision import export

ROOT = pathlib.Path(__file__).resolve().parent.parent
#: The last commit before the regress tasks streamed.
BEFORE = "0865bff"
QUERY = "queries/marathon.sql"
ENGINE = ("--partitions", "64", "--tick-tuples", "1000", "--timer-bits", "4")


class Peaks:
    """Samples the processes below ``pid`` until stopped: each one's peak RSS (VmHWM, MB)."""

    def __init__(self, pid: int):
        self.pid = pid
        self.peak: dict[int, float] = {}
        self.kind: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _children(self) -> dict[int, int]:
        parents = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    pass
        return parents

    def _loop(self) -> None:
        while not self._stop.wait(0.1):
            parents = self._children()
            tree, grew = {self.pid}, True
            while grew:
                new = {p for p, parent in parents.items() if parent in tree} - tree
                tree |= new
                grew = bool(new)
            for pid in tree:
                try:
                    with open(f"/proc/{pid}/status") as f:
                        status = dict(line.split(":", 1) for line in f if ":" in line)
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
                except OSError:
                    continue
                hwm = int(status.get("VmHWM", "0 kB").split()[0]) / 1024
                self.peak[pid] = max(self.peak.get(pid, 0.0), hwm)
                name = status.get("Name", "").strip()
                if cmd:  # (as last seen with one: an ending process has no command line)
                    self.kind[pid] = (
                        "driver"
                        if pid == self.pid
                        else "worker"
                        if "pyspark" in cmd and "python" in name
                        else "simulator"
                        if "nfacep_native" in cmd
                        else "jvm"
                        if name == "java"
                        else "other"
                    )

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        by = {}
        for pid, mb in self.peak.items():
            by.setdefault(self.kind.get(pid, "other"), []).append(mb)
        workers = by.get("worker", [])
        driver = max(by.get("driver", [0.0]))
        return {
            "driver": driver,
            "worker_max": max(workers, default=0.0),
            "workers": sum(workers),
            "python": driver + sum(workers),
            "simulator": max(by.get("simulator", [0.0])),
            "jvm": max(by.get("jvm", [0.0])),
        }


def command(tree: pathlib.Path, args: list[str]) -> tuple[float, dict, str]:
    """Run ``nfacep ARGS`` with the code in ``tree``; seconds, peaks and its stderr's end."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    code = (
        "import sys, nfacep; assert nfacep.__file__.startswith(sys.argv[1]), "
        "nfacep.__file__; from nfacep.cli import main; sys.exit(main(sys.argv[2:]))"
    )
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        # (in the tree: `python -c` puts its folder first on sys.path)
        child = subprocess.Popen(
            [sys.executable, "-c", code, str(tree), *args],
            env=env,
            cwd=tree,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        peaks = Peaks(child.pid)
        rc = child.wait()
        seconds = time.perf_counter() - t0
        result = peaks.stop()
        err.seek(0)
        tail = err.read().decode(errors="replace")[-2000:]
    if rc not in ((0, 1) if args[0] == "regress" else (0,)):
        raise SystemExit(f"nfacep {' '.join(args)} exited with {rc}:\n{tail}")
    return seconds, result, tail


def vectors(
    tree: pathlib.Path, out: pathlib.Path, tuples: int, keys: int, master: str, options=()
) -> tuple[float, dict, dict]:
    """``nfacep vectors`` of the marathon query in ``tree``: ``tuples`` tuples of ``keys`` keys
    (seed 1) into ``out`` on the Spark ``master``, with ``options`` (the engine's); its
    seconds, memory peaks (:func:`command`) and manifest."""
    argv = ["vectors", str(ROOT / QUERY), "--tuples", str(tuples), "--keys", str(keys)]
    argv += ["--seed", "1", "--out", str(out), "--master", master, "--overwrite", *options]
    seconds, peaks, _ = command(tree, argv)
    return seconds, peaks, json.loads((out / "manifest.json").read_text())


def regress(
    tree: pathlib.Path, out: pathlib.Path, master: str, cache: pathlib.Path
) -> tuple[float, dict, dict, str]:
    """``nfacep regress`` in ``tree`` of the vectors ``out`` (the marathon query's), natively
    under Verilator on the Spark ``master``, its builds cached in ``cache``: its seconds,
    memory peaks, report and the tail of its output (:func:`command`)."""
    argv = ["regress", str(ROOT / QUERY), "--vectors", str(out), "--simulator", "verilator"]
    argv += ["--mode", "native", "--master", master, "--quiet", "--build-dir", str(cache)]
    seconds, peaks, tail = command(tree, argv)
    return seconds, peaks, json.loads((out / "regress_report.json").read_text()), tail


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--before", default=BEFORE, help="revision before (default %(default)s)")
    ap.add_argument("--after", default="HEAD", help="revision after (default %(default)s)")
    ap.add_argument("--keys", type=int, default=200)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--work", help="folder for vectors and caches (default: a temporary one)")
    args = ap.parse_args()
    work = pathlib.Path(args.work or tempfile.mkdtemp(prefix="regress-memory-"))
    trees = {
        "before": pathlib.Path(export(args.before, work / "before")),
        "after": pathlib.Path(export(args.after, work / "after")),
    }
    rows = []
    for n in args.sizes:
        out = work / f"v{n}"
        seconds, peaks, manifest = vectors(trees["after"], out, n, args.keys, args.master, ENGINE)
        assert manifest["expected"]["mode"] == "global", manifest["expected"]
        rows.append(("vectors", n, seconds, peaks))
        print(
            f"vectors {n}: {seconds:.0f} s, {manifest['counts']['matches_total']} matches, "
            f"{manifest['counts']['drops']} drops",
            flush=True,
        )
        reports = {}
        for side in ("before", "after"):
            seconds, peaks, report, tail = regress(
                trees[side], out, args.master, work / f"cache-{side}"
            )
            assert report["mode"] == "global" and report["equal"], (side, tail)
            reports[side] = {k: v for k, v in report.items() if k != "run"}
            rows.append((f"regress {side}", n, seconds, peaks))
            print(f"regress {side} {n}: {seconds:.0f} s, {peaks}", flush=True)
        same = reports["before"] == reports["after"]
        print(
            f"{n} tuples: the reports are {'equal' if same else 'DIFFERENT'} (but the run's times)",
            flush=True,
        )
        assert same
    print()
    print(
        "| command | tuples | wall s | driver MB | Python workers MB (largest) | "
        "driver + workers MB | native model MB | JVM MB |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for what, n, seconds, p in rows:
        print(
            f"| {what} | {n:,} | {seconds:.0f} | {p['driver']:.0f} | {p['workers']:.0f} "
            f"({p['worker_max']:.0f}) | {p['python']:.0f} | {p['simulator']:.0f} | "
            f"{p['jvm']:.0f} |"
        )


if __name__ == "__main__":
    main()
