"""The ``nfacep`` command line: one subcommand per stage (DESIGN.md §5)."""

from __future__ import annotations

import argparse
import csv
import sys

from . import NfacepError, QueryError, compile_file
from .errors import UsageError
from .output import atomic_write, summary_path, write_json

__all__ = ["main"]


def _hardware_args(p: argparse.ArgumentParser) -> None:
    from .reference import DEFAULTS

    g = p.add_argument_group("engine parameters (shared by every command that models hardware)")
    g.add_argument("--partitions", type=int, default=DEFAULTS["partitions"], metavar="N",
                   help="partitions the partitioner stores (default %(default)s)")
    g.add_argument("--tick-tuples", type=int, default=DEFAULTS["tick_tuples"], metavar="K",
                   help="a timer tick after every K-th input tuple; 0: no ticks "
                        "(default %(default)s)")
    g.add_argument("--timer-bits", type=int, default=DEFAULTS["timer_bits"], metavar="B",
                   help="bits of each partition element's timer (default %(default)s)")


def _validate_hardware(args) -> None:
    if args.partitions < 1:
        raise UsageError("--partitions must be at least 1")
    if args.tick_tuples < 0:
        raise UsageError("--tick-tuples must be 0 (no ticks) or more")
    if not 1 <= args.timer_bits <= 32:
        raise UsageError("--timer-bits must be between 1 and 32")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="nfacep", description="Compile complex-event queries into FPGA gateware.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    c = sub.add_parser("check", help="parse and validate; print queries, predicates, states")
    c.add_argument("query", help="query file (.sql)")

    e = sub.add_parser("explain", help="AST, NFA states and activation wiring")
    e.add_argument("query")
    e.add_argument("--dot", metavar="F", help="also write the NFA as Graphviz to F")

    m = sub.add_parser("match", help="run the software reference matcher")
    m.add_argument("query")
    m.add_argument("--input", required=True, metavar="T",
                   help="tuples: .csv, .parquet, or a folder of Parquet part files")
    m.add_argument("--output", required=True, metavar="M", help="matches (.csv)")
    _hardware_args(m)

    v = sub.add_parser("verilog", help="emit the engine as Verilog, with a JSON sidecar")
    v.add_argument("query")
    v.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="Verilog file; the sidecar (ports, bit layouts, query bits) is written "
                        "beside it with the suffix .json")
    v.add_argument("--top", default="nfacep_engine", help="module name (default %(default)s)")
    _hardware_args(v)

    from nfacep.sim.cli import add_sim_parser

    add_sim_parser(sub, _hardware_args)

    from nfacep.boards.cli import add_build_parser, add_run_parser

    add_build_parser(sub, _hardware_args)
    add_run_parser(sub, _hardware_args)

    from nfacep.spark_testbench.cli import add_regress_parser, add_vectors_parser

    add_vectors_parser(sub, _hardware_args)
    add_regress_parser(sub, _hardware_args)
    return p


def _print_warnings(nfa) -> None:
    for w in nfa.program.warnings:
        print(w.render(), file=sys.stderr)


def cmd_check(args) -> int:
    nfa = compile_file(args.query)
    _print_warnings(nfa)
    prog = nfa.program
    fields = ", ".join(f"{f.name} {f.type}" for f in prog.schema.fields)
    print(f"stream {prog.schema.name} ({fields})")
    print(f"partition key: {prog.partition_field or '(none: one stream)'}")
    print(f"predicates: {len(nfa.predicates)} (decoder outputs)")
    for p in nfa.predicates:
        print(f"  p{p.index}: {p.text}")
    for q, cq in zip(nfa.queries, prog.queries, strict=True):
        skip = "AFTER MATCH SKIP PAST LAST ROW" if q.skip_past_last_row else "every match end"
        order = f", ORDER BY {cq.order_field}" if cq.order_field else ""
        print(f"query {q.name}: {q.count} NFA states, {skip}{order}")
        for i in q.states:
            st = nfa.states[i]
            pred = "true" if st.predicate is None else f"p{st.predicate}"
            flags = ("start " if st.start else "") + ("accept" if st.accepting else "")
            print(f"  {st.name} [{pred}] {flags}".rstrip())
    return 0


def cmd_explain(args) -> int:
    from .ast import dump

    nfa = compile_file(args.query)
    _print_warnings(nfa)
    for cq in nfa.program.queries:
        print(f"query {cq.name}")
        print(f"  pattern: {dump(cq.pattern)}")
        for var, pred in cq.predicates.items():
            from .predicates import render

            print(f"  {var}: {'true (not defined)' if pred is None else render(pred)}")
    print()
    print(nfa.dump())
    if args.dot:
        with atomic_write(args.dot) as f:
            f.write(nfa.dot())
        print(f"\nwrote {args.dot}")
    return 0


def cmd_match(args) -> int:
    from . import reference, tuples

    _validate_hardware(args)
    nfa = compile_file(args.query)
    _print_warnings(nfa)
    data = tuples.read(args.input, nfa.program.schema)
    for f in nfa.program.order_fields:
        tuples.check_order(data, f)
    result = reference.run(nfa, data, partitions=args.partitions, tick_tuples=args.tick_tuples,
                           timer_bits=args.timer_bits)
    with atomic_write(args.output, newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["seq", "query", "partition"])
        for seq, name, part in result.matches:
            w.writerow([seq, name, "" if part is None else part])
    drops = result.drops.tolist()
    write_json(summary_path(args.output), {
        "query_file": args.query, "input": args.input, "tuples": result.n,
        "matches": {name: result.count(name) for name in result.names},
        "drops": len(drops), "drop_seqs": drops,
        "partitions": args.partitions, "tick_tuples": args.tick_tuples,
        "timer_bits": args.timer_bits,
    })
    total = len(result.seqs)
    print(f"{result.n} tuples, {total} matches "
          f"({', '.join(f'{n}: {result.count(n)}' for n in result.names)}), "
          f"{len(drops)} dropped -> {args.output}")
    if drops:
        shown = ", ".join(str(s) for s in drops[:10]) + (" …" if len(drops) > 10 else "")
        print(f"warning: {len(drops)} tuples dropped (partitioner full, --partitions "
              f"{args.partitions}) at seq {shown}", file=sys.stderr)
    return 0


def cmd_verilog(args) -> int:
    from nfacep.hdl.engine import write_verilog

    _validate_hardware(args)
    nfa = compile_file(args.query)
    _print_warnings(nfa)
    sidecar = write_verilog(nfa, args.output, partitions=args.partitions,
                            tick_tuples=args.tick_tuples, timer_bits=args.timer_bits,
                            name=args.top)
    ports = sidecar["ports"]
    print(f"wrote {args.output} (module {sidecar['top']}: tuple {sidecar['tuple']['width']} "
          f"bits in, record {sidecar['record']['width']} bits out, "
          f"{len(ports)} ports) and its sidecar .json")
    return 0


def cmd_sim(args) -> int:
    from nfacep.sim.cli import cmd_sim as run_sim

    _validate_hardware(args)
    return run_sim(args)


def cmd_build(args) -> int:
    from nfacep.boards.cli import cmd_build as run_build

    _validate_hardware(args)
    return run_build(args)


def cmd_run(args) -> int:
    from nfacep.boards.cli import cmd_run as run_board

    _validate_hardware(args)
    return run_board(args)


def cmd_vectors(args) -> int:
    from nfacep.spark_testbench.cli import cmd_vectors as run_vectors

    _validate_hardware(args)
    return run_vectors(args)


def cmd_regress(args) -> int:
    from nfacep.spark_testbench.cli import cmd_regress as run_regress

    _validate_hardware(args)
    return run_regress(args)


_COMMANDS = {"check": cmd_check, "explain": cmd_explain, "match": cmd_match,
             "verilog": cmd_verilog, "sim": cmd_sim, "build": cmd_build, "run": cmd_run,
             "vectors": cmd_vectors, "regress": cmd_regress}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _COMMANDS[args.command](args)
    except QueryError as err:
        print(err.render(), file=sys.stderr)
        return 2
    except NfacepError as err:
        print(f"nfacep: {err.render()}", file=sys.stderr)
        return err.exit_code
    except BrokenPipeError:
        return 1


if __name__ == "__main__":
    sys.exit(main())
