"""The ``nfacep`` command line: one subcommand per stage, each owned by its package.

A subcommand is a :class:`Command`. The language's own (``check``, ``explain``, ``match``) are
here; the outer packages register theirs as entry points of the group ``nfacep.commands``
(``pyproject.toml``), as Glasgow's applets are: ``verilog`` (:mod:`nfacep.hdl`), ``sim``
(:mod:`nfacep.sim`), ``vectors`` and ``regress`` (:mod:`nfacep.spark_testbench`), ``build``
and ``run`` (:mod:`nfacep.boards`). This module imports none of them: it finds them through
the entry points when the parser is built, and loads only the one the command line names (all
of them for ``nfacep --help``); this module's own commands look up no entry point.

A command imports what it uses when it runs (``match`` its tuple readers and the matcher), so
that ``nfacep check`` loads neither pyarrow nor numba, nor another command's package
(tests/core/test_imports.py; ``benchmarks/startup.py`` times them).

``nfacep check --board`` estimates the engine's size on a board; that needs the boards
package, which contributes it as the entry point of the group ``nfacep.check_boards``
(:data:`CHECK_BOARDS`): a :class:`BoardEstimator`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
from typing import TYPE_CHECKING, Protocol

from . import NfacepError, QueryError, compile_file, params, settings
from .errors import UsageError
from .limits import CHUNK
from .output import atomic_write, check_outputs

if TYPE_CHECKING:
    from .nfa import Nfa

__all__ = [
    "CHECK_BOARDS",
    "ENTRY_POINTS",
    "MATCH_MASTER",
    "BoardEstimator",
    "Command",
    "add_io_arguments",
    "load_query",
    "main",
]

#: The entry point group through which packages register their subcommands.
ENTRY_POINTS = "nfacep.commands"
#: The entry point group through which a package gives ``nfacep check`` its ``--board``.
CHECK_BOARDS = "nfacep.check_boards"
#: The entry point group through which a package runs ``nfacep match --master`` (the Spark
#: testbench: :func:`nfacep.spark_testbench.match.run`).
MATCH_MASTER = "nfacep.match_master"


class Command:
    """A subcommand: its name, its help, its arguments and what it does.

    ``order`` places it in ``nfacep --help`` (the stages' order: language, reference,
    gateware, simulation, Spark, boards). A command that models or builds the engine adds the
    engine parameters with :func:`nfacep.params.add_arguments` and reads them with
    :func:`nfacep.params.from_args`.
    """

    name: str = ""
    help: str = ""
    description: str | None = None
    order: int = 100

    def epilog(self) -> str | None:
        """Text after the options in ``nfacep NAME --help`` (kept as written)."""
        return None

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("query", help="query file (.sql)")

    def run(self, args: argparse.Namespace) -> int:
        raise NotImplementedError


def add_io_arguments(parser: argparse.ArgumentParser, *, output_help: str = "matches (.csv)"):
    """The query file, ``--input T`` and ``--output M`` of a command that matches tuples."""
    parser.add_argument("query", help="query file (.sql)")
    parser.add_argument(
        "--input",
        required=True,
        metavar="T",
        help="tuples: .csv, .parquet, or a folder of Parquet part files",
    )
    parser.add_argument(
        "--output",
        required=True,
        metavar="M",
        help=f"{output_help}; its summary is written beside it (M.summary.json)",
    )


def load_query(path: str) -> Nfa:
    """Compile the query file at ``path``, printing its warnings on stderr."""
    nfa = compile_file(path)
    for w in nfa.program.warnings:
        print(w.render(), file=sys.stderr)
    return nfa


def _add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON document instead of text (docs/commands.md); "
        'an error is printed as {"error": …} too',
    )


def _load_or_json_error(args) -> Nfa:
    """:func:`load_query`; with ``--json``, a query error is also printed as JSON on stdout."""
    try:
        return load_query(args.query)
    except QueryError as err:
        if args.json:
            from .describe import diagnostic

            every = [diagnostic(e) for e in err.errors]
            print(json.dumps({"error": diagnostic(err), "errors": every}, indent=2))
        raise


class BoardEstimator(Protocol):
    """What ``nfacep check --board`` needs of the boards package (:data:`CHECK_BOARDS`)."""

    def boards(self) -> str:
        """The known boards, as text."""
        ...

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Its options besides ``--board``."""
        ...

    def estimate(self, nfa: Nfa, engine: params.EngineParams, args: argparse.Namespace) -> dict:
        """The engine's size on the board ``args.board``, a dict for ``--json``."""
        ...

    def render(self, estimate: dict) -> str:
        """An :meth:`estimate` as text."""
        ...


def _check_boards() -> tuple[BoardEstimator | None, str | None]:
    """The ``--board`` estimate of :data:`CHECK_BOARDS` and ``None``, or ``None`` and why it
    cannot be loaded."""
    from importlib import metadata

    reason = "no package registers it (pip install 'nfacep[boards]')"
    for ep in metadata.entry_points(group=CHECK_BOARDS):
        try:
            return ep.load()(), None
        except Exception as exc:  # a broken boards package must not break `check`
            reason = f"{type(exc).__name__}: {exc}"
    return None, reason


def _fit_text(engine: params.EngineParams, fit: dict) -> str:
    """The line ``nfacep check --engine programmable`` prints of the fit (:meth:`Check._fit_of`)."""
    timed = fit["timed"]
    windows = f", {timed[0]} of its {timed[1]} timed states (WITHIN)" if timed[0] else ""
    return (
        f"programmable engine ({engine.states} states, {engine.atoms} atoms, "
        f"{engine.queries} queries): fits, using {fit['states'][0]} states, "
        f"{fit['atoms'][0]} atoms, {fit['queries'][0]} queries{windows}; image "
        f"{fit['image_bytes']} bytes, fingerprint {fit['fingerprint']}"
    )


class Check(Command):
    name = "check"
    help = "parse and validate; print queries, predicates, NFA states"
    order = 10

    def __init__(self) -> None:
        self._boards: BoardEstimator | None = None
        self._boards_reason: str | None = None
        self._loaded = False

    def _load_boards(self) -> None:
        """Load the ``--board`` estimate once, when the parser is built."""
        if not self._loaded:
            self._boards, self._boards_reason = _check_boards()
            self._loaded = True

    def epilog(self) -> str | None:
        self._load_boards()
        return None if self._boards is None else f"boards (--board):\n{self._boards.boards()}"

    def add_arguments(self, parser) -> None:
        self._load_boards()
        super().add_arguments(parser)
        _add_json(parser)
        parser.add_argument(
            "--board",
            metavar="NAME",
            help="also estimate the engine's resources on this board, as "
            "`nfacep build` checks them before synthesis, and say whether "
            "it would refuse the build there (needs the boards package)",
        )
        if self._boards is not None:
            self._boards.add_arguments(parser)
        params.add_arguments(parser)
        settings.add_argument(parser, switches=False)

    def run(self, args) -> int:
        boards = None
        if args.board is not None:
            if self._boards is None:
                raise UsageError(f"--board needs the boards package: {self._boards_reason}")
            boards = self._boards
        elif params.given(args).get("engine") == "programmable":
            params.from_args(args, programmable=True)  # the ranges, before anything is read
            return self._fit(args)
        elif args.param:
            raise UsageError(
                "--param: the runtime parameters' values are built into the engine on a "
                "board; give --board too"
            )
        # (--engine programmable gets here with --board only)
        programmable = params.given(args).get("engine") == "programmable"
        params.from_args(args, programmable=programmable)  # the ranges, before anything is read
        nfa = _load_or_json_error(args)
        engine = params.from_args(args, nfa=nfa, programmable=programmable)
        estimate = None
        if boards is not None:
            estimate = boards.estimate(nfa, engine, args)
            # the engine `build` would make there (the board's default when none is given)
            engine = params.EngineParams.from_dict(estimate["parameters"], source="--board")
        fit = self._fit_of(args, nfa, engine) if programmable else None
        if args.json:
            from .describe import check_json

            doc = check_json(nfa, args.query)
            if fit is not None:
                doc["programmable"] = fit
            doc["engine"] = {
                "parameters": engine.as_dict(),
                "indexing": engine.indexing(nfa),
                "text": engine.describe(nfa),
            }
            if estimate is not None:
                doc["board"] = estimate
            print(json.dumps(doc, indent=2))
            return 0
        self._print(nfa)
        if fit is not None:
            print(_fit_text(engine, fit))
        where = f"build --board {args.board}" if args.board is not None else "every command"
        print(f"engine ({where}): {engine.describe(nfa)}")
        print(f"  as options: {engine.options()}")
        if boards is not None and estimate is not None:
            print(boards.render(estimate))
        return 0

    def _fit(self, args) -> int:
        """``--engine programmable``: the file's listing, then whether and how it fits the
        programmable engine of the given capacities (an error listing every reason when it
        does not; with ``--store sdram``, a HardwareLimitError when no chip holds it)."""
        nfa = _load_or_json_error(args)
        engine = params.from_args(args, nfa=nfa, programmable=True)
        fit = self._fit_of(args, nfa, engine)
        if args.json:
            from .describe import check_json

            print(json.dumps({**check_json(nfa, args.query), "programmable": fit}, indent=2))
            return 0
        self._print(nfa)
        print(_fit_text(engine, fit))
        return 0

    @staticmethod
    def _fit_of(args, nfa: Nfa, engine: params.EngineParams) -> dict:
        """How ``nfa`` fits the programmable engine of ``engine``'s capacities: each capacity
        ``[used, available]``, the image's size and fingerprint; a UsageError listing every
        reason when it does not fit."""
        from .image import Capacity, EngineShape, ImageError, image

        prog = nfa.program
        shape = EngineShape(prog.schema, prog.partition_fields, Capacity.of(engine))
        values = settings.from_args(prog.parameters, args, switches=False, command="check")
        try:
            img = image(nfa, shape, values)
        except ImageError as err:
            raise UsageError(f"{args.query}: {err}") from None
        c = shape.capacity
        return {
            "states": [len(nfa.states), c.states],
            "atoms": [len(img.atoms), c.atoms],
            "queries": [len(nfa.queries), c.queries],
            "timed": [sum(q.count for q in nfa.queries if q.window is not None), c.timed],
            "image_bytes": len(img.to_bytes()),
            "fingerprint": img.fingerprint,
        }

    def _print(self, nfa: Nfa) -> None:
        prog = nfa.program
        fields = ", ".join(
            # a TIMESTAMP's unit is in its type already
            f"{f.name} {f.type}"
            + (f" TIME({f.unit})" if f.unit and f.unit not in str(f.type) else "")
            for f in prog.schema.fields
        )
        print(f"stream {prog.schema.name} ({fields})")
        from .describe import partition_text

        print(f"partition key: {partition_text(prog)}")
        print(f"predicates: {len(nfa.predicates)} (decoder outputs)")
        for p in nfa.predicates:
            print(f"  p{p.index}: {p.text}")
        if nfa.history:
            print(
                "history (each partition keeps the last values PREV reads): "
                + ", ".join(
                    f"{f} {k} × {prog.schema.field(f).type.bits} bits"
                    for f, k in nfa.history.items()
                )
            )
        if prog.parameters:
            print(
                "parameters (set with --param NAME=VALUE): "
                + ", ".join(f":{n} {t}" for n, t in prog.parameters.items())
            )
        for q, cq in zip(nfa.queries, prog.queries, strict=True):
            skip = "AFTER MATCH SKIP PAST LAST ROW" if q.skip_past_last_row else "every match end"
            order = f", ORDER BY {cq.order_field}" if cq.order_field else ""
            if cq.window is not None:
                order += f", WITHIN {cq.window}"
            if cq.start_seq:
                order += ", reports start_seq"
            if cq.measures:
                order += "; MEASURES " + ", ".join(map(str, cq.measures))
            print(f"query {q.name}: {q.count} NFA states, {skip}{order}")
            for i in q.states:
                st = nfa.states[i]
                pred = "true" if st.predicate is None else f"p{st.predicate}"
                flags = ("start " if st.start else "") + ("accept" if st.accepting else "")
                print(f"  {st.name} [{pred}] {flags}".rstrip())


class Explain(Command):
    name = "explain"
    help = "AST, NFA states and activation wiring"
    order = 20

    def add_arguments(self, parser) -> None:
        super().add_arguments(parser)
        parser.add_argument("--dot", metavar="F", help="also write the NFA as Graphviz to F")
        _add_json(parser)

    def run(self, args) -> int:
        from .describe import explain_json, explain_text
        from .lang.ast import dump
        from .lang.predicates import render

        nfa = _load_or_json_error(args)
        if args.dot is not None:
            check_outputs([args.dot], [args.query], what="--dot")
        if args.json:
            print(json.dumps(explain_json(nfa, args.query), indent=2))
        else:
            for cq in nfa.program.queries:
                print(f"query {cq.name}")
                print(f"  pattern: {dump(cq.pattern)}")
                for var, pred in cq.predicates.items():
                    print(f"  {var}: {'true (not defined)' if pred is None else render(pred)}")
            print()
            print(explain_text(nfa))
        if args.dot is not None:
            with atomic_write(args.dot, what="--dot") as f:
                f.write(nfa.dot())
            if not args.json:
                print(f"\nwrote {args.dot}")
        return 0


class Match(Command):
    name = "match"
    help = "run the software reference matcher"
    order = 30

    def add_arguments(self, parser) -> None:
        add_io_arguments(
            parser, output_help="matches (.csv), or M/ for a folder of Parquet part files"
        )
        parser.add_argument(
            "--chunk",
            metavar="N",
            type=_tuples_count,
            default=CHUNK,
            help="tuples read and matched at a time: the memory a run needs "
            "grows with N, not with the input (default %(default)s)",
        )
        parser.add_argument(
            "--master",
            metavar="URL",
            help="match on this Spark master (local[N], spark://HOST:PORT, …) instead of "
            "here: the same match file and summary, split by partition key over the tasks "
            "where the result allows it (needs the Spark testbench: "
            "pip install 'nfacep[spark]')",
        )
        parser.add_argument(
            "--tasks",
            metavar="T",
            type=int,
            help="with --master: Spark tasks to match in (default: the master's default "
            "parallelism); the result does not depend on it",
        )
        params.add_arguments(parser)
        settings.add_argument(parser, switches=True)

    def run(self, args) -> int:
        # what matching needs (tuple files, the matcher) loads here, not for `check`
        from .backend import run_files
        from .reference.matcher import Reference
        from .result import report

        params.from_args(args)  # the options' ranges, before anything is read
        if args.tasks is not None and args.master is None:
            raise UsageError("--tasks: the Spark tasks of --master; give --master too")
        on_master = _match_master() if args.master is not None else None
        nfa = load_query(args.query)
        engine = params.from_args(args, nfa=nfa)
        values = settings.from_args(nfa.program.parameters, args, switches=True, command="match")
        if on_master is not None:
            totals = on_master(
                nfa,
                args.query,
                args.input,
                args.output,
                engine,
                values,
                master=args.master,
                tasks=args.tasks,
                chunk=args.chunk,
                progress=_progress,
            )
            report(totals, args.output)
            return 0
        result = run_files(
            Reference(),
            nfa,
            args.input,
            args.output,
            engine,
            query_file=args.query,
            values=values,
            chunk=args.chunk,
        )
        report(result, args.output)
        return 0


def _match_master():
    """``nfacep match --master``'s runner, which the Spark testbench contributes as the entry
    point of the group :data:`MATCH_MASTER`; a UsageError when none can be loaded."""
    from importlib import metadata

    reason = "no package registers it (pip install 'nfacep[spark]')"
    for ep in metadata.entry_points(group=MATCH_MASTER):
        try:
            return ep.load()
        except ImportError as exc:
            reason = f"{type(exc).__name__}: {exc}"
    raise UsageError(f"--master needs the Spark testbench: {reason}")


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _tuples_count(text: str) -> int:
    """A count of tuples from the command line: a positive integer (``_`` between digits
    allowed, as Python writes 1_000_000)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive number of tuples")
    return value


class _Unavailable(Command):
    """A registered subcommand whose package cannot be imported here."""

    def __init__(self, name: str, reason: str):
        self.name = name
        self.reason = reason
        self.help = f"(unavailable: {reason})"

    def add_arguments(self, parser) -> None:
        parser.add_argument("rest", nargs=argparse.REMAINDER)

    def run(self, args) -> int:
        raise UsageError(
            f"`nfacep {self.name}` is not available in this installation: {self.reason}"
        )


def commands(name: str | None = None) -> list[Command]:
    """Every subcommand: this module's and the registered ones, in ``order``. With ``name``,
    only the subcommand of that name (no other's package imported; no entry point looked up
    for this module's own), or all of them when none has it (argparse's error lists them)."""
    own = {c.name: c for c in (Check(), Explain(), Match())}
    if name in own:
        return [own[name]]
    from importlib import metadata

    registered = [ep for ep in metadata.entry_points(group=ENTRY_POINTS) if ep.name not in own]
    named = [ep for ep in registered if ep.name == name]
    found: dict[str, Command] = {} if named else dict(own)
    for ep in named or registered:
        if ep.name in found:
            continue
        try:
            command = ep.load()()
        except Exception as exc:  # a broken or half-installed package must not break the rest
            command = _Unavailable(ep.name, f"{type(exc).__name__}: {exc}")
        found[ep.name] = command
    return sorted(found.values(), key=lambda c: (c.order, c.name))


def _parser(found: list[Command]) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="nfacep", description="Compile complex-event queries into FPGA gateware."
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in found:
        epilog = command.epilog()
        parser = sub.add_parser(
            command.name,
            help=command.help,
            description=command.description or command.help,
            epilog=epilog,
            formatter_class=argparse.RawDescriptionHelpFormatter
            if epilog
            else argparse.HelpFormatter,
        )
        command.add_arguments(parser)
    return p


class Terminated(BaseException):
    """SIGTERM, raised where the program is, so that cleanups run (temporary files go)."""


def _terminate(signum, frame):
    raise Terminated()


@contextlib.contextmanager
def _signals():
    """SIGTERM raises :class:`Terminated` (SIGINT already raises KeyboardInterrupt) for the
    duration; the previous handler is restored after."""
    try:
        previous = signal.signal(signal.SIGTERM, _terminate)
    except ValueError:  # not the main thread: signals are not ours to handle
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: list[str] | None = None) -> int:
    """Run one command. Exit status: 0 success, 1 a wrong or incomplete result, 2 something
    to fix first; Ctrl-C (SIGINT) 130 and SIGTERM 143, with one line on stderr and no output
    file or temporary file left behind."""
    with _signals():
        try:
            words = sys.argv[1:] if argv is None else argv  # (only the command they name)
            found = commands(words[0] if words and not words[0].startswith("-") else None)
            args = _parser(found).parse_args(argv)
            command = next(c for c in found if c.name == args.command)
            return command.run(args)
        except QueryError as err:
            print(err.render(), file=sys.stderr)
            return 2
        except NfacepError as err:
            print(f"nfacep: {err.render()}", file=sys.stderr)
            return err.exit_code
        except BrokenPipeError:
            return 1
        except KeyboardInterrupt:
            print("nfacep: interrupted", file=sys.stderr)
            return 130
        except Terminated:
            print("nfacep: terminated", file=sys.stderr)
            return 143


if __name__ == "__main__":
    sys.exit(main())
