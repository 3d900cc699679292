#!/usr/bin/env python3
"""`nfacep vectors` then `nfacep regress` with every default, as a user types them: wall time.

    nfacep vectors queries/marathon.sql --tuples N --out DIR
    nfacep regress queries/marathon.sql --vectors DIR

No engine option, no simulator, mode, master or task count: the default engine (the table
store indexed directly by marathon's 16-bit runner, 65,536 entries), as many keys as it has
entries, Spark's ``local[*]``, and `regress`'s fastest exact simulation (Verilator's native
model when Verilator is installed, sharded by key when the engine allows). The simulator
build cache is a fresh one (``NFACEP_SIM_CACHE``), so the model's build is in the time, unless
``--warm`` reuses the default cache. `regress` must report 0 differences.

Where the time goes, from each command's wall time and the stage times it records (the
manifest's and the report's ``run.seconds``):

- `vectors`: *start* (Python's start-up and imports, the Spark session's start, its stop:
  the wall time less the command's own total), *generate*, *match* (the reference matcher in
  Spark tasks), *write* (the expected matches and drops written, sorted);
- `regress`: *start* (Python, the Spark session's start and, beside it, the engine's emission
  and its model's build: the wall time less the simulation and the check), of which *build*
  (the emission and build alone), *simulate* (the shards in Spark tasks), *check* (the outer
  joins against the expected matches).

    python benchmarks/defaults_flow.py --tuples 1000000
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

from fabric import NFACEP

QUERY = "queries/marathon.sql"
ROOT = pathlib.Path(__file__).resolve().parent.parent


def timed(argv: list[str], env: dict) -> tuple[float, str]:
    """Run ``nfacep ARGV``; its wall time and stderr (a failure stops the benchmark)."""
    started = time.monotonic()
    cmd = [*NFACEP, *argv]
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    if r.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({r.returncode}):\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    return seconds, r.stdout + r.stderr


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tuples", type=int, nargs="+", default=[1_000_000])
    ap.add_argument("--work", help="folder for the vectors (default: a temporary one)")
    ap.add_argument("--warm", action="store_true", help="reuse the default build cache")
    args = ap.parse_args()
    work = pathlib.Path(args.work or tempfile.mkdtemp(prefix="defaults-flow-"))
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, NFACEP_PROGRESS_SECONDS="600")
    rows = []
    for n in args.tuples:
        if not args.warm:
            env["NFACEP_SIM_CACHE"] = str(work / f"cache-{n}")
        out = work / f"v-{n}"
        shutil.rmtree(out, ignore_errors=True)
        vec_s, _ = timed(["vectors", QUERY, "--tuples", str(n), "--out", str(out)], env)
        reg_s, _ = timed(["regress", QUERY, "--vectors", str(out)], env)
        manifest = json.loads((out / "manifest.json").read_text())
        report = json.loads((out / "regress_report.json").read_text())
        if not report["equal"]:
            sys.exit(f"regress of {n} tuples found differences: {out}")
        p = manifest["engine"]
        vs, rs = manifest["run"]["seconds"], report["run"]["seconds"]
        rows.append(
            (
                f"{n:,}",
                f"{p['store']} {p['partitions']:,}",
                f"{manifest['keys_present']:,}",
                f"{report['simulator']} {report['sim_mode']}, {report['mode']}",
                f"{vec_s - vs['total']:.0f}",
                f"{vs['generate']:.0f}",
                f"{vs['match']:.0f}",
                f"{vs['expected'] - vs['match']:.0f}",
                f"{vec_s:.0f}",
                f"{reg_s - rs['simulate'] - rs['check']:.0f} ({rs['build']:.0f})",
                f"{rs['simulate']:.0f}",
                f"{rs['check']:.0f}",
                f"{reg_s:.0f}",
                f"{vec_s + reg_s:.0f}",
            )
        )
    head = (
        "tuples",
        "engine",
        "keys",
        "simulation",
        "v: start",
        "generate",
        "match",
        "write",
        "vectors s",
        "r: start (build)",
        "simulate",
        "check",
        "regress s",
        "total s",
    )
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, *rows]:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)))
    load = os.getloadavg()[0]
    cache = "warm" if args.warm else "fresh"
    print(
        f"({os.cpu_count()} cores, load average {load:.1f} at the end; {cache} build cache; {work})"
    )


if __name__ == "__main__":
    main()
