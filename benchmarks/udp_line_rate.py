#!/usr/bin/env python3
"""The UDP board at Gigabit line rate, beside the paper's Figure 10: tuples/s and frames/s the
board takes against tuples per packet, in simulation (``nfacep sim --link udp``'s back-end).

The board top of ``nfacep build --link udp`` (MAC, UDP link, clock-domain crossings, engine)
runs as Verilog under Icarus; cocotbext-eth sends TUPLES packets on its GMII pins back to back
with the minimum inter-frame gap (the wire's limit), and the board's RECORDS packets are
decoded and checked against the reference matcher. For each tuple size and packets of 1 up to
the most that fit a 1,500-byte MTU, the table prints the frames/s and tuples/s the board took,
the physical limit 10^9 / 8 / (frame bytes + 20) beside them, the share of the line, the
frames it refused (``engine_full``: the engine fell behind) and the latency in 8-ns cycles
from a tuple's last byte on the receive pins to its record's first byte on the transmit pins.

Two tuples: the marathon query's (11 bytes on the wire) and a 16-byte tuple like the paper's
(four 32-bit fields, a 128-bit tuple). The paper (Woods, Teubner, Alonso, VLDB 2010, sec. 7):
1,451,373 one-tuple packets/s and 7,279,215 tuples/s with 90 tuples a packet (93% of the
7.81M/s its 128-bit tuples allow).

    python benchmarks/udp_line_rate.py [--frames 24] [--plot benchmarks/udp_line_rate.png]
"""

from __future__ import annotations

import argparse
import pathlib
import tempfile

import numpy as np
from fabric import write_csv

import nfacep
from nfacep.io import reader, tuples
from nfacep.links.udp.host import max_tuples_per_packet
from nfacep.params import EngineParams
from nfacep.sim.udp import UdpSimOptions, UdpSimulation

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAPER = {"frames_per_s_1": 1_451_373, "tuples_per_s_90": 7_279_215}

#: A stream of 16-byte tuples like the paper's, and a query over it with a partition key.
WIDE = """CREATE STREAM wide (key UINT(32), a UINT(32), b UINT(32), c UINT(32));
QUERY rise FROM wide
PARTITION key
PATTERN ( A B+ C )
DEFINE
  A AS (a > 3000000000)
  B AS (b > a)
  C AS (c < 1000);
"""


def wide_stream(n: int, seed: int = 1) -> tuples.Tuples:
    rng = np.random.default_rng(seed)
    cols = {
        "key": rng.integers(0, 16, n, dtype=np.uint64),
        **{f: rng.integers(0, 2**32, n, dtype=np.uint64) for f in "abc"},
    }
    cols["c"] = np.where(rng.random(n) < 0.3, cols["c"] % 1000, cols["c"])
    return tuples.Tuples(cols, n, "wide")


def marathon_stream(n: int) -> tuples.Tuples:
    schema = nfacep.compile_file(str(ROOT / "queries" / "marathon.sql")).program.schema
    data = reader.read(str(ROOT / "queries" / "marathon.csv"), schema)
    idx = np.arange(n) % data.n
    cols = {k: v[idx] for k, v in data.columns.items()}
    return tuples.Tuples(cols, n, "marathon")


def sizes(most: int) -> list[int]:
    out = [k for k in (1, 2, 4, 8, 16, 32, 64, 90) if k < most]
    return [*out, most]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--frames", type=int, default=24, help="TUPLES packets per run (default %(default)s)"
    )
    ap.add_argument("--partitions", type=int, default=16)
    ap.add_argument("--simulator", default="icarus")
    ap.add_argument("--csv", default=str(ROOT / "benchmarks" / "results" / "udp_line_rate.csv"))
    ap.add_argument("--plot", metavar="PNG")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        wide = pathlib.Path(tmp) / "wide.sql"
        wide.write_text(WIDE)
        cases = [
            (
                "marathon (11 B)",
                nfacep.compile_file(str(ROOT / "queries" / "marathon.sql")),
                marathon_stream,
            ),
            ("16-byte tuple", nfacep.compile_file(str(wide)), wide_stream),
        ]
        rows = []
        params = EngineParams(partitions=args.partitions)
        header = (
            f"{'tuple':16} {'per pkt':>7} {'frame B':>7} {'frames/s':>11} {'limit':>11} "
            f"{'tuples/s':>12} {'limit':>12} {'line':>6} {'refused':>7} "
            f"{'latency min/med/max cycles':>27}"
        )
        print(header)
        print("-" * len(header))
        for label, nfa, make in cases:
            tb = nfacep.wire.tuple_bytes(nfa.program.schema)
            for per in sizes(max_tuples_per_packet(tb)):
                n = per * args.frames
                backend = UdpSimulation(
                    UdpSimOptions(
                        simulator=args.simulator,
                        tuples_per_packet=per,
                        check=True,
                        build_dir=pathlib.Path(tmp) / "cache",
                    )
                )
                row = _row(label, tb, per, backend.run(nfa, make(n), params))
                rows.append(row)
                lat = (row["latency_min"], row["latency_median"], row["latency_max"])
                latency = "/".join(map(str, lat)) if lat[0] is not None else "-"
                print(
                    f"{label:16} {per:7d} {row['frame_bytes']:7d} {row['frames_per_s']:11,d} "
                    f"{row['limit_frames_per_s']:11,d} {row['tuples_per_s']:12,d} "
                    f"{row['limit_tuples_per_s']:12,d} {row['of_line']:6.1%} "
                    f"{row['refused']:7d} {latency:>27}" + ("" if row["correct"] else "  WRONG")
                )
    print(
        f"\npaper (Figure 10, 128-bit tuples): {PAPER['frames_per_s_1']:,} one-tuple "
        f"packets/s; {PAPER['tuples_per_s_90']:,} tuples/s at 90 tuples a packet"
    )
    write_csv(args.csv, rows)
    if args.plot:
        plot(rows, args.plot)


def _row(label: str, tb: int, per: int, res) -> dict:
    """The CSV row of one run: ``per`` tuples of ``tb`` bytes a packet, its result ``res``."""
    line, lat = res.line, res.latency
    return {
        "tuple": label,
        "tuple_bytes": tb,
        "tuples_per_packet": per,
        "frame_bytes": max(54 + per * tb + 4, 64),
        "frames_per_s": round(line["frames_per_s"]),
        "limit_frames_per_s": round(line["limit_frames_per_s"]),
        "tuples_per_s": round(line["tuples_per_s"]),
        "limit_tuples_per_s": round(line["limit_tuples_per_s"]),
        "of_line": round(line["of_line"], 4),
        "refused": sum(res.status[c] for c in ("engine_full", "bad_size", "bad_udp")),
        "latency_min": lat.get("min"),
        "latency_median": lat.get("median"),
        "latency_max": lat.get("max"),
        "correct": res.failure is None,
    }


def plot(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for label in dict.fromkeys(r["tuple"] for r in rows):
        rs = [r for r in rows if r["tuple"] == label]
        x = [r["tuples_per_packet"] for r in rs]
        ax1.plot(x, [r["tuples_per_s"] / 1e6 for r in rs], "o-", label=f"nfacep, {label}")
        ax1.plot(x, [r["limit_tuples_per_s"] / 1e6 for r in rs], ":", color="grey")
        ax2.plot(x, [r["frames_per_s"] / 1e6 for r in rs], "o-", label=f"nfacep, {label}")
        ax2.plot(x, [r["limit_frames_per_s"] / 1e6 for r in rs], ":", color="grey")
    ax1.plot([90], [PAPER["tuples_per_s_90"] / 1e6], "k*", ms=12, label="paper (128-bit)")
    ax2.plot([1], [PAPER["frames_per_s_1"] / 1e6], "k*", ms=12, label="paper (128-bit)")
    ax1.set(
        xscale="log",
        xlabel="tuples per packet",
        ylabel="M tuples/s taken",
        title="tuples/s (dotted: the wire's limit)",
    )
    ax2.set(
        xscale="log",
        xlabel="tuples per packet",
        ylabel="M frames/s taken",
        title="frames/s (dotted: the wire's limit)",
    )
    for ax in (ax1, ax2):
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("UDP board at 1 Gb/s in simulation, beside the paper's Figure 10")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"-> {path}")


if __name__ == "__main__":
    main()
