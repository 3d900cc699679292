"""Building a bitstream for a board: elaborate, synthesise, check the fit, place and route, pack.

:func:`run_flow` takes any Amaranth top level through the open toolchain for a board: it drives
Amaranth's build plan for the board's platform one step at a time
(:func:`nfacep.boards.toolchain.run_step`), so a design that cannot fit is rejected with the
resource and the amount over before place-and-route: first by counting the flip-flops of the
elaborated design, then from Yosys's cell counts after synthesis (:mod:`nfacep.boards.resources`).
nextpnr writes a JSON report (``--report``) with its achieved frequency per clock and its
utilization. :func:`run_flow` returns all of it as a :class:`FlowResult` and raises only when it
cannot run the flow at all.
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

from . import toolchain
from .registry import Board
from .resources import (
    Usage,
    count_flipflops,
    exceeds,
    pnr_resources,
    refused_before_synthesis,
    synthesis_usage,
)
from .toolchain import ROUTERS, StepResult, tool_env_var

__all__ = [
    "TOP",
    "BuildError",
    "DoesNotFitError",
    "FlowResult",
    "copy_atomic",
    "elaborate",
    "platform_for",
    "read_log",
    "run_flow",
    "write_atomic",
]

#: The top module's name inside the toolchain folder.
TOP = "nfacep_top"


class BuildError(NfacepError):
    """The toolchain failed (synthesis, place-and-route, packing) or timing was missed.

    ``report`` is the report that was written, if any.
    """

    def __init__(self, message: str, report: dict | None = None):
        super().__init__(message)
        self.report = report


class DoesNotFitError(BuildError):
    """The design needs more of a resource than the device has."""


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


def read_log(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def write_atomic(path: str, content: bytes) -> None:
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


def copy_atomic(src: str, dst: str) -> None:
    with open(src, "rb") as f:
        write_atomic(dst, f.read())


def _script_steps(script: str) -> list[tuple[str, str]]:
    """The tool invocations of Amaranth's ``build_*.sh``: ``(tool variable, command line)``."""
    steps = []
    for line in script.splitlines():
        m = re.match(r'"\$(\w+)"', line.strip())
        if m:
            steps.append((m.group(1), line.strip()))
    return steps


def platform_for(board: Board, target_mhz: float | None):
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
            return pnr_resources(self.pnr, self.board, self.usage)
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


def _check_options(target_mhz: float | None, router: str | None) -> None:
    """:func:`run_flow`'s UsageError for a target frequency that is not positive or a router
    nextpnr does not have."""
    if target_mhz is not None and not target_mhz > 0:
        raise UsageError(f"the target frequency must be positive, not {target_mhz:g} MHz")
    if router is not None and router not in ROUTERS:
        raise UsageError(f"nextpnr's router is one of {', '.join(ROUTERS)}, not {router!r}")


def run_flow(
    top,
    board: Board,
    work: str,
    *,
    target_mhz: float | None = None,
    script_after_read: str | None = None,
    pack: bool = True,
    seed: int | None = None,
    router: str | None = None,
    synth_opts: str | None = None,
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
    ``seed`` is nextpnr's placement seed (``--seed``; default nextpnr's own), to compare builds
    across placements, and ``router`` its router (``--router``: one of ``ROUTERS``; default
    nextpnr's, ``router1``). ``synth_opts`` are options of Yosys's ``synth_<family>`` command
    (Amaranth's override of that name), e.g. ``-nowidelut``.

    Returns a :class:`FlowResult`; a design that fails or does not fit is a result, not an
    exception. Raises :class:`~nfacep.boards.toolchain.ToolchainMissingError` when a program is
    missing, :class:`~nfacep.errors.UsageError` for a ``target_mhz`` that is not positive or a
    ``router`` not in ``ROUTERS``, and :class:`BuildError` when Amaranth's build script does not
    run the board's tools.
    """
    say = progress or (lambda text: None)
    tools = toolchain.find_tools(board.tools)
    _check_options(target_mhz, router)
    platform, board_mhz = platform_for(board, target_mhz)
    plan, seconds = elaborate(
        top, platform, script_after_read, verilog, say, seed, synth_opts, router
    )
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
    _run_steps(result, plan, board, tools, work, pack, say)
    return result


def _run_steps(result: FlowResult, plan, board: Board, tools, work: str, pack: bool, say) -> None:
    """:func:`run_flow`'s tools one at a time (the packer only with ``pack``), each step's
    time and outcome into ``result``, up to the first that fails."""
    env, steps = _tool_steps(plan, board, tools)
    for tool, command in steps:
        if tool != "yosys" and not tool.startswith("nextpnr") and not pack:
            continue  # the packer, and no bitstream wanted
        say(f"running {os.path.basename(tools[tool])}")
        step = toolchain.run_step(command, cwd=work, env=env, tool=tool)
        result.seconds[tool] = round(step.seconds, 2)
        if not _after_step(result, step):
            break


def elaborate(
    top,
    platform,
    script_after_read: str | None,
    verilog: str | None,
    say,
    seed=None,
    synth_opts: str | None = None,
    router: str | None = None,
):
    """Amaranth's build plan for ``top`` on ``platform`` (elaborated, not run) and the seconds
    it took. The overrides make Yosys write its ``stat -json`` (and take ``synth_opts``) and
    nextpnr its ``--report`` (and take ``seed``, nextpnr's ``--seed``, and ``router``, its
    ``--router``)."""
    from amaranth.hdl import Elaboratable

    if callable(top) and not isinstance(top, Elaboratable):
        top = top()
    overrides = {
        "nextpnr_opts": f"--report {TOP}.report.json --timing-allow-fail"
        + ("" if seed is None else f" --seed {int(seed)}")
        + ("" if router is None else f" --router {router}"),
        "script_after_synth": f"tee -q -o {TOP}.stat.json stat -json",
    }
    if script_after_read:
        overrides["script_after_read"] = script_after_read
    if synth_opts:
        overrides["synth_opts"] = synth_opts
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
        copy_atomic(os.path.join(work, f"{TOP}.debug.v"), verilog)


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
        reason = _reason(step, read_log(log_path), log_path)
        result._stop("synthesis failed", step.tool, f"synthesis (yosys) failed:\n{reason}")
        return False
    with open(os.path.join(result.work, f"{TOP}.stat.json"), encoding="utf-8") as f:
        result.usage = synthesis_usage(json.load(f), result.board.family)
    over = exceeds(
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
        reason = _reason(step, read_log(log_path), log_path)
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
