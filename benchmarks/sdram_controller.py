#!/usr/bin/env python3
"""The SDRAM controller (nfacep.hdl.sdram) against the cycle-accurate model: sustained random
single-word read-modify-write operations per clock against the number of banks touched, with
uniform and Zipf addresses, in Amaranth's simulator; with --build, the controller alone through
Yosys and nextpnr on the Colorlight 5A-75B's LFE5U-25F (LUTs, FFs, Fmax).

A read-modify-write is a READ of a word followed by a WRITE of the same word, offered back to
back (the write does not wait for the read's data: the controller's own ceiling, before the
store's cache and hazard tracking). Requests are offered every clock and responses always
taken; the rate is RMW operations over the clocks from the first request accepted to the last,
so it includes refreshes (the chip's tREFI, 15.625 us) and the row misses the addresses cause.
Uniform: words drawn uniformly from the banks touched (almost every access misses its row).
Zipf: 65,536 keys of Zipf rank frequency (s = 1) scattered at random words of those banks.
Deterministic (fixed seeds): it counts clocks, not seconds. ``queue`` is the controller's
``queue_depth`` (requests waiting per bank; its reorder buffer is made large enough for every
queue to be full): the input is in order, so the deeper the queues the further ahead the
controller sees a request for another bank.

    python benchmarks/sdram_controller.py                # the table, 100 MHz
    python benchmarks/sdram_controller.py --clk-mhz 50 --ops 1000
    python benchmarks/sdram_controller.py --build        # and one nextpnr run
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import os
import random
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from amaranth.hdl import Cat, ClockSignal, Elaboratable, Module, Signal

from nfacep.hdl.sdram.controller import SDRAMController
from nfacep.hdl.sdram.model import SDRAMModel
from nfacep.hdl.sdram.sim import run_requests
from nfacep.hdl.sdram.timing import COLORLIGHT_5A75B, M12L16161A, SDRAMGeometry

ZIPF_KEYS = 65536
TIMING = M12L16161A.with_(power_up_ns=1000.0, init_refreshes=2)  # short power-up only


def addresses(geometry: SDRAMGeometry, banks: int, kind: str, n: int, seed: int) -> list:
    rng = random.Random(seed)
    words = geometry.rows * geometry.columns

    def word_address(w: int) -> tuple[int, int, int]:
        bank, rest = divmod(w, words)
        return bank, rest // geometry.columns, rest % geometry.columns

    if kind == "uniform":
        return [word_address(rng.randrange(banks * words)) for _ in range(n)]
    cdf = list(itertools.accumulate(1 / (k + 1) for k in range(ZIPF_KEYS)))
    scatter = [rng.randrange(banks * words) for _ in range(ZIPF_KEYS)]
    ranks = (bisect.bisect_left(cdf, rng.random() * cdf[-1]) for _ in range(n))
    return [word_address(scatter[min(k, ZIPF_KEYS - 1)]) for k in ranks]


def rmw_rate(
    geometry: SDRAMGeometry, banks: int, kind: str, ops: int, clk: float, queue: int
) -> dict:
    requests = []
    for i, (b, r, c) in enumerate(addresses(geometry, banks, kind, ops, seed=banks)):
        requests.append({"write": 0, "bank": b, "row": r, "column": c, "data": 0})
        requests.append({"write": 1, "bank": b, "row": r, "column": c, "data": i})
    reorder = 1 << (geometry.banks * queue - 1).bit_length()  # room for every queue full
    dut = SDRAMController(geometry, TIMING, clk, queue_depth=queue, reorder=reorder)
    model = SDRAMModel(geometry, TIMING.cycles(clk))
    run = run_requests(dut, model, requests, limit=100 * len(requests) + 10**5)
    span = run.accepted[-1] - run.accepted[0]
    return {
        "rmw_per_clock": ops / span,
        "activates_per_rmw": model.counts["ACTIVE"] / ops,
        "refreshes": model.counts["REFRESH"] - TIMING.init_refreshes,
        "clocks": span,
    }


def latencies(clk: float) -> dict:
    """Clocks from a read's acceptance to its response, the controller otherwise idle."""
    probes = {
        "row hit": (0, 1, 0),
        "bank closed": (1, 5, 0),
        "row miss": (0, 2, 0),
    }
    requests = [{"write": 1, "bank": 0, "row": 1, "column": 0, "data": 1}]
    for b, r, c in probes.values():
        requests.append({"write": 0, "bank": b, "row": r, "column": c, "data": 0, "wait": 50})
    dut = SDRAMController(COLORLIGHT_5A75B, TIMING, clk)
    run = run_requests(dut, SDRAMModel(COLORLIGHT_5A75B, TIMING.cycles(clk)), requests)
    return {
        name: answered - accepted
        for name, answered, accepted in zip(probes, run.answered, run.accepted[1:], strict=True)
    }


def connect_pins(m: Module, platform, sdram) -> None:
    """The board's SDRAM pins (amaranth-boards' ``SDRAMResource``) driven straight from
    ``sdram`` (:func:`nfacep.hdl.sdram.controller.pins_signature`), the clock out as is."""
    pins = platform.request("sdram", 0)
    m.d.comb += [
        pins.clk.o.eq(ClockSignal()),
        pins.ras.o.eq(sdram.ras),
        pins.cas.o.eq(sdram.cas),
        pins.we.o.eq(sdram.we),
        pins.ba.o.eq(sdram.ba),
        pins.a.o.eq(sdram.a),
        pins.dq.o.eq(sdram.dq_o),
        pins.dq.oe.eq(sdram.dq_oe),
        sdram.dq_i.eq(pins.dq.i),
    ]


def lfsr64(m: Module) -> Signal:
    """A 64-bit LFSR stepping every clock: the stimulus of a design built alone."""
    lfsr = Signal(64, init=1)
    m.d.sync += lfsr.eq(Cat(lfsr[1:], lfsr[0] ^ lfsr[1] ^ lfsr[3] ^ lfsr[4]))
    return lfsr


class _Top(Elaboratable):
    """The controller on the board's SDRAM pins, fed by an LFSR (requests offered every clock,
    responses taken when an LFSR bit says so) and folded into the LED, so nothing is trimmed."""

    def __init__(self, clk_mhz: float):
        self.clk_mhz = clk_mhz

    def elaborate(self, platform):
        m = Module()
        m.submodules.controller = c = SDRAMController(
            COLORLIGHT_5A75B, M12L16161A, self.clk_mhz * 1e6
        )
        connect_pins(m, platform, c.sdram)
        lfsr = lfsr64(m)
        folded = Signal(32)
        m.d.comb += [
            c.request.valid.eq(1),
            c.request.payload.as_value().eq(lfsr[: len(c.request.payload.as_value())]),
            c.response.ready.eq(lfsr[60]),
        ]
        with m.If(c.response.valid & c.response.ready):
            m.d.sync += folded.eq(folded ^ c.response.payload)
        m.d.comb += platform.request("led", 0).o.eq(folded.xor())
        return m


def build(clk_mhz: float, top: Elaboratable | None = None) -> dict:
    """The controller alone (or ``top``) on the Colorlight 5A-75B through Yosys and
    nextpnr."""
    from nfacep.boards.flow import run_flow
    from nfacep.boards.registry import get_board

    with tempfile.TemporaryDirectory() as work:
        result = run_flow(
            top or _Top(clk_mhz),
            get_board("colorlight-5a75b"),
            work,
            target_mhz=clk_mhz,
            pack=False,
        )
    res = result.resources
    return {
        "status": result.status,
        "luts": (res.get("luts") or {}).get("used"),
        "ffs": (res.get("ffs") or {}).get("used"),
        "brams": (res.get("brams") or {}).get("used"),
        "fmax_mhz": result.fmax_mhz,
        "seconds": result.seconds,
        "critical_path": critical_nets(result.pnr or {}),
    }


def critical_nets(pnr: dict) -> list[str]:
    """The nets along the slowest clock's critical path in nextpnr's ``--report`` JSON, each
    with the delay of its routing (ns), from the first register to the last."""
    paths = sorted(
        pnr.get("critical_paths") or [],
        key=lambda p: -sum(seg["delay"] for seg in p["path"]),
    )
    if not paths:
        return []
    return [
        f"{seg['net']} ({seg['delay']:.2f})" for seg in paths[0]["path"] if seg["type"] == "routing"
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=2000, help="RMW operations per point")
    ap.add_argument("--clk-mhz", type=float, default=100.0)
    ap.add_argument(
        "--queues", default="4,16", help="requests per bank queue, comma-separated (default 4,16)"
    )
    ap.add_argument("--build", action="store_true", help="also Yosys/nextpnr on the LFE5U-25F")
    args = ap.parse_args()
    clk = args.clk_mhz * 1e6
    t = TIMING.cycles(clk)
    print(
        f"M12L16161A at {args.clk_mhz:g} MHz: CL {t.cas_latency}, tRCD {t.trcd}, tRP {t.trp}, "
        f"tRAS {t.tras}, tRC {t.trc}, tWR {t.twr}, tRFC {t.trfc}, tREFI {t.trefi} clocks; "
        f"{args.ops} RMW per point"
    )
    print()
    print(
        "| geometry | queue | banks touched | addresses | RMW/clock | M RMW/s | ACTIVE/RMW "
        "| refreshes |"
    )
    print("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    four = SDRAMGeometry(banks=4, rows=2048, columns=256, width=32)
    points = itertools.product(
        (("2 banks (5A-75B)", COLORLIGHT_5A75B), ("4 banks", four)),
        [int(q) for q in args.queues.split(",")],
    )
    for (name, geometry), queue in points:
        for banks in range(1, geometry.banks + 1):
            for kind in ("uniform", "zipf"):
                row = rmw_rate(geometry, banks, kind, args.ops, clk, queue)
                print(
                    f"| {name} | {queue} | {banks} | {kind} | {row['rmw_per_clock']:.3f} | "
                    f"{row['rmw_per_clock'] * args.clk_mhz:.1f} | "
                    f"{row['activates_per_rmw']:.2f} | {row['refreshes']} |",
                    flush=True,
                )
    print()
    print(
        "read latency, controller otherwise idle (clocks from acceptance to response): "
        + ", ".join(f"{k} {v}" for k, v in latencies(clk).items())
    )
    if args.build:
        row = build(args.clk_mhz)
        print()
        print(f"controller alone on the LFE5U-25F, nextpnr constrained to {args.clk_mhz:g} MHz:")
        print(row)


if __name__ == "__main__":
    main()
