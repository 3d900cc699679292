"""Building a bitstream for a board: elaborate, synthesise, check the fit, place and route, pack.

:func:`run_flow` takes any Amaranth top level through the open toolchain for a board: it drives
Amaranth's build plan for the board's platform one step at a time
(:func:`nfacep.boards.toolchain.run_step`), so a design that cannot fit is rejected with the
resource and the amount over before place-and-route: first by counting the flip-flops of the
elaborated design, then from Yosys's cell counts after synthesis. nextpnr writes a JSON report
(``--report``) with its achieved frequency per clock and its utilization. :func:`run_flow`
returns all of it as a :class:`FlowResult` and raises only when it cannot run the flow at all.

:func:`build` is ``nfacep build``: the engine's board top through :func:`run_flow`, then
``report.json`` (written whenever synthesis ran, failures included) and the bitstream, which is
copied out only when timing is met.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from nfacep.errors import NfacepError, UsageError
from nfacep.nfa import Nfa
from nfacep.params import EngineParams

from .registry import Board
from .toolchain import StepResult, find_tools, run_step, tool_env_var

__all__ = [
    "PAPER_MHZ",
    "BuildError",
    "DoesNotFitError",
    "FlowResult",
    "Usage",
    "bram_blocks",
    "build",
    "estimate",
    "refused_before_synthesis",
    "render_estimate",
    "render_report",
    "run_flow",
]

#: The clock of the paper's engine (Woods, Teubner and Alonso, VLDB 2010), for comparison.
PAPER_MHZ = 125.0

#: The top module's name inside the toolchain folder.
TOP = "nfacep_top"

#: How far the flip-flops counted before synthesis must exceed the device's to reject the design
#: then (synthesis removed 2-3 % of them in the engines measured).
ESTIMATE_MARGIN = 1.1

#: The board tops ``build`` makes (``--link``).
LINKS = ("harness", "uart", "udp")

#: The report's note on ``--link harness``.
HARNESS = (
    "synthesis/timing harness: pseudo-random tuples generated on chip, records and "
    "counters folded into the LEDs, no I/O (--link uart builds the UART link)"
)


class BuildError(NfacepError):
    """The toolchain failed (synthesis, place-and-route, packing) or timing was missed.

    ``report`` is the report that was written, if any.
    """

    def __init__(self, message: str, report: dict | None = None):
        super().__init__(message)
        self.report = report


class DoesNotFitError(BuildError):
    """The design needs more of a resource than the device has."""


@dataclass
class Usage:
    """Resource use, from the elaborated design, Yosys or nextpnr: LUTs (ECP5: LUT4 slots,
    carry and distributed-RAM cells counted as two), flip-flops and block RAMs; ``cells`` is
    Yosys's count per cell type (:func:`synthesis_usage`)."""

    luts: int | None = None
    ffs: int | None = None
    brams: int | None = None
    cells: dict = field(default_factory=dict)


_RESOURCE_NAMES = {"luts": "LUTs", "ffs": "flip-flops", "brams": "block RAMs"}


def count_flipflops(rtlil: str) -> int:
    """Flip-flop bits in an RTLIL netlist from Amaranth (its ``$dff``-family cells).

    Memories are not counted (synthesis may put them in LUT RAM or block RAM), so this is what
    the design needs at least, give or take the few registers synthesis finds constant.
    """
    total = 0
    in_ff = False
    for line in rtlil.splitlines():
        s = line.strip()
        if s.startswith("cell "):
            m = re.match(r"cell \$(\w+)\s", s)
            in_ff = m is not None and "dff" in m.group(1)
        elif in_ff and s.startswith("parameter \\WIDTH "):
            total += int(s.split()[-1])
            in_ff = False
        elif s == "end":
            in_ff = False
    return total


def synthesis_usage(stat: dict, family: str) -> Usage:
    """Resource use from Yosys's ``stat -json`` after ``synth_<family>``."""
    cells = dict(stat.get("design", {}).get("num_cells_by_type", {}))
    cells = {k: v for k, v in cells.items() if not k.startswith("$scopeinfo")}
    if family == "ecp5":
        luts = (
            cells.get("LUT4", 0) + 2 * cells.get("CCU2C", 0) + 2 * cells.get("TRELLIS_DPR16X4", 0)
        )
        ffs = cells.get("TRELLIS_FF", 0)
        brams = cells.get("DP16KD", 0)
    else:
        luts = cells.get("SB_LUT4", 0)
        ffs = sum(v for k, v in cells.items() if k.startswith("SB_DFF"))
        brams = cells.get("SB_RAM40_4K", 0)
    return Usage(luts, ffs, brams, cells)


def refused_before_synthesis(ffs: int, board: Board, device: str) -> str | None:
    """Why a design of ``ffs`` flip-flops in its elaborated netlist (:func:`count_flipflops`)
    is rejected before synthesis on ``board``, or ``None``: only a clear excess, more than
    ``ESTIMATE_MARGIN`` times the device's flip-flops, is."""
    if ffs > board.ffs * ESTIMATE_MARGIN:
        return _over(
            Usage(ffs=ffs), board, device, "counted in the elaborated design, before synthesis"
        )
    return None


#: The shapes (depth, width) of a block RAM with one read and one write port, by family: ECP5
#: DP16KD (18 kbit; 36 bits wide as a pseudo-dual-port RAM), iCE40 SB_RAM40_4K (4 kbit).
BRAM_SHAPES = {
    "ecp5": ((16384, 1), (8192, 2), (4096, 4), (2048, 9), (1024, 18), (512, 36)),
    "ice40": ((2048, 2), (1024, 4), (512, 8), (256, 16)),
}


def bram_blocks(family: str, depth: int, width: int) -> int:
    """Block RAMs of ``family`` that hold a memory of ``depth`` words of ``width`` bits (one
    read and one write port): the fewest over the block's shapes, side by side and stacked."""
    return min(-(-width // w) * -(-depth // d) for d, w in BRAM_SHAPES[family])


def _over(usage: Usage, board: Board, device: str, where: str) -> str | None:
    """The message for the first resource ``usage`` exceeds on ``board``, or ``None``."""
    for key in ("luts", "ffs", "brams"):
        used = getattr(usage, key)
        total = getattr(board, key)
        if used is not None and used > total:
            return (
                f"the design does not fit the {board.name} ({device}): it needs "
                f"{used:,} {_RESOURCE_NAMES[key]} ({where}), the device has {total:,}: "
                f"{used - total:,} over ({used / total:.0%} of the device). Use fewer "
                f"--partitions or a bigger board"
            )
    return None


def _last_fmax_lines(log: str) -> list[str]:
    """nextpnr's final ``Max frequency for clock …`` lines (it prints them after placement too:
    the last block is the routed design's)."""
    lines = [ln.strip() for ln in log.splitlines() if "Max frequency for clock" in ln]
    seen: dict[str, str] = {}
    for ln in lines:
        m = re.search(r"clock\s+'([^']*)'", ln)
        seen[m.group(1) if m else ln] = ln
    return list(seen.values())


def _errors(*texts: str) -> list[str]:
    out: list[str] = []
    for text in texts:
        for ln in text.splitlines():
            if "ERROR" in ln and ln.strip() not in out:
                out.append(ln.strip())
    return out


def _reason(result, log: str, log_path: str | None) -> str:
    """The tool's own ``ERROR`` lines; else the end of its output; else where to look."""
    errors = _errors(result.output, log)
    if errors:
        return "\n".join(errors)
    tail = "\n".join(result.output.splitlines()[-20:])
    where = f"; its log is {log_path}" if log_path else ""
    return tail or f"{result.tool} exited with status {result.returncode} and said nothing{where}"


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _write_atomic(path: str, content: bytes) -> None:
    """Write ``path`` whole or not at all (a temporary file renamed into place), with the
    permissions a plain ``open`` would give it."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".nfacep-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(content)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _copy_atomic(src: str, dst: str) -> None:
    with open(src, "rb") as f:
        _write_atomic(dst, f.read())


def _script_steps(script: str) -> list[tuple[str, str]]:
    """The tool invocations of Amaranth's ``build_*.sh``: ``(tool variable, command line)``."""
    steps = []
    for line in script.splitlines():
        m = re.match(r'"\$(\w+)"', line.strip())
        if m:
            steps.append((m.group(1), line.strip()))
    return steps


def _platform(board: Board, target_mhz: float | None):
    from amaranth.build import Clock

    platform = board.platform_class()()
    key = (platform.default_clk, 0)
    board_mhz = platform.resources[key].clock.frequency / 1e6
    if target_mhz is not None:
        # constrain the board's clock net tighter than the oscillator: nextpnr then works for
        # the higher frequency; the bitstream still runs at the board's clock. The resource is
        # the platform class's own object: constrain a copy, or every later platform of the
        # class (in this process) would take the target for the board's oscillator
        clk = copy.copy(platform.resources[key])
        clk.clock = Clock(target_mhz * 1e6)
        platform.resources[key] = clk
    return platform, board_mhz


@dataclass
class FlowResult:
    """What :func:`run_flow` did: where it stopped, why, and what the tools measured.

    ``status`` is ``"ok"`` when every step ran (synthesis, place-and-route and, with ``pack``,
    the bitstream packer), else ``"does not fit"``, ``"synthesis failed"``, ``"place-and-route
    failed"`` or ``"packing failed"``. ``"ok"`` says nothing about timing: see ``timing_met``.
    ``step`` is where the flow stopped: ``"elaborate"`` (the flip-flop count before synthesis)
    or the tool that failed or found the design too big (``"yosys"``, ``"nextpnr-ecp5"``,
    ``"icepack"`` …); ``None`` when it finished. ``message`` says why, quoting the tool's
    ``ERROR`` lines (``None`` when ``"ok"``).
    """

    status: str
    message: str | None
    step: str | None
    board: Board
    device: str
    package: str
    #: the board's oscillator
    board_mhz: float
    #: the clock nextpnr was constrained to: ``target_mhz``, else the board's
    target_mhz: float
    #: the toolchain programs, by their Amaranth names (:func:`nfacep.boards.toolchain.find_tools`)
    tools: dict[str, str]
    #: the toolchain folder: Amaranth's build files, the tools' outputs and logs
    work: str
    #: flip-flop bits of the elaborated design (:func:`count_flipflops`)
    elaborated_ffs: int = 0
    #: Yosys's resource counts after synthesis; ``None`` if synthesis did not finish
    usage: Usage | None = None
    #: nextpnr's ``--report`` JSON; ``None`` if place-and-route did not write it
    pnr: dict | None = None
    #: nextpnr's achieved frequency per clock (MHz, routed design)
    fmax_mhz: dict[str, float] = field(default_factory=dict)
    #: nextpnr's constraint per clock (MHz)
    constraint_mhz: dict[str, float] = field(default_factory=dict)
    #: every clock reached its constraint (``False`` without nextpnr's report)
    timing_met: bool = False
    #: seconds per step: ``"elaborate"``, then each tool that ran, by its Amaranth name
    seconds: dict[str, float] = field(default_factory=dict)
    #: the packed bitstream in ``work`` (with ``pack``, once the packer succeeded; it is there
    #: whether timing was met or not)
    bitstream: str | None = None

    def _stop(self, status: str, step: str, message: str) -> FlowResult:
        """The flow stopped at ``step``."""
        self.status, self.step, self.message = status, step, message
        return self

    @property
    def resources(self) -> dict:
        """``{"luts"|"ffs"|"brams": {"used": n, "total": n}}`` from nextpnr when it reported,
        else from Yosys when synthesis finished, else empty (see :attr:`resources_from`)."""
        if self.pnr is not None:
            return _pnr_resources(self.pnr, self.board, self.usage)
        if self.usage is not None:
            return {
                k: {"used": getattr(self.usage, k), "total": getattr(self.board, k)}
                for k in ("luts", "ffs", "brams")
            }
        return {}

    @property
    def resources_from(self) -> str | None:
        """``"nextpnr"``, ``"yosys"`` or ``None``: where :attr:`resources` come from."""
        if self.pnr is not None:
            return "nextpnr"
        return "yosys" if self.usage is not None else None


def run_flow(
    top,
    board: Board,
    work: str,
    *,
    target_mhz: float | None = None,
    script_after_read: str | None = None,
    pack: bool = True,
    verilog: str | None = None,
    stale: Iterable[str] = (),
    progress: Callable[[str], None] | None = None,
) -> FlowResult:
    """Take ``top`` through the open toolchain for ``board`` in the folder ``work``.

    ``top`` is an Amaranth elaboratable, or a function of no arguments that makes one. It is
    elaborated with the board's platform, the design's flip-flops are counted, and then
    Amaranth's build script for the platform runs one tool at a time through
    :func:`nfacep.boards.toolchain.run_step`: Yosys (its ``stat -json`` read after synthesis),
    nextpnr (``--report``, ``--timing-allow-fail``: a design that misses timing is still placed and
    routed) and, with ``pack``, the bitstream packer. The flow stops at the first failure and
    before place-and-route when the design cannot fit: when the elaborated design has more
    than ``ESTIMATE_MARGIN`` times the device's flip-flops (then nothing is written: synthesis
    trims the few it finds constant, so only a clear excess is rejected before it), or when
    Yosys's counts exceed any of the board's resources (exact).

    ``target_mhz`` constrains the board's clock for nextpnr (default: the board's oscillator).
    ``script_after_read`` is Yosys script run after the design is read (Amaranth's override of
    that name). ``verilog`` is a path for the top's Verilog (Amaranth's debug Verilog), written
    whole before synthesis. ``stale`` are files to delete once the design has passed the count
    before synthesis, before anything is written (an earlier build's outputs, which must not
    outlive a failed build). ``progress`` is called with a short text before each step.

    Returns a :class:`FlowResult`; a design that fails or does not fit is a result, not an
    exception. Raises :class:`~nfacep.boards.toolchain.ToolchainMissingError` when a program is
    missing, :class:`~nfacep.errors.UsageError` for a ``target_mhz`` that is not positive, and
    :class:`BuildError` when Amaranth's build script does not run the board's tools.
    """
    say = progress or (lambda text: None)
    tools = find_tools(board.tools)
    if target_mhz is not None and not target_mhz > 0:
        raise UsageError(f"the target frequency must be positive, not {target_mhz:g} MHz")
    platform, board_mhz = _platform(board, target_mhz)
    plan, seconds = _elaborate(top, platform, script_after_read, verilog, say)
    result = FlowResult(
        status="ok",
        message=None,
        step=None,
        board=board,
        device=platform.device,
        package=platform.package,
        board_mhz=board_mhz,
        target_mhz=target_mhz if target_mhz is not None else board_mhz,
        tools=tools,
        work=work,
        seconds={"elaborate": seconds},
    )

    # before synthesis, only a clear excess of flip-flops (ESTIMATE_MARGIN)
    result.elaborated_ffs = count_flipflops(plan.files[f"{TOP}.il"])
    refused = refused_before_synthesis(result.elaborated_ffs, board, platform.device)
    if refused:
        return result._stop("does not fit", "elaborate", refused)

    _extract(plan, work, stale, verilog)
    env, steps = _tool_steps(plan, board, tools)
    for tool, command in steps:
        if tool != "yosys" and not tool.startswith("nextpnr") and not pack:
            continue  # the packer, and no bitstream wanted
        say(f"running {os.path.basename(tools[tool])}")
        step = run_step(command, cwd=work, env=env, tool=tool)
        result.seconds[tool] = round(step.seconds, 2)
        if not _after_step(result, step):
            break
    return result


def _elaborate(top, platform, script_after_read: str | None, verilog: str | None, say):
    """Amaranth's build plan for ``top`` on ``platform`` (elaborated, not run) and the seconds
    it took. The overrides make Yosys write its ``stat -json`` and nextpnr its ``--report``."""
    from amaranth.hdl import Elaboratable

    if callable(top) and not isinstance(top, Elaboratable):
        top = top()
    overrides = {
        "nextpnr_opts": f"--report {TOP}.report.json --timing-allow-fail",
        "script_after_synth": f"tee -q -o {TOP}.stat.json stat -json",
    }
    if script_after_read:
        overrides["script_after_read"] = script_after_read
    t0 = time.monotonic()
    say("elaborating")
    plan = platform.build(
        top, name=TOP, do_build=False, debug_verilog=verilog is not None, **overrides
    )
    return plan, round(time.monotonic() - t0, 2)


def _extract(plan, work: str, stale: Iterable[str], verilog: str | None) -> None:
    """Delete ``stale``, write the plan's files into ``work`` without the outputs an earlier
    flow left there, and copy the top's Verilog to ``verilog``."""
    for path in stale:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    plan.extract(work)
    for suffix in (".stat.json", ".report.json", ".config", ".bit", ".asc", ".bin", ".tim", ".rpt"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(work, TOP + suffix))
    if verilog is not None:
        _copy_atomic(os.path.join(work, f"{TOP}.debug.v"), verilog)


def _tool_steps(plan, board: Board, tools: dict[str, str]):
    """The environment that names the toolchain's programs, and the board's tools' command
    lines in the order of Amaranth's build script: ``[(tool, command)]``. Raises
    :class:`BuildError` when the script does not run each of the board's tools once."""
    env = dict(os.environ)
    for name, exe in tools.items():
        env[tool_env_var(name)] = exe
    steps = _script_steps(plan.files[f"{plan.script}.sh"])
    by_var = {tool_env_var(n): n for n in board.tools}
    if sorted(by_var.get(var, "") for var, _ in steps if var in by_var) != sorted(board.tools):
        raise BuildError(
            f"Amaranth's build script {plan.script}.sh does not run "
            f"{', '.join(board.tools)} as expected; is Amaranth newer than 0.5?"
        )
    # (the rest are not build steps, e.g. a programmer)
    return env, [(by_var[var], command) for var, command in steps if var in by_var]


def _after_step(result: FlowResult, step: StepResult) -> bool:
    """Record what a tool's step measured in ``result``; ``False`` when the flow stops there."""
    if step.tool == "yosys":
        return _after_synthesis(result, step)
    if step.tool.startswith("nextpnr"):
        return _after_place_and_route(result, step)
    return _after_packing(result, step)


def _after_synthesis(result: FlowResult, step: StepResult) -> bool:
    """Yosys's resource counts; the flow stops when it failed or they exceed the board's."""
    if step.returncode != 0:
        log_path = os.path.join(result.work, f"{TOP}.rpt")
        reason = _reason(step, _read(log_path), log_path)
        result._stop("synthesis failed", step.tool, f"synthesis (yosys) failed:\n{reason}")
        return False
    with open(os.path.join(result.work, f"{TOP}.stat.json"), encoding="utf-8") as f:
        result.usage = synthesis_usage(json.load(f), result.board.family)
    over = _over(
        result.usage, result.board, result.device, "after synthesis, before place-and-route"
    )
    if over:
        result._stop("does not fit", step.tool, over)
        return False
    return True


def _after_place_and_route(result: FlowResult, step: StepResult) -> bool:
    """nextpnr's report: the frequency reached per clock, and whether timing is met (read even
    when nextpnr failed, if it wrote the report). The flow stops when it failed."""
    pnr_path = os.path.join(result.work, f"{TOP}.report.json")
    if os.path.exists(pnr_path):
        with open(pnr_path, encoding="utf-8") as f:
            result.pnr = json.load(f)
        fmax = result.pnr.get("fmax", {})
        result.fmax_mhz = {clock: round(v["achieved"], 2) for clock, v in fmax.items()}
        result.constraint_mhz = {clock: v["constraint"] for clock, v in fmax.items()}
        result.timing_met = bool(fmax) and all(
            v["achieved"] >= v["constraint"] for v in fmax.values()
        )
    if step.returncode != 0:
        log_path = os.path.join(result.work, f"{TOP}.tim")
        reason = _reason(step, _read(log_path), log_path)
        result._stop(
            "place-and-route failed", step.tool, f"place-and-route (nextpnr) failed:\n{reason}"
        )
        return False
    if result.pnr is None:
        result._stop(
            "place-and-route failed",
            step.tool,
            "nextpnr wrote no report (--report); is it older than 0.1?",
        )
        return False
    return True


def _after_packing(result: FlowResult, step: StepResult) -> bool:
    """The bitstream, when the packer succeeded."""
    if step.returncode != 0:
        reason = _reason(step, "", None)
        result._stop(
            "packing failed", step.tool, f"bitstream packing ({step.tool}) failed:\n{reason}"
        )
        return False
    result.bitstream = os.path.join(result.work, TOP + result.board.bitstream_suffix)
    return True


#: What the report's resources count, by family.
_RESOURCE_KINDS = {
    "ecp5": {"luts": "TRELLIS_COMB (LUT4 slots)", "ffs": "TRELLIS_FF", "brams": "DP16KD"},
    "ice40": {
        "luts": "ICESTORM_LC (logic cells: LUT4 + flip-flop)",
        "ffs": "SB_DFF* (one per logic cell)",
        "brams": "ICESTORM_RAM",
    },
}


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
    link: str = "harness",
    baud: int = 115200,
    udp=None,
    values=None,
) -> dict:
    """Build ``nfa``'s engine for ``board`` into ``out_dir``; return the report. ``values``:
    the runtime parameters' values the engine starts with (required when the queries have
    parameters; :class:`nfacep.settings.ParamValues`).

    Writes ``out_dir/{stem}.v`` (the board top's Verilog), ``out_dir/{stem}.bit`` (ECP5) or
    ``.bin`` (iCE40), ``out_dir/report.json``, and keeps the toolchain's files and logs in
    ``out_dir/toolchain``. Raises :class:`DoesNotFitError` or :class:`BuildError` (after
    writing the report when synthesis ran); the bitstream is written only when timing is met.

    ``link`` is the board top: ``"harness"`` (:class:`nfacep.boards.top.BoardTop`, on-chip tuples,
    for measuring the engine) or ``"uart"`` (:class:`nfacep.boards.link.top.UartBoardTop`: tuples
    and matches over the board's USB UART at ``baud``, for ``nfacep run``) or ``"udp"``
    (:class:`nfacep.boards.link.eth.board.UdpBoardTop`: Gigabit Ethernet, the board's addresses
    ``udp``, a :class:`nfacep.boards.link.eth.payload.Endpoint`). The toolchain runs through
    :func:`run_flow`.
    """
    find_tools(board.tools)  # a missing program fails here, before the engine is elaborated
    if target_mhz is not None and not target_mhz > 0:
        raise UsageError("--target-mhz must be positive")
    engine, link_info, top, _ = _design(nfa, board, params, link, baud, target_mhz, udp, values)

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
    )
    if flow.step == "elaborate":  # rejected before synthesis: no report
        raise DoesNotFitError(flow.message)
    if flow.status == "synthesis failed":  # no report either
        raise BuildError(flow.message)

    report = _report(flow, nfa, engine, params, query_file, link_info, verilog)
    if flow.status != "ok":
        _finish_report(report, flow, report_path, flow.status, flow.message)
        error = DoesNotFitError if flow.status == "does not fit" else BuildError
        raise error(flow.message, report)
    if not flow.timing_met:
        message = _timing_message(flow)
        _finish_report(report, flow, report_path, "timing not met", message)
        raise BuildError(message, report)
    _copy_atomic(flow.bitstream, bitstream)
    report["files"]["bitstream"] = os.path.basename(bitstream)
    _finish_report(report, flow, report_path, "ok", None)
    return report


def _design(
    nfa: Nfa,
    board: Board,
    params: EngineParams,
    link: str,
    baud: int,
    target_mhz: float | None,
    udp=None,
    values=None,
):
    """The engine and the board top ``build`` makes for ``link``: ``(engine, link_info, top,
    platform)``; a :class:`UsageError` for an unknown link or a UART the board cannot make."""
    from nfacep.hdl.engine import Engine

    if link not in LINKS:
        raise UsageError(f"unknown link {link!r}: choose one of {', '.join(LINKS)}")
    platform, board_mhz = _platform(board, target_mhz)
    if link == "uart":
        _check_uart(platform, board_mhz, baud)
    if link == "udp":
        _check_udp(platform, target_mhz)
    engine = Engine(nfa, params, values=values)
    link_info, top = _top(link, engine, board_mhz, baud, udp)
    return engine, link_info, top, platform


def estimate(
    nfa: Nfa,
    board: Board,
    params: EngineParams,
    *,
    link: str = "harness",
    baud: int = 115200,
    udp=None,
    values=None,
) -> dict:
    """What ``build`` knows of the design's size before synthesis (``nfacep check --board``).

    The board top ``build`` would make is elaborated for the board's platform (no toolchain
    runs) and its flip-flops counted as :func:`run_flow` counts them; ``refused`` says whether
    ``build`` would reject the design there (:func:`refused_before_synthesis`). LUTs are known
    only after synthesis. With ``store="table"``, the block RAMs of the table's banks
    (:class:`~nfacep.hdl.table.TablePartitioner`: banks × rows × entry width): on ECP5 the
    DP16KD primitives the banks instantiate (:func:`nfacep.hdl.bram.dp16kd_blocks`; synthesis
    removes those whose bits are never read, such as an accepting state's);
    elsewhere mapped onto the family's block shapes by :func:`bram_blocks`, an estimate
    (synthesis may put small banks in LUT RAM). Other memories (the input FIFO) may take block
    RAM too.
    """
    from nfacep.hdl.bram import dp16kd_blocks
    from nfacep.hdl.table import TablePartitioner

    engine, _, top, platform = _design(nfa, board, params, link, baud, None, udp, values)
    plan, _ = _elaborate(top, platform, None, None, lambda text: None)
    ffs = count_flipflops(plan.files[f"{TOP}.il"])
    message = refused_before_synthesis(ffs, board, platform.device)
    brams: dict = {"estimate": None, "total": board.brams, "from": "known after synthesis"}
    store = engine.store
    if isinstance(store, TablePartitioner):
        width = store.entry_layout.size
        if board.family == "ecp5":
            per_bank = dp16kd_blocks(store.rows, width)
            source = (
                "the DP16KD blocks the table's banks instantiate (banks x rows x entry "
                "bits, with the output register)"
            )
        else:
            per_bank = bram_blocks(board.family, store.rows, width)
            source = (
                "the table's banks (banks x rows x entry bits), before synthesis, which "
                "may put small banks in LUT RAM"
            )
        brams.update(
            estimate=store.banks * per_bank,
            banks=store.banks,
            rows=store.rows,
            entry_bits=width,
            per_bank=per_bank,
            **{"from": source},
        )
    return {
        "board": board.name,
        "device": platform.device,
        "family": board.family,
        "link": link,
        "parameters": params.as_dict(),
        "resources": {
            "ffs": {
                "estimate": ffs,
                "total": board.ffs,
                "from": "the elaborated design's flip-flops, before synthesis",
            },
            "luts": {"estimate": None, "total": board.luts, "from": "known after synthesis"},
            "brams": brams,
        },
        "refused_above_ffs": int(board.ffs * ESTIMATE_MARGIN),
        "refused": message is not None,
        "message": message,
    }


def render_estimate(est: dict) -> str:
    """:func:`estimate` as text."""
    out = [
        f"board {est['board']} ({est['device']}, --link {est['link']}): resources "
        "estimated before synthesis",
        f"  {'resource':<12}{'estimate':>10}{'total':>10}{'use':>8}",
    ]
    label = {"ffs": "flip-flops", "luts": "LUTs", "brams": "block RAMs"}
    for key in ("ffs", "luts", "brams"):
        r = est["resources"][key]
        if r["estimate"] is None:
            out.append(f"  {label[key]:<12}{'-':>10}{r['total']:>10,}{'':>8}  {r['from']}")
            continue
        share = f"{r['estimate'] / r['total']:.1%}" if r["total"] else "-"
        note = r["from"]
        if key == "brams":
            exact = est["family"] == "ecp5"
            note = (
                f"{r['banks']} banks x {r['rows']} rows x {r['entry_bits']} bits, "
                f"{r['per_bank']} per bank"
                + (
                    " (DP16KD instances; synthesis drops those whose bits are never read)"
                    if exact
                    else "; an estimate: synthesis may put small banks in LUT RAM"
                )
            )
        out.append(f"  {label[key]:<12}{r['estimate']:>10,}{r['total']:>10,}{share:>8}  {note}")
    if est["refused"]:
        out.append(f"refused: `nfacep build` would stop before synthesis: {est['message']}")
    else:
        out.append(
            f"not refused before synthesis (that takes more than "
            f"{est['refused_above_ffs']:,} flip-flops); synthesis and place-and-route "
            "decide whether it fits"
        )
    return "\n".join(out)


def _report(
    flow: FlowResult,
    nfa: Nfa,
    engine,
    params: EngineParams,
    query_file: str | None,
    link_info: dict,
    verilog: str,
) -> dict:
    """``report.json`` as far as the flow went: the design, the clock, the tools (the status,
    resources and bitstream come with :func:`_finish_report`)."""
    from nfacep.hdl.nfa import state_layout

    board = flow.board
    link_info = dict(link_info)
    report: dict = {
        "board": board.name,
        "device": flow.device,
        "package": flow.package,
        "family": board.family,
        "query_file": query_file,
        "parameters": params.as_dict(),
        "queries": [q.name for q in nfa.queries],
        "nfa_states": len(nfa.states),
        "state_bits": state_layout(nfa).size,
        "runtime_parameters": engine.values.as_dict()["initial"] if engine.values else None,
        "predicates": len(nfa.predicates),
        "tuple_bits": engine.tuple_layout.size,
        "record_bits": engine.record_layout.size,
        "board_clock_mhz": flow.board_mhz,
        "target_mhz": flow.target_mhz,
        "paper_mhz": PAPER_MHZ,
        "fmax_mhz": flow.fmax_mhz,
        "timing_met": flow.timing_met,
        "resources": {},
        "resources_from": None,
        "resource_kinds": _RESOURCE_KINDS[board.family],
        "status": None,
        "message": None,
        "harness": link_info.pop("note"),
        "link": link_info,
        "tools": flow.tools,
        "seconds": flow.seconds,
        "files": {
            "bitstream": None,
            "verilog": os.path.basename(verilog),
            "toolchain": "toolchain",
        },
    }
    if flow.pnr is not None:
        report["constraint_mhz"] = flow.constraint_mhz
    return report


def _finish_report(
    report: dict, flow: FlowResult, path: str, status: str, message: str | None
) -> None:
    """Complete ``report`` with the status, message and resources, and write it to ``path``."""
    report["status"] = status
    report["message"] = message
    if flow.resources_from is not None:
        report["resources"] = flow.resources
        report["resources_from"] = flow.resources_from
    if flow.pnr is not None:
        report["nextpnr_utilization"] = flow.pnr.get("utilization", {})
    if flow.usage is not None:
        report["synthesis_cells"] = flow.usage.cells
    _write_atomic(path, (json.dumps(report, indent=2) + "\n").encode())


def _timing_message(flow: FlowResult) -> str:
    """Why timing was not met, in nextpnr's words."""
    lines = [
        ln for ln in _last_fmax_lines(_read(os.path.join(flow.work, f"{TOP}.tim"))) if "FAIL" in ln
    ] or ["(nextpnr printed no frequency line)"]
    targets = sorted(set(flow.constraint_mhz.values())) or [flow.target_mhz]
    target = " and ".join(f"{t:g}" for t in targets)
    return (
        f"timing not met at the target of {target} MHz; nextpnr says:\n"
        + "\n".join(lines)
        + f"\n(the bitstream that misses timing is left in {flow.work}, "
        "not copied to the output)"
    )


def _check_uart(platform, board_mhz: float, baud: int) -> None:
    """A :class:`UsageError` when the board has no USB UART or cannot make ``baud``."""
    from nfacep.hdl.uart.rx import BaudError, divisor

    from .link.top import NoUartError, check_board

    try:
        check_board(platform)
        divisor(board_mhz * 1e6, baud)
    except (NoUartError, BaudError) as exc:
        raise UsageError(str(exc)) from None


def _check_udp(platform, target_mhz: float | None) -> None:
    """A :class:`UsageError` when the board has no RGMII port the UDP link supports."""
    from .link.eth.board import NoEthernetError, check_board

    if target_mhz is not None:
        raise UsageError(
            "--target-mhz does not apply to --link udp: the engine runs at the line's 125 MHz"
        )
    try:
        check_board(platform)
    except NoEthernetError as exc:
        raise UsageError(str(exc)) from None


def _top(link: str, engine, board_mhz: float, baud: int, udp=None):
    """The board top for ``link`` and what the report says about it."""
    if link == "harness":
        from .top import BoardTop

        return {"kind": "harness", "note": HARNESS}, BoardTop(engine)
    if link == "udp":
        from .link.eth.board import CLOCK_MHZ, UdpBoardTop
        from .link.eth.payload import DEFAULT_ENDPOINT

        udp = udp or DEFAULT_ENDPOINT
        top = UdpBoardTop(engine, mac=udp.mac, ip=udp.ip, port=udp.port)
        note = (
            f"UDP link on the first RGMII port at 1000 Mb/s, engine at {CLOCK_MHZ:g} MHz "
            f"(payload format: boards/UDP.md); the board is {udp}"
        )
        return {
            "kind": "udp",
            "mac": udp.mac.hex(":"),
            "ip": ".".join(map(str, udp.ip)),
            "port": udp.port,
            "engine_mhz": CLOCK_MHZ,
            "engine_id": f"{top.top.engine_id:08x}",
            "note": note,
        }, top
    from nfacep.hdl.uart.rx import divisor

    from .link.protocol import engine_id
    from .link.top import UartBoardTop

    div = divisor(board_mhz * 1e6, baud)
    top = UartBoardTop(engine, clk_hz=board_mhz * 1e6, baud=baud)
    ident = engine_id(engine.nfa, engine.params)
    actual = board_mhz * 1e6 / div
    note = (
        f"UART link at {baud} baud on the board's USB serial port (frames: boards/LINK.md); "
        f"stream tuples with `nfacep run --port PORT --baud {baud}`"
    )
    return {
        "kind": "uart",
        "baud": baud,
        "divisor": div,
        "actual_baud": round(actual),
        "engine_id": f"{ident:08x}",
        "note": note,
    }, top


def _pnr_resources(pnr: dict, board: Board, usage: Usage | None) -> dict:
    util = pnr.get("utilization", {})

    def get(kind: str, fallback_total: int) -> dict:
        u = util.get(kind, {})
        return {"used": u.get("used", 0), "total": u.get("available", fallback_total)}

    if board.family == "ecp5":
        return {
            "luts": get("TRELLIS_COMB", board.luts),
            "ffs": get("TRELLIS_FF", board.ffs),
            "brams": get("DP16KD", board.brams),
        }
    lcs = get("ICESTORM_LC", board.luts)
    # an iCE40 logic cell holds one LUT and one flip-flop; nextpnr counts cells, so the
    # flip-flops are Yosys's count against the same total
    ffs = {"used": usage.ffs if usage else None, "total": lcs["total"]}
    return {"luts": lcs, "ffs": ffs, "brams": get("ICESTORM_RAM", board.brams)}


def render_report(report: dict) -> str:
    """The report as a human-readable table."""
    out = [f"board     {report['board']} ({report['device']}, {report['package']})"]
    p = report["parameters"]
    n = len(report["queries"])
    out.append(
        f"engine    {n} quer{'y' if n == 1 else 'ies'}, {report['nfa_states']} NFA states, "
        f"{report['predicates']} predicates, "
        f"{p['partitions']} partitions, tuple {report['tuple_bits']} bits"
    )
    out.append("")
    if report["resources"]:
        label = {"luts": "LUTs", "ffs": "flip-flops", "brams": "block RAMs"}
        out.append(
            f"{'resource':<12}{'used':>10}{'total':>10}{'use':>8}   "
            f"(from {report['resources_from']})"
        )
        for key in ("luts", "ffs", "brams"):
            r = report["resources"].get(key)
            if not r or r["used"] is None:
                continue
            share = f"{r['used'] / r['total']:.1%}" if r["total"] else "-"
            out.append(f"{label[key]:<12}{r['used']:>10,}{r['total']:>10,}{share:>8}")
        out.append("")
    if report["fmax_mhz"]:
        width = max(len("clock"), *(len(c) for c in report["fmax_mhz"]))
        out.append(f"{'clock':<{width}}  {'fmax':>10}  {'target':>10}  result")
        for clock, mhz in report["fmax_mhz"].items():
            target = report.get("constraint_mhz", {}).get(clock, report["target_mhz"])
            verdict = "met" if mhz >= target else "MISSED"
            paper = "above" if mhz >= report["paper_mhz"] else "below"
            out.append(
                f"{clock:<{width}}  {mhz:>6.2f} MHz  {target:>6.2f} MHz  {verdict}"
                f" ({paper} the paper's {report['paper_mhz']:g} MHz)"
            )
        out.append("")
    out.append(f"status    {report['status']}")
    out.append(f"note      {report['harness']}")
    return "\n".join(out)
