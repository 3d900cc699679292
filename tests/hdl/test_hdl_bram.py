# amaranth: UnusedElaboratable=no
"""The registered block-RAM bank: its DP16KD tiling, and the ECP5 form (DP16KD primitives
with the output register, under a behavioural model in tests/verilog/dp16kd.v) against the
portable form (amaranth.lib.memory and a register), cycle by cycle under Icarus."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
from types import SimpleNamespace

import pytest
from amaranth.back import verilog

from nfacep.hdl.bram import (
    DP16KD_SHAPES,
    RegisteredBank,
    dp16kd_blocks,
    dp16kd_groups,
    dp16kd_tiling,
)

TESTS = pathlib.Path(__file__).parents[1]


@pytest.mark.parametrize(
    ("depth", "width", "want"),
    [
        (16384, 10, (16384, 1, 1, 10)),  # deep: one bit per block, no stacking
        (16384, 27, (16384, 1, 1, 27)),  # 27 side by side rather than 24 with eight stacked
        (16384, 40, (16384, 1, 1, 40)),
        (1024, 18, (1024, 18, 1, 1)),
        (2048, 9, (2048, 9, 1, 1)),
        (4, 20, (1024, 18, 1, 2)),
        (3000, 40, (4096, 4, 1, 10)),  # 10 side by side rather than 9 with three stacked
        (3000, 18, (1024, 18, 3, 1)),  # 3 stacked: side by side would take 5
        (100, 5, (2048, 9, 1, 1)),  # one block: the first shape as wide as the word
    ],
)
def test_tiling_takes_the_fewest_blocks(depth, width, want):
    got = dp16kd_tiling(depth, width)
    assert got == want
    d, w, stacked, side = got
    assert stacked * d >= depth and side * w >= width
    fewest = min(-(-depth // dd) * -(-width // ww) for dd, ww in DP16KD_SHAPES)
    assert fewest <= stacked * side <= fewest * 9 / 8
    assert dp16kd_blocks(depth, width) == stacked * side


@pytest.mark.parametrize(
    ("depth", "width", "groups", "want"),
    [
        (16384, 43, 4, [(0, 11), (11, 22), (22, 33), (33, 43)]),  # a bit per block
        (16384, 10, 4, [(0, 3), (3, 5), (5, 8), (8, 10)]),
        (3000, 36, 2, [(0, 18), (18, 36)]),  # 1024 x 18, three stacked, two side by side
        (4096, 7, 2, [(0, 4), (4, 7)]),  # the last block's bits up to the width
        (4, 7, 1, [(0, 7)]),
    ],
)
def test_groups_split_the_blocks_side_by_side(depth, width, groups, want):
    assert dp16kd_groups(depth, width, groups) == want
    assert RegisteredBank(width=width, depth=depth, groups=groups).groups == groups


@pytest.mark.parametrize(("depth", "width", "groups"), [(4, 7, 2), (16384, 10, 11), (64, 10, 0)])
def test_more_groups_than_blocks_side_by_side_are_refused(depth, width, groups):
    with pytest.raises(ValueError, match="Groups must be from 1 to"):
        RegisteredBank(width=width, depth=depth, groups=groups)


TESTBENCH = """
`timescale 1ns/1ps
module tb;
    reg clk = 0;
    always #5 clk = ~clk;
    reg [{ab}:0] r_addr = 0, w_addr = 0;
    reg r_en = 0, w_en = 0;
    reg [{wb}:0] w_data = 0;
    wire [{wb}:0] got, want;{spare_wire}
    bank_ecp5 dut(.clk(clk), .rst(1'b0), {addresses}, .r_en(r_en), .r_data(got),
                  .w_data(w_data), .w_en(w_en){spare_port});
    bank_ref ref(.clk(clk), .rst(1'b0), {addresses}, .r_en(r_en), .r_data(want),
                 .w_data(w_data), .w_en(w_en));
    integer cycle, checked = 0, bad = 0, seed = {seed};
    initial begin
        // write every row first (block RAM has no reset), then mix reads, writes and stalls
        for (cycle = 0; cycle < {depth}; cycle = cycle + 1) begin
            @(negedge clk);
            w_en = 1; w_addr = cycle; w_data = $random(seed);
        end
        for (cycle = 0; cycle < {cycles}; cycle = cycle + 1) begin
            @(negedge clk);
            if (cycle > 4 && (got !== want{spare_check})) begin
                bad = bad + 1;
                if (bad < 5) $display("cycle %0d: got %h want %h", cycle, got, want);
            end
            checked = checked + 1;
            r_en = ($random(seed) & 3) != 0;
            r_addr = {{$random(seed)}} % {depth};
            w_en = ($random(seed) & 1);
            // often the row being read, to cover a write at the edge of its read
            w_addr = ($random(seed) & 1) ? r_addr : {{$random(seed)}} % {depth};
            w_data = $random(seed);
        end
        $display("RESULT checked=%0d bad=%0d", checked, bad);
        $finish;
    end
endmodule
"""


SHAPES = [(64, 10), (3000, 40), (3000, 18), (2048, 9), (4, 20), (8192, 3)]


def address_ports(depth: int, groups: int) -> str:
    """The testbench's address connections: with groups, each group's addresses the
    testbench's offset by a step of its own, reads by another than writes, so that a block
    at another group's addresses reads other data."""
    if groups == 1:
        return ".r_addr(r_addr), .w_addr(w_addr)"
    return ", ".join(
        f".{port}__{g}(({port} + {step * g}) % {depth})"
        for port, step in (("r_addr", 5), ("w_addr", 3))
        for g in range(groups)
    )


@pytest.mark.parametrize(
    ("depth", "width", "stages", "copies", "groups", "spare"),
    # the copies (a register per block and port) on a flat bank and on a stacked one; groups
    # of blocks at addresses of their own: with copies, one bit per block (a direct table
    # spread over the device) and stacked, and without copies, a block per group; a spare
    # copy of some of the row's bits in a third register of their own, with and without
    # copies, and with groups
    [(d, w, stages, False, 1, None) for stages in (2, 3) for d, w in SHAPES]
    + [(64, 10, 3, True, 1, None), pytest.param(3000, 18, 3, True, 1, None, marks=pytest.mark.slow)]
    + [(16384, 10, 3, True, 4, None), (3000, 36, 3, True, 2, None), (4096, 12, 2, False, 3, None)]
    + [(64, 10, 3, True, 1, (2, 9)), (3000, 40, 3, False, 1, (5, 40))]
    + [(3000, 36, 3, True, 2, (4, 30))],
)
def test_ecp5_form_equals_the_portable_form(tmp_path, depth, width, stages, copies, groups, spare):
    iverilog = shutil.which("iverilog")
    if iverilog is None:
        pytest.fail("iverilog is missing (CI installs it with tools/install-simulators.sh)")

    def bank(**extra):
        return RegisteredBank(
            width=width, depth=depth, stages=stages, copies=copies, groups=groups, **extra
        )

    ecp5 = verilog.convert(
        bank(spare=spare), name="bank_ecp5", platform=SimpleNamespace(family="ecp5")
    )
    assert "DP16KD" in ecp5 and '"OUTREG"' in ecp5
    # with copies or a spare copy, registers of their own (kept apart from Yosys)
    assert ("TRELLIS_FF" in ecp5) == (copies or spare is not None)
    portable = verilog.convert(bank(), name="bank_ref")
    assert "DP16KD" not in portable
    (tmp_path / "ecp5.v").write_text(ecp5)
    (tmp_path / "ref.v").write_text(portable)
    # a read at the edge of a write to its row may give either value on silicon; both the
    # model and the portable form give the old one, so every cycle is compared
    (tmp_path / "tb.v").write_text(
        TESTBENCH.format(
            ab=max(0, (depth - 1).bit_length() - 1),
            wb=width - 1,
            depth=depth,
            addresses=address_ports(depth, groups),
            cycles=3000,
            seed=depth + width,
            # the spare copy (ECP5 form) against the reference's row, every cycle
            spare_wire="" if spare is None else f"\n    wire [{spare[1] - spare[0] - 1}:0] spare;",
            spare_port="" if spare is None else ", .r_spare(spare)",
            spare_check="" if spare is None else f" || spare !== want[{spare[1] - 1}:{spare[0]}]",
        )
    )
    out = tmp_path / "sim.vvp"
    subprocess.run(
        [
            iverilog,
            "-g2005",
            "-o",
            str(out),
            str(tmp_path / "tb.v"),
            str(tmp_path / "ecp5.v"),
            str(tmp_path / "ref.v"),
            str(TESTS / "verilog" / "dp16kd.v"),
            str(TESTS / "verilog" / "trellis_ff.v"),
        ],
        check=True,
    )
    run = subprocess.run(["vvp", "-n", str(out)], capture_output=True, text=True, check=True)
    result = [line for line in run.stdout.splitlines() if line.startswith("RESULT")]
    assert result == ["RESULT checked=3000 bad=0"], run.stdout[-2000:]


@pytest.mark.parametrize(
    ("stages", "spare"), [(2, (0, 4)), (3, (4, 4)), (3, (0, 11)), (3, (-1, 3))]
)
def test_spare_copy_needs_three_stages_and_bits_of_the_row(stages, spare):
    with pytest.raises(ValueError, match="spare copy"):
        RegisteredBank(width=10, depth=64, stages=stages, spare=spare)
