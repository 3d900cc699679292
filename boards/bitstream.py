"""Building a bitstream for a board: elaborate, synthesise, check the fit, place and route, pack.

:func:`build` drives Amaranth's build plan for the board's platform one step at a time, so a
design that cannot fit is rejected with the resource and the amount over before place-and-route:
first by counting the flip-flops of the elaborated design, then from Yosys's cell counts after
synthesis. nextpnr writes a JSON report (``--report``): its achieved frequency per clock and its
utilization become ``report.json``, which is written whenever synthesis ran, failures included.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
import time
from dataclasses import dataclass, field

from nfacep.errors import NfacepError, UsageError
from nfacep.nfa import Nfa

from .registry import Board
from .toolchain import find_tools, run_step, tool_env_var

__all__ = ["PAPER_MHZ", "BuildError", "DoesNotFitError", "build", "render_report"]

#: The clock of the paper's engine (Woods, Teubner and Alonso, VLDB 2010), for comparison.
PAPER_MHZ = 125.0

#: The top module's name inside the toolchain folder.
TOP = "nfacep_top"

#: How far the flip-flops counted before synthesis must exceed the device's to reject the design
#: then (synthesis removed 2-3 % of them in the engines measured).
ESTIMATE_MARGIN = 1.1

#: The board tops ``build`` makes (``--link``).
LINKS = ("harness", "uart")

HARNESS = ("synthesis/timing harness: pseudo-random tuples generated on chip, records and "
           "counters folded into the LEDs (no I/O link yet)")


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
    """Resource use, from the elaborated design, Yosys or nextpnr."""

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
        luts = cells.get("LUT4", 0) + 2 * cells.get("CCU2C", 0) \
            + 2 * cells.get("TRELLIS_DPR16X4", 0)
        ffs = cells.get("TRELLIS_FF", 0)
        brams = cells.get("DP16KD", 0)
    else:
        luts = cells.get("SB_LUT4", 0)
        ffs = sum(v for k, v in cells.items() if k.startswith("SB_DFF"))
        brams = cells.get("SB_RAM40_4K", 0)
    return Usage(luts, ffs, brams, cells)


def _over(usage: Usage, board: Board, device: str, where: str) -> str | None:
    """The message for the first resource ``usage`` exceeds on ``board``, or ``None``."""
    for key in ("luts", "ffs", "brams"):
        used = getattr(usage, key)
        total = getattr(board, key)
        if used is not None and used > total:
            return (f"the design does not fit the {board.name} ({device}): it needs "
                    f"{used:,} {_RESOURCE_NAMES[key]} ({where}), the device has {total:,}: "
                    f"{used - total:,} over ({used / total:.0%} of the device). Use fewer "
                    f"--partitions or a bigger board")
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
    clk = platform.resources[(platform.default_clk, 0)]
    board_mhz = clk.clock.frequency / 1e6
    if target_mhz is not None:
        # constrain the board's clock net tighter than the oscillator: nextpnr then works for
        # the higher frequency; the bitstream still runs at the board's clock
        clk.clock = Clock(target_mhz * 1e6)
    return platform, board_mhz


def build(nfa: Nfa, board: Board, out_dir: str, *, partitions: int, tick_tuples: int,
          timer_bits: int, target_mhz: float | None = None, stem: str = "engine",
          query_file: str | None = None, progress=None, link: str = "harness",
          baud: int = 115200) -> dict:
    """Build ``nfa``'s engine for ``board`` into ``out_dir``; return the report.

    Writes ``out_dir/{stem}.v`` (the board top's Verilog), ``out_dir/{stem}.bit`` (ECP5) or
    ``.bin`` (iCE40), ``out_dir/report.json``, and keeps the toolchain's files and logs in
    ``out_dir/toolchain``. Raises :class:`DoesNotFitError` or :class:`BuildError` (after
    writing the report when synthesis ran); the bitstream is written only when timing is met.

    ``link`` is the board top: ``"harness"`` (:class:`boards.top.BoardTop`, on-chip tuples,
    for measuring the engine) or ``"uart"`` (:class:`boards.link.top.UartBoardTop`: tuples and
    matches over the board's USB UART at ``baud``, for ``nfacep run``).
    """
    from hdl.engine import Engine

    say = progress or (lambda text: None)
    tools = find_tools(board.tools)
    if target_mhz is not None and not target_mhz > 0:
        raise UsageError("--target-mhz must be positive")
    if link not in LINKS:
        raise UsageError(f"unknown link {link!r}: choose one of {', '.join(LINKS)}")
    platform, board_mhz = _platform(board, target_mhz)
    target = target_mhz if target_mhz is not None else board_mhz
    if link == "uart":
        _check_uart(platform, board_mhz, baud)
    engine = Engine(nfa, partitions=partitions, tick_tuples=tick_tuples, timer_bits=timer_bits)
    link_info, top = _top(link, engine, board_mhz, baud)

    work = os.path.join(out_dir, "toolchain")
    bitstream = os.path.join(out_dir, stem + board.bitstream_suffix)
    verilog = os.path.join(out_dir, stem + ".v")
    report_path = os.path.join(out_dir, "report.json")

    seconds: dict[str, float] = {}
    t0 = time.monotonic()
    say("elaborating")
    plan = platform.build(
        top, name=TOP, do_build=False, debug_verilog=True,
        nextpnr_opts=f"--report {TOP}.report.json --timing-allow-fail",
        script_after_synth=f"tee -q -o {TOP}.stat.json stat -json",
    )
    seconds["elaborate"] = round(time.monotonic() - t0, 2)

    report: dict = {
        "board": board.name,
        "device": platform.device,
        "package": platform.package,
        "family": board.family,
        "query_file": query_file,
        "parameters": engine.parameters,
        "queries": [q.name for q in nfa.queries],
        "nfa_states": len(nfa.states),
        "predicates": len(nfa.predicates),
        "tuple_bits": engine.tuple_layout.size,
        "record_bits": engine.record_layout.size,
        "board_clock_mhz": board_mhz,
        "target_mhz": target,
        "paper_mhz": PAPER_MHZ,
        "fmax_mhz": {},
        "timing_met": False,
        "resources": {},
        "resources_from": None,
        "resource_kinds": ({"luts": "TRELLIS_COMB (LUT4 slots)", "ffs": "TRELLIS_FF",
                            "brams": "DP16KD"} if board.family == "ecp5" else
                           {"luts": "ICESTORM_LC (logic cells: LUT4 + flip-flop)",
                            "ffs": "SB_DFF* (one per logic cell)", "brams": "ICESTORM_RAM"}),
        "status": None,
        "message": None,
        "harness": link_info.pop("note"),
        "link": link_info,
        "tools": tools,
        "seconds": seconds,
        "files": {"bitstream": None, "verilog": os.path.basename(verilog),
                  "toolchain": "toolchain"},
    }

    # 1. before synthesis: flip-flops of the elaborated design. Synthesis trims a few (those it
    # finds constant), so only a clear excess is rejected here; the check after synthesis is
    # exact.
    ffs = count_flipflops(plan.files[f"{TOP}.il"])
    if ffs > board.ffs * ESTIMATE_MARGIN:
        raise DoesNotFitError(_over(
            Usage(ffs=ffs), board, platform.device,
            "counted in the elaborated design, before synthesis"))

    os.makedirs(out_dir, exist_ok=True)
    for stale in (bitstream, verilog, report_path):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(stale)
    plan.extract(work)
    for suffix in (".stat.json", ".report.json", ".config", ".bit", ".asc", ".bin", ".tim",
                   ".rpt"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(work, TOP + suffix))
    _copy_atomic(os.path.join(work, f"{TOP}.debug.v"), verilog)

    env = dict(os.environ)
    for name, exe in tools.items():
        env[tool_env_var(name)] = exe
    steps = _script_steps(plan.files[f"{plan.script}.sh"])
    by_var = {tool_env_var(n): n for n in board.tools}
    if sorted(by_var.get(var, "") for var, _ in steps if var in by_var) != sorted(board.tools):
        raise BuildError(f"Amaranth's build script {plan.script}.sh does not run "
                         f"{', '.join(board.tools)} as expected; is Amaranth newer than 0.5?")

    def finish(status: str, message: str | None, usage: Usage | None, pnr: dict | None):
        report["status"] = status
        report["message"] = message
        if pnr is not None:
            report["resources"] = _pnr_resources(pnr, board, usage)
            report["resources_from"] = "nextpnr"
            report["nextpnr_utilization"] = pnr.get("utilization", {})
        elif usage is not None:
            report["resources"] = {k: {"used": getattr(usage, k), "total": getattr(board, k)}
                                   for k in ("luts", "ffs", "brams")}
            report["resources_from"] = "yosys"
        if usage is not None:
            report["synthesis_cells"] = usage.cells
        _write_atomic(report_path, (json.dumps(report, indent=2) + "\n").encode())

    usage: Usage | None = None
    pnr: dict | None = None
    for var, command in steps:
        tool = by_var.get(var)
        if tool is None:
            continue  # not a build step (e.g. a programmer)
        say(f"running {os.path.basename(tools[tool])}")
        result = run_step(command, cwd=work, env=env, tool=tool)
        seconds[tool] = round(result.seconds, 2)
        log = _read(os.path.join(work, TOP + (".tim" if tool.startswith("nextpnr") else ".rpt")))
        if tool == "yosys":
            if result.returncode != 0:
                reason = _reason(result, log, os.path.join(work, f"{TOP}.rpt"))
                raise BuildError(f"synthesis (yosys) failed:\n{reason}")
            with open(os.path.join(work, f"{TOP}.stat.json"), encoding="utf-8") as f:
                usage = synthesis_usage(json.load(f), board.family)
            over = _over(usage, board, platform.device, "after synthesis, before place-and-route")
            if over:
                finish("does not fit", over, usage, None)
                raise DoesNotFitError(over, report)
        elif tool.startswith("nextpnr"):
            pnr_path = os.path.join(work, f"{TOP}.report.json")
            if os.path.exists(pnr_path):
                with open(pnr_path, encoding="utf-8") as f:
                    pnr = json.load(f)
                _timing(report, pnr)
            if result.returncode != 0:
                reason = _reason(result, log, os.path.join(work, f"{TOP}.tim"))
                message = f"place-and-route (nextpnr) failed:\n{reason}"
                finish("place-and-route failed", message, usage, pnr)
                raise BuildError(message, report)
            if pnr is None:
                message = "nextpnr wrote no report (--report); is it older than 0.1?"
                finish("place-and-route failed", message, usage, None)
                raise BuildError(message, report)
        else:
            if result.returncode != 0:
                reason = _reason(result, "", None)
                message = f"bitstream packing ({tool}) failed:\n{reason}"
                finish("packing failed", message, usage, pnr)
                raise BuildError(message, report)

    if not report["timing_met"]:
        lines = [ln for ln in _last_fmax_lines(_read(os.path.join(work, f"{TOP}.tim")))
                 if "FAIL" in ln] or ["(nextpnr printed no frequency line)"]
        message = (f"timing not met at the target of {target:g} MHz; nextpnr says:\n"
                   + "\n".join(lines) + f"\n(the bitstream that misses timing is left in {work}, "
                   "not copied to the output)")
        report["files"]["bitstream"] = None
        finish("timing not met", message, usage, pnr)
        raise BuildError(message, report)
    _copy_atomic(os.path.join(work, TOP + board.bitstream_suffix), bitstream)
    report["files"]["bitstream"] = os.path.basename(bitstream)
    finish("ok", None, usage, pnr)
    return report


def _check_uart(platform, board_mhz: float, baud: int) -> None:
    """A :class:`UsageError` when the board has no USB UART or cannot make ``baud``."""
    from .link.top import NoUartError, check_board
    from .link.uart import BaudError, divisor

    try:
        check_board(platform)
        divisor(board_mhz * 1e6, baud)
    except (NoUartError, BaudError) as exc:
        raise UsageError(str(exc)) from None


def _top(link: str, engine, board_mhz: float, baud: int):
    """The board top for ``link`` and what the report says about it."""
    if link == "harness":
        from .top import BoardTop

        return {"kind": "harness", "note": HARNESS}, BoardTop(engine)
    from .link.protocol import engine_id
    from .link.top import UartBoardTop
    from .link.uart import divisor

    div = divisor(board_mhz * 1e6, baud)
    top = UartBoardTop(engine, clk_hz=board_mhz * 1e6, baud=baud)
    ident = engine_id(engine.nfa, **engine.parameters)
    actual = board_mhz * 1e6 / div
    note = (f"UART link at {baud} baud on the board's USB serial port (frames: boards/LINK.md); "
            f"stream tuples with `nfacep run --port PORT --baud {baud}`")
    return {"kind": "uart", "baud": baud, "divisor": div, "actual_baud": round(actual),
            "engine_id": f"{ident:08x}", "note": note}, top


def _timing(report: dict, pnr: dict) -> None:
    fmax = pnr.get("fmax", {})
    report["fmax_mhz"] = {clock: round(v["achieved"], 2) for clock, v in fmax.items()}
    report["constraint_mhz"] = {clock: v["constraint"] for clock, v in fmax.items()}
    report["timing_met"] = bool(fmax) and all(
        v["achieved"] >= v["constraint"] for v in fmax.values())


def _pnr_resources(pnr: dict, board: Board, usage: Usage | None) -> dict:
    util = pnr.get("utilization", {})

    def get(kind: str, fallback_total: int) -> dict:
        u = util.get(kind, {})
        return {"used": u.get("used", 0), "total": u.get("available", fallback_total)}

    if board.family == "ecp5":
        return {"luts": get("TRELLIS_COMB", board.luts), "ffs": get("TRELLIS_FF", board.ffs),
                "brams": get("DP16KD", board.brams)}
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
    out.append(f"engine    {n} quer{'y' if n == 1 else 'ies'}, {report['nfa_states']} NFA states, "
               f"{report['predicates']} predicates, "
               f"{p['partitions']} partitions, tuple {report['tuple_bits']} bits")
    out.append("")
    if report["resources"]:
        label = {"luts": "LUTs", "ffs": "flip-flops", "brams": "block RAMs"}
        out.append(f"{'resource':<12}{'used':>10}{'total':>10}{'use':>8}   "
                   f"(from {report['resources_from']})")
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
            out.append(f"{clock:<{width}}  {mhz:>6.2f} MHz  {target:>6.2f} MHz  {verdict}"
                       f" ({paper} the paper's {report['paper_mhz']:g} MHz)")
        out.append("")
    out.append(f"status    {report['status']}")
    out.append(f"note      {report['harness']}")
    return "\n".join(out)
