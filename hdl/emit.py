"""Verilog for the simulators: Amaranth's conversion, with memories that start at zero zeroed by
a loop instead of row by row.

Amaranth 0.5's RTLIL back-end gives every memory a ``$meminit_v2`` cell that spells out its
whole initial contents bit by bit, zeros included (amaranth-lang/amaranth#1522; Amaranth's
main branch still does): for fire's default engine (a 65,536-entry table of 74-bit entries)
nearly five million one-bit constants built in Python, parsed by Yosys, written back as one
``mem[i] = ...;`` line per row, and compiled by Icarus and Verilator (Verilator makes 15 MB of
C++ of them). ``benchmarks/emit_time.py`` measures the difference.

:func:`verilog` converts with Amaranth's own ``verilog.convert``, except that a memory whose
every row starts at zero gets no ``$meminit_v2`` cell; in the Verilog that Yosys writes, each
such memory gets one ``initial`` loop that sets every row to zero instead. Icarus and Verilator
run it at time zero, so every memory still starts exactly where Amaranth's simulator starts it.
A memory with any other initial value (a boot ROM) keeps Amaranth's own initialisation. No
public Amaranth API leaves a memory uninitialised, so for the conversion's duration this
replaces the private ``amaranth.back.rtlil.ModuleEmitter.emit_memory`` (one conversion at a
time; pyproject pins Amaranth 0.5, and ``tests/hdl/test_hdl_emit.py`` fails if it stops working).

Every Verilog the package emits for a simulator or for ``nfacep verilog`` goes through here. A
board build does not: ``amaranth.build`` converts the design itself, for Yosys to synthesise,
and there the table's banks are DP16KD instances (``hdl/bram.py``) with no memory
initialisation at all.
"""

from __future__ import annotations

import re
import threading

__all__ = ["verilog", "zero_loops"]

# one conversion at a time: the zero-skipping emitter is installed on Amaranth's class
_CONVERTING = threading.Lock()

# a memory Yosys's write_verilog declared (``reg [W-1:0] NAME [D-1:0];``, NAME possibly an
# escaped identifier, which ends with a space) and did not initialise on the next line
_UNINITIALISED = re.compile(
    r"^(?P<indent>[ \t]*)reg \[(?P<msb>\d+):0\] (?P<name>\\\S+ |[A-Za-z_][\w$]*) "
    r"\[(?P<last>\d+):0\];\n(?!(?P=indent)initial begin\n)",
    re.MULTILINE,
)


def verilog(elaboratable, name: str) -> str:
    """``elaboratable`` as Verilog (module ``name``, no source locations): what Amaranth's
    ``verilog.convert`` gives, but each memory whose rows all start at zero is zeroed by one
    ``initial`` loop instead of one statement per row."""
    from amaranth.back import rtlil
    from amaranth.back import verilog as back

    emitter = rtlil.ModuleEmitter
    amaranths = emitter.emit_memory
    zeroed: list[int] = []

    def emit_memory(self, cell_idx, cell):
        if any(cell.init):
            amaranths(self, cell_idx, cell)
        else:
            zeroed.append(cell.depth)

    with _CONVERTING:
        emitter.emit_memory = emit_memory
        try:
            text = back.convert(elaboratable, name=name, emit_src=False)
        finally:
            emitter.emit_memory = amaranths
    return zero_loops(text, len(zeroed))


def zero_loops(text: str, expected: int) -> str:
    """``text`` (Verilog written by Yosys) with an ``initial`` loop after the declaration of
    each memory it leaves uninitialised, setting every row to zero; there must be
    ``expected`` of them (:class:`RuntimeError` otherwise)."""
    count = 0

    def loop(match: re.Match) -> str:
        nonlocal count
        i = f"nfacep_zero_{count}"
        count += 1
        name, width, last = match["name"], int(match["msb"]) + 1, match["last"]
        pad = match["indent"]
        return (
            f"{match[0]}{pad}integer {i};\n"
            f"{pad}initial for ({i} = 0; {i} <= {last}; {i} = {i} + 1) "
            f"{name}[{i}] = {width}'h0;\n"
        )

    text = _UNINITIALISED.sub(loop, text)
    if count != expected:
        raise RuntimeError(
            f"{expected} memories start at zero but {count} uninitialised memories were "
            "found in Yosys's Verilog (has Amaranth's or Yosys's output changed?)"
        )
    return text
