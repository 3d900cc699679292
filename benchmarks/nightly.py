#!/usr/bin/env python3
"""The nightly regression at 10^8 tuples: `nfacep vectors` then `nfacep regress --simulator
verilator --mode native`, wall time and peak memory, one Spark core against two, in one run.

Two flows over marathon with 10,000 runners (Zipf-distributed, the generator's default) and the
block-RAM table indexed directly by the 16-bit runner (``--store table --partitions 65536``):

- ``sharded``: no timers, so capacity and timers cannot matter and the expected matches are
  computed per key in parallel; `regress` simulates shards of whole keys, one Spark task each;
- ``global``: the same with timers (``--tick-tuples 1000``), so expiry depends on the position
  in the whole stream: the expected matches are one exact pass and `regress` simulates the
  whole stream as one long simulation in one task.

Each command runs in a fresh process (its own JVM, a fresh build cache) with the code of HEAD
exported by ``revision.export`` (as ``regress_memory.py`` does, whose process sampler this uses):
the driver's and the PySpark workers' peak resident memory (``VmHWM``) and the JVM's and the
native model's apart. Every `regress` must report 0 differences, and the two masters' reports
must be equal but for the run's times.

    python benchmarks/nightly.py                                   # both flows, 10^8 tuples
    python benchmarks/nightly.py --tuples 1000000 --flows sharded  # a quick look
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from regress_memory import regress, vectors
from revision import export

TABLE = ("--store", "table", "--partitions", "65536")
FLOWS = {"sharded": TABLE, "global": (*TABLE, "--tick-tuples", "1000", "--timer-bits", "4")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tuples", type=int, default=100_000_000)
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--flows", nargs="+", choices=list(FLOWS), default=list(FLOWS))
    ap.add_argument("--masters", nargs="+", default=["local[2]", "local[1]"])
    ap.add_argument(
        "--global-masters",
        nargs="+",
        default=["local[2]"],
        help="masters for the global flow (one task simulates: the second core "
        "only helps `vectors`; default %(default)s)",
    )
    ap.add_argument("--work", help="folder for vectors and caches (default: a temporary one)")
    args = ap.parse_args()
    work = pathlib.Path(args.work or tempfile.mkdtemp(prefix="nightly-"))
    tree = pathlib.Path(export("HEAD", work / "tree"))
    rows = []
    for flow in args.flows:
        reports = {}
        for master in args.masters if flow == "sharded" else args.global_masters:
            tag = f"{flow}-{master.replace('[', '').replace(']', '')}"
            out = work / f"v-{tag}"
            seconds_v, peaks_v, manifest = vectors(
                tree, out, args.tuples, args.keys, master, ("--quiet", *FLOWS[flow])
            )
            mode = manifest["expected"]["mode"]
            assert mode == ("global" if flow == "global" else "partitioned"), manifest["expected"]
            print(
                f"{tag}: vectors {seconds_v:.0f} s, {manifest['counts']['matches_total']:,} "
                f"matches, {manifest['counts']['drops']:,} drops ({mode})",
                flush=True,
            )
            seconds_r, peaks_r, report, tail = regress(tree, out, master, work / f"cache-{tag}")
            assert report["equal"], tail
            # what was checked (the shards and cycles follow the master's tasks)
            reports[master] = {
                k: report[k]
                for k in ("mode", "equal", "counts", "by_query", "first", "tuples_simulated")
            }
            print(
                f"{tag}: regress {seconds_r:.0f} s, {report['shards']['simulated']} shards, "
                f"{report['cycles']:,} cycles, {report['counts']['differences']} differences",
                flush=True,
            )
            rows.append((flow, master, seconds_v, peaks_v, seconds_r, peaks_r, report))
            shutil.rmtree(out)  # the next master makes its own vectors: free the disk
        if len(reports) > 1:
            first, *others = reports.values()
            assert all(r == first for r in others), "the masters' reports differ"
            print(f"{flow}: the masters' reports give the same counts", flush=True)
    print()
    print(
        "| flow | master | vectors s | regress s | total | shards | expected matches | "
        "differences | peak MB, vectors: driver / Python workers (largest) / JVM | "
        "regress: the same / native model |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |")
    for flow, master, sv, pv, sr, pr, report in rows:
        total = sv + sr

        def peaks(p):
            return (
                f"{p['driver']:.0f} / {p['workers']:.0f} ({p['worker_max']:.0f}) / {p['jvm']:.0f}"
            )

        print(
            f"| {flow} | {master} | {sv:.0f} | {sr:.0f} | {int(total // 60)} min "
            f"{int(total % 60)} s | {report['shards']['simulated']} | "
            f"{report['counts']['expected']:,} | {report['counts']['differences']} | "
            f"{peaks(pv)} | {peaks(pr)} / {pr['simulator']:.0f} |"
        )


if __name__ == "__main__":
    main()
