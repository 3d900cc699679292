"""The Verilog the package emits (``nfacep.hdl.emit``): a memory that starts at zero is zeroed
by one ``initial`` loop, not one statement per row, and still reads zero under Icarus; other
initial contents stay Amaranth's."""

# (no `from __future__ import annotations`: the component's signature is its annotations)

import json
import re
import shutil
import subprocess

import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from nfacep.cli import main
from nfacep.hdl import emit

ROM = [(7 * i + 1) % 256 for i in range(16)]

# a memory initialised row by row, as Yosys writes Amaranth's initial contents (one
# `mem[i] = ...;` statement per row), and the statements
ROW_BY_ROW = re.compile(
    r"reg \[\d+:0\] (\S+) \[\d+:0\];\n\s*initial begin\n((?:\s*\1\[\d+\] = .*\n)+)"
)


class TwoMemories(wiring.Component):
    """A writable memory that starts at zero, and a ROM; both read without a clock."""

    addr: In(4)
    w_en: In(1)
    w_data: In(8)
    zero_data: Out(8)
    rom_data: Out(8)

    def elaborate(self, platform):
        m = Module()
        m.submodules.zeroed = zeroed = Memory(shape=8, depth=16, init=[])
        m.submodules.rom = rom = Memory(shape=8, depth=16, init=ROM)
        wp, rp, rom_rp = (
            zeroed.write_port(),
            zeroed.read_port(domain="comb"),
            rom.read_port(domain="comb"),
        )
        m.d.comb += [
            wp.addr.eq(self.addr),
            wp.data.eq(self.w_data),
            wp.en.eq(self.w_en),
            rp.addr.eq(self.addr),
            rom_rp.addr.eq(self.addr),
            self.zero_data.eq(rp.data),
            self.rom_data.eq(rom_rp.data),
        ]
        return m


TESTBENCH = """
`timescale 1ns/1ps
module tb;
    reg clk = 0;
    reg [3:0] addr = 0;
    reg w_en = 0;
    reg [7:0] w_data = 0;
    wire [7:0] zero_data, rom_data;
    two dut(.clk(clk), .rst(1'b0), .addr(addr), .w_en(w_en), .w_data(w_data),
            .zero_data(zero_data), .rom_data(rom_data));
    integer i;
    initial begin
        #1;
        for (i = 0; i < 16; i = i + 1) begin
            addr = i; #1;
            $display("ROW %0d %b %0d", i, zero_data, rom_data);
        end
        addr = 5; w_data = 8'hab; w_en = 1; #1 clk = 1; #1 clk = 0; w_en = 0; #1;
        $display("WRITTEN %h", zero_data);
        $finish;
    end
endmodule
"""


def test_a_zero_memory_is_zeroed_by_a_loop_and_reads_zero_under_icarus(tmp_path):
    iverilog = shutil.which("iverilog")
    if iverilog is None:
        pytest.fail("iverilog is missing (CI installs it with tools/install-simulators.sh)")
    text = emit.verilog(TwoMemories(), "two")
    # the ROM's 16 rows as Amaranth writes them, the zeroed memory's none: one loop instead
    assert [len(rows.splitlines()) for _, rows in ROW_BY_ROW.findall(text)] == [16]
    assert len(re.findall(r"initial for \(.*<= 15;.*\] = 8'h0;", text)) == 1
    (tmp_path / "two.v").write_text(text)
    (tmp_path / "tb.v").write_text(TESTBENCH)
    out = tmp_path / "sim.vvp"
    subprocess.run(
        [iverilog, "-g2012", "-o", str(out), str(tmp_path / "tb.v"), str(tmp_path / "two.v")],
        check=True,
    )
    run = subprocess.run(["vvp", "-n", str(out)], capture_output=True, text=True, check=True)
    rows = [line.split() for line in run.stdout.splitlines() if line.startswith("ROW")]
    # every row of the zeroed memory reads zero (not x), the ROM its contents
    assert rows == [["ROW", str(i), "00000000", str(ROM[i])] for i in range(16)], run.stdout
    assert "WRITTEN ab" in run.stdout


def test_the_default_engine_verilog_zeroes_its_table_by_loops(tmp_path, capsys):
    """`nfacep verilog` on a bundled query with the default engine (a 65,536-entry table):
    no row of any memory is initialised by a statement of its own."""
    out = tmp_path / "marathon.v"
    assert main(["verilog", "queries/marathon.sql", "-o", str(out)]) == 0
    capsys.readouterr()
    sidecar = json.loads(out.with_suffix(".json").read_text())
    assert sidecar["parameters"]["store"] == "table"
    assert sidecar["parameters"]["partitions"] == 65536
    text = out.read_text()
    assert not ROW_BY_ROW.search(text)
    loops = re.findall(r"initial for \(\w+ = 0; \w+ <= (\d+);", text)
    # the table's banks (and the small FIFOs beside them): 65,536 rows in all at least
    assert sum(int(last) + 1 for last in loops) >= 65536


def test_a_memory_yosys_did_not_declare_as_expected_is_an_error():
    declared = "module m;\n  reg [7:0] mem [15:0];\nendmodule\n"
    assert "<= 15" in emit.zero_loops(declared, 1)
    with pytest.raises(RuntimeError, match="2 memories start at zero but 1"):
        emit.zero_loops(declared, 2)
