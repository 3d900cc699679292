"""``nfacep verilog``: the engine as Verilog, with a JSON sidecar (registered as an entry point
of ``nfacep.commands``)."""

from __future__ import annotations

import os

from nfacep import params, settings
from nfacep.cli import Command, load_query
from nfacep.errors import UsageError
from nfacep.image import ImageError
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
        from . import engine as fixed
        from . import programmable

        engine = params.from_args(args, programmable=True)  # before anything is read
        write_verilog = fixed.write_verilog
        outputs = [args.output, os.path.splitext(args.output)[0] + ".json"]
        if engine.engine == "programmable":
            write_verilog = programmable.write_verilog
            outputs.append(os.path.splitext(args.output)[0] + ".image.hex")
        # before the engine is elaborated: the files can be written, none is the query
        sidecar_path = outputs[1]
        if args.output and os.path.abspath(sidecar_path) == os.path.abspath(args.output):
            raise UsageError(
                f"-o {args.output}: the sidecar would be written over the Verilog; "
                "name the Verilog file .v"
            )
        check_outputs(outputs, [args.query], what="-o")
        nfa = load_query(args.query)
        engine = params.from_args(args, programmable=True, nfa=nfa)
        values = settings.from_args(
            nfa.program.parameters, args, switches=False, command="nfacep verilog"
        )
        try:
            sidecar = write_verilog(nfa, args.output, engine, name=args.top, values=values)
        except ImageError as err:
            raise UsageError(f"{args.query}: {err}") from None
        image = " and the query's image .image.hex" if "image" in sidecar else ""
        print(
            f"wrote {args.output} (module {sidecar['top']}: tuple "
            f"{sidecar['tuple']['width']} bits in, record {sidecar['record']['width']} bits "
            f"out, {len(sidecar['ports'])} ports), its sidecar .json{image}"
        )
        return 0
