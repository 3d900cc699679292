"""Resource accounting for a board: what a design uses (counted in the elaborated netlist, by
Yosys after synthesis, by nextpnr after place-and-route) against what the board has, and the
fit checks the flow (:mod:`nfacep.boards.flow`) stops at.

:func:`refused_before_synthesis` rejects a clear excess of flip-flops before synthesis,
:func:`exceeds` any resource over the board's after it; :func:`table_brams` and
:func:`render_estimate` are what ``nfacep check --board`` says of the block-RAM table
(:func:`nfacep.boards.bitstream.estimate`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .registry import Board

__all__ = [
    "BRAM_SHAPES",
    "ESTIMATE_MARGIN",
    "RESOURCE_KINDS",
    "Usage",
    "bram_blocks",
    "count_flipflops",
    "count_prepared_flipflops",
    "exceeds",
    "pnr_resources",
    "refused_before_synthesis",
    "render_estimate",
    "synthesis_usage",
    "table_brams",
]

#: How far the flip-flops counted before synthesis must exceed the device's to reject the design
#: then (synthesis removed 2-3 % of them in the engines measured).
ESTIMATE_MARGIN = 1.1


@dataclass
class Usage:
    """Resource use, from the elaborated design, Yosys or nextpnr: LUTs (ECP5: LUT4 slots,
    carry and distributed-RAM cells counted as two), flip-flops and block RAMs; ``cells`` is
    Yosys's count per cell type (:func:`synthesis_usage`)."""

    luts: int | None = None
    ffs: int | None = None
    brams: int | None = None
    cells: dict = field(default_factory=dict)


RESOURCE_NAMES = {"luts": "LUTs", "ffs": "flip-flops", "brams": "block RAMs"}


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


def count_prepared_flipflops(top, platform) -> int:
    """The flip-flop bits :func:`count_flipflops` finds in the RTLIL that ``platform`` would
    make of ``top``, counted in the elaborated design instead, by the rule Amaranth's netlist
    follows: a signal assigned from one module and one clocked domain only is a flip-flop
    as wide as the signal; one assigned from several (bits in a clocked domain, others in
    another or in ``comb``) has a flip-flop for each bit a clocked domain assigns. The
    platform's own logic is in (its clock and reset domains, the pins' buffers), as in
    :meth:`~amaranth.build.plat.Platform.prepare`; what is skipped is building the netlist
    and writing its text, about four fifths of ``build``'s elaboration. A bit assigned
    through a variable index (``Part``, an ``Array``) counts every bit the index can reach.
    With ``platform`` None, the design as :func:`amaranth.back.rtlil.convert` makes it (a
    missing domain a plain clock domain)."""
    from amaranth.hdl import ClockDomain, Fragment
    from amaranth.hdl._xfrm import DomainLowerer

    fragment = Fragment.get(top, platform)
    missing = platform.create_missing_domain if platform is not None else ClockDomain
    fragment._propagate_domains(missing, platform=platform)
    pending = [DomainLowerer()(fragment)]
    for _pin, _port, buffer in platform.iter_pins() if platform is not None else ():
        pin_fragment = Fragment.get(buffer, platform)
        pin_fragment._propagate_domains(_no_domain)
        pending.append(DomainLowerer()(pin_fragment))
    # per signal: the signal, its (module, domain) drivers, the bits clocked domains assign
    signals: dict[int, tuple[object, set, set]] = {}
    seen = []  # every fragment kept alive while their ids tell the modules apart
    while pending:
        frag = pending.pop()
        seen.append(frag)
        pending.extend(sub for sub, _name, _loc in frag.subfragments)
        for domain, statements in frag.statements.items():
            for signal, bit in _assigned_bits(statements):
                _, drivers, clocked = signals.setdefault(id(signal), (signal, set(), set()))
                drivers.add((id(frag), domain))
                if domain != "comb":
                    clocked.add(bit)
    total = 0
    for signal, drivers, clocked in signals.values():
        if len(drivers) == 1 and clocked:
            total += len(signal)  # type: ignore[arg-type]
        else:
            total += len(clocked)
    return total


def _no_domain(name: str):
    raise RuntimeError(f"a pin's buffer asks for the missing domain {name!r}")


def _assigned_bits(statements):
    """The (signal, bit) pairs ``statements`` assign, nested ones included."""
    from amaranth.hdl._ast import Assign, Switch

    for statement in statements:
        if isinstance(statement, Assign):
            yield from _lhs_bits(statement.lhs)
        elif isinstance(statement, Switch):
            for _patterns, body, _loc in statement.cases:
                yield from _assigned_bits(body)


def _lhs_bits(value) -> list:
    """The (signal, bit) pairs an assignment to ``value`` can drive, in ``value``'s bit order
    where that is fixed (signals, slices, concatenations), else all that it can reach."""
    from amaranth.hdl._ast import Concat, Operator, Part, Signal, Slice, SwitchValue

    if isinstance(value, Signal):
        return [(value, i) for i in range(len(value))]
    if isinstance(value, Slice):
        return _lhs_bits(value.value)[value.start : value.stop]
    if isinstance(value, Concat):
        return [bit for part in value.parts for bit in _lhs_bits(part)]
    if isinstance(value, Operator) and value.operator in ("u", "s"):
        return _lhs_bits(value.operands[0])
    if isinstance(value, Part):
        return _lhs_bits(value.value)
    if isinstance(value, SwitchValue):
        cases = [case for _patterns, case in value.cases if case is not None]
        return [bit for case in cases for bit in _lhs_bits(case)]
    raise TypeError(f"cannot count the flip-flops of an assignment to {value!r}")


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
        return exceeds(
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


def exceeds(usage: Usage, board: Board, device: str, where: str) -> str | None:
    """The message for the first resource ``usage`` exceeds on ``board``, or ``None``."""
    for key in ("luts", "ffs", "brams"):
        used = getattr(usage, key)
        total = getattr(board, key)
        if used is not None and used > total:
            return (
                f"the design does not fit the {board.name} ({device}): it needs "
                f"{used:,} {RESOURCE_NAMES[key]} ({where}), the device has {total:,}: "
                f"{used - total:,} over ({used / total:.0%} of the device). Use fewer "
                f"--partitions or a bigger board"
            )
    return None


#: What the report's resources count, by family.
RESOURCE_KINDS = {
    "ecp5": {"luts": "TRELLIS_COMB (LUT4 slots)", "ffs": "TRELLIS_FF", "brams": "DP16KD"},
    "ice40": {
        "luts": "ICESTORM_LC (logic cells: LUT4 + flip-flop)",
        "ffs": "SB_DFF* (one per logic cell)",
        "brams": "ICESTORM_RAM",
    },
}


def pnr_resources(pnr: dict, board: Board, usage: Usage | None) -> dict:
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


def table_brams(store, board: Board) -> dict:
    """What ``nfacep check --board`` says of the block RAMs of ``store`` (the engine's
    partition store) on ``board``: with the table (:class:`~nfacep.hdl.table.TablePartitioner`),
    its banks' blocks (banks × rows × entry width): on ECP5 the DP16KD primitives the banks
    instantiate (:func:`nfacep.hdl.bram.dp16kd_blocks`), elsewhere mapped onto the family's
    block shapes by :func:`bram_blocks`; otherwise nothing before synthesis."""
    from nfacep.hdl.bram import dp16kd_blocks
    from nfacep.hdl.table import TablePartitioner

    brams: dict = {"estimate": None, "total": board.brams, "from": "known after synthesis"}
    if not isinstance(store, TablePartitioner):
        return brams
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
    return brams


def sdram_words(store) -> dict | None:
    """What ``nfacep check --board`` says of the SDRAM ``store`` takes (``--store sdram``:
    :class:`~nfacep.hdl.sdram.store.SdramPartitioner`, the words it uses, which it clears
    after reset, against the chip's); None for the other stores."""
    from nfacep.hdl.sdram.store import SdramPartitioner

    if not isinstance(store, SdramPartitioner):
        return None
    return {
        "estimate": store.clearing_words,
        "total": store.geometry.words,
        "from": f"{store.entries:,} entries of {_words(store.entry_words)} of "
        f"{store.geometry.width} bits, in lines of {_words(store.line_words)}",
    }


def _words(n: int) -> str:
    return f"{n} word" if n == 1 else f"{n} words"


def render_estimate(est: dict) -> str:
    """:func:`estimate` as text."""
    from nfacep.params import EngineParams

    engine = EngineParams.from_dict(est["parameters"], source="the estimate")
    # (10 characters a column, wider for the SDRAM's tens of millions of words)
    w = max(
        [10]
        + [
            len(f"{r[k]:,}") + 1
            for r in est["resources"].values()
            if r is not None
            for k in ("estimate", "total")
            if r[k] is not None
        ]
    )
    out = [
        f"board {est['board']} ({est['device']}, --link {est['link']}): resources "
        "estimated before synthesis",
        f"  the engine it would build: {engine.options()}",
        f"  {'resource':<12}{'estimate':>{w}}{'total':>{w}}{'use':>8}",
    ]
    label = {"ffs": "flip-flops", "luts": "LUTs", "brams": "block RAMs", "sdram": "SDRAM words"}
    for key in ("ffs", "luts", "brams", "sdram"):
        r = est["resources"].get(key)
        if r is None:  # (no SDRAM store)
            continue
        if r["estimate"] is None:
            out.append(f"  {label[key]:<12}{'-':>{w}}{r['total']:>{w},}{'':>8}  {r['from']}")
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
        out.append(f"  {label[key]:<12}{r['estimate']:>{w},}{r['total']:>{w},}{share:>8}  {note}")
    if est.get("link_clock"):
        out.append(f"  {est['link_note']}")
    if est["refused"]:
        out.append(f"refused: `nfacep build` would stop before synthesis: {est['message']}")
    else:
        out.append(
            f"not refused before synthesis (that takes more than "
            f"{est['refused_above_ffs']:,} flip-flops); synthesis and place-and-route "
            "decide whether it fits"
        )
    return "\n".join(out)
