#!/usr/bin/env python3
"""What time windows (WITHIN) and runtime parameters (:name) cost: area and Fmax on an ECP5
LFE5U-85F, and the cycles a parameter switch takes in Amaranth's simulator (issue 14).

1. *Window*: ``queries/marathon.sql`` as it is and with ``ORDER BY time`` and ``WITHIN 3600``
   added (a copy of its text: each partition then also keeps a 12-bit age per non-start state
   and the last 32-bit ``time``), built with the swap pipeline at a few partition counts and
   with the block-RAM table: LUTs, FFs, block RAMs, Fmax and the state bits per partition
   (``state_layout(nfa).size``).
2. *Parameters*: marathon's comparisons against constants, and the same with every constant a
   parameter (``checkpoint = :first``), as it is (ENUM comparisons only) and with numeric
   comparisons added (``speed < 20.5``, ``time >= 1000``). The parameter engine's ``i_params``
   is driven from the on-chip tuple source's bits (a rewiring, no logic): in the plain harness
   it would be idle, and synthesis would fold the registers that never change into the
   constants they start with (row ``params, i_params idle``).
3. *Switch cycles*: ``Engine`` in Amaranth's simulator, a one-variable query
   ``A AS checkpoint = :cp`` on tuples that are all 'Queens', ``cp`` = 'Staten Island' after a
   reset, switched to 'Queens' (a tuple yields a record exactly when it was decoded with the
   new value). Counts clock cycles, not seconds.
4. *start_seq*: marathon with ``MEASURES FIRST(seq) AS start_seq`` (each partition keeps a
   48-bit position per non-start state and its last tuple's), built beside the plain query.

Each build is ``run_flow`` (Yosys, nextpnr-ecp5 with ``--target-mhz``; as ``nfacep build`` runs
it, without packing the bitstream) of the harness top :class:`nfacep.boards.top.BoardTop`
(on-chip tuples, LEDs), through :func:`fabric.build_design`, one at a time.

    python benchmarks/windows_params.py                      # builds and cycles
    python benchmarks/windows_params.py --no-build           # cycles only
    python benchmarks/windows_params.py --partitions 16 64 --table 4096
    python benchmarks/windows_params.py --variants plain start --no-param-builds \
        --csv benchmarks/results/start_seq.csv
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from amaranth.hdl import Cat
from amaranth.sim import Simulator
from fabric import build_design, write_csv
from fmax_partitions import critical_path

import nfacep
from nfacep.boards import get_board
from nfacep.boards.top import BoardTop
from nfacep.hdl.engine import Engine
from nfacep.hdl.nfa_layout import state_layout
from nfacep.params import EngineParams
from nfacep.settings import ParamValues

ROOT = pathlib.Path(__file__).resolve().parent.parent
HERE = pathlib.Path(__file__).resolve().parent
WINDOW = 3600

MARATHON = (ROOT / "queries" / "marathon.sql").read_text()
SCHEMA = MARATHON[: MARATHON.index("QUERY")]

# marathon's DEFINE with the checkpoints as constants or as parameters, and with numeric
# comparisons added (the same in both forms)
CHECKPOINTS = {
    "first": "Staten Island",
    "second": "Brooklyn",
    "third": "Queens",
    "fourth": "Bronx",
    "fifth": "Manhattan",
}
NUMBERS = {
    "start": ("time >=", "1000"),
    "c_max": ("speed <", "20.5"),
    "d_max": ("speed <", "21.5"),
    "e_max": ("speed <", "22.5"),
}


def marathon_text(
    *, window: bool = False, params: bool = False, numeric: bool = False, start: bool = False
) -> str:
    """The marathon query, optionally with ``ORDER BY time ... WITHIN 3600``, its constants as
    parameters, numeric comparisons, and ``MEASURES FIRST(seq) AS start_seq``."""

    def cp(name):
        return f":{name}" if params else f"'{CHECKPOINTS[name]}'"

    def num(name):
        if not numeric:
            return ""
        op, value = NUMBERS[name]
        return f" AND {op} {':' + name if params else value}"

    return (
        SCHEMA
        + "QUERY cheat FROM marathon\nPARTITION runner\n"
        + ("ORDER BY time\n" if window else "")
        + ("MEASURES FIRST(seq) AS start_seq\n" if start else "")
        + "PATTERN ( A NOTB* C | A NOTC* D | A NOTD* E )"
        + (f" WITHIN {WINDOW}" if window else "")
        + "\nDEFINE\n"
        f"  A    AS (checkpoint = {cp('first')}{num('start')})\n"
        f"  NOTB AS (checkpoint != {cp('second')})\n"
        f"  C    AS (checkpoint = {cp('third')}{num('c_max')})\n"
        f"  NOTC AS (checkpoint != {cp('third')})\n"
        f"  D    AS (checkpoint = {cp('fourth')}{num('d_max')})\n"
        f"  NOTD AS (checkpoint != {cp('fourth')})\n"
        f"  E    AS (checkpoint = {cp('fifth')}{num('e_max')});\n"
    )


#: the marathon variants built at each partition count: label suffix, marathon_text arguments
VARIANTS = {
    "plain": ("", {}),
    "window": (", WITHIN", {"window": True}),
    "start": (", start_seq", {"start": True}),
}


def initial_values(nfa) -> ParamValues | None:
    """The parameters' values after a reset: the constants they replace."""
    if not nfa.program.parameters:
        return None
    given = {**CHECKPOINTS, **{k: v for k, (_, v) in NUMBERS.items()}}
    return ParamValues.parse(
        nfa.program.parameters, [f"{n}={given[n]}" for n in nfa.program.parameters]
    )


class ParamHarness(BoardTop):
    """:class:`BoardTop` with the engine's ``i_params`` driven too: its payload and valid are
    bits of the tuple source's payload (wires only), so the parameter registers change and
    synthesis keeps them and the comparators against them."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        engine = self.engine
        bits = engine.i_stream.payload.as_value()
        width = len(engine.i_params.payload.as_value())
        m.d.comb += [
            engine.i_params.payload.as_value().eq(
                Cat(*(bits[(7 * i + 3) % len(bits)] for i in range(width)))
            ),
            engine.i_params.valid.eq(bits[0] & bits[1]),
        ]
        return m


def build_row(
    label: str,
    text: str,
    params: EngineParams,
    board,
    target: float,
    root: str,
    *,
    drive_params: bool = True,
    seed: int | None = None,
    timeout: float = 1800,
) -> dict:
    nfa = nfacep.compile_text(text)
    values = initial_values(nfa)
    top_class = ParamHarness if values is not None and drive_params else BoardTop

    def make_top():
        return top_class(Engine(nfa, params, values=values))

    out = os.path.join(root, label.replace(" ", "_").replace(",", ""))
    res = build_design(make_top, board, out, target_mhz=target, timeout=timeout, seed=seed)
    row = {
        "label": label,
        "store": params.store,
        "partitions": params.partitions,
        "window": WINDOW if nfa.queries[0].window else None,
        "start_seq": nfa.queries[0].start_seq,
        "parameters": len(nfa.program.parameters),
        "states": len(nfa.states),
        "state_bits": state_layout(nfa).size,
        "status": res["status"],
        "luts": res.get("luts"),
        "ffs": res.get("ffs"),
        "brams": res.get("brams"),
        "fmax_mhz": None if res.get("fmax_mhz") is None else round(res["fmax_mhz"], 1),
        "target_mhz": target,
        "build_s": res.get("wall_s"),
    }
    if res["status"] != "ok":
        row["message"] = res.get("message", "")
    report = os.path.join(out, "toolchain", "nfacep_top.report.json")
    if os.path.exists(report):
        with open(report, encoding="utf-8") as f:
            cp = critical_path(json.load(f))
        row.update({f"cp_{k}": v for k, v in cp.items() if k != "longest_net"})
    return row


def print_row(row: dict) -> None:
    def n(key):
        v = row.get(key)
        return "-" if v is None else f"{v:,}" if isinstance(v, int) else f"{v:.1f}"

    print(
        f"{row['label']:<34} {row['state_bits']:>5} {n('luts'):>7} {n('ffs'):>7} "
        f"{n('brams'):>5} {n('fmax_mhz'):>7} {n('cp_levels'):>6} {n('build_s'):>7}  "
        f"{row['status']}  {row.get('cp_from', '?')} -> {row.get('cp_to', '?')}",
        flush=True,
    )


# ---------------------------------------------------------------------------------------------
# switch cycles


def switch_cycles() -> list[dict]:
    """Cycle counts of parameter switches (see the module's docstring, part 3)."""
    nfa = nfacep.compile_text(
        SCHEMA + "QUERY q FROM marathon PARTITION runner PATTERN (A) DEFINE A AS checkpoint = :cp"
    )
    values = ParamValues.parse(nfa.program.parameters, ["cp=Staten Island"])
    new = values.packed({"cp": 2})  # Queens
    queens = nfa.program.schema.field("checkpoint").type.labels.index("Queens")
    rows = []

    def run(
        case: str, switch_seq: int, tuples_before: int, tuple_cycles: list[int], switch_cycle: int
    ):
        """Offer tuples (all 'Queens', runner 1) at the given cycles (each offered until taken),
        the switch at ``switch_cycle``; record transfers, ``param_values`` and records."""
        dut = Engine(nfa, EngineParams(partitions=4), values=values)
        width = dut.param_values.shape().size
        log: dict = {"tuples": [], "switch": None, "changed": None, "ready_low": 0, "records": []}

        async def bench(ctx):
            ctx.set(dut.o_stream.ready, 1)
            payload = dut.i_stream.payload
            ctx.set(payload.checkpoint, queens)
            ctx.set(payload.runner, 1)
            pending = list(tuple_cycles)
            switch_done = False
            for cycle in range(max(tuple_cycles) + 80):
                offer = bool(pending) and pending[0] <= cycle
                ctx.set(dut.i_stream.valid, offer)
                ctx.set(payload.time, len(log["tuples"]))
                offer_switch = cycle >= switch_cycle and not switch_done
                ctx.set(dut.i_params.valid, offer_switch)
                ctx.set(dut.i_params.payload.as_value(), new | switch_seq << width)
                if log["switch"] is not None and not ctx.get(dut.i_params.ready):
                    log["ready_low"] += 1
                took = offer and ctx.get(dut.i_stream.ready)
                switched = offer_switch and ctx.get(dut.i_params.ready)
                if ctx.get(dut.o_stream.valid):
                    log["records"].append(ctx.get(dut.o_stream.payload.seq))
                if log["changed"] is None and ctx.get(dut.param_values.as_value()) == new:
                    log["changed"] = cycle
                await ctx.tick()
                if took:
                    log["tuples"].append(cycle)
                    pending.pop(0)
                if switched:
                    log["switch"] = cycle
                    switch_done = True

        sim = Simulator(dut)
        sim.add_clock(1e-8)
        sim.add_testbench(bench)
        sim.run()
        n = len(log["tuples"])
        due = switch_seq if switch_seq >= tuples_before else tuples_before
        due_cycle = log["tuples"][due]
        first_record = min(log["records"], default=None)
        assert log["records"] == list(range(first_record, n)), log["records"]
        rows.append(
            {
                "case": case,
                "switch_seq": switch_seq,
                "tuples_before_switch": tuples_before,
                "switch_transfer_cycle": log["switch"],
                "due_tuple": due,
                "due_tuple_transfer_cycle": due_cycle,
                "first_tuple_with_new_values": first_record,
                "values_shown_after_due_transfer": log["changed"] - due_cycle,
                "values_shown_after_switch_transfer": log["changed"] - log["switch"],
                "ready_low_cycles": log["ready_low"],
            }
        )

    # (a) written at cycle 0, for tuple 5; tuples offered every cycle from cycle 2
    run("a: seq ahead, tuples back to back", 5, 0, [2 + i for i in range(12)], 0)
    # (a') the same with tuples 10 cycles apart
    run("a: seq ahead, tuples 10 cycles apart", 5, 0, [2 + 10 * i for i in range(8)], 0)
    # (b) 6 tuples taken (seq 0-5), then a switch for seq 2 (passed); the next tuple offered
    # in the cycle after the switch's transfer, or 10 cycles after
    for gap in (1, 10):
        run(
            f"b: seq passed, next tuple +{gap}",
            2,
            6,
            [2 * i for i in range(6)] + [40 + gap + i for i in range(4)],
            40,
        )
    # (d) the switch for seq 6 transferred in the same cycle as tuple 6
    run(
        "d: switch in its tuple's cycle",
        6,
        6,
        [2 * i for i in range(6)] + [40 + i for i in range(4)],
        40,
    )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--board", default="ulx3s-85f")
    ap.add_argument("--target-mhz", type=float, default=150.0)
    ap.add_argument(
        "--partitions",
        type=int,
        nargs="*",
        default=[16, 64],
        help="swap-pipeline sizes built with and without the window",
    )
    ap.add_argument(
        "--table",
        type=int,
        nargs="*",
        default=[4096],
        help="table sizes (4 ways) built with and without the window",
    )
    ap.add_argument(
        "--param-partitions", type=int, default=16, help="pipeline size of the parameter builds"
    )
    ap.add_argument(
        "--variants",
        nargs="*",
        choices=sorted(VARIANTS),
        default=list(VARIANTS),
        help="the marathon variants built at each size (default: all)",
    )
    ap.add_argument("--no-param-builds", action="store_true", help="skip the parameter builds")
    ap.add_argument("--no-build", action="store_true", help="switch cycles only")
    ap.add_argument("--keep", metavar="DIR", help="keep the build folders here")
    ap.add_argument("--csv", default=str(HERE / "results" / "windows_params.csv"))
    ap.add_argument("--cycles-csv", default=str(HERE / "results" / "windows_params_cycles.csv"))
    args = ap.parse_args()

    print(
        "parameter switch, cycles (Amaranth simulator; one tuple, all 'Queens', per record "
        "exactly from the first tuple decoded with cp='Queens')"
    )
    cyc = switch_cycles()
    print(
        f"{'case':<38} {'seq':>3} {'switch@':>7} {'due tuple':>9} {'due@':>5} "
        f"{'1st new':>7} {'shown-due':>9} {'shown-sw':>8} {'rdy low':>7}"
    )
    for r in cyc:
        print(
            f"{r['case']:<38} {r['switch_seq']:>3} {r['switch_transfer_cycle']:>7} "
            f"{r['due_tuple']:>9} {r['due_tuple_transfer_cycle']:>5} "
            f"{r['first_tuple_with_new_values']:>7} "
            f"{r['values_shown_after_due_transfer']:>9} "
            f"{r['values_shown_after_switch_transfer']:>8} {r['ready_low_cycles']:>7}"
        )
    write_csv(args.cycles_csv, cyc)
    if args.no_build:
        return

    board = get_board(args.board)
    print(
        f"\nmarathon on {board.name} ({board.description}), nextpnr target "
        f"{args.target_mhz:g} MHz, WITHIN {WINDOW}"
    )
    print(
        f"{'build':<34} {'state':>5} {'LUTs':>7} {'FFs':>7} {'BRAMs':>5} {'Fmax':>7} "
        f"{'levels':>6} {'build s':>7}  status  critical path"
    )
    points = [(f"pipeline {p}", EngineParams(partitions=p)) for p in args.partitions]
    points += [
        (f"table {t}", EngineParams(store="table", partitions=t, ways=4)) for t in args.table
    ]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or tmp
        for label, params in points:
            for variant in args.variants:
                suffix, kwargs = VARIANTS[variant]
                row = build_row(
                    f"{label}{suffix}",
                    marathon_text(**kwargs),
                    params,
                    board,
                    args.target_mhz,
                    root,
                )
                rows.append(row)
                print_row(row)
        if args.no_param_builds:
            write_csv(args.csv, rows)
            return
        pp = EngineParams(partitions=args.param_partitions)
        base = f"pipeline {args.param_partitions}"
        variants = [
            (f"{base}, params", {"params": True}, True),
            (f"{base}, params, i_params idle", {"params": True}, False),
            (f"{base}, numeric", {"numeric": True}, True),
            (f"{base}, numeric, params", {"numeric": True, "params": True}, True),
        ]
        for label, kwargs, drive in variants:
            row = build_row(
                label, marathon_text(**kwargs), pp, board, args.target_mhz, root, drive_params=drive
            )
            rows.append(row)
            print_row(row)
    write_csv(args.csv, rows)


if __name__ == "__main__":
    main()
