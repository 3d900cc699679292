"""``nfacep verilog``: the engine as Verilog, with a JSON sidecar (registered as an entry point
of ``nfacep.commands``)."""

from __future__ import annotations

import os

from nfacep import params, settings
from nfacep.cli import Command, load_query
from nfacep.errors import UsageError
from nfacep.output import check_outputs

__all__ = ["Verilog"]


class Verilog(Command):
    name = "verilog"
    help = "emit the engine as Verilog, with a JSON sidecar"
    order = 40

    def add_arguments(self, parser) -> None:
        super().add_arguments(parser)
        parser.add_argument(
            "-o",
            "--output",
            required=True,
            metavar="FILE",
            help="Verilog file; the sidecar (ports, bit layouts, query bits) is "
            "written beside it with the suffix .json",
        )
        parser.add_argument(
            "--top", default="nfacep_engine", help="module name (default %(default)s)"
        )
        params.add_arguments(parser)
        settings.add_argument(parser, switches=False)

    def run(self, args) -> int:
        from .engine import write_verilog

        engine = params.from_args(args)
        # before the engine is elaborated: both files can be written, neither is the query
        sidecar_path = os.path.splitext(args.output)[0] + ".json"
        if args.output and os.path.abspath(sidecar_path) == os.path.abspath(args.output):
            raise UsageError(
                f"-o {args.output}: the sidecar would be written over the Verilog; "
                "name the Verilog file .v"
            )
        check_outputs([args.output, sidecar_path], [args.query], what="-o")
        nfa = load_query(args.query)
        values = settings.from_args(
            nfa.program.parameters, args, switches=False, command="nfacep verilog"
        )
        sidecar = write_verilog(nfa, args.output, engine, name=args.top, values=values)
        print(
            f"wrote {args.output} (module {sidecar['top']}: tuple "
            f"{sidecar['tuple']['width']} bits in, record {sidecar['record']['width']} bits "
            f"out, {len(sidecar['ports'])} ports) and its sidecar .json"
        )
        return 0
