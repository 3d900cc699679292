"""``report.json`` of ``nfacep build`` and its text: the design, the clock, the tools, the status,
the resources (:mod:`nfacep.boards.resources`) and the frequencies nextpnr reached
(:class:`~nfacep.boards.flow.FlowResult`).

:func:`start_report` writes what the design is; :func:`finish_report` adds how the flow ended
and writes the file; :func:`render_report` is the table ``nfacep build`` prints.
"""

from __future__ import annotations

import json
import os
import re

from nfacep.nfa import Nfa
from nfacep.params import EngineParams

from .flow import TOP, FlowResult, read_log, write_atomic
from .resources import RESOURCE_KINDS

__all__ = ["PAPER_MHZ", "finish_report", "render_report", "start_report", "timing_message"]

#: The clock of the paper's engine (Woods, Teubner and Alonso, VLDB 2010), for comparison.
PAPER_MHZ = 125.0


def _last_fmax_lines(log: str) -> list[str]:
    """nextpnr's final ``Max frequency for clock …`` lines (it prints them after placement too:
    the last block is the routed design's)."""
    lines = [ln.strip() for ln in log.splitlines() if "Max frequency for clock" in ln]
    seen: dict[str, str] = {}
    for ln in lines:
        m = re.search(r"clock\s+'([^']*)'", ln)
        seen[m.group(1) if m else ln] = ln
    return list(seen.values())


def start_report(
    flow: FlowResult,
    nfa: Nfa,
    engine,
    params: EngineParams,
    query_file: str | None,
    link_info: dict,
    verilog: str,
) -> dict:
    """``report.json`` as far as the flow went: the design, the clock, the tools (the status,
    resources and bitstream come with :func:`finish_report`)."""
    from nfacep.hdl.nfa_layout import state_layout

    board = flow.board
    link_info = dict(link_info)
    values = getattr(engine, "values", None)
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
        # (a programmable engine over UDP holds none: its hosts' images carry the values)
        "runtime_parameters": values.as_dict()["initial"] if values else None,
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
        "resource_kinds": RESOURCE_KINDS[board.family],
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


def finish_report(
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
    write_atomic(path, (json.dumps(report, indent=2) + "\n").encode())


def timing_message(flow: FlowResult) -> str:
    """Why timing was not met, in nextpnr's words."""
    lines = [
        ln
        for ln in _last_fmax_lines(read_log(os.path.join(flow.work, f"{TOP}.tim")))
        if "FAIL" in ln
    ] or ["(nextpnr printed no frequency line)"]
    targets = sorted(set(flow.constraint_mhz.values())) or [flow.target_mhz]
    target = " and ".join(f"{t:g}" for t in targets)
    return (
        f"timing not met at the target of {target} MHz; nextpnr says:\n"
        + "\n".join(lines)
        + f"\n(the bitstream that misses timing is left in {flow.work}, "
        "not copied to the output)"
    )


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
