"""``nfacep build`` and ``nfacep check --board``: the engine's board top for a link, through the
flow, into a report.

:func:`design` makes the engine and the board top of the chosen link (:mod:`nfacep.links`: a
registry lookup; the link checks that the board can carry it). :func:`build` takes it through
:func:`nfacep.boards.flow.run_flow`, then writes ``report.json`` (:mod:`nfacep.boards.report`;
written whenever synthesis ran, failures included) and the bitstream, which is copied out only
when timing is met. :func:`estimate` is what ``nfacep check --board`` knows of the design's size
before synthesis (:mod:`nfacep.boards.resources`).
"""

from __future__ import annotations

import os

from nfacep import links
from nfacep.errors import UsageError
from nfacep.nfa import Nfa
from nfacep.params import EngineParams

from . import toolchain
from .flow import BuildError, DoesNotFitError, copy_atomic, platform_for, run_flow
from .registry import Board
from .report import finish_report, start_report, timing_message
from .resources import (
    ESTIMATE_MARGIN,
    count_prepared_flipflops,
    refused_before_synthesis,
    sdram_words,
    table_brams,
)

__all__ = ["build", "design", "engine_report", "estimate", "programmable_engine"]


def build(
    nfa: Nfa,
    board: Board,
    out_dir: str,
    params: EngineParams,
    *,
    target_mhz: float | None = None,
    stem: str = "engine",
    query_file: str | None = None,
    progress=None,
    link: str = links.DEFAULT,
    values=None,
    seed: int | None = None,
    router: str | None = None,
    **options,
) -> dict:
    """Build ``nfa``'s engine for ``board`` into ``out_dir``; return the report. ``values``:
    the runtime parameters' values the engine starts with (required when the queries have
    parameters; :class:`nfacep.settings.ParamValues`).

    Writes ``out_dir/{stem}.v`` (the board top's Verilog), ``out_dir/{stem}.bit`` (ECP5) or
    ``.bin`` (iCE40), ``out_dir/report.json``, and keeps the toolchain's files and logs in
    ``out_dir/toolchain``. Raises :class:`DoesNotFitError` or :class:`BuildError` (after
    writing the report when synthesis ran); the bitstream is written only when timing is met.

    ``link`` names the board top in the registry of :mod:`nfacep.links`: ``"harness"``
    (:class:`nfacep.boards.top.BoardTop`, on-chip tuples, for measuring the engine), ``"uart"``
    (:class:`nfacep.links.uart.top.UartBoardTop`: tuples and matches over the board's USB UART
    at ``baud``, for ``nfacep run``) or ``"udp"`` (:class:`nfacep.links.udp.top.UdpBoardTop`:
    Gigabit Ethernet, the board's addresses ``udp``, a
    :class:`nfacep.links.udp.protocol.Endpoint`). ``options`` are the link's (``baud``,
    ``udp``); those of other links are ignored. The toolchain runs through :func:`run_flow`
    (``seed``: nextpnr's placement seed; ``router``: its router, ``router1`` by default).
    """
    # a missing program fails here, before the engine is elaborated
    toolchain.find_tools(board.tools)
    if target_mhz is not None and not target_mhz > 0:
        raise UsageError("--target-mhz must be positive")
    engine, link_info, top, _ = design(nfa, board, params, link, target_mhz, values, **options)

    bitstream = os.path.join(out_dir, stem + board.bitstream_suffix)
    verilog = os.path.join(out_dir, stem + ".v")
    report_path = os.path.join(out_dir, "report.json")
    flow = run_flow(
        top,
        board,
        os.path.join(out_dir, "toolchain"),
        target_mhz=target_mhz,
        pack=True,
        verilog=verilog,
        stale=(bitstream, verilog, report_path),
        progress=progress,
        seed=seed,
        router=router,
        synth_opts=synth_options(board, params),
    )
    if flow.step == "elaborate":  # rejected before synthesis: no report
        raise DoesNotFitError(flow.message)
    if flow.status == "synthesis failed":  # no report either
        raise BuildError(flow.message)

    report = start_report(flow, nfa, engine, params, query_file, link_info, verilog)
    report["engine"] = engine_report(engine, params)
    if flow.status != "ok":
        finish_report(report, flow, report_path, flow.status, flow.message)
        error = DoesNotFitError if flow.status == "does not fit" else BuildError
        raise error(flow.message, report)
    if not flow.timing_met:
        message = timing_message(flow)
        finish_report(report, flow, report_path, "timing not met", message)
        raise BuildError(message, report)
    copy_atomic(flow.bitstream, bitstream)
    report["files"]["bitstream"] = os.path.basename(bitstream)
    finish_report(report, flow, report_path, "ok", None)
    return report


def design(
    nfa: Nfa,
    board: Board,
    params: EngineParams,
    link: str,
    target_mhz: float | None,
    values=None,
    **options,
):
    """The engine and the board top ``build`` makes for ``link`` with the link's ``options``:
    ``(engine, link_info, top, platform)``; a :class:`UsageError` for an unknown link or one the
    board cannot carry (:meth:`nfacep.links.Link.check_board`) or a store it cannot build
    (``sdram``: only the board tops of links that drive the chip,
    :attr:`~nfacep.links.Link.drives_sdram`, with either engine, on a board whose chip the
    registry names, :attr:`~nfacep.boards.registry.Board.sdram`, and whose table it holds)."""
    from nfacep.hdl.engine import Engine

    sdram = params.store == "sdram" and bool(nfa.program.partition_fields)
    chosen = links.get(link)
    if sdram and not chosen.drives_sdram:
        drivers = [n for n in links.names() if links.get(n).drives_sdram]
        raise UsageError(
            f"--store sdram: the {link} board top does not drive the SDRAM chip; the "
            f"{' and '.join(drivers)} board tops do "
            f"({', '.join('--link ' + n for n in drivers)})"
        )
    platform, board_mhz = platform_for(board, target_mhz)
    chosen.check_board(platform, board_mhz, target_mhz, **options)
    if sdram:
        from .sdram import check_board

        check_board(platform)
        if board.sdram is None:
            raise UsageError(f"--store sdram: nfacep knows no SDRAM chip of {board.name}")
    chip = board.sdram if sdram else None
    if params.engine == "programmable":
        engine = programmable_engine(nfa, params, values, chosen, chip)
    else:
        engine = Engine(nfa, params, values=values, sdram=chip)
    try:
        link_info, top = chosen.top(engine, board_mhz, **options)
    except UsageError:
        engine._MustUse__silence = True  # (never elaborated: the error says why)
        raise
    return engine, link_info, top, platform


def synth_options(board: Board, params: EngineParams) -> str | None:
    """Yosys's options for ``build``: ``-nowidelut`` for the programmable engine on the ECP5
    (LUT4s only, no LUT5 to LUT7 made of LUT4s and the slices' PFUMX and L6MUX21). Its
    configured selections (an atom's operands, a state's atoms and truth-table bit) are
    multiplexers that ABC maps to wide LUTs poorly: the engine of the default capacity on
    marathon's stream takes 8,694 LUT4 without wide LUTs against 14,651 with them
    (``benchmarks/programmable_luts.py``). Its clock is the line's pace, not the LUTs' depth;
    the fixed engines keep Yosys's default."""
    if params.engine == "programmable" and "nextpnr-ecp5" in board.tools:
        return "-nowidelut"
    return None


def programmable_engine(nfa: Nfa, params: EngineParams, values, link: links.Link, sdram=None):
    """``--engine programmable``: the programmable engine of ``params``' capacities for the
    file's stream declaration (its fields and partition key), with ``--store sdram`` for the
    board's chip ``sdram``, booting with the file's image
    (:class:`nfacep.hdl.boot.BootedEngine`), or, on a link that carries images
    (:attr:`~nfacep.links.Link.loads_images`), with none: its hosts load it; a UsageError
    naming every capacity the file exceeds (:class:`nfacep.image.ImageError`), and for a file
    with runtime parameters on a link that switches them (the image holds their values as
    constants)."""
    from nfacep.hdl.boot import BootedEngine
    from nfacep.hdl.programmable import ProgrammableEngine
    from nfacep.image import Capacity, EngineShape, image

    program = nfa.program
    shape = EngineShape(program.schema, program.partition_fields, Capacity.of(params))
    if link.loads_images:
        image(nfa, shape, values)  # an ImageError before any gateware is made
        return ProgrammableEngine(shape, params, sdram=sdram)
    if program.parameters and link.name != "harness":
        raise UsageError(
            f"--engine programmable --link {link.name}: the programmable engine holds the runtime "
            "parameters' values as constants in its image, and the link cannot switch them "
            "(PARAMS); give the values with --param, and build a file without runtime "
            "parameters for this link, or use --link harness or udp"
        )
    shape = EngineShape(program.schema, program.partition_fields, Capacity.of(params))
    image(nfa, shape, values)  # an ImageError before any gateware is made
    return BootedEngine(shape, params, nfa, values, sdram=sdram)


def engine_report(engine, params: EngineParams) -> dict:
    """The report's ``engine``: its kind (``fixed``, ``programmable``) and, for the
    programmable engine, its capacities and the boot image's use of them."""
    if params.engine != "programmable":
        return {"kind": "fixed"}
    capacity = {"states": params.states, "atoms": params.atoms, "queries": params.queries}
    img = getattr(engine, "boot_image", None)
    if img is None:  # (a link that carries images: the board boots with none)
        return {"kind": "programmable", "capacity": capacity, "boot_image": None}
    return {
        "kind": "programmable",
        "capacity": capacity,
        "boot_image": {
            "fingerprint": img.fingerprint,
            "states": len(engine.nfa.states),
            "atoms": len(img.atoms),
            "queries": len(engine.nfa.queries),
        },
    }


def estimate(
    nfa: Nfa,
    board: Board,
    params: EngineParams,
    *,
    link: str = links.DEFAULT,
    values=None,
    **options,
) -> dict:
    """What ``build`` knows of the design's size before synthesis (``nfacep check --board``).

    The board top ``build`` would make is elaborated for the board's platform (no toolchain
    runs, no netlist built) and its flip-flops counted as :func:`run_flow` counts them in the
    netlist (:func:`~nfacep.boards.resources.count_prepared_flipflops`); ``refused`` says whether
    ``build`` would reject the design there (:func:`refused_before_synthesis`). LUTs are known
    only after synthesis. With ``store="table"``, the block RAMs of the table's banks
    (:class:`~nfacep.hdl.table.TablePartitioner`: banks × rows × entry width): on ECP5 the
    DP16KD primitives the banks instantiate (:func:`nfacep.hdl.bram.dp16kd_blocks`; synthesis
    removes those whose bits are never read, such as an accepting state's);
    elsewhere mapped onto the family's block shapes by
    :func:`~nfacep.boards.resources.bram_blocks`, an estimate (synthesis may put small banks in
    LUT RAM; :func:`~nfacep.boards.resources.table_brams`). Other memories (the input FIFO) may
    take block RAM too. ``options`` are the link's, as for :func:`build`.
    """
    engine, link_info, top, platform = design(nfa, board, params, link, None, values, **options)
    ffs = count_prepared_flipflops(top, platform)
    message = refused_before_synthesis(ffs, board, platform.device)
    return {
        "board": board.name,
        "device": platform.device,
        "family": board.family,
        "link": link,
        "parameters": params.as_dict(),
        "engine": engine_report(engine, params),
        "resources": {
            "ffs": {
                "estimate": ffs,
                "total": board.ffs,
                "from": "the elaborated design's flip-flops, before synthesis",
            },
            "luts": {"estimate": None, "total": board.luts, "from": "known after synthesis"},
            "brams": table_brams(engine.store, board),
            **({"sdram": words} if (words := sdram_words(engine.store)) else {}),
        },
        "refused_above_ffs": int(board.ffs * ESTIMATE_MARGIN),
        "refused": message is not None,
        "message": message,
        # the link's clocks, where it has its own (the UDP link: the engine's beside it)
        "link_clock": {
            k: v for k, v in link_info.items() if k.startswith(("engine_", "line_", "link_"))
        }
        or None,
        "link_note": link_info.get("note"),
    }
