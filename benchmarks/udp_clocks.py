#!/usr/bin/env python3
"""The UDP board top on the Colorlight 5A-75B, built: LUTs, flip-flops, block RAMs and the
frequency nextpnr reached on each clock, for the engines beside the link that issue 26 names
(the marathon query: the test's 2-partition pipeline, ``build``'s default table, the pipeline
store at 64 and 256 partitions; and issue 31's SDRAM store, 65,536 entries in the board's
SDRAM at the clock the build chooses, ``sdram``, or at 89.29 MHz, ``sdram-89``), with the
engine's clock and whether it keeps up with the line.

Each row is one ``nfacep build --link udp`` (``nfacep.boards.build``, Yosys and nextpnr, several
minutes each), one at a time; a build that misses timing still has its report and is listed
(``met`` no). ``--seeds`` builds each configuration once per nextpnr placement seed, so that
figures from two commits compare placements alike rather than one lucky or unlucky placement
(nextpnr's default seed when not given). Each row also names the slowest path of each clock
(its first and last cell, from nextpnr's report). Run it on two commits to compare them (the
table and each row of the CSV say which commit it measured), and with ``--router router2`` to
route with nextpnr's other router (the 256-partition top, 89% of the LUTs, routes only with
it, in about 40 minutes; nextpnr's default, ``router1``, does not finish it: boards/UDP.md):

    python benchmarks/udp_clocks.py [--only 2,64,256,default,sdram,sdram-89] \
        [--seeds 1,2,3,default] [--router router1|router2] [--csv F] [--keep DIR]

The rows are added to ``benchmarks/results/udp_clocks.csv`` (``--csv``), those of earlier runs
kept.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fabric import earlier_rows, write_merged
from revision import commit_of

ROOT = pathlib.Path(__file__).resolve().parent.parent
MARATHON = ROOT / "queries" / "marathon.sql"
#: Where the rows go (``--csv``), added to those of earlier runs.
RESULTS = ROOT / "benchmarks" / "results" / "udp_clocks.csv"
CONFIGS = {
    "2": {"store": "pipeline", "partitions": 2},
    "64": {"store": "pipeline", "partitions": 64},
    "256": {"store": "pipeline", "partitions": 256},
    "default": {},
    "sdram": {"store": "sdram"},
    "sdram-89": {"store": "sdram", "engine_mhz": 89.29},
}


def measure(
    name: str, given: dict, work: str, seed: int | None = None, router: str | None = None
) -> dict:
    """One build of the UDP top with the engine ``given`` (``build``'s default for the rest),
    placed with nextpnr's ``seed`` and routed by its ``router`` (its default, ``router1``,
    when None)."""
    from nfacep import boards, compile_file
    from nfacep.boards.defaults import board_engine
    from nfacep.boards.flow import BuildError

    nfa = compile_file(str(MARATHON))
    board = boards.get_board("colorlight-5a75b")
    given = dict(given)
    mhz = given.pop("engine_mhz", None)
    params = board_engine(nfa, board, given)
    folder = (
        f"{work}/{name}"
        + ("" if seed is None else f"-seed{seed}")
        + ("" if router is None else f"-{router}")
    )
    try:
        report = boards.build(
            nfa,
            board,
            folder,
            params,
            link="udp",
            query_file=str(MARATHON),
            engine_mhz=mhz,
            seed=seed,
            router=router,
        )
    except BuildError as err:
        report = err.report
        if report is None:
            raise
    res = report["resources"]
    link = report["link"]
    row = {
        "engine": f"{params.store} {params.partitions}",
        "seed": "default" if seed is None else seed,
        "router": router or "router1",
        "luts": res.get("luts", {}).get("used"),
        "ffs": res.get("ffs", {}).get("used"),
        "brams": res.get("brams", {}).get("used"),
        "met": report["timing_met"],
        "engine_mhz": link.get("engine_mhz"),
        "keeps_up": link.get("keeps_up"),
        "pnr_s": report.get("seconds", {}).get("nextpnr-ecp5"),
    }
    for clock, mhz in sorted(report["fmax_mhz"].items()):
        row[f"fmax {clock}"] = f"{mhz:.2f}/{report['constraint_mhz'][clock]:g}"
    row.update(slowest_paths(f"{folder}/toolchain"))
    return row


def slowest_paths(toolchain: str) -> dict:
    """Each clock's slowest path in nextpnr's report (``--report``): its first and last cell."""
    found = list(pathlib.Path(toolchain).glob("*.report.json"))
    if not found:
        return {}
    out = {}
    for path in json.loads(found[0].read_text()).get("critical_paths", []):
        steps = path.get("path") or []
        if steps and path.get("from") == path.get("to"):
            first, last = steps[0]["from"]["cell"], steps[-1]["to"]["cell"]
            out[f"path {path['from']}"] = f"{first} -> {last}"
    return out


def _seed(text: str) -> int | None:
    """A seed of ``--seeds``: a number, or ``default`` (nextpnr's own)."""
    return None if text.strip() == "default" else int(text)


def main() -> None:
    from nfacep.boards.toolchain import ROUTERS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--only", default="2,64,256,default", help="configurations (%(default)s; sdram, sdram-89)"
    )
    ap.add_argument(
        "--seeds",
        help="nextpnr placement seeds, each configuration once per seed ('default': nextpnr's)",
    )
    ap.add_argument(
        "--router",
        choices=ROUTERS,
        help="nextpnr's router (default: nextpnr's, router1)",
    )
    ap.add_argument(
        "--csv",
        default=str(RESULTS),
        help="add the rows to this CSV file, a row of the same commit, engine, seed and router "
        "replaced, the others kept (default: %(default)s)",
    )
    ap.add_argument("--keep", help="build in this folder and keep it (nextpnr's timing report)")
    args = ap.parse_args()
    commit = commit_of() or ""
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        work = args.keep or scratch
        seeds = [None] if not args.seeds else [_seed(x) for x in args.seeds.split(",")]
        for name in args.only.split(","):
            for seed in seeds:
                row = {"commit": commit, **measure(name, CONFIGS[name], work, seed, args.router)}
                rows.append(row)
                print("  ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    print(f"\nUDP top on the Colorlight 5A-75B at {commit} (fmax: reached/constraint MHz)")
    keys = sorted(
        {k for row in rows for k in row} - {"commit"},
        key=lambda k: (k.startswith("path"), k.startswith("fmax"), k != "engine", k),
    )
    print(" | ".join(keys))
    for row in rows:
        print(" | ".join(str(row.get(k, "-")) for k in keys))
    add_rows(args.csv, [{"commit": row["commit"], **{k: row.get(k) for k in keys}} for row in rows])


def add_rows(path: str, rows: list[dict]) -> None:
    """Add ``rows`` to the CSV at ``path`` (made when missing): a row of the same commit,
    engine, seed and router replaces the file's, the file's other rows stay."""
    old = earlier_rows(path, True)
    write_merged(
        path,
        old,
        rows,
        key=lambda r: tuple(str(r.get(k)) for k in ("commit", "engine", "seed", "router")),
    )


if __name__ == "__main__":
    main()
